// Experiment 010: main-thread time (event-loop active time) of `select` + touching every
// field, end to end, for one package checkout; run it alternately for main and the branch.
//
//   node bench/experiments/select-main-thread.mjs <package root> <rows> <items database>
//
// <items database>: a file with the bench's `items` table (e.g. the seed-42.db that
// `node bench/run.mjs` leaves in its --tmp directory), at least 100,000 rows.
import { createRequire } from 'node:module';
import { resolve } from 'node:path';
const require = createRequire(import.meta.url);
const root = resolve(process.argv[2]);
const N = Number(process.argv[3] ?? 10);
const { Database } = require(root + '/dist/index.js');
const db = await Database.open(process.argv[4], { readers: 1, readonly: true });
const sql = 'SELECT * FROM items WHERE id > ? ORDER BY id LIMIT ?';
const touch = (rows) => { let a = 0; for (const r of rows) a += r.id + r.name.length + r.description.length + r.price + r.category.length + r.created_at; return a; };
const act = [];
for (let i = 0; i < 3000; i++) touch(await db.select(sql, [(i * 37) % 90000, N]));
for (let i = 0; i < 100; i++) {
  const e0 = performance.eventLoopUtilization();
  for (let j = 0; j < 50; j++) touch(await db.select(sql, [(i * 37 + j * 911) % 90000, N]));
  act.push(performance.eventLoopUtilization(e0).active / 50);
}
act.sort((a, b) => a - b);
console.log(root.padEnd(18), N, 'rows: median main-thread ms per select', act[50].toFixed(4));
await db.close();
