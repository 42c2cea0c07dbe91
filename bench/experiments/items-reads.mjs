// Reads from a 100,000-row table shaped like the benchmark's `items` (15 MB), for A/B runs of
// two builds (experiments 027-029). One case per process; alternate the builds.
//
//   node bench/experiments/items-reads.mjs <package root> select <rows> [seconds=4]
//   node bench/experiments/items-reads.mjs <package root> json <rows> [seconds=4]
//   node bench/experiments/items-reads.mjs <package root> point [count=200000]
//
// select/json: awaited `SELECT * ... WHERE id > ? ORDER BY id LIMIT rows` from scattered
// starts; prints wall and event-loop active time per select. point: awaited point queries
// by id. INLINE=1 opens with `inlineReads`; CACHE=<n> adds `pragmas: { cache_size: n }`.
// The file is built once at /tmp/quietsqlite-items-100k.db (delete it to rebuild).
import { createRequire } from 'node:module';
import { existsSync, renameSync, rmSync } from 'node:fs';
import { resolve } from 'node:path';

const [rootArg, mode = 'select', arg = '', secondsArg = '4'] = process.argv.slice(2);
const require = createRequire(import.meta.url);
const { Database } = require(resolve(rootArg) + '/dist/index.js');
const FILE = '/tmp/quietsqlite-items-100k.db';

if (!existsSync(FILE)) {
  const building = `${FILE}.${process.pid}`;
  const db = await Database.open(building);
  await db.execute(
    'CREATE TABLE items(id INTEGER PRIMARY KEY, name TEXT, description TEXT, price REAL, category TEXT, created_at INTEGER)',
  );
  const words = 'amber basalt cedar delta ember fjord granite harbor indigo juniper kelp lantern meadow nimbus';
  await db.executeBatch(
    'INSERT INTO items VALUES (?, ?, ?, ?, ?, ?)',
    Array.from({ length: 100_000 }, (_, i) => [
      i + 1,
      `granite harbor #${i}`,
      `${words}${i}`,
      Math.round((i * 1000) / 7) / 100,
      `cat-${String(i % 200).padStart(3, '0')}`,
      1_700_000_000 + i,
    ]),
  );
  await db.execute('PRAGMA wal_checkpoint(TRUNCATE)');
  await db.close();
  renameSync(building, FILE);
  rmSync(`${building}-wal`, { force: true });
  rmSync(`${building}-shm`, { force: true });
}

const pragmas = { journal_mode: 'WAL', synchronous: 'NORMAL' };
if (process.env.CACHE) pragmas.cache_size = Number(process.env.CACHE);
const db = await Database.open(FILE, { pragmas, ...(process.env.INLINE ? { inlineReads: true } : {}) });
const label = `${rootArg.padEnd(18)} ${mode}${process.env.INLINE ? ' inline' : ''}${process.env.CACHE ? ` cache=${process.env.CACHE}` : ''}`;

if (mode === 'point') {
  const count = Number(arg || 200_000);
  const sql = 'SELECT * FROM items WHERE id = ?';
  let sink = 0;
  const t0 = performance.now();
  for (let i = 0; i < count; i++) {
    const r = await db.selectOne(sql, [1 + ((i * 7919) % 100_000)]);
    sink += r.id + r.name.length + r.description.length + r.price + r.category.length + r.created_at;
  }
  console.log(`${label}: ${(((performance.now() - t0) * 1000) / count).toFixed(2)} µs per query (${sink > 0})`);
} else {
  const rows = Number(arg || 10_000);
  const ms = Number(secondsArg) * 1000;
  const sql = 'SELECT * FROM items WHERE id > ? ORDER BY id LIMIT ?';
  let n = 0;
  const t0 = performance.now();
  const e0 = performance.eventLoopUtilization();
  while (performance.now() - t0 < ms) {
    const start = (n * 7919) % (100_000 - rows);
    if (mode === 'json') await db.selectBytes(sql, [start, rows]);
    else await db.select(sql, [start, rows]);
    n++;
  }
  const wall = performance.now() - t0;
  const elu = performance.eventLoopUtilization(e0);
  console.log(`${label} ${rows} rows: wall ${(wall / n).toFixed(2)} ms, main ${(elu.active / n).toFixed(2)} ms per select`);
}
await db.close();
