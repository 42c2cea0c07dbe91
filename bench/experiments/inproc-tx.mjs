// In-process A/B of T14's loop (1k awaited tx.execute inserts in one transaction), as
// inproc-point.mjs does for point queries (inproc-builds.mjs: builds in one process, blocks
// whose order rotates). A block is `tx per block` transactions (the table emptied after each,
// untimed); its figure is the mean µs per call, as the bench's wall time per transaction is.
// Prints each build's median, mean and largest block (a checkpoint falls in one block of
// dozens: the mean shows it, the median hides it) and, for two builds, the median per-block
// ratio of the second to the first.
//   node bench/experiments/inproc-tx.mjs <blocks> <tx per block> name=<build dir> name=<build dir> ...
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadBuilds, median, ratioLine, rotate } from './inproc-builds.mjs';
import { CREATE_WRITES, INSERT_WRITES, writesRows } from './writes-rows.mjs';

const [blocksArg, perArg, ...specs] = process.argv.slice(2);
const builds = loadBuilds(specs, 'inproc-tx.mjs <blocks> <tx per block> name=<build dir> name=<build dir> ...');
const rows = writesRows(1000);
const body = async (tx) => {
  for (let i = 0; i < rows.length; i++) await tx.execute(INSERT_WRITES, rows[i]);
};
const dir = mkdtempSync(join(tmpdir(), 'qs-inproc-tx-'));
try {
  for (const [i, b] of builds.entries()) {
    b.db = await b.Database.open(join(dir, `p${i}.db`), { pragmas: { journal_mode: 'WAL', synchronous: 'NORMAL' } });
    await b.db.execute(CREATE_WRITES);
  }
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
  await rotate(builds, Number(blocksArg), (b) => run(b.db, Number(perArg)));
  const mean = (a) => a.reduce((x, y) => x + y, 0) / a.length;
  for (const b of builds) {
    console.log(`${b.name.padEnd(8)} median ${median(b.times).toFixed(3)} mean ${mean(b.times).toFixed(3)} max ${Math.max(...b.times).toFixed(2)} µs/call; blocks ${b.times.map((t) => t.toFixed(2)).join(' ')}`);
  }
  const ratios = ratioLine(builds);
  if (ratios !== undefined) console.log(ratios);
} finally {
  for (const b of builds) await b.db?.close();
  rmSync(dir, { recursive: true, force: true });
}
