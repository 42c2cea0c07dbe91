// Interactive transactions (insert, read back, conditional delete: the bench's T13 body) in
// samples of 50, from the first transaction of the process on: the bench warms a case up
// for only 100 transactions, so most of its samples fall in V8's warm-up of the transaction
// path. Prints the median of each 20 samples in order, then the last 40 samples sorted
// (µs per transaction). Experiment 058.
//   node bench/experiments/tx-warmup.mjs <package root> [samples=200]
import { createRequire } from 'node:module';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';

const require = createRequire(import.meta.url);
const { Database } = require(resolve(process.argv[2] ?? '.') + '/dist/index.js');
const samples = Number(process.argv[3] ?? 200);
const dir = mkdtempSync(join(tmpdir(), 'qs-txwarm-'));
const db = await Database.open(join(dir, 'w.db'));
await db.execute('CREATE TABLE writes(id INTEGER PRIMARY KEY, name TEXT, price REAL)');
const insert = 'INSERT INTO writes(name, price) VALUES (?, ?)';
const body = async (tx) => {
  const r = await tx.execute(insert, ['t', 600]);
  const row = await tx.selectOne('SELECT * FROM writes WHERE id = ?', [r.lastInsertRowid]);
  if (row.price > 500) await tx.execute('DELETE FROM writes WHERE id = ?', [row.id]);
};
const out = [];
for (let s = 0; s < samples; s++) {
  const t0 = performance.now();
  for (let i = 0; i < 50; i++) await db.transaction(body);
  out.push(((performance.now() - t0) * 1000) / 50);
}
await db.close();
rmSync(dir, { recursive: true, force: true });
const median = (a) => [...a].sort((x, y) => x - y)[a.length >> 1];
const groups = [];
for (let i = 0; i < out.length; i += 20) groups.push(median(out.slice(i, i + 20)).toFixed(0));
console.log(`medians of 20 samples: ${groups.join(' ')}`);
console.log(`last 40 sorted: ${out.slice(-40).sort((x, y) => x - y).map((x) => x.toFixed(0)).join(' ')}`);
