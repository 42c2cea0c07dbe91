// Consistency: batches are all-or-nothing, reads see resolved writes on every reader,
// and many concurrent mixed calls settle with correct results.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Database, SqliteError, openMemory, openTemp, rejectsAsync, assertSqliteError } from './fixtures/helpers.mjs';

test('executeBatch runs every parameter set and reports the total changes', async (t) => {
  const db = await openTemp(t);
  await db.execute('CREATE TABLE t(id INTEGER PRIMARY KEY, v)');
  const sets = Array.from({ length: 1000 }, (_, i) => [i + 1, `v${i}`]);
  assert.deepStrictEqual(await db.executeBatch('INSERT INTO t VALUES (?, ?)', sets), { changes: 1000 });
  assert.deepStrictEqual(await db.executeBatch('UPDATE t SET v = :v WHERE id <= :max', [{ v: 'x', max: 10 }]), {
    changes: 10,
  });
  assert.deepStrictEqual(await db.executeBatch('DELETE FROM t WHERE id = ?', []), { changes: 0 });
  assert.deepStrictEqual(await db.selectOne('SELECT count(*) AS n, sum(v = ?) AS x FROM t', ['x']), { n: 1000, x: 10 });
});

test('a constraint failure in the middle of executeBatch leaves no row of that batch', async (t) => {
  const db = await openTemp(t);
  await db.execute('CREATE TABLE u(x UNIQUE)');
  await db.execute('INSERT INTO u VALUES (0)');
  const sets = Array.from({ length: 100 }, (_, i) => [i + 1]);
  sets[50] = [7]; // duplicate of an earlier set of the same batch
  const err = await rejectsAsync(() => db.executeBatch('INSERT INTO u VALUES (?)', sets), SqliteError);
  assertSqliteError(err, 'SQLITE_CONSTRAINT_UNIQUE', 2067);
  assert.deepStrictEqual(await db.select('SELECT x FROM u'), [{ x: 0 }], 'only the row from before the batch');

  // A bad parameter late in the batch also rolls everything back.
  const bad = Array.from({ length: 10 }, (_, i) => [100 + i]);
  bad[9] = [{}];
  await rejectsAsync(() => db.executeBatch('INSERT INTO u VALUES (?)', bad), TypeError);
  const missing = Array.from({ length: 10 }, (_, i) => [200 + i]);
  missing[5] = [];
  await rejectsAsync(() => db.executeBatch('INSERT INTO u VALUES (?)', missing), RangeError);
  assert.deepStrictEqual(await db.select('SELECT x FROM u'), [{ x: 0 }]);

  // And the writer is usable afterwards (no transaction left open).
  assert.deepStrictEqual(await db.executeBatch('INSERT INTO u VALUES (?)', [[1], [2]]), { changes: 2 });
  assert.equal((await db.selectOne('SELECT count(*) AS n FROM u')).n, 3);
});

test('a failed execute with several rows (INSERT ... VALUES ..., RETURNING) writes nothing', async (t) => {
  const db = await openMemory(t);
  await db.execute('CREATE TABLE u(x UNIQUE)');
  await rejectsAsync(() => db.execute('INSERT INTO u VALUES (1), (2), (1) RETURNING x'), SqliteError);
  assert.deepStrictEqual(await db.select('SELECT * FROM u'), []);
});

for (const kind of ['file', ':memory:']) {
  test(`a select started after an execute resolved sees its write, on every reader (${kind})`, async (t) => {
    const db = kind === 'file' ? await openTemp(t, { readers: 4 }) : await openMemory(t, { readers: 4 });
    await db.execute('CREATE TABLE t(id INTEGER PRIMARY KEY, v INTEGER)');
    const stale = [];
    for (let i = 1; i <= 200; i++) {
      await db.execute('INSERT INTO t(v) VALUES (?)', [i]);
      // Several reads at once, so every reader takes part.
      const reads = await Promise.all([
        db.selectOne('SELECT count(*) AS n, max(v) AS m FROM t'),
        db.selectOne('SELECT count(*) AS n, max(v) AS m FROM t'),
        db.select('SELECT count(*) AS n, max(v) AS m FROM t').then((r) => r[0]),
        db.selectBytes('SELECT count(*) AS n, max(v) AS m FROM t').then((b) => JSON.parse(b)[0]),
      ]);
      for (const r of reads) if (r.n !== i || r.m !== i) stale.push({ i, r });
    }
    assert.deepStrictEqual(stale, [], 'no read may miss a write that resolved before it started');
    // executeBatch and updates too.
    await db.executeBatch('UPDATE t SET v = v * 2 WHERE id = ?', [[1], [2]]);
    for (let k = 0; k < 8; k++) assert.equal((await db.selectOne('SELECT sum(v) AS s FROM t')).s, 20100 + 3);
  });
}

test('a read sent after a write resolved sees it while its reader works through a backlog', async (t) => {
  // One reader, reads queued: the reader serves a backlog from one snapshot (experiment 050)
  // for up to 1 ms. A read sent after the write resolved must not join that snapshot.
  const db = await openTemp(t, { readers: 1 });
  await db.execute('CREATE TABLE t(x)');
  const small = 'WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 100) SELECT count(*) AS n FROM c';
  const stale = [];
  let overlapped = 0;
  for (let i = 1; i <= 200; i++) {
    let written = false;
    const backlog = Array.from({ length: 30 }, () => db.selectOne(small).then(() => written));
    await db.execute('INSERT INTO t VALUES (?)', [i]);
    written = true;
    const { n } = await db.selectOne('SELECT count(*) AS n FROM t');
    if (n !== i) stale.push({ i, n });
    if ((await Promise.all(backlog)).some(Boolean)) overlapped++;
  }
  assert.deepStrictEqual(stale, [], 'no read may miss a write that resolved before it was sent');
  assert.ok(overlapped > 0, 'in some rounds the backlog was still being served when the write resolved');
});

test('1,000 concurrent mixed reads and writes all settle with correct results', async (t) => {
  const db = await openTemp(t, { readers: 4 });
  await db.execute('CREATE TABLE acct(id INTEGER PRIMARY KEY, balance INTEGER NOT NULL)');
  await db.executeBatch(
    'INSERT INTO acct VALUES (?, 0)',
    Array.from({ length: 10 }, (_, i) => [i]),
  );
  await db.execute('CREATE TABLE log(n INTEGER)');

  const calls = [];
  let inserted = 0;
  let insertedSum = 0;
  let added = 0;
  for (let i = 0; i < 1000; i++) {
    switch (i % 5) {
      case 0:
        inserted++;
        insertedSum += i;
        calls.push(db.execute('INSERT INTO log VALUES (?) RETURNING n', [i]).then((r) => {
          assert.deepStrictEqual(r.rows, [{ n: i }]);
          assert.equal(r.changes, 1);
        }));
        break;
      case 1:
        added += 3;
        calls.push(db.execute('UPDATE acct SET balance = balance + ? WHERE id = ?', [3, i % 10]).then((r) => {
          assert.equal(r.changes, 1);
        }));
        break;
      case 2:
        // Rows that do not depend on the writes: exact answers.
        calls.push(db.select('SELECT ? AS i, ? * 2 AS twice', [i, i]).then((r) => {
          assert.deepStrictEqual(r, [{ i, twice: i * 2 }]);
        }));
        break;
      case 3:
        // Reads racing the writes: consistent snapshots (the balance total only grows in steps of 3).
        calls.push(db.selectOne('SELECT sum(balance) AS s, count(*) AS c FROM acct').then((r) => {
          assert.equal(r.c, 10);
          assert.equal(r.s % 3, 0);
          assert.ok(r.s >= 0 && r.s <= 600);
        }));
        break;
      case 4:
        calls.push(db.selectBytes('SELECT ? AS i', [`s${i}`]).then((b) => {
          assert.equal(b.toString(), `[{"i":"s${i}"}]`);
        }));
        break;
    }
  }
  const settled = await Promise.allSettled(calls);
  const failures = settled.filter((s) => s.status === 'rejected').map((s) => s.reason);
  assert.deepStrictEqual(failures, []);
  assert.deepStrictEqual(await db.selectOne('SELECT count(*) AS n, sum(n) AS s FROM log'), {
    n: inserted,
    s: insertedSum,
  });
  assert.deepStrictEqual(await db.selectOne('SELECT sum(balance) AS s FROM acct'), { s: added });
});

test('writes are applied in the order they were called', async (t) => {
  const db = await openMemory(t);
  await db.execute('CREATE TABLE seq(i INTEGER)');
  const calls = [];
  for (let i = 0; i < 200; i++) {
    calls.push(i % 2 ? db.execute('INSERT INTO seq VALUES (?)', [i]) : db.executeBatch('INSERT INTO seq VALUES (?)', [[i]]));
  }
  await Promise.all(calls);
  const rows = await db.select('SELECT i FROM seq ORDER BY rowid', [], { rowMode: 'array' });
  assert.deepStrictEqual(rows.flat(), Array.from({ length: 200 }, (_, i) => i));
});

test('two Database objects on one file see each other\'s writes and share the write lock', async (t) => {
  const a = await openTemp(t, { readers: 2 });
  const b = await Database.open(a.path, { readers: 2 });
  t.after(() => b.close());
  await a.execute('CREATE TABLE t(who TEXT, i INTEGER)');
  for (let i = 0; i < 50; i++) {
    await a.execute('INSERT INTO t VALUES (?, ?)', ['a', i]);
    assert.equal((await b.selectOne('SELECT count(*) AS n FROM t')).n, 2 * i + 1);
    await b.execute('INSERT INTO t VALUES (?, ?)', ['b', i]);
    assert.equal((await a.selectOne('SELECT count(*) AS n FROM t')).n, 2 * i + 2);
  }
  // Competing writers wait for each other (busy timeout) instead of failing.
  const writes = Array.from({ length: 200 }, (_, i) => (i % 2 ? a : b).execute('INSERT INTO t VALUES (?, ?)', ['c', i]));
  await Promise.all(writes);
  assert.deepStrictEqual(await b.selectOne('SELECT count(*) AS n, sum(who = ?) AS c FROM t', ['c']), { n: 300, c: 200 });
});
