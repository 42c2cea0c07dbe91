// Awaited autocommit inserts into the bench's `writes` table (suite 7's "100 single
// inserts"), on a copy of the bench database: µs per insert, JS-thread CPU, and how many of
// the JS thread's polls took a result (experiment 019 follow-up).
//   node bench/experiments/insert-poll.mjs <root> <seed db> [samples=30]
import { copyFileSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { INSERT_ITEM, itemRow, prng } from '../lib/data.mjs';

const [rootArg, file, samplesArg = '30'] = process.argv.slice(2);
const root = resolve(rootArg);
const require = createRequire(import.meta.url);
const { Database } = require(join(root, 'dist/index.js'));
const { NativeDatabase } = require(join(root, 'native/quietsqlite.node'));
const take = NativeDatabase.prototype.takeCompletions;
let polls = 0;
let hits = 0;
NativeDatabase.prototype.takeCompletions = function (us) {
  polls++;
  const b = take.call(this, us);
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
const walls = [];
const mains = [];
for (let s = 0; s < Number(samplesArg) + 3; s++) {
  const rows = Array.from({ length: 100 }, (_, i) => itemRow(rnd, i));
  const m0 = mainNs();
  const t0 = performance.now();
  for (let i = 0; i < 100; i++) await db.execute(sql, rows[i]);
  const wall = (performance.now() - t0) * 10; // µs per insert
  const main = (mainNs() - m0) / 100 / 1000;
  if (s >= 3) {
    walls.push(wall);
    mains.push(main);
  }
  await db.execute('DELETE FROM writes');
}
await db.close();
for (const ext of ['', '-wal', '-shm']) rmSync(copy + ext, { force: true });
const med = (a) => [...a].sort((x, y) => x - y)[a.length >> 1];
console.log(`insert wall ${med(walls).toFixed(1)} us, JS ${med(mains).toFixed(1)} us; polls ${polls}, took ${hits}`);
