// RSS over repeated 10k-row reads (README, target T11): prints RSS every 25 reads.
//   node bench/experiments/rss-plateau.mjs [reads=200]
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Database } from '../../dist/index.mjs';

const reads = Number(process.argv[2] ?? 200);
const dir = mkdtempSync(join(tmpdir(), 'qs-rss-'));
const db = await Database.open(join(dir, 'rss.db'));
await db.execute('CREATE TABLE items(id INTEGER PRIMARY KEY, name TEXT, description TEXT, price REAL, category TEXT, created_at INTEGER)');
await db.executeBatch(
  'INSERT INTO items VALUES (?, ?, ?, ?, ?, ?)',
  Array.from({ length: 10000 }, (_, i) => [i, `item ${i}`, `description of item ${i} `.padEnd(90, 'abcdefghij'), i / 7, `cat${i % 20}`, 1700000000 + i]),
);
const samples = [];
for (let i = 1; i <= reads; i++) {
  const rows = await db.select('SELECT * FROM items');
  if (rows.length !== 10000) throw new Error(`expected 10000 rows, got ${rows.length}`);
  if (i % 25 === 0) samples.push(`${i}:${(process.memoryUsage().rss / 1048576).toFixed(0)}MB`);
}
console.log(samples.join(' '));
await db.close();
rmSync(dir, { recursive: true, force: true });
