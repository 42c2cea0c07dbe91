// CPU time of the reader threads per 10k-row read (the kernel's schedstat), for A/B runs of
// two builds on a noisy machine: unlike wall time, it does not count time spent waiting for
// a CPU (experiment 032). Uses the table items-reads.mjs builds (run that once first).
// PRAGMAS='{"cache_size":-16000}' adds open's `pragmas` (experiment 033). Also prints the
// wall time per read and the process's peak RSS.
//   node bench/experiments/reader-cpu.mjs <package root> [select|json]
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { readerThreadsCpuNs } from './reader-threads.mjs';
const root = process.argv[2];
const kind = process.argv[3] ?? 'select';
const require = createRequire(root + '/package.json');
const { Database } = require(root + '/dist/index.js');
const file = '/tmp/quietsqlite-items-100k.db';
if (!existsSync(file)) {
  console.error(`${file} is missing: run bench/experiments/items-reads.mjs once to build it`);
  process.exit(2);
}
const pragmas = process.env.PRAGMAS ? JSON.parse(process.env.PRAGMAS) : undefined;
const db = await Database.open(file, pragmas ? { pragmas } : {});
const sql = 'SELECT * FROM items WHERE id > ? ORDER BY id LIMIT 10000';
const readerCpu = readerThreadsCpuNs;
const run = (i) => (kind === 'json' ? db.selectBytes(sql, [(i * 7919) % 90000]) : db.select(sql, [(i * 7919) % 90000]));
for (let i = 0; i < 20; i++) await run(i);
const n = 200;
const c0 = readerCpu();
const t0 = performance.now();
for (let i = 0; i < n; i++) await run(i);
const wall = (performance.now() - t0) / n;
const c1 = readerCpu();
const label = `${root.padEnd(18)} ${kind}${pragmas ? ` ${JSON.stringify(pragmas)}` : ''}`;
const peak = process.resourceUsage().maxRSS / 1024;
console.log(`${label} reader CPU ${((c1 - c0) / n / 1e6).toFixed(3)} ms, wall ${wall.toFixed(3)} ms per query; peak RSS ${peak.toFixed(1)} MB`);
await db.close();
