// Opening databases: files, :memory:, readonly, options and the pragmas option.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { chmodSync, cpSync, existsSync, linkSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { spawnSync } from 'node:child_process';
import {
  Database,
  SqliteError,
  openMemory,
  openTemp,
  rejectsAsync,
  assertSqliteError,
  tempDir,
  threadCount,
  settleThreads,
  collectGarbage,
} from './fixtures/helpers.mjs';

test('opens a file database, reports path and isOpen, and persists data across opens', async (t) => {
  const dir = await tempDir(t);
  const path = join(dir, 'data.db');
  const db = await Database.open(path);
  assert.equal(db.path, path);
  assert.equal(db.isOpen, true);
  assert.ok(existsSync(path), 'the database file is created');
  await db.execute('CREATE TABLE t(a)');
  await db.execute('INSERT INTO t VALUES (?)', ['kept']);
  await db.close();
  assert.equal(db.isOpen, false);

  const again = await Database.open(path);
  t.after(() => again.close());
  assert.deepStrictEqual(await again.select('SELECT a FROM t'), [{ a: 'kept' }]);
});

test('paths with spaces, #, ? and % are taken literally', async (t) => {
  const dir = await tempDir(t);
  for (const name of ['a b.db', 'hash#q?.db', 'pct%20x.db']) {
    const path = join(dir, name);
    const db = await Database.open(path);
    await db.execute('CREATE TABLE t(a)');
    await db.close();
    assert.ok(existsSync(path), `${name} exists under its literal name`);
  }
});

test("names that look like URI parts: '//' at the start, 'mode=memory', ':MEMORY:'", async (t) => {
  // '//tmp/...' was read as a URI authority, and a name containing mode=memory was refused
  // as an in-memory URI.
  const dir = await tempDir(t);
  for (const path of [`/${join(dir, 'slashes.db')}`, join(dir, 'backup-mode=memory.db'), join(dir, ':MEMORY:')]) {
    const db = await Database.open(path);
    await db.execute('CREATE TABLE t(a)');
    await db.close();
    assert.ok(existsSync(path), `${path} exists under its literal name`);
  }
});

test('a relative path stays the file it named when the process changes directory', async (t) => {
  // Connections opened later (the inline one at its first read, the readers after rekey())
  // used to resolve the path against the directory of that moment.
  const [home, elsewhere] = [await tempDir(t), await tempDir(t)];
  const cwd = process.cwd();
  t.after(() => process.chdir(cwd));
  for (const [dir, who] of [[home, 'mine'], [elsewhere, 'another']]) {
    const db = await Database.open(join(dir, 'rel.db'));
    await db.execute('CREATE TABLE t(who)');
    await db.execute('INSERT INTO t VALUES (?)', [who]);
    await db.close();
  }
  // A plain relative path, and relative file: URIs (with a query, and with a name that
  // needs its percent-escapes kept).
  for (const [name, path] of [['rel.db', 'rel.db'], ['relu.db', 'file:relu.db?mode=rwc'], ['a b%#.db', 'file:a%20b%25%23.db']]) {
    for (const [dir, who] of [[home, 'mine'], [elsewhere, 'another']]) {
      const db = await Database.open(join(dir, name));
      await db.execute('CREATE TABLE IF NOT EXISTS t(who)');
      await db.execute('DELETE FROM t');
      await db.execute('INSERT INTO t VALUES (?)', [who]);
      await db.close();
    }
    process.chdir(home);
    const db = await Database.open(path, { inlineReads: true });
    process.chdir(elsewhere);
    assert.deepStrictEqual(await db.select('SELECT who FROM t'), [{ who: 'mine' }], path);
    await db.rekey('k');
    assert.deepStrictEqual(await db.select('SELECT who FROM t'), [{ who: 'mine' }], path);
    await db.close();
    process.chdir(cwd);
  }
});

test('defaults: WAL, synchronous NORMAL, foreign keys on, busy timeout 5000, temp_store MEMORY', async (t) => {
  const db = await openTemp(t, { readers: 2 });
  const sql =
    'SELECT * FROM pragma_journal_mode, pragma_synchronous, pragma_foreign_keys, pragma_busy_timeout, pragma_temp_store';
  const expected = { journal_mode: 'wal', synchronous: 1, foreign_keys: 1, timeout: 5000, temp_store: 2 };
  // On the readers ...
  for (const row of await Promise.all([1, 2, 3, 4].map(() => db.selectOne(sql)))) {
    assert.deepStrictEqual(row, expected);
  }
  // ... and on the writer.
  assert.deepStrictEqual((await db.execute(sql)).rows, [expected]);
});

test('busyTimeout option sets the busy timeout of every connection', async (t) => {
  const db = await openTemp(t, { readers: 2, busyTimeout: 1234 });
  const rows = await Promise.all([1, 2, 3, 4].map(() => db.selectOne('SELECT * FROM pragma_busy_timeout')));
  for (const row of rows) assert.deepStrictEqual(row, { timeout: 1234 });
  assert.deepStrictEqual((await db.execute('SELECT * FROM pragma_busy_timeout')).rows, [{ timeout: 1234 }]);
});

test(':memory: is one database shared by the writer and every reader', async (t) => {
  const db = await openMemory(t, { readers: 4 });
  assert.equal(db.path, ':memory:');
  await db.execute('CREATE TABLE t(a)');
  await db.executeBatch('INSERT INTO t VALUES (?)', [[1], [2], [3]]);
  // Many concurrent reads spread over all readers; every one must see the writer's table.
  for (let round = 0; round < 5; round++) {
    const results = await Promise.all(
      Array.from({ length: 16 }, () => db.selectOne('SELECT count(*) AS n, sum(a) AS s FROM t')),
    );
    for (const r of results) assert.deepStrictEqual(r, { n: 3, s: 6 });
  }
  // A later write is visible too (no reader holds a stale snapshot).
  await db.execute('INSERT INTO t VALUES (4)');
  const after = await Promise.all(Array.from({ length: 16 }, () => db.selectOne('SELECT count(*) AS n FROM t')));
  for (const r of after) assert.deepStrictEqual(r, { n: 4 });
});

test('two :memory: databases are independent', async (t) => {
  const a = await openMemory(t);
  const b = await openMemory(t);
  await a.execute('CREATE TABLE only_in_a(x)');
  assert.deepStrictEqual(await b.select("SELECT name FROM sqlite_master WHERE name = 'only_in_a'"), []);
  assert.deepStrictEqual(await a.select("SELECT name FROM sqlite_master WHERE name = 'only_in_a'"), [
    { name: 'only_in_a' },
  ]);
});

test('readonly: reads work, writes reject with SqliteError SQLITE_READONLY', async (t) => {
  const dir = await tempDir(t);
  const path = join(dir, 'ro.db');
  const rw = await Database.open(path);
  await rw.execute('CREATE TABLE t(a)');
  await rw.execute('INSERT INTO t VALUES (1)');
  await rw.close();

  const db = await Database.open(path, { readonly: true });
  t.after(() => db.close());
  assert.deepStrictEqual(await db.select('SELECT a FROM t'), [{ a: 1 }]);
  const err = await rejectsAsync(() => db.execute('INSERT INTO t VALUES (2)'), SqliteError);
  assertSqliteError(err, 'SQLITE_READONLY', 8);
  const batchErr = await rejectsAsync(() => db.executeBatch('INSERT INTO t VALUES (?)', [[3]]), SqliteError);
  assertSqliteError(batchErr, 'SQLITE_READONLY', 8);
  // Still usable, and nothing was written.
  assert.deepStrictEqual(await db.select('SELECT a FROM t'), [{ a: 1 }]);
});

test(
  'readonly: the SqliteError for a rejected write names its SQL',
  {},
  async (t) => {
    const dir = await tempDir(t);
    const path = join(dir, 'ro.db');
    const rw = await Database.open(path);
    await rw.execute('CREATE TABLE t(a)');
    await rw.close();
    const db = await Database.open(path, { readonly: true });
    t.after(() => db.close());
    const err = await rejectsAsync(() => db.execute('INSERT INTO t VALUES (2)'), SqliteError);
    assert.equal(err.sql, 'INSERT INTO t VALUES (2)', 'the error names the statement that failed');
    const batchErr = await rejectsAsync(() => db.executeBatch('INSERT INTO t VALUES (?)', [[3]]), SqliteError);
    assert.equal(batchErr.sql, 'INSERT INTO t VALUES (?)');
  },
);

test('pragmas option applies to every connection (readers and writer)', async (t) => {
  const db = await openTemp(t, { readers: 3, pragmas: { cache_size: -4000, recursive_triggers: true } });
  const sql = 'SELECT * FROM pragma_cache_size, pragma_recursive_triggers';
  const expected = { cache_size: -4000, recursive_triggers: 1 };
  const rows = await Promise.all(Array.from({ length: 24 }, () => db.selectOne(sql)));
  for (const row of rows) assert.deepStrictEqual(row, expected);
  assert.deepStrictEqual((await db.execute(sql)).rows, [expected]);
  // Inside a transaction reads run on the writer connection.
  assert.deepStrictEqual(await db.transaction((tx) => tx.selectOne(sql)), expected);
});

test('user_version set through execute is visible from every reader', async (t) => {
  const db = await openTemp(t, { readers: 3 });
  await db.execute('PRAGMA user_version = 42');
  const rows = await Promise.all(Array.from({ length: 12 }, () => db.selectOne('PRAGMA user_version')));
  for (const row of rows) assert.deepStrictEqual(row, { user_version: 42 });
});

test('opening a path in a missing directory rejects with SQLITE_CANTOPEN', async (t) => {
  const dir = await tempDir(t);
  const err = await rejectsAsync(() => Database.open(join(dir, 'no', 'such', 'dir', 'x.db')), SqliteError);
  assertSqliteError(err, 'SQLITE_CANTOPEN', 14);
});

test('a failed open leaves no native threads behind', async (t) => {
  const dir = await tempDir(t); // also warms up libuv's pool, so it does not count below
  const before = await threadCount();
  if (before === undefined) return t.skip('needs /proc/self/task');
  for (let i = 0; i < 10; i++) {
    await rejectsAsync(() => Database.open(join(dir, 'missing', `x${i}.db`)), SqliteError);
  }
  // Known: the live-query thread of a failed open currently lingers until GC finalizes the
  // native object. This test forces a GC, so it catches threads that are never released.
  await collectGarbage();
  const after = await settleThreads(before + 2);
  assert.ok(after <= before + 2, `threads: ${before} before 10 failed opens, ${after} after`);
});

test('invalid open arguments reject with TypeError/RangeError', async () => {
  await rejectsAsync(() => Database.open(''), TypeError);
  await rejectsAsync(() => Database.open(42), TypeError);
  await rejectsAsync(() => Database.open(':memory:', 'fast'), TypeError);
  await rejectsAsync(() => Database.open(':memory:', { reader: 2 }), {
    name: 'TypeError',
    message: /reader/,
  });
  await rejectsAsync(() => Database.open(':memory:', { readers: 0 }), RangeError);
  await rejectsAsync(() => Database.open(':memory:', { readers: 1.5 }), RangeError);
  await rejectsAsync(() => Database.open(':memory:', { intMode: 'string' }), TypeError);
  await rejectsAsync(() => Database.open(':memory:', { readonly: 'yes' }), TypeError);
  await rejectsAsync(() => Database.open(':memory:', { busyTimeout: -1 }), RangeError);
  await rejectsAsync(() => Database.open(':memory:', { pragmas: { 'cache_size; DROP TABLE t': 1 } }), TypeError);
  await rejectsAsync(() => Database.open(':memory:', { pragmas: { cache_size: {} } }), TypeError);
});

test('null is never "the default": every open option but timeoutMs refuses it with a TypeError naming it', async (t) => {
  const dir = await tempDir(t);
  const path = join(dir, 'nulls.db');
  for (const name of ['readers', 'readonly', 'intMode', 'pragmas', 'busyTimeout', 'encryptionKey', 'cipher', 'checkpoints', 'extensions', 'inlineReads']) {
    await rejectsAsync(() => Database.open(path, { [name]: null }), { name: 'TypeError', message: new RegExp(`^${name} may not be null`) });
  }
  // Above all, a key that is null (a missing setting) does not create a plaintext database.
  assert.equal(existsSync(path), false);
  const db = await Database.open(path, { timeoutMs: null });
  await db.close();
});

test('other options objects: null values and non-objects are TypeErrors, never silently the default', async (t) => {
  const db = await openMemory(t);
  await db.execute('CREATE TABLE t (x)');
  await rejectsAsync(() => db.select('SELECT 1', [], { rowMode: null }), { name: 'TypeError', message: /rowMode/ });
  await rejectsAsync(() => db.execute('SELECT 1', [], null), { name: 'TypeError', message: /query options must be a plain object/ });
  assert.throws(() => db.iterate('SELECT 1', [], { rowMode: null }), { name: 'TypeError', message: /rowMode/ });
  assert.throws(() => db.iterate('SELECT 1', [], { chunkSize: null }), { name: 'TypeError', message: /chunkSize/ });
  assert.throws(() => db.stream('SELECT 1', [], null), { name: 'TypeError', message: /stream options must be an object/ });
  await rejectsAsync(() => db.transaction(async () => {}, null), TypeError);
  await rejectsAsync(() => db.close(null), { name: 'TypeError', message: /close options must be an object/ });
  await rejectsAsync(() => db.close('force'), { name: 'TypeError', message: /close options must be an object/ });
  await rejectsAsync(() => db.close({ force: 'yes' }), { name: 'TypeError', message: /force must be a boolean/ });
  // Still open after all of that.
  assert.deepEqual(await db.select('SELECT count(*) AS n FROM t'), [{ n: 0 }]);
  // Options need not be plain objects: an aggregate's methods may sit on a prototype.
  class Sum {
    start = 0;
    step(acc, x) {
      return acc + x;
    }
  }
  db.aggregate('sum_of', new Sum());
  await db.execute('INSERT INTO t VALUES (2), (3)');
  assert.deepEqual(await db.selectOne('SELECT sum_of(x) AS s FROM t'), { s: 5 });
});

test('encryptionKey present but undefined (a key that failed to load) is a TypeError, not a plaintext database', async (t) => {
  const dir = await tempDir(t);
  const path = join(dir, 'undefined-key.db');
  await rejectsAsync(() => Database.open(path, { encryptionKey: undefined }), { name: 'TypeError', message: /^encryptionKey is undefined/ });
  assert.equal(existsSync(path), false);
});

test('intMode is reported by the database', async (t) => {
  assert.equal((await openMemory(t)).intMode, 'auto');
  assert.equal((await openMemory(t, { intMode: 'bigint' })).intMode, 'bigint');
  assert.equal((await openMemory(t, { intMode: 'number' })).intMode, 'number');
});

test('a pragma that writes the database (user_version) is applied by the writer; readers accept it', async (t) => {
  const dir = await tempDir(t);
  const path = join(dir, 'uv.db');
  const db = await Database.open(path, { pragmas: { user_version: 7, cache_size: -4000 }, readers: 2 });
  try {
    for (let i = 0; i < 4; i++) {
      assert.deepEqual(await db.selectOne('PRAGMA user_version'), { user_version: 7 });
      assert.deepEqual(await db.selectOne('PRAGMA cache_size'), { cache_size: -4000 });
    }
  } finally {
    await db.close();
  }
});

test('file: URIs with mode=rwc open (readers use mode=ro); in-memory URIs are refused with a pointer to :memory:', async (t) => {
  const dir = await tempDir(t);
  const db = await Database.open(`file:${join(dir, 'uri.db')}?mode=rwc`);
  try {
    await db.execute('CREATE TABLE t(a)');
    await db.execute('INSERT INTO t VALUES (1)');
    assert.deepEqual(await db.select('SELECT a FROM t'), [{ a: 1 }]);
  } finally {
    await db.close();
  }
  for (const uri of ['file::memory:', 'file:x?mode=memory', 'file:x?mode=memory#y', 'file:x?mod%65=memory', 'file:x?mode=memory%00']) {
    await rejectsAsync(() => Database.open(uri), (err) => err instanceof TypeError && /:memory:/.test(err.message), uri);
  }
});

test('a URI asking for shared-cache mode is refused: its readers would fail while a transaction writes', async (t) => {
  // With cache=shared, a select outside a running transaction failed with
  // SQLITE_LOCKED_SHAREDCACHE instead of reading the last commit.
  const dir = await tempDir(t);
  const file = join(dir, 'shared.db');
  for (const uri of [
    `file:${file}?cache=shared`,
    `file:${file}?mode=rwc&CACHE=SHARED`,
    // As SQLite reads them: the query ends at '#', and names and values are %-decoded.
    `file:${file}?cache=shared#x`,
    `file:${file}?cach%65=shared`,
    `file:${file}?cache=%73hared`,
    `file:${file}?cache=shared%00x`,
    `file:${file}?cache%00zz=shared`,
  ]) {
    await rejectsAsync(() => Database.open(uri), (err) => err instanceof TypeError && /cache=shared/.test(err.message), uri);
  }
  // A file name that merely contains the words is a file name.
  const db = await Database.open(join(dir, 'cache=shared.db'));
  await db.close();
});

test('execute() of SQL with no statement is a RangeError, and the database stays usable', async (t) => {
  const db = await openMemory(t);
  for (const blank of ['', '   ', ';', '/* c */', '-- nothing']) {
    await rejectsAsync(() => db.execute(blank), (err) => err instanceof RangeError && /no statement/.test(err.message), JSON.stringify(blank));
  }
  assert.deepEqual(await db.selectOne('SELECT 1 AS one'), { one: 1 });
});

// Hostile probes of open options and paths (third round).

test('options are own properties, each read once: Object.prototype adds none', async (t) => {
  const dir = await tempDir(t);
  const added = {
    encryptionKey: 'attacker-key',
    extensions: [join(dir, 'evil.so')],
    readonly: true,
    pragmas: { user_version: 9 },
    rowMode: 'array',
    timeoutMs: 1,
    mode: 'exclusive',
  };
  for (const [k, v] of Object.entries(added)) Object.prototype[k] = v;
  let db;
  try {
    // No options: the defaults (a plaintext file, writable, no extension loaded).
    db = await Database.open(join(dir, 'p.db'));
    await db.execute('CREATE TABLE t(x)');
    assert.deepEqual(await db.select('SELECT 1 AS one'), [{ one: 1 }]);
    assert.deepEqual(await db.transaction(async (tx) => tx.selectOne('PRAGMA user_version')), { user_version: 0 });
    // Plain options objects: what they inherit is not an option.
    const q = await Database.open(join(dir, 'q.db'), {});
    await q.execute('CREATE TABLE t(x)');
    await q.close();
    assert.deepEqual(await db.select('SELECT 1 AS one', [], {}), [{ one: 1 }]);
    assert.deepEqual(await db.transaction(async (tx) => tx.selectOne('SELECT 2 AS two'), {}), { two: 2 });
    for await (const row of db.iterate('SELECT 3 AS three', [], {})) assert.deepEqual(row, { three: 3 });
  } finally {
    for (const k of Object.keys(added)) delete Object.prototype[k];
  }
  await db.close();
  // Both plaintext, no user_version set.
  for (const name of ['p.db', 'q.db']) {
    const again = await Database.open(join(dir, name));
    assert.deepEqual(await again.selectOne('PRAGMA user_version'), { user_version: 0 });
    await again.close();
  }

  // A getter is read once: a key, then undefined, opened a plaintext database.
  let reads = 0;
  const options = {
    get encryptionKey() {
      reads++;
      return reads <= 2 ? 'the key' : undefined;
    },
  };
  const enc = await Database.open(join(dir, 'g.db'), options);
  await enc.execute('CREATE TABLE t(x)');
  await enc.close();
  assert.equal(reads, 1);
  await rejectsAsync(() => Database.open(join(dir, 'g.db')), SqliteError, /key is wrong, or missing/);
  // An own property that is not enumerable is an option all the same (a review: it was
  // dropped, and the file was created in plaintext).
  const hidden = Object.defineProperty({}, 'encryptionKey', { value: 'the key' });
  const enc2 = await Database.open(join(dir, 'g.db'), hidden);
  await enc2.close();
  // An unknown property that is not enumerable is not taken for a misspelling (an array's
  // `length`, an Error's `stack`, Vue 2's `__ob__`); a Map's entries are no options, and
  // a Map is refused rather than read as no options.
  const plain = await Database.open(join(dir, 'q.db'));
  t.after(() => plain.close());
  const observed = Object.defineProperty({ rowMode: 'array' }, '__ob__', { value: {} });
  assert.deepEqual(await plain.select('SELECT 1 AS one', [], observed), [[1]]);
  await plain.transaction(async () => {}, []);
  await rejectsAsync(() => plain.transaction(async () => {}, new Map([['mode', 'bogus']])), TypeError, /not a Map/);
  // A class instance's option on its prototype is refused rather than ignored.
  class Options {
    get mode() {
      return 'deferred';
    }
  }
  const db2 = await Database.open(join(dir, 'p.db'));
  t.after(() => db2.close());
  await rejectsAsync(() => db2.transaction(async () => {}, new Options()), TypeError, /inherited/);
});

test('a refused pragma is refused before the file is created or changed', async (t) => {
  const dir = await tempDir(t);
  const missing = join(dir, 'missing.db');
  for (const pragmas of [{ user_version: 7, journal_mode: 'DELETE' }, { user_version: 7, key: 'k' }, { user_version: "7; DROP TABLE t" }]) {
    await rejectsAsync(() => Database.open(missing, { pragmas }), TypeError);
    assert.equal(existsSync(missing), false, JSON.stringify(pragmas));
  }
  const path = join(dir, 'kept.db');
  const db = await Database.open(path);
  await db.execute('CREATE TABLE t(x)');
  await db.close();
  await rejectsAsync(() => Database.open(path, { pragmas: { user_version: 7, locking_mode: 'EXCLUSIVE' } }), TypeError);
  const again = await Database.open(path);
  t.after(() => again.close());
  assert.deepEqual(await again.selectOne('PRAGMA user_version'), { user_version: 0 });
});

test('a file: URI whose path holds %00 is a TypeError (SQLite would open the name cut there)', async (t) => {
  const dir = await tempDir(t);
  await rejectsAsync(() => Database.open(`file:${dir}/a%00b.db`), TypeError, /%00/);
  await rejectsAsync(() => Database.open(`file://${dir}/a%00b.db?mode=rwc`), TypeError, /%00/);
  assert.equal(existsSync(join(dir, 'a')), false);
});

test('a FIFO, socket or device as the database is refused at once, read-only too (a read-only open of a FIFO never settled)', { timeout: 20_000 }, async (t) => {
  const dir = await tempDir(t);
  const fifo = join(dir, 'pipe.db');
  const { execFileSync } = await import('node:child_process');
  execFileSync('mkfifo', [fifo]);
  for (const [path, options] of [
    [fifo, { readonly: true }],
    [fifo, {}],
    [`file:${fifo}?mode=ro`, {}],
    [`file://localhost${fifo}`, {}],
    ['/dev/null', {}],
  ]) {
    const err = await rejectsAsync(() => Database.open(path, options), SqliteError, /FIFO, socket or device/);
    assertSqliteError(err, 'SQLITE_CANTOPEN');
  }
});

test('busyTimeout holds for the open itself (it waited 5 s whatever was set)', async (t) => {
  // Another process holds the file's lock; better-sqlite3 in a child (one process with two
  // copies of SQLite would not see each other's locks).
  const dir = await tempDir(t);
  const path = join(dir, 'held.db');
  const { spawn } = await import('node:child_process');
  const holder = spawn(
    process.execPath,
    [
      '-e',
      // better-sqlite3 is built for the Node of `npm install` (20); Node 24 has node:sqlite.
      `const db = process.getBuiltinModule?.('node:sqlite')
         ? new (process.getBuiltinModule('node:sqlite').DatabaseSync)(${JSON.stringify(path)})
         : new (require('better-sqlite3'))(${JSON.stringify(path)});
       db.exec("PRAGMA journal_mode = DELETE; CREATE TABLE t(x); BEGIN EXCLUSIVE; INSERT INTO t VALUES (1)");
       process.stdout.write('held\\n'); setTimeout(() => {}, 60000);`,
    ],
    { stdio: ['ignore', 'pipe', 'inherit'], cwd: process.cwd() },
  );
  t.after(() => holder.kill());
  await new Promise((resolve, reject) => {
    holder.stdout.once('data', resolve);
    holder.once('exit', (code) => reject(new Error(`the holder exited (${code})`)));
  });
  const started = Date.now();
  const err = await rejectsAsync(() => Database.open(path, { busyTimeout: 100 }), SqliteError);
  assertSqliteError(err, 'SQLITE_BUSY');
  assert.ok(Date.now() - started < 2500, `the open waited ${Date.now() - started} ms with busyTimeout 100`);
});

test('a second copy of quietsqlite in the process is refused a file the first has open', { timeout: 60_000 }, async (t) => {
  // Two installs (nested node_modules, npm link) carry two copies of SQLite, which do not see
  // each other's locks on a file: in the probe, 300 + 300 inserts that resolved left 294 + 296
  // rows. The second copy is refused before it touches the file; files apart, and :memory:,
  // are each copy's own.
  const dir = await tempDir(t);
  const root = new URL('..', import.meta.url).pathname;
  const copy = join(dir, 'copy');
  for (const part of ['dist', 'native', 'package.json']) cpSync(join(root, part), join(copy, part), { recursive: true });
  const file = join(dir, 'shared.db');
  const code = `
    const A = require(${JSON.stringify(join(root, 'dist', 'index.js'))});
    const B = require(${JSON.stringify(join(copy, 'dist', 'index.js'))});
    (async () => {
      const out = [];
      const a = await A.Database.open(${JSON.stringify(file)});
      await a.execute('CREATE TABLE t(x)');
      const refused = await B.Database.open(${JSON.stringify(file)}).then(() => 'opened', (e) => e.code + ' ' + /another copy of quietsqlite/.test(e.message));
      out.push(refused);
      const a2 = await A.Database.open(${JSON.stringify(file)});
      out.push((await a2.select('SELECT count(*) AS n FROM t'))[0].n);
      const memory = await B.Database.open(':memory:');
      out.push((await memory.select('SELECT 1 AS one'))[0].one);
      await memory.close();
      await a2.close();
      await a.close();
      const b = await B.Database.open(${JSON.stringify(file)});
      out.push((await b.select('SELECT count(*) AS n FROM t'))[0].n);
      const refusedA = await A.Database.open(${JSON.stringify(file)}).then(() => 'opened', (e) => e.code);
      out.push(refusedA);
      await b.close();
      console.log(JSON.stringify(out));
    })();
  `;
  const r = spawnSync(process.execPath, ['-e', code], { encoding: 'utf8', timeout: 30_000 });
  assert.equal(r.status, 0, r.stderr);
  assert.deepEqual(JSON.parse(r.stdout), ['SQLITE_MISUSE true', 0, 1, 0, 'SQLITE_MISUSE']);

  // Both creating one new file at once: the loser was refused only after its SQLite had
  // opened the file, and its close deleted the winner's WAL (its commits then went to a
  // deleted file). Now one is refused before it opens anything, and the other's commits are
  // there for another process.
  const fresh = join(dir, 'new.db');
  const race = spawnSync(process.execPath, ['-e', `
    const A = require(${JSON.stringify(join(root, 'dist', 'index.js'))});
    const B = require(${JSON.stringify(join(copy, 'dist', 'index.js'))});
    (async () => {
      const opens = await Promise.allSettled([A.Database.open(${JSON.stringify(fresh)}), B.Database.open(${JSON.stringify(fresh)})]);
      const db = opens.find((o) => o.status === 'fulfilled').value;
      await db.execute('CREATE TABLE t(x)');
      for (let i = 0; i < 20; i++) await db.execute('INSERT INTO t VALUES (?)', [i]);
      const other = require('node:child_process').spawnSync(process.execPath, ['-e',
        "require(" + JSON.stringify(${JSON.stringify(join(root, 'dist', 'index.js'))}) + ").Database.open(" + JSON.stringify(${JSON.stringify(fresh)}) + ", { readonly: true }).then(async (d) => { console.log((await d.select('SELECT count(*) AS n FROM t'))[0].n); await d.close(); })"], { encoding: 'utf8' });
      console.log(JSON.stringify([opens.map((o) => o.status === 'fulfilled' ? 'ok' : o.reason.code).sort(), other.stdout.trim()]));
      await db.close();
    })();
  `], { encoding: 'utf8', timeout: 30_000 });
  assert.equal(race.status, 0, race.stderr);
  assert.deepEqual(JSON.parse(race.stdout), [['SQLITE_MISUSE', 'ok'], '20']);

  // One library reached through another path (a hard link to its addon, as pnpm's store
  // makes) is one copy of SQLite: not refused. A Database collected without close() keeps the
  // file: its connections close some time later, on their threads.
  const linked = join(dir, 'linked');
  for (const part of ['dist', 'package.json']) cpSync(join(root, part), join(linked, part), { recursive: true });
  mkdirSync(join(linked, 'native'));
  linkSync(join(root, 'native', 'quietsqlite.node'), join(linked, 'native', 'quietsqlite.node'));
  const more = spawnSync(process.execPath, ['--expose-gc', '-e', `
    const A = require(${JSON.stringify(join(root, 'dist', 'index.js'))});
    const L = require(${JSON.stringify(join(linked, 'dist', 'index.js'))});
    const B = require(${JSON.stringify(join(copy, 'dist', 'index.js'))});
    (async () => {
      const a = await A.Database.open(${JSON.stringify(file)});
      const l = await L.Database.open(${JSON.stringify(file)}).then((d) => d.close().then(() => 'ok'), (e) => e.code);
      await a.close();
      await (async () => { await B.Database.open(${JSON.stringify(file)}); })();
      for (let i = 0; i < 10; i++) { globalThis.gc(); await new Promise((r) => setTimeout(r, 20)); }
      const afterGc = await A.Database.open(${JSON.stringify(file)}).then((d) => d.close().then(() => 'ok'), (e) => e.code);
      console.log(JSON.stringify([l, afterGc]));
    })();
  `], { encoding: 'utf8', timeout: 30_000 });
  assert.equal(more.status, 0, more.stderr);
  assert.deepEqual(JSON.parse(more.stdout), ['ok', 'SQLITE_MISUSE']);
});

test('a file this process may not write is refused at open without readonly, and reads with it', { timeout: 30_000 }, async (t) => {
  // SQLite opens such a file read-only without a word: the open resolved, reads worked, and
  // every write failed later with SQLITE_READONLY. Run as another user, the file's owner
  // being this one (root may write any file).
  if (typeof process.getuid !== 'function' || process.getuid() !== 0) {
    t.skip('needs root, to run a child process as another user');
    return;
  }
  const dir = await tempDir(t);
  const file = join(dir, 'theirs.db');
  const db = await Database.open(file);
  await db.execute('CREATE TABLE t(x); INSERT INTO t VALUES (1)');
  await db.close();
  chmodSync(dir, 0o777);
  chmodSync(file, 0o444);
  const entry = new URL('../dist/index.js', import.meta.url).pathname;
  const code = `
    const { Database } = require(${JSON.stringify(entry)});
    (async () => {
      const refused = await Database.open(${JSON.stringify(file)}).then(() => 'opened', (e) => e.code);
      const ro = await Database.open(${JSON.stringify(file)}, { readonly: true });
      const n = (await ro.select('SELECT count(*) AS n FROM t'))[0].n;
      await ro.close();
      console.log(refused, n);
    })();
  `;
  const asNobody = { encoding: 'utf8', uid: 65534, gid: 65534, timeout: 20_000 };
  // The checkout may sit where another user cannot read it (a clone in a 0700 directory).
  const probe = spawnSync(process.execPath, ['-e', `require(${JSON.stringify(entry)})`], asNobody);
  if (probe.error !== undefined || probe.status !== 0) {
    t.skip(`another user cannot load this checkout here (${probe.error?.code ?? probe.stderr.split('\n').find((l) => /Error/.test(l))})`);
    return;
  }
  const r = spawnSync(process.execPath, ['-e', code], asNobody);
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stdout.trim(), 'SQLITE_READONLY 1');
});

test('options made in another realm (a vm context) are plain objects too', async (t) => {
  // An object literal of a vm context has that context's Object.prototype: open(), select()
  // and execute() refused it ("must be a plain object") while iterate() and transaction()
  // took it.
  const { runInNewContext } = await import('node:vm');
  const dir = await tempDir(t);
  const db = await Database.open(join(dir, 'realm.db'), runInNewContext('({ readers: 2 })'));
  t.after(() => db.close());
  await db.execute('CREATE TABLE t(x)', [], runInNewContext('({ timeoutMs: 1000 })'));
  assert.deepEqual(await db.select('SELECT 1 AS a', [], runInNewContext("({ rowMode: 'array' })")), [[1]]);
  assert.deepEqual(await db.select('SELECT :a AS a', runInNewContext('({ a: 7 })')), [{ a: 7 }]);
  await assert.rejects(db.select('SELECT 1', [], runInNewContext("({ rowMode: 'map' })")), /rowMode must be 'object' or 'array'/);
  // Still not any object: a class instance of another realm is refused as one of this realm is.
  await assert.rejects(db.select('SELECT 1', [], runInNewContext('new (class Options {})()')), TypeError);
});
