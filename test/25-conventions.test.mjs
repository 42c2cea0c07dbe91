// Conventions of issue 9: rowMode 'array' on execute (RETURNING with duplicate column
// names) and the other row methods, and `await using` (Symbol.asyncDispose) on Database,
// under Node 20 (which names the symbol itself) and Node 24.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Database } from '../dist/index.mjs';
import { exitIfStuck, scratch } from './fixtures/tx-helpers.mjs';

const tmp = scratch('conv25');
exitIfStuck();

test("execute with rowMode 'array' returns RETURNING rows as arrays, duplicate names kept", async () => {
  const db = await tmp.open();
  await db.execute('CREATE TABLE t(id INTEGER PRIMARY KEY, a TEXT, b TEXT)');
  const r = await db.execute("INSERT INTO t(a, b) VALUES ('x', 'y'), ('p', 'q') RETURNING id, a AS v, b AS v", [], {
    rowMode: 'array',
  });
  assert.deepEqual(r.rows, [[1, 'x', 'y'], [2, 'p', 'q']]);
  assert.equal(r.changes, 2);
  // Objects (the default) keep the last of duplicate names, as select does.
  const o = await db.execute("UPDATE t SET a = 'z' WHERE id = 1 RETURNING a AS v, b AS v");
  assert.deepEqual(o.rows, [{ v: 'y' }]);
  const inTx = await db.transaction((tx) => tx.execute('DELETE FROM t WHERE id = 2 RETURNING id, id', [], { rowMode: 'array' }));
  assert.deepEqual(inTx.rows, [[2, 2]]);
  assert.deepEqual(await db.selectOne('SELECT 1 AS a, 2 AS a', [], { rowMode: 'array' }), [1, 2]);
  await assert.rejects(db.execute('SELECT 1', [], { rowMode: 'rows' }), TypeError);
  await assert.rejects(db.executeBatch('SELECT 1', [[]], { rowMode: 'array' }), TypeError);
});

test('Database is async-disposable: Symbol.asyncDispose closes it', async () => {
  assert.equal(typeof Symbol.asyncDispose, 'symbol', 'Node 20.4+ and 24 both define Symbol.asyncDispose');
  const db = await tmp.open();
  assert.equal(typeof db[Symbol.asyncDispose], 'function');
  await db[Symbol.asyncDispose]();
  assert.equal(db.isOpen, false);
  await db[Symbol.asyncDispose](); // idempotent, like close()
});

test('await using closes the database at the end of the block (where the syntax exists)', async (t) => {
  let body;
  try {
    const AsyncFunction = (async () => {}).constructor;
    body = new AsyncFunction(
      'Database',
      'path',
      'let seen; { await using db = await Database.open(path); await db.execute("CREATE TABLE t(x)"); seen = db; } return seen;',
    );
  } catch (err) {
    assert.ok(err instanceof SyntaxError);
    t.skip(`this Node (${process.version}) has no \`await using\` syntax`);
    return;
  }
  const db = await body(Database, tmp.file());
  assert.equal(db.isOpen, false);
});
