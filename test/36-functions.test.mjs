// User-defined functions (issue 9): db.function() and db.aggregate() on every connection,
// called from readers, the writer, transactions and live queries; values per the Values
// table; errors (thrown, unsupported results, promises); arity, deterministic, directOnly;
// re-entrancy; cancellation and close while a statement is inside a function; a Worker
// terminated while a native thread waits for its JavaScript.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { AsyncLocalStorage } from 'node:async_hooks';
import { Worker } from 'node:worker_threads';
import { fileURLToPath } from 'node:url';
import { Database, SqliteError } from '../dist/index.mjs';
import { exitIfStuck, scratch, settleWithin, sleep, within } from './fixtures/tx-helpers.mjs';

const tmp = scratch('functions36');
exitIfStuck();

const COUNT_TO = (n) => `WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < ${n}) `;
const FOREVER = 'WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) ';

async function fresh(options) {
  const db = await tmp.open(undefined, options);
  await db.execute('CREATE TABLE t(id INTEGER PRIMARY KEY, v)');
  return db;
}

test('a scalar function works in select, execute, a transaction and a live query', async () => {
  const db = await fresh({ readers: 2 });
  db.function('twice', (x) => x * 2);
  await db.execute('INSERT INTO t(v) VALUES (twice(?))', [21]);
  assert.deepEqual(await db.select('SELECT twice(v) AS w FROM t'), [{ w: 84 }]);
  await db.transaction(async (tx) => {
    await tx.execute('INSERT INTO t(v) SELECT twice(v) FROM t');
    assert.deepEqual(await tx.select('SELECT twice(count(*)) AS n FROM t'), [{ n: 4 }]);
  });
  const live = db.stream('SELECT twice(sum(v)) AS s FROM t');
  const it = live[Symbol.asyncIterator]();
  assert.deepEqual((await it.next()).value, [{ s: 252 }]);
  await db.execute('INSERT INTO t(v) VALUES (1)');
  assert.deepEqual((await it.next()).value, [{ s: 254 }]);
  await it.return();
});


test('a function replaced while reads wait in a queue reaches them without failing any', async () => {
  // A reader serving a backlog from one snapshot (experiment 050) has a statement active,
  // and SQLite refuses to replace a function then: the snapshot must end first.
  const db = await fresh({ readers: 1 });
  db.function('version', () => 1);
  assert.deepEqual(await db.selectOne('SELECT version() AS v'), { v: 1 });
  const slow = 'WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 5000) SELECT count(*) AS n FROM c';
  const backlog = Array.from({ length: 30 }, () => db.selectOne(slow));
  await backlog[0];
  db.function('version', () => 2);
  const results = await Promise.allSettled(backlog);
  assert.deepEqual(results.filter((r) => r.status === 'rejected').map((r) => String(r.reason)), []);
  assert.deepEqual(await db.selectOne('SELECT version() AS v'), { v: 2 });
  await db.close();
});
test('a function registered after open reaches every connection already open', async () => {
  const db = await fresh({ readers: 3 });
  // Every reader has run a query (its connection is open and in use) before the registration.
  await Promise.all(Array.from({ length: 30 }, () => db.select('SELECT 1')));
  await assert.rejects(db.select('SELECT late(1)'), /no such function: late/);
  db.function('late', (x) => x + 1);
  const results = await Promise.all(Array.from({ length: 60 }, (_, i) => db.selectOne('SELECT late(?) AS y', [i])));
  assert.deepEqual(results.map((r) => r.y), Array.from({ length: 60 }, (_, i) => i + 1));
  assert.deepEqual((await db.execute('SELECT late(1) AS y')).rows, [{ y: 2 }]);
  // A later definition of the same name replaces the earlier one everywhere.
  db.function('late', (x) => x + 100);
  const again = await Promise.all(Array.from({ length: 30 }, () => db.selectOne('SELECT late(1) AS y')));
  assert.ok(again.every((r) => r.y === 101));
});

test('arguments and results follow the Values table', async () => {
  const db = await fresh();
  const seen = [];
  db.function('echo', (x) => {
    seen.push(x);
    return x;
  });
  const row = await db.selectOne(
    "SELECT echo(1) AS i, echo(9007199254740993) AS big, echo(1.5) AS r, echo('é') AS s, echo(x'0102') AS b, echo(NULL) AS n",
  );
  assert.deepEqual(seen, [1, 9007199254740993n, 1.5, 'é', Buffer.from([1, 2]), null]);
  assert.deepEqual(row, { i: 1, big: 9007199254740993n, r: 1.5, s: 'é', b: Buffer.from([1, 2]), n: null });
  db.function('give', (what) =>
    ({
      bigint: 2n ** 60n,
      true: true,
      undefined: undefined,
      f64: new Float64Array([1.5]),
      u8: new Uint8Array([7, 8]),
      // Over a SharedArrayBuffer: an internal error under Node 20 before.
      shared: new Uint8Array(new SharedArrayBuffer(3)).fill(9),
    })[what],
  );
  const out = await db.selectOne(
    "SELECT give('bigint') AS a, give('true') AS b, give('undefined') AS c, give('f64') AS d, give('u8') AS e, give('shared') AS f",
  );
  assert.deepEqual(out, {
    a: 2n ** 60n,
    b: 1,
    c: null,
    d: Buffer.from(new Float64Array([1.5]).buffer),
    e: Buffer.from([7, 8]),
    f: Buffer.from([9, 9, 9]),
  });
});

test("intMode 'bigint' gives every integer argument as a BigInt; 'number' refuses unsafe ones", async () => {
  const big = await tmp.open(undefined, { intMode: 'bigint' });
  const types = [];
  big.function('kind', (x) => {
    types.push(typeof x);
    return 0;
  });
  await big.select('SELECT kind(1), kind(1.5)');
  assert.deepEqual(types, ['bigint', 'number']);
  const num = await tmp.open(undefined, { intMode: 'number' });
  num.function('id', (x) => x);
  assert.deepEqual(await num.selectOne('SELECT id(5) AS v'), { v: 5 });
  await assert.rejects(num.select('SELECT id(9007199254740993)'), (e) => {
    assert.ok(e instanceof RangeError, String(e));
    assert.match(e.message, /argument 1 of function 'id'/);
    assert.doesNotMatch(e.message, /9007199254740993/);
    return true;
  });
});

test('a function that throws fails the statement with that very error', async () => {
  const db = await fresh();
  class Custom extends TypeError {}
  const thrown = new Custom('bad input');
  db.function('boom', () => {
    throw thrown;
  });
  const read = await db.select('SELECT boom()').then(
    () => assert.fail('select must reject'),
    (e) => e,
  );
  assert.equal(read, thrown);
  const write = await db.execute('INSERT INTO t(v) VALUES (boom())').then(
    () => assert.fail('execute must reject'),
    (e) => e,
  );
  assert.equal(write, thrown);
  assert.equal((await db.selectOne('SELECT count(*) AS n FROM t')).n, 0);
  db.function('boom2', () => {
    throw 'a string';
  });
  await assert.rejects(db.select('SELECT boom2()'), (e) => e === 'a string');
  // Inside a transaction the body sees the error; the transaction rolls back.
  await assert.rejects(
    db.transaction(async (tx) => {
      await tx.execute('INSERT INTO t(v) VALUES (1)');
      await tx.execute('INSERT INTO t(v) VALUES (boom())');
    }),
    (e) => e === thrown,
  );
  assert.equal((await db.selectOne('SELECT count(*) AS n FROM t')).n, 0);
});

test('an unsupported result, a Promise or an async function is a TypeError', async () => {
  const db = await fresh();
  db.function('obj', () => ({}));
  db.function('sym', () => Symbol('s'));
  db.function('prom', () => Promise.resolve(1));
  db.function('rejecting', () => Promise.reject(new Error('never seen')));
  for (const name of ['obj', 'sym']) {
    await assert.rejects(db.select(`SELECT ${name}()`), (e) => e instanceof TypeError && /unsupported type/.test(e.message));
  }
  for (const name of ['prom', 'rejecting']) {
    await assert.rejects(db.select(`SELECT ${name}()`), (e) => e instanceof TypeError && /synchronous/.test(e.message));
  }
  assert.throws(() => db.function('a', async () => 1), /synchronous/);
  assert.throws(() => db.function('a', 'not a function'), TypeError);
  assert.throws(() => db.function('', () => 1), TypeError);
  assert.throws(() => db.function('a', () => 1, { deterministc: true }), /did you mean 'deterministic'/);
  assert.throws(() => db.function('x'.repeat(256), () => 1), TypeError);
  assert.throws(() => db.aggregate('a', { start: 0 }), /step must be a function/);
  // The database still works.
  assert.deepEqual(await db.selectOne('SELECT 1 AS one'), { one: 1 });
});

test('fixed arity comes from the function; varargs takes any number', async () => {
  const db = await fresh();
  db.function('two', (a, b) => a + b);
  db.function('many', (...xs) => xs.length, { varargs: true });
  assert.deepEqual(await db.selectOne('SELECT two(1, 2) AS v'), { v: 3 });
  await assert.rejects(db.select('SELECT two(1)'), (e) => e instanceof SqliteError && /wrong number of arguments/.test(e.message));
  assert.deepEqual(await db.selectOne('SELECT many() AS a, many(1, 2, 3) AS b'), { a: 0, b: 3 });
});

test('deterministic functions may be used in indexes; others may not', async () => {
  const db = await fresh();
  db.function('loose', (x) => x);
  db.function('strict', (x) => (typeof x === 'string' ? x.toLowerCase() : x), { deterministic: true });
  await assert.rejects(db.execute('CREATE INDEX i1 ON t(loose(v))'), /non-deterministic/);
  await db.execute('CREATE INDEX i2 ON t(strict(v))');
  await db.execute("INSERT INTO t(v) VALUES ('ABC')");
  assert.deepEqual(await db.select("SELECT v FROM t WHERE strict(v) = 'abc'"), [{ v: 'ABC' }]);
});

test('directOnly functions run in direct SQL, never from a view', async () => {
  const db = await fresh();
  db.function('direct', () => 1, { directOnly: true });
  db.function('anywhere', () => 2);
  await db.execute('CREATE VIEW v1 AS SELECT direct() AS d');
  await db.execute('CREATE VIEW v2 AS SELECT anywhere() AS d');
  assert.deepEqual(await db.selectOne('SELECT direct() AS d'), { d: 1 });
  assert.deepEqual(await db.selectOne('SELECT d FROM v2'), { d: 2 });
  await assert.rejects(db.select('SELECT d FROM v1'), /unsafe use of direct\(\)/);
});

test('a function may call the database (asynchronously) without deadlock', async () => {
  const db = await fresh({ readers: 1 });
  const inner = [];
  db.function('peek', (x) => {
    inner.push(db.selectOne('SELECT ? + 1 AS y', [x]));
    inner.push(db.execute('INSERT INTO t(v) VALUES (?)', [x]));
    return x;
  });
  assert.equal((await db.select(`${COUNT_TO(5)}SELECT peek(x) AS x FROM c`)).length, 5);
  const done = await Promise.all(inner);
  assert.deepEqual(done.filter((_, i) => i % 2 === 0), [1, 2, 3, 4, 5].map((x) => ({ y: x + 1 })));
  assert.equal((await db.selectOne('SELECT count(*) AS n FROM t')).n, 5);
});

test('each function runs in the async context of its own definition, outside any transaction', async () => {
  const db = await fresh({ readers: 1 });
  const requestId = new AsyncLocalStorage();
  // The database's first definition, in a context of its own: no later definition runs in it.
  requestId.run('defined-first', () => db.function('first', () => 0));
  requestId.run('defined-a', () => db.function('ctx_a', () => requestId.getStore() ?? 'none'));
  requestId.run('defined-b', () =>
    db.aggregate('ctx_b', { start: () => [], step: (acc) => [...acc, requestId.getStore() ?? 'none'], result: (acc) => acc.join(',') }),
  );
  // Called from a third context, on a reader and on the writer.
  await requestId.run('caller', async () => {
    const read = await db.selectOne(`${COUNT_TO(2)}SELECT ctx_a() AS a, ctx_b() AS b FROM c`);
    assert.deepEqual(read, { a: 'defined-a', b: 'defined-b,defined-b' });
    const written = await db.execute(`INSERT INTO t(v) SELECT ctx_a() || '/' || (${COUNT_TO(2)}SELECT ctx_b() FROM c) RETURNING v`);
    assert.deepEqual(written.rows, [{ v: 'defined-a/defined-b,defined-b' }]);
  });

  // Called by a statement of a transaction body: the function's own db calls are not
  // routed into that transaction, so a rollback does not undo them.
  let logged;
  db.function('log_outside', (x) => {
    logged = db.execute('INSERT INTO t(v) VALUES (?)', [`logged ${x}`]);
    return x;
  });
  await assert.rejects(
    db.transaction(async (tx) => {
      assert.deepEqual(await tx.selectOne("SELECT log_outside('in tx') AS x"), { x: 'in tx' });
      throw new Error('roll back');
    }),
    /roll back/,
  );
  assert.equal((await logged).changes, 1);
  assert.deepEqual(await db.select("SELECT v FROM t WHERE v LIKE 'logged %'"), [{ v: 'logged in tx' }]);

  // The first function of a database defined inside a transaction body: its calls see the
  // stores of that definition, and the requests they make belong to no transaction (that
  // one has ended when it runs).
  const other = await fresh({ readers: 1 });
  let inner;
  await other.transaction(async () => {
    requestId.run('defined-in-body', () =>
      other.function('ctx_tx', (x) => {
        // Both outcomes kept, so an old-code rejection is reported here, not as unhandled.
        inner = other.selectOne('SELECT ? AS x', [x]).then((row) => ({ row }), (error) => ({ error }));
        return requestId.getStore() ?? 'none';
      }),
    );
  });
  assert.deepEqual(await other.selectOne('SELECT ctx_tx(7) AS y'), { y: 'defined-in-body' });
  assert.deepEqual(await inner, { row: { x: 7 } });
});

test('aggregates: start, step, result; empty groups; a throwing step', async () => {
  const db = await fresh();
  await db.executeBatch('INSERT INTO t(v) VALUES (?)', [[1], [2], [3], [4]]);
  db.aggregate('total', { start: 0, step: (acc, x) => acc + x });
  db.aggregate('collect', { start: () => [], step: (acc, x) => void acc.push(x), result: (acc) => acc.join(',') });
  assert.deepEqual(await db.selectOne('SELECT total(v) AS s, collect(v) AS c FROM t'), { s: 10, c: '1,2,3,4' });
  assert.deepEqual(await db.selectOne('SELECT total(v) AS s, collect(v) AS c FROM t WHERE v > 9'), { s: 0, c: '' });
  assert.deepEqual(await db.select('SELECT v % 2 AS odd, collect(v) AS c FROM t GROUP BY odd ORDER BY odd'), [
    { odd: 0, c: '2,4' },
    { odd: 1, c: '1,3' },
  ]);
  // On the writer too, and a later start() call gives each group a fresh accumulator.
  assert.deepEqual((await db.execute('SELECT collect(v) AS c FROM t')).rows, [{ c: '1,2,3,4' }]);
  const thrown = new RangeError('step failed');
  db.aggregate('fails', {
    step: (acc, x) => {
      throw thrown;
    },
  });
  await assert.rejects(db.select('SELECT fails(v) FROM t'), (e) => e === thrown);
  assert.throws(() => db.aggregate('w', { step: async () => 1 }), /synchronous/);
});

test("a result() that throws while SQLite cleans up after a failed call neither replaces that call's error nor outlives its statement", async () => {
  // The failed call's error was kept in one slot on the connection's thread: the aggregate's
  // result(), called by SQLite's cleanup, threw and took the slot. The statement then failed
  // with a plain SqliteError, and a later query that failed with result()'s message (an
  // unrelated missing table) was handed result()'s error instead of its own.
  const db = await fresh({ readers: 1 });
  const thrown = new RangeError('boom');
  db.function('boom', (x) => {
    if (x === 3) throw thrown;
    return x;
  });
  db.aggregate('at_least_100', {
    start: 0,
    step: (acc, x) => acc + x,
    result: (acc) => {
      if (acc < 100) throw new Error('no such table: nope');
      return acc;
    },
  });
  const sql = `${COUNT_TO(5)}SELECT at_least_100(boom(x)) AS v FROM c`;
  await assert.rejects(db.select(sql), (e) => e === thrown);
  await assert.rejects((async () => (await db.execute(sql)).rows)(), (e) => e === thrown);
  await assert.rejects(db.select('SELECT * FROM nope'), (e) => e instanceof SqliteError && e.code === 'SQLITE_ERROR');
  await assert.rejects(db.execute('SELECT * FROM nope'), (e) => e instanceof SqliteError && e.code === 'SQLITE_ERROR');
  // A read interrupted by its timeout: result() throws during the cleanup, and no error of
  // the statement takes that failure. The next statement on the thread must not either.
  const slow = `WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 50000000) SELECT at_least_100(x) AS v FROM c`;
  for (let i = 0; i < 3; i++) {
    await assert.rejects(db.select(slow, [], { timeoutMs: 30 }), (e) => e.name === 'TimeoutError');
    await assert.rejects(db.select('SELECT * FROM nope'), (e) => e instanceof SqliteError && e.code === 'SQLITE_ERROR');
  }
  await db.close();
});

test('an aggregate with inverse is a window function', async () => {
  const db = await fresh();
  await db.executeBatch('INSERT INTO t(v) VALUES (?)', [[1], [2], [3], [4], [5]]);
  db.aggregate('wsum', { start: 0, step: (acc, x) => acc + x, inverse: (acc, x) => acc - x });
  const rows = await db.select('SELECT wsum(v) OVER (ORDER BY id ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) AS s FROM t');
  assert.deepEqual(rows.map((r) => r.s), [1, 3, 5, 7, 9]);
  db.aggregate('plain', { start: 0, step: (acc, x) => acc + x });
  await assert.rejects(
    db.select('SELECT plain(v) OVER (ORDER BY id ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) FROM t'),
    /may not be used as a window function/,
  );
});

test('an abort interrupts a statement that keeps calling a function', async () => {
  const db = await fresh();
  let calls = 0;
  db.function('tick', (x) => {
    calls++;
    return x;
  });
  const ac = new AbortController();
  const running = db.select(`${FOREVER}SELECT count(tick(x)) FROM c`, [], { signal: ac.signal });
  while (calls < 100) await sleep(5);
  ac.abort();
  const s = await settleWithin(running, 3000);
  assert.equal(s.state, 'rejected');
  assert.equal(s.reason.name, 'AbortError');
  assert.deepEqual(await db.selectOne('SELECT tick(7) AS v'), { v: 7 });
});

test('no call of a function runs after its statement was cancelled or force-closed', async () => {
  // The progress handler looks every 1000 instructions: 246 calls ran after a select's abort
  // (its promise already rejected), 107 in an execute, and a force close let short
  // statements finish with every row.
  const db = await fresh();
  await db.execute(`CREATE TABLE n(x); ${COUNT_TO(5000)}INSERT INTO n SELECT x FROM c`);
  for (const method of ['select', 'execute']) {
    const ac = new AbortController();
    let calls = 0;
    let afterAbort = 0;
    db.function('stop_at_3', (x) => {
      if (ac.signal.aborted) afterAbort++;
      if (++calls === 3) ac.abort();
      return x;
    });
    const sql = method === 'select' ? 'SELECT stop_at_3(x) AS x FROM n' : 'UPDATE n SET x = stop_at_3(x)';
    const s = await settleWithin(db[method](sql, [], { signal: ac.signal }), 3000);
    assert.equal(s.state, 'rejected', method);
    assert.equal(s.reason.name, 'AbortError', method);
    // A read's promise rejects at once: time for a statement that went on to call.
    await sleep(100);
    assert.equal(afterAbort, 0, `${method}: calls after the abort`);
  }
  assert.deepEqual(await db.selectOne('SELECT count(*) AS n, sum(x) AS s FROM n'), { n: 5000, s: 12502500 });
  const db2 = await fresh();
  let forced;
  let n = 0;
  let afterClose = 0;
  db2.function('close_at_3', (x) => {
    if (forced !== undefined) afterClose++;
    if (++n === 3) forced = db2.close({ force: true });
    return x;
  });
  const s = await settleWithin(db2.select(`${COUNT_TO(100)}SELECT close_at_3(x) AS x FROM c`), 3000);
  assert.equal(s.state, 'rejected');
  assert.equal(s.reason.code, 'ERR_QUIETSQLITE_CLOSED');
  assert.equal(afterClose, 0);
  assert.equal((await settleWithin(forced, 3000)).state, 'fulfilled');
});

test("a cancelled aggregate's accumulator is let go: its final call still runs as SQLite ends the statement", async () => {
  // The check that stops calls once a request is cancelled stopped the final one too, which
  // is what drops the accumulator: 200 timed-out reads kept 200 accumulators until close().
  const { setFlagsFromString } = await import('node:v8');
  const { runInNewContext } = await import('node:vm');
  setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc');
  const db = await fresh();
  const accumulators = [];
  db.aggregate('slow_sum', {
    start: () => {
      const acc = { sum: 0, ballast: new Array(10_000).fill(0) };
      accumulators.push(new WeakRef(acc));
      return acc;
    },
    step: (acc, x) => {
      const until = performance.now() + 1;
      while (performance.now() < until);
      acc.sum += x;
      return acc;
    },
    result: (acc) => acc.sum,
  });
  for (let i = 0; i < 5; i++) {
    const s = await settleWithin(db.select(`${COUNT_TO(1000)}SELECT slow_sum(x) AS s FROM c`, [], { timeoutMs: 20 }), 3000);
    assert.equal(s.state, 'rejected');
    assert.equal(s.reason.name, 'TimeoutError');
  }
  await db.selectOne('SELECT 1');
  for (let i = 0; i < 5 && accumulators.some((r) => r.deref() !== undefined); i++) {
    await sleep(20);
    gc();
  }
  assert.equal(accumulators.length, 5);
  assert.equal(accumulators.filter((r) => r.deref() !== undefined).length, 0);
  await db.close();
});

test('close() waits for a statement inside functions; close({ force: true }) interrupts it', async () => {
  const db = await fresh();
  let calls = 0;
  let closing;
  db.function('slow', (x) => {
    if (++calls === 50) closing = db.close();
    return x;
  });
  const rows = await db.select(`${COUNT_TO(200)}SELECT slow(x) AS x FROM c`);
  assert.equal(rows.length, 200, 'a plain close lets the running statement finish');
  await closing;

  const db2 = await fresh();
  let forced;
  let n = 0;
  db2.function('spin', (x) => {
    if (++n === 50) forced = db2.close({ force: true });
    return x;
  });
  const s = await settleWithin(db2.select(`${FOREVER}SELECT count(spin(x)) FROM c`), 3000);
  assert.equal(s.state, 'rejected');
  assert.equal(s.reason.code, 'ERR_QUIETSQLITE_CLOSED');
  assert.equal((await settleWithin(forced, 3000)).state, 'fulfilled');
  assert.throws(() => db2.function('late', () => 1), { code: 'ERR_QUIETSQLITE_CLOSED' });
});

test('a Worker terminated while the writer waits for its function frees the writer', { timeout: 30_000 }, async () => {
  const path = tmp.file('worker');
  const worker = new Worker(fileURLToPath(new URL('./fixtures/udf-worker.mjs', import.meta.url)), {
    workerData: { path },
  });
  await new Promise((resolve, reject) => {
    worker.once('message', resolve);
    worker.once('error', reject);
  });
  await sleep(200);
  await worker.terminate();
  // The Worker's writer held a write transaction while it waited: it must have ended (not
  // hung), or this write would wait out the busy timeout and fail with SQLITE_BUSY.
  const db = await tmp.open(path, { busyTimeout: 5000 });
  await db.execute('INSERT INTO t(v) VALUES (1)');
  assert.deepEqual(await db.selectOne('SELECT count(*) AS n FROM t'), { n: 1 });
});

test('a review: callbacks get this === undefined; an Error whose message is not text; no result() after a failed step', async () => {
  const db = await fresh({ readers: 1 });
  // `this` was the definition object, whose fn a callback could replace.
  const seen = [];
  db.function('who', function () {
    seen.push(this);
    return 1;
  });
  await db.select('SELECT who() AS x');
  assert.deepEqual(seen, [undefined]);
  // An Error with a message that is not a string (or a getter that throws) came back as a
  // false ERR_QUIETSQLITE_CLOSED; the caller gets the very value thrown.
  const odd = new Error('x');
  Object.defineProperty(odd, 'message', { value: 42 });
  const getter = new Error('y');
  Object.defineProperty(getter, 'message', { get() { throw new Error('no'); } });
  for (const thrown of [odd, getter]) {
    db.function('odd', () => {
      throw thrown;
    });
    assert.equal(await db.select('SELECT odd() AS x').catch((e) => e), thrown);
    assert.equal(await db.execute('SELECT odd() AS x').catch((e) => e), thrown);
  }
  // A step that throws fails the statement with its own error; result() is not called for
  // that group (it ran during SQLite's cleanup, and its error replaced the step's).
  const results = [];
  const boom = new Error('step boom');
  db.aggregate('fragile', {
    start: 0,
    step: (acc, x) => {
      if (x === 3) throw boom;
      return acc + x;
    },
    result: (acc) => {
      results.push(acc);
      throw new Error('result boom');
    },
  });
  assert.equal(await db.select(`${COUNT_TO(5)}SELECT fragile(x) AS s FROM c`).catch((e) => e), boom);
  assert.deepEqual(results, []);
  await db.close();
});

test('a closed database kept by its caller no longer keeps its functions, or what they captured', async () => {
  // `#functions` stayed set after close(): every callback, and everything it closed over,
  // lived as long as the Database object did.
  const { setFlagsFromString } = await import('node:v8');
  const { runInNewContext } = await import('node:vm');
  setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc');
  const db = await Database.open(':memory:');
  const captured = ((table) => {
    db.function('lookup', (i) => table.rows[i]);
    db.aggregate('weighted', { start: 0, step: (acc, v) => acc + v * table.rows.length });
    return new WeakRef(table);
  })({ rows: Array.from({ length: 1000 }, (_, i) => i) });
  assert.deepEqual(await db.selectOne('SELECT lookup(7) AS v, weighted(1) AS w'), { v: 7, w: 1000 });
  await db.close();
  for (let i = 0; i < 5 && captured.deref() !== undefined; i++) {
    await new Promise((resolve) => setTimeout(resolve, 10));
    gc();
  }
  assert.equal(captured.deref(), undefined);
  assert.equal(db.isOpen, false);
});

test('a live query whose function throws gives every stream of the group the value thrown', async () => {
  // Streams of the same SQL share one run; the thrown value was handed to the first of them,
  // and the others got a SqliteError with its message.
  const db = await fresh();
  await db.execute('INSERT INTO t(v) VALUES (1)');
  let fail = false;
  const thrown = new Error('boom');
  db.function('check_v', (v) => {
    if (fail) throw thrown;
    return v;
  });
  const sql = 'SELECT check_v(v) AS v FROM t';
  const lives = [db.stream(sql), db.stream(sql), db.stream(sql)];
  const errors = [];
  const firsts = lives.map(
    (live) =>
      new Promise((resolve) => {
        live.subscribe(resolve, (e) => errors.push(e));
        live.subscribe(() => {}, (e) => errors.push(e));
      }),
  );
  await Promise.all(firsts);
  fail = true;
  await db.execute('INSERT INTO t(v) VALUES (2)');
  await within(
    (async () => {
      while (errors.length < 6) await sleep(5);
    })(),
    'every subscriber hears of the failure',
    5000,
  );
  // (A run may fail more than once: a write can land while the group's first run is on
  // its way. Every failure is the same throw.)
  for (const e of errors) assert.equal(e, thrown);
  for (const live of lives) live.end();
  await db.close();
});
