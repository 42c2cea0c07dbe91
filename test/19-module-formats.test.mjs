// ESM entry point: named and default exports, the package's own name, and one class identity
// shared with the CommonJS entry (see 19-module-formats.test.cjs for require()).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import * as esm from '../dist/index.mjs';
import defaultExport from '../dist/index.mjs';

const require = createRequire(import.meta.url);

test('the ESM entry has the public named exports', () => {
  for (const name of ['Database', 'SqliteError', 'ErrorCodes', 'Transaction']) {
    assert.ok(name in esm, `${name} is exported`);
  }
  assert.equal(typeof esm.Database, 'function');
  assert.equal(typeof esm.Database.open, 'function');
  assert.ok(new esm.SqliteError('m', 'SQLITE_ERROR', 1) instanceof Error);
  assert.equal(esm.ErrorCodes.CLOSED, 'ERR_QUIETSQLITE_CLOSED');
  assert.equal(esm.ErrorCodes.INTERNAL, 'ERR_QUIETSQLITE_INTERNAL');
});

test('ESM and CommonJS entries share one class identity', () => {
  const cjs = require('../dist/index.js');
  assert.equal(esm.Database, cjs.Database);
  assert.equal(esm.SqliteError, cjs.SqliteError);
  assert.equal(defaultExport.Database, esm.Database);
});

test('the package resolves by its own name through "exports" (import and require)', async () => {
  const byName = await import('quietsqlite');
  assert.equal(byName.Database, esm.Database);
  assert.equal(require('quietsqlite').Database, esm.Database);
  assert.equal(require('quietsqlite/package.json').name, 'quietsqlite');
});

test('works end to end through the ESM entry', async (t) => {
  const db = await esm.Database.open(':memory:');
  t.after(() => db.close());
  await db.execute('CREATE TABLE t(a UNIQUE)');
  await db.execute('INSERT INTO t VALUES (?)', ['esm']);
  assert.deepStrictEqual(await db.select('SELECT a FROM t'), [{ a: 'esm' }]);
  await assert.rejects(db.execute('INSERT INTO t VALUES (?)', ['esm']), (err) => {
    assert.ok(err instanceof esm.SqliteError);
    assert.ok(err instanceof require('../dist/index.js').SqliteError);
    return err.code === 'SQLITE_CONSTRAINT_UNIQUE';
  });
});
