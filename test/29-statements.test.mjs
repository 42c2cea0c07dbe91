// Prepared statements (issue 9): db.prepare(sql) gives the results of the SQL text for every
// method, survives schema changes, routes into transactions, frees its native side.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { createRequire } from 'node:module';
import { promisify } from 'node:util';
import { Database, ErrorCodes } from '../dist/index.mjs';
import { assertSqliteError, openMemory, openTemp, rejectsAsync } from './fixtures/helpers.mjs';

const RUNAWAY = 'WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) SELECT count(*) AS n FROM c';

/** The Values table: one row per kind of value, in and out. */
const VALUES = [
  ['null', null],
  ['int', 42],
  ['negative', -7],
  ['real', 1.5],
  ['big', 2n ** 60n],
  ['text', 'héllo ☃ \u{1F600}'],
  ['empty text', ''],
  ['blob', Buffer.from([0, 1, 2, 255])],
  ['empty blob', Buffer.alloc(0)],
];

for (const intMode of ['auto', 'bigint']) {
  test(`every method gives what the SQL text gives, across the Values table (intMode ${intMode})`, async (t) => {
    const db = await openMemory(t, { intMode, readers: 2 });
    await db.execute('CREATE TABLE v(label TEXT PRIMARY KEY, x)');
    const insert = db.prepare('INSERT INTO v VALUES (?, ?)');
    assert.deepEqual(await insert.executeBatch(VALUES.slice(0, 4)), { changes: 4 });
    for (const [label, x] of VALUES.slice(4)) await insert.execute([label, x]);
    const sql = 'SELECT label, x, typeof(x) AS t FROM v WHERE label = ?';
    const stmt = db.prepare(sql);
    assert.equal(stmt.sql, sql);
    for (const [label] of VALUES) {
      assert.deepEqual(await stmt.select([label]), await db.select(sql, [label]), label);
      assert.deepEqual(await stmt.selectOne([label]), await db.selectOne(sql, [label]), label);
      assert.deepEqual(await stmt.select([label], { rowMode: 'array' }), await db.select(sql, [label], { rowMode: 'array' }), label);
      assert.deepEqual(await stmt.selectBytes([label]), await db.selectBytes(sql, [label]), label);
    }
    assert.equal(await stmt.selectOne(['missing']), undefined);
    const all = db.prepare('SELECT * FROM v ORDER BY label');
    assert.deepEqual(await all.select(), await db.select('SELECT * FROM v ORDER BY label'));
    // Named parameters and RETURNING through execute.
    const upd = db.prepare('UPDATE v SET x = :x WHERE label = :label RETURNING x');
    for (const [label, x] of VALUES) {
      const viaStmt = await upd.execute({ x, label });
      const viaSql = await db.execute('UPDATE v SET x = :x WHERE label = :label RETURNING x', { x, label });
      assert.deepEqual(viaStmt, viaSql, label);
    }
    const ins = db.prepare('INSERT INTO v VALUES (?, ?)');
    const r = await ins.execute(['new', 1]);
    assert.equal(r.changes, 1);
    assert.equal(typeof r.lastInsertRowid, intMode === 'bigint' ? 'bigint' : 'number');
  });
}

test('columns() describes the schema as it is now, on a reader that ran nothing since the change', async (t) => {
  // One reader: it described the statement, then the writer changed the table; a prepare
  // alone does not make a connection look for a schema change (crates/core statements.rs).
  const db = await openTemp(t, { readers: 1 });
  await db.execute('CREATE TABLE t(a)');
  const read = db.prepare('SELECT * FROM t');
  assert.deepEqual(await read.columns(), [{ name: 'a', type: null }]);
  await db.execute('ALTER TABLE t ADD COLUMN b TEXT');
  assert.deepEqual(await read.columns(), [{ name: 'a', type: null }, { name: 'b', type: 'TEXT' }]);
  await db.execute('DROP TABLE t');
  await db.execute('CREATE TABLE t(c INTEGER, d)');
  assert.deepEqual(await read.columns(), [{ name: 'c', type: 'INTEGER' }, { name: 'd', type: null }]);
});

test('statements survive schema changes: ADD COLUMN shows the new column, DROP + CREATE re-prepares', async (t) => {
  const db = await openTemp(t, { readers: 2 });
  await db.execute('CREATE TABLE t(a)');
  await db.execute('INSERT INTO t VALUES (1)');
  const read = db.prepare('SELECT * FROM t');
  const write = db.prepare('INSERT INTO t(a) VALUES (?) RETURNING *');
  // Warm every reader's cache and the writer's.
  for (let i = 0; i < 4; i++) assert.deepEqual(await read.select(), [{ a: 1 }]);
  assert.deepEqual((await write.execute([2])).rows, [{ a: 2 }]);
  assert.deepEqual(await read.columns(), [{ name: 'a', type: null }]);

  await db.execute("ALTER TABLE t ADD COLUMN b TEXT DEFAULT 'x'");
  for (let i = 0; i < 4; i++) assert.deepEqual(await read.select(), [{ a: 1, b: 'x' }, { a: 2, b: 'x' }]);
  assert.deepEqual((await write.execute([3])).rows, [{ a: 3, b: 'x' }]);
  assert.deepEqual(await read.columns(), [{ name: 'a', type: null }, { name: 'b', type: 'TEXT' }]);

  await db.execute('DROP TABLE t');
  await rejectsAsync(() => read.select(), (e) => (assertSqliteError(e, 'SQLITE_ERROR'), /no such table: t/.test(e.message)));
  await db.execute('CREATE TABLE t(c INTEGER, a, d)');
  await db.execute('INSERT INTO t(c, a) VALUES (9, 8)');
  for (let i = 0; i < 4; i++) assert.deepEqual(await read.select(), [{ c: 9, a: 8, d: null }]);
  assert.deepEqual((await write.execute([4])).rows, [{ c: null, a: 4, d: null }]);
});

test('bad SQL rejects on first use with the SqliteError the SQL text gives; prepare() itself does not', async (t) => {
  const db = await openMemory(t);
  for (const sql of ['SELEC 1', 'SELECT * FROM nowhere', 'INSERT INTO nowhere VALUES (1)']) {
    const stmt = db.prepare(sql);
    for (const method of ['select', 'selectOne', 'selectBytes', 'execute']) {
      const want = await db[method](sql).then(() => assert.fail('must fail'), (e) => e);
      const got = await rejectsAsync(() => stmt[method](), Error);
      assert.equal(got.constructor, want.constructor, `${sql} ${method}`);
      assert.equal(got.message, want.message);
      assert.equal(got.code, want.code);
      assert.equal(got.sql, want.sql);
    }
    const want = await db.executeBatch(sql, [[]]).then(() => assert.fail('must fail'), (e) => e);
    const got = await rejectsAsync(() => stmt.executeBatch([[]]), Error);
    assert.equal(got.message, want.message);
    await assert.rejects(stmt.columns(), (e) => e.message === want.message && e.code === want.code);
    assert.equal(stmt.readonly, undefined, 'not known: it never prepared');
  }
  // Blank text fails like the text does; NUL and non-strings are refused at once.
  await rejectsAsync(() => db.prepare('  -- nothing').select(), RangeError);
  assert.throws(() => db.prepare('SELECT 1\0'), TypeError);
  assert.throws(() => db.prepare(42), TypeError);
  // Parameter errors are the text's too.
  const one = db.prepare('SELECT ? AS v');
  await rejectsAsync(() => one.select([1, 2]), RangeError);
  await rejectsAsync(() => one.select('x'), TypeError);
});

test('preparing a statement to describe it applies the rules of where it runs: a pragma cannot change a connection unasked', async (t) => {
  // SQLite carries out some pragmas while it prepares them (the cipher's key pragmas,
  // cache_size = N, ...). A describe that skipped the rules let `PRAGMA key` turn a reader's
  // key (every later read: SQLITE_NOTADB) or the writer's.
  const db = await openTemp(t, { readers: 1 });
  await db.execute('CREATE TABLE t(x)');
  await db.execute('INSERT INTO t VALUES (1)');
  const keyError = /encryption keys cannot be set by pragma/;
  await assert.rejects(db.prepare("PRAGMA key = 'x'").columns(), { name: 'RangeError', message: keyError });
  await assert.rejects(db.prepare("PRAGMA key = 'x'").select(), { name: 'RangeError', message: keyError });
  await assert.rejects(db.prepare("PRAGMA hexkey = '00'").execute(), { name: 'RangeError', message: keyError });
  assert.deepEqual(await db.select('SELECT count(*) AS n FROM t'), [{ n: 1 }], 'the reader keeps its key');
  assert.equal((await db.execute('INSERT INTO t VALUES (2)')).changes, 1, 'the writer keeps its key');
  await db.transaction(async (tx) => {
    await assert.rejects(db.prepare("PRAGMA key = 'x'").select(), { name: 'RangeError', message: keyError });
    assert.deepEqual(await tx.select('SELECT count(*) AS n FROM t'), [{ n: 2 }]);
  });
  // A pragma that sets a value is a write: described on a reader, it is refused, and the
  // reader's cache keeps its size.
  await assert.rejects(db.prepare('PRAGMA cache_size = 10').columns(), RangeError);
  assert.deepEqual(await db.selectOne('PRAGMA cache_size'), { cache_size: -2000 });
  assert.deepEqual(await db.prepare('PRAGMA cache_size').columns(), [{ name: 'cache_size', type: null }]);
});

test('readonly is unknown before the first call and known when it settles', async (t) => {
  const db = await openMemory(t);
  await db.execute('CREATE TABLE t(a INTEGER, b)');
  const sel = db.prepare('SELECT a, b, a + 1 AS c FROM t');
  assert.equal(sel.readonly, undefined);
  await sel.select();
  assert.equal(sel.readonly, true);
  const ins = db.prepare('INSERT INTO t VALUES (?, ?) RETURNING a');
  assert.equal(ins.readonly, undefined);
  await ins.execute([1, 2]);
  assert.equal(ins.readonly, false);
  const fresh = db.prepare('SELECT a, b, a + 1 AS c FROM t');
  assert.deepEqual(await fresh.columns(), [
    { name: 'a', type: 'INTEGER' },
    { name: 'b', type: null },
    { name: 'c', type: null },
  ]);
  assert.equal(fresh.readonly, true);
  const del = db.prepare('DELETE FROM t');
  assert.deepEqual(await del.columns(), []);
  assert.equal(del.readonly, false);
  assert.equal((await db.select('SELECT count(*) AS n FROM t'))[0].n, 1, 'columns() ran nothing');
});

test('a SELECT statement reads on the readers; INSERT ... RETURNING through select behaves as db.select', async (t) => {
  const db = await openTemp(t, { readers: 2 });
  await db.execute('CREATE TABLE t(v)');
  // The writer is held by a transaction whose body waits: a read that needed the writer would hang.
  let release;
  const held = new Promise((r) => (release = r));
  let started;
  const begun = new Promise((r) => (started = r));
  const tx = db.transaction(async () => {
    await db.execute('INSERT INTO t VALUES (1)');
    started();
    await held;
  });
  await begun;
  const sel = db.prepare('SELECT count(*) AS n FROM t');
  const outside = await Promise.race([
    (async () => {
      // Outside the body (a fresh async context): goes to a reader, sees the committed state.
      return await sel.select();
    })(),
    new Promise((_, rej) => setTimeout(() => rej(new Error('the read waited for the writer')), 5000)),
  ]);
  assert.deepEqual(outside, [{ n: 0 }]);
  release();
  await tx;
  const sql = 'INSERT INTO t VALUES (2) RETURNING v';
  const want = await db.select(sql).then(() => assert.fail('must fail'), (e) => e);
  const got = await rejectsAsync(() => db.prepare(sql).select(), Error);
  assertSqliteError(got, want.code);
  assert.equal(got.message, want.message);
  assert.deepEqual(await db.select('SELECT count(*) AS n FROM t'), [{ n: 1 }], 'nothing was inserted');
});

test('inside a transaction body, statement calls route to the transaction like db.* calls', async (t) => {
  const db = await openTemp(t, { readers: 2 });
  await db.execute('CREATE TABLE t(v)');
  const ins = db.prepare('INSERT INTO t VALUES (?)');
  const count = db.prepare('SELECT count(*) AS n FROM t');
  const batch = db.prepare('INSERT INTO t VALUES (?)');
  await assert.rejects(
    db.transaction(async () => {
      await ins.execute([1]);
      await batch.executeBatch([[2], [3]]);
      // Sees its own uncommitted writes: it runs on the transaction's connection.
      assert.deepEqual(await count.select(), [{ n: 3 }]);
      assert.deepEqual(await count.selectOne(), { n: 3 });
      assert.equal((await count.selectBytes()).toString(), '[{"n":3}]');
      // A table made in the body is visible to a statement's first use and columns().
      await db.execute('CREATE TABLE inner_t(x INTEGER)');
      const innerSel = db.prepare('SELECT x FROM inner_t');
      assert.deepEqual(await innerSel.columns(), [{ name: 'x', type: 'INTEGER' }]);
      assert.deepEqual(await innerSel.select(), []);
      await db.transaction(async () => {
        await ins.execute([4]);
        assert.deepEqual(await count.select(), [{ n: 4 }]);
        throw new Error('nested rollback');
      }).catch(() => {});
      assert.deepEqual(await count.select(), [{ n: 3 }], 'the savepoint undid the nested insert');
      throw new Error('roll back');
    }),
    /roll back/,
  );
  assert.deepEqual(await count.select(), [{ n: 0 }], 'the rollback undid every statement call');
  await db.transaction(async () => {
    await ins.execute([7]);
  });
  assert.deepEqual(await count.select(), [{ n: 1 }]);
});

test('use after stmt.close() or db.close() rejects with a typed error; calls in flight complete', async (t) => {
  const db = await Database.open(':memory:');
  await db.execute('CREATE TABLE t(v)');
  const stmt = db.prepare('SELECT ? AS v');
  const inFlight = stmt.select([1]);
  stmt.close();
  stmt.close(); // idempotent
  assert.equal(stmt.isOpen, false);
  assert.deepEqual(await inFlight, [{ v: 1 }]);
  for (const call of [() => stmt.select([1]), () => stmt.selectOne([1]), () => stmt.selectBytes([1]), () => stmt.execute([1]),
    () => stmt.executeBatch([[1]]), () => stmt.columns()]) {
    await rejectsAsync(call, { code: ErrorCodes.STATEMENT_CLOSED, message: /statement is closed/ });
  }
  assert.throws(() => stmt.stream([1]), { code: ErrorCodes.STATEMENT_CLOSED });
  // Also inside a transaction body.
  await db.transaction(async () => {
    await rejectsAsync(() => stmt.execute([1]), { code: ErrorCodes.STATEMENT_CLOSED });
  });
  // Symbol.dispose (what `using` calls at the end of the scope) closes.
  const scoped = db.prepare('SELECT 1');
  assert.equal(scoped.isOpen, true);
  scoped[Symbol.dispose]();
  assert.equal(scoped.isOpen, false);

  const open = db.prepare('SELECT 1 AS one');
  assert.deepEqual(await open.select(), [{ one: 1 }]);
  await db.close();
  for (const call of [() => open.select(), () => open.execute(), () => open.executeBatch([[]]), () => open.columns()]) {
    await rejectsAsync(call, { code: ErrorCodes.CLOSED });
  }
  assert.throws(() => open.stream(), { code: ErrorCodes.CLOSED });
  assert.throws(() => db.prepare('SELECT 1'), { code: ErrorCodes.CLOSED });
  open.close(); // after the database closed: harmless
});

test('a call made in a transaction body completes even when the statement is closed while it waits its turn', async (t) => {
  // The call waits behind a nested body (the parent's calls run after it); close() came
  // before it was sent, and it used to reject with ERR_QUIETSQLITE_STATEMENT_CLOSED.
  const db = await openMemory(t);
  await db.execute('CREATE TABLE t(v)');
  const insert = db.prepare('INSERT INTO t VALUES (?)');
  await insert.execute([0]);
  await db.transaction(async (tx) => {
    let release;
    const held = new Promise((r) => (release = r));
    const nested = tx.transaction(() => held);
    const call = insert.execute([1]);
    insert.close();
    release();
    await nested;
    assert.equal((await call).changes, 1);
    await assert.rejects(insert.execute([2]), { code: ErrorCodes.STATEMENT_CLOSED });
  });
  assert.deepEqual(await db.select('SELECT v FROM t ORDER BY v'), [{ v: 0 }, { v: 1 }]);
});

test("a statement of another database is refused, not run against this one's registry", async (t) => {
  const a = await openMemory(t);
  const b = await openMemory(t);
  const stmt = a.prepare('SELECT 1 AS one');
  await rejectsAsync(() => b.select(stmt), TypeError);
});

test('signal and timeoutMs work on statement calls as on db.*', async (t) => {
  const db = await openTemp(t, { readers: 2 });
  await db.execute('CREATE TABLE t(v)');
  const runaway = db.prepare(RUNAWAY);
  await rejectsAsync(() => runaway.select([], { timeoutMs: 50 }), { name: 'TimeoutError' });
  const ac = new AbortController();
  const p = runaway.selectOne([], { signal: ac.signal });
  setTimeout(() => ac.abort(new Error('stop')), 30);
  await rejectsAsync(() => p, /stop/);
  const write = db.prepare(`INSERT INTO t(v) ${RUNAWAY}`);
  await rejectsAsync(() => write.execute([], { timeoutMs: 50 }), { name: 'TimeoutError' });
  const aborted = AbortSignal.abort(new Error('before'));
  await rejectsAsync(() => db.prepare('INSERT INTO t VALUES (1)').execute([], { signal: aborted }), /before/);
  await rejectsAsync(() => runaway.select([], { timeout: 5 }), TypeError);
  assert.deepEqual(await db.select('SELECT count(*) AS n FROM t'), [{ n: 0 }]);
  // The readers and the writer are free again.
  assert.deepEqual(await db.prepare('SELECT 2 AS two').select(), [{ two: 2 }]);
});

test('stmt.stream() is a live query of the statement', async (t) => {
  const db = await openTemp(t);
  await db.execute('CREATE TABLE t(v)');
  const stmt = db.prepare('SELECT count(*) AS n FROM t WHERE v > ?');
  const live = stmt.stream([0]);
  const seen = [];
  for await (const rows of live) {
    seen.push(rows[0].n);
    if (seen.length === 1) await db.execute('INSERT INTO t VALUES (5)');
    else break;
  }
  assert.deepEqual(seen, [0, 1]);
});

test('stmt.iterate() streams the statement through db.iterate', async (t) => {
  const db = await openMemory(t);
  await db.execute('CREATE TABLE t(v)');
  await db.executeBatch('INSERT INTO t VALUES (?)', Array.from({ length: 1000 }, (_, i) => [i]));
  const stmt = db.prepare('SELECT v FROM t WHERE v >= ? ORDER BY v');
  let n = 0;
  for await (const row of stmt.iterate([10], { chunkSize: 64 })) {
    assert.equal(row.v, n + 10);
    n++;
  }
  assert.equal(n, 990);
  const arrays = [];
  for await (const row of stmt.iterate([998], { rowMode: 'array' })) arrays.push(row);
  assert.deepEqual(arrays, [[998], [999]]);
  stmt.close();
  assert.throws(() => stmt.iterate([0]), { code: ErrorCodes.STATEMENT_CLOSED });
});

test('a statement object that is garbage-collected frees its native side', async () => {
  const child = `
    const { Database } = await import(${JSON.stringify(new URL('../dist/index.mjs', import.meta.url).href)});
    const COUNT = Symbol.for('quietsqlite.statementCount');
        const db = await Database.open(':memory:');
    const counts = [db[COUNT]()];
    let kept = db.prepare('SELECT 1 AS one');
    (() => { for (let i = 0; i < 100; i++) db.prepare('SELECT ? AS i' + i); })();
    await (async () => { for (let i = 0; i < 20; i++) await db.prepare('SELECT ? AS v').select([i]); })();
    counts.push(db[COUNT]());
    for (let i = 0; i < 10 && db[COUNT]() > 1; i++) {
      globalThis.gc();
      await new Promise((r) => setTimeout(r, 10));
    }
    counts.push(db[COUNT]());
    const one = await kept.select();
    kept.close();
    counts.push(db[COUNT]());
    await db.close();
    process.stdout.write(JSON.stringify({ counts, one }));
  `;
  const { stdout } = await promisify(execFile)(process.execPath, ['--expose-gc', '--input-type=module', '-e', child], {
    timeout: 30_000,
  });
  const { counts, one } = JSON.parse(stdout);
  assert.deepEqual(one, [{ one: 1 }]);
  assert.deepEqual(counts, [0, 121, 1, 0]);
});

test('a review: the exported Statement class cannot be constructed by hand (an unchecked id ran as SQL, and its collection ended the process)', async (t) => {
  const { Statement } = await import('../dist/index.mjs');
  const db = await openMemory(t);
  const made = db.prepare('SELECT 1 AS one');
  assert.ok(made instanceof Statement);
  assert.throws(() => new Statement(db, 'SELECT 1', 'DELETE FROM t'), { name: 'TypeError', message: /use db.prepare/ });
  assert.deepEqual(await made.selectOne(), { one: 1 });
});

// Experiment 071: a text sent a second time is registered as a prepared statement is, and
// sent by its number from then on (src/sql-texts.ts).
test('a SQL text sent again goes by number: the same results and errors, in and out of transactions; bounded', async (t) => {
  const COUNT = Symbol.for('quietsqlite.statementCount');
  const db = await openMemory(t);
  await db.execute('CREATE TABLE t(a)');
  assert.equal(db[COUNT](), 0, 'a text sent once is not registered');
  const insert = 'INSERT INTO t VALUES (?)';
  for (let i = 1; i <= 3; i++) assert.deepEqual(await db.execute(insert, [i]), { changes: 1, lastInsertRowid: i, rows: [] });
  assert.equal(db[COUNT](), 1, 'registered when sent the second time');
  const read = 'SELECT a FROM t WHERE a >= ? ORDER BY a';
  for (let i = 0; i < 3; i++) assert.deepEqual(await db.select(read, [2]), [{ a: 2 }, { a: 3 }]);
  assert.deepEqual(await db.selectBytes(read, [3]).then((b) => JSON.parse(b.toString())), [{ a: 3 }]);
  assert.equal(db[COUNT](), 2);
  await db.transaction(async (tx) => {
    await tx.execute(insert, [4]);
    assert.deepEqual(await tx.select(read, [4]), [{ a: 4 }]);
  });
  assert.deepEqual(await db.select(read, [4]), [{ a: 4 }]);
  const bad = 'SELECT nope FROM t';
  const errors = [];
  for (let i = 0; i < 3; i++) errors.push(await db.select(bad).then(() => undefined, (e) => e));
  assert.equal(db[COUNT](), 3);
  for (const e of errors) {
    assert.ok(e instanceof Error);
    assert.equal(e.message, errors[0].message);
    assert.equal(e.code, errors[0].code);
  }
  assert.match(errors[2].message, /no such column/);
  for (const key of ['message', 'code', 'sql', 'errno']) assert.equal(errors[2][key], errors[0][key], key);
  await assert.rejects(db.select('SELECT 1\0'), TypeError);
  await assert.rejects(db.select('SELECT 1\0'), TypeError);
  // The insert's text, registered above: a batch goes by its number too.
  assert.deepEqual(await db.executeBatch(insert, [[5], [6]]), { changes: 2 });
  assert.deepEqual(await db.executeBatch(insert, [[7]]), { changes: 1 });
  assert.deepEqual(await db.select('SELECT count(*) AS n FROM t'), [{ n: 7 }]);
  // One-off texts and long texts are never registered; at most 256 texts are.
  for (let i = 0; i < 300; i++) assert.deepEqual(await db.selectOne(`SELECT ${i} AS once`), { once: i });
  const long = `SELECT '${'x'.repeat(2000)}' AS long`;
  for (let i = 0; i < 3; i++) assert.equal((await db.selectOne(long)).long.length, 2000);
  assert.equal(db[COUNT](), 3);
  for (let i = 0; i < 300; i++) {
    const sql = `SELECT ${i} AS twice`;
    for (let k = 0; k < 3; k++) assert.deepEqual(await db.selectOne(sql), { twice: i });
  }
  assert.equal(db[COUNT](), 256);
});

test('what a read sends for its SQL: the text twice, then its number; per database', async (t) => {
  const native = createRequire(import.meta.url)('../native/quietsqlite.node');
  const read = native.dbRead;
  const sent = [];
  native.dbRead = function (handle, id, sql, ...rest) {
    sent.push(typeof sql);
    return read.call(this, handle, id, sql, ...rest);
  };
  t.after(() => {
    native.dbRead = read;
  });
  const a = await openMemory(t);
  const b = await openMemory(t);
  for (let i = 0; i < 3; i++) assert.deepEqual(await a.selectOne('SELECT 1 AS one'), { one: 1 });
  assert.deepEqual(sent.splice(0), ['string', 'number', 'number']);
  // The other database has numbers of its own.
  for (let i = 0; i < 3; i++) assert.deepEqual(await b.selectOne('SELECT 1 AS one'), { one: 1 });
  assert.deepEqual(sent.splice(0), ['string', 'number', 'number']);
  // A text made at run time, and a slice of a larger one, find the number all the same.
  const parts = 'SELECT 2 AS two;SELECT 1 AS one'.split(';');
  assert.deepEqual(await a.selectOne(parts[1]), { one: 1 });
  assert.deepEqual(await a.selectOne(['SELECT 1', 'AS one'].join(' ')), { one: 1 });
  assert.deepEqual(sent.splice(0), ['number', 'number']);
});

test('a statement closed by a getter of its own call never runs another statement\'s SQL', async (t) => {
  const db = await openMemory(t);
  await db.execute('CREATE TABLE t(a, b)');
  await db.execute('CREATE TABLE victim(a, b)');
  await db.execute("INSERT INTO victim VALUES ('keep', 'me')");
  const victim = () => db.select('SELECT a FROM victim ORDER BY rowid');
  // The freed number goes to the next statement registered: a DELETE, here.
  const takeOver = (stmt) => {
    stmt.close();
    db.prepare('DELETE FROM victim WHERE ? IS NOT NULL AND ? IS NOT NULL');
  };
  const outcome = (p) => p.then((v) => ({ v }), (e) => ({ e }));

  // 1. a getter of a parameter (two values: the packed path), 2. of the options, 3. of a
  // parameter read by the addon itself (one value), 4. a batch's set.
  const ins = db.prepare('INSERT INTO t VALUES (?, ?)');
  const params = [1, 0];
  Object.defineProperty(params, 1, { enumerable: true, get: () => (takeOver(ins), 2) });
  const r1 = await outcome(ins.execute(params));

  const ins2 = db.prepare('INSERT INTO t VALUES (?, ?)');
  const r2 = await outcome(ins2.execute([3, 4], { get timeoutMs() { takeOver(ins2); return 0; } }));

  const sel = db.prepare('SELECT count(*) AS n FROM t WHERE a = ?');
  const one = [];
  Object.defineProperty(one, 0, { enumerable: true, get: () => (takeOver(sel), 1) });
  one.length = 1;
  const r3 = await outcome(sel.selectOne(one));

  const ins4 = db.prepare('INSERT INTO t VALUES (?, ?)');
  const set = [5, 0];
  Object.defineProperty(set, 1, { enumerable: true, get: () => (takeOver(ins4), 6) });
  const r4 = await outcome(ins4.executeBatch([set]));

  assert.deepEqual(await victim(), [{ a: 'keep' }], 'no call ran the DELETE that took its number');
  for (const r of [r1, r2, r4]) {
    // Either it ran its own INSERT or it was refused as closed: never anything else.
    if (r.e !== undefined) assert.equal(r.e.code, ErrorCodes.STATEMENT_CLOSED, r.e.message);
  }
  assert.ok(r3.e === undefined ? r3.v.n >= 0 : r3.e.code === ErrorCodes.STATEMENT_CLOSED);
  const inserted = (await db.select('SELECT a FROM t ORDER BY a')).map((r) => r.a);
  const expected = [[r1, 1], [r2, 3], [r4, 5]].filter(([r]) => r.e === undefined).map(([, a]) => a);
  assert.deepEqual(inserted, expected, 'what ran is the statement called');
});

test('with inlineReads, a text read once is not registered, however its read ends', async (t) => {
  const COUNT = Symbol.for('quietsqlite.statementCount');
  const db = await openMemory(t, { inlineReads: true });
  // A registered function makes every read ineligible for the inline path: each read is
  // tried inline, declined, and sent to a reader.
  db.function('twice', (x) => x * 2);
  for (let i = 0; i < 20; i++) assert.deepEqual(await db.selectOne(`SELECT ${i} AS i`), { i });
  for (let i = 0; i < 5; i++) await assert.rejects(db.selectOne(`SELECT nope${i}`));
  assert.equal(db[COUNT](), 0, 'one-off texts took no numbers');
  for (let i = 0; i < 3; i++) assert.deepEqual(await db.selectOne('SELECT twice(?) AS v', [i]), { v: 2 * i });
  assert.equal(db[COUNT](), 1, 'a text given again is registered, once');
});
