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
