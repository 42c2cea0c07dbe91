// Experiment 014: JS time to issue a point query (the synchronous part: checks, conversion,
// sending), one variant per process so every call site stays monomorphic. 64 calls are
// issued and timed, then awaited; 9,000 times; prints the median per call.
//   node bench/experiments/statement-submit.mjs text|statement [dist dir]
import { createRequire } from 'node:module';
import { join } from 'node:path';

const require = createRequire(import.meta.url);
const variant = process.argv[2] ?? 'text';
const { Database } = require(join(process.argv[3] ?? new URL('../../dist', import.meta.url).pathname, 'index.js'));
const db = await Database.open(':memory:');
await db.execute('CREATE TABLE items(id INTEGER PRIMARY KEY, name TEXT, price REAL)');
await db.executeBatch('INSERT INTO items VALUES (?, ?, ?)', Array.from({ length: 1000 }, (_, i) => [i + 1, `item ${i}`, i / 3]));
const sql = 'SELECT * FROM items WHERE id = ?';
const stmt = db.prepare(sql);
await stmt.selectOne([1]);
const call = variant === 'statement' ? (p) => stmt.selectOne(p) : (p) => db.selectOne(sql, p);
const perCall = [];
for (let r = 0; r < 9000; r++) {
  const t0 = performance.now();
  const ps = [];
  for (let i = 0; i < 64; i++) ps.push(call([(i % 1000) + 1]));
  perCall.push(((performance.now() - t0) * 1000) / 64);
  await Promise.all(ps);
}
perCall.sort((a, b) => a - b);
console.log(`${variant}: ${perCall[perCall.length >> 1].toFixed(2)} us of JS per call (median of ${perCall.length} batches of 64)`);
await db.close();
