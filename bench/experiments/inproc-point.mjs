// In-process A/B of awaited point queries (experiment 085): several builds loaded in one
// process, each with its own addon, database handle and threads, run in blocks whose order
// rotates, so that a slow phase of the machine falls on all of them alike. Prints each
// build's median µs per query and, for two builds, the median per-block ratio of the second
// to the first.
//
// A build is a directory holding dist/ and native/ (copied from a checkout after `npm run
// build`), each build a directory of its own: for an A/A run of one build (the method's own
// noise), copy its directory and give both paths. Each build reads its own copy of the
// database (a file with the bench's `items` table, e.g. .tmp/bench/seed-42.db), since each
// carries its own copy of SQLite.
//   node bench/experiments/inproc-point.mjs <db> <blocks> <queries per block> name=<build dir> name=<build dir> ...
import { createRequire } from 'node:module';
import { copyFileSync, existsSync, mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const [file, blocksArg, perArg, ...specs] = process.argv.slice(2);
if (specs.length < 2 || specs.some((s) => s.indexOf('=') < 1)) {
  throw new Error('usage: inproc-point.mjs <db> <blocks> <per block> name=<build dir> name=<build dir> ...');
}
// With the override every build would load the same addon.
if (process.env.QUIETSQLITE_NATIVE_LIBRARY_PATH) throw new Error('unset QUIETSQLITE_NATIVE_LIBRARY_PATH: it makes every build load one addon');
const roots = specs.map((s) => realpathSync(s.slice(s.indexOf('=') + 1)));
// `require` caches by real path: one directory given twice is one build, not two.
if (new Set(roots).size !== roots.length) throw new Error('each build needs a directory of its own (copy it for an A/A run)');
// Without its own addon a build would load an installed one, which others may load too.
for (const root of roots) {
  if (!existsSync(join(root, 'native', 'quietsqlite.node'))) throw new Error(`${root} has no native/quietsqlite.node`);
}
const dir = mkdtempSync(join(tmpdir(), 'qs-inproc-'));
const builds = [];
try {
  const require = createRequire(import.meta.url);
  for (const [i, spec] of specs.entries()) {
    const { Database } = require(roots[i] + '/dist/index.js');
    copyFileSync(file, join(dir, `p${i}.db`));
    builds.push({ name: spec.slice(0, spec.indexOf('=')), db: await Database.open(join(dir, `p${i}.db`)), times: [] });
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
    // Block k starts with build k mod n: when the blocks are a multiple of the builds, each
    // build runs first, second, ... equally often.
    for (let j = 0; j < builds.length; j++) {
      const b = builds[(k + j) % builds.length];
      b.times.push(await run(b.db, per, k * per));
    }
  }
  const median = (a) => {
    const s = [...a].sort((x, y) => x - y);
    const m = s.length >> 1;
    return s.length % 2 === 1 ? s[m] : (s[m - 1] + s[m]) / 2;
  };
  for (const b of builds) {
    console.log(`${b.name.padEnd(8)} median ${median(b.times).toFixed(3)} µs/query; blocks ${b.times.map((t) => t.toFixed(2)).join(' ')}`);
  }
  if (builds.length === 2) {
    const ratios = builds[0].times.map((t, i) => builds[1].times[i] / t);
    console.log(
      `${builds[1].name}/${builds[0].name} per block: median ${median(ratios).toFixed(3)}, ${builds[1].name} faster in ${ratios.filter((r) => r < 1).length} of ${ratios.length} (rows found: ${found})`,
    );
  }
} finally {
  for (const b of builds) await b.db.close();
  rmSync(dir, { recursive: true, force: true });
}
