// The latency of each awaited tx.execute in 1k-row transactions of the bench's `writes` rows
// (five parameters, about 110 characters of text, the category index): T14's loop, timed
// call by call (experiments 073, 078, 079).
//   node bench/experiments/tx-execute-latency.mjs <root of a built checkout>
import { createRequire } from 'node:module';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { CREATE_WRITES, INSERT_WRITES, writesRows } from './writes-rows.mjs';
const root = resolve(process.argv[2] ?? '.');
const require = createRequire(import.meta.url);
const { Database } = require(root + '/dist/index.js');
const dir = mkdtempSync(join(tmpdir(), 'qs-t14-'));
const db = await Database.open(join(dir, 'r.db'), { pragmas: { journal_mode: 'WAL', synchronous: 'NORMAL' } });
await db.execute(CREATE_WRITES);
const sql = INSERT_WRITES;
const rows = writesRows(1000);
const lat = [];
const body = async (tx) => { for (let i = 0; i < rows.length; i++) { const t0 = performance.now(); await tx.execute(sql, rows[i]); lat.push(performance.now() - t0); } };
for (let k = 0; k < 40; k++) {
  if (k === 5) lat.length = 0;
  await db.transaction(body);
  await db.execute('DELETE FROM writes');
}
lat.sort((a, b) => a - b);
const q = (p) => (lat[Math.floor(p * (lat.length - 1))] * 1000).toFixed(1);
const sum = lat.reduce((a, b) => a + b, 0) * 1000;
const over = (t) => lat.filter((x) => x * 1000 > t);
const o10 = over(10), o30 = over(30);
console.log(`mean ${(sum / lat.length).toFixed(2)} p10 ${q(0.1)} p50 ${q(0.5)} p90 ${q(0.9)} p99 ${q(0.99)} p999 ${q(0.999)} max ${q(1)}; >10us ${o10.length} (${(o10.reduce((a,b)=>a+b,0)*1000/lat.length).toFixed(2)} us/op) >30us ${o30.length} (${(o30.reduce((a,b)=>a+b,0)*1000/lat.length).toFixed(2)} us/op)`);
await db.close(); rmSync(dir, { recursive: true, force: true });
