// Prints quietsqlite's medians from several bench result files side by side (A/B runs of
// `node bench/run.mjs --quick --peers quietsqlite`), one column per file.
//
//   node bench/experiments/ab-table.mjs a-1.json b-1.json a-2.json b-2.json
import { readFileSync } from 'node:fs';
import { basename } from 'node:path';

const files = process.argv.slice(2);
const runs = files.map((f) => JSON.parse(readFileSync(f, 'utf8')));
// Times are in ms in the result files; other metrics are printed as they are.
const TIMES = new Set(['wall', 'main', 'mainTouch', 'latency', 'p50', 'p99', 'max', 'extraMain']);
const fmt = (metric, v) =>
  v === undefined ? '-' : metric === 'qps' ? `${(v / 1000).toFixed(1)}k/s` : TIMES.has(metric) ? `${(v * 1000).toFixed(0)} µs` : `${Math.round(v)}`;
console.log(`| case | metric | ${files.map((f) => basename(f, '.json')).join(' | ')} |`);
console.log(`|---|---|${files.map(() => '---').join('|')}|`);
for (const c of runs[0].cases) {
  const peer = c.peers.quietsqlite;
  if (!peer?.summary) continue;
  for (const metric of Object.keys(peer.summary)) {
    const cells = runs.map((r) => r.cases.find((x) => x.id === c.id)?.peers.quietsqlite?.summary?.[metric]?.median);
    if (typeof cells[0] !== 'number') continue;
    console.log(`| ${c.suite} ${c.label} | ${metric} | ${cells.map((v) => fmt(metric, v)).join(' | ')} |`);
  }
}
