// Dev-only: validate the sqllogictest runner against better-sqlite3, i.e.
// independently of our own engine. Every record meant for SQLite must pass.
//
//   node test/conformance/check-with-better-sqlite3.mjs [script.test ...]
//
// With no arguments, runs every script in the conformance directory
// (SQLLOGICTEST_DIR, default test/conformance/sqllogictest, vendored).
// Exits non-zero if any record fails.

import { createRequire } from 'node:module';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { performance } from 'node:perf_hooks';
import { runScript, formatFailures } from './sqllogictest.mjs';
import { SCRIPT_DIR, KNOWN_DEVIATIONS, listScripts } from './scripts.mjs';

const require = createRequire(import.meta.url);
const Database = require('better-sqlite3');

// Same value shapes as our engine's rowMode 'array': plain numbers (no
// safeIntegers), strings, null, Buffers.
function betterSqliteAdapter(db) {
  return {
    async execute(sql) {
      db.exec(sql); // runs every statement in the text, like sqlite3_exec
    },
    async query(sql) {
      return db.prepare(sql).raw(true).all();
    },
  };
}

const files = process.argv.length > 2 ? process.argv.slice(2) : listScripts();
let totalFailed = 0;
const t0 = performance.now();

for (const file of files) {
  const name = relative(SCRIPT_DIR, file);
  const dir = mkdtempSync(join(tmpdir(), 'quietsqlite-slt-'));
  const db = new Database(join(dir, 'test.db'));
  const start = performance.now();
  let result;
  try {
    result = await runScript(readFileSync(file, 'utf8'), betterSqliteAdapter(db), {
      file: name,
      knownDeviations: KNOWN_DEVIATIONS[name],
    });
  } finally {
    db.close();
    rmSync(dir, { recursive: true, force: true });
  }
  const ms = (performance.now() - start).toFixed(0);
  const halted = result.halted ? `  halted at line ${result.halted}` : '';
  const known = result.knownDeviations.length ? `  known deviations ${result.knownDeviations.length}` : '';
  console.log(
    `${name.padEnd(40)} passed ${String(result.passed).padStart(5)}  ` +
      `failed ${String(result.failed).padStart(3)}  skipped ${String(result.skipped).padStart(4)}  ${ms.padStart(6)} ms${halted}${known}`,
  );
  for (const k of result.knownDeviations) console.log(`  known deviation ${name}:${k.line}: ${k.message}`);
  if (result.failed > 0) console.log(formatFailures(result, 10) + '\n');
  totalFailed += result.failed;
}

console.log(`total ${((performance.now() - t0) / 1000).toFixed(1)} s, ${totalFailed} failure(s)`);
process.exitCode = totalFailed === 0 ? 0 : 1;
