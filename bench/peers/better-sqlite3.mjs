// better-sqlite3: synchronous, runs on the event loop. Statements are prepared once and
// reused; batches use its `transaction()` wrapper (created once per statement).
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
let Database;

export const name = 'better-sqlite3';
export const sync = true;

export async function load() {
  Database = require('better-sqlite3');
  const probe = new Database(':memory:');
  const sqlite = probe.prepare('SELECT sqlite_version() AS v').get().v;
  probe.close();
  return { version: require('better-sqlite3/package.json').version, sqlite };
}

export async function open(path) {
  const db = new Database(path);
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  const txCache = new WeakMap();
  const prepare = (sql) => {
    const s = db.prepare(sql);
    return { sql, all: (p) => s.all(p), get: (p) => s.get(p), run: (p) => s.run(p), iterate: (p) => s.iterate(p) };
  };
  const tx = {
    run: (h, p) => h.run(p),
    get: (h, p) => h.get(p),
    batch: (h, rows) => {
      for (let i = 0; i < rows.length; i++) h.run(rows[i]);
    },
  };
  const insertFn = db.transaction((h, rows) => {
    for (let i = 0; i < rows.length; i++) h.run(rows[i]);
  });
  return {
    info: { pragmas: { journal_mode: db.pragma('journal_mode', { simple: true }), synchronous: db.pragma('synchronous', { simple: true }) } },
    exec: (sql) => db.exec(sql),
    prepare,
    json: (h, p) => JSON.stringify(h.all(p)),
    insertBatch: (h, rows) => insertFn(h, rows),
    // The transaction function is built once per callback, as better-sqlite3 recommends.
    transaction(fn) {
      let t = txCache.get(fn);
      if (!t) txCache.set(fn, (t = db.transaction(() => fn(tx))));
      return t();
    },
    fn: (name, f) => db.function(name, f),
    close: () => db.close(),
  };
}
