// db.begin(): an explicit transaction handle (what query builders' drivers need). It ends by
// commit(), rollback(), its signal, or the database closing: never by waiting on a promise
// nobody will settle.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Database, TransactionHandle } from '../../dist/index.mjs';
import { exitIfStuck, scratch, within } from '../fixtures/tx-helpers.mjs';

const tmp = scratch('adapters-begin');
exitIfStuck();

async function fresh() {
  const db = await tmp.open();
  await db.execute('CREATE TABLE t(v)');
  return db;
}
const vals = async (db) => (await db.select('SELECT v FROM t ORDER BY rowid')).map((r) => r.v);

test('commit keeps the writes; rollback drops them; reads in it see its writes', async () => {
  const db = await fresh();
  const tx = await db.begin();
  assert.ok(tx instanceof TransactionHandle);
  assert.equal(tx.active, true);
  await tx.execute('INSERT INTO t(v) VALUES (?)', [1]);
  assert.deepEqual((await tx.select('SELECT v FROM t')).map((r) => r.v), [1]);
  assert.deepEqual(await vals(db), [], 'the readers do not see an uncommitted write');
  await tx.commit();
  assert.equal(tx.active, false);
  assert.deepEqual(await vals(db), [1]);

  const tx2 = await db.begin({ mode: 'deferred' });
  await tx2.execute('INSERT INTO t(v) VALUES (2)');
  await tx2.rollback();
  await tx2.rollback(); // idempotent
  assert.deepEqual(await vals(db), [1]);
  await assert.rejects(tx2.execute('INSERT INTO t(v) VALUES (3)'), { code: 'ERR_QUIETSQLITE_TRANSACTION_ENDED' });
  await assert.rejects(tx2.commit(), { code: 'ERR_QUIETSQLITE_TRANSACTION_ENDED' });
  await assert.rejects(tx.rollback(), { code: 'ERR_QUIETSQLITE_TRANSACTION_ENDED' }, 'rollback after commit');
  await db.close();
});

test('writes on the database wait for the open transaction, then run', async () => {
  const db = await fresh();
  const tx = await db.begin();
  const outside = db.execute('INSERT INTO t(v) VALUES (2)');
  await tx.execute('INSERT INTO t(v) VALUES (1)');
  await tx.commit();
  await within(outside, 'the queued write');
  assert.deepEqual(await vals(db), [1, 2]);
  await db.close();
});

test('named savepoints: rollbackTo keeps the savepoint open, release keeps the work', async () => {
  const db = await fresh();
  const tx = await db.begin();
  await tx.execute('INSERT INTO t(v) VALUES (1)');
  await tx.savepoint('a');
  await tx.execute('INSERT INTO t(v) VALUES (2)');
  await tx.savepoint('b');
  await tx.execute('INSERT INTO t(v) VALUES (3)');
  await tx.rollbackTo('a'); // undoes 2 and 3, and b with them
  await assert.rejects(tx.release('b'), RangeError);
  await tx.execute('INSERT INTO t(v) VALUES (4)');
  await tx.rollbackTo('a'); // a is still open: undoes 4
  await tx.execute('INSERT INTO t(v) VALUES (5)');
  await tx.release('a');
  await assert.rejects(tx.rollbackTo('a'), RangeError);
  await assert.rejects(tx.savepoint(''), TypeError);
  await tx.commit();
  assert.deepEqual(await vals(db), [1, 5]);
  await db.close();
});

test('close() rolls back an open handle instead of waiting for it', async () => {
  const db = await fresh();
  const tx = await db.begin();
  await tx.execute('INSERT INTO t(v) VALUES (1)');
  await within(db.close(), 'close() with an open begin() transaction');
  assert.equal(tx.active, false);
  await assert.rejects(tx.commit(), { code: 'ERR_QUIETSQLITE_CLOSED' });
  const again = await Database.open(db.path);
  assert.deepEqual(await vals(again), []);
  await again.close();
});

test('close({ force: true }) rolls it back too', async () => {
  const db = await fresh();
  const tx = await db.begin();
  await tx.execute('INSERT INTO t(v) VALUES (1)');
  await within(db.close({ force: true }), 'forced close');
  await assert.rejects(tx.execute('SELECT 1'), { code: 'ERR_QUIETSQLITE_CLOSED' });
  const again = await Database.open(db.path);
  assert.deepEqual(await vals(again), []);
  await again.close();
});

test('aborting its signal rolls it back and frees the writer', async () => {
  const db = await fresh();
  const ac = new AbortController();
  const tx = await db.begin({ signal: ac.signal });
  await tx.execute('INSERT INTO t(v) VALUES (1)');
  ac.abort(new Error('stop'));
  await within(db.execute('INSERT INTO t(v) VALUES (2)'), 'a write after the abort');
  assert.deepEqual(await vals(db), [2]);
  await assert.rejects(tx.commit(), /stop/);
  await assert.rejects(db.begin({ signal: AbortSignal.abort() }), { name: 'AbortError' });
  await db.close();
});

test('begin() is refused inside a transaction body, after close, and with bad options', async () => {
  const db = await fresh();
  await db.transaction(async () => {
    await assert.rejects(db.begin(), RangeError);
  });
  await assert.rejects(db.begin({ mode: 'sometimes' }), TypeError);
  await assert.rejects(db.begin({ nope: 1 }), TypeError);
  await db.close();
  await assert.rejects(db.begin(), { code: 'ERR_QUIETSQLITE_CLOSED' });
});

test('a failing statement leaves the handle usable; SQLite ending the transaction is reported', async () => {
  const db = await fresh();
  await db.execute('CREATE TABLE u(k PRIMARY KEY ON CONFLICT ROLLBACK)');
  const tx = await db.begin();
  await tx.execute('INSERT INTO t(v) VALUES (1)');
  await assert.rejects(tx.execute('INSERT INTO nope VALUES (1)'), /no such table/);
  await tx.execute('INSERT INTO u(k) VALUES (1)');
  await assert.rejects(tx.execute('INSERT INTO u(k) VALUES (1)'), /UNIQUE/); // SQLite rolls back
  await assert.rejects(tx.execute('INSERT INTO t(v) VALUES (2)'), { code: 'SQLITE_ABORT_ROLLBACK' });
  await tx.rollback();
  assert.deepEqual(await vals(db), []);
  await within(db.execute('INSERT INTO t(v) VALUES (3)'), 'the writer after a rollback');
  await db.close();
});
