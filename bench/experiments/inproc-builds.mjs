// What the in-process A/B probes share (inproc-point, inproc-range, inproc-eld,
// inproc-reader-cpu and inproc-tx, all .mjs): several builds loaded in one process, each
// with its own addon, database handle and threads, run in blocks whose order rotates, so
// that a slow phase of the machine falls on all of them alike.
//
// A build is a directory holding dist/ and native/ (copied from a checkout after `npm run
// build`), each build a directory of its own: for an A/A run of one build (the method's own
// noise), copy its directory and give both paths.
import { copyFileSync, existsSync, mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** The builds `name=<dir>` names, checked: each with its `Database` class. */
export function loadBuilds(specs, usage) {
  if (specs.length < 2 || specs.some((s) => s.indexOf('=') < 1)) throw new Error(`usage: ${usage}`);
  // With the override every build would load the same addon.
  if (process.env.QUIETSQLITE_NATIVE_LIBRARY_PATH) throw new Error('unset QUIETSQLITE_NATIVE_LIBRARY_PATH: it makes every build load one addon');
  const roots = specs.map((s) => realpathSync(s.slice(s.indexOf('=') + 1)));
  // `require` caches by real path: one directory given twice is one build, not two.
  if (new Set(roots).size !== roots.length) throw new Error('each build needs a directory of its own (copy it for an A/A run)');
  // Without its own addon a build would load an installed one, which others may load too.
  for (const root of roots) {
    if (!existsSync(join(root, 'native', 'quietsqlite.node'))) throw new Error(`${root} has no native/quietsqlite.node`);
  }
  const require = createRequire(import.meta.url);
  return specs.map((s, i) => ({ name: s.slice(0, s.indexOf('=')), Database: require(roots[i] + '/dist/index.js').Database, times: [] }));
}

/** Runs `blocks` rounds; round k starts with build k mod n, so that when the blocks are a
 * multiple of the builds each build runs first, second, ... equally often. `run(build, k)`
 * returns the block's figure. */
export async function rotate(builds, blocks, run) {
  for (let k = 0; k < blocks; k++) {
    for (let j = 0; j < builds.length; j++) {
      const b = builds[(k + j) % builds.length];
      b.times.push(await run(b, k));
    }
  }
}

export function median(a) {
  const s = [...a].sort((x, y) => x - y);
  const m = s.length >> 1;
  return s.length % 2 === 1 ? s[m] : (s[m - 1] + s[m]) / 2;
}

/** For two builds, the median per-block ratio of the second to the first. */
export function ratioLine(builds) {
  if (builds.length !== 2) return undefined;
  const [a, b] = builds;
  const ratios = a.times.map((t, i) => b.times[i] / t);
  return `${b.name}/${a.name} per block: median ${median(ratios).toFixed(3)}, ${b.name} faster in ${ratios.filter((r) => r < 1).length} of ${ratios.length}`;
}

/** Opens for each build its own copy of the database `file` as `build.db` (each build carries
 * its own copy of SQLite), runs `fn()`, then closes them and removes the copies. The open
 * options come from INPROC_OPEN, as JSON (e.g. INPROC_OPEN='{"inlineReads":true}'). */
export async function withCopies(builds, file, fn) {
  const options = process.env.INPROC_OPEN ? JSON.parse(process.env.INPROC_OPEN) : undefined;
  const dir = mkdtempSync(join(tmpdir(), 'qs-inproc-'));
  try {
    for (const [i, b] of builds.entries()) {
      copyFileSync(file, join(dir, `copy${i}.db`));
      b.db = await b.Database.open(join(dir, `copy${i}.db`), options);
    }
    await fn();
  } finally {
    for (const b of builds) await b.db?.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The bench's range read as the probes run it: `SELECT * FROM items WHERE id > ? ORDER BY id
 * LIMIT rows`, by `select`, or by `selectBytes` for kind 'json', from a start that read `i`
 * picks. Returns `(db, i) => Promise` of the rows (or the bytes). */
export function rangeRead(kind, rows) {
  const sql = 'SELECT * FROM items WHERE id > ? ORDER BY id LIMIT ?';
  const span = Math.max(1, 90000 - rows);
  return (db, i) => {
    const params = [(i * 7919) % span, rows];
    return kind === 'json' ? db.selectBytes(sql, params) : db.select(sql, params);
  };
}
