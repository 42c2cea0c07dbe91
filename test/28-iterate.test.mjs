// db.iterate() (issue 9): rows in chunks with backpressure, one reader and one snapshot per
// iterator, and every way an iterator ends releasing its reader (break, return(), a throw in
// the loop, signal, timeout, close, force close, rekey, garbage collection, Worker exit).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { Worker } from 'node:worker_threads';
import { getEventListeners } from 'node:events';
import { Database, SqliteError } from '../dist/index.mjs';
import { exitIfStuck, scratch, sleep, within } from './fixtures/tx-helpers.mjs';

const tmp = scratch('iterate28');
exitIfStuck();
const STEPPED = Symbol.for('quietsqlite.iterateStepped');
const CLOSED = 'ERR_QUIETSQLITE_CLOSED';
/** Rows that come very slowly: one per ten million steps of a counter. */
const SLOW = 'WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) SELECT x FROM c WHERE x % 10000000 = 0';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc');

async function withRows(n, options = { readers: 2 }) {
  const db = await tmp.open(undefined, options);
  await db.execute('CREATE TABLE t(x INTEGER, s TEXT, b BLOB)');
  await db.execute(
    "WITH RECURSIVE c(v) AS (SELECT 1 UNION ALL SELECT v+1 FROM c WHERE v < ?) INSERT INTO t SELECT v, 'row ' || v, CASE WHEN v % 3 = 0 THEN randomblob(4) END FROM c",
    [n],
  );
  return db;
}

async function collect(it) {
  const out = [];
  for await (const r of it) out.push(r);
  return out;
}

/** Waits until the database reports `busy` readers busy (the reader ends asynchronously). */
async function readersBusy(db, busy) {
  const until = Date.now() + 3000;
  for (;;) {
    const d = await db.diagnostics();
    if (d.readersBusy === busy || Date.now() > until) return d.readersBusy;
    await sleep(5);
  }
}

test('iterate yields the rows and values select gives, as objects or arrays, at any chunk size', async () => {
  const db = await withRows(1000);
  const sql = 'SELECT x, s, b, x * 1.5 AS f, NULL AS n FROM t WHERE x > ? ORDER BY x';
  const expected = await db.select(sql, [10]);
  assert.equal(expected.length, 990);
  for (const chunkSize of [undefined, 1, 7, 990, 65536]) {
    assert.deepEqual(await collect(db.iterate(sql, [10], { chunkSize })), expected, `chunkSize ${chunkSize}`);
  }
  const arrays = await db.select('SELECT x, x AS x, s FROM t ORDER BY x LIMIT 50', [], { rowMode: 'array' });
  assert.deepEqual(arrays[0], [1, 1, 'row 1']);
  assert.deepEqual(await collect(db.iterate('SELECT x, x AS x, s FROM t ORDER BY x LIMIT 50', [], { rowMode: 'array', chunkSize: 8 })), arrays);
  assert.deepEqual(await collect(db.iterate('SELECT * FROM t WHERE x < 0')), []);
  // Named parameters and bigint mode follow the Values table as select does.
  const big = await tmp.open(undefined, { readers: 2, intMode: 'bigint' });
  assert.deepEqual(await collect(big.iterate('SELECT :a AS a', { a: 5n })), [{ a: 5n }]);
});

test('iterate binds its parameters as they were when it was called, as select does', async () => {
  // It binds at the first next(); it used to read the caller's array and bytes only then.
  const db = await withRows(10);
  const params = [3];
  const bytes = Buffer.from([1, 2]);
  const named = { x: 4 };
  const byArray = db.iterate('SELECT x FROM t WHERE x = ?', params);
  const byBytes = db.iterate('SELECT hex(?) AS h', [bytes]);
  const byName = db.iterate('SELECT x FROM t WHERE x = :x', named);
  params[0] = 5;
  bytes[0] = 9;
  named.x = 6;
  assert.deepEqual(await collect(byArray), [{ x: 3 }]);
  assert.deepEqual(await collect(byBytes), [{ h: '0102' }]);
  assert.deepEqual(await collect(byName), [{ x: 4 }]);
  // Values the conversion refuses are still refused, by the first next().
  await assert.rejects(db.iterate('SELECT ?', [new Date()]).next(), TypeError);
  // A review: a view's own `buffer` or `byteLength` property chose the bytes (select()
  // reads the engine's); a sparse array of 2^32-1 elements was copied element by element
  // before any check (minutes). A class instance is not a plain object: iterate() refuses it
  // when called, as select() does (it was read only at the first next()).
  class Named {
    x = 4;
  }
  assert.throws(() => db.iterate('SELECT x FROM t WHERE x = :x', new Named()), TypeError);
  const shadowed = new Uint8Array([1, 2, 3, 4]);
  Object.defineProperty(shadowed, 'buffer', { value: new Uint8Array([9, 9, 9, 9]).buffer });
  Object.defineProperty(shadowed, 'byteLength', { value: 1 });
  assert.deepEqual(await collect(db.iterate('SELECT hex(?) AS h', [shadowed])), await db.select('SELECT hex(?) AS h', [shadowed]));
  assert.deepEqual(await collect(db.iterate('SELECT hex(?) AS h', [shadowed])), [{ h: '01020304' }]);
  // A lone view as params is refused as select() refuses it (thrown by iterate(), as
  // documented for params that are not an array or an object); a detached DataView is empty.
  const lone = new Uint8Array([1]);
  const selectErr = await db.select('SELECT ? AS x', lone).catch((e) => e);
  let iterateErr;
  try {
    db.iterate('SELECT ? AS x', lone);
  } catch (e) {
    iterateErr = e;
  }
  assert.ok(iterateErr instanceof TypeError, String(iterateErr));
  assert.equal(iterateErr.constructor, selectErr.constructor);
  assert.equal(iterateErr.message, selectErr.message);
  const dv = new DataView(new ArrayBuffer(2));
  structuredClone(dv.buffer, { transfer: [dv.buffer] });
  assert.deepEqual(await collect(db.iterate('SELECT length(?) AS n', [dv])), [{ n: 0 }]);
  const sparse = [];
  sparse.length = 2 ** 32 - 1;
  const t0 = performance.now();
  assert.throws(() => db.iterate('SELECT ?', sparse), RangeError);
  assert.ok(performance.now() - t0 < 1000, 'refused at once');
  await db.close();
});

test('a query that fails in a later chunk hands out every row received before it, however slow the loop', async () => {
  // The failure of chunk 2, arriving while the loop awaited between rows of chunk 1, threw
  // the rest of chunk 1 away: 1 row out of 100 came out before the error.
  const db = await withRows(300);
  const failing = "SELECT x, json(CASE WHEN x = 150 THEN '{bad' ELSE '1' END) AS j FROM t ORDER BY rowid";
  for (const pause of [undefined, () => sleep(1), () => new Promise((resolve) => setImmediate(resolve))]) {
    const seen = [];
    const err = await (async () => {
      for await (const row of db.iterate(failing, [], { chunkSize: 100 })) {
        seen.push(row.x);
        if (pause !== undefined) await pause();
      }
    })().then(() => undefined, (e) => e);
    assert.ok(err instanceof SqliteError, String(err));
    assert.equal(seen.length, 100, `${pause}: ${seen.length} rows`);
    assert.deepEqual(seen, Array.from({ length: 100 }, (_, i) => i + 1));
  }
  // A value intMode: 'number' refuses in chunk 2: chunk 1 comes out whole, then the RangeError.
  const strict = await tmp.open(undefined, { readers: 2, intMode: 'number' });
  const big = 'WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 300) SELECT CASE WHEN x = 150 THEN 9007199254740993 ELSE x END AS v FROM c';
  const seen = [];
  const err = await (async () => {
    for await (const row of strict.iterate(big, [], { chunkSize: 100 })) {
      seen.push(row.v);
      await sleep(1);
    }
  })().then(() => undefined, (e) => e);
  assert.ok(err instanceof RangeError, String(err));
  assert.equal(seen.length, 100);
  await strict.close();
});

test('the next chunk is stepped only after JavaScript took the previous one', async () => {
  const db = await withRows(10_000);
  const it = db.iterate('SELECT x FROM t ORDER BY x', [], { chunkSize: 10 });
  assert.deepEqual((await it.next()).value, { x: 1 });
  // Give the reader every chance to run ahead: it must not.
  for (let i = 0; i < 5; i++) {
    await db.select('SELECT count(*) FROM t');
    await sleep(20);
    const stepped = it[STEPPED]();
    assert.ok(stepped >= 10 && stepped <= 20, `stepped ${stepped} rows with 1 taken (chunk 10)`);
  }
  // Consuming moves it, and it stays within two chunks of the consumer.
  let taken = 1;
  for (; taken < 500; taken++) {
    const r = await it.next();
    assert.equal(r.value.x, taken + 1);
    const stepped = it[STEPPED]();
    assert.ok(stepped <= taken + 1 + 20, `stepped ${stepped} rows with ${taken + 1} taken`);
  }
  assert.ok(it[STEPPED]() >= 500);
  await it.return();
  assert.equal(it[STEPPED](), -1, 'the iterator is no longer open');
});

test('an iterator reads one snapshot, holds one reader, and other reads and live queries run meanwhile', async () => {
  const db = await withRows(1000);
  const it = db.iterate('SELECT x FROM t ORDER BY x', [], { chunkSize: 16 });
  const first = await it.next();
  assert.equal(first.value.x, 1);
  assert.equal(await readersBusy(db, 1), 1);
  // Writes committed now are not part of this iteration's snapshot...
  await db.execute('DELETE FROM t WHERE x > 500');
  await db.execute('INSERT INTO t(x) VALUES (5000)');
  // ...while other reads see them, on the other reader.
  assert.equal((await db.selectOne('SELECT count(*) AS n FROM t')).n, 501);
  const live = db.stream('SELECT count(*) AS n FROM t');
  const liveIt = live[Symbol.asyncIterator]();
  assert.deepEqual((await within(liveIt.next(), 'live query first result')).value, [{ n: 501 }]);
  const pending = liveIt.next();
  await db.execute('INSERT INTO t(x) VALUES (5001)');
  assert.deepEqual((await within(pending, 'live query re-run')).value, [{ n: 502 }]);
  await liveIt.return();
  let n = 1;
  for await (const r of it) {
    n++;
    assert.equal(r.x, n);
  }
  assert.equal(n, 1000, 'the iteration saw the rows as they were when it began');
  assert.equal(await readersBusy(db, 0), 0);
});

test('a select awaited in the loop body runs (a reader always stays free)', async () => {
  const db = await withRows(300);
  let sum = 0;
  for await (const r of db.iterate('SELECT x FROM t', [], { chunkSize: 50 })) {
    if (r.x % 100 === 0) sum += (await within(db.selectOne('SELECT ? AS v', [r.x]), 'select in loop body')).v;
  }
  assert.equal(sum, 600);
});

test('readers: 1 refuses iterate, and iterators never take the last free reader', async () => {
  const one = await withRows(10, { readers: 1 });
  const it = one.iterate('SELECT x FROM t');
  await assert.rejects(it.next(), (e) => e instanceof RangeError && /readers >= 2/.test(e.message));
  assert.deepEqual(await it.next(), { done: true, value: undefined });
  assert.equal((await one.selectOne('SELECT count(*) AS n FROM t')).n, 10);

  const two = await withRows(10);
  // Chunks of 2 keep it open (an iterator whose last chunk arrived holds nothing).
  const a = two.iterate('SELECT x FROM t', [], { chunkSize: 2 });
  await a.next();
  const b = two.iterate('SELECT x FROM t');
  await assert.rejects(b.next(), (e) => e instanceof RangeError && /one reader always stays free/.test(e.message));
  await a.return();
  // The slot is free again at once.
  assert.equal((await two.iterate('SELECT x FROM t').next()).value.x, 1);
});

test('break, return(), a throw in the loop body, a signal and a timeout all release the reader', async (t) => {
  const db = await withRows(5000);
  const sql = 'SELECT x FROM t';
  /** The reader is released: no reader busy, and a new iterator may open. */
  async function released(what) {
    assert.equal(await readersBusy(db, 0), 0, `${what}: a reader is still busy`);
    const again = db.iterate(sql, [], { chunkSize: 5 });
    assert.equal((await again.next()).value.x, 1, `${what}: a new iterator opens`);
    await again.return();
    assert.equal(await readersBusy(db, 0), 0);
  }
  await t.test('break', async () => {
    for await (const r of db.iterate(sql, [], { chunkSize: 5 })) if (r.x === 3) break;
    await released('break');
  });
  await t.test('return()', async () => {
    const it = db.iterate(sql);
    await it.next();
    assert.deepEqual(await it.return(), { done: true, value: undefined });
    assert.deepEqual(await it.next(), { done: true, value: undefined });
    await released('return()');
  });
  await t.test('a throw in the loop body', async () => {
    await assert.rejects(async () => {
      for await (const r of db.iterate(sql)) if (r.x === 700) throw new Error('body failed');
    }, /body failed/);
    await released('throw');
  });
  await t.test('a signal, before and during the iteration', async () => {
    const ac = new AbortController();
    const it = db.iterate(sql, [], { signal: ac.signal, chunkSize: 5 });
    await it.next();
    ac.abort(new Error('stop now'));
    await assert.rejects(it.next(), /stop now/);
    assert.deepEqual(await it.next(), { done: true, value: undefined });
    await released('signal');
    const aborted = AbortSignal.abort(new Error('already'));
    await assert.rejects(db.iterate(sql, [], { signal: aborted }).next(), /already/);
    // A signal interrupts a chunk that is being stepped.
    const ac2 = new AbortController();
    const slow = db.iterate(SLOW, [], { signal: ac2.signal });
    const pending = slow.next();
    await sleep(30);
    ac2.abort(new Error('interrupted'));
    await assert.rejects(within(pending, 'aborted next()'), /interrupted/);
    await released('signal during a chunk');
  });
  await t.test('timeoutMs', async () => {
    const it = db.iterate(SLOW, [], { timeoutMs: 50 });
    await assert.rejects(within(it.next(), 'timed-out next()'), (e) => e.name === 'TimeoutError');
    await released('timeout');
  });
});

test('close() ends an open iterator: next() rejects with the closed error, nothing hangs', async () => {
  const db = await withRows(1000, { readers: 3 });
  const idle = db.iterate('SELECT x FROM t', [], { chunkSize: 10 });
  await idle.next();
  const waiting = db.iterate(SLOW);
  const pending = waiting.next();
  const outcome = pending.then(() => 'resolved', (e) => e);
  await within(db.close(), 'close with open iterators');
  assert.equal((await within(outcome, 'pending next()')).code, CLOSED);
  // Rows of a chunk already delivered are dropped: the iteration ended with the error.
  await assert.rejects(idle.next(), (e) => e.code === CLOSED && /while this iterator was open/.test(e.message));
  assert.deepEqual(await idle.next(), { done: true, value: undefined });
  assert.throws(() => db.iterate('SELECT 1'), (e) => e.code === CLOSED);
});

test('close({ force: true }) interrupts a chunk being stepped', async () => {
  const db = await withRows(10);
  const it = db.iterate(SLOW);
  const outcome = it.next().then(() => 'resolved', (e) => e);
  await sleep(30);
  await within(db.close({ force: true }), 'forced close');
  assert.equal((await within(outcome, 'pending next()')).code, CLOSED);
});

test('rekey() while an iterator is open ends the iterator instead of deadlocking', async () => {
  for (const encryptionKey of [undefined, 'first key']) {
    const db = await withRows(1000, encryptionKey === undefined ? { readers: 2 } : { readers: 2, encryptionKey });
    const it = db.iterate('SELECT x FROM t', [], { chunkSize: 10 });
    await it.next();
    await within(db.rekey('second key'), 'rekey with an open iterator', 5000);
    // The rest of the chunk received comes out first (at most the next chunk was stepped
    // before the rekey too), then the rekey's error.
    let rest = 0;
    const ended = await (async () => {
      for (;;) {
        const r = await it.next();
        if (r.done) return new Error('the iterator ended without the rekey error');
        rest++;
      }
    })().catch((e) => e);
    assert.ok(ended instanceof SqliteError && ended.code === 'SQLITE_ABORT' && /rekey/.test(ended.message), String(ended));
    assert.ok(rest >= 9 && rest <= 19, `${rest} rows after the first`);
    assert.equal((await db.selectOne('SELECT count(*) AS n FROM t')).n, 1000);
    assert.equal((await collect(db.iterate('SELECT x FROM t'))).length, 1000);
    await db.close();
  }
});

test('an iterator that is never finished and is collected releases its reader', async () => {
  const db = await withRows(1000);
  await (async () => {
    const it = db.iterate('SELECT x FROM t', [], { chunkSize: 10 });
    await it.next();
  })();
  assert.equal(await readersBusy(db, 1), 1);
  let busy = 1;
  for (let i = 0; i < 50 && busy !== 0; i++) {
    gc();
    await sleep(20);
    busy = (await db.diagnostics()).readersBusy;
  }
  assert.equal(busy, 0, 'the collected iterator let go of its reader');
  assert.equal((await db.iterate('SELECT x FROM t').next()).value.x, 1);
});

test('a collected iterator takes its listener off its signal', async () => {
  const db = await withRows(1000, { readers: 6 });
  const ac = new AbortController();
  const listeners = () => getEventListeners(ac.signal, 'abort').length;
  // Made in a function of its own: a suspended frame of this test would keep the last one.
  const openIterators = async () => {
    const open = [];
    for (let i = 0; i < 5; i++) {
      const it = db.iterate('SELECT x FROM t', [], { chunkSize: 10, signal: ac.signal });
      await it.next();
      open.push(it);
    }
    return open;
  };
  const open = await openIterators();
  assert.equal(listeners(), 5, 'each open iterator watches the signal');
  open.length = 0;
  for (let i = 0; i < 50 && listeners() !== 0; i++) {
    gc();
    await sleep(20);
  }
  assert.equal(listeners(), 0, 'collected iterators left no listener behind');
  assert.equal(await readersBusy(db, 0), 0);
  ac.abort();
});

test('terminating a Worker with an open iterator releases the file', { timeout: 30_000 }, async () => {
  const path = tmp.file();
  const db = await Database.open(path, { readers: 2 });
  await db.execute('CREATE TABLE t(x)');
  await db.execute('WITH RECURSIVE c(v) AS (SELECT 1 UNION ALL SELECT v+1 FROM c WHERE v < 5000) INSERT INTO t SELECT v FROM c');
  const worker = new Worker(new URL('./fixtures/iterate-worker.mjs', import.meta.url), { workerData: { path } });
  await new Promise((resolve, reject) => {
    worker.once('message', resolve);
    worker.once('error', reject);
  });
  // While the worker's iterator holds its snapshot, a checkpoint cannot copy the frames
  // written after it began.
  /** [frames in the WAL, frames checkpointed] after one more write. */
  const checkpoint = async () => {
    await db.execute('INSERT INTO t VALUES (0)');
    const [[, log, done]] = (await db.execute('PRAGMA wal_checkpoint(PASSIVE)', [], { rowMode: 'array' })).rows;
    return [log, done];
  };
  const [log, done] = await checkpoint();
  assert.ok(done < log, `the open iterator holds a read snapshot (${done} of ${log} frames copied)`);
  await worker.terminate();
  let held = true;
  for (let i = 0; i < 100 && held; i++) {
    await sleep(20);
    const [l, d] = await checkpoint();
    held = d < l;
  }
  assert.equal(held, false, 'the terminated worker released its snapshot');
  await db.close();
});

test('iterate checks its arguments and refuses to run inside a transaction body', async () => {
  const db = await withRows(3);
  assert.throws(() => db.iterate(1), TypeError);
  assert.throws(() => db.iterate('SELECT 1', 5), TypeError);
  assert.throws(() => db.iterate('SELECT 1', [], { chunk: 5 }), (e) => e instanceof TypeError && /chunkSize/.test(e.message));
  for (const chunkSize of [0, -1, 1.5, 65537, NaN]) {
    assert.throws(() => db.iterate('SELECT 1', [], { chunkSize }), RangeError, String(chunkSize));
  }
  assert.throws(() => db.iterate('SELECT 1', [], { rowMode: 'arrays' }), TypeError);
  assert.throws(() => db.iterate('SELECT 1', [], { signal: {} }), TypeError);
  await assert.rejects(db.iterate('DELETE FROM t').next(), (e) => e instanceof SqliteError && e.code === 'SQLITE_READONLY');
  await assert.rejects(db.iterate('SELECT nope FROM t').next(), (e) => e instanceof SqliteError && e.sql === 'SELECT nope FROM t');
  await assert.rejects(db.iterate('SELECT ?', []).next(), RangeError);
  await db.transaction(async () => {
    assert.throws(() => db.iterate('SELECT x FROM t'), (e) => e instanceof RangeError && /transaction/.test(e.message));
  });
  // After those failures the readers are all free.
  assert.equal(await readersBusy(db, 0), 0);
  assert.equal((await collect(db.iterate('SELECT x FROM t'))).length, 3);
});

test('an iterator is an async disposable', async () => {
  const db = await withRows(100);
  const it = db.iterate('SELECT x FROM t', [], { chunkSize: 10 });
  assert.equal(typeof Symbol.asyncDispose, 'symbol');
  await it.next();
  await it[Symbol.asyncDispose]();
  assert.deepEqual(await it.next(), { done: true, value: undefined });
  assert.equal(await readersBusy(db, 0), 0);
});
