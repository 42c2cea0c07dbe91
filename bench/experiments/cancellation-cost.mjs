// Point queries by primary key with and without cancellation options (experiment 011).
//   node bench/experiments/cancellation-cost.mjs [mode=none|signal|timeout|both] [seconds=2] [dist=../../dist]
// `dist` lets an A/B run load another build (e.g. a copy of main's dist/ and native/).
import { createRequire } from 'node:module';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';

const require = createRequire(import.meta.url);
const mode = process.argv[2] ?? 'none';
const seconds = Number(process.argv[3] ?? 2);
const dist = process.argv[4] ? resolve(process.argv[4]) : join(import.meta.dirname, '..', '..', 'dist');
const { Database } = require(join(dist, 'index.js'));
const N = 10000;
const file = join(mkdtempSync(join(tmpdir(), 'qs-cancel-')), 'p.db');
const db = await Database.open(file);
await db.execute('CREATE TABLE items(id INTEGER PRIMARY KEY, name TEXT, price REAL)');
await db.executeBatch('INSERT INTO items VALUES (?, ?, ?)', Array.from({ length: N }, (_, i) => [i + 1, `item ${i}`, i / 3]));
const sql = 'SELECT * FROM items WHERE id = ?';
let x = 1;
const nextId = () => (x = (x * 48271) % 2147483647) % N + 1;
const signal = new AbortController().signal;
const options = {
  none: undefined,
  signal: { signal },
  timeout: { timeoutMs: 60_000 },
  both: { signal, timeoutMs: 60_000 },
}[mode];
if (!(mode in { none: 1, signal: 1, timeout: 1, both: 1 })) throw new Error(`unknown mode ${mode}`);

async function lanes(ms, width) {
  let n = 0;
  const end = performance.now() + ms;
  const elu0 = performance.eventLoopUtilization();
  const cpu0 = process.cpuUsage();
  async function lane() {
    while (performance.now() < end) {
      const row = await db.selectOne(sql, [nextId()], options);
      if (row === undefined) throw new Error('missing row');
      n++;
    }
  }
  await Promise.all(Array.from({ length: width }, lane));
  const elu = performance.eventLoopUtilization(elu0);
  const cpu = process.cpuUsage(cpu0);
  // jsUs: the JS thread's busy time; cpuUs: CPU time of every thread of the process.
  return { qps: n / (ms / 1000), jsUsPerQuery: (elu.active * 1000) / n, cpuUsPerQuery: (cpu.user + cpu.system) / n };
}

await lanes(300, 1);
await lanes(300, 64);
const seq = await lanes(seconds * 1000, 1);
const par = await lanes(seconds * 1000, 64);
console.log(JSON.stringify({ mode, dist, seqQps: Math.round(seq.qps), seqJsUs: +seq.jsUsPerQuery.toFixed(2), parQps: Math.round(par.qps), parJsUs: +par.jsUsPerQuery.toFixed(2), seqCpuUs: +seq.cpuUsPerQuery.toFixed(2), parCpuUs: +par.cpuUsPerQuery.toFixed(2) }));
await db.close();
