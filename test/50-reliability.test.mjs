// The fast subset of the reliability suite (`npm run stress` runs the full one; see
// docs/reliability.md): every kind at a small scale, each in its own child process so that
// a crash or a leak is measured and reported rather than taking this runner down.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { runKind } from './stress/common.mjs';
import { runFuzz } from './stress/fuzz.mjs';

function noFailures(result) {
  const shown = result.failures.slice(0, 15).map((f) => `  - ${f.slice(0, 500)}`).join('\n');
  assert.equal(result.failures.length, 0, `${result.failures.length} failures:\n${shown}`);
}

test('fuzz: 2,000 generated calls, no crash, typed failures, values read back as written', async () => {
  const r = await runFuzz({ calls: 2000, seed: 50_2026 });
  assert.ok(r.figures.calls >= 2000);
  noFailures(r);
});

test('crash safety: 3 SIGKILLs during batches, transactions and schema changes', async () => {
  const r = await runKind('crash', { kills: 3, seed: 3 }, { timeoutMs: 120_000 });
  assert.equal(r.figures.kills, 3);
  noFailures(r);
});

test('faults: disk full, corrupt/foreign files, deleted/truncated while open, read-only, busy', async () => {
  noFailures(await runKind('faults', {}, { timeoutMs: 120_000 }));
});

test('lifecycle: 50 open/close cycles, terminated Workers, dropped databases', async () => {
  noFailures(await runKind('lifecycle', { cycles: 50, workers: 1, dropped: 5 }, { timeoutMs: 120_000 }));
});

test('soak: 10 s of readers, writers, transactions and 100 live queries', async () => {
  const r = await runKind('soak', { seconds: 10, hangMs: 8000 }, { timeoutMs: 120_000 });
  assert.equal(r.figures.queries, 100);
  noFailures(r);
});

test('the crash checker detects partial units, rolled-back rows, lost commits and schema drift', async (t) => {
  // The crash kind passes when SQLite keeps its promises, so prove its checks can fail.
  const { mkdtemp, rm } = await import('node:fs/promises');
  const { tmpdir } = await import('node:os');
  const { join } = await import('node:path');
  const { Database } = await import('../dist/index.mjs');
  const { verify } = await import('./stress/crash.mjs');
  const dir = await mkdtemp(join(tmpdir(), 'quietsqlite-test-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const file = join(dir, 'c.db');
  const db = await Database.open(file);
  await db.execute(`
    CREATE TABLE rows(tag INTEGER NOT NULL, k INTEGER NOT NULL, phase TEXT NOT NULL, pad BLOB);
    CREATE TABLE schema_log(tag INTEGER PRIMARY KEY, name TEXT NOT NULL);
    CREATE TABLE sc_9(x);
    INSERT INTO rows(tag, k, phase) VALUES (1, 2, 'batch'), (1, 2, 'batch'), (2, 3, 'tx'), (2, 3, 'rolledback')`);
  await db.close();
  const { failures } = await verify(file, [1, 2, 3]);
  const text = failures.join('\n');
  assert.match(text, /unit 2 is partial/);
  assert.doesNotMatch(text, /unit 1 is partial/);
  assert.match(text, /1 rows of rolled-back savepoints/);
  assert.match(text, /table sc_9 exists without its log row/);
  assert.match(text, /1 committed units lost/);
});
