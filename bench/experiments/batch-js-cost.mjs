// JS-thread cost of one executeBatch of items-shaped rows: the packing of its parameters alone
// (packParamSets), and the whole call's wall and event-loop time (T9).
//   node bench/experiments/batch-js-cost.mjs <package root> [rows=1000]
import { createRequire } from 'node:module';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
const require = createRequire(import.meta.url);
const root = (await import('node:path')).resolve(process.argv[2] ?? '.');
const { Database } = require(root + '/dist/index.js');
const { packParamSets } = require(root + '/dist/params.js');
const { itemRow } = await import('../lib/data.mjs');
let seed = 1; const rnd = () => ((seed = (seed * 48271) % 2147483647) / 2147483647);
const n = Number(process.argv[3] ?? 1000);
const rows = Array.from({ length: n }, (_, i) => itemRow(rnd, i));
const dir = mkdtempSync(join(tmpdir(), 'qs-bc-'));
const db = await Database.open(join(dir, 'b.db'));
await db.execute('CREATE TABLE writes (id INTEGER PRIMARY KEY, name TEXT NOT NULL, description TEXT NOT NULL, price REAL, category TEXT, created_at INTEGER)');
const sql = 'INSERT INTO writes (name, description, price, category, created_at) VALUES (?, ?, ?, ?, ?)';
for (let i = 0; i < 50; i++) { packParamSets(rows)?.release?.(); await db.executeBatch(sql, rows); await db.execute('DELETE FROM writes'); }
let tp = 0, tw = 0, tm = 0, k = 0;
for (let i = 0; i < 100; i++) {
  let t0 = performance.now(); packParamSets(rows)?.release?.(); tp += performance.now() - t0;
  const e0 = performance.eventLoopUtilization();
  t0 = performance.now(); await db.executeBatch(sql, rows); tw += performance.now() - t0;
  tm += performance.eventLoopUtilization(e0).active;
  await db.execute('DELETE FROM writes'); k++;
}
console.log(`${n} rows: pack ${(tp / k * 1000).toFixed(0)} us, executeBatch wall ${(tw / k * 1000).toFixed(0)} us, JS active ${(tm / k * 1000).toFixed(0)} us`);
await db.close();
rmSync(dir, { recursive: true, force: true });
