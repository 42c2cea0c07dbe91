// Experiment 014: a prepared statement (db.prepare) vs the same SQL text, on point queries
// by primary key, sequential awaits and 64 in flight. Rounds alternate A and B (interleaved)
// so drift on a shared machine hits both alike.
//   node bench/experiments/prepared-statements.mjs [rounds=6] [ms per round=1000] [base dist/]
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

async function run(get, width) {
  let n = 0;
  const end = performance.now() + ms;
  const elu0 = performance.eventLoopUtilization();
  async function lane() {
    while (performance.now() < end) {
      const row = await get([nextId()]);
      if (row === undefined) throw new Error('missing row');
      n++;
    }
  }
  await Promise.all(Array.from({ length: width }, lane));
  const elu = performance.eventLoopUtilization(elu0);
  return { qps: n / (ms / 1000), js: (elu.active * 1000) / n };
}

/** JS time to issue 64 calls (the synchronous part only: validation, conversion, sending),
 * summed over `ms`; less sensitive to thread scheduling than throughput. */
async function submit(get) {
  let n = 0;
  let spent = 0;
  const end = performance.now() + ms;
  while (performance.now() < end) {
    const t0 = performance.now();
    const ps = [];
    for (let i = 0; i < 64; i++) ps.push(get([nextId()]));
    spent += performance.now() - t0;
    n += 64;
    await Promise.all(ps);
  }
  return { us: (spent * 1000) / n };
}

const results = {};
for (const width of [1, 64]) {
  for (const v of Object.keys(VARIANTS)) await run(VARIANTS[v], width); // warm-up
  for (let r = 0; r < rounds; r++) {
    // A then B on even rounds, B then A on odd ones.
    const names = Object.keys(VARIANTS);
    const order = r % 2 === 0 ? names : [...names].reverse();
    for (const v of order) ((results[`${width}:${v}`] ??= []).push(await run(VARIANTS[v], width)));
  }
}
const submits = {};
for (const v of Object.keys(VARIANTS)) await submit(VARIANTS[v]);
for (let r = 0; r < rounds; r++) {
  const names = Object.keys(VARIANTS);
  for (const v of r % 2 === 0 ? names : [...names].reverse()) (submits[v] ??= []).push((await submit(VARIANTS[v])).us);
}
const median = (a) => [...a].sort((p, q) => p - q)[a.length >> 1];
for (const width of [1, 64]) {
  const t = results[`${width}:text`];
  const s = results[`${width}:statement`];
  const tq = median(t.map((m) => m.qps));
  const sq = median(s.map((m) => m.qps));
  const tj = median(t.map((m) => m.js));
  const sj = median(s.map((m) => m.js));
  console.log(
    `${width === 1 ? 'sequential  ' : '64 in flight'}  text ${tq.toFixed(0)} q/s ${tj.toFixed(2)} us JS/query` +
      `  statement ${sq.toFixed(0)} q/s ${sj.toFixed(2)} us JS/query  ratio ${(sq / tq).toFixed(3)}`,
  );
  const b = results[`${width}:base`];
  if (b !== undefined) {
    const bq = median(b.map((m) => m.qps));
    const bj = median(b.map((m) => m.js));
    console.log(`              base build text ${bq.toFixed(0)} q/s ${bj.toFixed(2)} us JS/query  text/base ${(tq / bq).toFixed(3)}`);
  }
}
console.log(
  'submit, us of JS per call: ' +
    Object.entries(submits).map(([v, a]) => `${v} ${median(a).toFixed(2)}`).join('  '),
);
stmt.close();
await db.close();
await baseDb?.close();
rmSync(dir, { recursive: true, force: true });
