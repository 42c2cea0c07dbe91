// Point queries by primary key: sequential awaits, and 64 in flight.
// Used by experiments 002 (wake-up batching) and 003 (reader parking).
//   node bench/experiments/point-queries.mjs [seconds=2]
import { createRequire } from 'node:module';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';

const require = createRequire(import.meta.url);
const { Database } = require('../../dist/index.js');
const seconds = Number(process.argv[2] ?? 2);
const N = 10000;
const file = join(mkdtempSync(join(tmpdir(), 'qs-point-')), 'p.db');
const db = await Database.open(file);
await db.execute('CREATE TABLE items(id INTEGER PRIMARY KEY, name TEXT, price REAL)');
await db.executeBatch('INSERT INTO items VALUES (?, ?, ?)', Array.from({ length: N }, (_, i) => [i + 1, `item ${i}`, i / 3]));
const sql = 'SELECT * FROM items WHERE id = ?';
let x = 1;
const nextId = () => (x = (x * 48271) % 2147483647) % N + 1;

async function sequential(ms) {
  let n = 0;
  const end = performance.now() + ms;
  const elu0 = performance.eventLoopUtilization();
  while (performance.now() < end) {
    const row = await db.selectOne(sql, [nextId()]);
    if (row === undefined) throw new Error('missing row');
    n++;
  }
  const elu = performance.eventLoopUtilization(elu0);
  return { qps: n / (ms / 1000), jsUsPerQuery: (elu.active * 1000) / n };
}

async function inFlight(ms, width) {
  let n = 0;
  const end = performance.now() + ms;
  const elu0 = performance.eventLoopUtilization();
  async function lane() {
    while (performance.now() < end) {
      await db.selectOne(sql, [nextId()]);
      n++;
    }
  }
  await Promise.all(Array.from({ length: width }, lane));
  const elu = performance.eventLoopUtilization(elu0);
  return { qps: n / (ms / 1000), jsUsPerQuery: (elu.active * 1000) / n };
}

await sequential(300);
await inFlight(300, 64);
const seq = await sequential(seconds * 1000);
const par = await inFlight(seconds * 1000, 64);
console.log(`sequential qps ${seq.qps.toFixed(0)}  js us/query ${seq.jsUsPerQuery.toFixed(2)}`);
console.log(`64-in-flight qps ${par.qps.toFixed(0)}  js us/query ${par.jsUsPerQuery.toFixed(2)}`);
await db.close();
