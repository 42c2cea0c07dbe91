// Values in and out, as DESIGN.md's Values table says; and the shape of rows.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { openMemory, rejectsAsync } from './fixtures/helpers.mjs';

const I64_MAX = 2n ** 63n - 1n;
const I64_MIN = -(2n ** 63n);
const SAFE = 2n ** 53n - 1n;

// Integers around the edges: [label, value as bigint].
const INTEGERS = [
  ['zero', 0n],
  ['one', 1n],
  ['minus one', -1n],
  ['2^53-1', SAFE],
  ['-(2^53-1)', -SAFE],
  ['2^53', SAFE + 1n],
  ['-(2^53)', -SAFE - 1n],
  ['2^53+1', SAFE + 2n],
  ['-(2^53+1)', -SAFE - 2n],
  ['i64 max', I64_MAX],
  ['i64 min', I64_MIN],
];

const isSafe = (b) => b >= -SAFE && b <= SAFE;

/** What an INTEGER should come out as under `intMode` ('throws' for a RangeError). */
function expectedInteger(b, intMode) {
  if (intMode === 'bigint') return b;
  if (isSafe(b)) return Number(b);
  return intMode === 'auto' ? b : 'throws';
}

for (const intMode of ['auto', 'number', 'bigint']) {
  test(`int64 extremes come out per intMode '${intMode}' (select, selectOne, array rows, RETURNING)`, async (t) => {
    const db = await openMemory(t, { intMode, readers: 2 });
    await db.execute('CREATE TABLE ints(label TEXT, v INTEGER)');
    // Bound as bigint so every value goes in exactly.
    await db.executeBatch(
      'INSERT INTO ints VALUES (?, ?)',
      INTEGERS.map(([label, b]) => [label, b]),
    );
    for (const [label, b] of INTEGERS) {
      const want = expectedInteger(b, intMode);
      // Written as a SQL literal too, to check the read path independently of binding.
      const literalSql = `SELECT ${b === I64_MIN ? '-9223372036854775807 - 1' : b.toString()} AS v`;
      const reads = [
        () => db.select('SELECT v FROM ints WHERE label = ?', [label]).then((r) => r[0].v),
        () => db.selectOne('SELECT v FROM ints WHERE label = ?', [label]).then((r) => r.v),
        () => db.select('SELECT v FROM ints WHERE label = ?', [label], { rowMode: 'array' }).then((r) => r[0][0]),
        () => db.select(literalSql).then((r) => r[0].v),
        () => db.execute('UPDATE ints SET v = v WHERE label = ? RETURNING v', [label]).then((r) => r.rows[0].v),
      ];
      for (const read of reads) {
        if (want === 'throws') {
          await rejectsAsync(read, RangeError, `${label} under 'number' must reject`);
        } else {
          const got = await read();
          assert.equal(typeof got, typeof want, `${label}: type`);
          assert.equal(got, want, `${label}: value`);
        }
      }
    }
    // The exact value stored, whatever the mode.
    const rows = await db.select("SELECT label, CAST(v AS TEXT) AS s, typeof(v) AS t FROM ints");
    for (const [label, b] of INTEGERS) {
      assert.deepStrictEqual(
        rows.find((r) => r.label === label),
        { label, s: b.toString(), t: 'integer' },
      );
    }
    // A rejected conversion leaves the database usable.
    assert.deepStrictEqual(await db.select('SELECT 7 AS x'), [{ x: intMode === 'bigint' ? 7n : 7 }]);
  });
}

test("intMode 'auto' mixes numbers and bigints in one result, per value", async (t) => {
  const db = await openMemory(t);
  const rows = await db.select('SELECT ? AS a, ? AS b, ? AS c', [SAFE, SAFE + 1n, 5n]);
  assert.deepStrictEqual(rows, [{ a: Number(SAFE), b: SAFE + 1n, c: 5 }]);
});

test('lastInsertRowid follows intMode', async (t) => {
  for (const intMode of ['auto', 'bigint']) {
    const db = await openMemory(t, { intMode });
    await db.execute('CREATE TABLE r(a)');
    const small = await db.execute('INSERT INTO r(rowid, a) VALUES (5, 1)');
    assert.deepStrictEqual(small, { changes: 1, lastInsertRowid: intMode === 'bigint' ? 5n : 5, rows: [] });
    const big = await db.execute('INSERT INTO r(rowid, a) VALUES (?, 1)', [I64_MAX]);
    assert.equal(big.lastInsertRowid, I64_MAX);
  }
});

test('bigint parameters bind exactly; outside int64 they reject with RangeError', async (t) => {
  const db = await openMemory(t, { intMode: 'bigint' });
  for (const [, b] of INTEGERS) {
    const row = await db.selectOne('SELECT ? AS v, typeof(?) AS t', [b, b]);
    assert.deepStrictEqual(row, { v: b, t: 'integer' });
  }
  for (const bad of [I64_MAX + 1n, I64_MIN - 1n, 2n ** 64n]) {
    await rejectsAsync(() => db.select('SELECT ?', [bad]), { name: 'RangeError', message: /params\[0\]/ });
  }
  await rejectsAsync(() => db.select('SELECT :v', { v: I64_MAX + 1n }), RangeError);
  await rejectsAsync(() => db.execute('SELECT ?', [I64_MIN - 1n]), RangeError);
  await rejectsAsync(() => db.executeBatch('SELECT ?', [[1n], [I64_MAX + 1n]]), RangeError);
  assert.deepStrictEqual(await db.select('SELECT 1 AS ok'), [{ ok: 1n }]);
});

test('integral numbers bind as INTEGER, non-integral as REAL', async (t) => {
  const db = await openMemory(t);
  const cases = [
    [0, 'integer'],
    [-0, 'integer'],
    [42, 'integer'],
    [-7, 'integer'],
    [2.0, 'integer'],
    [2 ** 52, 'integer'],
    [Number.MAX_SAFE_INTEGER, 'integer'],
    [-(2 ** 63), 'integer'], // exactly i64 min
    [1.5, 'real'],
    [-0.25, 'real'],
    [0.1, 'real'],
    [Number.MIN_VALUE, 'real'],
    [2 ** 63, 'real'], // integral, but beyond int64: cannot be an INTEGER
    [1e300, 'real'],
    [Number.MAX_VALUE, 'real'],
  ];
  for (const [value, type] of cases) {
    const row = await db.selectOne('SELECT typeof(?) AS t, ? AS v', [value, value]);
    assert.equal(row.t, type, `typeof(${value})`);
    if (type === 'real') assert.equal(row.v, value, `${value} round-trips`);
    else assert.equal(BigInt(row.v), BigInt(value), `${value} round-trips`);
  }
});

test('NaN binds as NULL (SQLite stores NaN as NULL); ±Infinity round-trip as REAL', async (t) => {
  const db = await openMemory(t);
  const row = await db.selectOne('SELECT ? AS nan, typeof(?) AS nt, ? AS pinf, typeof(?) AS pt, ? AS ninf', [
    NaN,
    NaN,
    Infinity,
    Infinity,
    -Infinity,
  ]);
  assert.deepStrictEqual(row, { nan: null, nt: 'null', pinf: Infinity, pt: 'real', ninf: -Infinity });
  // Also when produced by SQL arithmetic and stored in a table.
  await db.execute('CREATE TABLE f(x REAL)');
  await db.executeBatch('INSERT INTO f VALUES (?)', [[Infinity], [-Infinity], [NaN]]);
  assert.deepStrictEqual(await db.select('SELECT x FROM f ORDER BY rowid'), [
    { x: Infinity },
    { x: -Infinity },
    { x: null },
  ]);
  assert.deepStrictEqual(await db.select('SELECT 1e999 AS a, -1e999 AS b'), [{ a: Infinity, b: -Infinity }]);
});

test('REAL values round-trip bit for bit (including -0)', async (t) => {
  const db = await openMemory(t);
  const reals = [0.1, -0.5, 1 / 3, Math.PI, 1e-300, 5e-324, 1.7976931348623157e308, 123456789.125, -1e21];
  const rows = await db.select(`SELECT ${reals.map(() => '?').join(', ')}`, reals, { rowMode: 'array' });
  assert.deepStrictEqual(rows, [reals]);
  assert.ok(Object.is((await db.selectOne('SELECT -0.0 AS z')).z, -0), '-0.0 keeps its sign');
});

test('booleans bind as 1/0 INTEGER; undefined and null bind as NULL', async (t) => {
  const db = await openMemory(t);
  const row = await db.selectOne('SELECT ? AS t, typeof(?) AS tt, ? AS f, ? AS u, typeof(?) AS ut, ? AS n', [
    true,
    true,
    false,
    undefined,
    undefined,
    null,
  ]);
  assert.deepStrictEqual(row, { t: 1, tt: 'integer', f: 0, u: null, ut: 'null', n: null });
  // Named parameters too.
  assert.deepStrictEqual(await db.selectOne('SELECT :a AS a, :b AS b, :c AS c', { a: true, b: undefined, c: null }), {
    a: 1,
    b: null,
    c: null,
  });
});

test('strings: NUL kept, astral characters, empty string, long text', async (t) => {
  const db = await openMemory(t);
  await db.execute('CREATE TABLE s(v TEXT)');
  const values = ['', 'a\0b', '\0', 'trailing\0', '😀𝄞 emoji and G clef', 'é中文ß', 'x'.repeat(1_000_000)];
  await db.executeBatch('INSERT INTO s VALUES (?)', values.map((v) => [v]));
  const rows = await db.select('SELECT v, typeof(v) AS t, length(CAST(v AS BLOB)) AS bytes FROM s ORDER BY rowid');
  assert.equal(rows.length, values.length);
  rows.forEach((row, i) => {
    assert.equal(row.v, values[i], `string #${i} round-trips`);
    assert.equal(row.t, 'text', 'an empty string is TEXT, not NULL');
    assert.equal(row.bytes, Buffer.byteLength(values[i]), 'the NUL bytes are stored');
  });
});

test('lone surrogates are stored and returned as U+FFFD', async (t) => {
  const db = await openMemory(t);
  for (const s of ['\uD83D', '\uDE00', 'a\uD800b', 'x\uDC00\uD800y', '😀\uD83D']) {
    const row = await db.selectOne('SELECT ? AS v, hex(?) AS h', [s, s]);
    const wellFormed = Buffer.from(s, 'utf8').toString('utf8'); // each lone surrogate -> U+FFFD
    assert.equal(row.v, wellFormed);
    assert.equal(row.h, Buffer.from(wellFormed).toString('hex').toUpperCase());
  }
});

test('invalid UTF-8 in TEXT comes out with U+FFFD (as Buffer#toString decodes it)', async (t) => {
  const db = await openMemory(t);
  for (const hex of ['ff', '61ff62', 'e282', 'f09f98', 'c0af', 'eda080', 'c328', 'f4908080', '80', 'fe', 'c1bf']) {
    const row = await db.selectOne(`SELECT CAST(x'${hex}' AS TEXT) AS v`);
    assert.equal(row.v, Buffer.from(hex, 'hex').toString('utf8'), `x'${hex}'`);
    assert.ok(row.v.includes('\uFFFD'));
  }
  // The replacement does not disturb valid text around it, in a multi-row, multi-column result.
  const rows = await db.select(
    "SELECT 'ok' AS a, CAST(x'ff' AS TEXT) AS b, 'é' AS c UNION ALL SELECT 'ok2', CAST(x'41' AS TEXT), '中'",
  );
  assert.deepStrictEqual(rows, [
    { a: 'ok', b: '\uFFFD', c: 'é' },
    { a: 'ok2', b: 'A', c: '中' },
  ]);
});

test('blobs: Buffer, Uint8Array, DataView and other typed arrays bind as BLOB; Buffers come out', async (t) => {
  const db = await openMemory(t);
  const backing = new Uint8Array([9, 8, 7, 6, 5, 4, 3, 2]).buffer;
  const inputs = [
    [Buffer.from([1, 2, 3]), '010203'],
    [new Uint8Array([4, 5]), '0405'],
    [new Uint8Array(backing, 2, 3), '070605'], // a view with an offset
    [new DataView(backing, 1, 4), '08070605'],
    [new Int8Array([-1, 1]), 'ff01'],
    [new Uint16Array([0x0102]), Buffer.from(new Uint16Array([0x0102]).buffer).toString('hex')],
    [new Float64Array([1.5]), Buffer.from(new Float64Array([1.5]).buffer).toString('hex')],
    [new BigInt64Array([-1n]), 'ffffffffffffffff'],
    [Buffer.alloc(0), ''],
    [new Uint8Array(0), ''],
  ];
  for (const [value, hex] of inputs) {
    const row = await db.selectOne('SELECT ? AS v, typeof(?) AS t', [value, value]);
    assert.equal(row.t, 'blob', `${value.constructor.name} binds as BLOB`);
    assert.ok(Buffer.isBuffer(row.v), 'BLOB comes out as a Buffer');
    assert.equal(row.v.toString('hex'), hex, value.constructor.name);
  }
  // Empty and zero-filled blobs written in SQL.
  const row = await db.selectOne("SELECT x'' AS e, zeroblob(3) AS z, typeof(x'') AS t");
  assert.deepStrictEqual(row, { e: Buffer.alloc(0), z: Buffer.alloc(3), t: 'blob' });
});

test('a length-tracking view left past the end of its shrunk buffer binds as an empty BLOB on every path', async (t) => {
  // JavaScript sees it as empty (byteLength 0); Node-API still reports its old offset. Some
  // paths bound it as an empty BLOB, others rejected it as reaching past its buffer.
  const db = await openMemory(t);
  await db.execute('CREATE TABLE t(k, v)');
  const buffer = new ArrayBuffer(32, { maxByteLength: 64 });
  const view = new Uint8Array(buffer, 20);
  buffer.resize(12);
  assert.equal(view.byteLength, 0);
  const hex = 'SELECT hex(?) AS h, typeof(?) AS t';
  assert.deepEqual(await db.selectOne(hex, [view, view]), { h: '', t: 'blob' });
  assert.deepEqual(await db.selectOne('SELECT hex(:v) AS h', { v: view }), { h: '' });
  await db.execute('INSERT INTO t VALUES (1, ?)', [view]);
  await db.executeBatch('INSERT INTO t VALUES (?, ?)', [[2, view]]);
  await db.executeBatch('INSERT INTO t VALUES (:k, :v)', [{ k: 3, v: view }]);
  await db.transaction((tx) => tx.execute('INSERT INTO t VALUES (4, ?)', [view]));
  for await (const row of db.iterate(hex, [view, view])) assert.deepEqual(row, { h: '', t: 'blob' });
  assert.deepEqual(await db.select('SELECT k, hex(v) AS h, typeof(v) AS t FROM t ORDER BY k'), [1, 2, 3, 4].map((k) => ({ k, h: '', t: 'blob' })));
  // A DataView over the same buffer, likewise.
  const dv = new DataView(buffer, 0);
  buffer.resize(0);
  assert.deepEqual(await db.selectOne(hex, [dv, dv]), { h: '', t: 'blob' });
});

test('a 5 MB blob round-trips byte for byte', async (t) => {
  const db = await openMemory(t);
  const big = Buffer.alloc(5 * 1024 * 1024);
  for (let i = 0; i < big.length; i += 4) big.writeUInt32LE((i * 2654435761) >>> 0, i);
  await db.execute('CREATE TABLE b(v BLOB)');
  await db.execute('INSERT INTO b VALUES (?)', [big]);
  const { v } = await db.selectOne('SELECT v FROM b');
  assert.ok(Buffer.isBuffer(v));
  assert.equal(v.length, big.length);
  assert.ok(v.equals(big), 'same bytes');
  // Two blobs of one result are independent Buffers.
  const [row] = await db.select("SELECT x'0102' AS a, x'0102' AS b");
  row.a[0] = 0xff;
  assert.equal(row.b[0], 1);
});

test('rows are plain objects with own enumerable properties in column order', async (t) => {
  const db = await openMemory(t);
  const rows = await db.select("SELECT 1 AS z, 'two' AS a, NULL AS m, 2.5 AS b, x'00' AS blob");
  const row = rows[0];
  assert.equal(Object.getPrototypeOf(row), Object.prototype);
  assert.deepStrictEqual(Object.keys(row), ['z', 'a', 'm', 'b', 'blob']);
  for (const key of Object.keys(row)) {
    const d = Object.getOwnPropertyDescriptor(row, key);
    assert.ok(d.enumerable && d.writable && d.configurable && 'value' in d, `${key} is a plain data property`);
  }
  assert.deepStrictEqual(row, { z: 1, a: 'two', m: null, b: 2.5, blob: Buffer.from([0]) });
  assert.deepStrictEqual({ ...row }, row);
  assert.equal(JSON.stringify({ ...row, blob: undefined }), '{"z":1,"a":"two","m":null,"b":2.5}');
  assert.ok(Array.isArray(rows));
  // Rows are independent objects.
  const two = await db.select('SELECT 1 AS x UNION ALL SELECT 2');
  two[0].x = 99;
  assert.deepStrictEqual(two, [{ x: 99 }, { x: 2 }]);
});

test('rows named like Object.prototype members are plain objects with those own properties', async (t) => {
  const db = await openMemory(t);
  const names = ['constructor', 'toString', 'prototype', 'valueOf', '2', 'hasOwnProperty', '10', 'a b'];
  const sql = `SELECT ${names.map((n, i) => `${i} AS "${n}"`).join(', ')}`;
  for (let k = 0; k < 3; k++) {
    const row = await db.selectOne(sql);
    assert.equal(Object.getPrototypeOf(row), Object.prototype);
    // Integer-like keys first, ascending, as for any object.
    assert.deepStrictEqual(Object.keys(row), ['2', '10', 'constructor', 'toString', 'prototype', 'valueOf', 'hasOwnProperty', 'a b']);
    assert.deepStrictEqual(row, Object.fromEntries(names.map((n, i) => [n, i])));
    for (const key of names) assert.ok(Object.hasOwn(row, key), key);
    const plain = await db.selectOne('SELECT 1 AS x');
    assert.equal(plain.constructor, Object);
    assert.deepStrictEqual(Object.getOwnPropertyNames(plain), ['x']);
  }
});

test("rowMode 'array' returns value arrays and keeps duplicate column names", async (t) => {
  const db = await openMemory(t);
  const rows = await db.select("SELECT 1 AS a, 'x' AS a, NULL AS a, x'ff' AS b", [], { rowMode: 'array' });
  assert.deepStrictEqual(rows, [[1, 'x', null, Buffer.from([0xff])]]);
  assert.ok(Array.isArray(rows[0]));
  assert.deepStrictEqual(await db.selectOne('SELECT 1 AS a, 2 AS a', [], { rowMode: 'array' }), [1, 2]);
  // In object mode a duplicate name gives one property (the later column wins, as in better-sqlite3).
  assert.deepStrictEqual(await db.selectOne('SELECT 1 AS a, 2 AS a'), { a: 2 });
});

test('a column named __proto__ is an own property and does not change the prototype', async (t) => {
  const db = await openMemory(t);
  const row = await db.selectOne("SELECT 1 AS __proto__, 'v' AS constructor, 2 AS toString, 3 AS hasOwnProperty");
  assert.equal(Object.getPrototypeOf(row), Object.prototype);
  assert.ok(Object.hasOwn(row, '__proto__'));
  assert.deepStrictEqual(Object.keys(row), ['__proto__', 'constructor', 'toString', 'hasOwnProperty']);
  assert.equal(Object.getOwnPropertyDescriptor(row, '__proto__').value, 1);
  assert.equal(JSON.stringify(row), '{"__proto__":1,"constructor":"v","toString":2,"hasOwnProperty":3}');
  // A {__proto__: ...} row cannot be produced by an object literal, so compare with JSON.parse.
  assert.deepStrictEqual(row, JSON.parse('{"__proto__":1,"constructor":"v","toString":2,"hasOwnProperty":3}'));
});

test('a column holds any kind of value from row to row', async (t) => {
  // Rows of a list share one builder; the first rows' kinds must not fix the kinds of the
  // rest, before or after the builder is optimized (many rows, read many times).
  const values = [1, 2.5, 'text', null, Buffer.from([7, 8]), 2 ** 40, -0.5, 'é😀', 3, null];
  const rowsSql = values.map((_, i) => `SELECT ?${2 * i + 1} AS v, ?${2 * i + 2} AS w, ${i + 1} AS id`).join(' UNION ALL ');
  const params = values.flatMap((v, i) => [v, values[values.length - 1 - i]]);
  for (const intMode of ['auto', 'bigint']) {
    const db = await openMemory(t, { intMode });
    const int = intMode === 'bigint' ? (v) => (typeof v === 'number' && Number.isInteger(v) ? BigInt(v) : v) : (v) => v;
    for (let round = 0; round < 3; round++) {
      assert.deepStrictEqual(
        await db.select(rowsSql, params),
        values.map((v, i) => ({ v: int(v), w: int(values[values.length - 1 - i]), id: int(i + 1) })),
      );
    }
  }
  const db = await openMemory(t);
  const sql =
    'WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 2999) ' +
    "SELECT CASE i % 7 WHEN 0 THEN i WHEN 1 THEN i + 2147483648 WHEN 2 THEN i + 0.5 WHEN 3 THEN 't' || i " +
    "WHEN 4 THEN NULL WHEN 5 THEN x'0102' ELSE -0.0 END AS v, i AS id FROM n";
  const kinds = [(i) => i, (i) => i + 2 ** 31, (i) => i + 0.5, (i) => `t${i}`, () => null, () => Buffer.from([1, 2]), () => -0];
  const expected = Array.from({ length: 3000 }, (_, i) => [kinds[i % 7](i), i]);
  for (let round = 0; round < 20; round++) {
    const arrays = await db.select(sql, [], { rowMode: 'array' });
    assert.deepStrictEqual(arrays, expected, `array rows, round ${round}`);
    const objects = await db.select(sql);
    assert.deepStrictEqual(objects.map((r) => [r.v, r.id]), expected, `object rows, round ${round}`);
  }
});

test('object rows of plain column lists are made by a constructor, and are plain objects', async (t) => {
  // Experiment 081: a constructor after a row of nulls, and for array rows a rest parameter
  // (no allocation site for V8 to pretenure). Lists naming a property of Object.prototype
  // keep the object literal.
  const { builderSource } = await import('../dist/rows.js');
  const db = await openMemory(t);
  const lists = [
    ['id', 'qs_c081_name', 'price'],
    ['2', '10', '0', '4294967295', '4294967294', '-1', '1.5', '01', 'qs_c081'],
    ['qs_c081_dup', 'b', 'qs_c081_dup'],
  ];
  for (const names of lists) {
    const source = builderSource(names, 'object', 'auto');
    assert.match(source, /function Object\(c0, /, names.join());
    assert.ok(source.includes(`new Object(${names.map(() => 'null').join(', ')});`), 'a first row of nulls');
    assert.match(source, /= new Row\(/);
    const sql = `SELECT ${names.map((n, i) => `${i} AS "${n}"`).join(', ')}`;
    const expected = {};
    names.forEach((n, i) => (expected[n] = i));
    for (let k = 0; k < 3; k++) {
      const row = await db.selectOne(sql);
      assert.equal(Object.getPrototypeOf(row), Object.prototype);
      assert.equal(row.constructor, Object);
      assert.deepStrictEqual(Object.keys(row), Object.keys(expected), names.join());
      assert.deepStrictEqual(row, expected);
      for (const key of Object.keys(row)) {
        const d = Object.getOwnPropertyDescriptor(row, key);
        assert.ok(d.enumerable && d.writable && d.configurable && 'value' in d, `${key} is a plain data property`);
      }
    }
  }
  const literal = builderSource(['qs_c081_lit', 'toString'], 'object', 'auto');
  assert.doesNotMatch(literal, /new Row\(/, 'the literal for a name on Object.prototype');
  assert.deepStrictEqual(await db.selectOne('SELECT 1 AS qs_c081_lit, 2 AS toString'), { qs_c081_lit: 1, toString: 2 });
  const names = ['qs_c081_arr', 'toString', 'qs_c081_arr'];
  assert.match(builderSource(names, 'array', 'auto'), /= arrayOf\(/, 'array rows by a rest parameter');
  for (let k = 0; k < 3; k++) {
    const rows = await db.select("SELECT 1 AS qs_c081_arr, 'x' AS toString, NULL AS qs_c081_arr UNION ALL SELECT 2.5, x'01', 3", [], { rowMode: 'array' });
    assert.deepStrictEqual(rows, [[1, 'x', null], [2.5, Buffer.from([1]), 3]]);
    for (const row of rows) assert.equal(Object.getPrototypeOf(row), Array.prototype);
  }
});

test('columns named like properties added to Object.prototype are own properties of rows', async (t) => {
  // A read-only or accessor property on Object.prototype would catch an assignment of the same
  // name: such lists take the object literal, which defines its properties.
  const db = await openMemory(t);
  const setterCalls = [];
  Object.defineProperty(Object.prototype, 'qs_read_only', { value: 'inherited', writable: false, configurable: true });
  Object.defineProperty(Object.prototype, 'qs_setter', { get: () => 'inherited', set: (v) => setterCalls.push(v), configurable: true });
  try {
    for (let k = 0; k < 3; k++) {
      const row = await db.selectOne('SELECT 1 AS id, 2 AS qs_read_only, 3 AS qs_setter');
      assert.deepStrictEqual(Object.keys(row), ['id', 'qs_read_only', 'qs_setter']);
      assert.deepStrictEqual(Object.values(row), [1, 2, 3]);
      assert.equal(Object.getPrototypeOf(row), Object.prototype);
    }
    assert.deepStrictEqual(setterCalls, []);
    // A read-only property added after a list was first read: an error, not a row without it.
    // (A setter added then would be called: see docs/decisions.md.)
    const sql = 'SELECT 1 AS id, 2 AS qs_later';
    assert.deepStrictEqual(await db.selectOne(sql), { id: 1, qs_later: 2 });
    Object.defineProperty(Object.prototype, 'qs_later', { value: 'inherited', writable: false, configurable: true });
    await assert.rejects(db.selectOne(sql), TypeError);
  } finally {
    delete Object.prototype.qs_read_only;
    delete Object.prototype.qs_setter;
    delete Object.prototype.qs_later;
  }
  assert.deepStrictEqual(await db.selectOne('SELECT 1 AS id, 2 AS qs_later'), { id: 1, qs_later: 2 });
});

test('unusual column names: empty, quotes, unicode, whitespace', async (t) => {
  const db = await openMemory(t);
  const row = await db.selectOne('SELECT 1 AS "", 2 AS "a""b", 3 AS "😀 é", 4 AS "new\nline", 5 AS "back\\slash"');
  assert.deepStrictEqual(Object.keys(row), ['', 'a"b', '😀 é', 'new\nline', 'back\\slash']);
  assert.deepStrictEqual(Object.values(row), [1, 2, 3, 4, 5]);
});

// "yaczf" and "glbpp" as one-column lists hash alike (crates/core/src/encode.rs asserts it):
// the decoder keeps row builders by that hash and must not take one list for the other.
test('column lists whose names hash alike decode with their own names, each built once', async (t) => {
  const { rowShapeStats } = await import('../dist/rows.js');
  for (const options of [{}, { inlineReads: true }]) {
    const db = await openMemory(t, options);
    const built = rowShapeStats().buildersMade;
    for (let i = 0; i < 5; i++) {
      assert.deepStrictEqual(await db.selectOne('SELECT ? AS yaczf', [i]), { yaczf: i });
      assert.deepStrictEqual(await db.select('SELECT ? AS glbpp', [i]), [{ glbpp: i }]);
      assert.deepStrictEqual(await db.select('SELECT ? AS glbpp', [i], { rowMode: 'array' }), [[i]]);
      assert.deepStrictEqual(await db.select('SELECT ? AS yaczf', [i], { rowMode: 'array' }), [[i]]);
    }
    // Two lists, two row modes: four builders the first time through, none after.
    const made = rowShapeStats().buildersMade - built;
    assert.ok(made <= 4, `${made} builders made for 2 lists in 2 row modes`);
    if (options.inlineReads) assert.ok((await db.diagnostics()).inlineReads >= 20, 'the reads ran inline');
  }
});

test('a column list is decoded by its names, whatever was decoded before', async (t) => {
  const { rowShapeStats } = await import('../dist/rows.js');
  const db = await openMemory(t);
  // More lists than the decoder keeps (it forgets them all when full), then the first again.
  for (let i = 0; i < 600; i++) {
    assert.deepStrictEqual(await db.selectOne(`SELECT 1 AS c${i}, 2 AS "d${i}"`), { [`c${i}`]: 1, [`d${i}`]: 2 });
    assert.ok(rowShapeStats().shapes <= 512);
  }
  assert.deepStrictEqual(await db.selectOne('SELECT 1 AS c0, 2 AS "d0"'), { c0: 1, d0: 2 });
  // Same names in another order, and one name more or less.
  assert.deepStrictEqual(Object.keys(await db.selectOne('SELECT 2 AS "d0", 1 AS c0')), ['d0', 'c0']);
  assert.deepStrictEqual(Object.keys(await db.selectOne('SELECT 1 AS c0')), ['c0']);
  assert.deepStrictEqual(Object.keys(await db.selectOne('SELECT 1 AS c0, 2 AS d0, 3 AS e0')), ['c0', 'd0', 'e0']);
});

test('selectOne gives the first row or undefined; no rows gives []', async (t) => {
  const db = await openMemory(t);
  assert.deepStrictEqual(await db.select('SELECT 1 WHERE 0'), []);
  assert.equal(await db.selectOne('SELECT 1 WHERE 0'), undefined);
  assert.deepStrictEqual(await db.selectOne('SELECT 1 AS a UNION ALL SELECT 2 ORDER BY 1 DESC'), { a: 2 });
});

test('execute returns changes, lastInsertRowid and RETURNING rows', async (t) => {
  const db = await openMemory(t);
  assert.deepStrictEqual(await db.execute('CREATE TABLE t(id INTEGER PRIMARY KEY, v)'), {
    changes: 0,
    lastInsertRowid: 0,
    rows: [],
  });
  assert.deepStrictEqual(await db.execute('INSERT INTO t(v) VALUES (?), (?)', ['a', 'b']), {
    changes: 2,
    lastInsertRowid: 2,
    rows: [],
  });
  // An UPDATE inserts nothing: its lastInsertRowid is 0, not the INSERT's before it.
  assert.deepStrictEqual(await db.execute('UPDATE t SET v = upper(v) RETURNING id, v'), {
    changes: 2,
    lastInsertRowid: 0,
    rows: [
      { id: 1, v: 'A' },
      { id: 2, v: 'B' },
    ],
  });
  assert.deepStrictEqual((await db.execute('DELETE FROM t WHERE id = 1')).changes, 1);
});

test("with intMode 'number', only the insert of a rowid beyond 2^53 rejects, not the statements after it", async (t) => {
  // Before: the writer's last inserted rowid stayed the huge one, so every later execute
  // (an UPDATE, a DELETE, a transaction's writes) rejected with the same RangeError.
  const db = await openMemory(t, { intMode: 'number' });
  await db.execute('CREATE TABLE t(id INTEGER PRIMARY KEY, v)');
  const big = 2n ** 60n + 12345n;
  const withoutValue = (err) => err instanceof RangeError && !err.message.includes(String(big)) && !err.message.includes('12345');
  await assert.rejects(db.execute('INSERT INTO t(id, v) VALUES (?, 1)', [big]), (err) => withoutValue(err) && /changes stand/.test(err.message));
  // A result value can be a parameter echoed back: it stays out of messages as they do.
  await assert.rejects(db.select('SELECT ? AS token', [big]), withoutValue);
  assert.deepStrictEqual(await db.execute('UPDATE t SET v = 2'), { changes: 1, lastInsertRowid: 0, rows: [] });
  await db.transaction((tx) => tx.execute('UPDATE t SET v = 3'));
  assert.deepStrictEqual(await db.select('SELECT v FROM t'), [{ v: 3 }]);
  assert.deepStrictEqual(await db.execute('INSERT INTO t(id, v) VALUES (5, 4)'), { changes: 1, lastInsertRowid: 5, rows: [] });
});

test("with intMode 'number', a write whose RETURNING rows hold an integer beyond 2^53 rejects saying that it ran", async (t) => {
  // It rejected with the generic message of a read: a caller could take it for a failed
  // insert and run it again.
  const db = await openMemory(t, { intMode: 'number' });
  await db.execute('CREATE TABLE t(id INTEGER PRIMARY KEY, v)');
  const big = 2n ** 60n + 12345n;
  await assert.rejects(
    db.execute('INSERT INTO t(id, v) VALUES (1, ?) RETURNING v', [big]),
    (err) => err instanceof RangeError && /changes stand/.test(err.message) && !err.message.includes('12345'),
  );
  assert.deepStrictEqual(await db.select('SELECT id FROM t'), [{ id: 1 }]);
  // A result too large for the completion scratch arrives another way: the same message.
  await db.executeBatch('INSERT INTO t(v) VALUES (?)', Array.from({ length: 3000 }, (_, i) => [i]));
  await assert.rejects(
    db.execute("UPDATE t SET v = ? RETURNING v, printf('%.200c', 'x') AS pad", [big]),
    (err) => err instanceof RangeError && /changes stand/.test(err.message) && !err.message.includes('12345'),
  );
  assert.deepStrictEqual(await db.selectOne('SELECT count(*) AS n FROM t WHERE v = 0'), { n: 0 });
});

test("SQL's last_insert_rowid() still sees the connection's last insert in a later statement", async (t) => {
  // The result's lastInsertRowid is the statement's own; the connection's value is SQLite's.
  const db = await openMemory(t);
  await db.execute('CREATE TABLE parent(id INTEGER PRIMARY KEY, v); CREATE TABLE child(pid, v)');
  await db.transaction(async (tx) => {
    await tx.execute("INSERT INTO parent(id, v) VALUES (7, 'p')");
    assert.deepStrictEqual(await tx.execute('SELECT last_insert_rowid() AS r'), { changes: 0, lastInsertRowid: 0, rows: [{ r: 7 }] });
    await tx.execute("INSERT INTO child VALUES (last_insert_rowid(), 'c')");
  });
  assert.deepStrictEqual(await db.select('SELECT pid FROM child'), [{ pid: 7 }]);
  // An insert that takes the rowid of the insert before it is still its own.
  await db.execute('DELETE FROM parent WHERE id = 7');
  assert.equal((await db.execute("INSERT INTO parent(id, v) VALUES (7, 'again')")).lastInsertRowid, 7);
  assert.equal((await db.execute("INSERT OR REPLACE INTO parent(id, v) VALUES (7, 'replaced')")).lastInsertRowid, 7);
  // A trigger's insert is not the statement's.
  await db.execute("CREATE TRIGGER log AFTER UPDATE ON parent BEGIN INSERT INTO child VALUES (new.id, 'log'); END");
  assert.equal((await db.execute("UPDATE parent SET v = 'u'")).lastInsertRowid, 0);
  // Inserts that leave the connection's rowid alone: into a WITHOUT ROWID table, and a
  // virtual table's writes to its shadow tables; a virtual table's own insert counts.
  await db.execute("CREATE TABLE k(name TEXT PRIMARY KEY) WITHOUT ROWID; CREATE VIRTUAL TABLE f USING fts5(body)");
  assert.equal((await db.execute("INSERT INTO k VALUES ('a')")).lastInsertRowid, 0);
  assert.equal((await db.execute("INSERT INTO f(rowid, body) VALUES (40, 'hello')")).lastInsertRowid, 40);
  assert.equal((await db.execute('DELETE FROM f WHERE rowid = 40')).lastInsertRowid, 0);
  // A script: its own insert of the rowid the connection reported, then a WITHOUT ROWID insert.
  await db.execute("INSERT INTO parent(id, v) VALUES (12, 'x')");
  const script = await db.execute("DELETE FROM parent WHERE id = 12; INSERT INTO parent(id, v) VALUES (12, 'y'); INSERT INTO k VALUES ('b')");
  assert.equal(script.lastInsertRowid, 12);
});

test('named (:a @b $c) and numbered (?NNN) parameters', async (t) => {
  const db = await openMemory(t);
  assert.deepStrictEqual(await db.selectOne('SELECT :a AS a, @b AS b, $c AS c', { a: 1, b: 'two', c: null }), {
    a: 1,
    b: 'two',
    c: null,
  });
  assert.deepStrictEqual(await db.selectOne('SELECT ?2 AS x, ?1 AS y, ?2 AS z', ['one', 'two']), {
    x: 'two',
    y: 'one',
    z: 'two',
  });
  // The same name used twice binds once.
  assert.deepStrictEqual(await db.selectOne('SELECT :a + :a AS s', { a: 21 }), { s: 42 });
  // A null-prototype object works as named parameters.
  const params = Object.assign(Object.create(null), { a: 5 });
  assert.deepStrictEqual(await db.selectOne('SELECT :a AS a', params), { a: 5 });
});

test("intMode 'number': an unsafe lastInsertRowid rejects with a RangeError that says the write stands", async (t) => {
  const db = await openMemory(t, { intMode: 'number' });
  await db.execute('CREATE TABLE t(id INTEGER PRIMARY KEY, v)');
  const err = await rejectsAsync(() => db.execute('INSERT INTO t(id, v) VALUES (9007199254740993, 1)'), RangeError);
  assert.match(err.message, /changes stand/);
  // The row is there: the error came from converting the result, not from the write.
  assert.deepEqual(await db.select('SELECT v FROM t'), [{ v: 1 }]);
});

test('rows decode the same where code generation from strings is forbidden', () => {
  // Row builders are generated with `new Function`; a hardened process
  // (`--disallow-code-generation-from-strings`, a locked-down realm) forbids that, and every
  // read rejected with an EvalError. The same reads in two child processes, one forbidding
  // code generation, must print the same rows, in every row mode and integer mode.
  const source = `import { createRequire } from 'node:module';
const require = createRequire(${JSON.stringify(new URL('../', import.meta.url).pathname)});
const { Database } = require('./dist/index.js');
const show = (v) => typeof v === 'bigint' ? { bigint: String(v) } : Buffer.isBuffer(v) ? { blob: v.toString('hex') } : v;
const plain = (row) => Array.isArray(row) ? row.map(show)
  : { proto: Object.getPrototypeOf(row) === Object.prototype, fields: Object.getOwnPropertyNames(row).map((k) => [k, show(row[k])]) };
const lines = [];
for (const intMode of ['auto', 'number', 'bigint']) {
  const db = await Database.open(':memory:', { intMode });
  await db.execute('CREATE TABLE t(a, b, c)');
  await db.executeBatch('INSERT INTO t VALUES (?, ?, ?)', [
    [1, 1.5, 'text'], [null, Buffer.from([0, 1, 255]), ''], [2n ** 60n, -0, 'é☃𝄞'],
    ['x'.repeat(70000), 'y'.repeat(70000), 'z'], [Buffer.alloc(0), 'a\\u0000b', 9007199254740991],
  ]);
  const reads = [
    'SELECT a, b, c FROM t ORDER BY rowid',
    'SELECT a AS __proto__, b AS constructor, c AS c FROM t ORDER BY rowid',
    'SELECT a AS d, b AS d FROM t ORDER BY rowid',
    'SELECT count(*) AS n FROM t',
  ];
  for (const sql of reads) {
    for (const rowMode of ['object', 'array']) {
      try {
        lines.push((await db.select(sql, [], { rowMode })).map(plain));
      } catch (err) {
        lines.push({ error: err.name, message: err.message });
      }
    }
  }
  lines.push(plain(await db.selectOne('SELECT 1 AS one, 2.5 AS two')));
  await db.close();
}
process.stdout.write(JSON.stringify(lines));`;
  const run = (flags) => {
    const r = spawnSync(process.execPath, [...flags, '--input-type=module', '-e', source], { encoding: 'utf8', maxBuffer: 64 << 20 });
    assert.equal(r.status, 0, `child failed (${r.status ?? r.signal}): ${r.stderr}`);
    return r.stdout;
  };
  const usual = run([]);
  const forbidden = run(['--disallow-code-generation-from-strings']);
  assert.ok(!usual.includes('EvalError'), usual.slice(0, 300));
  assert.ok(usual.includes('"bigint":"1152921504606846976"') && usual.includes('RangeError'));
  assert.equal(forbidden, usual);
});
