// JS-thread time to decode (and touch) an N-row result of the bench's `items`, with the
// garbage collections it causes: experiment 081. The result is captured from a real
// select, then decoded again and again; each decoded result is dropped after its fields are
// read, as the bench's select cases do.
//   node bench/experiments/decode-rows.mjs <package root> <rows> [seconds=3] [database] [object|array]
import { join, resolve } from 'node:path';
import { capturedResult } from './captured-result.mjs';

const root = resolve(process.argv[2] ?? '.');
const n = Number(process.argv[3] ?? 1000);
const seconds = Number(process.argv[4] ?? 3);
const rowMode = process.argv[6] ?? 'object';
const database = process.argv[5] ?? join(root, '.tmp/bench/seed-42.db');
const { decodeRows, buf } = await capturedResult(root, database, 'SELECT * FROM items WHERE id > ? ORDER BY id LIMIT ?', [1000, n]);
let sink = 0;
const once = () => {
  const rows = decodeRows(buf, rowMode, 'auto');
  if (rowMode === 'array') for (const r of rows) sink += r[0] + r[1].length + r[2].length + r[3] + r[4].length + r[5];
  else for (const r of rows) sink += r.id + r.name.length + r.description.length + r.price + r.category.length + r.created_at;
};
for (const until = performance.now() + 1000; performance.now() < until; ) once();
const per = [];
for (let round = 0; round < 15; round++) {
  const t = performance.now();
  let k = 0;
  while (performance.now() - t < (seconds * 1000) / 15) {
    once();
    k++;
  }
  per.push(((performance.now() - t) * 1e6) / (k * n));
}
per.sort((a, b) => a - b);
console.log(`${root.padEnd(16)} ${n} ${rowMode} rows: ns per row (decode + touch, GC included): median ${per[7].toFixed(1)}, min ${per[0].toFixed(1)}, max ${per[14].toFixed(1)}`);
if (sink === 0.5) console.log(sink);
