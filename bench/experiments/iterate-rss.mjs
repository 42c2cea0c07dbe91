// Peak RSS growth while iterating over N rows (issue 9: 1,000,000 rows under +64 MB), and
// wall / main-thread time per chunk size (docs/experiments/021-iterate-chunks.md).
//   node --expose-gc bench/experiments/iterate-rss.mjs <mode> [rows=1000000] [chunkSize]
// mode: iterate (quietsqlite db.iterate), select (quietsqlite db.select, for contrast),
//       better-sqlite3 (stmt.iterate). Each run is its own process so RSS is not shared.
import { mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { Database } from '../../dist/index.mjs';

const mode = process.argv[2] ?? 'iterate';
const rows = Number(process.argv[3] ?? 1_000_000);
const chunkSize = process.argv[4] === undefined ? undefined : Number(process.argv[4]);
const dir = mkdtempSync(join(tmpdir(), 'qs-iter-rss-'));
const path = join(dir, 'rows.db');

{
  const db = await Database.open(path);
  await db.execute('CREATE TABLE items(id INTEGER PRIMARY KEY, name TEXT, description TEXT, price REAL, category TEXT, created_at INTEGER)');
  await db.execute(
    `WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < ?)
     INSERT INTO items SELECT i, 'item ' || i, substr('description of item ' || i || ' abcdefghijabcdefghijabcdefghijabcdefghijabcdefghijabcdefghijabcdefghij', 1, 90), i / 7.0, 'cat' || (i % 20), 1700000000 + i FROM c`,
    [rows],
  );
  await db.close();
}
globalThis.gc?.();
const base = process.memoryUsage.rss();
let peak = base;
let n = 0;
let sum = 0;
const use = (r) => {
  sum += r.id + r.name.length + r.description.length + r.price + r.category.length + r.created_at;
  if (++n % 1000 === 0) peak = Math.max(peak, process.memoryUsage.rss());
};
const sql = 'SELECT * FROM items';
const e0 = performance.eventLoopUtilization();
const t0 = performance.now();
if (mode === 'better-sqlite3') {
  const B = createRequire(import.meta.url)('better-sqlite3');
  const db = new B(path);
  for (const r of db.prepare(sql).iterate()) use(r);
  db.close();
} else {
  const db = await Database.open(path);
  if (mode === 'select') for (const r of await db.select(sql)) use(r);
  else for await (const r of db.iterate(sql, [], { chunkSize })) use(r);
  await db.close();
}
const wall = performance.now() - t0;
const main = performance.eventLoopUtilization(e0).active;
peak = Math.max(peak, process.memoryUsage.rss());
if (n !== rows) throw new Error(`got ${n} rows, expected ${rows}`);
const mb = (b) => (b / 2 ** 20).toFixed(1);
console.log(
  `${mode}${chunkSize ? ` chunkSize=${chunkSize}` : ''} rows=${rows}: wall ${wall.toFixed(0)} ms, main-thread ${main.toFixed(0)} ms, ` +
    `RSS base ${mb(base)} MB, peak ${mb(peak)} MB, growth +${mb(peak - base)} MB (checksum ${sum})`,
);
rmSync(dir, { recursive: true, force: true });
