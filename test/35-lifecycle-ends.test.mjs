// Promises, locks, threads and files that always end (issue 8, class 6): close() inside a
// body, a Worker terminated or a Database collected mid-transaction, databases dropped
// without close().

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { Database } from '../dist/index.mjs';
import { deferred, exitIfStuck, scratch, settleWithin, values } from './fixtures/tx-helpers.mjs';

const tmp = scratch('life35');
exitIfStuck();

const CHILD = fileURLToPath(new URL('./fixtures/lifecycle-child.mjs', import.meta.url));
const run = promisify(execFile);

async function within(promise, what, ms = 3000) {
  const s = await settleWithin(promise, ms);
  assert.notEqual(s.state, 'pending', `${what} did not settle within ${ms} ms (deadlock?)`);
  if (s.state === 'rejected') throw s.reason;
  return s.value;
}

test('close() inside a transaction body rejects instead of deadlocking; the body goes on', { timeout: 10_000 }, async () => {
  const db = await tmp.open();
  await db.execute('CREATE TABLE t(v)');
  const result = await within(
    db.transaction(async (tx) => {
      await tx.execute("INSERT INTO t(v) VALUES ('a')");
      await assert.rejects(within(db.close(), 'close() inside the body'), (err) => {
        assert.equal(err.name, 'RangeError');
        assert.match(err.message, /inside a transaction body/);
        return true;
      });
      assert.equal(db.isOpen, true);
      await tx.execute("INSERT INTO t(v) VALUES ('b')");
      return 'committed';
    }),
    'the transaction',
  );
  assert.equal(result, 'committed');
  assert.deepEqual(await values(db), ['a', 'b']);
  await within(db.close(), 'close() after the body');
});

test('close() inside a body, after a close() from outside began, rejects too; both then settle', { timeout: 10_000 }, async () => {
  const db = await tmp.open();
  await db.execute('CREATE TABLE t(v)');
  const started = deferred();
  const closeCalled = deferred();
  const txp = db.transaction(async (tx) => {
    await tx.execute("INSERT INTO t(v) VALUES ('a')");
    started.resolve();
    await closeCalled.promise;
    await assert.rejects(within(db.close(), 'close() inside the body'), { name: 'RangeError', message: /inside a transaction body/ });
    return 'committed';
  });
  await started.promise;
  const closing = db.close(); // a shutdown handler, from outside the body, while it runs
  closeCalled.resolve();
  assert.equal(await within(txp, 'the transaction'), 'committed');
  await within(closing, 'the close from outside');
  assert.equal(db.isOpen, false);
});

test('close({ force: true }) inside a body rolls it back and settles', { timeout: 10_000 }, async () => {
  const path = tmp.file();
  const db = await tmp.open(path);
  await db.execute('CREATE TABLE t(v)');
  let closing;
  const txp = db.transaction(async (tx) => {
    await tx.execute("INSERT INTO t(v) VALUES ('a')");
    closing = db.close({ force: true });
    await closing;
  });
  await assert.rejects(within(txp, 'the transaction'), { code: 'ERR_QUIETSQLITE_CLOSED' });
  await within(closing, 'the forced close');
  const again = await tmp.open(path);
  assert.deepEqual(await values(again), []);
  await again.close();
});

test('a call made inside a nested body after a forced close from outside always settles', { timeout: 30_000 }, async () => {
  // A forced close ended the outer transaction while a nested body awaited something; the
  // body's next call reached the addon as its writer stopped and was never completed (2 of
  // 40 rounds in two of three runs of this loop, before). Every call now settles, rejected.
  const outcomes = {};
  for (let round = 0; round < 40; round++) {
    const db = await Database.open(':memory:');
    await db.execute('CREATE TABLE t(v)');
    const ready = deferred();
    const resume = deferred();
    let call;
    const outer = db.transaction((tx) =>
      tx.transaction(async (nested) => {
        await nested.execute("INSERT INTO t VALUES ('n')");
        ready.resolve();
        await resume.promise;
        call = db.execute("INSERT INTO t VALUES ('x')");
        call.catch(() => {});
      }),
    );
    outer.catch(() => {});
    await ready.promise;
    await db.close({ force: true });
    resume.resolve();
    await new Promise((r) => setTimeout(r, 1));
    const s = await settleWithin(call, 2000);
    const key = s.state === 'rejected' ? `rejected ${s.reason?.code}` : s.state;
    outcomes[key] = (outcomes[key] ?? 0) + 1;
  }
  assert.deepEqual(Object.keys(outcomes), ['rejected ERR_QUIETSQLITE_TRANSACTION_ENDED'], JSON.stringify(outcomes));
});

/**
 * Starts CHILD as a Worker in `mode`, waits for its `message`, terminates it, and checks that
 * another connection can write to `path` at once (the dead Worker's writer let the lock go)
 * and that nothing the Worker wrote stayed.
 */
async function terminateAndWrite(mode, message) {
  const path = tmp.file();
  const worker = new Worker(CHILD, { workerData: { mode, path } });
  const got = await new Promise((resolve, reject) => {
    worker.once('message', resolve);
    worker.once('error', reject);
    worker.once('exit', (code) => reject(new Error(`worker exited (${code}) early`)));
  });
  assert.equal(got, message);
  await worker.terminate();
  const db = await Database.open(path, { busyTimeout: 3000 });
  try {
    await db.execute("INSERT INTO t(v) VALUES ('main')");
    assert.deepEqual(await values(db), ['main']);
  } finally {
    await db.close();
  }
}

test('a Worker terminated mid-transaction releases the write lock at once', { timeout: 20_000 }, async () => {
  // Before the fix the writer thread of the dead Worker kept BEGIN IMMEDIATE until the
  // process exited: the write failed with SQLITE_BUSY after busyTimeout.
  await terminateAndWrite('tx-worker', 'holding');
});

test('a Worker terminated while it sends a large batch in parts rolls back and releases the write lock', { timeout: 20_000 }, async () => {
  // The dead Worker's writer waited, inside BEGIN IMMEDIATE, for a part that never came.
  await terminateAndWrite('batch-worker', 'sending');
});

test('a Database collected with its transaction open rolls it back and stops its threads', { timeout: 30_000 }, async () => {
  const path = tmp.file();
  const { stdout } = await run(process.execPath, ['--expose-gc', CHILD, 'dropped-tx', path], { timeout: 25_000 });
  assert.deepEqual(JSON.parse(stdout), { wrote: true, rows: [{ v: 'other' }] });
});

test('databases dropped without close() are collected: threads and files return to baseline', { timeout: 60_000 }, async () => {
  const { stdout } = await run(process.execPath, ['--expose-gc', CHILD, 'dropped'], { timeout: 55_000 });
  const { baseline, peak, after } = JSON.parse(stdout);
  // 200 databases of 2 threads each were open at the peak.
  assert.ok(peak.threads >= baseline.threads + 300, `peak ${JSON.stringify(peak)} vs ${JSON.stringify(baseline)}`);
  assert.ok(after.threads <= baseline.threads + 8, `threads: ${JSON.stringify({ baseline, peak, after })}`);
  assert.ok(after.fds <= baseline.fds + 8, `fds: ${JSON.stringify({ baseline, peak, after })}`);
});

test('a database with a user-defined function, dropped without close(), is collected too', { timeout: 60_000 }, async () => {
  const { stdout } = await run(process.execPath, ['--expose-gc', CHILD, 'dropped-udf'], { timeout: 55_000 });
  const { baseline, peak, after } = JSON.parse(stdout);
  // 20 databases of 2 threads each were open at the peak.
  assert.ok(peak.threads >= baseline.threads + 30, `peak ${JSON.stringify(peak)} vs ${JSON.stringify(baseline)}`);
  assert.ok(after.threads <= baseline.threads + 8, `threads: ${JSON.stringify({ baseline, peak, after })}`);
  assert.ok(after.fds <= baseline.fds + 8, `fds: ${JSON.stringify({ baseline, peak, after })}`);
});

test('an open that fails part way (descriptors run out) leaves no thread and no descriptor behind', { timeout: 60_000 }, async (t) => {
  // Reader threads already started waited for work until the native object was collected.
  const script = `ulimit -n 256 && exec "${process.execPath}" "${CHILD}" failed-opens`;
  const { stdout } = await run('sh', ['-c', script], { timeout: 55_000 });
  const failures = stdout.trim().split('\n').map((line) => JSON.parse(line)).filter((r) => r.free !== undefined);
  t.diagnostic(JSON.stringify(failures));
  assert.ok(failures.length > 0, 'some opens failed');
  for (const f of failures) {
    assert.equal(f.code, 'SQLITE_CANTOPEN');
    assert.equal(f.threads, 0, `database threads left after a failed open with ${f.free} descriptors free`);
    assert.ok(f.fds <= 0, `descriptors left after a failed open with ${f.free} descriptors free: ${f.fds}`);
  }
});
