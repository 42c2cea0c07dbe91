// In-process A/B of awaited point queries (experiment 085): two or more builds are loaded in
// one process (each its own addon copy, database handle and threads) and run in alternating
// blocks, so a slow phase of the machine falls on all of them alike. Prints each build's
// median µs per query and, for two builds, the per-block ratio of the second to the first.
// Run it once with the same build twice (A/A) to see the method's own noise.
//   node bench/experiments/inproc-point.mjs <db with an items table> <blocks> <queries per block> name=<root> name=<root>
import { createRequire } from 'node:module';
import { resolve } from 'node:path';

const [file, blocksArg, perArg, ...specs] = process.argv.slice(2);
if (specs.length < 2) throw new Error('usage: inproc-point.mjs <db> <blocks> <per block> name=<root> name=<root> ...');
const require = createRequire(import.meta.url);
const builds = [];
for (const spec of specs) {
  const at = spec.indexOf('=');
  const { Database } = require(resolve(spec.slice(at + 1)) + '/dist/index.js');
  builds.push({ name: spec.slice(0, at), db: await Database.open(file), times: [] });
}
const sql = 'SELECT * FROM items WHERE id = ?';
const per = Number(perArg);
let found = 0;
const run = async (db, n, seed) => {
  const t0 = performance.now();
  for (let i = 0; i < n; i++) if (await db.selectOne(sql, [1 + (((seed + i) * 7919) % 10000)])) found++;
  return ((performance.now() - t0) * 1000) / n;
};
for (const b of builds) await run(b.db, 20000, 1);
for (let k = 0; k < Number(blocksArg); k++) {
  for (const b of k % 2 === 0 ? builds : [...builds].reverse()) b.times.push(await run(b.db, per, k * per));
}
const median = (a) => [...a].sort((x, y) => x - y)[a.length >> 1];
for (const b of builds) {
  console.log(`${b.name.padEnd(8)} median ${median(b.times).toFixed(3)} µs/query; blocks ${b.times.map((t) => t.toFixed(2)).join(' ')}`);
}
if (builds.length === 2) {
  const ratios = builds[0].times.map((t, i) => builds[1].times[i] / t);
  console.log(
    `${builds[1].name}/${builds[0].name} per block: median ${median(ratios).toFixed(3)}, ${builds[1].name} faster in ${ratios.filter((r) => r < 1).length} of ${ratios.length} (rows found: ${found})`,
  );
}
for (const b of builds) await b.db.close();
