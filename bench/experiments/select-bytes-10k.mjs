// 10k-row selectBytes in a loop (T6's query; experiment 045): median wall ms per result.
// Runs on a copy of a benchmark database (the bench writes one per peer under .tmp/bench).
//   node bench/experiments/select-bytes-10k.mjs <package root> <bench db file> [ms=4000]
import { createRequire } from 'node:module';
import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

const [root, file, ms = '4000'] = process.argv.slice(2);
const require = createRequire(import.meta.url);
const { Database } = require(resolve(root) + '/dist/index.js');
const dir = mkdtempSync(join(tmpdir(), 'qs-json10k-'));
copyFileSync(file, join(dir, 'j.db'));
const db = await Database.open(join(dir, 'j.db'));
const sql = 'SELECT * FROM items WHERE id > ? ORDER BY id LIMIT ?';
let bytes = 0;
for (let i = 0; i < 50; i++) bytes += (await db.selectBytes(sql, [i * 1000, 10000])).length;
const times = [];
const end = performance.now() + Number(ms);
for (let q = 0; performance.now() < end; q++) {
  const t0 = performance.now();
  bytes += (await db.selectBytes(sql, [(q * 7919) % 80000, 10000])).length;
  times.push(performance.now() - t0);
}
times.sort((a, b) => a - b);
console.log(`selectBytes 10k: median ${times[times.length >> 1].toFixed(2)} ms over ${times.length}; ${(bytes / (times.length + 50) / 1e6).toFixed(2)} MB each`);
await db.close();
rmSync(dir, { recursive: true, force: true });
