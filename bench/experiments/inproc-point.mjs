// In-process A/B of awaited point queries (experiment 085): several builds loaded in one
// process, blocks whose order rotates (inproc-builds.mjs). Prints each build's median µs per
// query and, for two builds, the median per-block ratio of the second to the first.
//
// Each build reads its own copy of the database (a file with the bench's `items` table, e.g.
// .tmp/bench/seed-42.db), since each carries its own copy of SQLite.
//   node bench/experiments/inproc-point.mjs <db> <blocks> <queries per block> name=<build dir> name=<build dir> ...
import { loadBuilds, median, ratioLine, rotate, withCopies } from './inproc-builds.mjs';

const [file, blocksArg, perArg, ...specs] = process.argv.slice(2);
const builds = loadBuilds(specs, 'inproc-point.mjs <db> <blocks> <per block> name=<build dir> name=<build dir> ...');
await withCopies(builds, file, async () => {
  const sql = 'SELECT * FROM items WHERE id = ?';
  const per = Number(perArg);
  let found = 0;
  const run = async (db, n, seed) => {
    const t0 = performance.now();
    for (let i = 0; i < n; i++) if (await db.selectOne(sql, [1 + (((seed + i) * 7919) % 10000)])) found++;
    return ((performance.now() - t0) * 1000) / n;
  };
  for (const b of builds) await run(b.db, 20000, 1);
  await rotate(builds, Number(blocksArg), (b, k) => run(b.db, per, k * per));
  for (const b of builds) {
    console.log(`${b.name.padEnd(8)} median ${median(b.times).toFixed(3)} µs/query; blocks ${b.times.map((t) => t.toFixed(2)).join(' ')}`);
  }
  const ratios = ratioLine(builds);
  if (ratios !== undefined) console.log(`${ratios} (rows found: ${found})`);
});
