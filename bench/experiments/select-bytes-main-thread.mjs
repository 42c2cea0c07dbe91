// Main-thread (event-loop active) time of one awaited selectBytes, as the bench's json-10k
// case measures it (T7), and its wall time; medians over the calls (experiment 085).
// Runs on a copy of a benchmark database (the bench writes one per peer under .tmp/bench).
//   node bench/experiments/select-bytes-main-thread.mjs <package root> <bench db file> [calls=200] [rows=10000] [sleep ms=5]
// With --trace-gc, V8's log shows what set off each collection.
import { createRequire } from 'node:module';
import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

const [root, file, callsArg = '200', rowsArg = '10000', sleepArg = '5'] = process.argv.slice(2);
const require = createRequire(import.meta.url);
const { Database } = require(resolve(root) + '/dist/index.js');
const dir = mkdtempSync(join(tmpdir(), 'qs-json-main-'));
copyFileSync(file, join(dir, 'j.db'));
const db = await Database.open(join(dir, 'j.db'));
const sql = 'SELECT * FROM items WHERE id > ? ORDER BY id LIMIT ?';
const rows = Number(rowsArg);
const sleepMs = Number(sleepArg);
for (let i = 0; i < 20; i++) await db.selectBytes(sql, [i * 1000, rows]);
const active = [];
const wall = [];
let bytes = 0;
for (let q = 0; q < Number(callsArg); q++) {
  if (sleepMs > 0) await new Promise((r) => setTimeout(r, sleepMs));
  const e0 = performance.eventLoopUtilization();
  const t0 = performance.now();
  bytes += (await db.selectBytes(sql, [(q * 7919) % 80000, rows])).length;
  wall.push(performance.now() - t0);
  active.push(performance.eventLoopUtilization(e0).active);
}
const median = (a) => [...a].sort((x, y) => x - y)[a.length >> 1];
console.log(
  `selectBytes ${rows} rows (${(bytes / active.length / 1e6).toFixed(2)} MB): main ${(median(active) * 1000).toFixed(0)} µs, wall ${median(wall).toFixed(2)} ms (medians of ${active.length})`,
);
await db.close();
rmSync(dir, { recursive: true, force: true });
