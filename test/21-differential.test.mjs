// Differential check: the same database file read through quietsqlite and through a
// synchronous reference driver gives identical rows. The reference is better-sqlite3 (a
// devDependency, built for the Node that ran `npm install`); where its addon cannot load
// (e.g. under Node 24), node:sqlite is used instead. Intended differences are listed at the
// end, each one asserted on both sides.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { Database, tempDir } from './fixtures/helpers.mjs';

const require = createRequire(import.meta.url);

/** A reference driver behind one small interface, or a reason why none is available. */
async function loadReference() {
  const reasons = [];
  try {
    const BetterSqlite3 = require('better-sqlite3');
    new BetterSqlite3(':memory:').close(); // loads the native addon
    return {
      name: 'better-sqlite3',
      open(path) {
        const db = new BetterSqlite3(path);
        return {
          all(sql, params = [], { bigint = false, arrays = false } = {}) {
            const stmt = db.prepare(sql).safeIntegers(bigint);
            if (arrays) stmt.raw(true);
            return Array.isArray(params) ? stmt.all(...params) : stmt.all(params);
          },
          exec: (sql) => db.exec(sql),
          run: (sql, params) => db.prepare(sql).run(...params),
          close: () => db.close(),
        };
      },
    };
  } catch (err) {
    reasons.push(`better-sqlite3: ${err.message.split('\n')[0]}`);
  }
  try {
    const { DatabaseSync } = await import('node:sqlite');
    // node:sqlite rows have a null prototype and blobs are Uint8Arrays: normalize both.
    const plain = (v) => (v instanceof Uint8Array ? Buffer.from(v) : v);
    return {
      name: 'node:sqlite',
      open(path) {
        const db = new DatabaseSync(path);
        return {
          all(sql, params = [], { bigint = false, arrays = false } = {}) {
            const stmt = db.prepare(sql);
            stmt.setReadBigInts(bigint);
            if (arrays) {
              if (typeof stmt.setReturnArrays !== 'function') return null;
              stmt.setReturnArrays(true);
            }
            const rows = Array.isArray(params) ? stmt.all(...params) : stmt.all(params);
            return rows.map((r) => (Array.isArray(r) ? r.map(plain) : Object.fromEntries(Object.entries(r).map(([k, v]) => [k, plain(v)]))));
          },
          exec: (sql) => db.exec(sql),
          run: (sql, params) => db.prepare(sql).run(...params),
          close: () => db.close(),
        };
      },
    };
  } catch (err) {
    reasons.push(`node:sqlite: ${err.message.split('\n')[0]}`);
  }
  return { unavailable: reasons.join('; ') };
}

const reference = await loadReference();
const skip = reference.unavailable ? `no reference driver loads here (${reference.unavailable})` : false;

// Safe values only: the reference returns integers as (lossy) numbers by default.
const MIXED = [
  [0, 0.0, '', Buffer.alloc(0), null],
  [1, 1.5, 'plain ascii', Buffer.from([0]), null],
  [-1, -2.25, 'é ß 中文 😀 𝄞', Buffer.from([0xff, 0xfe, 0x00, 0x01]), 'text in blob column'],
  [Number.MAX_SAFE_INTEGER, 1 / 3, 'nul\0inside', Buffer.alloc(4096, 0xab), 42],
  [Number.MIN_SAFE_INTEGER, 1e300, 'quote " backslash \\ newline \n tab \t', Buffer.from('abc'), 4.5],
  [2 ** 40, -0.0, '\u2028\u2029\ufeff', Buffer.from([1, 2, 3]), Buffer.from([9])],
  [123456789, 5e-324, 'x'.repeat(10_000), null, null],
];

const QUERIES = [
  'SELECT * FROM mixed ORDER BY id',
  'SELECT id, typeof(i) AS ti, typeof(r) AS tr, typeof(s) AS ts, typeof(b) AS tb, typeof(any) AS ta FROM mixed ORDER BY id',
  'SELECT id, hex(s) AS hs, length(s) AS ls, hex(b) AS hb, length(b) AS lb, quote(any) AS qa FROM mixed ORDER BY id',
  'SELECT count(*) AS n, sum(i) AS si, total(r) AS tr, min(s) AS mins, max(length(s)) AS maxlen, avg(i) AS avgi FROM mixed',
  'SELECT typeof(any) AS t, count(*) AS n FROM mixed GROUP BY 1 ORDER BY 1',
  "SELECT id, upper(s) AS u, substr(s, 2, 3) AS sub, instr(s, '中') AS pos, replace(s, ' ', '_') AS rep FROM mixed ORDER BY id",
  "SELECT json_object('i', i, 'r', r, 's', substr(s, 1, 20)) AS j FROM mixed WHERE b IS NOT NULL ORDER BY id",
  "SELECT json_extract('{\"a\":[1,2.5,\"x\",null,true]}', '$.a') AS arr, json_extract('{\"a\":{\"b\":7}}', '$.a.b') AS b",
  "SELECT date('2020-02-28', '+1 day') AS d, strftime('%Y-%m-%dT%H:%M:%S', '2021-03-04 05:06:07') AS ts, julianday('2000-01-01') AS jd",
  'SELECT 1 AS a, 2 AS a, 3 AS b', // duplicate names: the later column wins in both
  "SELECT CAST(x'ff' AS TEXT) AS a, CAST(x'61ff62' AS TEXT) AS b, CAST(x'c0af' AS TEXT) AS c, CAST(x'e282' AS TEXT) AS d",
  'SELECT 1e999 AS inf, -1e999 AS ninf, 0.1 + 0.2 AS sum, 7 / 2 AS idiv, 7 / 2.0 AS fdiv, 7 % 3 AS m, -7 % 3 AS nm',
  'SELECT m1.id AS a, m2.id AS b FROM mixed m1 JOIN mixed m2 ON m2.id = m1.id + 1 ORDER BY a',
  'WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 500) SELECT x, x * x AS sq, x * 0.5 AS half FROM c',
  'SELECT * FROM mixed WHERE 0',
];

async function setUp(t) {
  const dir = await tempDir(t);
  const path = join(dir, 'diff.db');
  const db = await Database.open(path, { readers: 2 });
  t.after(() => db.close());
  await db.execute('CREATE TABLE mixed(id INTEGER PRIMARY KEY, i INTEGER, r REAL, s TEXT, b BLOB, any)');
  await db.executeBatch('INSERT INTO mixed(i, r, s, b, any) VALUES (?, ?, ?, ?, ?)', MIXED);
  const ref = reference.open(path);
  t.after(() => ref.close());
  return { db, ref, path };
}

test(`select rows equal the reference driver's rows (${reference.name ?? 'none'})`, { skip }, async (t) => {
  const { db, ref } = await setUp(t);
  for (const sql of QUERIES) {
    const ours = await db.select(sql);
    const theirs = ref.all(sql);
    assert.deepStrictEqual(ours, theirs, sql);
    // selectOne agrees with the first row.
    assert.deepStrictEqual(await db.selectOne(sql), theirs[0], sql);
  }
});

test(`array rows equal the reference driver's raw rows (${reference.name ?? 'none'})`, { skip }, async (t) => {
  const { db, ref } = await setUp(t);
  for (const sql of QUERIES) {
    const theirs = ref.all(sql, [], { arrays: true });
    if (theirs === null) return t.skip(`${reference.name} cannot return arrays here`);
    assert.deepStrictEqual(await db.select(sql, [], { rowMode: 'array' }), theirs, sql);
  }
});

test(`parameterized queries agree, positional and named (${reference.name ?? 'none'})`, { skip }, async (t) => {
  const { db, ref } = await setUp(t);
  const cases = [
    ['SELECT * FROM mixed WHERE id > ? AND id < ? ORDER BY id', [2, 6]],
    ['SELECT * FROM mixed WHERE s = ?', ['é ß 中文 😀 𝄞']],
    ['SELECT * FROM mixed WHERE b = ?', [Buffer.from('abc')]],
    ['SELECT * FROM mixed WHERE r > :min ORDER BY id', { min: 0.5 }],
    ['SELECT :s AS s, length(:s) AS l, :b AS b', { s: 'a\0b', b: Buffer.from([0, 1]) }],
  ];
  for (const [sql, params] of cases) {
    assert.deepStrictEqual(await db.select(sql, params), ref.all(sql, params), sql);
  }
});

test(`with bigints on both sides, int64 extremes agree exactly (${reference.name ?? 'none'})`, { skip }, async (t) => {
  const { ref, path } = await setUp(t);
  const big = await Database.open(path, { intMode: 'bigint' });
  t.after(() => big.close());
  await big.execute('CREATE TABLE ints(v INTEGER)');
  await big.executeBatch('INSERT INTO ints VALUES (?)', [
    [2n ** 63n - 1n], [-(2n ** 63n)], [2n ** 53n], [2n ** 53n + 1n], [-(2n ** 53n) - 1n], [0n], [1n],
  ]);
  for (const sql of ['SELECT v, v - 1 AS w, typeof(v) AS t FROM ints ORDER BY rowid', 'SELECT id, i FROM mixed ORDER BY id']) {
    assert.deepStrictEqual(await big.select(sql), ref.all(sql, [], { bigint: true }), sql);
  }
});

test(`data written by the reference reads back the same through quietsqlite (${reference.name ?? 'none'})`, { skip }, async (t) => {
  const { db, ref } = await setUp(t);
  ref.exec('CREATE TABLE theirs(a, b, c)');
  ref.run('INSERT INTO theirs VALUES (?, ?, ?)', ['from ref 😀', Buffer.from([7, 8]), 2.5]);
  ref.run('INSERT INTO theirs VALUES (?, ?, ?)', [null, 12345n, '\0']);
  const sql = 'SELECT a, b, c, typeof(b) AS tb FROM theirs ORDER BY rowid';
  assert.deepStrictEqual(await db.select(sql), ref.all(sql));
});

// ---- Intended differences (documented behaviour where quietsqlite differs on purpose) ----

test('intended differences from better-sqlite3', { skip: reference.name === 'better-sqlite3' ? false : 'better-sqlite3 is not loadable here' }, async (t) => {
  const { db, ref } = await setUp(t);

  // 1. Integral JS numbers bind as INTEGER here; better-sqlite3 binds every number as REAL.
  assert.deepStrictEqual(await db.selectOne('SELECT typeof(?) AS t', [1]), { t: 'integer' });
  assert.deepStrictEqual(ref.all('SELECT typeof(?) AS t', [1]), [{ t: 'real' }]);

  // 2. Booleans bind as 1/0 here; better-sqlite3 refuses them.
  assert.deepStrictEqual(await db.selectOne('SELECT ? AS t', [true]), { t: 1 });
  assert.throws(() => ref.all('SELECT ? AS t', [true]), TypeError);

  // 3. A column named __proto__ is an own property here; better-sqlite3 sets the prototype.
  assert.deepStrictEqual(Object.keys(await db.selectOne('SELECT 1 AS __proto__, 2 AS b')), ['__proto__', 'b']);
  assert.deepStrictEqual(Object.keys(ref.all('SELECT 1 AS __proto__, 2 AS b')[0]), ['b']);

  // 4. A lone surrogate becomes one U+FFFD when bound here; better-sqlite3 stores its
  //    3-byte (CESU-8-like) encoding, which reads back as three U+FFFD.
  assert.deepStrictEqual(await db.selectOne('SELECT ? AS s', ['x\uD800y']), { s: 'x\uFFFDy' });
  assert.deepStrictEqual(ref.all('SELECT ? AS s', ['x\uD800y']), [{ s: 'x\uFFFD\uFFFD\uFFFDy' }]);

  // 5. Integers beyond 2^53 are bigints by default here (intMode 'auto'); better-sqlite3's
  //    default returns a rounded number.
  assert.deepStrictEqual(await db.selectOne('SELECT 9007199254740993 AS v'), { v: 9007199254740993n });
  assert.deepStrictEqual(ref.all('SELECT 9007199254740993 AS v'), [{ v: 9007199254740992 }]);
});
