// Cancellation and timeouts (issue 8): `signal` and `timeoutMs` on every query method and
// on Database.open, aborts before sending / while queued / while running, a transaction's
// signal interrupting its running statement, close({ force: true }) behind statements that
// never end, and many concurrent aborts that must never reach another request.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { getEventListeners } from 'node:events';
import { Database, SqliteError } from '../dist/index.mjs';
import { deferred, exitIfStuck, scratch, settleWithin, sleep, within } from './fixtures/tx-helpers.mjs';

const tmp = scratch('cancel33');
exitIfStuck();

/** A read that never ends on its own. */
const RUNAWAY = 'WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) SELECT count(*) FROM c';
// Another text that never ends either. A statement that ran long before never goes to the
// spare reader, so a test that holds the spare with a runaway sends it this one.
const RUNAWAY_FOR_SPARE = RUNAWAY.replace('count(*)', 'max(x)');
/** A write that never ends on its own (it writes nothing before it ends). */
const RUNAWAY_WRITE = `INSERT INTO t(v) ${RUNAWAY}`;
/** A write that keeps inserting rows for a long time (seconds). */
const LONG_INSERT =
  'INSERT INTO t(v) SELECT x FROM (WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x < 20000000) SELECT x FROM c)';
const CLOSED = 'ERR_QUIETSQLITE_CLOSED';

async function fresh(options) {
  const db = await tmp.open(undefined, options);
  await db.execute('CREATE TABLE t(v)');
  return db;
}

/** The settled state of `promise` within `ms`, failing the test if it is still pending. */
async function settled(promise, what, ms = 3000) {
  const s = await settleWithin(promise, ms);
  assert.notEqual(s.state, 'pending', `${what} did not settle within ${ms} ms`);
  return s;
}

async function count(db) {
  return (await db.selectOne('SELECT count(*) AS n FROM t')).n;
}

/** Every query method of `x` (a database or a transaction), called with `options`. */
function everyMethod(x, options) {
  return {
    select: () => x.select('SELECT 1 AS one', [], options),
    selectOne: () => x.selectOne('SELECT 1 AS one', [], options),
    selectBytes: () => x.selectBytes('SELECT 1 AS one', [], options),
    execute: () => x.execute("INSERT INTO t(v) VALUES ('x')", [], options),
    executeBatch: () => x.executeBatch('INSERT INTO t(v) VALUES (?)', [['a'], ['b']], options),
  };
}

// ---- options ----

test('options are validated on every method: unknown keys, timeoutMs, signal', async () => {
  const db = await fresh();
  await db.transaction(async (tx) => {
    for (const x of [db, tx]) {
      for (const [name, call] of Object.entries(everyMethod(x, { timeout: 5 }))) {
        await assert.rejects(call(), { name: 'TypeError', message: /unknown query option 'timeout'/ }, name);
      }
      for (const bad of [-1, NaN, 2 ** 31, 1e12, -Infinity]) {
        for (const [name, call] of Object.entries(everyMethod(x, { timeoutMs: bad }))) {
          await assert.rejects(call(), RangeError, `${name} timeoutMs ${bad}`);
        }
      }
      for (const bad of ['100', 5n, {}, true]) {
        for (const [name, call] of Object.entries(everyMethod(x, { timeoutMs: bad }))) {
          await assert.rejects(call(), TypeError, `${name} timeoutMs ${String(bad)}`);
        }
      }
      for (const bad of [{}, null, 'abort', new AbortController()]) {
        for (const [name, call] of Object.entries(everyMethod(x, { signal: bad }))) {
          await assert.rejects(call(), { name: 'TypeError', message: /signal must be an AbortSignal/ }, name);
        }
      }
      // rowMode is an option of select/selectOne/execute only (issue 9 added execute).
      await assert.rejects(x.executeBatch('SELECT 1', [[]], { rowMode: 'array' }), TypeError);
      assert.deepEqual((await x.execute('SELECT 1 AS one', [], { rowMode: 'array' })).rows, [[1]]);
      await assert.rejects(x.selectBytes('SELECT 1', [], { rowMode: 'array' }), TypeError);
      assert.deepEqual(await x.select('SELECT 1 AS one', [], { rowMode: 'array', timeoutMs: 1000 }), [[1]]);
    }
  });
  await assert.rejects(Database.open(tmp.file(), { timeoutMs: -5 }), RangeError);
  await assert.rejects(Database.open(tmp.file(), { timeoutMs: '5' }), TypeError);
  await assert.rejects(Database.open(tmp.file(), { timeoutMS: 5 }), { name: 'TypeError', message: /timeoutMs/ });
  // Nothing of the rejected calls ran.
  assert.equal(await count(db), 0);
  await db.close();
});

test('valid options work on every method, for the database and a transaction', async () => {
  const db = await fresh();
  const ac = new AbortController();
  for (const options of [{ signal: ac.signal }, { timeoutMs: 10_000 }, { signal: ac.signal, timeoutMs: null }, { timeoutMs: 0 }, { timeoutMs: Infinity }]) {
    const m = everyMethod(db, options);
    assert.deepEqual(await m.select(), [{ one: 1 }]);
    assert.deepEqual(await m.selectOne(), { one: 1 });
    assert.equal((await m.selectBytes()).toString(), '[{"one":1}]');
    assert.equal((await m.execute()).changes, 1);
    assert.equal((await m.executeBatch()).changes, 2);
    await db.transaction(async (tx) => {
      const t = everyMethod(tx, options);
      assert.deepEqual(await t.select(), [{ one: 1 }]);
      assert.equal((await t.execute()).changes, 1);
      assert.equal((await t.executeBatch()).changes, 2);
    });
  }
  assert.equal(await count(db), 5 * 6);
  // Settled requests leave no listener on the signal.
  assert.equal(getEventListeners(ac.signal, 'abort').length, 0);
  await db.close();
});

test('one signal shared by many calls in flight: one listener, no MaxListenersExceededWarning, all aborted together', async () => {
  const db = await fresh({ readers: 1 });
  const warnings = [];
  const onWarning = (w) => warnings.push(w);
  process.on('warning', onWarning);
  try {
    const ac = new AbortController();
    const blocker = db.select(RUNAWAY, [], { signal: ac.signal });
    const many = Array.from({ length: 100 }, (_, i) => db.selectOne('SELECT ? AS i', [i], { signal: ac.signal }));
    assert.ok(getEventListeners(ac.signal, 'abort').length <= 1, 'one listener for all calls');
    const reason = new Error('all of them');
    ac.abort(reason);
    for (const s of await Promise.allSettled([blocker, ...many])) assert.equal(s.reason, reason);
    await sleep(10);
    assert.deepEqual(warnings.filter((w) => w.name === 'MaxListenersExceededWarning'), []);
    // Sequential calls leave nothing behind either.
    const shared = new AbortController().signal;
    for (let i = 0; i < 20; i++) await db.selectOne('SELECT 1', [], { signal: shared });
    await Promise.all(Array.from({ length: 30 }, () => db.select('SELECT 1', [], { signal: shared })));
    assert.equal(getEventListeners(shared, 'abort').length, 0);
  } finally {
    process.off('warning', onWarning);
  }
  await db.close();
});

// ---- aborted before sending ----

test('a signal aborted before the call: every method rejects with signal.reason and nothing runs', async () => {
  const db = await fresh();
  const reason = new Error('already aborted');
  const signal = AbortSignal.abort(reason);
  for (const [name, call] of Object.entries(everyMethod(db, { signal }))) {
    await assert.rejects(call(), (e) => e === reason, name);
  }
  await db.transaction(async (tx) => {
    for (const [name, call] of Object.entries(everyMethod(tx, { signal }))) {
      await assert.rejects(call(), (e) => e === reason, `tx.${name}`);
    }
  });
  // Without a reason, the rejection is the signal's own AbortError.
  const plain = AbortSignal.abort();
  await assert.rejects(db.select('SELECT 1', [], { signal: plain }), (e) => e === plain.reason && e.name === 'AbortError');
  assert.equal(await count(db), 0);
  await db.close();
});

// ---- aborted while queued ----

test('a read queued behind runaway reads (readers: 1, and the spare) rejects at once when aborted; a runaway is interrupted by its own signal', {
  timeout: 10_000,
}, async () => {
  const db = await fresh({ readers: 1 });
  const runawayAbort = new AbortController();
  const runaway = db.select(RUNAWAY, [], { signal: runawayAbort.signal });
  await sleep(30);
  // The reader is in a long statement: this one goes to the spare reader.
  const spareAbort = new AbortController();
  const onSpare = db.select(RUNAWAY_FOR_SPARE, [], { signal: spareAbort.signal });
  await sleep(30);
  const ac = new AbortController();
  const queued = db.select('SELECT 1 AS one', [], { signal: ac.signal });
  const queuedBytes = db.selectBytes('SELECT 1 AS one', [], { signal: ac.signal });
  await sleep(10);
  const reason = new Error('not needed any more');
  ac.abort(reason);
  // The runaways hold the reader and the spare: these can only settle by leaving the queue.
  for (const p of [queued, queuedBytes]) {
    const s = await settled(p, 'the aborted queued read', 1000);
    assert.equal(s.state, 'rejected');
    assert.equal(s.reason, reason);
  }
  const stop = new Error('stop the runaway');
  runawayAbort.abort(stop);
  const r = await settled(runaway, 'the aborted runaway read');
  assert.equal(r.reason, stop, `the runaway rejects with the reason, not ${r.reason}`);
  const stopSpare = new Error('stop the one on the spare');
  spareAbort.abort(stopSpare);
  assert.equal((await settled(onSpare, 'the aborted runaway on the spare')).reason, stopSpare);
  // The one reader serves the next query.
  assert.deepEqual(await db.select('SELECT 2 AS two'), [{ two: 2 }]);
  await db.close();
});

test('a write queued behind a running transaction, aborted, rejects at once and never lands', { timeout: 10_000 }, async () => {
  const db = await fresh();
  const release = deferred();
  const started = deferred();
  const txp = db.transaction(async (tx) => {
    await tx.execute("INSERT INTO t(v) VALUES ('tx')");
    started.resolve();
    await release.promise;
  });
  await started.promise;
  const ac = new AbortController();
  const insert = db.execute("INSERT INTO t(v) VALUES ('aborted insert')", [], { signal: ac.signal });
  const batch = db.executeBatch('INSERT INTO t(v) VALUES (?)', [['aborted batch 1'], ['aborted batch 2']], { signal: ac.signal });
  const kept = db.execute("INSERT INTO t(v) VALUES ('kept')", [], { signal: new AbortController().signal });
  await sleep(10);
  const reason = new Error('changed my mind');
  ac.abort(reason);
  for (const p of [insert, batch]) {
    const s = await settled(p, 'the aborted queued write', 1000);
    assert.equal(s.state, 'rejected');
    assert.equal(s.reason, reason);
  }
  release.resolve();
  await txp;
  await kept;
  const rows = (await db.select('SELECT v FROM t ORDER BY rowid')).map((r) => r.v);
  assert.deepEqual(rows, ['tx', 'kept'], 'the aborted writes never ran');
  await db.close();
});

// ---- aborted while running ----

test('aborting a running runaway read: it rejects with signal.reason (not SQLITE_INTERRUPT) and the reader serves the next query', {
  timeout: 10_000,
}, async () => {
  const db = await fresh({ readers: 1 });
  for (const method of ['select', 'selectOne', 'selectBytes']) {
    const ac = new AbortController();
    const p = db[method](RUNAWAY, [], { signal: ac.signal });
    await sleep(30);
    const reason = new Error(`stop ${method}`);
    ac.abort(reason);
    const s = await settled(p, `aborted ${method}`, 1000);
    assert.equal(s.state, 'rejected');
    assert.equal(s.reason, reason);
    assert.deepEqual(await db.select('SELECT 3 AS three'), [{ three: 3 }], `the reader is usable after ${method}`);
  }
  await db.close();
});

test('aborting a running long write: it rejects with signal.reason and nothing of it remains', { timeout: 20_000 }, async () => {
  const db = await fresh();
  for (const sql of [LONG_INSERT, RUNAWAY_WRITE]) {
    const ac = new AbortController();
    const p = db.execute(sql, [], { signal: ac.signal });
    await sleep(50);
    const reason = new Error('stop the write');
    ac.abort(reason);
    const s = await settled(p, 'the aborted write', 2000);
    assert.equal(s.state, 'rejected', 'the write was interrupted');
    assert.equal(s.reason, reason);
    assert.equal(await count(db), 0, `nothing of "${sql.slice(0, 30)}..." was inserted`);
  }
  // A long batch (one transaction) too.
  const sets = Array.from({ length: 1_000_000 }, (_, i) => [i]);
  const ac = new AbortController();
  const batch = db.executeBatch('INSERT INTO t(v) VALUES (?)', sets, { signal: ac.signal });
  await sleep(20);
  const reason = new Error('stop the batch');
  ac.abort(reason);
  const s = await settled(batch, 'the aborted batch', 5000);
  if (s.state === 'fulfilled') {
    // It finished before the abort reached it: then all of it stands.
    assert.equal(await count(db), sets.length);
  } else {
    assert.equal(s.reason, reason);
    assert.equal(await count(db), 0, 'nothing of the batch was inserted');
  }
  // The writer takes the next write.
  await db.execute("INSERT INTO t(v) VALUES ('after')");
  assert.equal((await db.selectOne('SELECT v FROM t WHERE v = ?', ['after'])).v, 'after');
  await db.close();
});

// ---- timeouts ----

test('timeoutMs rejects with a TimeoutError DOMException, like AbortSignal.timeout()', { timeout: 10_000 }, async () => {
  const db = await fresh({ readers: 1 });
  for (const [what, p] of [
    ['select', db.select(RUNAWAY, [], { timeoutMs: 30 })],
    ['selectBytes', db.selectBytes(RUNAWAY, [], { timeoutMs: 30 })],
    ['execute', db.execute(RUNAWAY_WRITE, [], { timeoutMs: 30 })],
  ]) {
    const s = await settled(p, `${what} with timeoutMs`, 2000);
    assert.equal(s.state, 'rejected');
    assert.ok(s.reason instanceof DOMException, `${what}: ${s.reason}`);
    assert.equal(s.reason.name, 'TimeoutError');
  }
  assert.equal(await count(db), 0);
  assert.deepEqual(await db.select('SELECT 1 AS one'), [{ one: 1 }]);
  await db.close();
});

test('Database.open({ timeoutMs }) is the default of every query; a call overrides it; 0/null/Infinity mean none', {
  timeout: 20_000,
}, async () => {
  const db = await fresh({ timeoutMs: 40, readers: 1 });
  const s = await settled(db.select(RUNAWAY), 'a runaway read under the default timeout', 2000);
  assert.equal(s.reason?.name, 'TimeoutError');
  const w = await settled(db.execute(RUNAWAY_WRITE), 'a runaway write under the default timeout', 2000);
  assert.equal(w.reason?.name, 'TimeoutError');
  const t = await settled(db.transaction((tx) => tx.select(RUNAWAY)), 'a runaway read in a transaction', 2000);
  assert.equal(t.reason?.name, 'TimeoutError', 'the default applies inside transactions too');
  // A query that takes far longer than 40 ms (millions of steps) but ends.
  const slow = 'WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x < 3000000) SELECT count(*) AS n FROM c';
  for (const none of [0, null, Infinity]) {
    assert.deepEqual(await db.select(slow, [], { timeoutMs: none }), [{ n: 3000000 }], `timeoutMs: ${none}`);
  }
  assert.deepEqual(await db.select(slow, [], { timeoutMs: 600_000 }), [{ n: 3000000 }], 'a longer per-call timeout');
  assert.equal(await count(db), 0);
  await db.close();
});

// ---- transactions ----

test("a transaction's signal interrupts its running statement at once, rolls back, and nothing commits", { timeout: 10_000 }, async () => {
  const db = await fresh();
  for (const runaway of [(tx) => tx.select(RUNAWAY), (tx) => tx.execute(RUNAWAY_WRITE), (tx) => db.selectOne(RUNAWAY)]) {
    const ac = new AbortController();
    const running = deferred();
    const txp = db.transaction(
      async (tx) => {
        await tx.execute("INSERT INTO t(v) VALUES ('in tx')");
        running.resolve();
        await runaway(tx);
        await tx.execute("INSERT INTO t(v) VALUES ('after runaway')");
      },
      { signal: ac.signal },
    );
    await running.promise;
    await sleep(30);
    const reason = new Error('abort the transaction');
    ac.abort(reason);
    const s = await settled(txp, 'the aborted transaction', 2000);
    assert.equal(s.state, 'rejected');
    assert.equal(s.reason, reason);
    assert.equal(await count(db), 0, 'nothing of the transaction committed');
  }
  // The writer is free: the next transaction commits.
  await db.transaction((tx) => tx.execute("INSERT INTO t(v) VALUES ('next')"));
  assert.equal(await count(db), 1);
  await db.close();
});

test("a nested transaction's signal interrupts the statement running in it", { timeout: 10_000 }, async () => {
  const db = await fresh();
  const ac = new AbortController();
  const reason = new Error('abort the savepoint');
  const result = await db.transaction(async (tx) => {
    await tx.execute("INSERT INTO t(v) VALUES ('outer')");
    const inner = tx.transaction((sp) => sp.select(RUNAWAY), { signal: ac.signal });
    setTimeout(() => ac.abort(reason), 30);
    const s = await settled(inner, 'the aborted savepoint', 2000);
    assert.equal(s.reason, reason);
    return (await tx.select('SELECT v FROM t')).map((r) => r.v);
  });
  assert.deepEqual(result, ['outer']);
  assert.equal(await count(db), 1);
  await db.close();
});

test('a body that aborts its own signal before its first await rejects with the reason and commits nothing', async () => {
  const db = await fresh();
  try {
    for (const nested of [false, true]) {
      const ctrl = new AbortController();
      const reason = new Error(`stop ${nested ? 'nested' : 'outer'}`);
      const run = (tx) => {
        // Queued before the abort, in the same tick: the writes must not survive it.
        const pending = tx.execute('INSERT INTO t(v) VALUES (1)');
        ctrl.abort(reason);
        pending.catch(() => {});
        return 'done';
      };
      const outcome = nested
        ? db.transaction((tx) => tx.transaction(run, { signal: ctrl.signal }).catch((e) => ({ inner: e })))
        : db.transaction(run, { signal: ctrl.signal });
      const s = await settled(outcome, 'the transaction');
      if (nested) {
        assert.equal(s.state, 'fulfilled');
        assert.equal(s.value.inner, reason);
      } else {
        assert.equal(s.state, 'rejected');
        assert.equal(s.reason, reason);
      }
      assert.equal(await count(db), 0);
    }
  } finally {
    await db.close();
  }
});

test('a write inside a transaction aborted by its own signal: SQLite rolls the transaction back, so nothing more runs in it and nothing commits', {
  timeout: 10_000,
}, async () => {
  const db = await fresh();
  const reason = new Error('stop this statement');
  let later;
  const txp = db.transaction(async (tx) => {
    await tx.execute("INSERT INTO t(v) VALUES ('before')");
    const ac = new AbortController();
    setTimeout(() => ac.abort(reason), 30);
    await assert.rejects(tx.execute(RUNAWAY_WRITE, [], { signal: ac.signal }), (e) => e === reason);
    later = await tx.execute("INSERT INTO t(v) VALUES ('after')").catch((e) => e);
  });
  const s = await settled(txp, 'the transaction', 2000);
  assert.ok(later instanceof SqliteError, `a statement after the interrupted one fails: ${later}`);
  assert.equal(later.code, 'SQLITE_ABORT_ROLLBACK');
  assert.equal(s.state, 'rejected', 'its commit fails');
  assert.equal(s.reason.code, 'SQLITE_ABORT_ROLLBACK');
  assert.equal(await count(db), 0);
  await db.transaction((tx) => tx.execute("INSERT INTO t(v) VALUES ('next')"));
  assert.equal(await count(db), 1);
  await db.close();
});

// ---- closing ----

test('close({ force: true }) finishes with runaway statements on every reader, the spare and the writer', { timeout: 10_000 }, async () => {
  const db = await fresh({ readers: 2 });
  const runaways = [db.select(RUNAWAY), db.selectOne(RUNAWAY), db.execute(RUNAWAY_WRITE)];
  await sleep(30);
  // Both readers are in long statements: this one goes to the spare reader, so that the
  // queued read can only wait in the queue.
  runaways.push(db.selectBytes(RUNAWAY_FOR_SPARE));
  await sleep(30);
  const queued = [db.select('SELECT 1'), db.execute("INSERT INTO t(v) VALUES ('queued')")];
  for (const p of [...runaways, ...queued]) p.catch(() => {});
  await sleep(50);
  const closed = await settled(db.close({ force: true }), 'close({ force: true })', 3000);
  assert.equal(closed.state, 'fulfilled');
  for (const p of [...runaways, ...queued]) {
    const s = await settled(p, 'a request cut off by the forced close', 1000);
    assert.equal(s.state, 'rejected');
    assert.equal(s.reason.code, CLOSED, `${s.reason}`);
  }
});

test('a plain close() waits behind a runaway statement; close({ force: true }) then ends it', { timeout: 10_000 }, async () => {
  const file = tmp.file();
  const db = await Database.open(file);
  await db.execute('CREATE TABLE t(v)');
  const runaway = db.execute(RUNAWAY_WRITE);
  runaway.catch(() => {});
  await sleep(30);
  const plain = db.close();
  assert.equal((await settleWithin(plain, 200)).state, 'pending', 'a plain close waits for the running statement');
  const forced = db.close({ force: true });
  assert.equal(forced, plain, 'close() returns the one closing promise');
  assert.equal((await settled(forced, 'the forced close')).state, 'fulfilled');
  assert.equal((await settled(runaway, 'the runaway')).reason?.code, CLOSED);
  const again = await Database.open(file);
  assert.equal(await count(again), 0);
  await again.close();
});

test('close({ force: true }) during a runaway statement inside a transaction body rolls it back and finishes', { timeout: 10_000 }, async () => {
  const file = tmp.file();
  const db = await Database.open(file);
  await db.execute('CREATE TABLE t(v)');
  const running = deferred();
  const txp = db.transaction(async (tx) => {
    await tx.execute("INSERT INTO t(v) VALUES ('in tx')");
    running.resolve();
    await tx.select(RUNAWAY);
  });
  txp.catch(() => {});
  await running.promise;
  await sleep(30);
  assert.equal((await settled(db.close({ force: true }), 'the forced close')).state, 'fulfilled');
  assert.equal((await settled(txp, 'the transaction')).reason?.code, CLOSED);
  const again = await Database.open(file);
  assert.equal(await count(again), 0);
  await again.close();
});

// ---- races ----

test('1000 requests with random abort times: every promise settles with its result or its own reason, never another request\'s interruption', {
  timeout: 60_000,
}, async () => {
  const db = await fresh({ readers: 2 });
  const medium = 'WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x < ?) SELECT count(*) AS n FROM c';
  const requests = [];
  // In waves of 50, so that many aborts find their request running rather than queued.
  for (let i = 0; i < 1000; i++) {
    if (i % 50 === 0 && i > 0) await Promise.allSettled(requests.slice(-50).map((r) => r.p));
    const ac = new AbortController();
    const reason = new Error(`abort ${i}`);
    const aborted = i % 3 !== 0; // a third are never aborted
    const signalled = i % 6 !== 0; // some have no signal at all
    const options = signalled ? { signal: ac.signal } : undefined;
    const n = 1 + ((i * 7919) % 20000);
    let p;
    let expect;
    switch (i % 4) {
      case 0:
      case 1:
        p = db.select(medium, [n], options);
        expect = (v) => assert.deepEqual(v, [{ n }]);
        break;
      case 2:
        p = db.execute('INSERT INTO t(v) VALUES (?)', [i], options);
        expect = (v) => assert.equal(v.changes, 1);
        break;
      default:
        p = db.executeBatch('INSERT INTO t(v) VALUES (?)', [[i], [-i - 1]], options);
        expect = (v) => assert.equal(v.changes, 2);
    }
    if (aborted && signalled) setTimeout(() => ac.abort(reason), Math.random() * 15);
    requests.push({ i, p, aborted: aborted && signalled, reason, expect, kind: i % 4 });
  }
  const outcomes = await settled(Promise.allSettled(requests.map((r) => r.p)), 'all 1000 requests', 30_000);
  let abortedCount = 0;
  const landed = new Set();
  for (const [k, o] of outcomes.value.entries()) {
    const r = requests[k];
    if (o.status === 'fulfilled') {
      r.expect(o.value);
      if (r.kind === 2) landed.add(r.i);
      if (r.kind === 3) landed.add(r.i).add(-r.i - 1);
    } else {
      assert.ok(r.aborted, `request ${r.i} was not aborted but rejected with ${o.reason}`);
      assert.equal(o.reason, r.reason, `request ${r.i} rejected with another reason: ${o.reason}`);
      abortedCount++;
    }
  }
  assert.ok(abortedCount > 0, 'some aborts took effect');
  // A write that rejected left nothing; a write that resolved is there.
  const rows = new Set((await db.select('SELECT v FROM t')).map((r) => r.v));
  assert.deepEqual([...rows].sort((a, b) => a - b), [...landed].sort((a, b) => a - b));
  await db.close();
});

test('a nested transaction whose signal aborts while its SAVEPOINT is on the writer never runs its body', { timeout: 5000 }, async () => {
  const db = await tmp.open();
  try {
    await db.execute('CREATE TABLE t(v)');
    const seen = await db.transaction(async (tx) => {
      const ac = new AbortController();
      let ran = false;
      const nested = tx.transaction(() => {
        ran = true;
      }, { signal: ac.signal });
      // The nested call has sent its SAVEPOINT and waits for it (a few microtask turns in).
      await null;
      await null;
      await null;
      ac.abort(new Error('aborted during the savepoint'));
      const outcome = await nested.then(
        () => 'resolved',
        (e) => e.message,
      );
      return { outcome, ran };
    });
    assert.deepEqual(seen, { outcome: 'aborted during the savepoint', ran: false });
  } finally {
    await db.close();
  }
});

test('a signal that a getter of the params aborts while the call sends them cancels the call', { timeout: 5000 }, async () => {
  const db = await tmp.open();
  try {
    const ac = new AbortController();
    const reason = new Error('aborted by a getter');
    const params = {
      get a() {
        ac.abort(reason);
        return 1;
      },
    };
    // The params are converted while the read is sent, before its signal is watched: the
    // abort event has fired by then, and the read must still reject with its reason.
    const outcome = await db.select('SELECT :a AS a', params, { signal: ac.signal }).then(
      (rows) => rows,
      (e) => e,
    );
    assert.equal(outcome, reason);
  } finally {
    await db.close();
  }
});

test('a point read answers while every reader runs a query that never ends (the spare reader)', { timeout: 15000 }, async () => {
  const db = await fresh({ readers: 2 });
  const ac = new AbortController();
  const runaways = [db.select(RUNAWAY, [], { signal: ac.signal }), db.select(RUNAWAY, [], { signal: ac.signal })];
  // Both readers take theirs and run them past a point query's length first.
  await sleep(50);
  assert.deepEqual(await within(db.selectOne('SELECT 42 AS v'), 'the point read', 5000), { v: 42 });
  assert.deepEqual(await within(db.select('SELECT count(*) AS n FROM t'), 'a second read', 5000), [{ n: 0 }]);
  ac.abort();
  for (const r of runaways) {
    const s = await settled(r, 'a runaway read');
    assert.equal(s.state, 'rejected');
    assert.equal(s.reason.name, 'AbortError');
  }
  await db.close();
});

test('a signal that only looks like an AbortSignal is refused before anything runs; a real one is used through Node alone', async () => {
  const db = await fresh();
  const fake = Object.create(AbortSignal.prototype, {
    aborted: { value: false },
    addEventListener: { value() { throw new Error('listener refused'); } },
    removeEventListener: { value() {} },
  });
  await assert.rejects(db.execute('INSERT INTO t VALUES (1)', [], { signal: fake }), { name: 'TypeError', message: 'signal must be an AbortSignal' });
  await assert.rejects(db.select('SELECT 1', [], { signal: fake }), TypeError);
  await assert.rejects(db.transaction(async () => {}, { signal: fake }), TypeError);
  await assert.rejects(db.begin({ signal: fake }), TypeError);
  assert.throws(() => db.iterate('SELECT 1', [], { signal: fake }), TypeError);
  assert.throws(() => db.stream('SELECT 1', [], { signal: fake }), TypeError);
  assert.equal(await count(db), 0, 'nothing was written');
  // Real signals whose properties say otherwise: what counts is what Node knows of them.
  const shadowed = new AbortController();
  shadowed.signal.addEventListener = () => {
    throw new Error('listener refused');
  };
  Object.defineProperty(shadowed.signal, 'aborted', { value: true });
  assert.deepEqual(await db.execute('INSERT INTO t VALUES (1)', [], { signal: shadowed.signal }), { changes: 1, lastInsertRowid: 1, rows: [] });
  await db.transaction(async (tx) => tx.execute('INSERT INTO t VALUES (2)'), { signal: shadowed.signal });
  const stopped = db.select(RUNAWAY, [], { signal: shadowed.signal });
  setTimeout(() => shadowed.abort(new Error('stop')), 20);
  await assert.rejects(settled(stopped, 'the aborted read').then((s) => (s.state === 'rejected' ? Promise.reject(s.reason) : s.value)), /stop/);
  assert.equal(await count(db), 2);
  // A real signal, whose methods a getter of the call's own parameters replaces while the
  // request is sent: the call still settles with its statement's outcome.
  const real = new AbortController().signal;
  const params = [0, 0];
  Object.defineProperty(params, 1, {
    enumerable: true,
    get() {
      real.addEventListener = () => { throw new Error('listener refused'); };
      Object.defineProperty(real, 'aborted', { value: true });
      return 2;
    },
  });
  const r = await settled(db.execute('INSERT INTO t(v) SELECT ? + ?', params, { signal: real }), 'the call');
  assert.equal(r.state, 'fulfilled', String(r.reason ?? ''));
  assert.equal(await count(db), 3);
  // Node reads `aborted` through the property when a listener goes on a signal of
  // AbortSignal.timeout() or .any(): a getter that throws there, put on it while the request
  // is sent, must not make a call that ran reject.
  for (const signal of [AbortSignal.timeout(60_000), AbortSignal.any([new AbortController().signal])]) {
    const sabotaged = [0, 0];
    Object.defineProperty(sabotaged, 1, {
      enumerable: true,
      get() {
        Object.defineProperty(signal, 'aborted', {
          get() {
            throw new Error('aborted refused');
          },
        });
        return 1;
      },
    });
    const s2 = await settled(db.execute('INSERT INTO t(v) SELECT ? + ?', sabotaged, { signal }), 'the call');
    assert.equal(s2.state, 'fulfilled', String(s2.reason ?? ''));
  }
  assert.equal(await count(db), 5);
  await db.close();
});
