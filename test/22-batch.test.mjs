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
