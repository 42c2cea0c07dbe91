// selectBytes: native UTF-8 JSON that always parses and agrees with select().
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { openMemory } from './fixtures/helpers.mjs';

const SAFE = 2n ** 53n - 1n;
const strictUtf8 = new TextDecoder('utf-8', { fatal: true });

/** Decodes selectBytes output: must be a Buffer of valid UTF-8 holding valid JSON. */
function parseBytes(buf) {
  assert.ok(Buffer.isBuffer(buf), 'selectBytes resolves with a Buffer');
  const text = strictUtf8.decode(buf); // throws on invalid UTF-8
  // JSON forbids raw control characters inside strings; none may appear anywhere.
  assert.ok(!/[\u0000-\u001f]/.test(text), 'no raw control characters in the JSON');
  return { text, value: JSON.parse(text) };
}

/** Maps a select() value to what its JSON form parses back to. */
function jsonEquivalent(v) {
  if (Buffer.isBuffer(v)) return v.toString('base64');
  if (typeof v === 'number') return Number.isFinite(v) ? (v === 0 ? 0 : v) : null;
  if (typeof v === 'bigint') return Number(v); // JSON.parse rounds; exact digits are checked on the text
  return v;
}

function normalizeParsed(v) {
  return typeof v === 'number' && v === 0 ? 0 : v; // -0 and 0 are the same JSON number
}

/** Asserts selectBytes(sql) and select(sql) describe the same rows. */
async function assertAgrees(db, sql, params) {
  const [rows, buf] = await Promise.all([db.select(sql, params), db.selectBytes(sql, params)]);
  const { text, value } = parseBytes(buf);
  assert.ok(Array.isArray(value));
  const expected = rows.map((row) => {
    const out = {};
    for (const [k, v] of Object.entries(row)) out[k] = jsonEquivalent(v);
    return out;
  });
  const actual = value.map((row) => {
    const out = {};
    for (const [k, v] of Object.entries(row)) out[k] = normalizeParsed(v);
    return out;
  });
  assert.deepStrictEqual(actual, expected);
  // Every bigint must appear with its exact digits in the text.
  for (const row of rows) {
    for (const [k, v] of Object.entries(row)) {
      if (typeof v === 'bigint') {
        assert.ok(text.includes(`${JSON.stringify(k)}:${v}`), `exact integer ${v} for ${k} in ${text.slice(0, 200)}`);
      }
    }
  }
  return { rows, text, value };
}

test('no rows gives [] (as bytes: exactly "[]")', async (t) => {
  const db = await openMemory(t);
  const buf = await db.selectBytes('SELECT 1 AS a WHERE 0');
  assert.ok(Buffer.isBuffer(buf));
  assert.equal(buf.toString('utf8'), '[]');
});

test('every value type agrees with select() after mapping blobs to base64 and non-finite to null', async (t) => {
  const db = await openMemory(t);
  await db.execute('CREATE TABLE v(i INTEGER, r REAL, s TEXT, b BLOB, n, any)');
  const rows = [
    [0, 0.0, '', Buffer.alloc(0), null, -0.0],
    [1, 1.5, 'plain', Buffer.from([0]), null, 'text in an untyped column'],
    [-1, -2.25, 'é中😀', Buffer.from([0xff, 0xfe]), null, Buffer.from('abc')],
    [Number(SAFE), 1 / 3, 'quote " and backslash \\ and slash /', Buffer.from([1, 2, 3]), null, Infinity],
    [SAFE + 1n, 1e300, 'tab\tnewline\nreturn\r', Buffer.from([1, 2, 3, 4]), null, -Infinity],
    [2n ** 63n - 1n, 5e-324, '\0\u0001\u001f\u007f', Buffer.alloc(1000, 7), null, NaN],
    [-(2n ** 63n), -1.7976931348623157e308, '\u2028\u2029\ufeff\ufffd', Buffer.from('hello world!'), null, 42],
  ];
  await db.executeBatch('INSERT INTO v VALUES (?, ?, ?, ?, ?, ?)', rows);
  await assertAgrees(db, 'SELECT * FROM v ORDER BY rowid');
  await assertAgrees(db, 'SELECT i, typeof(i) AS ti, r, s, b, n, any FROM v ORDER BY rowid DESC');
  // With parameters, positional and named.
  await assertAgrees(db, 'SELECT * FROM v WHERE i > ? ORDER BY rowid', [0]);
  await assertAgrees(db, 'SELECT * FROM v WHERE s = :s', { s: 'plain' });
});

test('integers are written exactly, whatever intMode', async (t) => {
  for (const intMode of ['auto', 'number', 'bigint']) {
    const db = await openMemory(t, { intMode });
    const buf = await db.selectBytes(
      'SELECT 9223372036854775807 AS max, -9223372036854775807 - 1 AS min, 9007199254740993 AS odd, 7 AS small',
    );
    assert.equal(
      buf.toString(),
      '[{"max":9223372036854775807,"min":-9223372036854775808,"odd":9007199254740993,"small":7}]',
    );
  }
});

test('REAL values parse back to the identical double', async (t) => {
  const db = await openMemory(t);
  const reals = [0.1, 0.2 + 0.1, 1 / 3, 4.35, 1e16, 1e21, 1e-7, 123e-20, 5e-324, 2.2250738585072014e-308];
  reals.push(Number.MAX_VALUE, -Number.MAX_VALUE, Math.PI, -1.5, 2.0, 100.5, 9007199254740993.0);
  const sql = `SELECT ${reals.map((_, i) => `? AS r${i}`).join(', ')}`;
  const { value } = parseBytes(await db.selectBytes(sql, reals));
  assert.deepStrictEqual(Object.values(value[0]), reals);
});

test('non-finite REAL values become null', async (t) => {
  const db = await openMemory(t);
  const { text } = parseBytes(await db.selectBytes('SELECT 1e999 AS a, -1e999 AS b, ? AS c', [NaN]));
  assert.equal(text, '[{"a":null,"b":null,"c":null}]');
});

test('strings with control characters, quotes, backslashes and unicode are escaped validly', async (t) => {
  const db = await openMemory(t);
  let every = '';
  for (let c = 0; c < 0x80; c++) every += String.fromCharCode(c);
  const strings = [
    every,
    '"\\/\b\f\n\r\t',
    '\u2028\u2029', // valid in JSON, not in old JS string literals
    '😀𝄞 astral',
    'é ß 中文 ﻿ BOM',
    '\u007f\u0080\u009f\u00a0',
    'x'.repeat(70_000) + '"' + '\\'.repeat(9), // long, ending in escapes
    '',
  ];
  const sql = `SELECT ${strings.map((_, i) => `? AS s${i}`).join(', ')}`;
  const { value } = await assertAgrees(db, sql, strings);
  assert.deepStrictEqual(Object.values(value[0]), strings);
});

test('column names are escaped too', async (t) => {
  const db = await openMemory(t);
  const { value, text } = await assertAgrees(
    db,
    'SELECT 1 AS "quote""d", 2 AS "back\\slash", 3 AS "new\nline", 4 AS "😀", 5 AS "", 6 AS "tab\t"',
  );
  assert.deepStrictEqual(Object.keys(value[0]), ['quote"d', 'back\\slash', 'new\nline', '😀', '', 'tab\t']);
  assert.ok(text.startsWith('[{"quote\\"d":1,'));
});

test('invalid UTF-8 and lone surrogates are replaced; the output stays valid UTF-8', async (t) => {
  const db = await openMemory(t);
  const buf = await db.selectBytes(
    "SELECT CAST(x'ff' AS TEXT) AS a, CAST(x'61ff62' AS TEXT) AS b, CAST(x'e282' AS TEXT) AS c, ? AS d",
    ['x\uD800y'],
  );
  const { value } = parseBytes(buf);
  assert.deepStrictEqual(value, [{ a: '\uFFFD', b: 'a\uFFFDb', c: '\uFFFD', d: 'x\uFFFDy' }]);
  await assertAgrees(db, "SELECT CAST(x'c0af' AS TEXT) AS a, CAST(x'eda080' AS TEXT) AS b");
});

test('blobs are base64 with correct padding, including empty and large', async (t) => {
  const db = await openMemory(t);
  const blobs = [0, 1, 2, 3, 4, 5, 6, 255, 256, 100_000].map((n) =>
    Buffer.from(Array.from({ length: n }, (_, i) => (i * 37 + n) & 0xff)),
  );
  const sql = `SELECT ${blobs.map((_, i) => `? AS b${i}`).join(', ')}`;
  const { value } = parseBytes(await db.selectBytes(sql, blobs));
  assert.deepStrictEqual(
    Object.values(value[0]),
    blobs.map((b) => b.toString('base64')),
  );
  for (const s of Object.values(value[0])) assert.match(s, /^[A-Za-z0-9+/]*={0,2}$/, 'standard base64');
});

test('duplicate and __proto__ column names parse the same as select() rows', async (t) => {
  const db = await openMemory(t);
  await assertAgrees(db, 'SELECT 1 AS a, 2 AS a');
  const { value } = await assertAgrees(db, 'SELECT 1 AS __proto__, 2 AS b');
  assert.ok(Object.hasOwn(value[0], '__proto__'));
});

test('a 5,000-row mixed result agrees with select()', async (t) => {
  const db = await openMemory(t);
  await db.execute(`CREATE TABLE big AS
    WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 5000)
    SELECT x AS id, x * 1.25 AS r, 'row "' || x || '"' || char(10) AS s,
           CASE WHEN x % 3 = 0 THEN NULL ELSE randomblob(x % 7) END AS b,
           x * 1000000000000 AS big
    FROM c`);
  const { rows } = await assertAgrees(db, 'SELECT * FROM big ORDER BY id');
  assert.equal(rows.length, 5_000);
});
