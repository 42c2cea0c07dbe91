// In-process A/B of the event-loop delay under back-to-back range selects (T8; experiment
// 095): several builds loaded in one process (inproc-builds.mjs), blocks whose order rotates.
// In each block one build runs the `eld` suite's load for `ms` milliseconds: selects of
// `rows` rows awaited one by one, every field of every row read, while a histogram with a
// 1 ms resolution records the delay. Prints each build's median over the blocks of the p99,
// of the max and of selects per second, and, for two builds, the median per-block ratio of
// their p99s.
//
//   node bench/experiments/inproc-eld.mjs <db> <rows> <blocks> <ms per block> name=<build dir> name=<build dir> ...
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { makeToucher, ITEM_COLS } from '../lib/data.mjs';
import { loadBuilds, median, rangeRead, ratioLine, rotate, withCopies } from './inproc-builds.mjs';

const usage = 'inproc-eld.mjs <db> <rows> <blocks> <ms per block> name=<build dir> name=<build dir> ...';
const [file, rowsArg, blocksArg, msArg, ...specs] = process.argv.slice(2);
const builds = loadBuilds(specs, usage);
const touch = makeToucher(ITEM_COLS);
const RESOLUTION_MS = 1;
await withCopies(builds, file, async () => {
  const read = rangeRead('select', Number(rowsArg));
  let sink = 0;
  const run = async (b, seed, ms) => {
    const h = monitorEventLoopDelay({ resolution: RESOLUTION_MS });
    h.enable();
    const end = performance.now() + ms;
    let i = 0;
    while (performance.now() < end) sink += touch(await read(b.db, seed + i++));
    h.disable();
    const p99 = Math.max(0, h.percentile(99) / 1e6 - RESOLUTION_MS);
    (b.max ??= []).push(Math.max(0, h.max / 1e6 - RESOLUTION_MS));
    (b.qps ??= []).push(i / (ms / 1000));
    return p99;
  };
  for (const b of builds) await run(b, 1, 200);
  for (const b of builds) {
    b.max = [];
    b.qps = [];
  }
  await rotate(builds, Number(blocksArg), (b, k) => run(b, k * 1000, Number(msArg)));
  for (const b of builds) {
    console.log(
      `${b.name.padEnd(8)} p99 median ${median(b.times).toFixed(3)} ms (blocks ${b.times.map((t) => t.toFixed(2)).join(' ')}); ` +
        `max median ${median(b.max).toFixed(2)} ms; selects/s median ${median(b.qps).toFixed(0)}`,
    );
  }
  const ratios = ratioLine(builds);
  if (ratios !== undefined) console.log(`${ratios} (sink ${sink})`);
});
