// Experiment 017: a CPU profile of 64 lanes of point queries (run under node --cpu-prof;
// summarize with select-profile.mjs --summary).
//   node --cpu-prof --cpu-prof-dir=DIR bench/experiments/par64-profile.mjs <package root>
import { createRequire } from 'node:module';
import { resolve } from 'node:path';
const require = createRequire(import.meta.url);
const { Database } = require(resolve(process.argv[2] ?? '.') + '/dist/index.js');
const db = await Database.open(':memory:');
await db.execute('CREATE TABLE items(id INTEGER PRIMARY KEY, name TEXT, price REAL)');
await db.executeBatch('INSERT INTO items VALUES (?, ?, ?)', Array.from({ length: 10000 }, (_, i) => [i + 1, `item ${i}`, i / 3]));
let x = 1; const nextId = () => ((x = (x * 48271) % 2147483647) % 10000) + 1;
const end = performance.now() + 4000; let n = 0;
await Promise.all(Array.from({ length: 64 }, async () => { while (performance.now() < end) { await db.selectOne('SELECT * FROM items WHERE id = ?', [nextId()]); n++; } }));
console.log(n / 4, 'qps');
await db.close();
