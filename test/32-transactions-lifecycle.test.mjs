// Interactive transactions, part 3: closing the database while a body runs, and a crash of
// the process in the middle of a transaction.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Database } from '../dist/index.mjs';
import { deferred, exitIfStuck, scratch, settleWithin, values } from './fixtures/tx-helpers.mjs';

const tmp = scratch('tx32');
exitIfStuck();

const fixture = (name) => fileURLToPath(new URL(`./fixtures/${name}`, import.meta.url));
const CLOSED = 'ERR_QUIETSQLITE_CLOSED';
const ENDED = 'ERR_QUIETSQLITE_TRANSACTION_ENDED';

/**
 * Runs a fixture script in a child Node process and collects its stdout lines. `onLine`
 * may return true to kill the child (SIGKILL) right there; after `deadline` ms the child is
 * killed anyway. Resolves with { lines, code, signal, timedOut, stderr }.
 */
function runChild(script, args, { onLine = () => false, deadline = 8000 } = {}) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [fixture(script), ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    const lines = [];
    let stderr = '';
    let buffered = '';
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill('SIGKILL');
    }, deadline);
    child.stdout.setEncoding('utf8');
    child.stderr.setEncoding('utf8');
    child.stderr.on('data', (d) => {
      stderr += d;
    });
    child.stdout.on('data', (chunk) => {
      buffered += chunk;
      let nl;
      while ((nl = buffered.indexOf('\n')) >= 0) {
        const line = buffered.slice(0, nl);
        buffered = buffered.slice(nl + 1);
        lines.push(line);
        if (onLine(line, child)) child.kill('SIGKILL');
      }
    });
    child.on('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      resolve({ lines, code, signal, timedOut, stderr });
    });
  });
}

// ---- close() while a body runs ----

/** Runs a scenario of tx-close-child.mjs; resolves with its reports keyed by event. */
async function childScenario(scenario, file) {
  const run = await runChild('tx-close-child.mjs', [scenario, file], { deadline: 10000 });
  assert.equal(run.timedOut, false, `the child hung:\n${run.lines.join('\n')}\n${run.stderr}`);
  assert.equal(run.code, 0, run.stderr);
  return Object.fromEntries(
    run.lines.map((l) => {
      const { event, ...rest } = JSON.parse(l);
      return [event, rest];
    }),
  );
}

test('close() waits for a running body: pending while it is paused, resolved after its COMMIT', {
  timeout: 15000,
}, async () => {
  const file = tmp.file('close-wait');
  const seen = await childScenario('wait', file);
  const report = JSON.stringify(seen, null, 1);
  // close() does not resolve while the body is paused ...
  assert.equal(seen['close-while-paused'].state, 'pending', report);
  // ... refuses new work from outside the body ...
  assert.equal(seen['new-call-after-close'].state, 'rejected', report);
  assert.equal(seen['new-call-after-close'].code, CLOSED, report);
  assert.equal(seen['new-transaction-after-close'].state, 'rejected', report);
  assert.equal(seen['new-transaction-after-close'].code, CLOSED, report);
  // ... still serves the body, which commits and returns its value ...
  assert.deepEqual(seen['body-steps'].steps, ['in-2 ok', 'sees before,in-1,in-2'], report);
  assert.deepEqual(seen.transaction, { state: 'fulfilled', value: 'body result' }, report);
  // ... and then resolves.
  assert.equal(seen.close.state, 'fulfilled', report);
  assert.equal(seen.isOpen.value, false, report);

  const db = await tmp.open(file);
  assert.deepEqual(await values(db), ['before', 'in-1', 'in-2']);
  await db.close();
});

test('close({ force: true }) rolls back a body that never finishes, and transaction() rejects', {
  timeout: 5000,
}, async () => {
  const file = tmp.file('force-never');
  let db = await Database.open(file);
  await db.execute('CREATE TABLE t(v)');
  await db.execute("INSERT INTO t(v) VALUES ('before')");
  const paused = deferred();
  const txp = db.transaction(async (tx) => {
    await tx.execute("INSERT INTO t(v) VALUES ('in')");
    await tx.transaction((sp) => sp.execute("INSERT INTO t(v) VALUES ('in-savepoint')"));
    paused.resolve();
    await new Promise(() => {}); // never finishes
  });
  // Observed at the end; a handler now keeps the runner from calling it unhandled meanwhile.
  txp.catch(() => {});
  await paused.promise;

  const closed = await settleWithin(db.close({ force: true }), 2000);
  assert.equal(closed.state, 'fulfilled', 'close({ force: true }) must not wait for the body');
  assert.equal(db.isOpen, false);

  db = await Database.open(file);
  assert.deepEqual(await values(db), ['before'], 'the forced close rolled the transaction back');
  // The reopened database takes transactions as usual.
  await db.transaction((tx) => tx.execute("INSERT INTO t(v) VALUES ('after')"));
  assert.deepEqual(await values(db), ['before', 'after']);
  await db.close();

  // Whoever awaits the transaction is told it is over (not left waiting forever).
  const outcome = await settleWithin(txp, 500);
  assert.equal(outcome.state, 'rejected', 'the transaction() promise of a force-closed transaction must reject');
  assert.ok(
    outcome.reason instanceof Error && [CLOSED, ENDED].includes(outcome.reason.code),
    `rejected with ${outcome.reason}`,
  );
});

test('close({ force: true }) while a body is paused: the resumed body can no longer write, nothing is committed', { timeout: 5000 }, async () => {
  const file = tmp.file('force-resume');
  let db = await Database.open(file);
  await db.execute('CREATE TABLE t(v)');
  const paused = deferred();
  const gate = deferred();
  let lateWrite;
  const txp = db.transaction(async (tx) => {
    await tx.execute("INSERT INTO t(v) VALUES ('in-1')");
    paused.resolve();
    await gate.promise;
    lateWrite = await tx.execute("INSERT INTO t(v) VALUES ('in-2')").catch((e) => e);
    return 'body returned';
  });
  // Observed below; a handler now keeps the runner from calling it unhandled meanwhile.
  txp.catch(() => {});
  await paused.promise;
  await db.close({ force: true });

  gate.resolve();
  const outcome = await settleWithin(txp, 2000);
  assert.equal(outcome.state, 'rejected', `transaction() after a forced close: ${outcome.state} ${outcome.value}`);
  assert.ok(outcome.reason instanceof Error && [CLOSED, ENDED].includes(outcome.reason.code), String(outcome.reason));
  assert.ok(lateWrite instanceof Error && [CLOSED, ENDED].includes(lateWrite.code), `late write: ${lateWrite}`);

  db = await Database.open(file);
  assert.deepEqual(await values(db), []);
  await db.close();
});

test('close({ force: true }): a transaction waiting in the queue rejects as closed and its body never runs', {
  timeout: 15000,
}, async () => {
  const file = tmp.file('force-queued');
  const seen = await childScenario('force-queued', file);
  const report = JSON.stringify(seen, null, 1);
  assert.equal(seen.close.state, 'fulfilled', report);
  // The running one was rolled back; the queued one never ran its body.
  assert.equal(seen.running.state, 'rejected', report);
  assert.equal(seen.queued.state, 'rejected', report);
  assert.equal(seen.queued.code, CLOSED, report);
  assert.equal(seen['queued-body-ran'].value, false, report);
  // The queued plain write settles one way or the other.
  assert.notEqual(seen['queued-write'].state, 'pending', report);

  const db = await tmp.open(file);
  const rows = await values(db);
  assert.ok(!rows.includes('running') && !rows.includes('queued'), `rows after reopen: ${rows}`);
  await db.close();
});

test('close() with no transaction running, then transaction() rejects as closed', { timeout: 5000 }, async () => {
  const db = await tmp.open();
  await db.execute('CREATE TABLE t(v)');
  await db.transaction((tx) => tx.execute("INSERT INTO t(v) VALUES ('x')"));
  await db.close();
  // close() is idempotent, forced or not.
  await db.close();
  await db.close({ force: true });
  await assert.rejects(
    db.transaction(async () => {}),
    (e) => e.code === CLOSED,
  );
});

// ---- a crash in the middle of a transaction ----

test('a crash (SIGKILL) in the middle of a transaction leaves none of it on disk', { timeout: 15000 }, async (t) => {
  const file = tmp.file('crash');
  let ready;
  let walAtKill = 0;
  const run = await runChild('tx-crash-child.mjs', [file, '4000'], {
    deadline: 10000,
    onLine(line) {
      const m = /^READY (\d+)$/.exec(line);
      if (!m) return false;
      ready = Number(m[1]);
      if (existsSync(`${file}-wal`)) walAtKill = statSync(`${file}-wal`).size;
      return true; // kill it now, while the body is paused
    },
  });
  assert.equal(run.timedOut, false, `the child never got ready: ${run.lines.join('\n')}\n${run.stderr}`);
  // Inside its transaction the child saw 100 - 10 deleted + 4000 + 1 rows.
  assert.equal(ready, 4091, run.stderr);
  assert.equal(run.signal, 'SIGKILL');
  assert.ok(!run.lines.includes('UNREACHABLE'));
  // Uncommitted pages that spilled into the WAL before the kill must be ignored on recovery.
  t.diagnostic(`WAL size at the kill: ${walAtKill} bytes`);

  const db = await tmp.open(file);
  assert.deepEqual(await db.select('SELECT phase, count(*) AS n FROM t GROUP BY phase'), [{ phase: 'before', n: 100 }]);
  assert.deepEqual(await db.selectOne('SELECT min(id) AS lo, max(id) AS hi FROM t'), { lo: 1, hi: 100 });
  assert.deepEqual((await db.execute('PRAGMA integrity_check')).rows, [{ integrity_check: 'ok' }]);
  // And the database takes a new transaction as usual.
  await db.transaction((tx) => tx.execute("INSERT INTO t(phase) VALUES ('after')"));
  assert.deepEqual(await db.selectOne("SELECT count(*) AS n FROM t WHERE phase = 'after'"), { n: 1 });
  await db.close();
});
