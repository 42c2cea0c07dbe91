// In-process A/B of T14's loop (1k awaited tx.execute inserts in one transaction), as
// inproc-point.mjs does for point queries: several builds loaded in one process, each with
// its own addon, database file and threads, run in blocks whose order rotates, so that a
// slow phase of the machine falls on all of them alike. A block is `tx per block`
// transactions (the table emptied after each, untimed); its figure is the mean µs per call,
// as the bench's wall time per transaction is. Prints each build's median, mean and largest
// block (a checkpoint falls in one block of dozens: the mean shows it, the median hides it) and,
// for two builds, the median per-block ratio of the second to the first.
//   node bench/experiments/inproc-tx.mjs <blocks> <tx per block> name=<build dir> name=<build dir> ...
import { createRequire } from 'node:module';
import { existsSync, mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CREATE_WRITES, INSERT_WRITES, writesRows } from './writes-rows.mjs';

const [blocksArg, perArg, ...specs] = process.argv.slice(2);
if (specs.length < 2 || specs.some((s) => s.indexOf('=') < 1)) {
  throw new Error('usage: inproc-tx.mjs <blocks> <tx per block> name=<build dir> name=<build dir> ...');
}
if (process.env.QUIETSQLITE_NATIVE_LIBRARY_PATH) throw new Error('unset QUIETSQLITE_NATIVE_LIBRARY_PATH: it makes every build load one addon');
const roots = specs.map((s) => realpathSync(s.slice(s.indexOf('=') + 1)));
if (new Set(roots).size !== roots.length) throw new Error('each build needs a directory of its own (copy it for an A/A run)');
for (const root of roots) {
  if (!existsSync(join(root, 'native', 'quietsqlite.node'))) throw new Error(`${root} has no native/quietsqlite.node`);
}
const rows = writesRows(1000);
const insert = INSERT_WRITES;
const body = async (tx) => {
  for (let i = 0; i < rows.length; i++) await tx.execute(insert, rows[i]);
};
const dir = mkdtempSync(join(tmpdir(), 'qs-inproc-tx-'));
const builds = [];
try {
  const require = createRequire(import.meta.url);
  for (const [i, spec] of specs.entries()) {
    const { Database } = require(roots[i] + '/dist/index.js');
    const db = await Database.open(join(dir, `p${i}.db`), { pragmas: { journal_mode: 'WAL', synchronous: 'NORMAL' } });
    await db.execute(CREATE_WRITES);
    builds.push({ name: spec.slice(0, spec.indexOf('=')), db, times: [] });
  }
  const per = Number(perArg);
  const run = async (db, n) => {
    let spent = 0;
    for (let k = 0; k < n; k++) {
      const t0 = performance.now();
      await db.transaction(body);
      spent += performance.now() - t0;
      await db.execute('DELETE FROM writes');
    }
    return (spent * 1000) / (n * rows.length);
  };
  for (const b of builds) await run(b.db, 3);
  for (let k = 0; k < Number(blocksArg); k++) {
    for (let j = 0; j < builds.length; j++) {
      const b = builds[(k + j) % builds.length];
      b.times.push(await run(b.db, per));
    }
  }
  const median = (a) => {
    const v = [...a].sort((x, y) => x - y);
    const m = v.length >> 1;
    return v.length % 2 === 1 ? v[m] : (v[m - 1] + v[m]) / 2;
  };
  const mean = (a) => a.reduce((x, y) => x + y, 0) / a.length;
  for (const b of builds) {
    console.log(`${b.name.padEnd(8)} median ${median(b.times).toFixed(3)} mean ${mean(b.times).toFixed(3)} max ${Math.max(...b.times).toFixed(2)} µs/call; blocks ${b.times.map((t) => t.toFixed(2)).join(' ')}`);
  }
  if (builds.length === 2) {
    const ratios = builds[0].times.map((t, i) => builds[1].times[i] / t);
    console.log(`${builds[1].name}/${builds[0].name} per block: median ${median(ratios).toFixed(3)}, ${builds[1].name} faster in ${ratios.filter((r) => r < 1).length} of ${ratios.length}`);
  }
} finally {
  for (const b of builds) await b.db.close();
  rmSync(dir, { recursive: true, force: true });
}
