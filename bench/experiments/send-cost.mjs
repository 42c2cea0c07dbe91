// The synchronous part of an awaited tx.execute (from the call to the promise it returns)
// and the whole round trip, with the bench's five values, five numbers, or one number as
// parameters (experiments 078 and 079).
//   node bench/experiments/send-cost.mjs <root of a built checkout>
import { createRequire } from 'node:module';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
const require = createRequire(import.meta.url);
const { Database } = require(resolve(process.argv[2] ?? '.') + '/dist/index.js');
const dir = mkdtempSync(join(tmpdir(), 'qs-send-'));
const db = await Database.open(join(dir, 'r.db'));
await db.execute(`CREATE TABLE w (id INTEGER PRIMARY KEY, a, b, c, d, e)`);
const words = (n) => 'abcdefghij'.repeat(20).slice(0, n);
const kinds = {
  strings: Array.from({ length: 1000 }, (_, i) => [words(12) + i, words(90), 12.5 + i, 'category ' + (i % 20), 1_700_000_000 + i]),
  numbers: Array.from({ length: 1000 }, (_, i) => [i, i * 2, 12.5 + i, i % 20, 1_700_000_000 + i]),
  one: Array.from({ length: 1000 }, (_, i) => [i]),
};
const sqls = { strings: 'INSERT INTO w (a, b, c, d, e) VALUES (?, ?, ?, ?, ?)', numbers: 'INSERT INTO w (a, b, c, d, e) VALUES (?, ?, ?, ?, ?)', one: 'INSERT INTO w (a) VALUES (?)' };
const out = {};
for (let round = 0; round < 3; round++) for (const k of Object.keys(kinds)) {
  const rows = kinds[k], sql = sqls[k];
  const snd = [], lat = [];
  for (let t = 0; t < 15; t++) {
    await db.transaction(async (tx) => { for (let i = 0; i < rows.length; i++) { const t0 = performance.now(); const p = tx.execute(sql, rows[i]); const t1 = performance.now(); await p; const t2 = performance.now(); if (t >= 3) { snd.push(t1 - t0); lat.push(t2 - t0); } } });
    await db.execute('DELETE FROM w');
  }
  const med = (a) => (a.sort((x, y) => x - y)[a.length >> 1] * 1000).toFixed(2);
  console.log(`${k.padEnd(8)} send p50 ${med(snd)} µs, whole p50 ${med(lat)} µs`);
}
await db.close(); rmSync(dir, { recursive: true, force: true });
