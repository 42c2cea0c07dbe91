// The latency of each awaited tx.execute in 1k-row transactions of the bench's `writes` rows
// (five parameters, about 110 characters of text, the category index): T14's loop, timed
// call by call (experiments 073, 078, 079).
//   node bench/experiments/tx-execute-latency.mjs <root of a built checkout>
import { createRequire } from 'node:module';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
const root = resolve(process.argv[2] ?? '.');
const require = createRequire(import.meta.url);
const { Database } = require(root + '/dist/index.js');
const dir = mkdtempSync(join(tmpdir(), 'qs-t14-'));
const db = await Database.open(join(dir, 'r.db'), { pragmas: { journal_mode: 'WAL', synchronous: 'NORMAL' } });
await db.execute(`CREATE TABLE writes (id INTEGER PRIMARY KEY, name TEXT NOT NULL, description TEXT NOT NULL, price REAL NOT NULL, category TEXT NOT NULL, created_at INTEGER NOT NULL);CREATE INDEX writes_category ON writes(category);`);
const sql = 'INSERT INTO writes (name, description, price, category, created_at) VALUES (?, ?, ?, ?, ?)';
const w = ['alpha','beta','gamma','delta','omega','sigma','kappa','zeta'];
let s = 7; const rnd = () => ((s = (s * 48271) % 2147483647) / 2147483647);
const words = (a, b) => { let t = ''; const n = a + Math.floor(rnd() * (b - a)); while (t.length < n) t += w[Math.floor(rnd() * 8)] + ' '; return t.slice(0, n); };
const rows = Array.from({ length: 1000 }, (_, i) => [`${words(8, 16)} #${i}`, words(80, 100), Math.round(rnd() * 1e5) / 100, 'category ' + (i % 20), 1_700_000_000 + i]);
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
