// TypeScript: the public declarations compile under strict settings, and the generated
// addon declarations match the checked-in snapshot.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const tsc = fileURLToPath(new URL('../node_modules/typescript/bin/tsc', import.meta.url));

function run(cmd, args) {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (out += d));
    child.on('error', reject);
    child.on('close', (status) => resolve({ status, out }));
  });
}

test('test/types/usage.ts compiles with tsc --strict against the built declarations', { timeout: 120_000 }, async () => {
  const { status, out } = await run(process.execPath, [tsc, '-p', 'test/types/tsconfig.json']);
  assert.equal(status, 0, `tsc reported errors:\n${out}`);
});

test('native/binding.d.ts matches test/snapshots/binding.d.ts', () => {
  const current = readFileSync(new URL('../native/binding.d.ts', import.meta.url), 'utf8');
  const snapshotUrl = new URL('./snapshots/binding.d.ts', import.meta.url);
  if (process.env.UPDATE_SNAPSHOTS === '1') writeFileSync(snapshotUrl, current);
  const snapshot = readFileSync(snapshotUrl, 'utf8');
  assert.equal(
    current,
    snapshot,
    'The generated addon declarations (native/binding.d.ts) changed. If the change to the ' +
      'binding is intended, update the snapshot with\n' +
      '  cp native/binding.d.ts test/snapshots/binding.d.ts\n' +
      '(or run this test with UPDATE_SNAPSHOTS=1) and commit it with the binding change.',
  );
});
