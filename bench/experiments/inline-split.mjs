// Where the time of an inline point query goes (experiment 022): the whole awaited
// selectOne, the native readInline call alone (timed by replacing the addon's dbReadInline export), the
// bare native call repeated, and better-sqlite3's get() on the same file, in one process.
//   node bench/experiments/inline-split.mjs [rounds=3]
import { createRequire } from 'node:module';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const require = createRequire(import.meta.url);
const native = require('../../native/quietsqlite.node');
const { Database } = require('../../dist/index.js');
const BetterSqlite3 = require('better-sqlite3');
let nativeMs = 0;
let calls = 0;
let captured;
const readInline = native.dbReadInline;
native.dbReadInline = function (...args) {
  const t = performance.now();
  const r = readInline.apply(this, args);
  nativeMs += performance.now() - t;
  calls++;
  captured ??= args;
  return r;
};
const dir = mkdtempSync(join(tmpdir(), 'qs-inline-split-'));
const file = join(dir, 's.db');
const db = await Database.open(file, { inlineReads: true });
await db.execute('CREATE TABLE items(id INTEGER PRIMARY KEY, name TEXT, price REAL)');
await db.executeBatch('INSERT INTO items VALUES (?, ?, ?)', Array.from({ length: 10000 }, (_, i) => [i + 1, `item ${i}`, i / 3]));
const bs3 = new BetterSqlite3(file);
const stmt = bs3.prepare('SELECT * FROM items WHERE id = ?');
const sql = 'SELECT * FROM items WHERE id = ?';
let x = 1;
const next = () => ((x = (x * 48271) % 2147483647) % 10000) + 1;
const per = (ms, n) => ((ms * 1000) / n).toFixed(2);
for (let round = 0; round < Number(process.argv[2] ?? 3); round++) {
  nativeMs = 0;
  calls = 0;
  let t = performance.now();
  let n = 0;
  while (performance.now() - t < 700) {
    await db.selectOne(sql, [next()]);
    n++;
  }
  const whole = per(performance.now() - t, n);
  const args = captured;
  t = performance.now();
  let m = 0;
  while (performance.now() - t < 300) {
    readInline(args[0], args[1], [next()], args[3], args[4]);
    m++;
  }
  const bare = per(performance.now() - t, m);
  t = performance.now();
  let k = 0;
  while (performance.now() - t < 300) {
    stmt.get(next());
    k++;
  }
  console.log(`selectOne inline ${whole} us  (readInline ${per(nativeMs, calls)} us; bare loop ${bare} us)  better-sqlite3 get ${per(performance.now() - t, k)} us`);
}
const d = await db.diagnostics();
console.log(`inline reads ${d.inlineReads}, fallbacks ${d.inlineFallbacks}`);
bs3.close();
await db.close();
rmSync(dir, { recursive: true, force: true });
