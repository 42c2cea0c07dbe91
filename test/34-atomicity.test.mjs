// Transaction atomicity (issue 8, class 4): once transaction() rejects, nothing of it is
// committed, whatever the body or what it left running does. And reads do not change the
// connection that ran them (class 5).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { deferred, exitIfStuck, scratch, sleep, values, within } from './fixtures/tx-helpers.mjs';

const tmp = scratch('tx34');
exitIfStuck();

const ENDED = 'ERR_QUIETSQLITE_TRANSACTION_ENDED';

async function fresh() {
  const db = await tmp.open();
  await db.execute('CREATE TABLE t(v)');
  return db;
}

/** `fresh()` with a unique `v` and a row 'dup': inserting 'dup' again fails. */
async function freshWithDup() {
  const db = await fresh();
  await db.execute('CREATE UNIQUE INDEX t_v ON t(v)');
  await db.execute("INSERT INTO t(v) VALUES ('dup')");
  return db;
}

// ---- calls left behind by a body ----

test('a body that goes on after its signal aborted cannot commit through db', { timeout: 5000 }, async () => {
  const db = await fresh();
  const controller = new AbortController();
  const aborted = deferred();
  const late = deferred();
  const txp = db.transaction(
    async () => {
      await db.execute("INSERT INTO t(v) VALUES ('before')");
      await aborted.promise;
      // The transaction was rolled back; this code does not know it.
      for (const call of [
        () => db.execute("INSERT INTO t(v) VALUES ('after')"),
        () => db.executeBatch('INSERT INTO t(v) VALUES (?)', [['batch']]),
        () => db.select('SELECT 1'),
        () => db.selectOne('SELECT 1'),
        () => db.selectBytes('SELECT 1'),
        () => db.transaction(async () => db.execute("INSERT INTO t(v) VALUES ('nested')")),
      ]) {
        await call().then(
          () => late.reject(new Error('a call from the aborted body was served')),
          (err) => assert.equal(err.code, ENDED),
        );
      }
      late.resolve();
    },
    { signal: controller.signal },
  );
  await sleep(20);
  const reason = new Error('stop');
  controller.abort(reason);
  await assert.rejects(txp, (err) => err === reason);
  aborted.resolve();
  await within(late.promise, 'the late calls');
  assert.deepEqual(await values(db), []);
  await db.close();
});

test('callbacks a body left behind reject instead of escaping to autocommit', { timeout: 5000 }, async () => {
  const db = await fresh();
  for (const fail of [false, true]) {
    const go = deferred();
    let late;
    let nestedLate;
    await db
      .transaction(async (tx) => {
        await tx.execute('INSERT INTO t(v) VALUES (?)', [`body-${fail}`]);
        late = go.promise.then(() => db.execute('INSERT INTO t(v) VALUES (?)', [`late-${fail}`]));
        await tx.transaction(async () => {
          nestedLate = go.promise.then(() => db.execute('INSERT INTO t(v) VALUES (?)', [`nested-late-${fail}`]));
        });
        if (fail) throw new Error('rollback');
      })
      .catch(() => {});
    go.resolve();
    for (const p of [late, nestedLate]) {
      await assert.rejects(within(p, 'a late call'), (err) => err.code === ENDED);
    }
  }
  assert.deepEqual(await values(db), ['body-false']);
  await db.close();
});

test('a call left behind by a nested body rejects while its parent still runs', { timeout: 5000 }, async () => {
  const db = await fresh();
  await db.transaction(async (tx) => {
    let late;
    const go = deferred();
    await tx
      .transaction(async () => {
        await db.execute("INSERT INTO t(v) VALUES ('inner')");
        late = go.promise.then(() => db.execute("INSERT INTO t(v) VALUES ('inner-late')"));
        throw new Error('undo inner');
      })
      .catch(() => {});
    go.resolve();
    // It would otherwise land in the parent, which never asked for it.
    await assert.rejects(within(late, 'the late call'), (err) => err.code === ENDED);
    await tx.execute("INSERT INTO t(v) VALUES ('outer')");
  });
  assert.deepEqual(await values(db), ['outer']);
  await db.close();
});

test("a call left behind by a nested body on the parent's handle rejects too: nothing of the nested body commits", { timeout: 5000 }, async () => {
  const db = await fresh();
  // The error a call rejected with, or null: caught at once (they reject before they are looked at).
  const outcome = (p) => p.then(() => null, (err) => err);
  await db.transaction(async (tx) => {
    const go = deferred();
    const late = [];
    await tx
      .transaction(async (inner) => {
        await inner.execute("INSERT INTO t(v) VALUES ('inner')");
        // The parent's handle, from the nested body's own flow, after that body ended.
        late.push(outcome(go.promise.then(() => tx.execute("INSERT INTO t(v) VALUES ('inner-late')"))));
        late.push(outcome(go.promise.then(() => tx.transaction((t2) => t2.execute("INSERT INTO t(v) VALUES ('inner-late-nested')")))));
        throw new Error('undo inner');
      })
      .catch(() => {});
    // And a nested body ended by its signal while it runs, going on with the parent's handle.
    const ac = new AbortController();
    await assert.rejects(
      tx.transaction(
        async () => {
          ac.abort(new Error('stop inner'));
          await sleep(10);
          late.push(outcome(tx.execute("INSERT INTO t(v) VALUES ('aborted-inner-late')")));
        },
        { signal: ac.signal },
      ),
      /stop inner/,
    );
    go.resolve();
    await sleep(20);
    for (const p of late) assert.equal((await within(p, 'the late call'))?.code, ENDED);
    await tx.execute("INSERT INTO t(v) VALUES ('outer')");
  });
  assert.deepEqual(await values(db), ['outer']);
  await db.close();
});

test('a nested body still running when its parent ends cannot write, and its transaction() rejects', { timeout: 5000 }, async () => {
  // Before: the grandchild's handle stayed active after its parent rolled back, so its late
  // write ran straight in the outer transaction and committed, and its body's return sent a
  // RELEASE of "the savepoint at depth 2" (an internal error here: none was open).
  const db = await fresh();
  const go = deferred();
  let grandchild;
  let lateWrite;
  await db.transaction(async (tx) => {
    await tx.execute("INSERT INTO t(v) VALUES ('outer')");
    await tx
      .transaction(async (child) => {
        grandchild = child.transaction(async (gc) => {
          await gc.execute("INSERT INTO t(v) VALUES ('grandchild')");
          await go.promise;
          assert.equal(gc.active, false, 'a handle whose parent ended is not active');
          lateWrite = gc.execute("INSERT INTO t(v) VALUES ('grandchild-late')");
          await lateWrite.catch(() => {});
          return 'returned';
        });
        grandchild.catch(() => {});
        await sleep(5);
        throw new Error('the child fails');
      })
      .catch(() => {});
    go.resolve();
    await assert.rejects(within(grandchild, 'the grandchild'), (err) => err.code === ENDED);
    await assert.rejects(lateWrite, (err) => err.code === ENDED);
  });
  assert.deepEqual(await values(db), ['outer']);
  await db.close();
});

test("a nested body left running by a failed sibling cannot release a later sibling's savepoint", { timeout: 5000 }, async () => {
  // Savepoints are named by depth. The first child's grandchild outlives it and returns while
  // the second child's own nested body runs at the same depth; its RELEASE took that body's
  // savepoint, whose failure then undid nothing: its row was committed.
  const db = await fresh();
  const go = deferred();
  let orphan;
  await db.transaction(async (tx) => {
    await tx
      .transaction(async (first) => {
        orphan = first.transaction(() => go.promise);
        orphan.catch(() => {});
        await sleep(5);
        throw new Error('the first child fails');
      })
      .catch(() => {});
    await tx.transaction(async (second) => {
      await second
        .transaction(async (inner) => {
          await inner.execute("INSERT INTO t(v) VALUES ('must be undone')");
          go.resolve();
          await sleep(30);
          throw new Error('the inner body fails');
        })
        .catch(() => {});
      await second.execute("INSERT INTO t(v) VALUES ('second')");
    });
    await assert.rejects(within(orphan, 'the orphan'), (err) => err.code === ENDED);
  });
  assert.deepEqual(await values(db), ['second']);
  await db.close();
});

// ---- transaction control sent as SQL ----

const CONTROL = ['COMMIT', 'END', 'ROLLBACK', 'BEGIN', 'BEGIN IMMEDIATE', 'SAVEPOINT s', 'RELEASE s', 'ROLLBACK TO s'];

test('transaction control sent through any method inside a body is refused before it runs', { timeout: 20_000 }, async () => {
  const db = await fresh();
  const methods = {
    execute: (h, sql) => h.execute(sql),
    script: (h, sql) => h.execute(`INSERT INTO t(v) VALUES ('script'); ${sql}`),
    executeBatch: (h, sql) => h.executeBatch(sql, [[]]),
    select: (h, sql) => h.select(sql),
    selectOne: (h, sql) => h.selectOne(sql),
    selectBytes: (h, sql) => h.selectBytes(sql),
  };
  for (const sql of CONTROL) {
    for (const [name, call] of Object.entries(methods)) {
      for (const via of ['tx', 'db']) {
        const failure = new Error('the body fails');
        const txp = db.transaction(async (tx) => {
          await tx.execute("INSERT INTO t(v) VALUES ('x')");
          await assert.rejects(call(via === 'tx' ? tx : db, sql), (err) => {
            assert.equal(err.name, 'RangeError', `${sql} via ${via}.${name}: ${err.message}`);
            assert.match(err.message, /transaction control/);
            return true;
          });
          throw failure;
        });
        await assert.rejects(txp, (err) => err === failure);
        assert.deepEqual(await values(db), [], `${sql} via ${via}.${name} committed a rolled-back write`);
      }
    }
  }
  // The writer still works, with and without transactions.
  await db.transaction((tx) => tx.execute("INSERT INTO t(v) VALUES ('ok')"));
  assert.deepEqual(await values(db), ['ok']);
  await db.close();
});

test('transaction control is refused outside a body too, and nothing of such a script runs', { timeout: 5000 }, async () => {
  const db = await fresh();
  for (const sql of CONTROL) {
    await assert.rejects(db.execute(sql), RangeError, sql);
    await assert.rejects(db.executeBatch(sql, [[]]), RangeError, sql);
    await assert.rejects(db.select(sql), RangeError, sql);
  }
  await assert.rejects(db.execute("BEGIN; INSERT INTO t(v) VALUES ('a'); COMMIT"), RangeError);
  await assert.rejects(db.execute("SAVEPOINT a; INSERT INTO t(v) VALUES ('b'); RELEASE a"), RangeError);
  assert.deepEqual(await values(db), []);
  // A stream of it fails rather than running it on a reader.
  const live = db.stream('BEGIN');
  await assert.rejects(live[Symbol.asyncIterator]().next(), RangeError);
  // Triggers keep their BEGIN ... END bodies.
  await db.execute("CREATE TRIGGER tr AFTER INSERT ON t BEGIN SELECT 1; END");
  await db.execute("INSERT INTO t(v) VALUES ('c')");
  assert.deepEqual(await values(db), ['c']);
  await db.close();
});

// ---- nested bodies ----

test('nested bodies started together run one after another, each undone alone', { timeout: 5000 }, async () => {
  const db = await fresh();
  const order = [];
  await db.transaction(async (tx) => {
    const results = await Promise.allSettled([
      tx.transaction(async (a) => {
        order.push('a start');
        await a.execute("INSERT INTO t(v) VALUES ('a1')");
        await sleep(20);
        await a.execute("INSERT INTO t(v) VALUES ('a2')");
        order.push('a end');
        throw new Error('a fails');
      }),
      tx.transaction(async (b) => {
        order.push('b start');
        await b.execute("INSERT INTO t(v) VALUES ('b1')");
        await sleep(5);
        await b.execute("INSERT INTO t(v) VALUES ('b2')");
        order.push('b end');
      }),
      tx.transaction(async (c) => {
        order.push('c start');
        await c.execute("INSERT INTO t(v) VALUES ('c1')");
        order.push('c end');
        throw new Error('c fails');
      }),
    ]);
    assert.deepEqual(results.map((r) => r.status), ['rejected', 'fulfilled', 'rejected']);
  });
  assert.deepEqual(order, ['a start', 'a end', 'b start', 'b end', 'c start', 'c end']);
  assert.deepEqual(await values(db), ['b1', 'b2']);
  await db.close();
});

test("a parent's call made while a nested body runs waits for it and is not undone by it", { timeout: 5000 }, async () => {
  const db = await fresh();
  await db.transaction(async (tx) => {
    const inner = tx.transaction(async (i) => {
      await i.execute("INSERT INTO t(v) VALUES ('inner')");
      await sleep(20);
      // The parent's handle used from inside the nested body belongs to the nested body.
      await tx.execute("INSERT INTO t(v) VALUES ('inner via parent handle')");
      throw new Error('undo inner');
    });
    const parent = tx.execute("INSERT INTO t(v) VALUES ('parent')");
    await Promise.allSettled([inner, parent]);
    assert.equal((await parent).changes, 1);
  });
  assert.deepEqual(await values(db), ['parent']);
  await db.close();
});

test("a parent's call held for a nested body takes its parameters and options when it is made", { timeout: 10_000 }, async () => {
  // Held calls were converted only when sent: a Buffer or array reused after the call
  // stored the new bytes, a timeout ran from the send, and an aborted signal or a bad
  // params object was reported only when the nested body ended.
  const db = await tmp.open();
  await db.execute('CREATE TABLE t(b BLOB, s TEXT)');
  const outcomes = {};
  await db.transaction(async (tx) => {
    const gate = deferred();
    const nested = tx.transaction(() => gate.promise);
    const buf = Buffer.from('ORIGINAL');
    const positional = [buf, 'original'];
    const named = { b: Buffer.from('NAMED'), s: 'named' };
    const sets = [{ b: Buffer.from('SET1'), s: 'set1' }, { b: Buffer.from('SET2'), s: 'set2' }];
    const writes = [
      tx.execute('INSERT INTO t VALUES (?, ?)', positional),
      tx.execute('INSERT INTO t VALUES (:b, :s)', named),
      tx.executeBatch('INSERT INTO t VALUES (:b, :s)', sets),
      db.execute('INSERT INTO t VALUES (?, ?)', [new Uint8Array(Buffer.from('VIA DB')), 'via db']),
    ];
    buf.fill(0x58);
    positional[1] = 'changed';
    named.b.fill(0x59);
    named.s = 'changed';
    sets[0].b.fill(0x5a);
    sets[0].s = 'changed';
    sets[1] = { b: Buffer.from('OTHER'), s: 'other' };
    sets.push({ b: Buffer.from('MORE'), s: 'more' });
    const record = (name, p) =>
      p.then(
        () => (outcomes[name] = { ok: true }),
        (e) => (outcomes[name] = { error: e.name }),
      );
    const aborted = AbortSignal.abort(new Error('aborted before'));
    const later = new AbortController();
    const early = [
      record('aborted', tx.execute('INSERT INTO t VALUES (1, 1)', [], { signal: aborted })),
      record('badParams', tx.select('SELECT 1', new Map())),
      record('badOption', tx.selectOne('SELECT 1', [], { rowMode: 'rows' })),
      record('timeout', tx.select('SELECT 1', [], { timeoutMs: 30 })),
      record('abortLater', tx.execute('INSERT INTO t VALUES (2, 2)', [], { signal: later.signal })),
    ];
    setTimeout(() => later.abort(new RangeError('aborted while held')), 30);
    await Promise.all(early);
    gate.resolve();
    await nested;
    await Promise.all(writes);
  });
  assert.equal(outcomes.aborted.error, 'Error');
  assert.equal(outcomes.badParams.error, 'TypeError');
  assert.equal(outcomes.badOption.error, 'TypeError');
  assert.equal(outcomes.timeout.error, 'TimeoutError');
  assert.equal(outcomes.abortLater.error, 'RangeError');
  // (All of them settled while the nested body still ran: the body awaited them before
  // letting it end. Before, they waited for it, and the test never ended.)
  const stored = await db.select('SELECT CAST(b AS TEXT) AS b, s FROM t ORDER BY rowid');
  assert.deepEqual(stored, [
    { b: 'ORIGINAL', s: 'original' },
    { b: 'NAMED', s: 'named' },
    { b: 'SET1', s: 'set1' },
    { b: 'SET2', s: 'set2' },
    { b: 'VIA DB', s: 'via db' },
  ]);
  await db.close();
});

test("calls held for nested bodies are sent in the order they were made, each before the nested bodies started after it", { timeout: 10_000 }, async () => {
  // Each held call waited for the nested bodies on its own: one made while n1 ran and
  // before n2 started was sent after the calls made while n2 ran (the writer ran B, C, A).
  const db = await tmp.open();
  await db.execute('CREATE TABLE t(k INTEGER PRIMARY KEY AUTOINCREMENT, v)');
  let seenByN2;
  await db.transaction(async (tx) => {
    const n1 = tx.transaction(async () => sleep(30));
    await sleep(5);
    const a = tx.execute("INSERT INTO t(v) VALUES ('A')");
    const n2 = tx.transaction(async (n) => {
      seenByN2 = (await n.select('SELECT v FROM t ORDER BY k')).map((r) => r.v).join('');
      await sleep(10);
    });
    const b = tx.execute("INSERT INTO t(v) VALUES ('B')");
    const c = tx.execute("INSERT INTO t(v) VALUES ('C')");
    await Promise.all([n1, n2, a, b, c]);
  });
  assert.equal(seenByN2, 'A');
  assert.equal((await db.select('SELECT v FROM t ORDER BY k')).map((r) => r.v).join(''), 'ABC');
  // A call held with a bad SQL argument rejects at once, as it does unheld.
  const unheld = await db.select(5).catch((e) => e);
  await db.transaction(async (tx) => {
    const gate = deferred();
    const nested = tx.transaction(() => gate.promise);
    const held = await Promise.race([tx.select(5).catch((e) => e), sleep(50).then(() => 'waiting')]);
    assert.ok(held instanceof TypeError, String(held));
    assert.equal(held.message, unheld.message);
    gate.resolve();
    await nested;
  });
  await db.close();
});

test('when the outermost transaction ends, a nested one whose body never settles and the calls held for it settle too', { timeout: 10_000 }, async () => {
  // Aborted by its signal (or failing) while a nested body never settled, the transaction
  // rolled back, and the nested transaction() and a call held behind it stayed pending
  // forever: a forced close did not reach them either, as the transaction had ended.
  const db = await tmp.open();
  await db.execute('CREATE TABLE t(v)');
  for (const how of ['signal', 'throw']) {
    const controller = new AbortController();
    let nested;
    let held;
    const outer = db.transaction(
      async (tx) => {
        nested = tx.transaction(() => new Promise(() => {}));
        nested.catch(() => {});
        await sleep(5);
        held = tx.execute("INSERT INTO t VALUES ('held')");
        held.catch(() => {});
        if (how === 'throw') throw new Error('the body failed');
        await new Promise(() => {});
      },
      { signal: controller.signal },
    );
    setTimeout(() => controller.abort(new Error('stop')), 20);
    await assert.rejects(outer);
    await assert.rejects(within(nested, `${how}: the nested transaction()`), (e) => e.code === ENDED);
    await assert.rejects(within(held, `${how}: the held call`), (e) => e.code === ENDED);
  }
  assert.deepEqual(await values(db), []);
  await db.close();
});

test('a nested body and a call started as the wait for nested bodies ends join the transaction; none rolls it back', { timeout: 10_000 }, async () => {
  // Started a few microtasks after the last nested body ended, while the transaction was
  // still active but its end already decided: the nested one was refused, the call held
  // behind it failed as it was sent, and that failure rolled back everything (2 of every
  // 4 timings).
  for (let k = 0; k < 10; k++) {
    const db = await tmp.open();
    await db.execute('CREATE TABLE log(id INTEGER PRIMARY KEY AUTOINCREMENT, v TEXT)');
    let late;
    const outer = db.transaction((tx) => {
      tx.execute("INSERT INTO log(v) VALUES ('a')");
      const n0 = tx.transaction(async (n) => {
        await sleep(5);
        await n.execute("INSERT INTO log(v) VALUES ('n0')");
      });
      late = n0.then(async () => {
        for (let i = 0; i < k; i++) await null;
        const n3 = tx.transaction((n) => n.execute("INSERT INTO log(v) VALUES ('n3')"));
        const x = tx.execute("INSERT INTO log(v) VALUES ('X')");
        return Promise.allSettled([n3, x]);
      });
    });
    await outer;
    const settled = (await late).map((r) => (r.status === 'fulfilled' ? 'ok' : r.reason.code));
    const rows = (await db.select('SELECT v FROM log ORDER BY id')).map((r) => r.v).join(',');
    // Either both joined, or both came after the end and were refused.
    if (settled[0] === 'ok') assert.deepEqual([settled, rows], [['ok', 'ok'], 'a,n0,n3,X'], `k = ${k}`);
    else assert.deepEqual([settled, rows], [[ENDED, ENDED], 'a,n0'], `k = ${k}`);
    await db.close();
  }
});

test('nested bodies the body did not await finish before COMMIT', { timeout: 5000 }, async () => {
  const db = await fresh();
  let nested;
  const sent = [];
  await db.transaction(async (tx) => {
    // Fire and forget: requests and a nested body still in flight when the body returns.
    for (let i = 0; i < 5; i++) sent.push(tx.execute('INSERT INTO t(v) VALUES (?)', [i]));
    nested = tx.transaction(async (n) => {
      await sleep(20);
      await n.execute("INSERT INTO t(v) VALUES ('nested')");
    });
  });
  await within(nested, 'the nested body');
  for (const p of sent) assert.equal((await p).changes, 1);
  assert.deepEqual(await values(db), [0, 1, 2, 3, 4, 'nested']);
  await db.close();
});

// ---- SQLite ending the transaction itself ----

test('after SQLite rolled the transaction back itself, nothing more of it runs or commits', { timeout: 5000 }, async () => {
  const db = await tmp.open();
  await db.execute('CREATE TABLE t(v UNIQUE ON CONFLICT ROLLBACK)');
  let laterError;
  const txp = db.transaction(async (tx) => {
    await tx.execute("INSERT INTO t(v) VALUES ('a')");
    // ON CONFLICT ROLLBACK ends the whole transaction inside SQLite.
    await assert.rejects(tx.execute("INSERT INTO t(v) VALUES ('a')"), { code: 'SQLITE_CONSTRAINT_UNIQUE' });
    // Run now, this would be its own autocommit transaction.
    await tx.execute("INSERT INTO t(v) VALUES ('b')").catch((err) => (laterError = err));
  });
  await assert.rejects(txp, { code: 'SQLITE_ABORT_ROLLBACK' });
  assert.equal(laterError?.code, 'SQLITE_ABORT_ROLLBACK');
  assert.deepEqual(await values(db), []);
  // The next transaction starts clean.
  await db.transaction((tx) => tx.execute("INSERT INTO t(v) VALUES ('c')"));
  assert.deepEqual(await values(db), ['c']);
  await db.close();
});

test('a failing COMMIT commits nothing and leaves the database usable', { timeout: 5000 }, async () => {
  const db = await tmp.open();
  await db.execute('CREATE TABLE p(id INTEGER PRIMARY KEY)');
  await db.execute('CREATE TABLE t(v REFERENCES p(id) DEFERRABLE INITIALLY DEFERRED)');
  await assert.rejects(
    db.transaction(async (tx) => {
      await tx.execute('INSERT INTO t(v) VALUES (1)');
      await tx.execute('INSERT INTO p(id) VALUES (7)');
    }),
    { code: 'SQLITE_CONSTRAINT_FOREIGNKEY' },
  );
  assert.deepEqual(await db.select('SELECT * FROM p'), []);
  assert.deepEqual(await values(db), []);
  await db.execute('INSERT INTO p(id) VALUES (1)');
  assert.deepEqual(await db.select('SELECT id FROM p'), [{ id: 1 }]);
  await db.close();
});

test('a forced close during a body commits nothing of it', { timeout: 5000 }, async () => {
  const path = tmp.file();
  const db = await tmp.open(path);
  await db.execute('CREATE TABLE t(v)');
  const paused = deferred();
  const txp = db.transaction(async (tx) => {
    await tx.execute("INSERT INTO t(v) VALUES ('x')");
    paused.resolve();
    await sleep(50);
    await tx.execute("INSERT INTO t(v) VALUES ('y')").catch(() => {});
  });
  const outcome = assert.rejects(txp, { code: 'ERR_QUIETSQLITE_CLOSED' });
  await paused.promise;
  await db.close({ force: true });
  await outcome;
  const again = await tmp.open(path);
  assert.deepEqual(await values(again), []);
  await again.close();
});

// ---- reads do not change the connection (class 5) ----

test('select refuses statements that would change the reader running them', { timeout: 10_000 }, async () => {
  const db = await tmp.open(undefined, { readers: 2 });
  await db.execute('CREATE TABLE t(v)');
  for (const sql of [
    'PRAGMA foreign_keys = OFF',
    'PRAGMA cache_size = 7',
    'PRAGMA query_only = 1',
    'PRAGMA optimize',
    "ATTACH DATABASE ':memory:' AS other",
    'DETACH DATABASE other',
  ]) {
    for (const call of [(s) => db.select(s), (s) => db.selectOne(s), (s) => db.selectBytes(s)]) {
      await assert.rejects(call(sql), (err) => {
        assert.equal(err.name, 'RangeError', `${sql}: ${err.message}`);
        return true;
      });
    }
    // Inside a transaction, on the writer, too.
    await assert.rejects(
      db.transaction((tx) => tx.select(sql)),
      (err) => err.name === 'RangeError',
      `tx.select(${sql})`,
    );
  }
  // Even once execute() has prepared (and cached) the statement on the writer.
  await db.execute('PRAGMA cache_size = 7');
  await assert.rejects(db.transaction((tx) => tx.select('PRAGMA cache_size = 7')), RangeError);
  // Every reader (and the writer) kept its settings.
  const reads = await Promise.all(Array.from({ length: 8 }, () => db.selectOne('PRAGMA foreign_keys')));
  assert.deepEqual(reads, Array(8).fill({ foreign_keys: 1 }));
  const lists = await Promise.all(Array.from({ length: 8 }, () => db.select('PRAGMA database_list')));
  for (const l of lists) assert.deepEqual(l.map((r) => r.name), ['main']);
  assert.deepEqual((await db.execute('PRAGMA foreign_keys')).rows, [{ foreign_keys: 1 }]);
  // Queries that only look keep working.
  assert.deepEqual((await db.select('PRAGMA table_info(t)')).map((r) => r.name), ['v']);
  assert.deepEqual(await db.selectOne('PRAGMA user_version'), { user_version: 0 });
  assert.deepEqual(await db.select("SELECT name FROM pragma_table_info('t')"), [{ name: 'v' }]);
  assert.deepEqual(await db.transaction((tx) => tx.selectOne('PRAGMA integrity_check')), { integrity_check: 'ok' });
  // execute() still changes settings, on the writer.
  await db.execute('PRAGMA foreign_keys = OFF');
  assert.deepEqual((await db.execute('PRAGMA foreign_keys')).rows, [{ foreign_keys: 0 }]);
  await db.close();
});

test('an integrity check runs where it can see CHECK constraints: execute and transaction bodies, not the readers', { timeout: 10_000 }, async () => {
  // SQLite leaves out CHECK constraints on a read-only connection: a reader's check said
  // "ok" of a row that breaks one, where the writer's reports it.
  const path = tmp.file();
  const db = await tmp.open(path, { readers: 2 });
  await db.execute('CREATE TABLE c(a INTEGER CHECK (a > 0))');
  await db.execute('PRAGMA ignore_check_constraints = ON');
  await db.execute('INSERT INTO c VALUES (-1)');
  await db.execute('PRAGMA ignore_check_constraints = OFF');
  const broken = 'CHECK constraint failed in c';
  for (const sql of ['PRAGMA integrity_check', 'PRAGMA quick_check', 'PRAGMA main.integrity_check(c)', 'SELECT * FROM pragma_quick_check']) {
    assert.deepEqual(Object.values((await db.execute(sql)).rows[0]), [broken], sql);
    assert.deepEqual(Object.values(await db.transaction((tx) => tx.selectOne(sql))), [broken], sql);
    for (const call of [(s) => db.select(s), (s) => db.selectOne(s), (s) => db.selectBytes(s), (s) => db.prepare(s).select()]) {
      await assert.rejects(call(sql), (err) => err instanceof RangeError && /CHECK constraints/.test(err.message), sql);
    }
    await assert.rejects(db.stream(sql)[Symbol.asyncIterator]().next(), RangeError, sql);
  }
  // Describing one prepares it on a reader without running it: that is not refused.
  const stmt = db.prepare('PRAGMA integrity_check');
  assert.deepEqual((await stmt.columns()).map((c) => c.name), ['integrity_check']);
  assert.equal(stmt.readonly, true);
  assert.deepEqual((await stmt.execute()).rows, [{ integrity_check: broken }]);
  stmt.close();
  await db.close();
  // With readonly there is no writer to send it to: SQLite's own check runs (and leaves
  // CHECK constraints out, as docs/api.md says).
  const ro = await tmp.open(path, { readonly: true });
  assert.deepEqual(await ro.selectOne('PRAGMA quick_check'), { quick_check: 'ok' });
  await ro.close();
});

test('a live query cannot change the reader it runs on', { timeout: 5000 }, async () => {
  const db = await fresh();
  const live = db.stream('PRAGMA foreign_keys = OFF');
  await assert.rejects(live[Symbol.asyncIterator]().next(), RangeError);
  const reads = await Promise.all(Array.from({ length: 6 }, () => db.selectOne('PRAGMA foreign_keys')));
  assert.deepEqual(reads, Array(6).fill({ foreign_keys: 1 }));
  await db.close();
});

// ---- requests a body left in flight ----

test('a request the body left in flight that fails rolls the transaction back; transaction() rejects with its error', { timeout: 5000 }, async () => {
  const db = await freshWithDup();
  const left = [];
  const txp = db.transaction(async (tx) => {
    left.push(tx.execute("INSERT INTO t(v) VALUES ('a')"));
    left.push(tx.execute("INSERT INTO t(v) VALUES ('dup')"));
    left.push(tx.execute("INSERT INTO t(v) VALUES ('b')"));
    for (const p of left) p.catch(() => {});
    return 'done';
  });
  await assert.rejects(txp, (err) => err.code === 'SQLITE_CONSTRAINT_UNIQUE');
  // The request's own promise rejects with the same error.
  await assert.rejects(left[1], (err) => err.code === 'SQLITE_CONSTRAINT_UNIQUE');
  assert.deepEqual(await values(db), ['dup']);
  // A failure the body saw and handled does not: it decided to go on.
  assert.equal(
    await db.transaction(async (tx) => {
      await tx.execute("INSERT INTO t(v) VALUES ('dup')").catch(() => {});
      await tx.execute("INSERT INTO t(v) VALUES ('c')");
      return 'committed';
    }),
    'committed',
  );
  assert.deepEqual((await values(db)).sort(), ['c', 'dup']);
  await db.close();
});

test('a body that fires writes and returns at once is all or nothing, however many promises wrap its return', { timeout: 20_000 }, async () => {
  // A body's end is seen when its promise settles, some microtasks after the code that sent
  // the writes returned. A failure taken by polling, also a few microtasks after its send,
  // came first in about half the rounds, counted as one the body had handled, and the other
  // write committed (Drizzle's transaction() wraps the body this way).
  const db = await freshWithDup();
  const work = async (tx) => {
    tx.execute("INSERT INTO t(v) VALUES ('a')").catch(() => {});
    tx.execute("INSERT INTO t(v) VALUES ('dup')").catch(() => {});
    return 'ok';
  };
  const bodies = {
    direct: work,
    wrapped: async (tx) => work(tx),
    'wrapped twice': async (tx) => (async () => work(tx))(),
    'after an await': async (tx) => {
      await null;
      return work(tx);
    },
  };
  const committed = {};
  for (const [name, body] of Object.entries(bodies)) {
    committed[name] = 0;
    for (let i = 0; i < 40; i++) {
      await assert.rejects(db.transaction(body), (err) => err.code === 'SQLITE_CONSTRAINT_UNIQUE');
      if ((await db.select("SELECT 1 FROM t WHERE v = 'a'")).length > 0) committed[name]++;
      await db.execute("DELETE FROM t WHERE v = 'a'");
    }
  }
  assert.deepEqual(committed, { direct: 0, wrapped: 0, 'wrapped twice': 0, 'after an await': 0 });
  await db.close();
});

test('a request the body left queued, whose signal aborts within microtasks of its return, rolls the transaction back', { timeout: 30_000 }, async () => {
  // An abort drops a queued request at once. Its failure came a microtask or two after the
  // body returned, before the transaction had seen the body's end: it counted as one the body
  // had handled, and the writes around it committed without it (a transfer half done).
  const db = await fresh();
  await db.execute('CREATE TABLE acct(id INTEGER PRIMARY KEY, bal INTEGER NOT NULL)');
  const slow = 'INSERT INTO t(v) WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 20000) SELECT x FROM c';
  const transfer = (tx, signal, later) => {
    tx.execute(slow).catch(() => {}); // keeps the next write queued
    tx.execute('UPDATE acct SET bal = bal - 10 WHERE id = 1', [], { signal }).catch(() => {});
    tx.execute('UPDATE acct SET bal = bal + 10 WHERE id = 2').catch(() => {});
    later();
    return 'done';
  };
  const abortAfter = (controller, microtasks) => () => {
    const step = (n) => (n === 0 ? controller.abort(new Error('cancel the transfer')) : queueMicrotask(() => step(n - 1)));
    queueMicrotask(() => step(microtasks));
  };
  const outcomes = {};
  for (const shape of ['async body', 'plain body', 'nested body']) {
    for (const microtasks of [0, 1, 2]) {
      for (let i = 0; i < 5; i++) {
        await db.execute('DELETE FROM acct');
        await db.execute('INSERT INTO acct VALUES (1, 100), (2, 100)');
        const controller = new AbortController();
        const later = abortAfter(controller, microtasks);
        const run =
          shape === 'async body'
            ? db.transaction(async (tx) => transfer(tx, controller.signal, later))
            : shape === 'plain body'
              ? db.transaction((tx) => transfer(tx, controller.signal, later))
              : db.transaction(async (tx) => tx.transaction(async (inner) => transfer(inner, controller.signal, later)));
        const outcome = await run.then(() => 'resolved', (err) => err.message);
        const [{ sum, moved }] = await db.select('SELECT sum(bal) AS sum, max(bal) > 100 AS moved FROM acct');
        const key = `${shape}, ${microtasks}: ${outcome}, ${sum === 200 && moved === 0 ? 'nothing moved' : `sum ${sum}`}`;
        outcomes[key] = (outcomes[key] ?? 0) + 1;
      }
    }
  }
  const expected = {};
  for (const shape of ['async body', 'plain body', 'nested body']) for (const m of [0, 1, 2]) expected[`${shape}, ${m}: cancel the transfer, nothing moved`] = 5;
  assert.deepEqual(outcomes, expected);
  await db.close();
});

test('a request the caller cancelled and awaited before the end leaves the rest to commit; one not yet rejected rolls back', { timeout: 20_000 }, async () => {
  // docs/api.md: a cancelled request counts as in flight until its promise has rejected
  // (the next turn, in a transaction): await it first to commit without it.
  const db = await fresh();
  const slow = 'INSERT INTO t(v) WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 20000) SELECT -x FROM c';
  const run = async (awaitIt, useHandle) => {
    await db.execute('DELETE FROM t');
    const controller = new AbortController();
    const work = async (q) => {
      q.execute(slow).catch(() => {}); // keeps the next write queued
      const dropped = q.execute("INSERT INTO t(v) VALUES ('dropped')", [], { signal: controller.signal });
      dropped.catch(() => {});
      q.execute("INSERT INTO t(v) VALUES ('kept')").catch(() => {});
      controller.abort(new Error('not this one'));
      if (awaitIt) await dropped.catch(() => {});
    };
    let outcome;
    if (useHandle) {
      const h = await db.begin();
      await work(h);
      outcome = await h.commit().then(() => 'committed', (err) => err.message);
    } else {
      outcome = await db.transaction(work).then(() => 'committed', (err) => err.message);
    }
    const rows = await db.select("SELECT v FROM t WHERE typeof(v) = 'text' ORDER BY v");
    return `${outcome}: ${rows.map((r) => r.v).join(',') || 'none'}`;
  };
  const seen = {};
  for (const useHandle of [false, true]) {
    for (const awaitIt of [true, false]) {
      const key = `${useHandle ? 'handle' : 'body'}, ${awaitIt ? 'awaited' : 'not awaited'}: ${await run(awaitIt, useHandle)}`;
      seen[key] = (seen[key] ?? 0) + 1;
    }
  }
  assert.deepEqual(seen, {
    'body, awaited: committed: kept': 1,
    'body, not awaited: not this one: none': 1,
    'handle, awaited: committed: kept': 1,
    'handle, not awaited: not this one: none': 1,
  });
  await db.close();
});

test("a transaction's read aborted while its result waits behind a failure rejects with the abort reason", { timeout: 20_000 }, async () => {
  // A failure taken by a poll holds the results after it for a later turn. An abort that came
  // meanwhile was held behind the read's own result, which then settled it: the read
  // resolved although its signal had aborted.
  const db = await fresh();
  const reason = new Error('stop the read');
  const outcomes = {};
  for (const microtasks of [5, 20, 80]) {
    for (let i = 0; i < 10; i++) {
      const out = await db.transaction(async (tx) => {
        const controller = new AbortController();
        const failed = tx.execute('INSERT INTO nosuch VALUES (1)').then(() => 'ok', () => 'failed');
        const read = tx.select('SELECT 1 AS one', [], { signal: controller.signal }).then(() => 'read resolved', (err) => (err === reason ? 'read rejected' : err.message));
        await new Promise((resolve) => {
          const step = (n) => (n === 0 ? (controller.abort(reason), resolve()) : queueMicrotask(() => step(n - 1)));
          step(microtasks);
        });
        return `${await failed}, ${await read}`;
      });
      outcomes[out] = (outcomes[out] ?? 0) + 1;
    }
  }
  assert.deepEqual(outcomes, { 'failed, read rejected': 30 });
  await db.close();
});

test("a transaction's requests settle in the order they ran, so a failure the body handled before it returned commits", { timeout: 20_000 }, async () => {
  // The writer runs a transaction's requests in order. A failure held for a later turn (the
  // test above) let a later request's result overtake it: the body saw its count, returned,
  // and the failure it had a handler for counted as one it never saw.
  const db = await freshWithDup();
  const outcomes = {};
  const orders = {};
  for (let i = 0; i < 30; i++) {
    const seen = [];
    const outcome = await db
      .transaction(async (tx) => {
        for (const v of ['a', 'dup', 'c']) tx.execute('INSERT INTO t(v) VALUES (?)', [v]).then(() => seen.push(v), () => seen.push(`${v} failed`));
        const { n } = await tx.selectOne('SELECT count(*) AS n FROM t');
        seen.push('count');
        return n;
      })
      .then((n) => `committed ${n}`, (err) => `rejected ${err.code}`);
    outcomes[outcome] = (outcomes[outcome] ?? 0) + 1;
    orders[seen.join(', ')] = (orders[seen.join(', ')] ?? 0) + 1;
    await db.execute("DELETE FROM t WHERE v <> 'dup'");
  }
  assert.deepEqual(outcomes, { 'committed 3': 30 });
  assert.deepEqual(orders, { 'a, dup failed, c, count': 30 });
  // The same with a begin() handle: a failure handled before commit() was called.
  const handled = {};
  for (let i = 0; i < 30; i++) {
    const h = await db.begin();
    h.execute("INSERT INTO t(v) VALUES ('dup')").catch(() => {});
    await h.execute("INSERT INTO t(v) VALUES ('c')");
    const r = await h.commit().then(() => 'committed', (err) => `rejected ${err.code}`);
    handled[r] = (handled[r] ?? 0) + 1;
    await db.execute("DELETE FROM t WHERE v <> 'dup'");
  }
  assert.deepEqual(handled, { committed: 30 });
  await db.close();
});

test('transaction() called with the stack nearly used up fails without keeping the writer', { timeout: 60_000 }, async () => {
  // BEGIN went to the writer before the code that ends the transaction was in place: a
  // RangeError (stack exhausted) thrown in between left the writer held for good, and every
  // later write, and close({ force: true }), waited forever.
  const db = await fresh();
  const withStackLeft = (margin, fn) => {
    let out;
    const down = () => {
      let up;
      try {
        up = down();
      } catch {
        up = 0;
      }
      if (up === margin) {
        try {
          out = fn();
        } catch (err) {
          out = Promise.reject(err);
        }
      }
      return up + 1;
    };
    down();
    return out;
  };
  const outcomes = new Set();
  for (let margin = 0; margin < 1200; margin += 3) {
    const p = withStackLeft(margin, () => db.transaction(async (tx) => tx.execute('INSERT INTO t(v) VALUES (1)')));
    outcomes.add(await within(p.then(() => 'committed', (err) => err.name), `transaction() at margin ${margin}`));
    await within(db.execute('INSERT INTO t(v) VALUES (2)'), `a write after transaction() at margin ${margin}`);
  }
  // Deep enough to fail and shallow enough to run: the probe crossed the window.
  assert.ok(outcomes.has('RangeError') && outcomes.has('committed'), [...outcomes].join(', '));
  await db.close();
});

test('a signal that aborts after the body returned, while its requests are queued, commits nothing', { timeout: 10_000 }, async () => {
  for (let round = 0; round < 3; round++) {
    const db = await fresh();
    const controller = new AbortController();
    const reason = new Error('stop');
    let bodyEnded = false;
    let abortedAfterBody;
    const n = 400;
    const txp = db.transaction(
      async (tx) => {
        for (let i = 0; i < n; i++) {
          const p = tx.execute('INSERT INTO t(v) VALUES (length(randomblob(?)))', [100_000]);
          p.catch(() => {});
          if (i === 0) {
            p.then(() => {
              abortedAfterBody = bodyEnded;
              controller.abort(reason);
            });
          }
        }
        bodyEnded = true;
      },
      { signal: controller.signal },
    );
    const outcome = await txp.then(() => 'committed', (err) => err);
    assert.equal(abortedAfterBody, true);
    const rows = (await values(db)).length;
    // All or nothing: a transaction() that resolved committed every row.
    if (outcome === 'committed') assert.equal(rows, n);
    else {
      assert.equal(outcome, reason);
      assert.equal(rows, 0);
    }
    await db.close();
  }
});

test('a nested body whose left request fails undoes its savepoint only', { timeout: 5000 }, async () => {
  const db = await freshWithDup();
  await db.transaction(async (tx) => {
    await tx.execute("INSERT INTO t(v) VALUES ('outer')");
    await assert.rejects(
      tx.transaction(async (inner) => {
        inner.execute("INSERT INTO t(v) VALUES ('inner')").catch(() => {});
        inner.execute("INSERT INTO t(v) VALUES ('dup')").catch(() => {});
      }),
      (err) => err.code === 'SQLITE_CONSTRAINT_UNIQUE',
    );
  });
  assert.deepEqual((await values(db)).sort(), ['dup', 'outer']);
  await db.close();
});

test('a begin() handle: a request left in flight at commit() that fails rolls back; rollback() after a failed commit() resolves', { timeout: 5000 }, async () => {
  const db = await freshWithDup();
  let h = await db.begin();
  h.execute("INSERT INTO t(v) VALUES ('a')").catch(() => {});
  h.execute("INSERT INTO t(v) VALUES ('dup')").catch(() => {});
  await assert.rejects(h.commit(), (err) => err.code === 'SQLITE_CONSTRAINT_UNIQUE');
  await h.rollback();
  assert.deepEqual(await values(db), ['dup']);
  // The documented pattern around a COMMIT that fails (a deferred foreign key).
  await db.execute('CREATE TABLE p(id INTEGER PRIMARY KEY)');
  await db.execute('CREATE TABLE c(p REFERENCES p(id) DEFERRABLE INITIALLY DEFERRED)');
  h = await db.begin();
  const failure = await (async () => {
    try {
      await h.execute('INSERT INTO c VALUES (7)');
      await h.commit();
    } catch (err) {
      await h.rollback();
      return err;
    }
  })();
  assert.equal(failure?.code, 'SQLITE_CONSTRAINT_FOREIGNKEY');
  assert.deepEqual(await db.select('SELECT * FROM c'), []);
  await db.close();
});

test("a begin() handle's rollbackTo() keeps its savepoint for calls sent right after it", { timeout: 5000 }, async () => {
  const db = await fresh();
  const h = await db.begin();
  await h.savepoint('a');
  await h.execute("INSERT INTO t(v) VALUES ('x')");
  const rolledBack = h.rollbackTo('a');
  const inserted = h.execute("INSERT INTO t(v) VALUES ('y')");
  await Promise.all([rolledBack, inserted]);
  await h.rollbackTo('a');
  await h.commit();
  assert.deepEqual(await values(db), []);
  await db.close();
});

test('db.begin() from code an ended body left behind is refused', { timeout: 5000 }, async () => {
  const db = await fresh();
  const late = deferred();
  await assert.rejects(
    db.transaction(async (tx) => {
      await tx.execute("INSERT INTO t(v) VALUES ('body')");
      setTimeout(() => db.begin().then(
        (h) => h.execute("INSERT INTO t(v) VALUES ('late')").then(() => h.commit()).then(() => late.reject(new Error('begin() was served'))),
        (err) => (err.code === ENDED ? late.resolve() : late.reject(err)),
      ), 10);
      throw new Error('body failed');
    }),
    /body failed/,
  );
  await within(late.promise, 'the late begin()');
  assert.deepEqual(await values(db), []);
  await db.close();
});

test('a plain function body that returns a thenable runs its then() inside the transaction', { timeout: 5000 }, async () => {
  const db = await fresh();
  const result = await within(
    db.transaction(() => ({
      then(resolve, reject) {
        db.execute("INSERT INTO t(v) VALUES ('thenable')").then(() => resolve('done'), reject);
      },
    })),
    'the transaction',
  );
  assert.equal(result, 'done');
  assert.deepEqual(await values(db), ['thenable']);
  await db.close();
});

test("calls on the outer tx from inside a nested body are the nested body's: one left in flight that fails undoes its savepoint", { timeout: 5000 }, async () => {
  const db = await freshWithDup();
  await db.transaction(async (tx) => {
    await tx.execute("INSERT INTO t(v) VALUES ('outer')");
    await assert.rejects(
      tx.transaction(async () => {
        // The outer handle, closed over: the usual way to write it.
        for (const v of ['a', 'dup', 'b']) tx.execute('INSERT INTO t(v) VALUES (?)', [v]).catch(() => {});
      }),
      (err) => err.code === 'SQLITE_CONSTRAINT_UNIQUE',
    );
  });
  assert.deepEqual((await values(db)).sort(), ['dup', 'outer']);
  await db.close();
});

test('a call that waits for a nested body and cannot be sent after the body returned rolls the transaction back', { timeout: 5000 }, async () => {
  const db = await fresh();
  await assert.rejects(
    db.transaction(async (tx) => {
      await tx.execute("INSERT INTO t(v) VALUES ('x')");
      void tx.transaction(() => sleep(20));
      // Waits for the nested body (it would land in its savepoint), then fails to send.
      tx.execute('INSERT INTO t(v) VALUES (?)', [Symbol('not a value')]).catch(() => {});
    }),
    TypeError,
  );
  assert.deepEqual(await values(db), []);
  await db.close();
});

test('a call made between two nested bodies the body did not await is sent before the COMMIT', { timeout: 5000 }, async () => {
  // The COMMIT path ended the transaction before the call (waiting for the first nested
  // body, then the second) was sent: it was dropped, later it rolled the transaction back.
  const db = await fresh();
  let call;
  await db.transaction((tx) => {
    void tx.transaction(async (n) => n.execute("INSERT INTO t(v) VALUES ('a')"));
    call = tx.execute("INSERT INTO t(v) VALUES ('outer')");
    void tx.transaction(async (n) => n.execute("INSERT INTO t(v) VALUES ('b')"));
  });
  assert.equal((await call).changes, 1);
  assert.deepEqual((await values(db)).sort(), ['a', 'b', 'outer']);
  await db.close();
});

test("a call on the outer tx from a nested body waits for that body's own nested body, as the body's calls do", { timeout: 5000 }, async () => {
  const db = await fresh();
  for (const via of ['n', 'db', 'tx']) {
    await db.execute('DELETE FROM t');
    await db.transaction(async (tx) => {
      await tx.transaction(async (n) => {
        const failing = n.transaction(async (c) => {
          await c.execute("INSERT INTO t(v) VALUES ('in c')");
          await sleep(30);
          throw new Error('c fails');
        }).catch(() => {});
        await sleep(10);
        const target = via === 'n' ? n : via === 'db' ? db : tx;
        await target.execute('INSERT INTO t(v) VALUES (?)', [via]);
        await failing;
      });
    });
    assert.deepEqual(await values(db), [via], via);
  }
  await db.close();
});

test('a forced close settles a nested transaction whose body never ends, and the calls waiting for it', { timeout: 5000 }, async () => {
  const db = await fresh();
  let nested;
  let call;
  const txp = db.transaction(async (tx) => {
    nested = tx.transaction(() => new Promise(() => {}));
    call = tx.execute("INSERT INTO t(v) VALUES ('outer')");
    // Handled now: they reject during close(), before the assertions below look at them.
    nested.catch(() => {});
    call.catch(() => {});
  });
  txp.catch(() => {});
  await sleep(30);
  await db.close({ force: true });
  await assert.rejects(within(txp, 'the transaction'), (err) => err.code === 'ERR_QUIETSQLITE_CLOSED');
  await assert.rejects(within(nested, 'the nested transaction'), (err) => err.code === 'ERR_QUIETSQLITE_CLOSED');
  // It was never sent: the transaction it waited in has ended (or the database closed).
  await assert.rejects(within(call, 'the waiting call'), (err) => err.code === ENDED || err.code === 'ERR_QUIETSQLITE_CLOSED');
});

test("a nested transaction's signal ends it while it waits for a nested body of its own", { timeout: 5000 }, async () => {
  const db = await fresh();
  const controller = new AbortController();
  const reason = new Error('stop');
  let settledAfter;
  await db.transaction(async (tx) => {
    const started = performance.now();
    const nested = tx.transaction(
      async (inner) => {
        inner.transaction(() => sleep(300)).catch(() => {});
      },
      { signal: controller.signal },
    );
    setTimeout(() => controller.abort(reason), 20);
    await assert.rejects(nested, (err) => err === reason);
    settledAfter = performance.now() - started;
  });
  assert.ok(settledAfter < 250, `the nested transaction settled after ${settledAfter.toFixed(0)} ms, not at its abort`);
  await db.close();
});
