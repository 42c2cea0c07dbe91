// Locates (and with `install`, installs) the Node 24 binary from the `node@24` npm package.
// It lives in its own prefix, not in devDependencies: the `node` package would put a `node`
// binary on the PATH of every npm script and silently replace the Node that runs the tests.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
export const prefix = join(root, '.cache', 'node24');
export const node24Path = join(prefix, 'node_modules', 'node', 'bin', 'node');

export function node24Available() {
  return existsSync(node24Path);
}

export function installNode24() {
  if (node24Available()) return node24Path;
  mkdirSync(prefix, { recursive: true });
  const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
  execFileSync(npm, ['install', '--no-save', '--no-package-lock', '--prefix', prefix, 'node@24'], {
    stdio: 'inherit',
  });
  if (!node24Available()) throw new Error(`node@24 installed but ${node24Path} is missing`);
  return node24Path;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const cmd = process.argv[2] ?? 'path';
  if (cmd === 'install') console.log(`node 24: ${installNode24()}`);
  else console.log(node24Path);
}
