// Live queries, part 3: errors (first run and re-runs), schema changes, the lifecycle of a
// stream (unsubscribe, break, abort, close, garbage collection, process lifetime) and
// writes made by another process.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readdirSync, readlinkSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { Database, SqliteError } from '../dist/index.mjs';
import { openTemp, tempDir } from './fixtures/helpers.mjs';
import {
  EMIT_MS,
  Recorder,
  assertQuiet,
  emissionWhere,
  liveStats,
  nextEmission,
  nextError,
  nextWithin,
  recordFirst,
  sleep,
  within,
  settle,
} from './fixtures/live-helpers.mjs';

const CHILD = fileURLToPath(new URL('./fixtures/live-child.mjs', import.meta.url));
const WRITER = fileURLToPath(new URL('./fixtures/live-writer.mjs', import.meta.url));

async function fileDb(t, setup) {
  const db = await openTemp(t);
  if (setup) await db.execute(setup);
  await settle(db);
  return db;
}

/** Runs a fixture in a child Node process; kills it after `ms`. */
function runChild(args, ms = 5000) {
  return new Promise((resolve) => {
    const t0 = performance.now();
    const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill('SIGKILL');
    }, ms);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      const results = stdout
        .split('\n')
        .filter((l) => l.startsWith('result '))
        .map((l) => JSON.parse(l.slice(7)));
      resolve({ code, signal, timedOut, stdout, stderr, results, ms: performance.now() - t0 });
    });
  });
}

// ---- errors ----

test('invalid SQL: the first next() rejects and the stream ends', async (t) => {
  const db = await fileDb(t, 'CREATE TABLE t(x)');
  const live = db.stream('SELEC * FROM t');
  const it = live[Symbol.asyncIterator]();
  const err = await nextWithin(it).then(
    () => assert.fail('expected a rejection'),
    (e) => e,
  );
  assert.ok(err instanceof SqliteError, `got ${err}`);
  assert.equal(err.code, 'SQLITE_ERROR');
  assert.equal(live.ended, true);
  assert.deepStrictEqual(await nextWithin(it), { done: true, value: undefined });
  assert.equal(liveStats(db).groups, 0, 'a failed stream holds nothing');
});

test('a failing first run calls the error callback and ends the stream (subscribe)', async (t) => {
  const db = await fileDb(t, 'CREATE TABLE t(x)');
  for (const [sql, code] of [
    ['SELECT * FROM missing_table', 'SQLITE_ERROR'],
    ['SELECT nope FROM t', 'SQLITE_ERROR'],
    ['INSERT INTO t VALUES (1)', undefined], // a write is not a query
  ]) {
    const live = db.stream(sql);
    const rec = new Recorder(live);
    const err = await nextError(rec);
    assert.ok(err instanceof Error, `${sql}: ${err}`);
    if (code) assert.equal(err.code, code, sql);
    assert.equal(rec.count, 0, `${sql}: no rows`);
    assert.equal(live.ended, true, `${sql}: ended`);
  }
  assert.deepStrictEqual(await db.select('SELECT * FROM t'), [], 'the INSERT never ran');
  assert.equal(liveStats(db).groups, 0);
});

test('a failing re-run (RENAME COLUMN) delivers the error; the stream recovers when renamed back', async (t) => {
  const db = await fileDb(t, "CREATE TABLE t(id INTEGER PRIMARY KEY, title TEXT); INSERT INTO t(title) VALUES ('a')");
  const live = db.stream('SELECT id, title FROM t ORDER BY id');
  const rec = await recordFirst(live);
  assert.deepStrictEqual(rec.last, [{ id: 1, title: 'a' }]);

  const failed = nextError(rec);
  await db.execute('ALTER TABLE t RENAME COLUMN title TO name');
  const err = await failed;
  assert.ok(err instanceof SqliteError, `got ${err}`);
  assert.match(err.message, /title/);
  assert.equal(live.ended, false, 'a failing re-run does not end the stream');

  // Writes while it is broken: still failing (or quiet), never rows.
  await db.execute("INSERT INTO t(name) VALUES ('b')");
  await sleep(50);
  assert.equal(rec.count, 1);

  const back = nextEmission(rec);
  await db.execute('ALTER TABLE t RENAME COLUMN name TO title');
  assert.deepStrictEqual(await back, [{ id: 1, title: 'a' }, { id: 2, title: 'b' }]);

  // And it keeps working afterwards.
  const next = nextEmission(rec);
  await db.execute("UPDATE t SET title = 'A' WHERE id = 1");
  assert.deepStrictEqual(await next, [{ id: 1, title: 'A' }, { id: 2, title: 'b' }]);
  rec.unsubscribe();
});

test('a failing re-run rejects the pending next(); after the fix, next() gives rows again', async (t) => {
  const db = await fileDb(t, "CREATE TABLE t(id INTEGER PRIMARY KEY, title TEXT); INSERT INTO t(title) VALUES ('a')");
  const live = db.stream('SELECT title FROM t ORDER BY id');
  const it = live[Symbol.asyncIterator]();
  assert.deepStrictEqual((await nextWithin(it)).value, [{ title: 'a' }]);

  const pending = it.next();
  await db.execute('ALTER TABLE t RENAME COLUMN title TO name');
  await assert.rejects(within(pending, EMIT_MS, 'the rejected next()'), SqliteError);
  assert.equal(live.ended, false, 'a failing re-run does not end the stream');

  await db.execute('ALTER TABLE t RENAME COLUMN name TO title');
  assert.deepStrictEqual(await nextWithin(it, EMIT_MS, 'rows after the fix'), { done: false, value: [{ title: 'a' }] });
  // And it keeps following writes.
  const next = it.next();
  await db.execute("INSERT INTO t(title) VALUES ('b')");
  assert.deepStrictEqual(await within(next, EMIT_MS, 'rows after a write'), { done: false, value: [{ title: 'a' }, { title: 'b' }] });
  await it.return();
  assert.equal(liveStats(db).groups, 0);
});

// ---- schema changes ----

test('ALTER TABLE ADD COLUMN, then a write: SELECT * emits rows with the new column', async (t) => {
  const db = await fileDb(t, "CREATE TABLE t(id INTEGER PRIMARY KEY, a TEXT); INSERT INTO t(a) VALUES ('x')");
  const star = await recordFirst(db.stream('SELECT * FROM t ORDER BY id'));
  const narrow = await recordFirst(db.stream('SELECT id, a FROM t ORDER BY id'));
  assert.deepStrictEqual(star.last, [{ id: 1, a: 'x' }]);

  await db.execute('ALTER TABLE t ADD COLUMN b TEXT');
  await db.execute("INSERT INTO t(a, b) VALUES ('y', 'new')");
  const rows = await emissionWhere(star, (r) => r.length === 2 && 'b' in r[0], 1000, 'the row inserted after ADD COLUMN');
  assert.deepStrictEqual(rows, [{ id: 1, a: 'x', b: null }, { id: 2, a: 'y', b: 'new' }]);
  assert.deepStrictEqual(Object.keys(rows[0]), ['id', 'a', 'b']);

  const narrowRows = await emissionWhere(narrow, (r) => r.length === 2, 1000, 'the narrow stream');
  assert.deepStrictEqual(narrowRows, [{ id: 1, a: 'x' }, { id: 2, a: 'y' }]);

  // Column-level tracking uses the new column list: an UPDATE of b only does not touch
  // the narrow stream, and does reach SELECT *.
  const next = nextEmission(star, 1000);
  await db.execute("UPDATE t SET b = 'changed' WHERE id = 1");
  assert.deepStrictEqual((await next)[0], { id: 1, a: 'x', b: 'changed' });
  await assertQuiet(narrow);
  star.unsubscribe();
  narrow.unsubscribe();
});

test('ADD COLUMN with a DEFAULT: the re-run caused by the DDL itself emits the new column', async (t) => {
  // One reader, so the stream's statement is certainly cached on the connection that re-runs it.
  const db = await openTemp(t, { readers: 1 });
  await db.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, a TEXT); INSERT INTO t(a) VALUES ('x')");
  await settle(db);
  const rec = await recordFirst(db.stream('SELECT * FROM t'));
  const next = nextEmission(rec, 1000);
  await db.execute("ALTER TABLE t ADD COLUMN b TEXT DEFAULT 'new'");
  assert.deepStrictEqual(await next, [{ id: 1, a: 'x', b: 'new' }]);
  rec.unsubscribe();
});

test('a stream started after ADD COLUMN is re-run by an UPDATE of the new column', async (t) => {
  const db = await openTemp(t, { readers: 1 });
  await db.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, a TEXT); INSERT INTO t(a) VALUES ('x')");
  await db.select('SELECT a FROM t'); // the reader has read the schema before the change
  await db.execute('ALTER TABLE t ADD COLUMN b TEXT');
  await settle(db);
  const rec = await recordFirst(db.stream('SELECT * FROM t'));
  assert.deepStrictEqual(rec.last, [{ id: 1, a: 'x', b: null }]);
  const next = nextEmission(rec, 1000);
  await db.execute("UPDATE t SET b = 'changed'");
  assert.deepStrictEqual(await next, [{ id: 1, a: 'x', b: 'changed' }]);
  rec.unsubscribe();
});

// ---- lifecycle ----

test('the last unsubscribe removes the stream', async (t) => {
  const db = await fileDb(t, 'CREATE TABLE t(x)');
  const a = await recordFirst(db.stream('SELECT * FROM t'));
  const b = await recordFirst(db.stream('SELECT * FROM t'));
  assert.equal(liveStats(db).groups, 1);
  a.unsubscribe();
  a.unsubscribe(); // idempotent
  assert.equal(liveStats(db).groups, 1);
  b.unsubscribe();
  assert.equal(liveStats(db).groups, 0);
  const runs = liveStats(db).reruns;
  await db.execute('INSERT INTO t VALUES (1)');
  await assertQuiet(a);
  assert.equal(b.count, 1);
  assert.equal(liveStats(db).reruns, runs, 'nothing re-runs after the last unsubscribe');
});

test('break out of for await removes the stream', async (t) => {
  const db = await fileDb(t, 'CREATE TABLE t(x)');
  const live = db.stream('SELECT count(*) AS n FROM t');
  setTimeout(() => db.execute('INSERT INTO t VALUES (1)'), 10);
  for await (const rows of live) {
    assert.equal(liveStats(db).groups, 1);
    if (rows[0].n === 1) break;
  }
  assert.equal(liveStats(db).groups, 0);
  assert.equal(live.ended, false, 'break frees the stream; it can be read again');
  // Reading it again starts it afresh.
  for await (const rows of live) {
    assert.deepStrictEqual(rows, [{ n: 1 }]);
    break;
  }
  assert.equal(liveStats(db).groups, 0);
});

test('abort via signal ends a waiting for-await loop and removes the stream', async (t) => {
  const db = await fileDb(t, 'CREATE TABLE t(x)');
  const ac = new AbortController();
  const live = db.stream('SELECT * FROM t', [], { signal: ac.signal });
  const seen = [];
  const loop = (async () => {
    for await (const rows of live) seen.push(rows);
    return 'finished';
  })();
  await within((async () => { while (seen.length === 0) await sleep(5); })(), EMIT_MS, 'the first emission');
  assert.equal(liveStats(db).groups, 1);
  ac.abort();
  assert.equal(await within(loop, EMIT_MS, 'the loop to finish'), 'finished');
  assert.equal(live.ended, true);
  assert.equal(liveStats(db).groups, 0);
  await db.execute('INSERT INTO t VALUES (1)');
  await sleep(50);
  assert.deepStrictEqual(seen, [[]]);
});

test('a stream never read never runs and holds nothing, before and after close()', async (t) => {
  const dir = await tempDir(t);
  const db = await Database.open(join(dir, 'never.db'));
  await db.execute('CREATE TABLE t(x)');
  const live = db.stream('SELECT * FROM t');
  await db.execute('INSERT INTO t VALUES (1)');
  await sleep(50);
  assert.deepStrictEqual(liveStats(db), { groups: 0, reruns: 0 }, 'an unread stream never ran');
  await db.close();
  assert.equal(live.current, undefined);
  // Reading it now cannot start anything: it finishes or rejects, and never hangs.
  const r = await nextWithin(live[Symbol.asyncIterator]()).catch((e) => e);
  assert.ok(r?.done === true || r?.code === 'ERR_QUIETSQLITE_CLOSED', `got ${JSON.stringify(r)}`);
});

test('close() also ends a stream that was never read (ended, iterator done)', async (t) => {
  const dir = await tempDir(t);
  const db = await Database.open(join(dir, 'never-ended.db'));
  const live = db.stream('SELECT 1 AS x');
  await db.close();
  assert.equal(live.ended, true, 'close() ends every stream, read or not');
  const r = await nextWithin(live[Symbol.asyncIterator]()).catch((e) => e);
  assert.deepStrictEqual(r, { done: true, value: undefined }, `after close the iterator finishes, got ${r}`);
  let called;
  live.subscribe(() => {}, (err) => (called = err));
  await sleep(10);
  assert.equal(called?.code, 'ERR_QUIETSQLITE_CLOSED', 'subscribing to an ended stream calls onError');
});

test('close() ends every stream: waiting loops finish, subscriptions stop', async (t) => {
  const dir = await tempDir(t);
  const db = await Database.open(join(dir, 'close.db'));
  await db.execute('CREATE TABLE t(x)');
  const loops = [];
  const lives = [];
  for (let i = 0; i < 3; i++) {
    const live = db.stream('SELECT count(*) AS n, ? AS i FROM t', [i]);
    lives.push(live);
    loops.push((async () => {
      let n = 0;
      for await (const _ of live) n++;
      return n;
    })());
  }
  const sub = await recordFirst(db.stream('SELECT * FROM t'));
  await within((async () => { while (lives.some((l) => l.current === undefined)) await sleep(5); })(), EMIT_MS, 'first emissions');
  await db.close();
  assert.deepStrictEqual(await within(Promise.all(loops), EMIT_MS, 'the loops to finish'), [1, 1, 1]);
  for (const l of [...lives, sub.live]) assert.equal(l.ended, true);
  assert.deepStrictEqual(sub.errors, [], 'closing is not an error for subscribers');
});

// ---- garbage collection and process lifetime (child processes) ----

test('an abandoned iterator is unsubscribed when garbage collected', async (t) => {
  const r = await runChild(['--expose-gc', CHILD, 'gc-abandoned']);
  t.diagnostic(`child: ${JSON.stringify(r.results)} ${r.stderr.trim()}`);
  assert.equal(r.code, 0, r.stderr);
  assert.deepStrictEqual(r.results.length, 1);
  const [{ before, after }] = r.results;
  assert.equal(before, 1);
  assert.equal(after, 0, 'the collected stream must release its native group');
});

test('a for-await loop nothing else references is kept while it waits: later writes and close() reach it', async (t) => {
  // Such loops were collected with their stream while they waited in next(), and stopped
  // for good: the next write no longer reached them.
  const r = await runChild(['--expose-gc', CHILD, 'gc-loop'], 5000);
  t.diagnostic(`child: ${JSON.stringify(r.results)}`);
  assert.equal(r.code, 0, r.stderr);
  assert.deepStrictEqual(r.results, [{ seen: [0, 1, 2, 'ended'] }]);
});

test('an iterate() loop nothing else references is kept while it waits for rows', async (t) => {
  const r = await runChild(['--expose-gc', CHILD, 'gc-iterate'], 5000);
  t.diagnostic(`child: ${JSON.stringify(r.results)}`);
  assert.equal(r.code, 0, r.stderr);
  assert.deepStrictEqual(r.results, [{ seen: [2000000, 'ended'] }]);
});

test('process lifetime: a callback subscription alone does not keep Node alive; a pending next() does', async (t) => {
  const [cb, it] = await Promise.all([runChild([CHILD, 'callback-only']), runChild([CHILD, 'pending-next'])]);
  t.diagnostic(`callback-only exited after ${cb.ms.toFixed(0)} ms; pending-next after ${it.ms.toFixed(0)} ms`);
  // The first run itself keeps the process alive long enough to deliver the first rows.
  assert.equal(cb.timedOut, false, 'an idle callback subscription must let the process exit');
  assert.equal(cb.code, 0, cb.stderr);
  assert.deepStrictEqual(cb.results, [{ rows: [{ n: 0 }] }]);
  assert.equal(it.timedOut, false);
  assert.equal(it.code, 0, it.stderr);
  assert.deepStrictEqual(it.results, [{ rows: [] }, { rows: [{ v: 42 }] }, 'loop done']);
});

// ---- other processes ----

test('writes from another process to the same file are seen within 1 s', async (t) => {
  const dir = await tempDir(t);
  const file = join(dir, 'shared.db');
  const db = await Database.open(file);
  t.after(() => db.close());
  await db.execute('CREATE TABLE t(id INTEGER PRIMARY KEY, v INTEGER)');

  const child = spawn(process.execPath, [WRITER, file], { stdio: ['pipe', 'pipe', 'inherit'] });
  t.after(() => child.kill());
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  assert.equal((await within(lines.next(), 5000, 'the writer to start')).value, 'ready');

  // The writer is ready before the stream starts, so the first write can land right after
  // the first emission (the engine polls for other processes' commits every 50 ms).
  const rec = await recordFirst(db.stream('SELECT count(*) AS n, max(v) AS m FROM t'));
  assert.deepStrictEqual(rec.last, [{ n: 0, m: null }]);
  const latencies = [];
  for (let v = 1; v <= 5; v++) {
    const t0 = performance.now();
    child.stdin.write(`insert ${v}\n`);
    await emissionWhere(rec, (r) => r[0].m === v, 1000, `the other process's write #${v}`);
    latencies.push(performance.now() - t0);
    assert.equal((await within(lines.next(), 1000, 'the writer ack')).value, `ok ${v}`);
    if (v === 2) await sleep(120); // also after an idle period
  }
  t.diagnostic(`cross-process latency (ms): ${latencies.map((x) => x.toFixed(1)).join(', ')}`);
  assert.deepStrictEqual(rec.last, [{ n: 5, m: 5 }]);
  child.stdin.end('exit\n');
  await within(new Promise((r) => child.once('exit', r)), 5000, 'the writer to exit');
  rec.unsubscribe();
});

test('a commit by another connection while our writer is busy, right after the first run, is seen', async (t) => {
  const dir = await tempDir(t);
  const file = join(dir, 'busy.db');
  const db = await Database.open(file);
  t.after(() => db.close());
  await db.execute('CREATE TABLE t(id INTEGER PRIMARY KEY, v INTEGER)');
  const other = await Database.open(file); // another connection, as another process would be
  t.after(() => other.close());
  let rec;
  // A deferred transaction that only reads holds our writer (its queue), not the file: the
  // other connection can commit, and our writer's check for other commits waits meanwhile.
  await db.transaction(async (tx) => {
    await tx.select('SELECT 1');
    rec = await recordFirst(db.stream('SELECT count(*) AS n FROM t'));
    await other.execute('INSERT INTO t(v) VALUES (1)');
  }, { mode: 'deferred' });
  assert.deepStrictEqual(rec.emissions[0], [{ n: 0 }]);
  await emissionWhere(rec, (r) => r[0].n === 1, 1000, 'the other connection\'s commit');
  rec.unsubscribe();
});

test('a read-only database sees commits made through another connection', async (t) => {
  const dir = await tempDir(t);
  const file = join(dir, 'ro.db');
  const writer = await Database.open(file);
  t.after(() => writer.close());
  await writer.execute('CREATE TABLE t(id INTEGER PRIMARY KEY, v INTEGER)');
  const reader = await Database.open(file, { readonly: true });
  t.after(() => reader.close());

  const rec = await recordFirst(reader.stream('SELECT count(*) AS n FROM t'));
  const latencies = [];
  for (let n = 1; n <= 3; n++) {
    const t0 = performance.now();
    await writer.execute('INSERT INTO t(v) VALUES (?)', [n]);
    await emissionWhere(rec, (r) => r[0].n === n, 1000, `count ${n} on the read-only database`);
    latencies.push(performance.now() - t0);
  }
  t.diagnostic(`read-only poll latency (ms): ${latencies.map((x) => x.toFixed(1)).join(', ')}`);
  rec.unsubscribe();
});

test("close() of a read-only database resolves after its live queries' own connection closed", async (t) => {
  // The live thread of a read-only database watches the file through a connection of its
  // own, opened at its first poll; close() did not wait for it. A slow open (SQLCipher's
  // key derivation) made the window wide enough to see.
  const dir = await tempDir(t);
  const file = join(dir, 'ro-close.db');
  const key = { encryptionKey: 'a passphrase', cipher: 'sqlcipher' };
  const w = await Database.open(file, key);
  await w.execute('CREATE TABLE t(x)');
  await w.close();
  const openOnFile = () =>
    readdirSync('/proc/self/fd').filter((fd) => {
      try {
        return readlinkSync(`/proc/self/fd/${fd}`).startsWith(file);
      } catch {
        return false;
      }
    }).length;
  for (const wait of [45, 55, 65, 80, 120, 200]) {
    const db = await Database.open(file, { ...key, readonly: true, readers: 1 });
    const rec = await recordFirst(db.stream('SELECT count(*) AS n FROM t'));
    await sleep(wait);
    await db.close();
    rec.unsubscribe();
    assert.equal(openOnFile(), 0, `a descriptor of the file is open once close() resolved (${wait} ms)`);
  }
});

test('a read-only database follows a view that another connection redefines', async (t) => {
  // A read-only database re-runs every live query on any commit it sees (docs/live-queries.md),
  // so the dependencies derived under the old definition must not keep it on the old table.
  const dir = await tempDir(t);
  const file = join(dir, 'ro-view.db');
  const writer = await Database.open(file);
  t.after(() => writer.close());
  await writer.execute('CREATE TABLE old(x); CREATE TABLE new(x); INSERT INTO old VALUES (1); CREATE VIEW v AS SELECT x FROM old');
  const reader = await Database.open(file, { readonly: true });
  t.after(() => reader.close());
  const rec = await recordFirst(reader.stream('SELECT count(*) AS n FROM v'));
  assert.deepStrictEqual(rec.emissions[0], [{ n: 1 }]);
  await writer.execute('DROP VIEW v; CREATE VIEW v AS SELECT x FROM new');
  await emissionWhere(rec, (r) => r[0].n === 0, 1000, 'the redefined view');
  await writer.execute('INSERT INTO new VALUES (1), (2), (3)');
  await emissionWhere(rec, (r) => r[0].n === 3, 1000, 'a write to the view\'s new table');
  rec.unsubscribe();
});

test('a parameter getter that closes the database while a stream starts: next() is done, onError is told', async (t) => {
  // The stream registered after close() had ended every subscription: its next() never
  // settled, and a callback heard nothing.
  for (const consumer of ['iterator', 'callback']) {
    const dir = await tempDir(t);
    const db = await Database.open(join(dir, 'g.db'));
    await db.execute('CREATE TABLE t (x)');
    let closing;
    const live = db.stream('SELECT count(*) AS n FROM t WHERE x IS NOT :x', {
      get x() {
        closing ??= db.close();
        return 1;
      },
    });
    let outcome;
    if (consumer === 'iterator') {
      outcome = await Promise.race([live[Symbol.asyncIterator]().next(), new Promise((r) => setTimeout(() => r('hung'), 2000))]);
      assert.deepEqual(outcome, { done: true, value: undefined });
    } else {
      outcome = await Promise.race([new Promise((r) => live.subscribe(() => r('rows'), (e) => r(e.code))), new Promise((r) => setTimeout(() => r('hung'), 2000))]);
      assert.equal(outcome, 'ERR_QUIETSQLITE_CLOSED');
    }
    await closing;
    assert.equal(live.ended, true);
  }
});

test('streams made with a long-lived signal are collected once nobody reads them; their abort listeners go too', async (t) => {
  const { getEventListeners } = await import('node:events');
  const { collectGarbage } = await import('./fixtures/helpers.mjs');
  const db = await openTemp(t);
  await db.execute('CREATE TABLE t (x)');
  const signal = new AbortController().signal;
  // In a function of its own: nothing of this frame may keep the last stream.
  const readOnceAndLeave = async () => {
    const it = db.stream('SELECT count(*) AS n FROM t', [], { signal })[Symbol.asyncIterator]();
    await it.next();
    await it.return();
  };
  for (let i = 0; i < 50; i++) await readOnceAndLeave();
  assert.equal(getEventListeners(signal, 'abort').length, 50);
  // Finalization callbacks run on later turns of the event loop.
  for (let i = 0; i < 20 && getEventListeners(signal, 'abort').length > 0; i++) {
    await collectGarbage();
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  assert.equal(getEventListeners(signal, 'abort').length, 0);
});

test('a for-await loop over a stream with a signal, referenced by nothing else, still ends when the signal aborts', async (t) => {
  // A review of the weak abort listener: the waiting loop and its stream were collected
  // together, and the abort never ended the loop (its finally never ran).
  const { collectGarbage } = await import('./fixtures/helpers.mjs');
  const db = await openTemp(t);
  await db.execute('CREATE TABLE t (x)');
  const ac = new AbortController();
  const seen = [];
  let firstRows;
  const first = new Promise((resolve) => (firstRows = resolve));
  (async () => {
    try {
      for await (const rows of db.stream('SELECT count(*) AS n FROM t', [], { signal: ac.signal })) {
        seen.push(rows[0].n);
        firstRows();
      }
      seen.push('ended');
    } finally {
      seen.push('finally');
    }
  })();
  await first;
  for (let i = 0; i < 3; i++) {
    await collectGarbage();
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  ac.abort();
  for (let i = 0; i < 100 && !seen.includes('finally'); i++) await new Promise((resolve) => setTimeout(resolve, 10));
  assert.deepEqual(seen, [0, 'ended', 'finally']);
});

test('a stream whose first run fails reads as ended inside its onError; a lone Buffer as params throws at stream()', async (t) => {
  const db = await openTemp(t);
  const live = db.stream('SELECT * FROM no_such_table');
  const seen = await new Promise((resolve) => live.subscribe(() => resolve('rows'), () => resolve(live.ended)));
  assert.equal(seen, true, 'ended is true inside onError');
  assert.equal(live.ended, true);
  // A later failure does not end the stream, and does not read as ended.
  await db.execute('CREATE TABLE t(x TEXT)');
  await db.execute("INSERT INTO t VALUES ('{}')");
  const later = db.stream("SELECT json_extract(x, '$.a') AS a FROM t");
  const states = [];
  const first = new Promise((resolve) => later.subscribe(resolve, (e) => states.push(later.ended, e.code)));
  await first;
  await db.execute("INSERT INTO t VALUES ('not json')");
  for (const deadline = Date.now() + 10_000; states.length < 2 && Date.now() < deadline; ) {
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  assert.deepEqual(states, [false, 'SQLITE_ERROR']);
  assert.equal(later.ended, false);
  later.end();
  for (const params of [Buffer.from('ab'), new Uint8Array(2), new DataView(new ArrayBuffer(2))]) {
    assert.throws(() => db.stream('SELECT ? AS a', params), TypeError);
    assert.throws(() => db.iterate('SELECT ? AS a', params), TypeError);
    await assert.rejects(db.select('SELECT ? AS a', params), /a lone Buffer needs wrapping in an array/);
  }
});
