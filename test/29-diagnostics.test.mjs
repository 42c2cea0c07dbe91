// db.diagnostics() (issue 9): every number is real, so each test changes one and sees it
// move; the key never appears.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { deferred, exitIfStuck, scratch, sleep, within } from './fixtures/tx-helpers.mjs';

const tmp = scratch('diag29');
exitIfStuck();
const RUNAWAY = 'WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) SELECT count(*) FROM c';
const CLOSED = 'ERR_QUIETSQLITE_CLOSED';

/** readersBusy is a moment's count: a reader that just sent the previous diagnostics() its
 * answer may still be finishing that task. Asks until two answers agree. */
async function busyOnceSettled(db) {
  let last = (await db.diagnostics()).readersBusy;
  for (let i = 0; i < 20; i++) {
    await sleep(5);
    const now = (await db.diagnostics()).readersBusy;
    if (now === last) return now;
    last = now;
  }
  return last;
}

async function fill(db, n, table = 't') {
  await db.execute(`CREATE TABLE IF NOT EXISTS ${table}(x INTEGER, s TEXT)`);
  await db.execute(
    `WITH RECURSIVE c(v) AS (SELECT 1 UNION ALL SELECT v+1 FROM c WHERE v < ?) INSERT INTO ${table} SELECT v, printf('%0200d', v) FROM c`,
    [n],
  );
}

test('the shape, the version, the cipher, and no key anywhere', async () => {
  const plain = await tmp.open(undefined, { readers: 3 });
  const d = await plain.diagnostics();
  assert.deepEqual(Object.keys(d).sort(), [
    'cacheBytes', 'cipher', 'freelistCount', 'inTransaction', 'inlineFallbacks', 'inlineReads', 'liveQueries', 'pageCount', 'pageSize', 'queuedReads',
    'queuedWrites', 'readers', 'readersBusy', 'schemaBytes', 'sqliteVersion', 'statementBytes', 'walBytes',
  ]);
  assert.deepEqual(Object.keys(d.liveQueries).sort(), ['groups', 'reruns', 'skippedByHash', 'subscribers']);
  assert.match(d.sqliteVersion, /^3\.\d+\.\d+$/);
  assert.equal(d.sqliteVersion, (await plain.selectOne('SELECT sqlite_version() AS v')).v);
  assert.equal(d.cipher, null);
  assert.equal(d.readers, 3);
  assert.equal(d.inTransaction, false);
  assert.equal(d.pageSize, (await plain.selectOne('PRAGMA page_size', [], { rowMode: 'array' }))[0]);

  const key = 'diagnostics-secret-passphrase';
  const enc = await tmp.open(undefined, { readers: 2, encryptionKey: key });
  const e = await enc.diagnostics();
  assert.equal(e.cipher, 'chacha20');
  assert.ok(!JSON.stringify(e).includes(key));
  await enc.rekey(null);
  assert.equal((await enc.diagnostics()).cipher, null, 'decrypted by rekey(null)');
  await plain.rekey('now encrypted');
  assert.equal((await plain.diagnostics()).cipher, 'chacha20', 'encrypted by rekey()');
  await plain.close();
  await assert.rejects(plain.diagnostics(), (err) => err.code === CLOSED);
});

test('readersBusy and queuedReads move with busy readers', async () => {
  const db = await tmp.open(undefined, { readers: 2 });
  await fill(db, 100);
  assert.equal(await busyOnceSettled(db), 0);
  const it = db.iterate('SELECT x FROM t', [], { chunkSize: 10 });
  await it.next();
  assert.equal(await busyOnceSettled(db), 1, 'an open iterator holds a reader');
  // The other reader runs a read that does not end, and so does the spare reader (the
  // second is sent once the first has run long, and is another text: one that ran long
  // before never goes to the spare); three reads queue behind them.
  const ac = new AbortController();
  const runaways = [];
  for (const sql of [RUNAWAY, RUNAWAY.replace('count(*)', 'max(x)')]) {
    runaways.push(db.select(sql, [], { signal: ac.signal }).catch(() => {}));
    // Let a free reader take it, and run it long (a diagnostics() now would queue too).
    await sleep(300);
  }
  const queued = [1, 2, 3].map((v) => db.selectOne('SELECT ? AS v', [v]));
  const pending = db.diagnostics();
  ac.abort();
  const d = await within(pending, 'diagnostics behind busy readers', 5000);
  assert.equal(d.readers, 2);
  assert.equal(d.readersBusy, 3, 'the iterator, a runaway on the other reader, one on the spare');
  assert.equal(d.queuedReads, 3);
  await Promise.all(runaways);
  assert.deepEqual((await Promise.all(queued)).map((r) => r.v), [1, 2, 3]);
  await it.return();
});

test('queuedWrites and inTransaction move with a transaction holding the writer', async () => {
  const db = await tmp.open(undefined, { readers: 2 });
  await fill(db, 1);
  const release = deferred();
  const entered = deferred();
  const tx = db.transaction(async (t) => {
    // The body may start before its BEGIN has run (docs/api.md): a first request makes sure
    // the transaction holds the writer.
    await t.selectOne('SELECT 1');
    entered.resolve();
    await release.promise;
  });
  await entered.promise;
  const waiting = [db.execute('INSERT INTO t(x) VALUES (1)'), db.execute('INSERT INTO t(x) VALUES (2)')];
  const d = await db.diagnostics();
  assert.equal(d.inTransaction, true);
  assert.equal(d.queuedWrites, 2);
  release.resolve();
  await tx;
  await Promise.all(waiting);
  const after = await db.diagnostics();
  assert.equal(after.inTransaction, false);
  assert.equal(after.queuedWrites, 0);
});

test('pageCount, freelistCount and walBytes move with writes, deletes and checkpoints', async () => {
  const db = await tmp.open(undefined, { readers: 2 });
  const empty = await db.diagnostics();
  await fill(db, 2000);
  const filled = await db.diagnostics();
  assert.ok(filled.pageCount > empty.pageCount + 50, `${empty.pageCount} -> ${filled.pageCount}`);
  assert.ok(filled.walBytes > 0);
  await db.execute('DELETE FROM t');
  const deleted = await db.diagnostics();
  assert.ok(deleted.freelistCount > filled.freelistCount + 50, `${filled.freelistCount} -> ${deleted.freelistCount}`);
  const [[busy]] = (await db.execute('PRAGMA wal_checkpoint(TRUNCATE)', [], { rowMode: 'array' })).rows;
  assert.equal(busy, 0);
  assert.equal((await db.diagnostics()).walBytes, 0);
});

test('cacheBytes, statementBytes and schemaBytes move with what the reader holds', async () => {
  // One reader: the connection that measures is the one that ran the reads.
  const db = await tmp.open(undefined, { readers: 1 });
  await fill(db, 3000);
  const before = await db.diagnostics();
  await db.select('SELECT sum(length(s)) FROM t');
  for (let i = 0; i < 10; i++) await db.select(`SELECT x, s, ${i} AS k FROM t WHERE x = ?`, [i]);
  const read = await db.diagnostics();
  assert.ok(read.cacheBytes > before.cacheBytes, `cache ${before.cacheBytes} -> ${read.cacheBytes}`);
  assert.ok(read.statementBytes > before.statementBytes, `statements ${before.statementBytes} -> ${read.statementBytes}`);
  for (let i = 0; i < 20; i++) await db.execute(`CREATE TABLE extra${i}(a, b, c, d TEXT UNIQUE)`);
  await db.select('SELECT count(*) FROM extra0');
  const schema = await db.diagnostics();
  assert.ok(schema.schemaBytes > read.schemaBytes, `schema ${read.schemaBytes} -> ${schema.schemaBytes}`);
});

test('liveQueries counts groups, subscribers, re-runs and re-runs skipped by hash', async () => {
  const db = await tmp.open(undefined, { readers: 2 });
  await fill(db, 5);
  const zero = (await db.diagnostics()).liveQueries;
  assert.deepEqual(zero, { groups: 0, subscribers: 0, reruns: 0, skippedByHash: 0 });
  const live = db.stream('SELECT count(*) > 0 AS any FROM t', [], { maxDelayMs: 0 });
  const seen = [];
  const got = () => new Promise((resolve) => seen.push(resolve));
  const firstA = got();
  const a = live.subscribe((rows) => seen.shift()?.(rows));
  await firstA;
  let bFirst;
  const firstB = new Promise((resolve) => (bFirst = resolve));
  const b = db.stream('SELECT count(*) > 0 AS any FROM t', [], { maxDelayMs: 0 }).subscribe(() => bFirst());
  // Both first results delivered: no run is in flight, so the counts below are stable.
  await firstB;
  const one = (await db.diagnostics()).liveQueries;
  assert.equal(one.groups, 1);
  assert.equal(one.subscribers, 2);
  // A write that changes nothing the query returns: a re-run, skipped by hash.
  await db.execute('INSERT INTO t(x) VALUES (99)');
  let d = (await db.diagnostics()).liveQueries;
  for (let i = 0; i < 100 && (d.skippedByHash === one.skippedByHash || d.reruns === one.reruns); i++) {
    await new Promise((r) => setTimeout(r, 10));
    d = (await db.diagnostics()).liveQueries;
  }
  assert.ok(d.reruns > one.reruns, `reruns ${one.reruns} -> ${d.reruns}`);
  assert.ok(d.skippedByHash > one.skippedByHash, `skipped ${one.skippedByHash} -> ${d.skippedByHash}`);
  a();
  b();
  assert.equal((await db.diagnostics()).liveQueries.subscribers, 0);
});
