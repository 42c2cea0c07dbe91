// Experiment 014: a prepared statement (db.prepare) vs the same SQL text, on point queries
// by primary key, sequential awaits and 64 in flight. Rounds alternate A and B (interleaved)
// so drift on a shared machine hits both alike.
//   node bench/experiments/prepared-statements.mjs [rounds=6] [ms per round=1000] [base dist/]
// (each of the three modes runs rounds x ms in total)
// With a third argument (the dist/ directory of another build, e.g. a copy of main's, with its
// native/ beside it), a third variant runs the SQL text through that build, on the same file:
// whether the text path itself got slower.
import { createRequire } from 'node:module';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';

const require = createRequire(import.meta.url);
const { Database } = require('../../dist/index.js');
const rounds = Number(process.argv[2] ?? 6);
const ms = Number(process.argv[3] ?? 1000);
const N = 10000;
const dir = mkdtempSync(join(tmpdir(), 'qs-stmt-'));
const db = await Database.open(join(dir, 'p.db'));
await db.execute('CREATE TABLE items(id INTEGER PRIMARY KEY, name TEXT, price REAL)');
await db.executeBatch('INSERT INTO items VALUES (?, ?, ?)', Array.from({ length: N }, (_, i) => [i + 1, `item ${i}`, i / 3]));
const sql = 'SELECT * FROM items WHERE id = ?';
const stmt = db.prepare(sql);
let x = 1;
const nextId = () => ((x = (x * 48271) % 2147483647) % N) + 1;

const VARIANTS = {
  text: (p) => db.selectOne(sql, p),
  statement: (p) => stmt.selectOne(p),
};
let baseDb;
if (process.argv[4] !== undefined) {
  const Base = require(join(process.argv[4], 'index.js')).Database;
  baseDb = await Base.open(join(dir, 'p.db'));
  VARIANTS.base = (p) => baseDb.selectOne(sql, p);
}

/** One block: `width` lanes, `perLane` awaited queries each. Returns [µs of wall per query,
 * µs of JS (event-loop active) time per query]. */
async function block(get, width, perLane) {
  const elu0 = performance.eventLoopUtilization();
  const t0 = performance.now();
  async function lane() {
    for (let i = 0; i < perLane; i++) {
      const row = await get([nextId()]);
      if (row === undefined) throw new Error('missing row');
    }
  }
  await Promise.all(Array.from({ length: width }, lane));
  const n = width * perLane;
  const wall = performance.now() - t0;
  return [(wall * 1000) / n, (performance.eventLoopUtilization(elu0).active * 1000) / n];
}

/** JS time to issue 64 calls (the synchronous part only: validation, conversion, sending). */
async function submit(get) {
  const t0 = performance.now();
  const ps = [];
  for (let i = 0; i < 64; i++) ps.push(get([nextId()]));
  const us = ((performance.now() - t0) * 1000) / 64;
  await Promise.all(ps);
  return us;
}

// Fine-grained interleaving: short blocks, the variants taking turns (order rotated each
// round), for `ms` per round; medians of the blocks. On a loaded machine, drift and
// preemption then hit every variant alike, and the median drops the blocks that were hit.
const names = Object.keys(VARIANTS);
const results = {};
for (const [mode, width, perLane] of [['sequential', 1, 100], ['64 in flight', 64, 8], ['submit', 0, 0]]) {
  const end = performance.now() + rounds * ms;
  let r = 0;
  for (const v of names) (mode === 'submit' ? await submit(VARIANTS[v]) : await block(VARIANTS[v], width, perLane));
  while (performance.now() < end) {
    const order = names.map((_, i) => names[(i + r) % names.length]);
    r++;
    for (const v of order) {
      const m = mode === 'submit' ? [await submit(VARIANTS[v]), 0] : await block(VARIANTS[v], width, perLane);
      ((results[mode] ??= {})[v] ??= []).push(m);
    }
  }
}
const median = (a) => [...a].sort((p, q) => p - q)[a.length >> 1];
for (const [mode, byVariant] of Object.entries(results)) {
  const line = Object.entries(byVariant).map(([v, ms_]) => {
    const wall = median(ms_.map((m) => m[0]));
    return mode === 'submit'
      ? `${v} ${wall.toFixed(2)} us`
      : `${v} ${(1e6 / wall).toFixed(0)} q/s (${median(ms_.map((m) => m[1])).toFixed(2)} us JS)`;
  });
  const ratio = median(byVariant.text.map((m) => m[0])) / median(byVariant.statement.map((m) => m[0]));
  console.log(`${mode.padEnd(12)} ${line.join('  ')}  statement/text speed ${ratio.toFixed(3)}  [${byVariant.text.length} blocks each]`);
}
stmt.close();
await db.close();
await baseDb?.close();
rmSync(dir, { recursive: true, force: true });
