// CommonJS entry point: require() works and shares classes with the ESM entry.
'use strict';
const { test } = require('node:test');
const assert = require('node:assert/strict');
const { Database, SqliteError, ErrorCodes } = require('../dist/index.js');

test('require() gives the public API', () => {
  assert.equal(typeof Database.open, 'function');
  assert.equal(typeof SqliteError, 'function');
  assert.equal(ErrorCodes.CLOSED, 'ERR_QUIETSQLITE_CLOSED');
});

test('works end to end through require()', async (t) => {
  const db = await Database.open(':memory:', { readers: 2 });
  t.after(() => db.close());
  await db.execute('CREATE TABLE t(a UNIQUE)');
  const r = await db.execute('INSERT INTO t VALUES (?) RETURNING a', ['cjs']);
  assert.deepStrictEqual(r, { changes: 1, lastInsertRowid: 1, rows: [{ a: 'cjs' }] });
  assert.deepStrictEqual(await db.select('SELECT a FROM t'), [{ a: 'cjs' }]);
  assert.equal((await db.selectBytes('SELECT a FROM t')).toString(), '[{"a":"cjs"}]');
  await assert.rejects(db.execute('INSERT INTO t VALUES (?)', ['cjs']), (err) => {
    assert.ok(err instanceof SqliteError);
    assert.equal(err.code, 'SQLITE_CONSTRAINT_UNIQUE');
    return true;
  });
});

test('the ESM entry imported from CommonJS has the same classes', async () => {
  const esm = await import('../dist/index.mjs');
  assert.equal(esm.Database, Database);
  assert.equal(esm.SqliteError, SqliteError);
  assert.equal(require('quietsqlite').Database, Database);
});
