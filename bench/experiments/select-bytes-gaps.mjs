// T7 under the benchmark's interleaving: the main-thread time of one 10k-row `selectBytes`,
// measured as the bench measures it (event-loop active time around one awaited call), with
// the thread asleep for `gap` ms before each call. The benchmark runs the peers' samples
// between ours, so each of our samples follows such a gap.
//   node bench/experiments/select-bytes-gaps.mjs <package root> <bench db file> <gap ms> [samples=25]
// The bench db: .tmp/bench/quietsqlite.db after a `npm run bench` (it is copied first).
import { createRequire } from 'node:module';
import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';

const [root, file, gapMs = '0', samples = '25'] = process.argv.slice(2);
const require = createRequire(import.meta.url);
const { Database } = require(resolve(root) + '/dist/index.js');
const dir = mkdtempSync(join(tmpdir(), 'qs-gaps-'));
copyFileSync(file, join(dir, 'g.db'));
const db = await Database.open(join(dir, 'g.db'));
const sql = 'SELECT * FROM items WHERE id > ? ORDER BY id LIMIT ?';
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
let sink = 0;
for (let i = 0; i < 20; i++) sink += (await db.selectBytes(sql, [i * 1000, 10000])).length;
const main = [], submit = [], wall = [];
for (let q = 0; q < Number(samples); q++) {
  if (Number(gapMs) > 0) await sleep(Number(gapMs));
  const e0 = performance.eventLoopUtilization();
  const t0 = performance.now();
  const pending = db.selectBytes(sql, [(q * 7919) % 80000, 10000]);
  submit.push(performance.now() - t0);
  sink += (await pending).length;
  wall.push(performance.now() - t0);
  main.push(performance.eventLoopUtilization(e0).active);
}
const median = (a) => [...a].sort((x, y) => x - y)[a.length >> 1];
const us = (ms) => `${(ms * 1000).toFixed(0)} µs`;
console.log(
  `gap ${gapMs} ms: main thread ${us(median(main))} (the call itself ${us(median(submit))}), wall ${median(wall).toFixed(2)} ms, ` +
    `over ${main.length} calls (${sink > 0 ? 'bytes read' : ''})`,
);
await db.close();
rmSync(dir, { recursive: true, force: true });
