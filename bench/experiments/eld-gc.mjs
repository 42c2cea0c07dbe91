// Event-loop delay while 10k-row selects run back to back (bench suite 8's quietsqlite loop),
// with the main thread's GC pauses and the longest single decode, to see what makes the p99.
//   node bench/experiments/eld-gc.mjs <root of a quietsqlite build> <db file> [seconds]
import { monitorEventLoopDelay, PerformanceObserver, performance } from 'node:perf_hooks';
import { copyFileSync, rmSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import path from 'node:path';

const [root, file, seconds = '3'] = process.argv.slice(2);
const { Database } = await import(pathToFileURL(path.join(root, 'dist/index.mjs')).href);
const copy = `/tmp/eld-gc-${process.pid}.db`;
copyFileSync(file, copy);
const db = await Database.open(copy);
const gc = new Map();
const obs = new PerformanceObserver((list) => {
  for (const e of list.getEntries()) {
    const kind = e.detail?.kind ?? e.kind;
    const g = gc.get(kind) ?? { n: 0, total: 0, max: 0 };
    g.n++;
    g.total += e.duration;
    g.max = Math.max(g.max, e.duration);
    gc.set(kind, g);
  }
});
obs.observe({ entryTypes: ['gc'] });
let sink = 0;
const touch = (rows) => {
  let n = 0;
  for (const r of rows) for (const k in r) { const v = r[k]; n += typeof v === 'string' ? v.length : 1; }
  return n;
};
const sql = 'SELECT * FROM items WHERE id > ? ORDER BY id LIMIT ?';
for (let i = 0; i < 20; i++) sink += touch(await db.select(sql, [i * 1000, 10000]));
const h = monitorEventLoopDelay({ resolution: 1 });
h.enable();
const end = performance.now() + Number(seconds) * 1000;
let q = 0;
let maxTurn = 0;
while (performance.now() < end) {
  const rows = await db.select(sql, [(q * 7919) % 90000, 10000]);
  const t = performance.now();
  sink += touch(rows);
  maxTurn = Math.max(maxTurn, performance.now() - t);
  q++;
}
h.disable();
obs.disconnect();
await db.close();
rmSync(copy, { force: true });
for (const ext of ['-wal', '-shm']) rmSync(copy + ext, { force: true });
const ms = (v) => Math.max(0, v / 1e6 - 1).toFixed(2);
const kinds = { 1: 'minor (scavenge)', 4: 'major', 8: 'incremental', 16: 'weakcb' };
const gcs = [...gc].map(([k, g]) => `${kinds[k] ?? k}: ${g.n} x, total ${g.total.toFixed(1)} ms, max ${g.max.toFixed(2)} ms`).join('; ');
console.log(`qps ${(q / Number(seconds)).toFixed(0)} eld p50 ${ms(h.percentile(50))} p99 ${ms(h.percentile(99))} max ${ms(h.max)} ms; max touch ${maxTurn.toFixed(2)} ms; gc ${gcs} (${sink > 0})`);
