// Errors: SqliteError details, errors raised while stepping, and misuse. Every failing call
// rejects (never throws synchronously) and leaves the database usable.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { SqliteError, openMemory, rejectsAsync, assertSqliteError } from './fixtures/helpers.mjs';

/** The database still answers a read and a write. */
async function assertUsable(db) {
  assert.deepStrictEqual(await db.select('SELECT 1 AS ok'), [{ ok: 1 }]);
  await db.execute('CREATE TABLE IF NOT EXISTS usable(x)');
  assert.equal((await db.execute('INSERT INTO usable VALUES (1)')).changes, 1);
}

async function seeded(t) {
  const db = await openMemory(t, { readers: 2 });
  await db.execute('CREATE TABLE n(x INTEGER)');
  await db.executeBatch(
    'INSERT INTO n VALUES (?)',
    Array.from({ length: 10 }, (_, i) => [i + 1]),
  );
  return db;
}

test('SqliteError carries code, errno, sql and message; it is an Error', async (t) => {
  const db = await openMemory(t);
  await db.execute('CREATE TABLE u(x UNIQUE)');
  await db.execute('INSERT INTO u VALUES (1)');
  const sql = 'INSERT INTO u VALUES (?)';
  const err = await rejectsAsync(() => db.execute(sql, [1]), SqliteError);
  assertSqliteError(err, 'SQLITE_CONSTRAINT_UNIQUE', 2067);
  assert.equal(err.sql, sql);
  assert.match(err.message, /UNIQUE constraint failed: u\.x/);
  assert.equal(err.name, 'SqliteError');
  assert.ok(err.stack.includes('SqliteError'));
  await assertUsable(db);
});

test('constraint failures carry their extended codes', async (t) => {
  const db = await openMemory(t);
  await db.execute('CREATE TABLE p(id INTEGER PRIMARY KEY)');
  await db.execute('CREATE TABLE c(p REFERENCES p(id), nn NOT NULL DEFAULT 0, ck CHECK (ck IS NULL OR ck > 0))');
  await db.execute('INSERT INTO p VALUES (1)');
  const cases = [
    ['INSERT INTO p VALUES (1)', 'SQLITE_CONSTRAINT_PRIMARYKEY', 1555],
    ['INSERT INTO c(p) VALUES (99)', 'SQLITE_CONSTRAINT_FOREIGNKEY', 787], // foreign_keys is on by default
    ['INSERT INTO c(p, nn) VALUES (1, NULL)', 'SQLITE_CONSTRAINT_NOTNULL', 1299],
    ['INSERT INTO c(p, ck) VALUES (1, 0)', 'SQLITE_CONSTRAINT_CHECK', 275],
  ];
  for (const [sql, code, errno] of cases) {
    const err = await rejectsAsync(() => db.execute(sql), SqliteError);
    assertSqliteError(err, code, errno);
    assert.equal(err.sql, sql);
  }
  await assertUsable(db);
});

test('prepare errors: syntax error, missing table, double-quoted string literal', async (t) => {
  const db = await openMemory(t);
  for (const [sql, pattern] of [
    ['SELEC 1', /syntax error/],
    ['SELECT * FROM no_such_table', /no such table: no_such_table/],
    ['SELECT "not a string"', /no such column/], // compiled without double-quoted string literals
  ]) {
    const err = await rejectsAsync(() => db.select(sql), SqliteError);
    assertSqliteError(err, 'SQLITE_ERROR', 1);
    assert.equal(err.sql, sql);
    assert.match(err.message, pattern);
    await rejectsAsync(() => db.execute(sql), SqliteError);
    await rejectsAsync(() => db.selectBytes(sql), SqliteError);
  }
  await assertUsable(db);
});

test('a runtime error in the middle of a result reaches the caller', async (t) => {
  const db = await seeded(t);
  // Scanned in rowid order: rows 1..5 succeed, row 6 raises; no partial result may be returned.
  const sql = "SELECT CASE WHEN x > 5 THEN json('bad') ELSE x END AS v FROM n";
  for (const call of [
    () => db.select(sql),
    () => db.select(sql, [], { rowMode: 'array' }),
    () => db.selectBytes(sql),
    () => db.execute(sql),
  ]) {
    const err = await rejectsAsync(call, SqliteError);
    assertSqliteError(err, 'SQLITE_ERROR');
    assert.match(err.message, /malformed JSON/);
    assert.equal(err.sql, sql);
  }
  // selectOne needs only the first row, which is fine...
  assert.deepStrictEqual(await db.selectOne(sql), { v: 1 });
  // ...but fails when the first row itself raises.
  await rejectsAsync(() => db.selectOne(`${sql} WHERE x > 5`), SqliteError);
  await assertUsable(db);
});

test('integer overflow in sum() is an error, not a wrong result', async (t) => {
  const db = await openMemory(t);
  const sql = 'SELECT sum(v) AS s FROM (SELECT 9223372036854775807 AS v UNION ALL SELECT 1)';
  for (const call of [() => db.select(sql), () => db.selectOne(sql), () => db.selectBytes(sql), () => db.execute(sql)]) {
    const err = await rejectsAsync(call, SqliteError);
    assertSqliteError(err, 'SQLITE_ERROR');
    assert.match(err.message, /integer overflow/);
  }
  await assertUsable(db);
});

test('a write sent to select is an error, never [] (and writes nothing)', async (t) => {
  const db = await openMemory(t);
  await db.execute('CREATE TABLE t(a)');
  for (const sql of [
    'INSERT INTO t VALUES (1)',
    'INSERT INTO t VALUES (2) RETURNING a',
    'UPDATE t SET a = 3',
    'DELETE FROM t',
    'CREATE TABLE t2(a)',
  ]) {
    const err = await rejectsAsync(() => db.select(sql), Error);
    assert.ok(err instanceof SqliteError, `${sql}: ${err}`);
    await rejectsAsync(() => db.selectOne(sql), Error);
    await rejectsAsync(() => db.selectBytes(sql), Error);
  }
  assert.deepStrictEqual(await db.select('SELECT * FROM t'), []);
  assert.deepStrictEqual(await db.select("SELECT name FROM sqlite_master WHERE name = 't2'"), []);
  await assertUsable(db);
});

test('wrong number of positional parameters is a RangeError', async (t) => {
  const db = await openMemory(t);
  for (const [sql, params] of [
    ['SELECT ?, ?', [1]],
    ['SELECT ?', [1, 2]],
    ['SELECT 1', [1]],
    ['SELECT ?', []],
    ['SELECT ?', undefined],
  ]) {
    await rejectsAsync(() => db.select(sql, params), RangeError, `${sql} with ${JSON.stringify(params)}`);
    await rejectsAsync(() => db.execute(sql, params), RangeError);
  }
  await assertUsable(db);
});

test('unknown and missing named parameters are RangeErrors', async (t) => {
  const db = await openMemory(t);
  await rejectsAsync(() => db.select('SELECT :a', { a: 1, b: 2 }), { name: 'RangeError', message: /\bb\b/ });
  await rejectsAsync(() => db.select('SELECT :a, :b', { a: 1 }), { name: 'RangeError', message: /\bb\b/ });
  await rejectsAsync(() => db.select('SELECT :a', {}), RangeError);
  await rejectsAsync(() => db.select('SELECT :a', [1]), RangeError); // named SQL, positional params
  await rejectsAsync(() => db.execute('SELECT @x', { y: 1 }), RangeError);
  await rejectsAsync(() => db.executeBatch('SELECT $x', [{ x: 1 }, { y: 1 }]), RangeError);
  await assertUsable(db);
});

test('params that are neither an array nor a plain object are TypeErrors, not an empty set', async (t) => {
  // A Map was read by its own properties (none): its entries were ignored and the query ran.
  const db = await openMemory(t);
  class Named {
    constructor() {
      this.a = 1;
    }
  }
  for (const [label, params] of [
    ['Map', new Map([['a', 1]])],
    ['Set', new Set([1])],
    ['Date', new Date(0)],
    ['RegExp', /a/],
    ['class instance', new Named()],
  ]) {
    await rejectsAsync(() => db.select('SELECT 1 AS x', params), TypeError, label);
    await rejectsAsync(() => db.execute('SELECT 1 AS x', params), TypeError, label);
    assert.throws(() => db.stream('SELECT 1 AS x', params), TypeError, label);
    await rejectsAsync(() => db.executeBatch('SELECT 1 AS x', [params]), /paramSets\[0\] must be an array or a plain object/, label);
  }
  // Plain objects: a literal, one with a null prototype, one from another realm.
  const { runInNewContext } = await import('node:vm');
  for (const params of [{ a: 1 }, Object.assign(Object.create(null), { a: 1 }), runInNewContext('({ a: 1 })')]) {
    assert.deepEqual(await db.select('SELECT :a AS x', params), [{ x: 1 }]);
  }
  await assertUsable(db);
});

test('unsupported parameter types are TypeErrors naming the parameter', async (t) => {
  const db = await openMemory(t);
  const bad = [
    ['object', {}],
    ['array', [1]],
    ['Date', new Date(0)],
    ['function', () => 1],
    ['symbol', Symbol('s')],
    ['Map', new Map()],
    ['ArrayBuffer', new ArrayBuffer(1)], // not a view
  ];
  for (const [label, value] of bad) {
    const err = await rejectsAsync(() => db.select('SELECT ?, ?', [1, value]), TypeError, label);
    assert.match(err.message, /params\[1\]/, `${label}: ${err.message}`);
    const named = await rejectsAsync(() => db.execute('SELECT :v', { v: value }), TypeError, label);
    assert.match(named.message, /\bv\b/, `${label}: ${named.message}`);
    const batch = await rejectsAsync(() => db.executeBatch('SELECT ?', [[1], [value]]), TypeError, label);
    assert.match(batch.message, /\[1\]/, `${label}: ${batch.message}`);
  }
  await assertUsable(db);
});

test('params that are neither array nor object are TypeErrors', async (t) => {
  const db = await openMemory(t);
  for (const params of ['x', 5, true, 5n, Symbol('p')]) {
    await rejectsAsync(() => db.select('SELECT ?', params), TypeError);
    await rejectsAsync(() => db.execute('SELECT ?', params), TypeError);
  }
  await rejectsAsync(() => db.executeBatch('SELECT ?', 'x'), TypeError);
  await rejectsAsync(() => db.executeBatch('SELECT ?', [[1], 5]), TypeError);
  await assertUsable(db);
});

test('several statements: with parameters an error and nothing runs; without, all run', async (t) => {
  const db = await openMemory(t);
  await db.execute('CREATE TABLE t(a)');
  const err = await rejectsAsync(() => db.execute('INSERT INTO t VALUES (?); INSERT INTO t VALUES (2)', [1]), Error);
  assert.ok(err instanceof RangeError || err instanceof TypeError || err instanceof SqliteError, String(err));
  await rejectsAsync(() => db.execute('INSERT INTO t VALUES (1); INSERT INTO t VALUES (?)', [2]), Error);
  await rejectsAsync(() => db.execute('INSERT INTO t VALUES (:a); INSERT INTO t VALUES (3)', { a: 1 }), Error);
  assert.deepStrictEqual(await db.select('SELECT * FROM t'), [], 'no partial run');

  // Without parameters every statement runs.
  await db.execute('INSERT INTO t VALUES (1); INSERT INTO t VALUES (2);\n INSERT INTO t VALUES (3)');
  assert.deepStrictEqual(await db.select('SELECT a FROM t ORDER BY a'), [{ a: 1 }, { a: 2 }, { a: 3 }]);
  // select and executeBatch take exactly one statement.
  await rejectsAsync(() => db.select('SELECT 1; SELECT 2'), Error);
  await rejectsAsync(() => db.executeBatch('INSERT INTO t VALUES (?); INSERT INTO t VALUES (?)', [[1, 2]]), Error);
  assert.equal((await db.selectOne('SELECT count(*) AS n FROM t')).n, 3);
  // A trailing semicolon or comment is not a second statement.
  assert.deepStrictEqual(await db.select('SELECT 1 AS a; -- done'), [{ a: 1 }]);
  await assertUsable(db);
});

test('a multi-statement script whose later statements depend on earlier ones runs', async (t) => {
  const db = await openMemory(t);
  // The common schema-setup case: each statement needs the previous one to have run.
  await db.execute(`
    CREATE TABLE author(id INTEGER PRIMARY KEY, name TEXT NOT NULL);
    CREATE INDEX author_name ON author(name);
    INSERT INTO author(name) VALUES ('Ada'), ('Grace');
  `);
  assert.deepStrictEqual(await db.select('SELECT name FROM author ORDER BY id'), [{ name: 'Ada' }, { name: 'Grace' }]);
});

test(
  'SQL with no statement (empty, blank, only a comment) is reported as misuse',
  {},
  async (t) => {
    const db = await openMemory(t);
    for (const sql of ['', '   ', '-- only a comment', ';', '/* block */']) {
      // A read needs a statement: the caller made a mistake (RangeError/TypeError, as for
      // other misuse), not SQLite (an SQLITE_MISUSE SqliteError would mean the engine misused it).
      for (const call of [() => db.select(sql), () => db.selectOne(sql), () => db.selectBytes(sql)]) {
        const err = await rejectsAsync(call, Error);
        assert.ok(err instanceof RangeError || err instanceof TypeError, `${JSON.stringify(sql)}: ${err?.name} ${err?.code}: ${err?.message}`);
      }
      // A script with nothing to run is either a no-op or the same misuse error.
      const outcome = await db.execute(sql).then(
        (r) => r,
        (e) => e,
      );
      if (outcome instanceof Error) {
        assert.ok(outcome instanceof RangeError || outcome instanceof TypeError, `execute(${JSON.stringify(sql)}): ${outcome.name} ${outcome.code}: ${outcome.message}`);
      } else {
        assert.equal(outcome.changes, 0);
      }
    }
    await assertUsable(db);
  },
);

test('sql that is not a string is a TypeError', async (t) => {
  const db = await openMemory(t);
  for (const sql of [undefined, null, 42, {}, Buffer.from('SELECT 1'), ['SELECT 1']]) {
    await rejectsAsync(() => db.select(sql), TypeError);
    await rejectsAsync(() => db.selectOne(sql), TypeError);
    await rejectsAsync(() => db.selectBytes(sql), TypeError);
    await rejectsAsync(() => db.execute(sql), TypeError);
    await rejectsAsync(() => db.executeBatch(sql, []), TypeError);
  }
  await assertUsable(db);
});

test('unknown or invalid query options are TypeErrors', async (t) => {
  const db = await openMemory(t);
  await rejectsAsync(() => db.select('SELECT 1', [], { rowmode: 'array' }), { name: 'TypeError', message: /rowmode/ });
  await rejectsAsync(() => db.selectOne('SELECT 1', [], { mode: 'array' }), TypeError);
  await rejectsAsync(() => db.select('SELECT 1', [], { rowMode: 'arrays' }), TypeError);
  await rejectsAsync(() => db.select('SELECT 1', [], 'array'), TypeError);
  await rejectsAsync(() => db.transaction(async () => 1, { mod: 'deferred' }), { name: 'TypeError', message: /mod/ });
  await assertUsable(db);
});

test(
  'an unknown close() option rejects with TypeError and leaves the database open',
  {},
  async (t) => {
    const db = await openMemory(t);
    await rejectsAsync(() => db.close({ forced: true }), { name: 'TypeError', message: /forced/ });
    assert.equal(db.isOpen, true);
    await assertUsable(db);
  },
);

test('many failing calls in flight at once all reject, and the database stays usable', async (t) => {
  const db = await seeded(t);
  const calls = [];
  for (let i = 0; i < 200; i++) {
    switch (i % 5) {
      case 0: calls.push([db.select('SELECT * FROM missing'), SqliteError]); break;
      case 1: calls.push([db.select('SELECT ?', [{}]), TypeError]); break;
      case 2: calls.push([db.execute('INSERT INTO n VALUES (?)', []), RangeError]); break;
      case 3: calls.push([db.select("SELECT json('bad') FROM n"), SqliteError]); break;
      case 4: calls.push([db.select('SELECT count(*) AS c FROM n'), null]); break;
    }
  }
  const settled = await Promise.allSettled(calls.map(([p]) => p));
  settled.forEach((s, i) => {
    const expected = calls[i][1];
    if (expected === null) assert.deepStrictEqual(s, { status: 'fulfilled', value: [{ c: 10 }] });
    else {
      assert.equal(s.status, 'rejected', `call ${i}`);
      assert.ok(s.reason instanceof expected, `call ${i}: ${s.reason}`);
    }
  });
  await assertUsable(db);
});

test('a key that is not a plain name is not repeated in a message; a NUL in a key is said to be in a key', async (t) => {
  // A review: 'password=hunter2' and a 100,000-character key were echoed whole, and a NUL in a
  // key was reported as "SQL text contains a NUL byte".
  const db = await openMemory(t);
  for (const key of ['password=hunter2', 'k'.repeat(100_000)]) {
    const err = await db.select('SELECT :a AS a', { a: 1, [key]: 2 }).catch((e) => e);
    assert.ok(err instanceof RangeError, String(err));
    assert.ok(!err.message.includes(key.slice(0, 20)), err.message.slice(0, 200));
    assert.ok(err.message.length < 300, `${err.message.length} characters`);
    const typed = await db.select('SELECT 1', { [key]: {} }).catch((e) => e);
    assert.ok(typed instanceof TypeError && !typed.message.includes(key.slice(0, 20)), typed.message.slice(0, 200));
  }
  const nul = await db.select('SELECT :a AS a', { 'a\0b': 1 }).catch((e) => e);
  assert.ok(nul instanceof RangeError, String(nul));
  assert.match(nul.message, /a key of params contains a NUL character/);
  // Plain names are still named, as documented.
  await rejectsAsync(() => db.select('SELECT :a AS a', { nmae: 1 }), RangeError, /unknown named parameter 'nmae'/);
});

test("SQLite's own message never carries a parameter's text, on any path", async (t) => {
  // json_extract quotes a bad path it was given: "bad JSON path: '<the value>'".
  const secret = 'hunter2-SECRET';
  const hidden = (err) => err instanceof SqliteError && !err.message.includes(secret) && /bad JSON path/.test(err.message);
  for (const options of [undefined, { inlineReads: true }]) {
    const db = await openMemory(t, options);
    await db.execute('CREATE TABLE t(j)');
    await rejectsAsync(() => db.select("SELECT json_extract('{}', ?) AS v", [secret]), hidden);
    await rejectsAsync(() => db.selectOne("SELECT json_extract('{}', :p) AS v", { p: secret }), hidden);
    await rejectsAsync(() => db.execute("INSERT INTO t VALUES (json_extract('{}', ?))", [secret]), hidden);
    await rejectsAsync(() => db.executeBatch("INSERT INTO t VALUES (json_extract('{}', ?))", [['$.a'], [secret]]), hidden);
    await rejectsAsync(() => db.executeBatch("INSERT INTO t VALUES (json_extract('{}', :p))", [{ p: secret }]), hidden);
    await rejectsAsync(() => db.transaction((tx) => tx.select("SELECT json_extract('{}', ?) AS v", [secret])), hidden);
    await rejectsAsync(async () => {
      for await (const row of db.iterate("SELECT json_extract('{}', ?) AS v", [secret])) void row;
    }, hidden);
    await rejectsAsync(async () => {
      for await (const rows of db.stream("SELECT json_extract('{}', ?) AS v", [secret])) void rows;
    }, hidden);
    // Short texts stay (they would match words of the message).
    await rejectsAsync(() => db.select("SELECT json_extract('{}', ?) AS v", ['x']), (err) => /'x'/.test(err.message));
  }
});

test("nor a file name, BLOB or integer it was given (a hostile probe's finds)", async (t) => {
  // `VACUUM INTO ?` and `ATTACH ?` name the file they could not open, bare; json_extract
  // quotes a BLOB's bytes and an integer's digits as it quotes a text.
  const path = '/no-such-dir/customer-4711-export.db';
  const without = (secret, pattern) => (err) =>
    err instanceof SqliteError && !err.message.includes(secret) && pattern.test(err.message);
  for (const options of [undefined, { inlineReads: true }]) {
    const db = await openMemory(t, options);
    await db.execute('CREATE TABLE t(j)');
    await rejectsAsync(() => db.execute('VACUUM INTO ?', [path]), without(path, /unable to open/));
    await rejectsAsync(() => db.execute('ATTACH ? AS other', [path]), without(path, /unable to open/));
    await rejectsAsync(() => db.transaction((tx) => tx.execute('ATTACH :p AS other', { p: path })), without(path, /unable to open/));
    const digits = 4111111111111111;
    await rejectsAsync(() => db.select("SELECT json_extract('{}', ?) AS v", [digits]), without(String(digits), /bad JSON path/));
    await rejectsAsync(() => db.select("SELECT json_extract('{}', ?) AS v", [BigInt(digits)]), without(String(digits), /bad JSON path/));
    const blob = Buffer.from('hunter2-blob-SECRET');
    await rejectsAsync(() => db.selectOne("SELECT json_extract('{}', ?) AS v", [blob]), without('hunter2', /bad JSON path/));
    await rejectsAsync(
      () => db.executeBatch("INSERT INTO t VALUES (json_extract('{}', ?))", [['$.a'], [new Uint8Array(blob)]]),
      without('hunter2', /bad JSON path/),
    );
    // A value that could be a name stays where it stands bare: it may be the message's own word.
    await db.execute('CREATE TABLE users(email TEXT UNIQUE)');
    await db.execute('INSERT INTO users VALUES (?)', ['email']);
    await rejectsAsync(() => db.execute('INSERT INTO users VALUES (?)', ['email']), (err) => /users\.email/.test(err.message));
  }
});
