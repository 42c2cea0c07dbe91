// Encryption (issue 9): encryptionKey/cipher on open, rekey(), key pragmas refused, and
// the key kept out of every message.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createCipheriv, createDecipheriv, createHmac, pbkdf2Sync, randomBytes } from 'node:crypto';
import { copyFileSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { Database, SqliteError, rejectsAsync, assertSqliteError, tempDir } from './fixtures/helpers.mjs';

const KEY = 'correct horse battery staple';
// better-sqlite3's test extension (as in test/37), to make a reader's reopen fail.
const EXTENSION = join(dirname(createRequire(import.meta.url).resolve('better-sqlite3/package.json')), 'build', 'Release', 'test_extension.node');
const SECRET = 'plaintext-marker-7d1f3c';
const CIPHERS = ['chacha20', 'sqlcipher', 'aes256cbc', 'aes128cbc', 'ascon128'];

/** Every error message seen in this file: none may contain a key. */
const messages = [];
function seen(err) {
  messages.push(String(err?.message));
  return err;
}

async function fill(db) {
  await db.execute('CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT)');
  await db.executeBatch('INSERT INTO t(v) VALUES (?)', Array.from({ length: 200 }, (_, i) => [`${SECRET}-${i}`]));
}

/** The database file, after a close (so the WAL is checkpointed into it). */
function fileBytes(path) {
  return readFileSync(path);
}

function assertEncrypted(path) {
  const bytes = fileBytes(path);
  assert.ok(bytes.length > 0);
  assert.notEqual(bytes.subarray(0, 15).toString('latin1'), 'SQLite format 3', 'the file has a plaintext header');
  assert.equal(bytes.indexOf(SECRET), -1, 'a stored value is readable in the file');
}

function assertPlain(path) {
  assert.equal(fileBytes(path).subarray(0, 15).toString('latin1'), 'SQLite format 3');
}

async function rejectsKey(path, options) {
  const err = await rejectsAsync(() => Database.open(path, options), SqliteError);
  seen(err);
  assertSqliteError(err, 'SQLITE_NOTADB');
  assert.match(err.message, /key is wrong, or missing/);
  return err;
}

test('an encrypted database keeps no plaintext on disk and reads back through every reader', async (t) => {
  const path = join(await tempDir(t), 'enc.db');
  const db = await Database.open(path, { encryptionKey: KEY, readers: 3 });
  await fill(db);
  const reads = await Promise.all(
    Array.from({ length: 30 }, (_, i) => db.selectOne('SELECT v, (SELECT count(*) FROM t) AS n FROM t WHERE id = ?', [i + 1])),
  );
  reads.forEach((r, i) => assert.deepStrictEqual(r, { v: `${SECRET}-${i}`, n: 200 }));
  assert.deepStrictEqual((await db.execute('PRAGMA journal_mode')).rows, [{ journal_mode: 'wal' }]);
  await db.close();
  assertEncrypted(path);

  const again = await Database.open(path, { encryptionKey: KEY, readers: 3 });
  t.after(() => again.close());
  assert.deepStrictEqual(await again.selectOne('SELECT count(*) AS n FROM t'), { n: 200 });
});

test('reopening without the key or with a wrong key rejects with SQLITE_NOTADB', async (t) => {
  const path = join(await tempDir(t), 'enc.db');
  const db = await Database.open(path, { encryptionKey: KEY });
  await fill(db);
  await db.close();
  await rejectsKey(path);
  await rejectsKey(path, { readonly: true });
  const wrong = await rejectsKey(path, { encryptionKey: 'not the key' });
  assert.ok(!wrong.message.includes('not the key'));
  await rejectsKey(path, { encryptionKey: KEY, cipher: 'aes256cbc' });
  // Still intact for the right key.
  const again = await Database.open(path, { encryptionKey: KEY });
  t.after(() => again.close());
  assert.deepStrictEqual(await again.selectOne('SELECT count(*) AS n FROM t'), { n: 200 });
});

test('a live query works on an encrypted database', async (t) => {
  const path = join(await tempDir(t), 'enc.db');
  const db = await Database.open(path, { encryptionKey: KEY });
  t.after(() => db.close());
  await fill(db);
  const it = db.stream('SELECT count(*) AS n FROM t')[Symbol.asyncIterator]();
  assert.deepStrictEqual((await it.next()).value, [{ n: 200 }]);
  await db.execute('INSERT INTO t(v) VALUES (?)', ['one more']);
  assert.deepStrictEqual((await it.next()).value, [{ n: 201 }]);
  await it.return();
});

test('rekey changes the key with no data lost; readers and live queries follow', async (t) => {
  const path = join(await tempDir(t), 'enc.db');
  const db = await Database.open(path, { encryptionKey: KEY, readers: 3 });
  await fill(db);
  const it = db.stream('SELECT count(*) AS n FROM t')[Symbol.asyncIterator]();
  assert.deepStrictEqual((await it.next()).value, [{ n: 200 }]);
  // Reads queued around the rekey all complete.
  const around = Array.from({ length: 20 }, () => db.selectOne('SELECT count(*) AS n FROM t'));
  await db.rekey('a new passphrase');
  for (const r of await Promise.all(around)) assert.deepStrictEqual(r, { n: 200 });
  const after = await Promise.all(Array.from({ length: 20 }, () => db.selectOne('SELECT sum(length(v)) AS s FROM t')));
  assert.equal(new Set(after.map((r) => r.s)).size, 1);
  await db.execute('INSERT INTO t(v) VALUES (?)', ['after rekey']);
  assert.deepStrictEqual((await it.next()).value, [{ n: 201 }]);
  await it.return();
  await db.close();
  assertEncrypted(path);

  await rejectsKey(path, { encryptionKey: KEY });
  const again = await Database.open(path, { encryptionKey: 'a new passphrase', readers: 2 });
  t.after(() => again.close());
  assert.deepStrictEqual(await again.selectOne('SELECT count(*) AS n, max(v) AS m FROM t'), { n: 201, m: 'plaintext-marker-7d1f3c-99' });
  assert.deepStrictEqual((await again.execute('PRAGMA integrity_check')).rows[0], { integrity_check: 'ok' });
});

test('a rekey that changed the file and then lost a reader says the new key is in effect', async (t) => {
  // The readers reopen with the options of the open: an extension that became a directory
  // meanwhile keeps them from reopening, after the writer re-keyed the file. The rejection
  // read as "nothing changed", and a caller who kept the old key could not open the file again.
  const dir = await tempDir(t);
  const path = join(dir, 'k.db');
  const extension = join(dir, 'ext.node');
  copyFileSync(EXTENSION, extension);
  const db = await Database.open(path, { encryptionKey: KEY, readers: 2, extensions: [extension] });
  await fill(db);
  rmSync(extension);
  mkdirSync(extension);
  const err = seen(await db.rekey('the new key').catch((e) => e));
  assert.ok(err instanceof SqliteError, String(err));
  assert.match(err.message, /^the database now has the new key \(rekey\(\) changed it\), but a reader connection could not reopen/);
  // The readers that could not reopen refuse to read, rather than read with the old key.
  await rejectsAsync(() => db.select('SELECT count(*) AS n FROM t'), SqliteError, /could not reopen the database after rekey\(\)/);
  await db.execute('INSERT INTO t(v) VALUES (?)', ['after']);
  await db.close();
  await rejectsKey(path, { encryptionKey: KEY });
  const again = await Database.open(path, { encryptionKey: 'the new key' });
  t.after(() => again.close());
  assert.deepEqual(await again.selectOne('SELECT count(*) AS n FROM t'), { n: 201 });
});

test('a rekey of a file moved away while open is refused, and the old key still opens it', async (t) => {
  // The writer would re-key through its open file while the readers reopen by path; leaving
  // WAL mode (which a rekey needs) refuses a moved file.
  const dir = await tempDir(t);
  const [path, moved] = [join(dir, 'k.db'), join(dir, 'moved.db')];
  const db = await Database.open(path, { encryptionKey: KEY, readers: 2 });
  await fill(db);
  renameSync(path, moved);
  const err = seen(await db.rekey('the new key').catch((e) => e));
  assert.ok(err instanceof SqliteError, String(err));
  assert.doesNotMatch(err.message, /new key/);
  await db.close();
  const again = await Database.open(moved, { encryptionKey: KEY });
  t.after(() => again.close());
  assert.deepEqual(await again.selectOne('SELECT count(*) AS n FROM t'), { n: 200 });
});

test('readers that could not reopen after a rekey refuse every request, never answer from an empty stand-in', async (t) => {
  // Encrypting a plaintext database closes the readers first; one that could not reopen
  // kept the empty in-memory connection that stood in meanwhile, and reads, diagnostics and
  // backups "succeeded" on it: no tables, a backup of an empty database.
  const dir = await tempDir(t);
  const [path, moved] = [join(dir, 'p.db'), join(dir, 'moved.db')];
  const db = await Database.open(path, { readers: 2 });
  t.after(() => db.close());
  await fill(db);
  renameSync(path, moved);
  const err = seen(await db.rekey('a key').catch((e) => e));
  assert.ok(err instanceof SqliteError, String(err));
  const refusal = /could not reopen the database after rekey\(\)/;
  for (let i = 0; i < 4; i++) {
    await rejectsAsync(() => db.select('SELECT count(*) AS n FROM sqlite_schema'), SqliteError, refusal);
  }
  await rejectsAsync(() => db.diagnostics(), SqliteError, refusal);
  await rejectsAsync(() => db.backup(join(dir, 'copy.db')), SqliteError, refusal);
  const live = db.stream('SELECT 1 AS one');
  const liveErr = await new Promise((resolve) => live.subscribe(() => resolve('rows'), resolve));
  assert.match(String(liveErr?.message), refusal);
});

test('rekey(null) decrypts; rekey on a plaintext database encrypts it (and WAL stays on)', async (t) => {
  const path = join(await tempDir(t), 'enc.db');
  const db = await Database.open(path, { encryptionKey: KEY, readers: 2 });
  await fill(db);
  await db.rekey(null);
  assert.deepStrictEqual(await db.selectOne('SELECT count(*) AS n FROM t'), { n: 200 });
  await db.close();
  assertPlain(path);

  const plain = await Database.open(path, { readers: 2 });
  assert.deepStrictEqual(await plain.selectOne('SELECT count(*) AS n FROM t'), { n: 200 });
  await plain.rekey('encrypted later');
  assert.deepStrictEqual((await plain.execute('PRAGMA journal_mode')).rows, [{ journal_mode: 'wal' }]);
  const reads = await Promise.all(Array.from({ length: 10 }, () => plain.selectOne('SELECT count(*) AS n FROM t')));
  for (const r of reads) assert.deepStrictEqual(r, { n: 200 });
  await plain.execute('INSERT INTO t(v) VALUES (?)', ['x']);
  await plain.close();
  assertEncrypted(path);
  await rejectsKey(path);
  const again = await Database.open(path, { encryptionKey: 'encrypted later' });
  t.after(() => again.close());
  assert.deepStrictEqual(await again.selectOne('SELECT count(*) AS n FROM t'), { n: 201 });
});

test('rekey needs the file to itself: with another connection open it is refused and changes nothing', async (t) => {
  // A hostile probe: with AES-CBC (no authentication), the other connection's checkpoint
  // at close decrypted the new key's WAL frames with the old key and wrote the garbage into
  // the file, which then opened with neither key. Plaintext to key was already refused.
  for (const cipher of ['aes256cbc', 'chacha20']) {
    for (const [from, to] of [[KEY, 'the new key'], [KEY, null], [null, 'the new key']]) {
      const name = `${cipher} ${from ? 'key' : 'plain'} to ${to ? 'key' : 'plain'}`;
      const path = join(await tempDir(t), 'enc.db');
      const keyed = (key) => (key ? { encryptionKey: key, cipher } : {});
      // A plaintext file is encrypted with the default cipher.
      const after = to ? (from ? keyed(to) : { encryptionKey: to }) : {};
      const db = await Database.open(path, { ...keyed(from), readers: 2 });
      await fill(db);
      const other = await Database.open(path, keyed(from));
      assert.deepStrictEqual(await other.selectOne('SELECT count(*) AS n FROM t'), { n: 200 });
      const err = seen(await rejectsAsync(() => db.rekey(to), SqliteError));
      assertSqliteError(err, 'SQLITE_BUSY');
      assert.match(err.message, /another connection/, name);
      // Both go on with the key they have: reads on every reader, and writes.
      await db.execute('INSERT INTO t(v) VALUES (?)', ['from db']);
      await other.execute('INSERT INTO t(v) VALUES (?)', ['from other']);
      const counts = await Promise.all(Array.from({ length: 6 }, () => db.selectOne('SELECT count(*) AS n FROM t')));
      for (const c of counts) assert.deepStrictEqual(c, { n: 202 }, name);
      await other.close();
      // Alone now, the rekey runs.
      await db.rekey(to);
      await db.close();
      if (to && from) await rejectsKey(path, keyed(from));
      const again = await Database.open(path, after);
      assert.deepStrictEqual(await again.selectOne('SELECT count(*) AS n FROM t'), { n: 202 }, name);
      assert.deepStrictEqual((await again.execute('PRAGMA integrity_check')).rows[0], { integrity_check: 'ok' }, name);
      await again.close();
    }
  }
});

test('a passphrase with a lone surrogate is a TypeError (UTF-8 would make it U+FFFD: other keys would open the file)', async (t) => {
  const dir = await tempDir(t);
  for (const key of ['\ud800', 'abc\udfff', '\udc00\ud800']) {
    const err = seen(await rejectsAsync(() => Database.open(join(dir, 'x.db'), { encryptionKey: key }), TypeError, /lone surrogate/));
    assert.doesNotMatch(err.message, /abc/);
  }
  const db = await Database.open(join(dir, 'y.db'), { encryptionKey: 'a \u{1F600} key' });
  t.after(() => db.close());
  await rejectsAsync(() => db.rekey('\ud800x'), TypeError, /lone surrogate/);
  await db.rekey('\ufffdx');
});

/** The rows of the file opened with `key` (undefined: none), or the error's code. */
async function rowsWith(path, key) {
  try {
    const d = await Database.open(path, key === undefined ? {} : { encryptionKey: key });
    try {
      const [{ integrity_check: check }] = (await d.execute('PRAGMA integrity_check')).rows;
      return `${(await d.selectOne('SELECT count(*) AS n FROM t')).n} ${check}`;
    } finally {
      await d.close();
    }
  } catch (e) {
    return e.code;
  }
}

test('a forced close during rekey(null) waits for it: the file has one key, never half of each', async (t) => {
  // A chaos probe: the forced close interrupted SQLite3MC's decryption, whose rollback wrote
  // page 1 in plaintext (its write cipher was off): the file opened with neither key.
  const dir = await tempDir(t);
  for (const delayMs of [0, 1, 2, 4, 8]) {
    const path = join(dir, `f${delayMs}.db`);
    const db = await Database.open(path, { encryptionKey: KEY });
    await fill(db);
    const rekeyed = db.rekey(null).then(() => 'resolved', (e) => e.code);
    await new Promise((resolve) => setTimeout(resolve, delayMs));
    await db.close({ force: true });
    const outcome = await rekeyed;
    const [withKey, without] = [await rowsWith(path, KEY), await rowsWith(path)];
    if (outcome === 'resolved') assert.equal(without, '200 ok', `${delayMs} ms`);
    else assert.ok(withKey === '200 ok' || without === '200 ok', `${delayMs} ms: ${outcome}, ${withKey}, ${without}`);
  }
});

test('another Database opening the file while rekey() runs never breaks the readers', async (t) => {
  // A chaos probe: an open of the same file in this process (which shares SQLite's locks)
  // slipped in after the rekey proved it was alone, and the readers could not reopen for good.
  const dir = await tempDir(t);
  for (const delayMs of [0, 1, 3, 6, 12]) {
    const path = join(dir, `o${delayMs}.db`);
    const db = await Database.open(path, { readers: 2 });
    await fill(db);
    const rekeyed = db.rekey('the new key').then(() => 'resolved', (e) => e.code);
    await new Promise((resolve) => setTimeout(resolve, delayMs));
    const other = await Database.open(path, { busyTimeout: 50 }).catch((e) => e.code);
    const outcome = await rekeyed;
    if (typeof other !== 'string') await other.close();
    for (let i = 0; i < 4; i++) assert.deepEqual(await db.selectOne('SELECT count(*) AS n FROM t'), { n: 200 }, `${delayMs} ms: ${outcome}`);
    await db.close();
    if (outcome === 'resolved') assert.equal(await rowsWith(path, 'the new key'), '200 ok', `${delayMs} ms`);
    else {
      assert.equal(outcome, 'SQLITE_BUSY', `${delayMs} ms`);
      assert.equal(await rowsWith(path), '200 ok', `${delayMs} ms`);
    }
  }
});

test('an open with the new key that waits for a rekey to end opens; with the old key it is refused as a wrong key', async (t) => {
  // The waiting open derived its key from the file's old salt: it failed with "the key is
  // wrong" with the new key as with the old (6 of 6 runs of a probe).
  const dir = await tempDir(t);
  const path = join(dir, 'wait.db');
  const db = await Database.open(path, { encryptionKey: 'old key' });
  await db.execute('CREATE TABLE t(x)');
  await db.execute('WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < 20000) INSERT INTO t SELECT randomblob(200) FROM c');
  const rekeyed = db.rekey('new key');
  await new Promise((resolve) => setTimeout(resolve, 10));
  const [withNew, withOld] = await Promise.allSettled([
    Database.open(path, { encryptionKey: 'new key', busyTimeout: 5000 }),
    Database.open(path, { encryptionKey: 'old key', busyTimeout: 5000 }),
  ]);
  await rekeyed;
  assert.equal(withNew.status, 'fulfilled', withNew.reason?.message);
  assert.deepEqual(await withNew.value.selectOne('SELECT count(*) AS n FROM t'), { n: 20000 });
  await withNew.value.close();
  assert.equal(withOld.status, 'rejected');
  assertSqliteError(withOld.reason, 'SQLITE_NOTADB');
  await db.close();
});

test('a Buffer key is a raw key; its length and cipher are checked', async (t) => {
  const dir = await tempDir(t);
  const key = Buffer.alloc(32, 0);
  for (let i = 0; i < 32; i++) key[i] = (i * 37 + 11) & 0xff;
  const copy = Buffer.from(key);
  const path = join(dir, 'raw.db');
  const db = await Database.open(path, { encryptionKey: key });
  assert.deepStrictEqual(key, copy, "the caller's Buffer is left as it was");
  await fill(db);
  await db.close();
  assertEncrypted(path);
  // The same bytes as a passphrase (hex text) are another key.
  await rejectsKey(path, { encryptionKey: key.toString('hex') });
  const again = await Database.open(path, { encryptionKey: Buffer.from(copy) });
  assert.deepStrictEqual(await again.selectOne('SELECT count(*) AS n FROM t'), { n: 200 });
  const newKey = Buffer.alloc(32, 7);
  await again.rekey(newKey);
  await again.close();
  await rejectsKey(path, { encryptionKey: copy });
  const third = await Database.open(path, { encryptionKey: newKey });
  t.after(() => third.close());
  assert.deepStrictEqual(await third.selectOne('SELECT count(*) AS n FROM t'), { n: 200 });

  seen(await rejectsAsync(() => Database.open(join(dir, 'x.db'), { encryptionKey: Buffer.alloc(31, 1) }), RangeError, /32 bytes/));
  seen(
    await rejectsAsync(() => Database.open(join(dir, 'y.db'), { encryptionKey: Buffer.alloc(32, 1), cipher: 'aes256cbc' }), TypeError, /passphrase/),
  );
  seen(await rejectsAsync(() => third.rekey(Buffer.alloc(16, 1)), RangeError, /32 bytes/));
});

test('each cipher opens what it wrote, and only with its key', async (t) => {
  const dir = await tempDir(t);
  for (const cipher of CIPHERS) {
    const path = join(dir, `${cipher}.db`);
    const db = await Database.open(path, { encryptionKey: KEY, cipher, readers: 2 });
    await fill(db);
    await db.close();
    assertEncrypted(path);
    // A failed open changes nothing: it would otherwise checkpoint the WAL the readers
    // left with the wrong key.
    const before = fileBytes(path);
    await rejectsKey(path, { encryptionKey: `${KEY}!`, cipher });
    await rejectsKey(path);
    assert.deepStrictEqual(fileBytes(path), before, `${cipher}: a failed open changed the file`);
    const again = await Database.open(path, { encryptionKey: KEY, cipher, readers: 2 });
    assert.deepStrictEqual(await again.selectOne('SELECT count(*) AS n FROM t'), { n: 200 }, cipher);
    await again.rekey('second');
    await again.close();
    const third = await Database.open(path, { encryptionKey: 'second', cipher });
    assert.deepStrictEqual(await third.selectOne('SELECT count(*) AS n FROM t'), { n: 200 }, cipher);
    await third.close();
  }
});

test('cipher settings given as pragmas or SQL are refused: rekey() can never write a file no key opens', async (t) => {
  // Before: PRAGMA kdf_iter (or legacy, ...) ran on the writer alone; rekey() then encrypted
  // the file with it, the readers could not follow, and the file opened with neither key.
  const dir = await tempDir(t);
  for (const name of ['kdf_iter', 'legacy', 'cipher', 'hmac_use', 'main.kdf_iter']) {
    const err = await rejectsAsync(() => Database.open(join(dir, 'c.db'), { encryptionKey: 'k0', pragmas: { [name]: 2 } }), TypeError);
    assert.match(err.message, /'cipher' open option/, name);
  }
  const path = join(dir, 'c.db');
  const db = await Database.open(path, { encryptionKey: 'k0' });
  await db.execute('CREATE TABLE t(v); INSERT INTO t VALUES (1)');
  for (const sql of ['PRAGMA kdf_iter = 12345', 'PRAGMA legacy = 1', "PRAGMA cipher = 'aes256cbc'", 'PRAGMA hmac_check = 0', 'PRAGMA cipher_page_size = 1024']) {
    const err = await rejectsAsync(() => db.execute(sql), RangeError);
    assert.match(err.message, /cipher settings/, sql);
  }
  // The same parameters through the library's SQL functions.
  for (const sql of ["SELECT sqlite3mc_config('chacha20', 'kdf_iter', 1234)", "SELECT sqlite3mc_codec_data('cipher')"]) {
    const err = await rejectsAsync(() => db.select(sql), RangeError);
    assert.match(err.message, /'cipher' open option/, sql);
    await rejectsAsync(() => db.execute(sql), RangeError);
  }
  await db.rekey('k1');
  await db.close();
  const again = await Database.open(path, { encryptionKey: 'k1' });
  assert.deepStrictEqual(await again.select('SELECT v FROM t'), [{ v: 1 }]);
  await again.close();
});

test('keys given as pragmas or SQL are refused, pointing to encryptionKey and rekey()', async (t) => {
  const dir = await tempDir(t);
  for (const name of ['key', 'rekey', 'hexkey', 'hexrekey', 'KEY', 'main.key']) {
    const err = await rejectsAsync(() => Database.open(join(dir, 'p.db'), { pragmas: { [name]: 'pragma-secret' } }), TypeError);
    seen(err);
    assert.match(err.message, /encryptionKey/);
    assert.match(err.message, /rekey\(\)/);
  }
  const db = await Database.open(join(dir, 'p.db'));
  t.after(() => db.close());
  await db.execute('CREATE TABLE t(v)');
  await db.execute("INSERT INTO t VALUES ('" + SECRET + "')");
  for (const sql of [
    "PRAGMA key = 'sql-secret'",
    "PRAGMA rekey = 'sql-secret'",
    "PRAGMA hexkey = '0011'",
    "PRAGMA hexrekey = '0011'",
    "PRAGMA main.key = 'sql-secret'",
    "PRAGMA Key('sql-secret')",
  ]) {
    const err = await rejectsAsync(() => db.execute(sql), RangeError);
    seen(err);
    assert.match(err.message, /encryptionKey/, sql);
    const err2 = await rejectsAsync(() => db.select(sql), RangeError);
    seen(err2);
    assert.match(err2.message, /encryptionKey/, sql);
  }
  const script = await rejectsAsync(() => db.execute("CREATE TABLE u(x); PRAGMA key = 'sql-secret'; INSERT INTO u VALUES (1)"), RangeError);
  seen(script);
  await rejectsAsync(
    () => db.transaction(async (tx) => tx.execute("PRAGMA rekey = 'sql-secret'")),
    RangeError,
    /encryptionKey/,
  );
  await db.close();
  // Never silently plaintext-with-a-key: the file is what it was, plain and readable.
  assertPlain(join(dir, 'p.db'));
});

test('open options are checked', async (t) => {
  const dir = await tempDir(t);
  const path = join(dir, 'o.db');
  seen(await rejectsAsync(() => Database.open(path, { encryptionKey: '' }), RangeError, /encryptionKey may not be empty/));
  seen(await rejectsAsync(() => Database.open(path, { encryptionKey: Buffer.alloc(0) }), RangeError, /empty/));
  seen(await rejectsAsync(() => Database.open(path, { encryptionKey: 42 }), TypeError, /encryptionKey must be/));
  seen(await rejectsAsync(() => Database.open(path, { cipher: 'chacha20' }), TypeError, /needs 'encryptionKey'/));
  seen(await rejectsAsync(() => Database.open(path, { encryptionKey: KEY, cipher: 'rc4' }), TypeError, /cipher must be one of/));
  seen(await rejectsAsync(() => Database.open(path, { encryptionkey: KEY }), TypeError, /encryptionKey/));
  const db = await Database.open(path, { encryptionKey: KEY });
  t.after(() => db.close());
  seen(await rejectsAsync(() => db.rekey(), TypeError, /null to decrypt/));
  seen(await rejectsAsync(() => db.rekey(''), RangeError, /empty/));
  seen(await rejectsAsync(() => db.rekey(5), TypeError));
  seen(await rejectsAsync(() => db.transaction(async () => db.rekey('x')), RangeError, /transaction/));
  const ro = await Database.open(path, { encryptionKey: KEY, readonly: true });
  const err = await rejectsAsync(() => ro.rekey('x'), SqliteError);
  seen(err);
  assertSqliteError(err, 'SQLITE_READONLY');
  await ro.close();
  await db.close();
  seen(await rejectsAsync(() => db.rekey('x'), Error));
});

// SQLCipher 4's file format with its defaults, written here from its published description
// (not by SQLCipher itself, which needs OpenSSL; see docs/decisions.md): 4096-byte pages,
// a 16-byte random salt at the start of the file, AES-256-CBC over each page with a random
// 16-byte IV, HMAC-SHA512 over the ciphertext, IV and page number (little-endian), keys by
// PBKDF2-HMAC-SHA512 (256,000 iterations; the HMAC key: 2 iterations over the key with the
// salt XOR 0x3a), 80 reserved bytes per page (IV and HMAC).
const SQLCIPHER4 = { pageSize: 4096, reserve: 80, iterations: 256000 };

function sqlcipherKeys(passphrase, salt) {
  const key = pbkdf2Sync(passphrase, salt, SQLCIPHER4.iterations, 32, 'sha512');
  const hmacSalt = Buffer.from(salt.map((b) => b ^ 0x3a));
  return { key, hmacKey: pbkdf2Sync(key, hmacSalt, 2, 32, 'sha512') };
}

function pageHmac(hmacKey, page, pgno, offset) {
  const { pageSize, reserve } = SQLCIPHER4;
  const pg = Buffer.alloc(4);
  pg.writeUInt32LE(pgno);
  return createHmac('sha512', hmacKey).update(page.subarray(offset, pageSize - reserve + 16)).update(pg).digest();
}

function sqlcipherDecrypt(file, passphrase) {
  const { pageSize, reserve } = SQLCIPHER4;
  assert.equal(file.length % pageSize, 0);
  const salt = file.subarray(0, 16);
  const { key, hmacKey } = sqlcipherKeys(passphrase, salt);
  const out = Buffer.alloc(file.length);
  for (let pgno = 1; pgno * pageSize <= file.length; pgno++) {
    const page = file.subarray((pgno - 1) * pageSize, pgno * pageSize);
    const offset = pgno === 1 ? 16 : 0;
    const iv = page.subarray(pageSize - reserve, pageSize - reserve + 16);
    const mac = page.subarray(pageSize - reserve + 16, pageSize - reserve + 80);
    assert.deepStrictEqual(pageHmac(hmacKey, page, pgno, offset), Buffer.from(mac), `page ${pgno}: HMAC`);
    const d = createDecipheriv('aes-256-cbc', key, iv).setAutoPadding(false);
    const plain = Buffer.concat([d.update(page.subarray(offset, pageSize - reserve)), d.final()]);
    const target = out.subarray((pgno - 1) * pageSize, pgno * pageSize);
    if (pgno === 1) target.write('SQLite format 3\0', 0, 'latin1');
    plain.copy(target, offset);
  }
  return out;
}

function sqlcipherEncrypt(plain, passphrase) {
  const { pageSize, reserve } = SQLCIPHER4;
  const salt = randomBytes(16);
  const { key, hmacKey } = sqlcipherKeys(passphrase, salt);
  const out = Buffer.alloc(plain.length);
  for (let pgno = 1; pgno * pageSize <= plain.length; pgno++) {
    const src = plain.subarray((pgno - 1) * pageSize, pgno * pageSize);
    const page = out.subarray((pgno - 1) * pageSize, pgno * pageSize);
    const offset = pgno === 1 ? 16 : 0;
    if (pgno === 1) salt.copy(page, 0);
    const iv = randomBytes(16);
    const c = createCipheriv('aes-256-cbc', key, iv).setAutoPadding(false);
    Buffer.concat([c.update(src.subarray(offset, pageSize - reserve)), c.final()]).copy(page, offset);
    iv.copy(page, pageSize - reserve);
    pageHmac(hmacKey, page, pgno, offset).copy(page, pageSize - reserve + 16);
  }
  return out;
}

test("cipher 'sqlcipher' writes and reads SQLCipher 4's default format", async (t) => {
  const dir = await tempDir(t);
  const path = join(dir, 'ours.db');
  const db = await Database.open(path, { encryptionKey: KEY, cipher: 'sqlcipher', readers: 1 });
  await fill(db);
  await db.execute('PRAGMA wal_checkpoint(TRUNCATE)');
  await db.close();
  // What we wrote decrypts by the format's rules (HMAC of every page checked).
  const plain = sqlcipherDecrypt(readFileSync(path), KEY);
  assert.equal(plain[20], SQLCIPHER4.reserve, 'reserved bytes per page');
  assert.equal(plain.readUInt16BE(16), SQLCIPHER4.pageSize);
  assert.ok(plain.indexOf(`${SECRET}-199`) > 0);

  // A file written by the format's rules (fresh salt and IVs, another passphrase) opens.
  const theirs = join(dir, 'theirs.db');
  writeFileSync(theirs, sqlcipherEncrypt(plain, 'their passphrase'));
  const other = await Database.open(theirs, { encryptionKey: 'their passphrase', cipher: 'sqlcipher', readers: 2 });
  t.after(() => other.close());
  assert.deepStrictEqual(await other.selectOne('SELECT count(*) AS n, max(id) AS m FROM t'), { n: 200, m: 200 });
  assert.deepStrictEqual((await other.execute('PRAGMA integrity_check')).rows, [{ integrity_check: 'ok' }]);
  await rejectsKey(theirs, { encryptionKey: KEY, cipher: 'sqlcipher' });
});

test('a database written by SQLCipher 4 itself (test/fixtures/sqlcipher4.db) opens with cipher sqlcipher', async (t) => {
  // Made by SQLCipher 4 with its defaults; see test/fixtures/sqlcipher4.md. Opened from a
  // copy: opening switches the file to WAL mode.
  const fixture = new URL('./fixtures/sqlcipher4.db', import.meta.url);
  const passphrase = 'quiet sqlcipher fixture';
  const original = readFileSync(fixture);
  // The file is SQLCipher's own: no plaintext header, and the format the test above
  // implements from SQLCipher 4's published layout decrypts it (every page's HMAC checked).
  assert.notEqual(original.subarray(0, 15).toString('latin1'), 'SQLite format 3');
  assert.equal(original.indexOf('secret note'), -1);
  const plain = sqlcipherDecrypt(original, passphrase);
  assert.ok(plain.indexOf('first secret note') > 0);
  const path = join(await tempDir(t), 'sqlcipher4.db');
  copyFileSync(fixture, path);
  const db = await Database.open(path, { encryptionKey: passphrase, cipher: 'sqlcipher', readers: 2 });
  t.after(() => db.close());
  assert.deepStrictEqual(await db.select('SELECT id, body, n FROM notes ORDER BY id'), [
    { id: 1, body: 'first secret note', n: 1.5 },
    { id: 2, body: 'second secret note', n: 2.5 },
    { id: 3, body: 'third secret note', n: null },
  ]);
  assert.deepStrictEqual((await db.execute('PRAGMA integrity_check')).rows, [{ integrity_check: 'ok' }]);
  // Writable too.
  await db.execute("INSERT INTO notes(body) VALUES ('written by quietsqlite')");
  assert.equal((await db.selectOne('SELECT count(*) AS n FROM notes')).n, 4);
  // The wrong key, no key, or another cipher: SQLITE_NOTADB, and the file is not changed.
  const untouched = join(await tempDir(t), 'untouched.db');
  copyFileSync(fixture, untouched);
  await rejectsKey(untouched, { encryptionKey: 'not the key', cipher: 'sqlcipher' });
  await rejectsKey(untouched, { encryptionKey: passphrase });
  await rejectsKey(untouched, {});
  assert.ok(readFileSync(untouched).equals(original));
});

test('no message seen in this file contains a key', () => {
  assert.ok(messages.length > 30, `only ${messages.length} messages`);
  for (const m of messages) {
    for (const k of [KEY, 'not the key', 'pragma-secret', 'sql-secret', 'a new passphrase', 'encrypted later', SECRET]) {
      assert.ok(!m.includes(k), `a message shows a key: ${m}`);
    }
  }
});
