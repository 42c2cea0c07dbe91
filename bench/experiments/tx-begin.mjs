// Awaited transactions, one after another (experiment 026): the interactive transaction of
// T13 (insert, read back, delete) and an empty one (BEGIN and COMMIT only). Prints µs per
// transaction, twice each, after a warm-up. Run it alternately for two checkouts.
//   node bench/experiments/tx-begin.mjs <package root>
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { pathToFileURL } from 'node:url';

const root = resolve(process.argv[2] ?? '.');
const { Database } = await import(pathToFileURL(join(root, 'dist/index.mjs')).href);
const dir = mkdtempSync(join(tmpdir(), 'qs-tx-begin-'));
const db = await Database.open(join(dir, 'a.db'));
await db.execute('CREATE TABLE writes(id INTEGER PRIMARY KEY, name TEXT, price REAL)');
const insert = 'INSERT INTO writes(name, price) VALUES (?, ?)';
const interactive = () =>
  db.transaction(async (tx) => {
    const r = await tx.execute(insert, ['t', 600]);
    const row = await tx.selectOne('SELECT * FROM writes WHERE id = ?', [r.lastInsertRowid]);
    if (row.price > 500) await tx.execute('DELETE FROM writes WHERE id = ?', [row.id]);
  });
const empty = () => db.transaction(async () => {});
for (const [name, run] of [['interactive', interactive], ['empty', empty], ['interactive', interactive], ['empty', empty]]) {
  for (let i = 0; i < 300; i++) await run();
  const t0 = performance.now();
  for (let i = 0; i < 3000; i++) await run();
  console.log(`${name} ${((performance.now() - t0) / 3).toFixed(1)} us`);
}
await db.close();
rmSync(dir, { recursive: true, force: true });
