// Experiment 047: where the time of 64 point queries in flight goes on the bench's own rows
// (suite 1's `items`: six columns, a ~90-character description), by thread. Prints queries a
// second and, per thread of the process, the CPU time it ran (schedstat) per query; with
// `timed`, also how much of the JS thread's time was spent inside the addon's completion
// takes (most of it a poll waiting for results).
// PRAGMAS='<json>' adds open's `pragmas`, as in reader-cpu.mjs (experiment 050).
//   node bench/experiments/par64-threads.mjs <package root> [seconds] [lanes] [timed]
import { createRequire } from 'node:module';
import { existsSync, mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { ITEMS_DDL, INSERT_ITEM, ITEMS_ROWS, itemRow, subRandom } from '../lib/data.mjs';

const require = createRequire(import.meta.url);
const root = resolve(process.argv[2] ?? '.');
const seconds = Number(process.argv[3] ?? 4);
const lanes = Number(process.argv[4] ?? 64);
const timed = process.argv[5] === 'timed';
const { Database } = require(root + '/dist/index.js');
const native = require(root + '/dist/native.js');

const dir = resolve('.tmp/par64-threads');
mkdirSync(dir, { recursive: true });
const path = `${dir}/items.db`;
const seeded = existsSync(path);
const pragmas = process.env.PRAGMAS ? JSON.parse(process.env.PRAGMAS) : undefined;
const db = await Database.open(path, pragmas ? { pragmas } : {});
if (!seeded) {
  await db.execute(ITEMS_DDL('items'));
  const rnd = subRandom(42, 'items');
  const rows = Array.from({ length: ITEMS_ROWS }, (_, i) => itemRow(rnd, i + 1));
  await db.executeBatch(INSERT_ITEM('items'), rows);
}

let takeNs = 0n;
let takes = 0;
if (timed) {
  const b = native.binding;
  const take = b.dbTakeCompletions;
  b.dbTakeCompletions = (...args) => {
    const t0 = process.hrtime.bigint();
    try {
      return take(...args);
    } finally {
      takeNs += process.hrtime.bigint() - t0;
      takes++;
    }
  };
}

/** CPU time each thread has run, in ns, by "name/tid". */
function threadTimes() {
  const out = new Map();
  for (const tid of readdirSync('/proc/self/task')) {
    try {
      const name = readFileSync(`/proc/self/task/${tid}/comm`, 'utf8').trim();
      const ran = Number(readFileSync(`/proc/self/task/${tid}/schedstat`, 'utf8').split(' ')[0]);
      out.set(`${name}/${tid}`, ran);
    } catch {}
  }
  return out;
}

let x = 1;
const nextId = () => ((x = (x * 48271) % 2147483647) % ITEMS_ROWS) + 1;
let sink = 0;
const sql = 'SELECT * FROM items WHERE id = ?';
// Warm up (statement caches, the page cache, JIT).
const warmEnd = performance.now() + 1000;
await Promise.all(Array.from({ length: lanes }, async () => { while (performance.now() < warmEnd) sink += (await db.selectOne(sql, [nextId()])).description.length; }));
takeNs = 0n;
takes = 0;

const before = threadTimes();
const t0 = performance.now();
const end = t0 + seconds * 1000;
let n = 0;
await Promise.all(
  Array.from({ length: lanes }, async () => {
    while (performance.now() < end) {
      const r = await db.selectOne(sql, [nextId()]);
      sink += r.description.length + r.name.length + r.price + r.created_at + r.category.length + r.id;
      n++;
    }
  }),
);
const wall = performance.now() - t0;
const after = threadTimes();
const qps = n / (wall / 1000);
console.log(`${lanes} lanes: ${Math.round(qps)} queries/s, ${((wall * 1000) / n).toFixed(2)} us wall per query`);
const rows = [];
for (const [k, ran] of after) {
  const d = ran - (before.get(k) ?? 0);
  if (d > 1e6) rows.push([k, d]);
}
rows.sort((a, b) => b[1] - a[1]);
for (const [k, d] of rows) console.log(`  ${k.padEnd(28)} ${(d / 1e6).toFixed(0).padStart(6)} ms  ${(d / 1e3 / n).toFixed(2)} us/query  ${((d / 1e6 / wall) * 100).toFixed(0)}% of wall`);
if (timed) console.log(`  inside takes: ${(Number(takeNs) / 1e3 / n).toFixed(2)} us/query, ${takes} takes (${(n / takes).toFixed(1)} results each)`);
await db.close();
if (sink === 0.5) console.log(sink);
