// In-process A/B of range reads (experiment 093): `SELECT * FROM items WHERE id > ? ORDER BY
// id LIMIT ?` as `select` or as `selectBytes`, awaited one by one; several builds loaded in one
// process, blocks whose order rotates (inproc-builds.mjs). Prints each build's median ms per
// read and, for two builds, the median per-block ratio of the second to the first.
//
// Each build reads its own copy of the database (a file with the bench's `items` table, e.g.
// .tmp/bench/seed-42.db), since each carries its own copy of SQLite.
//   node bench/experiments/inproc-range.mjs <db> <select|json> <rows> <blocks> <reads per block> name=<build dir> name=<build dir> ...
import { loadBuilds, median, rangeRead, ratioLine, rotate, withCopies } from './inproc-builds.mjs';

const usage = 'inproc-range.mjs <db> <select|json> <rows> <blocks> <reads per block> name=<build dir> name=<build dir> ...';
const [file, kind, rowsArg, blocksArg, perArg, ...specs] = process.argv.slice(2);
if (kind !== 'select' && kind !== 'json') throw new Error(`usage: ${usage}`);
const builds = loadBuilds(specs, usage);
await withCopies(builds, file, async () => {
  const read = rangeRead(kind, Number(rowsArg));
  const per = Number(perArg);
  let sink = 0;
  const run = async (db, n, seed) => {
    const t0 = performance.now();
    for (let i = 0; i < n; i++) sink += (await read(db, seed + i)).length;
    return (performance.now() - t0) / n;
  };
  for (const b of builds) await run(b.db, 20, 1);
  await rotate(builds, Number(blocksArg), (b, k) => run(b.db, per, k * per));
  for (const b of builds) {
    console.log(`${b.name.padEnd(8)} median ${median(b.times).toFixed(4)} ms/read; blocks ${b.times.map((t) => t.toFixed(3)).join(' ')}`);
  }
  const ratios = ratioLine(builds);
  if (ratios !== undefined) console.log(`${ratios} (sink ${sink})`);
});
