// Awaited autocommit inserts into the bench's `writes` table (suite 7's "100 single
// inserts"), on a copy of the bench database: µs per insert, JS-thread CPU, and how many of
// the JS thread's polls took a result (experiment 019 follow-up). Then, per insert and per
// kind of thread (the JS thread, V8's helpers, the writer, ...): CPU time and time spent
// runnable but waiting for a CPU (the kernel's schedstat), to see contention.
//   node bench/experiments/insert-poll.mjs <root> <seed db> [samples=30]
import { copyFileSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { INSERT_ITEM, itemRow, prng } from '../lib/data.mjs';

const [rootArg, file, samplesArg = '30'] = process.argv.slice(2);
const root = resolve(rootArg);
const require = createRequire(import.meta.url);
const { Database } = require(join(root, 'dist/index.js'));
const native = require(join(root, 'native/quietsqlite.node'));
const take = native.dbTakeCompletions;
let polls = 0;
let hits = 0;
native.dbTakeCompletions = function (handle, us, ...rest) {
  // A take with 0 is the event loop's delivery (experiment 042), not a poll.
  if (us === 0) return take(handle, us, ...rest);
  polls++;
  const b = take(handle, us, ...rest);
  if (b !== undefined) hits++;
  return b;
};
const copy = `/tmp/insert-poll-${process.pid}.db`;
copyFileSync(file, copy);
// OPTS: open options as JSON (e.g. the bench's pragmas), defaults otherwise.
const db = await Database.open(copy, process.env.OPTS ? JSON.parse(process.env.OPTS) : undefined);
const sql = INSERT_ITEM('writes');
const rnd = prng(7);
const mainNs = () => Number(readFileSync(`/proc/self/task/${process.pid}/schedstat`, 'utf8').split(' ')[0]);
/** Per thread kind ('js' or the thread's name): [cpu ns, run-queue wait ns] summed over threads. */
const threads = () => {
  const byKind = new Map();
  for (const tid of readdirSync('/proc/self/task')) {
    try {
      const kind = tid === String(process.pid) ? 'js' : readFileSync(`/proc/self/task/${tid}/comm`, 'utf8').trim();
      const [cpu, wait] = readFileSync(`/proc/self/task/${tid}/schedstat`, 'utf8').split(' ').map(Number);
      const sum = byKind.get(kind) ?? [0, 0];
      byKind.set(kind, [sum[0] + cpu, sum[1] + wait]);
    } catch {
      // The thread ended between listing and reading: its time is not counted.
    }
  }
  return byKind;
};
const walls = [];
const mains = [];
const perThread = new Map();
for (let s = 0; s < Number(samplesArg) + 3; s++) {
  const rows = Array.from({ length: 100 }, (_, i) => itemRow(rnd, i));
  const before = threads();
  const m0 = mainNs();
  const t0 = performance.now();
  for (let i = 0; i < 100; i++) await db.execute(sql, rows[i]);
  const wall = (performance.now() - t0) * 10; // µs per insert
  const main = (mainNs() - m0) / 100 / 1000;
  const after = threads();
  if (s >= 3) {
    walls.push(wall);
    mains.push(main);
    for (const [kind, [cpu, wait]] of after) {
      const [cpu0, wait0] = before.get(kind) ?? [0, 0];
      const sum = perThread.get(kind) ?? [0, 0];
      perThread.set(kind, [sum[0] + cpu - cpu0, sum[1] + wait - wait0]);
    }
  }
  await db.execute('DELETE FROM writes');
}
await db.close();
for (const ext of ['', '-wal', '-shm']) rmSync(copy + ext, { force: true });
const med = (a) => [...a].sort((x, y) => x - y)[a.length >> 1];
console.log(`insert wall ${med(walls).toFixed(1)} us, JS ${med(mains).toFixed(1)} us; polls ${polls}, took ${hits}`);
const inserts = walls.length * 100;
for (const [kind, [cpu, wait]] of perThread) {
  if (cpu + wait <= 0) continue;
  const us = (ns) => (ns / inserts / 1000).toFixed(1);
  console.log(`  ${kind.padEnd(16)} cpu ${us(cpu)} us, waiting for a CPU ${us(wait)} us per insert (mean)`);
}
