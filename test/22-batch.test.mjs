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
