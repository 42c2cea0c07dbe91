// Interleaved A/B of whole benchmark suites for two or more builds (experiment 052). The
// benchmark runs the quietsqlite of this checkout (dist/ and native/), so each run first
// copies a build's dist/ and native/ here; the checkout's own are put back at the end.
// A build is a directory holding dist/ and native/ (copied from a checkout after
// `npm run build`). Rounds alternate the order of the builds.
//
//   node bench/experiments/ab-suite.mjs <suites> <peers> <rounds> <out dir> name=<build dir> ...
//   e.g. node bench/experiments/ab-suite.mjs 7 better-sqlite3,node:sqlite,sqlite3,quietsqlite 4 /tmp/ab base=/tmp/base new=/tmp/new
//
// Prints the target lines of each run; the result files (with every sample) go to <out dir>.
import { spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(fileURLToPath(new URL('../..', import.meta.url)));
const [suites, peers, rounds, out, ...specs] = process.argv.slice(2);
if (!specs.length) throw new Error('usage: ab-suite.mjs <suites> <peers> <rounds> <out dir> name=<build dir> ...');
const builds = specs.map((s) => {
  const at = s.indexOf('=');
  return { name: s.slice(0, at), dir: resolve(s.slice(at + 1)) };
});
const saved = mkdtempSync(join(tmpdir(), 'ab-suite-'));
const parts = ['dist', 'native'];
for (const p of parts) cpSync(join(root, p), join(saved, p), { recursive: true });
const install = (from) => {
  for (const p of parts) {
    rmSync(join(root, p), { recursive: true, force: true });
    cpSync(join(from, p), join(root, p), { recursive: true });
  }
};
try {
  for (let r = 1; r <= Number(rounds); r++) {
    const order = r % 2 === 1 ? builds : [...builds].reverse();
    for (const b of order) {
      install(b.dir);
      const label = `ab-${b.name}-${r}`;
      const run = spawnSync(process.execPath, ['bench/run.mjs', '--suites', suites, '--peers', peers, '--label', label, '--out', out], { cwd: root, encoding: 'utf8' });
      if (run.status !== 0) throw new Error(`${label}: ${run.stderr}`);
      for (const line of run.stdout.split('\n')) if (/^T\d+i?\s/.test(line)) console.log(`${b.name.padEnd(8)} ${r} ${line.slice(0, 100)}`);
    }
  }
} finally {
  install(saved);
  rmSync(saved, { recursive: true, force: true });
}
