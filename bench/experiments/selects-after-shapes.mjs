// 10k-row selects of `items` for 4 s, each result's rows read, with or without 750 selects
// over the bench's five shape tables first (suite 4): how many selects ran, and their
// median and p90 (experiment 080: V8's pretenuring mode; compare with
// `node --no-allocation-site-pretenuring`; experiment 081 added array rows).
//   node bench/experiments/selects-after-shapes.mjs <root> [shapes] [database] [object|array]
import { createRequire } from 'node:module';
import { join, resolve } from 'node:path';
const require = createRequire(import.meta.url);
const root = resolve(process.argv[2] ?? '.');
const { Database } = require(root + '/dist/index.js');
// The bench's seeded database (made by a first `npm run bench`).
const db = await Database.open(process.argv[4] ?? join(root, '.tmp/bench/seed-42.db'), { readonly: true });
const pre = process.argv[3] === 'shapes';
const options = { rowMode: process.argv[5] ?? 'object' };
let sink = 0;
if (pre) {
  for (const t of ['shape_narrow', 'shape_wide', 'shape_text', 'shape_numeric', 'shape_nulls']) {
    const s = db.prepare(`SELECT * FROM ${t} WHERE id > ? ORDER BY id LIMIT ?`);
    for (let k = 0; k < 150; k++) { const rows = await s.select([(k * 37) % 5000, 1000], options); for (const r of rows) for (const key in r) { const v = r[key]; sink += typeof v === 'string' ? v.length : 1; } }
  }
}
const s = db.prepare('SELECT * FROM items WHERE id > ? ORDER BY id LIMIT ?');
const times = [];
const t0 = performance.now();
let q = 0;
while (performance.now() - t0 < 4000) {
  const a = performance.now();
  const rows = await s.select([(q++ * 7919) % 80000, 10000], options);
  const b = performance.now();
  if (options.rowMode === 'array') for (const r of rows) sink += r[0] + r[1].length;
  else for (const r of rows) sink += r.id + r.name.length;
  times.push(b - a);
}
times.sort((x, y) => x - y);
console.log(`${pre ? 'after shapes' : 'fresh       '}, ${options.rowMode} rows: ${q} selects in 4 s, median ${times[times.length >> 1].toFixed(2)} ms, p90 ${times[Math.floor(times.length * 0.9)].toFixed(2)} ms`);
await db.close();
