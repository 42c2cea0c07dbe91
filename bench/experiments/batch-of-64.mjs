// 64 point queries sent at once and awaited (Promise.all), 30,000 times (experiment 046):
// median JS time to send them, and median time until all resolved, per query.
//   node bench/experiments/batch-of-64.mjs <package root>
import { createRequire } from 'node:module';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
const require = createRequire(import.meta.url);
const dir = mkdtempSync(join(tmpdir(), 'qs-b64-'));
const { Database } = require(resolve(process.argv[2] ?? '.') + '/dist/index.js');
const db = await Database.open(join(dir, 'b64.db'));
await db.execute('CREATE TABLE items(id INTEGER PRIMARY KEY, name TEXT, price REAL)');
await db.executeBatch('INSERT INTO items VALUES (?, ?, ?)', Array.from({ length: 10000 }, (_, i) => [i + 1, `item ${i}`, i / 3]));
let x = 1;
const nextId = () => ((x = (x * 48271) % 2147483647) % 10000) + 1;
const issue = [], total = [];
for (let r = 0; r < 30000; r++) {
  const t0 = performance.now();
  const ps = Array.from({ length: 64 }, () => db.selectOne('SELECT * FROM items WHERE id = ?', [nextId()]));
  const t1 = performance.now();
  await Promise.all(ps);
  const t2 = performance.now();
  if (r > 2000) { issue.push(t1 - t0); total.push(t2 - t0); }
}
const med = (a) => a.sort((p, q) => p - q)[a.length >> 1] * 1000 / 64;
console.log(`issue ${med(issue).toFixed(2)} us/query  total ${med(total).toFixed(2)} us/query`);
await db.close();
rmSync(dir, { recursive: true, force: true });
