// sqlite3 (node-sqlite3): the classic asynchronous driver; every call is a hop to the libuv
// thread pool. Statements are prepared once and reused; "in flight" work gets one statement
// per slot (a statement runs its calls one at a time). Its `change` event (SQLite's update
// hook) drives the naive live-query baseline: re-run every watcher on every change.
import { createRequire } from 'node:module';
import { sameRows } from '../lib/common.mjs';

const require = createRequire(import.meta.url);
let sqlite3;

export const name = 'sqlite3';
export const sync = false;

export async function load() {
  sqlite3 = require('sqlite3');
  return { version: require('sqlite3/package.json').version, sqlite: sqlite3.VERSION };
}

const cb = (resolve, reject) => (err, v) => (err ? reject(err) : resolve(v));

export async function open(path) {
  const db = await new Promise((resolve, reject) => {
    const d = new sqlite3.Database(path, (err) => (err ? reject(err) : resolve(d)));
  });
  const exec = (sql) => new Promise((resolve, reject) => db.exec(sql, cb(resolve, reject)));
  const dbGet = (sql) => new Promise((resolve, reject) => db.get(sql, cb(resolve, reject)));
  await exec('PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;');
  const statements = new Set();

  const prepare = (sql) => {
    const s = db.prepare(sql);
    statements.add(s);
    return {
      sql,
      all: (p) => new Promise((resolve, reject) => s.all(p, cb(resolve, reject))),
      get: (p) => new Promise((resolve, reject) => s.get(p, cb(resolve, reject))),
      run: (p) =>
        new Promise((resolve, reject) =>
          s.run(p, function done(err) {
            if (err) reject(err);
            else resolve({ changes: this.changes, lastInsertRowid: this.lastID });
          }),
        ),
      // Queue every row without waiting in JS; resolves when the last one has run.
      runMany(rows) {
        if (rows.length === 0) return Promise.resolve();
        return new Promise((resolve, reject) => {
          let failed = null;
          const onErr = (err) => {
            if (err && !failed) failed = err;
          };
          for (let i = 0; i < rows.length - 1; i++) s.run(rows[i], onErr);
          s.run(rows[rows.length - 1], (err) => (err || failed ? reject(err || failed) : resolve()));
        });
      },
      finalize: () => new Promise((resolve) => s.finalize(() => resolve(statements.delete(s)))),
    };
  };
  const begin = prepare('BEGIN');
  const commit = prepare('COMMIT');
  const rollback = prepare('ROLLBACK');
  const tx = { run: (h, p) => h.run(p), get: (h, p) => h.get(p), batch: (h, rows) => h.runMany(rows) };
  const transaction = async (fn) => {
    await begin.run([]);
    try {
      const r = await fn(tx);
      await commit.run([]);
      return r;
    } catch (err) {
      await rollback.run([]).catch(() => {});
      throw err;
    }
  };

  // Naive live queries: on every change event, every watcher re-runs its query (one
  // statement each); a watcher already running just re-runs once more when it finishes.
  // Emits only when the rows differ, so "must not emit" cases behave like quietsqlite's.
  const watchers = new Set();
  let pending = 0;
  let idleWaiters = [];
  const onChange = () => {
    for (const w of watchers) w.invalidate();
  };
  const stream = (sql, params, onRows, onError) => {
    if (watchers.size === 0) db.on('change', onChange);
    const h = prepare(sql);
    const w = {
      running: false,
      again: false,
      closed: false,
      last: undefined,
      invalidate() {
        if (this.closed) return;
        if (this.running) this.again = true;
        else this.run();
      },
      run() {
        this.running = true;
        pending++;
        h.all(params).then(
          (rows) => this.done(null, rows),
          (err) => this.done(err),
        );
      },
      done(err, rows) {
        pending--;
        this.running = false;
        if (!this.closed) {
          if (err) onError?.(err);
          else if (!sameRows(this.last, rows)) {
            this.last = rows;
            onRows(rows);
          }
          if (this.again) {
            this.again = false;
            this.run();
          }
        }
        if (pending === 0) {
          const ws = idleWaiters;
          idleWaiters = [];
          for (const r of ws) r();
        }
      },
    };
    watchers.add(w);
    w.run();
    return () => {
      if (w.closed) return;
      w.closed = true;
      watchers.delete(w);
      if (watchers.size === 0) db.removeListener('change', onChange);
      h.finalize();
    };
  };
  // Resolves once no watcher query is running (change events arrive asynchronously, so
  // callers give the loop a few turns first).
  const liveIdle = () => (pending === 0 ? Promise.resolve() : new Promise((r) => idleWaiters.push(r)));

  return {
    info: { pragmas: { journal_mode: (await dbGet('PRAGMA journal_mode')).journal_mode, synchronous: (await dbGet('PRAGMA synchronous')).synchronous } },
    exec,
    prepare,
    lanes: (sql, n) => Array.from({ length: n }, () => prepare(sql)),
    json: (h, p) => h.all(p).then((rows) => JSON.stringify(rows)),
    insertBatch: (h, rows) => transaction(() => h.runMany(rows)),
    transaction,
    stream,
    liveIdle,
    async close() {
      await Promise.all([...statements].map((s) => new Promise((r) => s.finalize(r))));
      await new Promise((resolve, reject) => db.close(cb(resolve, reject)));
    },
  };
}
