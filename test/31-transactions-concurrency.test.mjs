// Interactive transactions, part 2: the write queue (FIFO behind a running body), reads
// outside the body, routing of `db` calls made inside the body (AsyncLocalStorage), abort
// signals, and two databases side by side.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { AsyncLocalStorage } from 'node:async_hooks';
import { availableParallelism } from 'node:os';
import { SqliteError } from '../dist/index.mjs';
import { deferred, exitIfStuck, isPending, scratch, settleWithin, sleep, values, within } from './fixtures/tx-helpers.mjs';

const tmp = scratch('tx31');
exitIfStuck();

async function fresh() {
  const db = await tmp.open();
  await db.execute('CREATE TABLE t(v)');
  return db;
}

const ENDED = 'ERR_QUIETSQLITE_TRANSACTION_ENDED';

// ---- the write queue ----

/**
 * Launches writer `i` of one of three kinds. Each appends `i` to t; a transaction appends
 * it twice, in separate round trips with a timer in between, so that a writer slipping in
 * between (or ahead) would show in the table.
 */
function launchWriter(db, i) {
  let p;
  switch (i % 3) {
    case 0:
      p = db.execute('INSERT INTO t(v) VALUES (?)', [i]);
      break;
    case 1:
      p = db.executeBatch('INSERT INTO t(v) VALUES (?)', [[i]]);
      break;
    default:
      p = db.transaction(async (tx) => {
        await tx.execute('INSERT INTO t(v) VALUES (?)', [i]);
        await tx.select('SELECT count(*) AS n FROM t');
        await sleep(2);
        await tx.execute('INSERT INTO t(v) VALUES (?)', [i]);
      });
  }
  return p;
}

/** The rows that writers 0..n-1 of launchWriter leave, in launch order. */
function launchOrder(n) {
  return Array.from({ length: n }, (_, i) => (i % 3 === 2 ? [i, i] : [i])).flat();
}

// Only the order in which writers run is checked (through the rows they leave): the order
// in which their promises settle is not a promise of the API, since a transaction() promise
// resolves a few microtask turns after the COMMIT completes.

test('10 writers launched in one tick run in launch order', { timeout: 5000 }, async () => {
  const db = await fresh();
  const writers = [];
  for (let i = 0; i < 10; i++) writers.push(launchWriter(db, i));
  await Promise.all(writers);
  assert.deepEqual(await values(db), launchOrder(10));
  await db.close();
});

test('a running body holds the write queue; writers wait behind it in FIFO order', { timeout: 5000 }, async () => {
  const db = await fresh();
  const paused = deferred();
  const gate = deferred();
  const holder = db.transaction(async (tx) => {
    await tx.execute("INSERT INTO t(v) VALUES ('holder-1')");
    paused.resolve();
    await gate.promise;
    // Nothing launched while the body was paused has run inside it or before it.
    const seen = (await tx.select('SELECT v FROM t ORDER BY rowid')).map((r) => r.v);
    await tx.execute("INSERT INTO t(v) VALUES ('holder-2')");
    return seen;
  });
  await paused.promise;

  const writers = [];
  for (let i = 0; i < 10; i++) writers.push(launchWriter(db, i));
  // Give the writer thread ample time: all of them stay queued while the body is paused.
  await sleep(50);
  for (const w of writers) assert.ok(await isPending(w, 1), 'a writer ran while the body held the queue');
  assert.deepEqual(await values(db), [], 'readers see nothing uncommitted');

  gate.resolve();
  assert.deepEqual(await holder, ['holder-1']);
  await Promise.all(writers);
  assert.deepEqual(await values(db), ['holder-1', 'holder-2', ...launchOrder(10)]);
  await db.close();
});

/** The reads-outside scenario on `db` (which has an empty table t). */
async function readsOutsideTheBody(db) {
  await db.execute("INSERT INTO t(v) VALUES ('committed')");
  const paused = deferred();
  const gate = deferred();

  // Both chains start before the transaction, so they are outside the body's async context.
  const chained = (async () => {
    await paused.promise;
    return {
      rows: await db.select('SELECT v FROM t ORDER BY rowid'),
      one: await db.selectOne('SELECT count(*) AS n FROM t'),
      json: JSON.parse((await db.selectBytes('SELECT v FROM t ORDER BY rowid')).toString()),
    };
  })();
  const timed = new Promise((resolve, reject) => {
    setTimeout(() => {
      paused.promise.then(() => db.select('SELECT v FROM t ORDER BY rowid')).then(resolve, reject);
    }, 0);
  });

  const txp = db.transaction(async (tx) => {
    await tx.execute("INSERT INTO t(v) VALUES ('uncommitted')");
    paused.resolve();
    // The body stays paused until the outside reads have come back (or 2 s passed).
    await gate.promise;
    return (await tx.select('SELECT v FROM t ORDER BY rowid')).map((r) => r.v);
  });

  const reads = await settleWithin(Promise.all([chained, timed]), 2000);
  gate.resolve();
  assert.equal(
    reads.state,
    'fulfilled',
    `reads outside the body must not wait for its COMMIT (${reads.state}: ${reads.reason?.code ?? ''} ${reads.reason?.message ?? ''})`,
  );
  const [c, t] = reads.value;
  assert.deepEqual(c.rows, [{ v: 'committed' }]);
  assert.deepEqual(c.one, { n: 1 });
  assert.deepEqual(c.json, [{ v: 'committed' }]);
  assert.deepEqual(t, [{ v: 'committed' }]);

  assert.deepEqual(await txp, ['committed', 'uncommitted']);
  assert.deepEqual(await values(db), ['committed', 'uncommitted']);
  await db.close();
}

test('reads outside the body keep running on the readers and see only committed data', { timeout: 5000 }, async () => {
  await readsOutsideTheBody(await fresh());
});

test('the same with a :memory: database', {
  timeout: 5000,
}, async () => {
  // A short busy timeout: a read that has to wait for the writer fails fast instead of in 5 s.
  const db = await tmp.open(':memory:', { busyTimeout: 200 });
  await db.execute('CREATE TABLE t(v)');
  await readsOutsideTheBody(db);
});

// ---- routing of db calls made inside the body ----

test('db calls inside the body route to the transaction: no deadlock, uncommitted data visible', { timeout: 5000 }, async () => {
  const db = await fresh();
  const result = await db.transaction(async (tx) => {
    await within(db.execute("INSERT INTO t(v) VALUES ('a')"), 'db.execute inside the body');
    assert.deepEqual(await within(db.select('SELECT v FROM t'), 'db.select'), [{ v: 'a' }]);
    assert.deepEqual(await within(db.selectOne('SELECT count(*) AS n FROM t'), 'db.selectOne'), { n: 1 });
    const bytes = await within(db.selectBytes('SELECT v FROM t'), 'db.selectBytes');
    assert.deepEqual(JSON.parse(bytes.toString()), [{ v: 'a' }]);
    assert.deepEqual(
      await within(db.executeBatch('INSERT INTO t(v) VALUES (?)', [['b'], ['c']]), 'db.executeBatch'),
      { changes: 2 },
    );
    // What tx sees, db sees, and the other way round.
    assert.deepEqual(await tx.select('SELECT v FROM t ORDER BY rowid'), await db.select('SELECT v FROM t ORDER BY rowid'));
    // The async context survives timers and microtasks started inside the body.
    await new Promise((resolve, reject) => {
      setTimeout(() => db.execute("INSERT INTO t(v) VALUES ('timer')").then(resolve, reject), 1);
    });
    await new Promise((resolve, reject) => {
      queueMicrotask(() => db.execute("INSERT INTO t(v) VALUES ('microtask')").then(resolve, reject));
    });
    return (await db.select('SELECT v FROM t ORDER BY rowid')).map((r) => r.v);
  });
  assert.deepEqual(result, ['a', 'b', 'c', 'timer', 'microtask']);
  assert.deepEqual(await values(db), result);
  await db.close();
});

test('db calls inside the body do not escape it: a rollback undoes them all', { timeout: 5000 }, async () => {
  const db = await fresh();
  const err = new Error('undo everything');
  const caught = await db
    .transaction(async () => {
      await within(db.execute("INSERT INTO t(v) VALUES ('a')"), 'db.execute');
      await within(db.executeBatch('INSERT INTO t(v) VALUES (?)', [['b']]), 'db.executeBatch');
      await within(
        db.transaction((sp) => sp.execute("INSERT INTO t(v) VALUES ('c')")),
        'db.transaction (a savepoint)',
      );
      await new Promise((resolve, reject) => {
        setTimeout(() => db.execute("INSERT INTO t(v) VALUES ('timer')").then(resolve, reject), 1);
      });
      assert.equal((await db.select('SELECT v FROM t')).length, 4);
      throw err;
    })
    .catch((e) => e);
  assert.equal(caught, err);
  assert.deepEqual(await values(db), []);
  await db.close();
});

test('db.transaction inside the body is a savepoint; an inner throw undoes only it', { timeout: 5000 }, async () => {
  const db = await fresh();
  const innerErr = new Error('inner');
  await db.transaction(async (tx) => {
    await db.execute("INSERT INTO t(v) VALUES ('outer')");
    const kept = await within(
      db.transaction(async (sp) => {
        assert.equal(sp.depth, 1);
        await db.execute("INSERT INTO t(v) VALUES ('kept')");
        // Deeper still, through db again: depth 2.
        return db.transaction(async (sp2) => {
          assert.equal(sp2.depth, 2);
          return 'deep';
        });
      }),
      'nested db.transaction',
    );
    assert.equal(kept, 'deep');
    const caught = await within(
      db
        .transaction(async (sp) => {
          await db.execute("INSERT INTO t(v) VALUES ('undone')");
          throw innerErr;
        })
        .catch((e) => e),
      'nested db.transaction that throws',
    );
    assert.equal(caught, innerErr);
    assert.deepEqual(
      (await tx.select('SELECT v FROM t ORDER BY rowid')).map((r) => r.v),
      ['outer', 'kept'],
    );
  });
  assert.deepEqual(await values(db), ['outer', 'kept']);
  await db.close();
});

/** Runs a transaction that pauses; a timer started BEFORE it writes while it is paused. */
async function outsideWriterDuring(db, { fail }) {
  const paused = deferred();
  const gate = deferred();
  let outside;
  // Started before the transaction: its callback is outside the body's async context.
  const timerFired = new Promise((resolve) => {
    setTimeout(async () => {
      await paused.promise;
      outside = db.execute("INSERT INTO t(v) VALUES ('outside')");
      resolve();
    }, 0);
  });
  const err = new Error('body failed');
  const txp = db.transaction(async (tx) => {
    await tx.execute("INSERT INTO t(v) VALUES ('in-1')");
    paused.resolve();
    await gate.promise;
    await tx.execute("INSERT INTO t(v) VALUES ('in-2')");
    if (fail) throw err;
  });
  await timerFired;
  // Queued behind the body, not routed into it: it has not run yet.
  await sleep(30);
  assert.ok(await isPending(outside, 1), 'the outside write ran while the body held the queue');
  gate.resolve();
  const outcome = await txp.then(
    () => 'committed',
    (e) => (e === err ? 'rolled back' : e),
  );
  await outside;
  return outcome;
}

test('a write from outside the body (timer started before) queues behind it and lands after the commit', { timeout: 5000 }, async () => {
  const db = await fresh();
  assert.equal(await outsideWriterDuring(db, { fail: false }), 'committed');
  assert.deepEqual(await values(db), ['in-1', 'in-2', 'outside']);
  await db.close();
});

test('a write from outside the body is not undone by the rollback of the transaction', { timeout: 5000 }, async () => {
  const db = await fresh();
  assert.equal(await outsideWriterDuring(db, { fail: true }), 'rolled back');
  assert.deepEqual(await values(db), ['outside']);
  await db.close();
});

test('a call from the body context made after the body ended is refused, never run outside it', { timeout: 5000 }, async () => {
  const db = await fresh();
  for (const fail of [false, true]) {
    const ended = deferred();
    let late;
    await db
      .transaction(async (tx) => {
        await tx.execute('INSERT INTO t(v) VALUES (?)', [`body-${fail}`]);
        // Fire and forget: runs once the transaction is over, in the body's async context.
        late = ended.promise.then(() => db.execute('INSERT INTO t(v) VALUES (?)', [`late-${fail}`]));
        if (fail) throw new Error('rollback');
      })
      .catch(() => {});
    ended.resolve();
    // Escaping to autocommit would commit a write of a rolled-back transaction (issue 8).
    await assert.rejects(within(late, 'the late write'), { code: 'ERR_QUIETSQLITE_TRANSACTION_ENDED' });
  }
  assert.deepEqual(await values(db), ['body-false']);
  await db.close();
});

// ---- abort signals ----

test('aborting while the body awaits rolls back and rejects with the abort reason', { timeout: 5000 }, async () => {
  const db = await fresh();
  const controller = new AbortController();
  const reason = new Error('stop it');
  const paused = deferred();
  const gate = deferred();
  let lateUse;
  const txp = db.transaction(
    async (tx) => {
      await tx.execute("INSERT INTO t(v) VALUES ('aborted')");
      paused.resolve();
      await gate.promise;
      // The body carries on after the abort; its handle is dead by then.
      lateUse = await tx.execute("INSERT INTO t(v) VALUES ('after abort')").catch((e) => e);
      return 'finished late';
    },
    { signal: controller.signal },
  );
  await paused.promise;
  // A writer queued behind the aborted transaction.
  const queued = db.execute("INSERT INTO t(v) VALUES ('queued')");

  controller.abort(reason);
  const got = await within(txp.catch((e) => e), 'the aborted transaction');
  assert.equal(got, reason);
  await within(queued, 'the write queued behind the aborted transaction');

  gate.resolve();
  await sleep(20);
  assert.equal(lateUse?.code, ENDED, `late use of tx: ${lateUse}`);
  assert.deepEqual(await values(db), ['queued']);

  // The next transaction works.
  await db.transaction((tx) => tx.execute("INSERT INTO t(v) VALUES ('next')"));
  assert.deepEqual(await values(db), ['queued', 'next']);
  await db.close();
});

test('abort without a reason rejects with signal.reason (an AbortError)', { timeout: 5000 }, async () => {
  const db = await fresh();
  const controller = new AbortController();
  const paused = deferred();
  const txp = db.transaction(
    async (tx) => {
      await tx.execute("INSERT INTO t(v) VALUES ('x')");
      paused.resolve();
      await new Promise(() => {}); // never finishes on its own
    },
    { signal: controller.signal },
  );
  await paused.promise;
  controller.abort();
  const got = await within(txp.catch((e) => e), 'the aborted transaction');
  assert.equal(got, controller.signal.reason);
  assert.equal(got.name, 'AbortError');
  assert.deepEqual(await values(db), []);
  await db.close();
});

test('a signal aborted before the transaction starts: it never begins', { timeout: 5000 }, async () => {
  const db = await fresh();
  let called = 0;
  const body = async (tx) => {
    called++;
    await tx.execute("INSERT INTO t(v) VALUES ('never')");
  };
  const reason = new Error('too late');
  await assert.rejects(db.transaction(body, { signal: AbortSignal.abort(reason) }), (e) => e === reason);
  const controller = new AbortController();
  const reason2 = { custom: 'reason' };
  controller.abort(reason2);
  await assert.rejects(db.transaction(body, { signal: controller.signal, mode: 'deferred' }), (e) => e === reason2);
  assert.equal(called, 0);
  assert.deepEqual(await values(db), []);
  // The write queue is free.
  await within(db.execute("INSERT INTO t(v) VALUES ('free')"), 'a write after');
  assert.deepEqual(await values(db), ['free']);
  await db.close();
});

test('a signal aborted while the transaction waits in the queue: its body never runs', { timeout: 5000 }, async () => {
  const db = await fresh();
  const paused = deferred();
  const gate = deferred();
  const holder = db.transaction(async (tx) => {
    await tx.execute("INSERT INTO t(v) VALUES ('holder')");
    paused.resolve();
    await gate.promise;
  });
  await paused.promise;
  const controller = new AbortController();
  const reason = new Error('gave up waiting');
  let called = false;
  const waiting = db.transaction(
    async (tx) => {
      called = true;
      await tx.execute("INSERT INTO t(v) VALUES ('waiter')");
    },
    { signal: controller.signal },
  );
  const outcome = waiting.catch((e) => e);
  const after = db.execute("INSERT INTO t(v) VALUES ('after')");
  controller.abort(reason);
  // The caller hears of the abort at once, while the holder still holds the writer.
  assert.equal(await within(outcome, 'the aborted waiter'), reason);
  gate.resolve();
  await holder;
  await within(after, 'the write behind the waiter');
  assert.equal(called, false);
  assert.deepEqual(await values(db), ['holder', 'after']);
  await db.close();
});

test('aborting after the transaction finished changes nothing', { timeout: 5000 }, async () => {
  const db = await fresh();
  const controller = new AbortController();
  const got = await db.transaction((tx) => tx.execute("INSERT INTO t(v) VALUES ('done')").then(() => 'ok'), {
    signal: controller.signal,
  });
  assert.equal(got, 'ok');
  controller.abort(new Error('late'));
  await sleep(10);
  assert.deepEqual(await values(db), ['done']);
  // One signal can serve several transactions in turn; aborted, it stops the next one.
  await assert.rejects(db.transaction(async () => {}, { signal: controller.signal }), /late/);
  await db.close();
});

test('aborting a savepoint while its body awaits undoes only the savepoint', {
  timeout: 5000,
}, async () => {
  const db = await fresh();
  const controller = new AbortController();
  const reason = new Error('abort the savepoint');
  const innerPaused = deferred();
  const result = await db.transaction(async (tx) => {
    await tx.execute("INSERT INTO t(v) VALUES ('outer')");
    const inner = tx.transaction(
      async (sp) => {
        await sp.execute("INSERT INTO t(v) VALUES ('inner')");
        innerPaused.resolve();
        await new Promise(() => {}); // never finishes on its own
      },
      { signal: controller.signal },
    );
    await innerPaused.promise;
    controller.abort(reason);
    const s = await settleWithin(inner, 300);
    assert.equal(s.state, 'rejected', 'an aborted savepoint must reject');
    assert.equal(s.reason, reason);
    await tx.execute("INSERT INTO t(v) VALUES ('outer-2')");
    return (await tx.select('SELECT v FROM t ORDER BY rowid')).map((r) => r.v);
  });
  assert.deepEqual(result, ['outer', 'outer-2']);
  assert.deepEqual(await values(db), ['outer', 'outer-2']);
  await db.close();
});

// ---- two databases ----

test('two databases run transactions concurrently without interfering', { timeout: 5000 }, async () => {
  const a = await fresh();
  const b = await fresh();
  const aPaused = deferred();
  const aGate = deferred();
  const ta = a.transaction(async (tx) => {
    await tx.execute("INSERT INTO t(v) VALUES ('a-1')");
    aPaused.resolve();
    await aGate.promise;
    await tx.execute("INSERT INTO t(v) VALUES ('a-2')");
    return (await tx.select('SELECT v FROM t ORDER BY rowid')).map((r) => r.v);
  });
  await aPaused.promise;

  // While a's body holds a's writer, b's writer is free.
  const tb = await within(
    b.transaction(async (tx) => {
      await tx.execute("INSERT INTO t(v) VALUES ('b-1')");
      await tx.executeBatch('INSERT INTO t(v) VALUES (?)', [['b-2'], ['b-3']]);
      return (await tx.select('SELECT v FROM t ORDER BY rowid')).map((r) => r.v);
    }),
    "b's transaction while a's is paused",
  );
  assert.deepEqual(tb, ['b-1', 'b-2', 'b-3']);
  await within(b.execute("INSERT INTO t(v) VALUES ('b-4')"), "b's write while a's transaction is paused");
  assert.deepEqual(await values(a), [], "a's uncommitted row is not visible");

  aGate.resolve();
  assert.deepEqual(await ta, ['a-1', 'a-2']);
  assert.deepEqual(await values(a), ['a-1', 'a-2']);
  assert.deepEqual(await values(b), ['b-1', 'b-2', 'b-3', 'b-4']);

  // Many interleaved transactions on both, each in its own launch order.
  const launches = [];
  for (let i = 0; i < 20; i++) {
    for (const [db, name] of [
      [a, 'a'],
      [b, 'b'],
    ]) {
      launches.push(
        db.transaction(async (tx) => {
          await tx.execute('INSERT INTO t(v) VALUES (?)', [`${name}${i}`]);
          if (i % 5 === 4) throw new Error('rolled back');
          await tx.transaction((sp) => sp.execute('INSERT INTO t(v) VALUES (?)', [`${name}${i}s`]));
        }).catch(() => {}),
      );
    }
  }
  await Promise.all(launches);
  for (const [db, name] of [
    [a, 'a'],
    [b, 'b'],
  ]) {
    const expected = [];
    for (let i = 0; i < 20; i++) if (i % 5 !== 4) expected.push(`${name}${i}`, `${name}${i}s`);
    assert.deepEqual((await values(db)).slice(name === 'a' ? 2 : 4), expected, `database ${name}`);
  }
  await a.close();
  await b.close();
});

test('inside a body of one database, calls on another database are not routed into it', { timeout: 5000 }, async () => {
  const a = await fresh();
  const b = await fresh();
  const err = new Error('roll back a');
  const caught = await a
    .transaction(async (tx) => {
      await a.execute("INSERT INTO t(v) VALUES ('a')");
      // b has no transaction of its own here: this is a plain write on b, committed at once.
      await within(b.execute("INSERT INTO t(v) VALUES ('b-plain')"), 'b.execute inside a body');
      assert.deepEqual(await b.select('SELECT v FROM t'), [{ v: 'b-plain' }]);
      // And b.transaction is a real transaction on b (depth 0), not a savepoint of a.
      await within(
        b.transaction(async (btx) => {
          assert.equal(btx.depth, 0);
          await btx.execute("INSERT INTO t(v) VALUES ('b-tx')");
        }),
        'b.transaction inside a body',
      );
      assert.deepEqual((await b.select('SELECT v FROM t ORDER BY rowid')).length, 2);
      await tx.execute("INSERT INTO t(v) VALUES ('a-2')");
      throw err;
    })
    .catch((e) => e);
  assert.equal(caught, err);
  assert.deepEqual(await values(a), []);
  assert.deepEqual(await values(b), ['b-plain', 'b-tx']);
  await a.close();
  await b.close();
});

test("inside b's body nested in a's body, a's calls still route to a's transaction", {
  timeout: 5000,
}, async () => {
  const a = await fresh();
  const b = await fresh();
  const seen = {};
  await a.transaction(async (atx) => {
    await atx.execute("INSERT INTO t(v) VALUES ('a-uncommitted')");
    await b.transaction(async (btx) => {
      await btx.execute("INSERT INTO t(v) VALUES ('b')");
      // Still inside a's body too: a's uncommitted row must be visible through a ...
      seen.aRead = await a.select('SELECT v FROM t');
      // ... and a write on a must join a's transaction, not wait for its COMMIT (a deadlock).
      seen.aWrite = await settleWithin(a.execute("INSERT INTO t(v) VALUES ('a-from-b')"), 500);
    });
  });
  assert.deepEqual(seen.aRead, [{ v: 'a-uncommitted' }]);
  assert.equal(seen.aWrite.state, 'fulfilled', `a.execute inside b's body: ${seen.aWrite.state}`);
  assert.deepEqual(await values(a), ['a-uncommitted', 'a-from-b']);
  assert.deepEqual(await values(b), ['b']);
  await a.close();
  await b.close();
});

test('a SqliteError inside one database does not disturb a transaction on the other', { timeout: 5000 }, async () => {
  const a = await tmp.open();
  const b = await fresh();
  await a.execute('CREATE TABLE u(v UNIQUE)');
  const [ra, rb] = await Promise.all([
    a.transaction(async (tx) => {
      await tx.execute('INSERT INTO u(v) VALUES (1)');
      await assert.rejects(tx.execute('INSERT INTO u(v) VALUES (1)'), SqliteError);
      await sleep(5);
      await tx.execute('INSERT INTO u(v) VALUES (2)');
      return 'a';
    }),
    b.transaction(async (tx) => {
      await sleep(2);
      await tx.execute("INSERT INTO t(v) VALUES ('b')");
      return 'b';
    }),
  ]);
  assert.deepEqual([ra, rb], ['a', 'b']);
  assert.deepEqual(await values(a, 'u'), [1, 2]);
  assert.deepEqual(await values(b), ['b']);
  await a.close();
  await b.close();
});

// ---- callbacks of live queries are not the body's code ----

/** Keeps the JS thread busy for `ms`: completions that arrive meanwhile wait, undelivered. */
function blockFor(ms) {
  const until = performance.now() + ms;
  while (performance.now() < until);
}

/** Resolves once `check()` is true; fails after `ms`. */
async function until(check, what, ms = 2000) {
  const deadline = performance.now() + ms;
  while (!check()) {
    assert.ok(performance.now() < deadline, `${what} did not happen within ${ms} ms`);
    await sleep(5);
  }
}

test(
  "a live query subscribed outside a body never runs its callback in the body's context, even when the body's own request takes its rows",
  // With one CPU the JS thread never polls (POLL_MICROS is 0): rows only come by the event loop.
  { timeout: 10_000, skip: availableParallelism() === 1 && 'the JS thread polls only with more than one CPU' },
  async () => {
    const db = await fresh();
    // The body subscribes through a function bound to this context (outside any
    // transaction), so the subscription is not the body's.
    const outside = AsyncLocalStorage.snapshot();
    let tickRan = false;
    let takenByPoll = false;
    let callbackWrite;
    const failure = new Error('rolled back on purpose');
    const outcome = db.transaction(async (tx) => {
      await tx.execute("INSERT INTO t(v) VALUES ('undone')");
      outside(() =>
        db.stream('SELECT count(*) AS n FROM t').subscribe(() => {
          takenByPoll ||= !tickRan;
          // A write from the callback: not routed into the transaction, so its rollback
          // cannot undo it; it queues behind the transaction and runs after it.
          callbackWrite ??= db.execute("INSERT INTO t(v) VALUES ('from-callback')");
        }),
      );
      // The live query's first rows are computed on a reader now; the event loop cannot
      // deliver them while this thread is busy.
      blockFor(300);
      // Rows delivered before this tick runs were taken by a poll: the event loop, through
      // which the other deliveries come, turns only after the tick queue is processed.
      process.nextTick(() => {
        tickRan = true;
      });
      // Sent together, before the event loop turns. A poll is queued by the first send that
      // finds no back-off left (at most POLL_BACKOFF_MAX = 1024 sends skip), and this fresh
      // database has taken far fewer than POLL_STREAK results by polling. That poll runs in
      // the body's context and takes the rows waiting there with the body's own.
      await Promise.all(Array.from({ length: 1100 }, () => tx.select('SELECT 1')));
      throw failure;
    });
    await assert.rejects(outcome, (err) => err === failure);
    await until(() => callbackWrite !== undefined, 'the first emission');
    assert.ok(takenByPoll, "the rows were taken by the body's poll");
    const written = await within(callbackWrite, "the callback's write");
    assert.equal(written.changes, 1);
    assert.deepEqual(await values(db), ['from-callback']);
    await db.close();
  },
);

// Guards the other half of the rule: the callbacks of a subscription made inside a body are
// not the body's code either (they would be refused once it ended).
test('a live query subscribed inside a body runs its callbacks outside any transaction', { timeout: 10_000 }, async () => {
  const db = await fresh();
  let afterCommit;
  let off;
  await db.transaction(async (tx) => {
    await tx.execute("INSERT INTO t(v) VALUES ('in-body')");
    off = db.stream('SELECT count(*) AS n FROM t').subscribe((rows) => {
      // The emission of the commit comes after the body ended: a call routed by the body's
      // context would be refused (ERR_QUIETSQLITE_TRANSACTION_ENDED).
      if (rows[0].n === 1) afterCommit ??= db.execute("INSERT INTO t(v) VALUES ('from-callback')");
    });
  });
  await until(() => afterCommit !== undefined, 'the emission of the commit');
  off();
  const written = await within(afterCommit, "the callback's write");
  assert.equal(written.changes, 1);
  assert.deepEqual(await values(db), ['in-body', 'from-callback']);
  await db.close();
});
