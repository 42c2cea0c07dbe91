// Live queries whose promises always settle (issue 8, class 6): a throwing callback does not
// drop other completions of the same batch, and next() calls that overlap all settle.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { availableParallelism } from 'node:os';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import { openMemory } from './fixtures/helpers.mjs';
import { EMIT_MS, settle, within } from './fixtures/live-helpers.mjs';

const run = promisify(execFile);
const CHILD = fileURLToPath(new URL('./fixtures/live-throw-child.mjs', import.meta.url));
const THROW_IN_BODY_CHILD = fileURLToPath(new URL('./fixtures/throw-in-body-child.mjs', import.meta.url));

test('a callback that throws: every other completion of its batch arrives, the error surfaces as uncaught', { timeout: 20_000 }, async () => {
  // In a child process: the callback's error must reach process 'uncaughtException'.
  const { stdout } = await run(process.execPath, [CHILD], { timeout: 15_000 });
  const result = JSON.parse(stdout);
  assert.equal(result.ok, true, result.error);
  assert.deepEqual(result.seen, { a: [0, 1], b: [0, 1] }, 'both subscribers got both emissions');
  assert.equal(result.caught, result.thrown, 'each callback error surfaced once as an uncaught exception');
});

test("a callback that throws while a transaction body's poll delivers its rows pulls no other code into the transaction", { timeout: 20_000 }, async (t) => {
  // With one CPU the JS thread never polls: rows only come by the event loop.
  if (availableParallelism() === 1) return t.skip('the JS thread polls only with more than one CPU');
  // In a child process: the callback's error must reach process 'uncaughtException'. Under
  // Node 24 this failed on 3149a1c's code: the continuation of a read started outside the
  // transaction ran inside it, and its write was undone by the rollback.
  const { stdout } = await run(process.execPath, [THROW_IN_BODY_CHILD], { timeout: 15_000 });
  const result = JSON.parse(stdout);
  assert.ok(result.callbackByPoll && result.readByPoll, `the scenario did not happen (both results taken by the body's poll): ${stdout}`);
  assert.equal(result.outcome, 'rolled back');
  assert.equal(result.written, 'changes 1');
  assert.deepEqual(result.rows, ['outside'], 'the write made outside the transaction stands');
  assert.ok(result.thrown.length > 0 && result.thrown.every((m) => m === 'callback throws on purpose'));
});

test('next() called again before the first settled: both settle, in order', { timeout: 10_000 }, async (t) => {
  const db = await openMemory(t);
  await db.execute('CREATE TABLE t(v)');
  await settle(db);
  const live = db.stream('SELECT count(*) AS n FROM t');
  const it = live[Symbol.asyncIterator]();
  const first = it.next();
  const second = it.next();
  assert.deepEqual(await within(first, EMIT_MS, 'the first next()'), { done: false, value: [{ n: 0 }] });
  await db.execute('INSERT INTO t(v) VALUES (1)');
  assert.deepEqual(await within(second, EMIT_MS, 'the second next()'), { done: false, value: [{ n: 1 }] });
  // Pending ones end with the stream.
  const third = it.next();
  const fourth = it.next();
  live.end();
  assert.deepEqual(await within(third, EMIT_MS, 'the third next()'), { done: true, value: undefined });
  assert.deepEqual(await within(fourth, EMIT_MS, 'the fourth next()'), { done: true, value: undefined });
});

test('overlapping next() calls are all rejected by a failing first run', { timeout: 10_000 }, async (t) => {
  const db = await openMemory(t);
  const it = db.stream('SELECT * FROM missing_table')[Symbol.asyncIterator]();
  const calls = [it.next(), it.next()];
  for (const c of calls) {
    await assert.rejects(within(c, EMIT_MS, 'a next() of a failing stream'), { code: 'SQLITE_ERROR' });
  }
});
