// `npm test`: the Rust core's tests, the addon rebuilt with its test hooks, then the JS suite under this Node (20+), then the
// same JS suite under Node 24 (from the node@24 package installed by `npm install`).
import { spawnSync } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { installNode24 } from './node24.mjs';

const root = fileURLToPath(new URL('..', import.meta.url));

function testFiles(dir) {
  const out = [];
  for (const name of readdirSync(dir).sort()) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) out.push(...testFiles(p));
    else if (/\.test\.(mjs|cjs|js)$/.test(name)) out.push(relative(root, p));
  }
  return out;
}

function run(label, cmd, args) {
  console.log(`\n== ${label}: ${cmd} ${args.join(' ')}`);
  const r = spawnSync(cmd, args, { cwd: root, stdio: 'inherit' });
  if (r.status !== 0) {
    console.error(`\n${label} failed (exit ${r.status ?? r.signal})`);
    process.exit(r.status || 1);
  }
}

/** The host triple: `napi build` always builds for an explicit --target, so cargo test
 * passes the same one to reuse its artifacts (the bundled SQLite) instead of compiling
 * everything a second time. */
function hostTriple() {
  const r = spawnSync('rustc', ['-vV'], { encoding: 'utf8' });
  const host = /^host: (\S+)$/m.exec(r.stdout ?? '')?.[1];
  if (!host) throw new Error(`could not read the host triple from rustc -vV: ${r.stderr}`);
  return host;
}

const files = testFiles(join(root, 'test'));
const only = process.argv.slice(2);
if (only.length === 0 || only.includes('--node') || only.includes('--node24')) {
  // The JS suite needs the test hooks (panics on demand, live-query statistics), which the
  // published addon (`npm run build`) leaves out: see docs/decisions.md.
  run('Addon with test hooks', process.platform === 'win32' ? 'npm.cmd' : 'npm', ['run', 'build:test']);
}
if (only.length === 0 || only.includes('--rust')) {
  run('Rust core', 'cargo', ['test', '--release', '--target', hostTriple(), '-p', 'quietsqlite-core']);
}
if (only.length === 0 || only.includes('--node')) {
  run(`Node ${process.versions.node}`, process.execPath, ['--test', '--test-concurrency=1', ...files]);
}
if (only.length === 0 || only.includes('--node24')) {
  run('Node 24', installNode24(), ['--test', '--test-concurrency=1', ...files]);
}
