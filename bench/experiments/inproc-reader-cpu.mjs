// In-process A/B of the readers' CPU time per range read (experiment 096): several builds
// loaded in one process (inproc-builds.mjs), blocks whose order rotates; in each block one
// build awaits `per` reads of `rows` rows one by one (`select` or `selectBytes`), and the
// figure is the CPU time (the kernel's schedstat) that the process's reader threads used, per
// read. Only one build reads at a time, so all of the readers' CPU in a block is that build's.
// Unlike wall time, it leaves out time spent waiting for a CPU on a busy machine.
//
//   node bench/experiments/inproc-reader-cpu.mjs <db> <select|json> <rows> <blocks> <reads per block> name=<build dir> name=<build dir> ...
import { readerThreadsCpuNs as readersCpu } from './reader-threads.mjs';
import { loadBuilds, median, rangeRead, ratioLine, rotate, withCopies } from './inproc-builds.mjs';

const usage = 'inproc-reader-cpu.mjs <db> <select|json> <rows> <blocks> <reads per block> name=<build dir> ...';
const [file, kind, rowsArg, blocksArg, perArg, ...specs] = process.argv.slice(2);
if (kind !== 'select' && kind !== 'json') throw new Error(`usage: ${usage}`);
const builds = loadBuilds(specs, usage);
await withCopies(builds, file, async () => {
  const read = rangeRead(kind, Number(rowsArg));
  const per = Number(perArg);
  let sink = 0;
  const run = async (db, n, seed) => {
    const before = readersCpu();
    for (let i = 0; i < n; i++) sink += (await read(db, seed + i)).length;
    return (readersCpu() - before) / n / 1e6;
  };
  for (const b of builds) await run(b.db, 20, 1);
  await rotate(builds, Number(blocksArg), (b, k) => run(b.db, per, k * per));
  for (const b of builds) {
    console.log(`${b.name.padEnd(8)} median ${median(b.times).toFixed(4)} ms of reader CPU/read; blocks ${b.times.map((t) => t.toFixed(3)).join(' ')}`);
  }
  const ratios = ratioLine(builds);
  if (ratios !== undefined) console.log(`${ratios} (sink ${sink})`);
});
