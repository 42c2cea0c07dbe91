// Experiment 048: peak RSS over 100 reads of 10,000 rows (as suite `memory`, T11), to see
// what an allocator keeps resident. Uses the database par64-threads.mjs seeds.
//   node bench/experiments/rss-10k.mjs <package root> [reads]
import { createRequire } from 'node:module';
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';

const require = createRequire(import.meta.url);
const { Database } = require(resolve(process.argv[2] ?? '.') + '/dist/index.js');
const path = resolve('.tmp/par64-threads/items.db');
if (!existsSync(path)) throw new Error('run bench/experiments/par64-threads.mjs first (it seeds the database)');
const db = await Database.open(path);
let peak = 0;
let sink = 0;
const mb = (b) => (b / 1048576).toFixed(1);
const reads = Number(process.argv[3] ?? 100);
const trace = [];
for (let i = 0; i < reads; i++) {
  const rows = await db.select('SELECT * FROM items WHERE id > ? ORDER BY id LIMIT 10000', [(i * 7919) % 90000]);
  for (const r of rows) sink += r.id + r.name.length + r.description.length + r.price + r.category.length + r.created_at;
  const rss = process.memoryUsage.rss();
  if (rss > peak) peak = rss;
  if (i % 25 === 24) trace.push(mb(rss));
}
console.log(`peak RSS ${mb(peak)} MB, last ${mb(process.memoryUsage.rss())} MB; every 25 reads: ${trace.join(" ")}`);
await db.close();
if (sink === 0.5) console.log(sink);
