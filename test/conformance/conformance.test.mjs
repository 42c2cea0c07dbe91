// sqllogictest conformance: every script is run against a fresh database
// opened through the public API; every record meant for SQLite must pass.
//
// Scripts come from SQLLOGICTEST_DIR (default test/conformance/sqllogictest, vendored).
// The runner itself is validated independently of our engine by
// check-with-better-sqlite3.mjs.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { performance } from 'node:perf_hooks';
import { runScript, formatFailures } from './sqllogictest.mjs';
import { SCRIPT_DIR, KNOWN_DEVIATIONS, listScripts } from './scripts.mjs';

const { Database } = await import('../../dist/index.mjs');
registerConformanceTests(Database);

function registerConformanceTests(Database) {
  let files;
  try {
    files = listScripts();
  } catch (err) {
    // Missing scripts are a failure, not a skip.
    test('sqllogictest scripts are available', () => {
      throw err;
    });
    return;
  }

  test('sqllogictest scripts are available', () => {
    assert.ok(files.length > 0, `no .test files found in ${SCRIPT_DIR}`);
  });

  // Top-level tests in a file run one after another, so scripts run
  // sequentially, each on its own database file.
  for (const file of files) {
    const name = relative(SCRIPT_DIR, file);
    // The timeout only guards against a hang; the whole suite takes seconds.
    test(`sqllogictest ${name}`, { timeout: 120_000 }, async (t) => {
      const text = readFileSync(file, 'utf8');
      const dir = await mkdtemp(join(tmpdir(), 'quietsqlite-slt-'));
      let db;
      try {
        db = await Database.open(join(dir, 'test.db'));
        const adapter = {
          execute: (sql) => db.execute(sql),
          query: (sql) => db.select(sql, [], { rowMode: 'array' }),
        };
        const started = performance.now();
        const result = await runScript(text, adapter, {
          file: name,
          knownDeviations: KNOWN_DEVIATIONS[name],
        });
        const ms = Math.round(performance.now() - started);

        t.diagnostic(
          `${result.passed} passed, ${result.failed} failed, ${result.skipped} skipped` +
            (result.halted ? `, halted at line ${result.halted}` : '') +
            ` (${ms} ms)`,
        );
        for (const k of result.knownDeviations) {
          t.diagnostic(`known deviation at line ${k.line}: ${k.message}`);
        }

        assert.equal(result.failed, 0, `${result.failed} record(s) failed:\n\n${formatFailures(result, 5)}`);
        // A script in which nothing ran would pass vacuously.
        assert.ok(result.passed > 0, `no record of ${name} was run`);
      } finally {
        try {
          if (db) await db.close();
        } finally {
          await rm(dir, { recursive: true, force: true });
        }
      }
    });
  }
}
