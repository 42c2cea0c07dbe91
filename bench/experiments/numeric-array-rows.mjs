// Rows of the bench's all-number table `shape_numeric` (id, 3 INTEGER, 3 REAL), 5,000 at a
// time: JS-thread time to decode and read them, garbage collection included, and the heap
// bytes a kept row costs (experiment 081: array rows by a rest parameter hold any value, so
// their doubles are boxed where an array literal's could be unboxed).
//   node --expose-gc bench/experiments/numeric-array-rows.mjs <package root> [array|object] [database]
import { join, resolve } from 'node:path';
import { capturedResult } from './captured-result.mjs';

const root = resolve(process.argv[2] ?? '.');
const rowMode = process.argv[3] ?? 'array';
const database = process.argv[4] ?? join(root, '.tmp/bench/seed-42.db');
const N = 5000;
const { decodeRows, buf } = await capturedResult(root, database, 'SELECT * FROM shape_numeric WHERE id > ? ORDER BY id LIMIT ?', [0, N]);
let sink = 0;
const once = () => {
  const rows = decodeRows(buf, rowMode, 'auto');
  if (rowMode === 'array') for (const r of rows) for (let j = 0; j < r.length; j++) sink += r[j];
  else for (const r of rows) for (const k in r) sink += r[k];
  return rows;
};
for (const until = performance.now() + 1000; performance.now() < until; ) once();
const per = [];
for (let round = 0; round < 11; round++) {
  const t = performance.now();
  let k = 0;
  while (performance.now() - t < 200) {
    once();
    k++;
  }
  per.push(((performance.now() - t) * 1e6) / (k * N));
}
per.sort((a, b) => a - b);
globalThis.gc();
const before = process.memoryUsage().heapUsed;
const kept = [];
for (let i = 0; i < 20; i++) kept.push(once());
globalThis.gc();
const bytes = (process.memoryUsage().heapUsed - before) / (kept.length * N);
console.log(`${root.padEnd(16)} ${rowMode} rows: median ${per[5].toFixed(1)} ns per row (min ${per[0].toFixed(1)}); ${bytes.toFixed(0)} heap bytes per kept row`);
if (sink === 0.5) console.log(sink);
