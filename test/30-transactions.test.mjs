// Interactive transactions, part 1: results and errors of a body, reads inside it, modes,
// option checking, batches, failing COMMIT, handles used after their body ended, nesting.
// Part 2 (31-) covers the write queue, reads outside, routing and signals; part 3 (32-)
// closing and crashes.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Database, SqliteError } from '../dist/index.mjs';
import { deferred, exitIfStuck, isPending, scratch, sleep, values, within } from './fixtures/tx-helpers.mjs';

const tmp = scratch('tx30');
exitIfStuck();

/** A database with table t(v) and nothing else. */
async function fresh() {
  const db = await tmp.open();
  await db.execute('CREATE TABLE t(v)');
  return db;
}

const ENDED = 'ERR_QUIETSQLITE_TRANSACTION_ENDED';

// ---- results and errors of the body ----

test('the body runs inside a transaction and its return value is returned', { timeout: 5000 }, async () => {
  const db = await fresh();
  let calls = 0;
  const result = await db.transaction(async (tx) => {
    calls++;
    await tx.execute('INSERT INTO t(v) VALUES (?)', [1]);
    await tx.executeBatch('INSERT INTO t(v) VALUES (?)', [[2], [3]]);
    const { n } = await tx.selectOne('SELECT count(*) AS n FROM t');
    return { n, tag: 'done' };
  });
  assert.equal(calls, 1);
  assert.deepEqual(result, { n: 3, tag: 'done' });
  // Committed: the readers see it.
  assert.deepEqual(await values(db), [1, 2, 3]);

  // A body that is a plain (non-async) function works too, and so does returning nothing.
  assert.equal(await db.transaction(() => 42), 42);
  assert.equal(await db.transaction(async () => {}), undefined);
  await db.close();
});

test('a body that throws rolls back and the caller gets the very same error', { timeout: 5000 }, async () => {
  const db = await fresh();
  await db.execute('INSERT INTO t(v) VALUES (0)');

  const boom = new Error('boom');
  const caught = await db
    .transaction(async (tx) => {
      await tx.execute('INSERT INTO t(v) VALUES (1)');
      await tx.execute('UPDATE t SET v = 100 WHERE v = 0');
      throw boom;
    })
    .catch((e) => e);
  assert.equal(caught, boom);
  assert.deepEqual(await values(db), [0]);

  // Not only Error objects: whatever is thrown comes back as is.
  const odd = { not: 'an error' };
  const caughtOdd = await db
    .transaction(async (tx) => {
      await tx.execute('INSERT INTO t(v) VALUES (2)');
      throw odd;
    })
    .catch((e) => e);
  assert.equal(caughtOdd, odd);

  // A synchronous throw from a plain function body is the same.
  const sync = new RangeError('sync');
  const caughtSync = await db
    .transaction(() => {
      throw sync;
    })
    .catch((e) => e);
  assert.equal(caughtSync, sync);

  // Nothing of any of them is visible, on the readers or on the writer.
  assert.deepEqual(await values(db), [0]);
  assert.deepEqual(
    await db.transaction((tx) => tx.select('SELECT v FROM t')),
    [{ v: 0 }],
  );
  await db.close();
});

test('reads inside the body run on the writer and see uncommitted writes', { timeout: 5000 }, async () => {
  const db = await fresh();
  await db.transaction(async (tx) => {
    await tx.execute("INSERT INTO t(v) VALUES ('a'), ('b')");
    assert.deepEqual(await tx.select('SELECT v FROM t ORDER BY rowid'), [{ v: 'a' }, { v: 'b' }]);
    assert.deepEqual(await tx.select('SELECT v FROM t ORDER BY rowid', [], { rowMode: 'array' }), [['a'], ['b']]);
    assert.deepEqual(await tx.selectOne('SELECT count(*) AS n FROM t WHERE v = ?', ['b']), { n: 1 });
    assert.equal(await tx.selectOne('SELECT v FROM t WHERE v = ?', ['zzz']), undefined);
    const bytes = await tx.selectBytes('SELECT v FROM t ORDER BY rowid');
    assert.ok(Buffer.isBuffer(bytes));
    assert.deepEqual(JSON.parse(bytes.toString('utf8')), [{ v: 'a' }, { v: 'b' }]);
    // RETURNING rows come back from execute inside a transaction too.
    const r = await tx.execute("INSERT INTO t(v) VALUES ('c') RETURNING v");
    assert.equal(r.changes, 1);
    assert.deepEqual(r.rows, [{ v: 'c' }]);
  });
  assert.deepEqual(await values(db), ['a', 'b', 'c']);
  await db.close();
});

// ---- modes and option checking ----

test("modes 'immediate', 'deferred' and 'exclusive' all work", { timeout: 5000 }, async () => {
  const db = await fresh();
  for (const mode of ['immediate', 'deferred', 'exclusive']) {
    const got = await db.transaction(
      async (tx) => {
        // Read first, then write: a deferred transaction upgrades its lock here.
        const before = await tx.selectOne('SELECT count(*) AS n FROM t');
        await tx.execute('INSERT INTO t(v) VALUES (?)', [mode]);
        return before.n;
      },
      { mode },
    );
    assert.equal(typeof got, 'number');
  }
  // A read-only deferred transaction commits too.
  assert.equal(await db.transaction((tx) => tx.selectOne('SELECT 7 AS x').then((r) => r.x), { mode: 'deferred' }), 7);
  // A failing body rolls back under every mode.
  for (const mode of ['deferred', 'exclusive']) {
    const err = new Error(mode);
    await assert.rejects(
      db.transaction(
        async (tx) => {
          await tx.execute("INSERT INTO t(v) VALUES ('lost')");
          throw err;
        },
        { mode },
      ),
      (e) => e === err,
    );
  }
  assert.deepEqual(await values(db), ['immediate', 'deferred', 'exclusive']);
  await db.close();
});

test('invalid mode, non-function body and unknown option keys reject with TypeError', { timeout: 5000 }, async () => {
  const db = await fresh();
  let called = 0;
  const body = async (tx) => {
    called++;
    await tx.execute('INSERT INTO t(v) VALUES (1)');
  };
  const bad = [
    () => db.transaction(body, { mode: 'IMMEDIATE' }),
    () => db.transaction(body, { mode: 'exclusive ' }),
    () => db.transaction(body, { mode: 1 }),
    () => db.transaction(body, { mode: '' }),
    () => db.transaction(body, { mod: 'deferred' }),
    () => db.transaction(body, { timeout: 100 }),
    () => db.transaction(body, { signal: {} }),
    () => db.transaction(),
    () => db.transaction(null),
    () => db.transaction('INSERT INTO t(v) VALUES (1)'),
    () => db.transaction({ body }),
  ];
  // Every misuse is checked, and all that misbehave are listed together.
  const wrong = [];
  for (const call of bad) {
    let outcome;
    try {
      outcome = await call().then(
        () => 'resolved',
        (e) => (e instanceof TypeError ? 'ok' : `rejected with ${e?.name}: ${e?.message}`),
      );
    } catch (e) {
      outcome = `threw synchronously: ${e?.name}: ${e?.message}`;
    }
    if (outcome !== 'ok') wrong.push(`${call.toString().slice(6)} -> ${outcome}`);
  }
  assert.deepEqual(wrong, [], 'each call must reject with a TypeError');
  assert.equal(called, 0);
  assert.deepEqual(await values(db), []);
  // None of them left anything behind in the write queue.
  await db.transaction(body);
  assert.deepEqual(await values(db), [1]);
  await db.close();
});

test("a mode named like an inherited property ('toString', '__proto__') is a TypeError too", { timeout: 5000 }, async () => {
  const db = await fresh();
  let called = 0;
  for (const mode of ['toString', 'constructor', '__proto__', 'hasOwnProperty']) {
    await assert.rejects(
      db.transaction(async () => {
        called++;
      }, { mode }),
      (e) => {
        assert.ok(e instanceof TypeError, `mode '${mode}': got ${e?.name}: ${e?.message}`);
        return true;
      },
    );
  }
  assert.equal(called, 0);
  await db.transaction((tx) => tx.execute('INSERT INTO t(v) VALUES (1)'));
  assert.deepEqual(await values(db), [1]);
  await db.close();
});

// ---- errors inside the body ----

test('a SqliteError from tx.execute can be caught by the body, which then commits', { timeout: 5000 }, async () => {
  const db = await tmp.open();
  await db.execute('CREATE TABLE u(v UNIQUE)');
  const result = await db.transaction(async (tx) => {
    await tx.execute('INSERT INTO u(v) VALUES (1)');
    const err = await tx.execute('INSERT INTO u(v) VALUES (1)').catch((e) => e);
    assert.ok(err instanceof SqliteError, `expected a SqliteError, got ${err}`);
    assert.ok(err instanceof Error);
    assert.equal(err.code, 'SQLITE_CONSTRAINT_UNIQUE');
    assert.equal(err.errno, 2067);
    assert.equal(err.name, 'SqliteError');
    // The failed statement undid only itself.
    assert.deepEqual(await tx.select('SELECT v FROM u'), [{ v: 1 }]);
    await tx.execute('INSERT INTO u(v) VALUES (2)');
    return 'committed';
  });
  assert.equal(result, 'committed');
  assert.deepEqual(await values(db, 'u'), [1, 2]);

  // Left uncaught, the same SqliteError object rejects the transaction, which rolls back.
  let inner;
  const outer = await db
    .transaction(async (tx) => {
      await tx.execute('INSERT INTO u(v) VALUES (3)');
      try {
        await tx.execute('INSERT INTO u(v) VALUES (1)');
      } catch (e) {
        inner = e;
        throw e;
      }
    })
    .catch((e) => e);
  assert.ok(inner instanceof SqliteError);
  assert.equal(outer, inner);
  assert.deepEqual(await values(db, 'u'), [1, 2]);
  await db.close();
});

test('executeBatch inside the body is all-or-nothing at its own level', { timeout: 5000 }, async () => {
  const db = await tmp.open();
  await db.execute('CREATE TABLE u(v UNIQUE)');
  await db.transaction(async (tx) => {
    await tx.execute('INSERT INTO u(v) VALUES (1)');
    assert.deepEqual(await tx.executeBatch('INSERT INTO u(v) VALUES (?)', [[2], [3]]), { changes: 2 });
    // The third set collides with the uncommitted row 1: the whole batch is undone.
    const err = await tx.executeBatch('INSERT INTO u(v) VALUES (?)', [[10], [11], [1], [12]]).catch((e) => e);
    assert.ok(err instanceof SqliteError, `expected a SqliteError, got ${err}`);
    assert.equal(err.code, 'SQLITE_CONSTRAINT_UNIQUE');
    // Earlier body writes are intact; nothing of the failed batch is there.
    assert.deepEqual(await tx.select('SELECT v FROM u ORDER BY v'), [{ v: 1 }, { v: 2 }, { v: 3 }]);
    // The body carries on: another batch and a plain write.
    await tx.executeBatch('INSERT INTO u(v) VALUES (?)', [[4], [5]]);
    await tx.execute('INSERT INTO u(v) VALUES (6)');
  });
  assert.deepEqual(await values(db, 'u'), [1, 2, 3, 4, 5, 6]);

  // A batch inside a savepoint: its failure leaves the savepoint's own earlier writes alone.
  await db.transaction(async (tx) => {
    await tx.transaction(async (sp) => {
      await sp.execute('INSERT INTO u(v) VALUES (7)');
      await assert.rejects(sp.executeBatch('INSERT INTO u(v) VALUES (?)', [[8], [7]]), SqliteError);
      assert.deepEqual(await sp.select('SELECT v FROM u WHERE v > 6'), [{ v: 7 }]);
    });
  });
  assert.deepEqual(await values(db, 'u'), [1, 2, 3, 4, 5, 6, 7]);
  await db.close();
});

// ---- failing COMMIT ----

test('a failing COMMIT rejects with a SqliteError, rolls back, and the next transaction starts clean', { timeout: 5000 }, async () => {
  const db = await tmp.open();
  await db.execute('CREATE TABLE parent(id INTEGER PRIMARY KEY)');
  await db.execute(
    'CREATE TABLE child(id INTEGER PRIMARY KEY, parent_id INTEGER REFERENCES parent(id) DEFERRABLE INITIALLY DEFERRED)',
  );
  await db.execute('CREATE TABLE t(v)');
  await db.execute('INSERT INTO parent(id) VALUES (1)');
  // foreign_keys is on by default.
  assert.deepEqual(await db.select('PRAGMA foreign_keys'), [{ foreign_keys: 1 }]);

  let bodyDone = false;
  const err = await db
    .transaction(async (tx) => {
      await tx.execute("INSERT INTO t(v) VALUES ('lost')");
      await tx.execute('INSERT INTO child(parent_id) VALUES (1)');
      // The orphan is accepted now (the check is deferred to COMMIT).
      await tx.execute('INSERT INTO child(parent_id) VALUES (999)');
      bodyDone = true;
      return 'never returned';
    })
    .catch((e) => e);
  assert.equal(bodyDone, true);
  assert.ok(err instanceof SqliteError, `expected a SqliteError, got ${err}`);
  assert.equal(err.code, 'SQLITE_CONSTRAINT_FOREIGNKEY');
  assert.equal(err.errno, 787);

  // Rolled back: none of the body's writes, on readers or on the writer.
  assert.deepEqual(await values(db), []);
  assert.deepEqual(await db.select('SELECT count(*) AS n FROM child'), [{ n: 0 }]);

  // The next transaction starts at depth 0, not inside the leftovers of the failed one.
  const got = await db.transaction(async (tx) => {
    assert.equal(tx.depth, 0);
    assert.deepEqual(await tx.select('SELECT count(*) AS n FROM child'), [{ n: 0 }]);
    await tx.execute("INSERT INTO t(v) VALUES ('kept')");
    await tx.transaction(async (sp) => {
      assert.equal(sp.depth, 1);
      await sp.execute('INSERT INTO child(parent_id) VALUES (1)');
    });
    return 'ok';
  });
  assert.equal(got, 'ok');
  assert.deepEqual(await values(db), ['kept']);
  assert.deepEqual(await db.select('SELECT parent_id FROM child'), [{ parent_id: 1 }]);
  // And plain writes outside transactions still work (the writer is not stuck in a transaction).
  await db.execute("INSERT INTO t(v) VALUES ('plain')");
  assert.deepEqual(await values(db), ['kept', 'plain']);
  await db.close();
});

// ---- a handle used after its body ended ----

/** Every method of `tx`, each called once with harmless arguments. */
function useAll(tx) {
  return [
    ['select', () => tx.select('SELECT v FROM t')],
    ['selectOne', () => tx.selectOne('SELECT v FROM t')],
    ['selectBytes', () => tx.selectBytes('SELECT v FROM t')],
    ['execute', () => tx.execute("INSERT INTO t(v) VALUES ('stale')")],
    ['executeBatch', () => tx.executeBatch('INSERT INTO t(v) VALUES (?)', [['stale']])],
    ['transaction', () => tx.transaction(async (sp) => sp.execute("INSERT INTO t(v) VALUES ('stale')"))],
  ];
}

async function assertEnded(tx) {
  assert.equal(tx.active, false);
  for (const [name, call] of useAll(tx)) {
    let promise;
    try {
      promise = call();
    } catch (e) {
      // Throwing synchronously is acceptable too; it must be the same clear error.
      promise = Promise.reject(e);
    }
    await assert.rejects(
      promise,
      (e) => e instanceof Error && e.code === ENDED && /ended/i.test(e.message),
      `tx.${name} after the body ended`,
    );
  }
}

test('a tx used after its body committed or rolled back rejects and never touches the database', { timeout: 5000 }, async () => {
  const db = await fresh();
  let committedTx;
  await db.transaction(async (tx) => {
    committedTx = tx;
    assert.equal(tx.active, true);
    await tx.execute("INSERT INTO t(v) VALUES ('a')");
  });
  await assertEnded(committedTx);

  let rolledBackTx;
  const err = new Error('rollback');
  await assert.rejects(
    db.transaction(async (tx) => {
      rolledBackTx = tx;
      throw err;
    }),
    (e) => e === err,
  );
  await assertEnded(rolledBackTx);
  assert.deepEqual(await values(db), ['a']);

  // A stale handle used while another transaction runs does not write into that one.
  await db.transaction(async (tx) => {
    await assertEnded(committedTx);
    await tx.execute("INSERT INTO t(v) VALUES ('b')");
    assert.deepEqual(await tx.select('SELECT v FROM t ORDER BY rowid'), [{ v: 'a' }, { v: 'b' }]);
  });
  assert.deepEqual(await values(db), ['a', 'b']);
  await db.close();
});

test('a savepoint handle used after its body ended rejects while the outer one goes on', { timeout: 5000 }, async () => {
  const db = await fresh();
  await db.transaction(async (tx) => {
    let released;
    await tx.transaction(async (sp) => {
      released = sp;
      await sp.execute("INSERT INTO t(v) VALUES ('inner')");
    });
    let undone;
    await tx
      .transaction(async (sp) => {
        undone = sp;
        throw new Error('undo');
      })
      .catch(() => {});
    await assertEnded(released);
    await assertEnded(undone);
    // The outer handle is unaffected.
    assert.equal(tx.active, true);
    await tx.execute("INSERT INTO t(v) VALUES ('outer')");
  });
  assert.deepEqual(await values(db), ['inner', 'outer']);
  await db.close();
});

// ---- nesting ----

test('an inner throw caught by the outer body undoes only the inner level', { timeout: 5000 }, async () => {
  const db = await fresh();
  const innerErr = new Error('inner');
  await db.transaction(async (tx) => {
    await tx.execute("INSERT INTO t(v) VALUES ('a')");
    const caught = await tx
      .transaction(async (sp) => {
        assert.equal(sp.depth, 1);
        await sp.execute("INSERT INTO t(v) VALUES ('b')");
        await sp.execute("UPDATE t SET v = 'A' WHERE v = 'a'");
        assert.deepEqual(await sp.select('SELECT v FROM t ORDER BY rowid'), [{ v: 'A' }, { v: 'b' }]);
        throw innerErr;
      })
      .catch((e) => e);
    assert.equal(caught, innerErr);
    assert.deepEqual(await tx.select('SELECT v FROM t ORDER BY rowid'), [{ v: 'a' }]);
    await tx.execute("INSERT INTO t(v) VALUES ('c')");
  });
  assert.deepEqual(await values(db), ['a', 'c']);
  await db.close();
});

test('an outer throw undoes a released inner level', { timeout: 5000 }, async () => {
  const db = await fresh();
  const outerErr = new Error('outer');
  const caught = await db
    .transaction(async (tx) => {
      await tx.execute("INSERT INTO t(v) VALUES ('a')");
      const inner = await tx.transaction(async (sp) => {
        await sp.execute("INSERT INTO t(v) VALUES ('b')");
        return 'released';
      });
      assert.equal(inner, 'released');
      assert.deepEqual(await tx.select('SELECT v FROM t ORDER BY rowid'), [{ v: 'a' }, { v: 'b' }]);
      throw outerErr;
    })
    .catch((e) => e);
  assert.equal(caught, outerErr);
  assert.deepEqual(await values(db), []);
  await db.close();
});

test('three levels that all succeed commit together, and only at the outer commit', { timeout: 5000 }, async () => {
  const db = await fresh();
  // A read from outside the body's async context (a chain started before the transaction):
  // it runs on a reader, so it must not see the released but uncommitted savepoints.
  const released = deferred();
  const outside = (async () => {
    await released.promise;
    return values(db);
  })();
  let seenOutside;
  const result = await db.transaction(async (t0) => {
    assert.equal(t0.depth, 0);
    await t0.execute('INSERT INTO t(v) VALUES (0)');
    const r1 = await t0.transaction(async (t1) => {
      assert.equal(t1.depth, 1);
      await t1.execute('INSERT INTO t(v) VALUES (1)');
      const r2 = await t1.transaction(async (t2) => {
        assert.equal(t2.depth, 2);
        await t2.execute('INSERT INTO t(v) VALUES (2)');
        // Each level sees everything written above it.
        return (await t2.select('SELECT v FROM t ORDER BY rowid')).map((r) => r.v);
      });
      return { r2 };
    });
    released.resolve();
    seenOutside = await outside;
    return r1;
  });
  assert.deepEqual(result, { r2: [0, 1, 2] });
  assert.deepEqual(seenOutside, []);
  assert.deepEqual(await values(db), [0, 1, 2]);
  await db.close();
});

test('nesting works to any depth; a throw deep down undoes only the levels below the catch', { timeout: 5000 }, async () => {
  const db = await fresh();
  const DEPTH = 12;
  const THROW_AT = 7; // this level throws after its inner levels were released
  const CATCH_AT = 5; // this level catches it
  const err = new Error(`thrown at depth ${THROW_AT}`);

  async function level(tx) {
    assert.equal(tx.depth, tx.depth | 0);
    await tx.execute('INSERT INTO t(v) VALUES (?)', [tx.depth]);
    if (tx.depth < DEPTH) {
      const below = tx.transaction(level);
      if (tx.depth === CATCH_AT) {
        assert.equal(await below.catch((e) => e), err);
      } else {
        await below;
      }
    }
    if (tx.depth === THROW_AT) throw err;
    const { n } = await tx.selectOne('SELECT count(*) AS n FROM t');
    return n;
  }

  const n = await db.transaction(level);
  // Depths 0..CATCH_AT survive; CATCH_AT+1..DEPTH were undone with the throwing level.
  const expected = Array.from({ length: CATCH_AT + 1 }, (_, i) => i);
  assert.equal(n, expected.length);
  assert.deepEqual(await values(db), expected);

  // The same depth, all succeeding.
  await db.execute('DELETE FROM t');
  async function ok(tx) {
    await tx.execute('INSERT INTO t(v) VALUES (?)', [tx.depth]);
    if (tx.depth < DEPTH) await tx.transaction(ok);
    return tx.depth;
  }
  assert.equal(await db.transaction(ok), 0);
  assert.deepEqual(await values(db), Array.from({ length: DEPTH + 1 }, (_, i) => i));
  await db.close();
});

test('sibling savepoints at one level are independent', { timeout: 5000 }, async () => {
  const db = await fresh();
  await db.transaction(async (tx) => {
    await tx.transaction((sp) => sp.execute("INSERT INTO t(v) VALUES ('first')"));
    await tx
      .transaction(async (sp) => {
        await sp.execute("INSERT INTO t(v) VALUES ('second')");
        throw new Error('undo second');
      })
      .catch(() => {});
    await tx.transaction((sp) => sp.execute("INSERT INTO t(v) VALUES ('third')"));
    // A non-function body for a savepoint is a TypeError, and the outer level goes on.
    await assert.rejects(tx.transaction(null), TypeError);
  });
  assert.deepEqual(await values(db), ['first', 'third']);
  await db.close();
});

test('calls on a closed database reject with ERR_QUIETSQLITE_CLOSED and never run the body', { timeout: 5000 }, async () => {
  const db = await fresh();
  await db.close();
  let called = false;
  await assert.rejects(
    db.transaction(async () => {
      called = true;
    }),
    (e) => e instanceof Error && e.code === 'ERR_QUIETSQLITE_CLOSED',
  );
  assert.equal(called, false);
  // The rows it never wrote: reopen and look.
  const again = await Database.open(db.path);
  assert.deepEqual(await values(again), []);
  await again.close();
});

test("tx.select refuses a statement that another connection's schema change made a write", async () => {
  // The writer last saw a schema without the trigger, where the text is a read-only no-op;
  // running it, SQLite would prepare it again against the new schema and drop the trigger.
  // tx.select reads the schema before it prepares such a text (query.rs), so the read-only
  // check sees the write.
  const file = tmp.file();
  const a = await Database.open(file);
  const b = await Database.open(file);
  try {
    await a.execute('CREATE TABLE t(x)');
    await b.execute('CREATE TRIGGER tr AFTER INSERT ON t BEGIN SELECT 1; END');
    const err = await a.transaction((tx) => tx.select('DROP TRIGGER IF EXISTS tr')).then(
      () => assert.fail('tx.select ran a write'),
      (e) => e,
    );
    assert.ok(err instanceof SqliteError, String(err));
    assert.equal(err.code, 'SQLITE_READONLY');
    assert.deepEqual(await b.select("SELECT name FROM sqlite_schema WHERE type = 'trigger'"), [{ name: 'tr' }]);
  } finally {
    await a.close();
    await b.close();
  }
});

test("a prepared statement's first call in a deferred transaction waits for another connection's write lock like its text does", async () => {
  // The first call of a statement also describes it; in a deferred transaction that has not
  // read yet, the description's schema read started the snapshot early, and the write that
  // followed failed with SQLITE_BUSY at once instead of waiting out the other transaction.
  const file = tmp.file();
  const a = await Database.open(file);
  const b = await Database.open(file);
  try {
    await a.execute('CREATE TABLE t(v)');
    const holding = deferred();
    const bHolds = deferred();
    const other = b.transaction(async (tx) => {
      await tx.execute('INSERT INTO t VALUES (1)');
      bHolds.resolve();
      await holding.promise;
    });
    await bHolds.promise;
    const insert = a.prepare('INSERT INTO t VALUES (?)');
    const mine = a.transaction(() => insert.execute([2]), { mode: 'deferred' });
    await sleep(100);
    holding.resolve();
    await other;
    await mine;
    assert.deepEqual(await values(a), [1, 2]);
  } finally {
    await a.close();
    await b.close();
  }
});

// ---- a transaction with nothing ahead of it starts its body before BEGIN has run ----

test('a lone transaction starts its body at once; its statements still run after the writes sent before it', { timeout: 10000 }, async () => {
  const db = await fresh();
  try {
    const order = [];
    // A write that keeps the writer busy for a while, sent before the transaction.
    const slow = db
      .execute('INSERT INTO t(v) SELECT max(x) FROM (WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 2000000) SELECT x FROM c)')
      .then(() => order.push('slow write done'));
    const done = db.transaction(async (tx) => {
      order.push('body');
      const { n } = await tx.selectOne('SELECT count(*) AS n FROM t');
      order.push(`body saw ${n}`);
    });
    await Promise.all([slow, done]);
    // The body did not wait for the write ahead of its BEGIN, and its read came after it.
    assert.deepEqual(order, ['body', 'slow write done', 'body saw 1']);
  } finally {
    await db.close();
  }
});

test('a BEGIN that fails (SQLITE_BUSY) fails every statement of the body and the transaction, and commits nothing', { timeout: 10000 }, async () => {
  const file = tmp.file();
  const a = await Database.open(file, { busyTimeout: 50 });
  const b = await Database.open(file);
  try {
    await a.execute('CREATE TABLE t(v)');
    const holding = deferred();
    const bHolds = deferred();
    const other = b.transaction(async (tx) => {
      await tx.execute('INSERT INTO t VALUES (1)');
      bHolds.resolve();
      await holding.promise;
    });
    await bHolds.promise;
    // A body that lets the error through rejects with it.
    const err1 = await a.transaction((tx) => tx.execute('INSERT INTO t VALUES (2)')).catch((e) => e);
    assert.ok(err1 instanceof SqliteError, String(err1));
    assert.equal(err1.code, 'SQLITE_BUSY');
    // A body that swallows its statements' errors: the transaction must still fail, and no
    // statement of it may run on its own, even once the lock is free (it would commit).
    const seen = [];
    const err2 = await a
      .transaction(async (tx) => {
        for (const v of [3, 4]) {
          try {
            await tx.execute('INSERT INTO t VALUES (?)', [v]);
            seen.push('ran');
          } catch (e) {
            seen.push(e.code);
          }
          if (!holding.done) {
            holding.done = true;
            holding.resolve();
            await other;
          }
        }
        return 'body ended';
      })
      .catch((e) => e);
    assert.ok(err2 instanceof SqliteError, String(err2));
    assert.equal(err2.code, 'SQLITE_BUSY');
    assert.ok(seen.every((s) => s === 'SQLITE_BUSY'), JSON.stringify(seen));
    holding.resolve();
    await other;
    assert.deepEqual(await values(a), [1]);
    // The writer is free again: the next transaction works.
    await a.transaction((tx) => tx.execute('INSERT INTO t VALUES (5)'));
    assert.deepEqual(await values(a), [1, 5]);
  } finally {
    await a.close();
    await b.close();
  }
});

test('a forced close while a lone transaction waits for its BEGIN settles the close and the transaction', { timeout: 20000 }, async () => {
  // Behind a long write.
  {
    const db = await fresh();
    const slow = db.execute(
      'INSERT INTO t(v) SELECT max(x) FROM (WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 50000000) SELECT x FROM c)',
    );
    slow.catch(() => {});
    const done = db.transaction((tx) => tx.execute('INSERT INTO t VALUES (1)'));
    done.catch(() => {});
    await sleep(50);
    await within(db.close({ force: true }), 'close({ force: true })', 5000);
    await assert.rejects(within(slow, 'the long write'), { code: 'ERR_QUIETSQLITE_CLOSED' });
    await assert.rejects(within(done, 'the transaction'), { code: 'ERR_QUIETSQLITE_CLOSED' });
  }
  // In the same turn as the transaction, nothing else queued.
  for (let round = 0; round < 20; round++) {
    const db = await fresh();
    const done = db.transaction((tx) => tx.execute('INSERT INTO t VALUES (1)'));
    done.catch(() => {});
    await within(db.close({ force: true }), `close({ force: true }), round ${round}`);
    await within(done.catch(() => {}), `the transaction, round ${round}`);
  }
});

test('a transaction whose BEGIN failed holds its turn until its body ends: later transactions and close() wait for it', { timeout: 10000 }, async () => {
  const file = tmp.file();
  const a = await Database.open(file, { busyTimeout: 50 });
  const b = await Database.open(file);
  try {
    await a.execute('CREATE TABLE t(v)');
    const held = await b.begin();
    await held.execute('INSERT INTO t VALUES (0)');
    const log = [];
    const gate = deferred();
    const first = a.transaction(async (tx) => {
      log.push('first started');
      await tx.execute('INSERT INTO t VALUES (1)').catch((e) => log.push(`first: ${e.code}`));
      await gate.promise;
      await tx.execute('INSERT INTO t VALUES (11)').catch((e) => log.push(`first again: ${e.code}`));
      log.push('first ended');
    });
    first.catch(() => {});
    // Its BEGIN waits busyTimeout (50 ms) for b's lock, then fails: wait for that, not a
    // fixed time, so a slow machine cannot commit b's transaction first.
    for (const until = Date.now() + 5000; !log.includes('first: SQLITE_BUSY') && Date.now() < until; ) await sleep(10);
    assert.deepEqual(log, ['first started', 'first: SQLITE_BUSY']);
    await held.commit();
    // The lock is free, but the first transaction is still running its body.
    const second = a.transaction(async (tx) => {
      log.push('second started');
      await tx.execute('INSERT INTO t VALUES (2)');
    });
    const closed = a.close();
    await sleep(100);
    assert.deepEqual(log, ['first started', 'first: SQLITE_BUSY']);
    assert.equal(await isPending(closed), true, 'close() did not wait for the running transaction');
    gate.resolve();
    await assert.rejects(within(first, 'the first transaction'), { code: 'SQLITE_BUSY' });
    await within(second, 'the second transaction');
    await within(closed, 'close()');
    assert.deepEqual(log, ['first started', 'first: SQLITE_BUSY', 'first again: SQLITE_BUSY', 'first ended', 'second started']);
    assert.deepEqual(await values(b), [0, 2]);
  } finally {
    await a.close();
    await b.close();
  }
});
