// Extensions (issue 9): the `extensions` open option and db.loadExtension() load on every
// connection (readers, writer, connections reopened by rekey); a path that fails rejects
// with a SqliteError naming it; SQL's load_extension() stays refused either way. The test
// extension is better-sqlite3's (deps/test_extension.c): it registers
// testExtensionFunction(...), which returns its argument count as a REAL.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { SqliteError } from '../dist/index.mjs';
import { exitIfStuck, scratch } from './fixtures/tx-helpers.mjs';

const tmp = scratch('extensions37');
exitIfStuck();

const require = createRequire(import.meta.url);
const EXT = join(dirname(require.resolve('better-sqlite3/package.json')), 'build', 'Release', 'test_extension.node');
const CALL = 'SELECT testExtensionFunction(1, 2, 3) AS n';

test('the test extension is there', () => {
  assert.ok(existsSync(EXT), `${EXT} (built with better-sqlite3)`);
});

/** Runs `sql` often enough, concurrently, that every reader serves some of it. */
async function onEveryReader(db, sql) {
  return Promise.all(Array.from({ length: 40 }, () => db.selectOne(sql)));
}

test('extensions given to open() load on the writer and every reader', async () => {
  const db = await tmp.open(undefined, { readers: 3, extensions: [EXT] });
  for (const row of await onEveryReader(db, CALL)) assert.deepEqual(row, { n: 3 });
  assert.deepEqual((await db.execute(CALL)).rows, [{ n: 3 }]);
});

test('loadExtension() loads on open connections and on connections reopened by rekey', async () => {
  const db = await tmp.open(undefined, { readers: 2, encryptionKey: 'one' });
  await onEveryReader(db, 'SELECT 1');
  await assert.rejects(db.select(CALL), /no such function: testExtensionFunction/);
  await db.loadExtension(EXT);
  for (const row of await onEveryReader(db, CALL)) assert.deepEqual(row, { n: 3 });
  assert.deepEqual((await db.execute(CALL)).rows, [{ n: 3 }]);
  await db.transaction(async (tx) => {
    assert.deepEqual(await tx.selectOne(CALL), { n: 3 });
  });
  // Readers reopen with the new key: the extension is loaded on the new connections too.
  await db.rekey('two');
  for (const row of await onEveryReader(db, CALL)) assert.deepEqual(row, { n: 3 });
});

test('an extension that fails to load is a SqliteError naming it; nothing crashes', async () => {
  const missing = join(tmp.dir, 'no-such-extension.so');
  await assert.rejects(tmp.open(undefined, { extensions: [missing] }), (e) => {
    assert.ok(e instanceof SqliteError, String(e));
    assert.match(e.message, /could not load the extension/);
    assert.ok(e.message.includes(missing), e.message);
    return true;
  });
  const db = await tmp.open();
  await assert.rejects(db.loadExtension(missing), (e) => e instanceof SqliteError && e.message.includes(missing));
  // A real library with no such entry point.
  await assert.rejects(db.loadExtension(EXT, 'no_such_init'), (e) => e instanceof SqliteError && /no_such_init/.test(e.message));
  await assert.rejects(db.loadExtension(''), TypeError);
  await assert.rejects(db.loadExtension(42), TypeError);
  await assert.rejects(tmp.open(undefined, { extensions: 'x.so' }), TypeError);
  assert.deepEqual(await db.selectOne('SELECT 1 AS one'), { one: 1 });
  const ro = await tmp.open(db.path, { readonly: true });
  await assert.rejects(ro.loadExtension(EXT), /read-only database/);
});

test("SQL's load_extension() stays refused, with and without extensions", async () => {
  const plain = await tmp.open();
  const loaded = await tmp.open(undefined, { extensions: [EXT] });
  await loaded.loadExtension(EXT);
  for (const db of [plain, loaded]) {
    const sql = 'SELECT load_extension(?)';
    await assert.rejects(db.select(sql, [EXT]), /not authorized/);
    await assert.rejects(db.execute(sql, [EXT]), /not authorized/);
  }
});

test('a review: a FIFO or a directory as the extension is refused at once (a FIFO hung the writer and process.exit); a sparse list is a TypeError', async () => {
  const { execFileSync } = await import('node:child_process');
  const fifo = join(tmp.dir, 'pipe.so');
  execFileSync('mkfifo', [fifo]);
  const db = await tmp.open();
  for (const path of [fifo, join(tmp.dir, 'pipe'), tmp.dir]) {
    await assert.rejects(db.loadExtension(path), (e) => e instanceof RangeError && /is not a regular file/.test(e.message));
  }
  await assert.rejects(tmp.open(undefined, { extensions: [fifo] }), (e) => e instanceof RangeError && /is not a regular file/.test(e.message));
  await assert.rejects(tmp.open(undefined, { extensions: new Array(2) }), (e) => e instanceof TypeError && /extensions\[0\]/.test(e.message));
  assert.deepEqual(await db.select('SELECT 1 AS ok'), [{ ok: 1 }]);
  await db.close();
});

test('a function and an extension that define the same name: the later one, on the writer and on every reader alike', async () => {
  // Readers applied every extension before every function, the writer in call order: the
  // same SQL answered 'js' on the readers and the extension's value on the writer.
  const db = await tmp.open(undefined, { readers: 3 });
  db.function('testExtensionFunction', () => 'js', { varargs: true });
  await db.loadExtension(EXT);
  const sql = 'SELECT testExtensionFunction(1, 2) AS v';
  const onReaders = await Promise.all(Array.from({ length: 12 }, () => db.selectOne(sql)));
  const onWriter = (await db.execute(sql)).rows[0];
  assert.deepEqual(onWriter, { v: 2 });
  for (const r of onReaders) assert.deepEqual(r, onWriter);
  // And a function defined after the extension replaces it everywhere.
  db.function('testExtensionFunction', () => 'js again', { varargs: true });
  const later = await Promise.all(Array.from({ length: 12 }, () => db.selectOne(sql)));
  for (const r of [...later, (await db.execute(sql)).rows[0]]) assert.deepEqual(r, { v: 'js again' });
  await db.close();
});
