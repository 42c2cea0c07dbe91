// In-process A/B of T9's write (a 1k-row `executeBatch` of the bench's `writes` rows), as
// inproc-tx.mjs does for T14. A block is `batches per block` batches (the table emptied after
// each, untimed); its figure is the mean ms per batch.
//   node bench/experiments/inproc-batch.mjs <blocks> <batches per block> name=<build dir> name=<build dir> ...
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadBuilds, median, ratioLine, rotate } from './inproc-builds.mjs';
import { CREATE_WRITES, INSERT_WRITES, writesRows } from './writes-rows.mjs';

const [blocksArg, perArg, ...specs] = process.argv.slice(2);
const builds = loadBuilds(specs, 'inproc-batch.mjs <blocks> <batches per block> name=<build dir> name=<build dir> ...');
const rows = writesRows(1000);
const dir = mkdtempSync(join(tmpdir(), 'qs-inproc-batch-'));
try {
  for (const [i, b] of builds.entries()) {
    b.db = await b.Database.open(join(dir, `p${i}.db`));
    await b.db.execute(CREATE_WRITES);
  }
  const run = async (db, n) => {
    let spent = 0;
    for (let k = 0; k < n; k++) {
      const t0 = performance.now();
      await db.executeBatch(INSERT_WRITES, rows);
      spent += performance.now() - t0;
      await db.execute('DELETE FROM writes');
    }
    return spent / n;
  };
  for (const b of builds) await run(b.db, 3);
  await rotate(builds, Number(blocksArg), (b) => run(b.db, Number(perArg)));
  for (const b of builds) {
    console.log(`${b.name.padEnd(8)} median ${median(b.times).toFixed(3)} ms/batch; blocks ${b.times.map((t) => t.toFixed(2)).join(' ')}`);
  }
  const ratios = ratioLine(builds);
  if (ratios !== undefined) console.log(ratios);
} finally {
  for (const b of builds) await b.db?.close();
  rmSync(dir, { recursive: true, force: true });
}
