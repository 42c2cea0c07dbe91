// Bounded inline reads (issue 11, `inlineReads`): a read runs on the JS thread's own
// connection under a budget, else on a reader. Every answer must be the one a reader gives.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { Database } from '../dist/index.js';
import { exitIfStuck, scratch, sleep } from './fixtures/tx-helpers.mjs';

const tmp = scratch('inline39');
exitIfStuck();
setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc');
const HEAVY = 'WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < 1000000) SELECT count(*) AS n FROM c';

async function counts(db) {
  const d = await db.diagnostics();
  return { reads: d.inlineReads, fallbacks: d.inlineFallbacks };
}

async function filled(options) {
  const path = tmp.file();
  const db = await tmp.open(path, options);
  await db.execute('CREATE TABLE t(id INTEGER PRIMARY KEY, s TEXT, r REAL, b BLOB, big INTEGER, n)');
  await db.executeBatch('INSERT INTO t(s, r, b, big, n) VALUES (?, ?, ?, ?, ?)', [
    ['plain', 1.5, Buffer.from([0, 1, 2, 255]), 2n ** 62n, null],
    ['ünïcødé ✓ 𝄞 日本', -0.25, Buffer.alloc(0), -5, 7],
    ['', 1e300, Buffer.from('x'), 9007199254740993n, 'text'],
  ]);
  return { path, db };
}

test('inline answers are identical to a reader\'s, in every format and mode', async () => {
  const { path, db: on } = await filled({ inlineReads: true });
  const off = await tmp.open(path);
  const onBig = await tmp.open(path, { inlineReads: { budgetUs: 200 }, intMode: 'bigint' });
  const offBig = await tmp.open(path, { intMode: 'bigint' });
  const sql = 'SELECT * FROM t WHERE id >= ? ORDER BY id';
  const calls = [
    (db) => db.select(sql, [1]),
    (db) => db.select(sql, [1], { rowMode: 'array' }),
    (db) => db.selectOne(sql, [2]),
    (db) => db.selectOne(sql, [99]),
    (db) => db.select(sql, [99]),
    (db) => db.selectBytes(sql, [1]),
    (db) => db.select('SELECT id, s AS a, s AS a FROM t WHERE s = :s', { s: 'plain' }, { rowMode: 'array' }),
    // A statement's first call also sends its description: that call goes to a reader (a
    // request is in flight); the second runs inline.
    (db) => statementOf(db).select(),
    (db) => statementOf(db).select(),
  ];
  const statements = new Map();
  const statementOf = (db) => {
    if (!statements.has(db)) statements.set(db, db.prepare('SELECT b, n FROM t ORDER BY id'));
    return statements.get(db);
  };
  for (const [i, call] of calls.entries()) {
    assert.deepEqual(await call(on), await call(off), `call ${i}`);
    assert.deepEqual(await call(onBig), await call(offBig), `call ${i}, bigint`);
  }
  assert.equal((await counts(on)).reads, calls.length - 1);
  assert.equal((await counts(onBig)).reads, calls.length - 1);
  assert.deepEqual(await counts(off), { reads: 0, fallbacks: 0 });
  // intMode 'number' meeting an integer beyond 2^53 rejects the same way.
  const onNumber = await tmp.open(path, { inlineReads: true, intMode: 'number' });
  const offNumber = await tmp.open(path, { intMode: 'number' });
  const e1 = await onNumber.select('SELECT big FROM t').catch((e) => e);
  const e2 = await offNumber.select('SELECT big FROM t').catch((e) => e);
  assert.ok(e1 instanceof RangeError, String(e1));
  assert.equal(e1.message, e2.message);
  assert.equal((await counts(onNumber)).reads, 1);
});

test('inline results do not share memory: small and large ones, one after another', async () => {
  const { path, db: on } = await filled({ inlineReads: { budgetUs: 5000 } });
  const off = await tmp.open(path);
  const sql = 'SELECT ? AS id, zeroblob(?) AS z, ? AS b, printf(\'%.*c\', ?, \'x\') AS s';
  const sizes = [4, 100, 20_000, 3, 40_000, 10];
  const kept = [];
  for (const [i, n] of sizes.entries()) {
    const params = [i, n, Buffer.from([i, i + 1]), n];
    const a = await on.selectOne(sql, params);
    assert.deepEqual(a, await off.selectOne(sql, params), `size ${n}`);
    kept.push([a, { ...a, z: Buffer.from(a.z), b: Buffer.from(a.b) }]);
  }
  for (const [a, copy] of kept) assert.deepEqual(a, copy, 'a later read changed an earlier result');
  assert.equal((await counts(on)).reads, sizes.length);
});

test('a query over budget falls back to a reader, and is not tried inline for its next calls', async () => {
  const db = await tmp.open(undefined, { inlineReads: true });
  assert.deepEqual(await db.selectOne(HEAVY), { n: 1000000 });
  assert.deepEqual(await counts(db), { reads: 0, fallbacks: 1 });
  for (let i = 0; i < 3; i++) assert.deepEqual(await db.selectOne(HEAVY), { n: 1000000 });
  assert.deepEqual(await counts(db), { reads: 0, fallbacks: 1 }, 'remembered: skipped inline');
  // Other statements still run inline, and the connection was left usable.
  assert.deepEqual(await db.selectOne('SELECT 41 + 1 AS x'), { x: 42 });
  assert.deepEqual(await counts(db), { reads: 1, fallbacks: 1 });
});

test("a read that goes over budget binds the parameters the inline attempt read: the caller's getters run once", async () => {
  const db = await tmp.open(undefined, { inlineReads: true });
  // Each read of element 0 answers differently, and the second read throws.
  let reads = 0;
  const params = [];
  Object.defineProperty(params, 0, {
    enumerable: true,
    get() {
      if (++reads === 2) throw new Error('read twice');
      return reads;
    },
  });
  const heavy = 'SELECT ?1 AS v, (' + HEAVY.replace(' AS n', '') + ') AS n';
  assert.deepEqual(await db.selectOne(heavy, params), { v: 1, n: 1000000 });
  assert.equal(reads, 1);
  assert.deepEqual(await counts(db), { reads: 0, fallbacks: 1 });
  // A failing statement's error is the reader's, from parameters read once.
  reads = 0;
  await assert.rejects(db.selectOne("SELECT ?1 AS v, json('{bad') AS j", params), (err) => err.code === 'SQLITE_ERROR');
  assert.equal(reads, 1);
  await db.close();
});

test('reads see the writes before them; inside a transaction body they go to the writer', async () => {
  const db = await tmp.open(undefined, { inlineReads: true });
  await db.execute('CREATE TABLE k(v)');
  assert.equal((await db.selectOne('SELECT count(*) AS n FROM k')).n, 0);
  await db.execute('INSERT INTO k VALUES (1)');
  assert.equal((await db.selectOne('SELECT count(*) AS n FROM k')).n, 1);
  await db.transaction(async (tx) => {
    await tx.execute('INSERT INTO k VALUES (2)');
    const before = (await counts(db)).reads;
    assert.equal((await db.selectOne('SELECT count(*) AS n FROM k')).n, 2, 'sees the uncommitted write');
    assert.equal((await counts(db)).reads, before, 'not inline');
  });
  assert.equal((await db.selectOne('SELECT count(*) AS n FROM k')).n, 2);
  assert.equal((await counts(db)).reads, 3);
});

test('errors are the reader path\'s: same class, message and code', async () => {
  const { path, db: on } = await filled({ inlineReads: true });
  const off = await tmp.open(path);
  const bad = [
    ['SELEC 1', []],
    ['SELECT * FROM nowhere', []],
    ['INSERT INTO t(s) VALUES (1)', []],
    ['SELECT ?', [1, 2]],
    ['SELECT :a', { b: 1 }],
    ['SELECT ?', [Symbol('no')]],
    ['SELECT ?', [{ not: 'a value' }]],
    ['SELECT 1; SELECT 2', []],
    ['   ', []],
  ];
  for (const [sql, params] of bad) {
    const a = await on.select(sql, params).then(() => assert.fail(`${sql} resolved`), (e) => e);
    const b = await off.select(sql, params).then(() => assert.fail(`${sql} resolved`), (e) => e);
    assert.equal(a.constructor, b.constructor, sql);
    assert.equal(a.message, b.message, sql);
    assert.equal(a.code, b.code, sql);
  }
  assert.equal((await counts(on)).reads, 0);
  // An aborted signal still rejects without running.
  const reason = new Error('stop');
  await assert.rejects(on.select('SELECT 1', [], { signal: AbortSignal.abort(reason) }), (e) => e === reason);
  assert.equal((await counts(on)).reads, 0);
});

test('encrypted: inline reads before and after rekey use the key the file has', async () => {
  const path = tmp.file();
  const db = await tmp.open(path, { encryptionKey: 'first key', inlineReads: true });
  await db.execute('CREATE TABLE e(v); INSERT INTO e VALUES (\'secret\')');
  assert.deepEqual(await db.selectOne('SELECT v FROM e'), { v: 'secret' });
  await db.rekey('second key');
  assert.deepEqual(await db.selectOne('SELECT v FROM e'), { v: 'secret' });
  await db.rekey(null);
  assert.deepEqual(await db.selectOne('SELECT v FROM e'), { v: 'secret' });
  assert.equal((await counts(db)).reads, 3);
  await db.close();
  const plain = await tmp.open(path);
  assert.deepEqual(await plain.selectOne('SELECT v FROM e'), { v: 'secret' });
  await plain.close();
  // A plaintext file with the inline connection open can be encrypted (that leaves WAL
  // mode, which needs the file to itself).
  const again = await tmp.open(path, { inlineReads: true });
  assert.deepEqual(await again.selectOne('SELECT v FROM e'), { v: 'secret' });
  const pending = again.rekey('third key');
  const during = again.selectOne('SELECT v FROM e');
  await pending;
  assert.deepEqual(await during, { v: 'secret' });
  assert.deepEqual(await again.selectOne('SELECT v FROM e'), { v: 'secret' });
  await again.close();
  const keyed = await tmp.open(path, { encryptionKey: 'third key' });
  assert.deepEqual(await keyed.selectOne('SELECT v FROM e'), { v: 'secret' });
});

test('close() closes the inline connection: no descriptor stays, later reads reject as before', async () => {
  const fds = () => readdirSync('/proc/self/fd').length;
  const path = tmp.file();
  const seed = await Database.open(path);
  await seed.execute('CREATE TABLE c(v); INSERT INTO c VALUES (1)');
  await seed.close();
  const before = fds();
  const db = await Database.open(path, { inlineReads: true });
  assert.deepEqual(await db.selectOne('SELECT v FROM c'), { v: 1 });
  assert.equal((await counts(db)).reads, 1);
  await db.close();
  assert.equal(fds(), before);
  const off = await Database.open(path);
  await off.close();
  const a = await db.select('SELECT v FROM c').catch((e) => e);
  const b = await off.select('SELECT v FROM c').catch((e) => e);
  assert.equal(a.code, 'ERR_QUIETSQLITE_CLOSED');
  assert.equal(a.message, b.message);
});

test('reads issued together run on the readers, in parallel; the first of them inline', async () => {
  const db = await tmp.open(undefined, { inlineReads: true });
  const rows = await Promise.all(Array.from({ length: 8 }, (_, i) => db.selectOne('SELECT ? AS i', [i])));
  assert.deepEqual(rows.map((r) => r.i), [0, 1, 2, 3, 4, 5, 6, 7]);
  assert.equal((await counts(db)).reads, 1);
  // Sequential awaits each run inline.
  for (let i = 0; i < 5; i++) assert.deepEqual(await db.selectOne('SELECT ? AS i', [i]), { i });
  assert.equal((await counts(db)).reads, 6);
});

test('a deserialized copy and a read-only database read inline too', async () => {
  const { path, db } = await filled({ inlineReads: true });
  const bytes = await db.serialize();
  const copy = await Database.deserialize(bytes, { inlineReads: true });
  assert.equal((await copy.selectOne('SELECT count(*) AS n FROM t')).n, 3);
  assert.equal((await counts(copy)).reads, 1);
  await copy.close();
  await db.close();
  const ro = await tmp.open(path, { readonly: true, inlineReads: true });
  assert.equal((await ro.selectOne('SELECT count(*) AS n FROM t')).n, 3);
  assert.equal((await counts(ro)).reads, 1);
});

test('a database collected without close() closes its inline connection too', async () => {
  const fds = () => readdirSync('/proc/self/fd').length;
  const before = fds();
  await (async () => {
    const db = await Database.open(':memory:', { inlineReads: true });
    assert.deepEqual(await db.selectOne('SELECT 1 AS one'), { one: 1 });
    assert.equal((await counts(db)).reads, 1);
  })();
  for (let i = 0; i < 200 && fds() > before; i++) {
    gc();
    await sleep(20);
  }
  assert.equal(fds(), before);
});

test('inlineReads is validated', async () => {
  for (const v of ['yes', 1, null, [], { budget: 5 }, { budgetUs: '5' }]) {
    await assert.rejects(Database.open(tmp.file(), { inlineReads: v }), TypeError, String(v));
  }
  for (const us of [0, -1, 1.5, 10_001, Infinity, NaN]) {
    await assert.rejects(Database.open(tmp.file(), { inlineReads: { budgetUs: us } }), RangeError, String(us));
  }
  for (const v of [false, true, { budgetUs: 1 }, { budgetUs: 10_000 }]) {
    const db = await Database.open(':memory:', { inlineReads: v });
    assert.deepEqual(await db.selectOne('SELECT 1 AS one'), { one: 1 });
    assert.equal((await counts(db)).reads, v === false ? 0 : 1);
    await db.close();
  }
});

test('with a user function registered, reads go to the readers (a function calls back into JS)', async () => {
  const db = await tmp.open(undefined, { inlineReads: true });
  assert.deepEqual(await db.selectOne('SELECT 1 AS x'), { x: 1 });
  db.function('twice', (x) => x * 2);
  assert.deepEqual(await db.selectOne('SELECT twice(21) AS x'), { x: 42 });
  assert.deepEqual(await db.selectOne('SELECT 2 AS x'), { x: 2 });
  assert.deepEqual(await counts(db), { reads: 1, fallbacks: 0 });
});

test('a parameter getter that closes or re-keys the database during an inline read: no panic, every call settles, the database closes', async () => {
  // The inline connection was borrowed while the parameters were converted; close() and
  // rekey() from a getter panicked ("RefCell already borrowed"), and the database could
  // never be closed (its threads stayed).
  for (const act of ['close', 'force', 'rekey']) {
    const db = await tmp.open(undefined, { inlineReads: true, readers: 1 });
    await db.execute('CREATE TABLE t(x)');
    await db.execute('INSERT INTO t VALUES (1)');
    assert.deepEqual(await db.select('SELECT x FROM t WHERE x = ?', [1]), [{ x: 1 }]);
    let side;
    const params = {
      get x() {
        side = act === 'rekey' ? db.rekey('k') : db.close(act === 'force' ? { force: true } : undefined);
        return 1;
      },
    };
    const read = await db.select('SELECT x FROM t WHERE x = :x', params).then((v) => ({ v }), (e) => ({ e }));
    const sideOutcome = await side.then(() => 'ok', (e) => e);
    assert.notEqual(read.e?.code, 'ERR_QUIETSQLITE_INTERNAL', `${act}: ${read.e?.message}`);
    assert.equal(sideOutcome, 'ok', `${act}: ${sideOutcome?.message}`);
    if (act === 'rekey') {
      assert.deepEqual(await db.select('SELECT x FROM t'), [{ x: 1 }]);
      await db.close();
    }
    assert.equal(db.isOpen, false);
  }
});

test('an awaited loop of inline reads lets the event loop turn as a loop of reader reads does', async () => {
  // An inline read's promise is resolved at once: a loop awaiting them never let timers or
  // I/O run until it ended. They count toward the same limit of results per turn now.
  const { db } = await filled({ inlineReads: true });
  let turns = 0;
  let stop = false;
  const tick = () => {
    turns++;
    if (!stop) setImmediate(tick);
  };
  setImmediate(tick);
  const before = await counts(db);
  let run = 0;
  let longest = 0;
  let seen = turns;
  for (let i = 0; i < 3000; i++) {
    await db.selectOne('SELECT s FROM t WHERE id = ?', [1]);
    if (turns !== seen) {
      seen = turns;
      run = 0;
    }
    longest = Math.max(longest, ++run);
  }
  stop = true;
  const after = await counts(db);
  assert.ok(after.reads - before.reads > 1500, `most reads ran inline: ${after.reads - before.reads}`);
  // 32 results per turn (the 33rd resolves after the turn), a few more when a read went over
  // budget to a reader.
  assert.ok(longest <= 40, `reads between two turns of the event loop: ${longest}`);
  await db.close();
});

test('a read whose timeout is shorter than the budget is not tried inline (no timer can fire meanwhile)', async () => {
  const { db } = await filled({ inlineReads: { budgetUs: 5000 } });
  const read = async (options) => {
    await sleep(1); // each read the first of its turn, nothing in flight
    const before = await counts(db);
    await sleep(1);
    // On a reader a short timeout may run out on a busy machine: what counts is where it ran.
    const answer = await db.selectOne('SELECT s FROM t WHERE id = 1', [], options).catch((e) => e.name);
    if (answer !== 'TimeoutError') assert.deepEqual(answer, { s: 'plain' });
    return (await counts(db)).reads - before.reads;
  };
  assert.equal(await read(undefined), 1);
  assert.equal(await read({ timeoutMs: 5 }), 1);
  assert.equal(await read({ timeoutMs: 4 }), 0);
  assert.equal(await read({ timeoutMs: 1 }), 0);
  await db.close();
  const withDefault = await filled({ inlineReads: { budgetUs: 5000 }, timeoutMs: 2 });
  await sleep(1);
  const before = await counts(withDefault.db);
  await sleep(1);
  await withDefault.db.selectOne('SELECT 1').catch((e) => assert.equal(e.name, 'TimeoutError'));
  assert.equal((await counts(withDefault.db)).reads - before.reads, 0);
  await withDefault.db.close();
});

test("the time an inline attempt took counts toward the read's timeout", async () => {
  // A read that went over the budget was sent to a reader with its whole timeout again:
  // it could take its timeout and the budget. With a timeout equal to the budget, the
  // attempt used it all: the read rejects at once, before any timer.
  const { db } = await filled({ inlineReads: { budgetUs: 10_000 } });
  await sleep(1);
  const order = [];
  const read = db
    .selectOne('WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c', [], { timeoutMs: 10 })
    .then(() => order.push('resolved'), (e) => order.push(e.name));
  setTimeout(() => order.push('timer'), 0);
  await read;
  await sleep(5);
  assert.deepEqual(order, ['TimeoutError', 'timer']);
  assert.equal((await counts(db)).fallbacks, 1);
  await db.close();
});
