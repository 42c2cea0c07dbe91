// executeBatch parameter sets: positional sets are packed in JS (docs/experiments/005);
// every value type must arrive exactly as a single execute() would bind it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { openMemory, rejectsAsync } from './fixtures/helpers.mjs';

const VALUES = [
  ['integer', 42],
  ['negative zero', -0],
  ['real', 1.5],
  ['2^63 is a REAL', 2 ** 63],
  ['safe max', Number.MAX_SAFE_INTEGER],
  ['bigint max', 9223372036854775807n],
  ['bigint min', -9223372036854775808n],
  ['true', true],
  ['false', false],
  ['null', null],
  ['undefined', undefined],
  ['empty text', ''],
  ['ascii', 'plain'],
  ['NUL inside', 'a\u0000b'],
  ['astral', 'x😀y'],
  ['accents', 'héllo wörld'],
  ['lone surrogate', 'a\ud800b'],
  ['Buffer', Buffer.from([1, 2, 3])],
  ['empty Buffer', Buffer.alloc(0)],
  ['Uint16Array', new Uint16Array([0x0102, 0x0304])],
  ['DataView', new DataView(new Uint8Array([9, 8, 7, 6]).buffer, 1, 2)],
];

test('every value type arrives through a packed batch exactly as through execute()', async (t) => {
  const db = await openMemory(t, { intMode: 'bigint' });
  await db.execute('CREATE TABLE a(k TEXT, v); CREATE TABLE b(k TEXT, v)');
  // Text of mixed widths between other values checks the UTF-16 to UTF-8 offsets.
  await db.executeBatch('INSERT INTO a VALUES (?, ?)', VALUES.map(([k, v]) => [k, v]));
  for (const [k, v] of VALUES) await db.execute('INSERT INTO b VALUES (?, ?)', [k, v]);
  const q = 'SELECT k, typeof(v) AS type, v FROM %t ORDER BY rowid';
  assert.deepStrictEqual(await db.select(q.replace('%t', 'a')), await db.select(q.replace('%t', 'b')));
});

test('a bad value is named by set and position, and nothing is written', async (t) => {
  const db = await openMemory(t);
  await db.execute('CREATE TABLE t(a, b)');
  const typeErr = await rejectsAsync(() => db.executeBatch('INSERT INTO t VALUES (?, ?)', [[1, 2], [3, { no: 1 }]]), TypeError);
  assert.match(typeErr.message, /paramSets\[1\]\[1\]/);
  const rangeErr = await rejectsAsync(() => db.executeBatch('INSERT INTO t VALUES (?, ?)', [[1, 2n ** 64n]]), RangeError);
  assert.match(rangeErr.message, /paramSets\[0\]\[1\]/);
  const countErr = await rejectsAsync(() => db.executeBatch('INSERT INTO t VALUES (?, ?)', [[1, 2], [3]]), RangeError);
  assert.match(countErr.message, /parameter set 1/);
  assert.deepStrictEqual(await db.select('SELECT * FROM t'), []);
});

test('named sets, and arrays mixed with objects, take the per-value path', async (t) => {
  const db = await openMemory(t);
  await db.execute('CREATE TABLE t(a, b)');
  const r = await db.executeBatch('INSERT INTO t VALUES (:a, :b)', [{ a: 1, b: 'x' }, { a: 2, b: 'y' }]);
  assert.equal(r.changes, 2);
  const mixed = await rejectsAsync(() => db.executeBatch('INSERT INTO t VALUES (?, ?)', [[1, 2], { a: 1 }]), RangeError);
  assert.match(mixed.message, /parameter set 1/);
  assert.deepStrictEqual(await db.select('SELECT a, b FROM t ORDER BY a'), [{ a: 1, b: 'x' }, { a: 2, b: 'y' }]);
});

test('an empty batch changes nothing and resolves', async (t) => {
  const db = await openMemory(t);
  await db.execute('CREATE TABLE t(a)');
  assert.deepStrictEqual(await db.executeBatch('INSERT INTO t VALUES (?)', []), { changes: 0 });
});

test('a review: arrays for named parameters are refused as in execute(); a set that grows while read shifts nothing; detached views bind empty', async (t) => {
  const db = await openMemory(t);
  await db.execute('CREATE TABLE p (a, b, c)');
  // `(:b, :a)` given [1, 2] was stored as b=1, a=2, silently.
  await rejectsAsync(() => db.executeBatch('INSERT INTO p (b, a) VALUES (:b, :a)', [[1, 2]]), RangeError, /named parameter ':b': pass an object/);
  assert.deepEqual(await db.executeBatch('INSERT INTO p (b, a) VALUES (:b, :a)', []), { changes: 0 });
  assert.deepEqual(await db.select('SELECT count(*) AS n FROM p'), [{ n: 0 }]);
  // A getter that pushes onto its own set while the sets are read.
  const first = [1, 10];
  Object.defineProperty(first, 2, { enumerable: true, configurable: true, get() { first.push('stray'); return 20; } });
  await db.executeBatch('INSERT INTO p VALUES (?, ?, ?)', [first, [2, 30, 40]]);
  assert.deepEqual(await db.select('SELECT a, b, c FROM p ORDER BY rowid', [], { rowMode: 'array' }), [[1, 10, 20], [2, 30, 40]]);
  // A view of a detached buffer is an empty BLOB, as execute() binds it.
  const view = new Uint8Array(new ArrayBuffer(4));
  structuredClone(view.buffer, { transfer: [view.buffer] });
  const dv = new DataView(new ArrayBuffer(4));
  structuredClone(dv.buffer, { transfer: [dv.buffer] });
  await db.executeBatch('INSERT INTO p VALUES (?, 0, 0)', [[view], [dv]]);
  assert.deepEqual(await db.select('SELECT length(a) AS n, typeof(a) AS t FROM p WHERE b = 0'), [{ n: 0, t: 'blob' }, { n: 0, t: 'blob' }]);
});

// A batch of more than 64 sets crosses in parts, sent one after another while the writer runs
// the first (docs/experiments/060-batch-in-parts.md). It must stay one request: exact values,
// one transaction, errors named by their index in the whole batch, all or nothing.

/** `n` sets cycling through every value type, each tagged with its index. */
const largeSets = (n) => Array.from({ length: n }, (_, i) => [i, VALUES[i % VALUES.length][1]]);

test('a large batch crosses in parts and arrives exactly as small batches do, in one commit', async (t) => {
  const db = await openMemory(t, { intMode: 'bigint' });
  await db.execute('CREATE TABLE a(i, v); CREATE TABLE b(i, v)');
  const sets = largeSets(20_000);
  const commits = [];
  const live = db.stream('SELECT count(*) AS n FROM a');
  const seen = (async () => {
    for await (const rows of live) {
      commits.push(rows[0].n);
      if (rows[0].n !== 0n) break;
    }
  })();
  while (commits.length === 0) await new Promise((r) => setTimeout(r, 5));
  assert.deepStrictEqual(await db.executeBatch('INSERT INTO a VALUES (?, ?)', sets), { changes: 20_000 });
  await seen;
  assert.deepStrictEqual(commits, [0n, 20_000n], 'readers saw no part before the whole batch');
  // Batches of 64 sets take the single-part path.
  for (let i = 0; i < sets.length; i += 64) await db.executeBatch('INSERT INTO b VALUES (?, ?)', sets.slice(i, i + 64));
  const q = 'SELECT i, typeof(v) AS type, v FROM %t ORDER BY rowid';
  assert.deepStrictEqual(await db.select(q.replace('%t', 'a')), await db.select(q.replace('%t', 'b')));
});

test('named sets cross in parts too, and a bad one late in the batch is named by its index', async (t) => {
  const db = await openMemory(t);
  await db.execute('CREATE TABLE t(a, b)');
  const sets = Array.from({ length: 5000 }, (_, i) => ({ a: i, b: `v${i}` }));
  assert.deepStrictEqual(await db.executeBatch('INSERT INTO t VALUES (:a, :b)', sets), { changes: 5000 });
  assert.deepStrictEqual(await db.select('SELECT count(*) AS n, sum(a) AS s FROM t'), [{ n: 5000, s: (5000 * 4999) / 2 }]);
  sets[4321] = { a: 1, b: { not: 'bindable' } };
  const err = await rejectsAsync(() => db.executeBatch('INSERT INTO t VALUES (:a, :b)', sets), TypeError);
  assert.match(err.message, /paramSets\[4321\]/);
  assert.deepStrictEqual(await db.select('SELECT count(*) AS n FROM t'), [{ n: 5000 }], 'nothing of the failed batch stayed');
});

test('a value that cannot be bound late in a large batch rejects naming it; the parts already sent are undone', async (t) => {
  const db = await openMemory(t);
  await db.execute('CREATE TABLE t(a, b)');
  const sets = largeSets(10_000).map(([i]) => [i, 'x']);
  sets[9000] = [9000, Symbol('no')];
  const typeErr = await rejectsAsync(() => db.executeBatch('INSERT INTO t VALUES (?, ?)', sets), TypeError);
  assert.match(typeErr.message, /paramSets\[9000\]\[1\]/);
  sets[9000] = [9000, 2n ** 64n];
  const rangeErr = await rejectsAsync(() => db.executeBatch('INSERT INTO t VALUES (?, ?)', sets), RangeError);
  assert.match(rangeErr.message, /paramSets\[9000\]\[1\]/);
  // A getter that throws: its own error, as the single-part path gives it.
  const boom = new Error('getter failed');
  sets[9000] = [9000, 'x'];
  Object.defineProperty(sets[8000], 1, { get() { throw boom; } });
  assert.equal(await rejectsAsync(() => db.executeBatch('INSERT INTO t VALUES (?, ?)', sets)), boom);
  sets[8000] = [8000, 'x'];
  sets[7000] = [7000];
  const countErr = await rejectsAsync(() => db.executeBatch('INSERT INTO t VALUES (?, ?)', sets), RangeError);
  assert.match(countErr.message, /^parameter set 7000:/);
  assert.deepStrictEqual(await db.select('SELECT count(*) AS n FROM t'), [{ n: 0 }]);
  // The writer is free and the same batch, mended, goes through.
  sets[7000] = [7000, 'x'];
  assert.deepStrictEqual(await db.executeBatch('INSERT INTO t VALUES (?, ?)', sets), { changes: 10_000 });
});

test('inside a transaction, a large batch that fails undoes only itself', async (t) => {
  const db = await openMemory(t);
  await db.execute('CREATE TABLE t(a UNIQUE)');
  const sets = Array.from({ length: 3000 }, (_, i) => [i + 10]);
  await db.transaction(async (tx) => {
    await tx.execute('INSERT INTO t VALUES (1)');
    sets[2500] = [1];
    const err = await rejectsAsync(() => tx.executeBatch('INSERT INTO t VALUES (?)', sets));
    assert.equal(err.code, 'SQLITE_CONSTRAINT_UNIQUE');
    sets[2500] = [{}];
    await rejectsAsync(() => tx.executeBatch('INSERT INTO t VALUES (?)', sets), TypeError, /paramSets\[2500\]\[0\]/);
    await tx.execute('INSERT INTO t VALUES (2)');
  });
  assert.deepStrictEqual(await db.select('SELECT a FROM t ORDER BY a'), [{ a: 1 }, { a: 2 }]);
});

test('a large batch cancelled while it runs leaves all of it or none of it', async (t) => {
  const db = await openMemory(t);
  await db.execute('CREATE TABLE t(a, b)');
  const sets = Array.from({ length: 200_000 }, (_, i) => [i, 'some text to write']);
  for (const how of ['signal', 'timeoutMs']) {
    const ac = new AbortController();
    const p = db.executeBatch('INSERT INTO t VALUES (?, ?)', sets, how === 'signal' ? { signal: ac.signal } : { timeoutMs: 1 });
    ac.abort(new Error('stop'));
    const outcome = await p.then((r) => r.changes, (e) => e);
    const [{ n }] = await db.select('SELECT count(*) AS n FROM t');
    if (outcome instanceof Error) assert.equal(n, 0, `${how}: rejected (${outcome.message}) yet rows stayed`);
    else assert.equal(n, 200_000, `${how}: resolved yet not every row is there`);
    await db.execute('DELETE FROM t');
  }
});

test('a large batch started by a getter while another is sent in parts: each gets exactly its own rows', async (t) => {
  const db = await openMemory(t);
  await db.execute('CREATE TABLE a(i); CREATE TABLE b(i)');
  const outer = Array.from({ length: 10_000 }, (_, i) => [i]);
  let inner;
  Object.defineProperty(outer[3000], 0, {
    get() {
      inner ??= db.executeBatch('INSERT INTO b VALUES (?)', Array.from({ length: 5000 }, (_, i) => [-i]));
      return 3000;
    },
  });
  assert.deepStrictEqual(await db.executeBatch('INSERT INTO a VALUES (?)', outer), { changes: 10_000 });
  assert.deepStrictEqual(await inner, { changes: 5000 });
  const sums = 'SELECT count(*) AS n, sum(i) AS s FROM %t';
  assert.deepStrictEqual(await db.select(sums.replace('%t', 'a')), [{ n: 10_000, s: (10_000 * 9999) / 2 }]);
  assert.deepStrictEqual(await db.select(sums.replace('%t', 'b')), [{ n: 5000, s: -(5000 * 4999) / 2 }]);
});

test('a review: a signal aborted by a getter while a large batch is sent rejects it, and nothing is written', async (t) => {
  const db = await openMemory(t);
  await db.execute('CREATE TABLE t(a)');
  for (const n of [65, 10_000]) {
    const sets = Array.from({ length: n }, (_, i) => [i]);
    const ac = new AbortController();
    const reason = new Error('stop');
    Object.defineProperty(sets[n - 1], 0, { get() { ac.abort(reason); return n - 1; } });
    assert.equal(await rejectsAsync(() => db.executeBatch('INSERT INTO t VALUES (?)', sets, { signal: ac.signal })), reason);
    assert.deepStrictEqual(await db.select('SELECT count(*) AS n FROM t'), [{ n: 0 }], `${n} sets`);
  }
  // A transaction's signal, aborted the same way, ends the batch and then the transaction.
  const ac = new AbortController();
  const sets = Array.from({ length: 1000 }, (_, i) => [i]);
  Object.defineProperty(sets[900], 0, { get() { ac.abort('tx stop'); return 900; } });
  let inner;
  const outer = await rejectsAsync(() =>
    db.transaction(async (tx) => {
      inner = await tx.executeBatch('INSERT INTO t VALUES (?)', sets).then(() => 'resolved', (e) => e);
    }, { signal: ac.signal }),
  );
  assert.equal(outer, 'tx stop');
  assert.equal(inner, 'tx stop');
  assert.deepStrictEqual(await db.select('SELECT count(*) AS n FROM t'), [{ n: 0 }]);
});

test('a review: a getter that inserts into paramSets shifts no set: each is read once, before anything is sent', async (t) => {
  const db = await openMemory(t);
  await db.execute('CREATE TABLE t(a)');
  const sets = Array.from({ length: 300 }, (_, i) => [i]);
  Object.defineProperty(sets[30], 0, { get() { sets.unshift([-1]); return 30; } });
  assert.deepStrictEqual(await db.executeBatch('INSERT INTO t VALUES (?)', sets), { changes: 300 });
  const rows = await db.select('SELECT a FROM t ORDER BY rowid', [], { rowMode: 'array' });
  assert.deepStrictEqual(rows.map(([a]) => a), Array.from({ length: 300 }, (_, i) => i));
});

test('a review: paramSets claiming a length no array has is refused before a set is read', async (t) => {
  const db = await openMemory(t);
  await db.execute('CREATE TABLE t(a)');
  for (const length of [Infinity, 2 ** 40, 2 ** 32 + 100]) {
    let reads = 0;
    const endless = new Proxy([], {
      get(target, key) {
        if (key === 'length') return length;
        if (typeof key === 'string' && /^\d+$/.test(key)) {
          if (++reads > 100_000) throw new Error('read too far');
          return [Number(key)];
        }
        return Reflect.get(target, key);
      },
    });
    await rejectsAsync(() => db.executeBatch('INSERT INTO t VALUES (?)', endless), RangeError, /length/);
    assert.equal(reads, 0);
  }
  // A sparse array is refused at its first hole, not walked to its claimed end.
  const sparse = [[1], [2]];
  sparse.length = 2 ** 32 - 1;
  await rejectsAsync(() => db.executeBatch('INSERT INTO t VALUES (?)', sparse), TypeError, /paramSets\[2\] must be an array or a plain object/);
  assert.deepStrictEqual(await db.select('SELECT count(*) AS n FROM t'), [{ n: 0 }]);
});

test('a batch BLOB binds the bytes it held when it was read, whatever a getter of a later set does to them', async (t) => {
  const db = await openMemory(t);
  await db.execute('CREATE TABLE t(k, v)');
  // A set whose second value is a getter that runs `change` when read.
  const later = (change) => {
    const set = [2];
    Object.defineProperty(set, 1, { enumerable: true, get: () => (change(), 'x') });
    return set;
  };
  const changes = {
    fill: (u) => u.fill(0xee),
    detach: (u) => structuredClone(u.buffer, { transfer: [u.buffer] }),
    shrink: (u) => u.buffer.resize(2),
  };
  for (const [name, change] of Object.entries(changes)) {
    await db.execute('DELETE FROM t');
    const u = new Uint8Array(new ArrayBuffer(4, { maxByteLength: 8 }));
    u.set([1, 2, 3, 4]);
    await db.executeBatch('INSERT INTO t VALUES (?, ?)', [[1, u], later(() => change(u))]);
    assert.deepEqual(await db.select('SELECT k, hex(v) AS v FROM t ORDER BY k'), [{ k: 1, v: '01020304' }, { k: 2, v: '78' }], name);
  }
});

test("batch BLOBs keep their bytes across growth, a batch sent from a getter, and a batch that failed to pack", async (t) => {
  const db = await openMemory(t);
  await db.execute('CREATE TABLE t(k, v)');
  const rows = async () => (await db.select('SELECT k, hex(v) AS v FROM t ORDER BY rowid')).map((r) => `${r.k}:${r.v}`);
  // Past the kept buffer's size (5 MiB in one part, past the 4 MiB kept), then small again.
  const big = Array.from({ length: 40 }, (_, i) => [i, Buffer.alloc(128 * 1024, i)]);
  await db.executeBatch('INSERT INTO t VALUES (?, ?)', big);
  const stored = await db.select('SELECT k, length(v) AS n, hex(substr(v, 131072, 1)) AS last FROM t ORDER BY k');
  assert.deepEqual(stored, big.map(([k]) => ({ k, n: 131072, last: k.toString(16).padStart(2, '0').toUpperCase() })));
  await db.execute('DELETE FROM t');
  // A getter of the outer batch sends a batch of its own while the outer one is packed.
  let inner;
  const set = [2];
  Object.defineProperty(set, 1, {
    enumerable: true,
    get() {
      inner = db.executeBatch('INSERT INTO t VALUES (?, ?)', [['i', Buffer.from([0xbb, 0xbb])], ['j', Buffer.from([0xcc])]]);
      return Buffer.from([0xdd]);
    },
  });
  await db.executeBatch('INSERT INTO t VALUES (?, ?)', [[1, Buffer.from([0xaa, 0xaa])], set, [3, Buffer.from([0xee])]]);
  await inner;
  assert.deepEqual((await rows()).sort(), ['1:AAAA', '2:DD', '3:EE', 'i:BBBB', 'j:CC']);
  await db.execute('DELETE FROM t');
  // A packing that threw leaves nothing behind for the next one.
  await assert.rejects(db.executeBatch('INSERT INTO t VALUES (?, ?)', [[1, Buffer.from([1])], [2, {}]]), TypeError);
  await db.executeBatch('INSERT INTO t VALUES (?, ?)', [[4, Buffer.from([4, 4])], [5, Buffer.alloc(0)]]);
  assert.deepEqual(await rows(), ['4:0404', '5:']);
});

test("code that runs between a batch's packing and the addon's copy cannot change its BLOBs", async (t) => {
  // A hook of `instanceof Statement` (looked at when the SQL's number is taken, after the
  // packing) that sends a batch of its own packed into the buffer the first one used.
  const { Statement } = await import('../dist/index.mjs');
  const db = await openMemory(t);
  await db.execute('CREATE TABLE t(k, v)');
  const statement = await db.prepare('INSERT INTO t VALUES (?, ?)');
  // Described by a first run, so that the hook below runs when the next one is sent.
  await statement.executeBatch([['first', Buffer.from('1')]]);
  await db.execute("DELETE FROM t");
  let inner;
  Object.defineProperty(Statement, Symbol.hasInstance, {
    configurable: true,
    value(x) {
      if (inner === undefined) inner = db.executeBatch('INSERT INTO t VALUES (?, ?)', [['evil', Buffer.from('EVIL')], ['e2', Buffer.from('E')]]);
      return Function.prototype[Symbol.hasInstance].call(this, x);
    },
  });
  t.after(() => delete Statement[Symbol.hasInstance]);
  await statement.executeBatch([['good', Buffer.from('good')], ['g2', Buffer.from('G')]]);
  await inner;
  assert.notEqual(inner, undefined, 'the hook ran');
  const rows = await db.select("SELECT k, CAST(v AS TEXT) AS v FROM t ORDER BY k");
  assert.deepEqual(rows, [
    { k: 'e2', v: 'E' },
    { k: 'evil', v: 'EVIL' },
    { k: 'g2', v: 'G' },
    { k: 'good', v: 'good' },
  ]);
});
