// TypeScript: the adapters' declarations, resolved through package.json "exports", type a
// user's Kysely and Drizzle code (test/adapters/types/usage.ts).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../..', import.meta.url));
const tsc = fileURLToPath(new URL('../../node_modules/typescript/bin/tsc', import.meta.url));

test('test/adapters/types/usage.ts compiles with tsc --strict against the built declarations', { timeout: 180_000 }, async () => {
  const { status, out } = await new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [tsc, '-p', 'test/adapters/types/tsconfig.json'], { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] });
    let text = '';
    child.stdout.on('data', (d) => (text += d));
    child.stderr.on('data', (d) => (text += d));
    child.on('error', reject);
    child.on('close', (code) => resolve({ status: code, out: text }));
  });
  assert.equal(status, 0, `tsc reported errors:\n${out}`);
});
