// A panic in the Rust core becomes a rejected promise, never a crash.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { PANIC, openMemory, openTemp, rejectsAsync } from './fixtures/helpers.mjs';

const INTERNAL = 'ERR_QUIETSQLITE_INTERNAL';

function assertInternal(err) {
  assert.ok(err instanceof Error);
  assert.equal(err.code, INTERNAL);
  assert.match(err.message, /panic/);
}

test('a native panic rejects with ERR_QUIETSQLITE_INTERNAL and the database still works', async (t) => {
  const db = await openTemp(t, { readers: 2 });
  await db.execute('CREATE TABLE t(a)');
  assertInternal(await rejectsAsync(() => db[PANIC](), Error));
  assert.equal(db.isOpen, true);
  await db.execute('INSERT INTO t VALUES (1)');
  assert.deepStrictEqual(await db.select('SELECT a FROM t'), [{ a: 1 }]);
  assert.equal((await db.selectBytes('SELECT a FROM t')).toString(), '[{"a":1}]');
});

test('repeated panics (one per reader and more) leave every reader working', async (t) => {
  const db = await openMemory(t, { readers: 2 });
  for (let i = 0; i < 4; i++) assertInternal(await rejectsAsync(() => db[PANIC](), Error));
  const rows = await Promise.all(Array.from({ length: 20 }, (_, i) => db.selectOne('SELECT ? AS i', [i])));
  assert.deepStrictEqual(rows, Array.from({ length: 20 }, (_, i) => ({ i })));
});

test('a panic among concurrent queries affects only its own promise', async (t) => {
  const db = await openMemory(t, { readers: 2 });
  await db.execute('CREATE TABLE t(a)');
  const calls = [];
  let inserts = 0;
  for (let i = 0; i < 60; i++) {
    if (i % 20 === 10) calls.push(db[PANIC]().then(() => 'resolved', (e) => e.code));
    else if (i % 3 === 0 && ++inserts) calls.push(db.execute('INSERT INTO t VALUES (?)', [i]).then((r) => r.changes));
    else calls.push(db.selectOne('SELECT ? AS i', [i]).then((r) => r.i));
  }
  const results = await Promise.all(calls);
  results.forEach((r, i) => {
    if (i % 20 === 10) assert.equal(r, INTERNAL);
    else if (i % 3 === 0) assert.equal(r, 1);
    else assert.equal(r, i);
  });
  assert.equal((await db.selectOne('SELECT count(*) AS n FROM t')).n, inserts);
});

test('close after a panic works', async (t) => {
  const db = await openMemory(t);
  await rejectsAsync(() => db[PANIC](), { code: INTERNAL });
  await db.close();
  assert.equal(db.isOpen, false);
});
