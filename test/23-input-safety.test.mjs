// Issue 8, classes 1, 2, 3, 8 and 9: no input ends the process, every view binds exactly
// its own bytes, the packed batch path stores what `execute` stores, SQL is taken exactly,
// the `:memory:` file is private, and errors name the real problem without echoing values.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { readdirSync, readlinkSync, statSync, unlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { Database, SqliteError, openMemory, openTemp, rejectsAsync } from './fixtures/helpers.mjs';

const DIST = new URL('../dist/index.mjs', import.meta.url).href;

/** Runs `body` (an async function's source, given `db`) in a child process: a crash fails
 * the test instead of ending the runner. Resolves with the child's printed JSON. */
function inChild(body) {
  const src = `import { Database } from ${JSON.stringify(DIST)};
const db = await Database.open(':memory:');
const out = await (async (db) => { ${body} })(db);
await db.close();
console.log(JSON.stringify(out));`;
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', src], { encoding: 'utf8', timeout: 120_000 });
  assert.equal(r.status, 0, `the child ended with ${r.status ?? r.signal}: ${r.stderr.slice(-2000)}`);
  return JSON.parse(r.stdout.trim().split('\n').pop());
}

const describeError = `(e) => [e.constructor.name, e.code ?? null, e.message]`;

// ---- class 1: process crashes from input ----

test('a sparse array of length 2^32-1 as parameters is a RangeError in every method', () => {
  const out = inChild(`
    const huge = []; huge.length = 2 ** 32 - 1;
    const d = ${describeError};
    await db.execute('CREATE TABLE t(x)');
    const calls = {
      execute: () => db.execute('SELECT ?', huge),
      select: () => db.select('SELECT ?', huge),
      selectOne: () => db.selectOne('SELECT ?', huge),
      selectBytes: () => db.selectBytes('SELECT ?', huge),
      batchPositional: () => db.executeBatch('INSERT INTO t VALUES (?)', [huge]),
      batchSets: () => db.executeBatch('INSERT INTO t VALUES (?)', huge),
      batchMixed: () => db.executeBatch('INSERT INTO t VALUES (?)', [{ x: 1 }, huge]),
      tx: () => db.transaction((tx) => tx.execute('SELECT ?', huge)),
      stream: () => new Promise((resolve, reject) => db.stream('SELECT ?', huge).subscribe(resolve, reject)),
    };
    const out = {};
    for (const [k, f] of Object.entries(calls)) out[k] = await f().then(() => 'resolved', d);
    return out;
  `);
  for (const [method, r] of Object.entries(out)) {
    if (method === 'batchSets') {
      // 2^32-1 holes: the first set is not an array or object; nothing was sized by the length.
      assert.equal(r[0], 'TypeError', method);
      continue;
    }
    assert.equal(r[0], 'RangeError', `${method}: ${r}`);
    assert.match(r[2], /at most 32766 parameters/, method);
  }
});

test('an object with more keys than a statement can take is a RangeError', async (t) => {
  const db = await openMemory(t);
  const many = Object.fromEntries(Array.from({ length: 40_000 }, (_, i) => [`k${i}`, i]));
  await rejectsAsync(() => db.select('SELECT :k0 AS x', many), { name: 'RangeError', message: /at most 32766/ });
  assert.deepEqual(await db.select('SELECT ? AS x', [1]), [{ x: 1 }]);
});

test('scripts of many statements run (or are refused) in every method without a crash', () => {
  const out = inChild(`
    const d = ${describeError};
    const inserts = 'INSERT INTO t VALUES (1);'.repeat(20000);
    const selects = 'SELECT 1;'.repeat(20000);
    await db.execute('CREATE TABLE t(x)');
    const r = {};
    r.execute = await db.execute(inserts).then((x) => x.changes, d);
    r.executeSelects = await db.execute(selects).then((x) => x.changes, d);
    r.select = await db.select(selects).then(() => 'resolved', d);
    r.selectBytes = await db.selectBytes(selects).then(() => 'resolved', d);
    r.batch = await db.executeBatch(inserts, [[]]).then(() => 'resolved', d);
    r.txExecute = await db.transaction((tx) => tx.execute(inserts)).then((x) => x.changes, d);
    r.txSelect = await db.transaction((tx) => tx.select(selects)).then(() => 'resolved', d);
    r.stream = await new Promise((res, rej) => db.stream(selects).subscribe(res, rej)).then(() => 'resolved', d);
    r.count = (await db.selectOne('SELECT count(*) AS n FROM t')).n;
    return r;
  `);
  assert.equal(out.execute, 20000);
  assert.equal(out.executeSelects, 0);
  assert.equal(out.txExecute, 20000);
  for (const k of ['select', 'selectBytes', 'batch', 'txSelect', 'stream']) {
    assert.equal(out[k][0], 'RangeError', `${k}: ${out[k]}`);
    assert.match(out[k][2], /more than one statement/, k);
  }
  assert.equal(out.count, 40000);
});

test('a statement after a failing one in a script does not run; the error names it', async (t) => {
  const db = await openMemory(t);
  await db.execute('CREATE TABLE u(x UNIQUE)');
  const err = await rejectsAsync(
    () => db.execute('INSERT INTO u VALUES (1); INSERT INTO u VALUES (1); INSERT INTO u VALUES (2)'),
    SqliteError,
  );
  assert.equal(err.code, 'SQLITE_CONSTRAINT_UNIQUE');
  assert.deepEqual(await db.select('SELECT x FROM u'), [{ x: 1 }]);
});

test('deeply nested SQL is an error, not a crash; nesting within SQLite limits runs', () => {
  const out = inChild(`
    const d = ${describeError};
    const deep = (n) => 'SELECT ' + '('.repeat(n) + '1' + ')'.repeat(n) + ' AS x';
    const neg = (n) => 'SELECT ' + '- '.repeat(n) + '1 AS x';
    return {
      parens: await db.select(deep(100000)).then(() => 'resolved', d),
      parensExec: await db.execute(deep(100000)).then(() => 'resolved', d),
      fine: await db.select(deep(900)).then((r) => r[0].x, d),
      negations: await db.select(neg(990)).then((r) => r[0].x, d),
      json: await db.select("SELECT json_valid(?) AS v", ['['.repeat(100000) + ']'.repeat(100000)]).then((r) => r[0].v, d),
    };
  `);
  assert.equal(out.parens[0], 'SqliteError');
  assert.equal(out.parensExec[0], 'SqliteError');
  assert.equal(out.fine, 1);
  assert.equal(out.negations, 1);
  assert.equal(out.json, 0);
});

test('a panic inside an exported native method throws ERR_QUIETSQLITE_INTERNAL; the process lives on', () => {
  const out = inChild(`
    const hook = Symbol.for('quietsqlite.panicOnJsThread');
    let thrown;
    try { db[hook](0); } catch (e) { thrown = [e.constructor.name, e.code, e.message]; }
    const after = await db.select('SELECT 1 AS x');
    return { thrown, after };
  `);
  assert.equal(out.thrown[1], 'ERR_QUIETSQLITE_INTERNAL');
  assert.match(out.thrown[2], /panic/);
  assert.deepEqual(out.after, [{ x: 1 }]);
});

test('a panic while a result is handed to JS rejects that request only', () => {
  const out = inChild(`
    const d = ${describeError};
    db[Symbol.for('quietsqlite.panicOnJsThread')](1);
    const first = await db.select('SELECT 1 AS x').then((r) => r, d);
    const second = await db.select('SELECT 2 AS x');
    return { first, second };
  `);
  assert.equal(out.first[1], 'ERR_QUIETSQLITE_INTERNAL');
  assert.deepEqual(out.second, [{ x: 2 }]);
});

// ---- class 2: every ArrayBuffer view binds exactly its own bytes ----

function views() {
  const raw = Uint8Array.from({ length: 64 }, (_, i) => (i * 37 + 11) & 0xff);
  const kinds = [
    ['Int8Array', Int8Array],
    ['Uint8Array', Uint8Array],
    ['Uint8ClampedArray', Uint8ClampedArray],
    ['Int16Array', Int16Array],
    ['Uint16Array', Uint16Array],
    ['Int32Array', Int32Array],
    ['Uint32Array', Uint32Array],
    ['Float32Array', Float32Array],
    ['Float64Array', Float64Array],
    ['BigInt64Array', BigInt64Array],
    ['BigUint64Array', BigUint64Array],
  ];
  if (typeof globalThis.Float16Array === 'function') kinds.push(['Float16Array', globalThis.Float16Array]);
  const out = [];
  for (const [name, C] of kinds) {
    const buf = raw.slice().buffer;
    out.push([name, new C(buf, 0, 16 / C.BYTES_PER_ELEMENT)]);
    // A view with an offset into a larger buffer: only its own bytes.
    out.push([`${name} (offset 8)`, new C(buf, 8, 16 / C.BYTES_PER_ELEMENT)]);
    out.push([`${name} (empty)`, new C(buf, 16, 0)]);
    // Over a SharedArrayBuffer: Node 20's Node-API describes only plain ArrayBuffers, and
    // these failed there with an untyped error (a review found it).
    const shared = new SharedArrayBuffer(raw.length);
    new Uint8Array(shared).set(raw);
    out.push([`${name} (shared, offset 8)`, new C(shared, 8, 16 / C.BYTES_PER_ELEMENT)]);
  }
  out.push(['DataView', new DataView(raw.slice().buffer, 4, 9)]);
  const sharedForView = new SharedArrayBuffer(raw.length);
  new Uint8Array(sharedForView).set(raw);
  out.push(['DataView (shared)', new DataView(sharedForView, 4, 9)]);
  out.push(['Buffer', Buffer.from(raw)]);
  out.push(['Buffer subarray', Buffer.from(raw).subarray(3, 17)]);
  return out;
}

const bytesOf = (v) => Buffer.from(v.buffer, v.byteOffset, v.byteLength);

test('every ArrayBuffer view round-trips exactly through every way in', async (t) => {
  if (typeof globalThis.Float16Array === 'function') t.diagnostic('Float16Array included');
  const db = await openMemory(t);
  await db.execute('CREATE TABLE b(k TEXT, v BLOB)');
  for (const [name, v] of views()) {
    const want = bytesOf(v);
    await db.execute('INSERT INTO b VALUES (?, ?)', [`execute ${name}`, v]);
    await db.executeBatch('INSERT INTO b VALUES (?, ?)', [[`packed ${name}`, v]]);
    await db.executeBatch('INSERT INTO b VALUES (:k, :v)', [{ k: `named ${name}`, v }]);
    const sel = await db.selectOne('SELECT ? AS v', [v]);
    assert.deepEqual(Buffer.from(sel.v), want, `select params: ${name}`);
    const hex = await db.selectOne('SELECT hex(?) AS h', [v]);
    assert.equal(hex.h, want.toString('hex').toUpperCase(), `hex: ${name}`);
    const live = db.stream('SELECT ? AS v', [v]);
    const rows = await new Promise((resolve, reject) => {
      const stop = live.subscribe((r) => {
        stop();
        resolve(r);
      }, reject);
    });
    assert.deepEqual(Buffer.from(rows[0].v), want, `stream params: ${name}`);
    for (const how of ['execute', 'packed', 'named']) {
      const row = await db.selectOne('SELECT v FROM b WHERE k = ?', [`${how} ${name}`]);
      assert.deepEqual(Buffer.from(row.v), want, `${how}: ${name}`);
    }
  }
});

test('a view whose byteLength is shadowed still binds its own bytes (packed path)', async (t) => {
  const db = await openMemory(t);
  await db.execute('CREATE TABLE b(v BLOB)');
  const big = Uint8Array.from({ length: 32 }, (_, i) => i);
  const v = big.subarray(4, 8);
  Object.defineProperty(v, 'byteLength', { value: 28 });
  Object.defineProperty(v, 'byteOffset', { value: 0 });
  await db.executeBatch('INSERT INTO b VALUES (?)', [[v]]);
  await db.execute('INSERT INTO b VALUES (?)', [v]);
  const rows = await db.select('SELECT hex(v) AS h FROM b');
  assert.deepEqual(rows, [{ h: '04050607' }, { h: '04050607' }]);
});

// ---- class 3: data stored exactly as given ----

test('executeBatch (packed) stores byte for byte what execute stores: lone surrogates at edges', async (t) => {
  const db = await openMemory(t);
  await db.execute('CREATE TABLE s(i INTEGER, j INTEGER, v TEXT)');
  const cases = [
    ['a\uD83D', '\uDE00b'],
    ['\uD83D', '\uDE00'],
    ['x\uDC00', '\uD800y', '\uD800'],
    ['😀', '\uDE00', 'e\0f'],
  ];
  for (const [i, set] of cases.entries()) {
    await db.execute('DELETE FROM s');
    await db.executeBatch('INSERT INTO s VALUES (?, ?, ?)', set.map((v, j) => [i, j, v]));
    // A BigInt is never packed: these parameters go value by value.
    for (const [j, v] of set.entries()) await db.execute('INSERT INTO s VALUES (?, ?, ?)', [-1n, j, v]);
    const packed = await db.select('SELECT j, hex(v) AS h FROM s WHERE i >= 0 ORDER BY j');
    const single = await db.select('SELECT j, hex(v) AS h FROM s WHERE i < 0 ORDER BY j');
    assert.deepEqual(packed, single, JSON.stringify(set));
    // One request's parameters, packed (experiment 078), with the lone surrogates side by side.
    const row = await db.selectOne(`SELECT ${set.map(() => 'hex(?)').join(', ')}`, set, { rowMode: 'array' });
    assert.deepEqual(row, single.map((r) => r.h), JSON.stringify(set));
  }
});

test('property: the packed batch path stores what execute stores, for any strings', async (t) => {
  const db = await openMemory(t);
  await db.execute('CREATE TABLE s(src INTEGER, n INTEGER, v TEXT)');
  const edge = fc.constantFrom('\uD83D', '\uDE00', '\uD800', '\uDFFF', '😀', '\0', 'é', '');
  const piece = fc.oneof(fc.string({ unit: 'binary', maxLength: 6 }), edge);
  const text = fc.array(piece, { maxLength: 4 }).map((a) => a.join(''));
  await fc.assert(
    fc.asyncProperty(fc.array(text, { minLength: 1, maxLength: 8 }), async (values) => {
      await db.execute('DELETE FROM s');
      await db.executeBatch('INSERT INTO s VALUES (0, ?, ?)', values.map((v, n) => [n, v]));
      // Value by value (a BigInt is never packed), and packed one request at a time.
      for (const [n, v] of values.entries()) await db.execute('INSERT INTO s VALUES (1, ?, ?)', [BigInt(n), v]);
      for (const [n, v] of values.entries()) await db.execute('INSERT INTO s VALUES (2, ?, ?)', [n, v]);
      const packed = await db.select('SELECT hex(v) AS h FROM s WHERE src = 0 ORDER BY n');
      const single = await db.select('SELECT hex(v) AS h FROM s WHERE src = 1 ORDER BY n');
      const packedOne = await db.select('SELECT hex(v) AS h FROM s WHERE src = 2 ORDER BY n');
      assert.deepEqual(packed, single);
      assert.deepEqual(packedOne, single);
      // All of them in one request's parameters.
      if (values.length >= 2) {
        const row = await db.selectOne(`SELECT ${values.map(() => 'hex(?)').join(', ')}`, values, { rowMode: 'array' });
        assert.deepEqual(row, single.map((r) => r.h));
      }
      // And what comes back is the well-formed form of what went in.
      const back = await db.select('SELECT v FROM s WHERE src = 0 ORDER BY n');
      assert.deepEqual(back.map((r) => r.v), values.map((v) => v.toWellFormed()));
    }),
    { numRuns: 300 },
  );
});

/** Records, for each per-request call into the addon, whether its parameters were packed
 * (the trailing text argument given). */
function watchPacking(t) {
  const native = createRequire(import.meta.url)('../native/quietsqlite.node');
  const calls = [];
  // The position of `packedText` in each call's arguments.
  for (const [name, at] of [['dbRead', 6], ['dbExecute', 6], ['dbWriterRead', 7]]) {
    const original = native[name];
    native[name] = function (...args) {
      calls.push(`${name}:${args.length > at ? 'packed' : 'values'}`);
      return original.apply(this, args);
    };
    t.after(() => {
      native[name] = original;
    });
  }
  return calls;
}

test("a request's parameters bind the same packed or value by value, for every kind of value", async (t) => {
  // Experiment 078: an array of 2 to 32 numbers, strings, booleans and nulls is packed on
  // the JS side; one that starts with a BigInt goes value by value. Each value must bind
  // the same either way.
  const db = await openMemory(t);
  const calls = watchPacking(t);
  const values = [
    0, -0, 1, -1, 2 ** 53 - 1, -(2 ** 53), 2 ** 53 + 2, -(2 ** 63), 2 ** 63, 1.5, -0.25, 5e-324, NaN, Infinity, -Infinity,
    true, false, null, undefined, '', 'a\0b', 'é中文', '😀', 'a\uD800', '\uDC00b', '\uD83D', '\uDE00',
  ];
  for (let at = 0; at < values.length; at += 15) {
    const part = values.slice(at, at + 15);
    const head = part.map(() => 'typeof(?), quote(?)').join(', ');
    const twice = part.flatMap((v) => [v, v]);
    const packed = await db.selectOne(`SELECT ${head}`, twice, { rowMode: 'array' });
    const byValue = await db.selectOne(`SELECT ?, ${head}`, [1n, ...twice], { rowMode: 'array' });
    assert.deepEqual(packed, byValue.slice(1));
    // A BLOB last: the values before it were packed, and are taken back for the binding.
    const takenBack = await db.selectOne(`SELECT ${head}, ?`, [...twice, Buffer.from('z')], { rowMode: 'array' });
    assert.deepEqual(packed, takenBack.slice(0, -1));
  }
  assert.deepEqual(calls.splice(0), [
    'dbRead:packed', 'dbRead:values', 'dbRead:values',
    'dbRead:packed', 'dbRead:values', 'dbRead:values',
  ]);
  // Writes, and reads inside a transaction, pack as reads do.
  await db.execute('CREATE TABLE p(a, b, c, d)');
  calls.length = 0;
  await db.execute('INSERT INTO p VALUES (?, ?, ?, ?)', ['x\uD800', 2 ** 63, true, '😀']);
  await db.execute('INSERT INTO p VALUES (?, ?, ?, ?)', [2n ** 62n, 'x\uD800', true, '😀']);
  const rows = await db.transaction((tx) =>
    tx.select('SELECT quote(a) AS a, typeof(b) AS b, c, d FROM p WHERE c = ? AND d = ? ORDER BY rowid', [1, '😀']),
  );
  assert.deepEqual(rows, [
    { a: "'x\uFFFD'", b: 'real', c: 1, d: '😀' },
    { a: String(2n ** 62n), b: 'text', c: 1, d: '😀' },
  ]);
  assert.deepEqual(calls, ['dbExecute:packed', 'dbExecute:values', 'dbWriterRead:packed']);
  // One value and named values go as they are; a Proxy of an array as a plain copy.
  calls.length = 0;
  assert.deepEqual(await db.selectOne('SELECT ? AS a', ['one']), { a: 'one' });
  assert.deepEqual(await db.selectOne('SELECT :a AS a, :b AS b', { a: 1, b: 2 }), { a: 1, b: 2 });
  assert.deepEqual(await db.selectOne('SELECT ? AS a, ? AS b', new Proxy([1, 2], {})), { a: 1, b: 2 });
  assert.deepEqual(calls, ['dbRead:values', 'dbRead:values', 'dbRead:packed']);
});

test('a Proxy of an array binds by position in every method, and its bytes as they were read', async (t) => {
  // Array.isArray says it is an array (reactive state in UI frameworks is such a Proxy);
  // the binding's own test says it is not, and bound it by name ('0', '1').
  for (const options of [undefined, { inlineReads: true }]) {
    const db = await openMemory(t, options);
    await db.execute('CREATE TABLE t(a, b)');
    const proxy = () => new Proxy([1, 'two'], {});
    const row = { a: 1, b: 'two' };
    assert.deepEqual(await db.select('SELECT ? AS a, ? AS b', proxy()), [row]);
    assert.deepEqual(await db.selectOne('SELECT ? AS a, ? AS b', proxy()), row);
    assert.equal((await db.selectBytes('SELECT ? AS a, ? AS b', proxy())).toString(), JSON.stringify([row]));
    assert.equal((await db.execute('INSERT INTO t VALUES (?, ?)', proxy())).changes, 1);
    await db.executeBatch('INSERT INTO t VALUES (?, ?)', [proxy(), proxy()]);
    await db.transaction(async (tx) => {
      assert.equal((await tx.execute('INSERT INTO t VALUES (?, ?)', proxy())).changes, 1);
      assert.deepEqual(await tx.select('SELECT ? AS a, ? AS b', proxy()), [row]);
    });
    const statement = await db.prepare('SELECT ? AS a, ? AS b');
    assert.deepEqual(await statement.selectOne(proxy()), row);
    const iterated = [];
    for await (const r of db.iterate('SELECT ? AS a, ? AS b', proxy())) iterated.push(r);
    assert.deepEqual(iterated, [row]);
    assert.deepEqual(await db.select('SELECT a, b FROM t'), Array(4).fill(row));
    // A trap that changes an element read before it does not change what is bound.
    const bytes = Buffer.from('ab');
    const changing = new Proxy([bytes, 0], {
      get(target, key, receiver) {
        if (key === '1') bytes.fill(0x7a);
        return Reflect.get(target, key, receiver);
      },
    });
    assert.deepEqual(await db.selectOne('SELECT CAST(? AS TEXT) AS a, ? AS b', changing), { a: 'ab', b: 0 });
    // More elements than a statement can take: refused before they are read.
    let reads = 0;
    const huge = new Proxy([], {
      get(target, key, receiver) {
        if (key === 'length') return 2 ** 32 - 1;
        reads++;
        return Reflect.get(target, key, receiver);
      },
    });
    await rejectsAsync(() => db.select('SELECT ?', huge), RangeError);
    assert.equal(reads, 0);
  }
});

test('an own __proto__ key (JSON.parse makes one) binds the same in every method', async (t) => {
  const db = await openMemory(t);
  const params = () => JSON.parse('{"a": 1, "__proto__": 7}');
  const sql = 'SELECT :a AS a, :__proto__ AS p';
  const row = { a: 1, p: 7 };
  assert.deepEqual(await db.selectOne(sql, params()), row);
  const iterated = [];
  for await (const r of db.iterate(sql, params())) iterated.push(r);
  assert.deepEqual(iterated, [row]);
  const live = db.stream(sql, params());
  for await (const rows of live) {
    assert.deepEqual(rows, [row]);
    break;
  }
  // A key the statement does not name is refused the same way by both.
  const extra = JSON.parse('{"a": 1, "__proto__": 5}');
  await rejectsAsync(() => db.selectOne('SELECT :a AS a', extra), RangeError);
  await rejectsAsync(async () => {
    for await (const r of db.iterate('SELECT :a AS a', extra)) void r;
  }, RangeError);
});

test('a BLOB binds the bytes it held when it was read, whatever a later getter does, for any number of values', async (t) => {
  const db = await openMemory(t);
  await db.execute('CREATE TABLE b(x)');
  for (const count of [2, 5, 33]) {
    for (const change of ['fill', 'detach']) {
      const ab = new ArrayBuffer(4);
      const view = new Uint8Array(ab);
      view.set([0xde, 0xad, 0xbe, 0xef]);
      const params = [view, ...Array(count - 1).fill(0)];
      Object.defineProperty(params, 1, {
        enumerable: true,
        get() {
          if (change === 'fill') view.fill(0);
          else structuredClone(ab, { transfer: [ab] });
          return 0;
        },
      });
      const sql = `INSERT INTO b VALUES (?) RETURNING hex(x) AS h, ${Array(count - 1).fill('?').join(' + ')} AS z`;
      const { rows } = await db.execute(sql, params);
      assert.equal(rows[0].h, 'DEADBEEF', `${count} values, ${change}`);
    }
  }
});

test('a batch BLOB over SQLite\'s limit is refused before it is copied', async (t) => {
  const db = await openMemory(t);
  await db.execute('CREATE TABLE b(x)');
  // The length is checked, not the bytes: a view claiming that many bytes costs no memory
  // here (an unfilled ArrayBuffer is only reserved).
  const big = new Uint8Array(new ArrayBuffer(1_000_000_001));
  await rejectsAsync(() => db.executeBatch('INSERT INTO b VALUES (?)', [[big]]), {
    name: 'RangeError',
    message: "paramSets[0][0] is longer than SQLite's limit of 1000000000 bytes",
  });
  await rejectsAsync(() => db.execute('INSERT INTO b VALUES (?)', [big]), RangeError);
  assert.equal((await db.selectOne('SELECT count(*) AS n FROM b')).n, 0);
});

test('a getter of a parameter that sends a request while the parameters are packed: each binds its own', async (t) => {
  const db = await openMemory(t);
  let inner;
  const params = ['outer', 1, 'x'];
  Object.defineProperty(params, 1, {
    get() {
      inner ??= db.selectOne('SELECT ? AS a, ? AS b, ? AS c', ['in', 'ner', 2]);
      return 1;
    },
  });
  assert.deepEqual(await db.selectOne('SELECT ? AS a, ? AS b, ? AS c', params), { a: 'outer', b: 1, c: 'x' });
  assert.deepEqual(await inner, { a: 'in', b: 'ner', c: 2 });
  inner = undefined;
  await db.execute('CREATE TABLE g(a, b, c)');
  await db.execute('INSERT INTO g VALUES (?, ?, ?)', params);
  assert.deepEqual(await inner, { a: 'in', b: 'ner', c: 2 });
  assert.deepEqual(await db.select('SELECT * FROM g'), [{ a: 'outer', b: 1, c: 'x' }]);
  // Parameters that cannot all be packed (a BigInt comes last) are still read once each.
  let reads = 0;
  const mixed = ['a', 2, true, null, 0n];
  for (const [i, v] of [[0, 'a\uD800'], [2, true], [4, 5n]]) {
    Object.defineProperty(mixed, i, {
      get() {
        reads++;
        return v;
      },
    });
  }
  const row = await db.selectOne('SELECT ? AS a, ? AS b, ? AS c, ? AS d, ? AS e', mixed);
  assert.deepEqual(row, { a: 'a\uFFFD', b: 2, c: 1, d: null, e: 5 });
  assert.equal(reads, 3, 'each getter ran once');
  // A refused value ends the reading there, as when the binding reads the array itself.
  reads = 0;
  const refused = [1, Symbol('s'), 'x'];
  Object.defineProperty(refused, 2, {
    get() {
      reads++;
      return 'x';
    },
  });
  await rejectsAsync(() => db.selectOne('SELECT ?, ?, ?', refused), {
    name: 'TypeError',
    message: /^params\[1\] has an unsupported type \(symbol\)/,
  });
  assert.equal(reads, 0, 'nothing after the refused value was read');
  // Also when a value that cannot be packed, but binds, comes first.
  refused[0] = 5n;
  await rejectsAsync(() => db.selectOne('SELECT ?, ?, ?', refused), {
    name: 'TypeError',
    message: /^params\[1\] has an unsupported type \(symbol\)/,
  });
  assert.equal(reads, 0, 'nothing after the refused value was read');
});

test('packed parameters that do not agree with their text are a TypeError from the binding, not a crash', async (t) => {
  const native = createRequire(import.meta.url)('../native/quietsqlite.node');
  const read = native.dbRead;
  let handle;
  native.dbRead = function (h, ...rest) {
    handle = h;
    return read.call(this, h, ...rest);
  };
  t.after(() => {
    native.dbRead = read;
  });
  const db = await openMemory(t);
  assert.deepEqual(await db.selectOne('SELECT 1 AS one'), { one: 1 });
  native.dbRead = read;
  const { PACKED_TEXT: TEXT, PACKED_BLOB: BLOB, PACKED_INTEGER: INTEGER } = createRequire(import.meta.url)('../dist/params.js');
  const layout = (...cells) => Float64Array.from(cells);
  const calls = [
    (l, text) => native.dbRead(handle, 1, 'SELECT ?', l, 0, false, text),
    (l, text) => native.dbExecute(handle, 1, 0, 'SELECT ?', l, false, text),
    (l, text) => native.dbWriterRead(handle, 1, 0, 'SELECT ?', l, 0, false, text),
  ];
  const cases = [
    // The TEXT lengths do not add up to the text's length: refused before it is read (a
    // huge claimed length too, before anything is sized by it).
    [[TEXT, 2], 'abc'],
    [[TEXT, 4], 'abc'],
    [[TEXT, 1], '中abc'],
    [[TEXT, NaN], ''],
    [[TEXT, 1e300], 'abc'],
    [[TEXT, 3.3e8], 'x'],
    // They add up, but a value ends inside a character or is not a whole number of units.
    [[TEXT, 1, TEXT, 1], '😀'],
    [[TEXT, 2, TEXT, 1], '中😀'],
    [[TEXT, 0.5, TEXT, 0.5], 'a'],
    [[TEXT, -1, TEXT, 4], 'abc'],
    // Tags and numbers the packer never makes.
    [[99, 0], ''],
    [[BLOB, 0], ''],
    [[INTEGER + 0.5, 0], ''],
    [[INTEGER, 1.5], ''],
    [[INTEGER, 2 ** 63], ''],
  ];
  const shared = new Float64Array(new SharedArrayBuffer(24));
  shared.set([1, INTEGER, 7]);
  const refused = [
    ...cases.map(([cells, text]) => [layout(cells.length / 2, ...cells), text]),
    [layout(3, INTEGER, 0), ''], // a count beyond the layout
    [layout(1.5, INTEGER, 0, INTEGER, 0), ''],
    [layout(-1), ''],
    [layout(1e9), ''],
    [layout(), ''],
    [[1, INTEGER, 0], ''], // not a Float64Array
    [new Float32Array([1, INTEGER, 0]), ''],
    [shared, ''], // over a SharedArrayBuffer
    [layout(1, INTEGER, 0), 42], // the text not a string
  ];
  for (const [l, text] of refused) {
    for (const call of calls) assert.throws(() => call(l, text), TypeError, `${l.constructor.name} ${[...l]} ${text}`);
  }
  // The database is untouched.
  assert.deepEqual(await db.selectOne('SELECT ? AS a, ? AS b', ['still', 'fine']), { a: 'still', b: 'fine' });
});

test('SQL text containing NUL is a TypeError in every method; nothing runs', async (t) => {
  const db = await openMemory(t);
  await db.execute('CREATE TABLE t(x)');
  const sql = 'INSERT INTO t VALUES (1)\0; DROP TABLE t';
  const expected = { name: 'TypeError', message: 'SQL text contains a NUL character' };
  await rejectsAsync(() => db.execute(sql), expected);
  await rejectsAsync(() => db.execute('SELECT 1\0'), expected);
  await rejectsAsync(() => db.select('SELECT 1\0 garbage'), expected);
  await rejectsAsync(() => db.selectOne('SELECT 1\0'), expected);
  await rejectsAsync(() => db.selectBytes('SELECT 1\0'), expected);
  await rejectsAsync(() => db.executeBatch(sql, [[]]), expected);
  await rejectsAsync(() => db.transaction((tx) => tx.execute(sql)), expected);
  await rejectsAsync(() => db.transaction((tx) => tx.select('SELECT 1\0')), expected);
  assert.throws(() => db.stream('SELECT 1\0'), expected);
  assert.deepEqual(await db.select('SELECT count(*) AS n FROM t'), [{ n: 0 }]);
});

// ---- class 8: security ----

test('the file behind :memory: is private (0600, also -wal and -shm) with an unpredictable name', { skip: process.platform === 'win32' }, async (t) => {
  const dir = statSync('/dev/shm', { throwIfNoEntry: false })?.isDirectory() ? '/dev/shm' : tmpdir();
  const listing = () => readdirSync(dir).filter((n) => n.startsWith('quietsqlite-memory-'));
  const before = new Set(listing());
  const a = await openMemory(t);
  const b = await openMemory(t);
  await a.execute('CREATE TABLE t(x)');
  await a.execute('INSERT INTO t VALUES (1)');
  // Files this test's two databases created (other processes may use the directory too:
  // where /proc exists, only the files this process holds open count).
  let ours = listing().filter((n) => !before.has(n));
  if (statSync('/proc/self/fd', { throwIfNoEntry: false })) {
    const open = new Set();
    for (const fd of readdirSync('/proc/self/fd')) {
      try {
        open.add(readlinkSync(`/proc/self/fd/${fd}`).split('/').pop());
      } catch {}
    }
    ours = ours.filter((n) => open.has(n));
  }
  assert.ok(ours.length >= 2, `files in ${dir}: ${ours}`);
  for (const name of ours) {
    assert.doesNotMatch(name, new RegExp(`-${process.pid}-`), 'the name must not be predictable from the pid');
    assert.match(name, /^quietsqlite-memory-[0-9a-f]{32}\.db(-wal|-shm)?$/);
    let mode;
    try {
      mode = statSync(join(dir, name)).mode & 0o777;
    } catch {
      continue; // another test's file went away meanwhile
    }
    assert.equal(mode, 0o600, `${name} is ${mode.toString(8)}`);
  }
  assert.ok(ours.some((n) => n.endsWith('-wal')), 'a WAL file exists and was checked');
  await b.close();
});

test('error messages name parameters, never their values', async (t) => {
  const db = await openMemory(t);
  const secret = 'hunter2-secret';
  const check = (err) => assert.ok(!String(err.message).includes(secret), err.message);
  check(await rejectsAsync(() => db.select('SELECT ?', [secret, secret]), RangeError));
  check(await rejectsAsync(() => db.select('SELECT :a', { a: secret, b: secret }), RangeError));
  check(await rejectsAsync(() => db.select('SELECT :a', { a: secret, ':a': secret }), RangeError));
  check(await rejectsAsync(() => db.select('SELECT ?', [{ secret }]), TypeError));
  check(await rejectsAsync(() => db.select('SELECT ?', [2n ** 70n]), RangeError));
  check(
    await rejectsAsync(() => Database.open(':memory:', { pragmas: { user_version: `${secret}; x` } }), Error),
  );
});

// ---- class 9: clear errors ----

test('a database file deleted while open reports the extended code name', { skip: process.platform !== 'linux' }, async (t) => {
  const db = await openTemp(t, { readers: 1 }, 'gone.db');
  await db.execute('CREATE TABLE t(x)');
  await db.execute('INSERT INTO t VALUES (1)');
  unlinkSync(db.path);
  // The reader's next transaction checks its file (fstat) and finds it gone.
  const err = await rejectsAsync(() => db.select('SELECT x FROM t'), SqliteError);
  assert.equal(err.code, 'SQLITE_IOERR_FSTAT');
  assert.equal(err.errno, 1802);
});

test('a path containing NUL says the path contains a NUL character', async () => {
  await assert.rejects(() => Database.open('/tmp/a\0b.db'), {
    name: 'TypeError',
    message: /path contains a NUL character/,
  });
});

test('two keys naming the same parameter are a RangeError naming it', async (t) => {
  const db = await openMemory(t);
  for (const [sql, params] of [
    ['SELECT :a AS x', { a: 1, ':a': 2 }],
    ['SELECT @a AS x', { '@a': 1, a: 2 }],
    ['SELECT $a AS x', { a: 1, $a: 2 }],
  ]) {
    await rejectsAsync(() => db.select(sql, params), { name: 'RangeError', message: /'[:@$]a' is given twice/ });
  }
  // Different prefixes are different parameters in SQLite and each binds its own key.
  assert.deepEqual(await db.select('SELECT :a AS x, @a AS y', { ':a': 1, '@a': 2 }), [{ x: 1, y: 2 }]);
});
