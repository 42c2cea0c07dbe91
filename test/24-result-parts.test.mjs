// A large select arrives in parts (issue 11, experiment 029): the reader hands over a piece
// of the rows every ~256 KiB and steps on while the JS thread decodes it. What the caller
// gets must not change: the same rows, in order, one promise that settles once.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { Database } from '../dist/index.js';
import { exitIfStuck, scratch } from './fixtures/tx-helpers.mjs';

const require = createRequire(import.meta.url);
const { Requests } = require('../dist/requests.js');
const { COMPLETION_PART } = require('../dist/native.js').binding;

const tmp = scratch('parts24');
exitIfStuck();

const ROWS = 6000;
const BIG = 2n ** 60n;
/** In the middle: inside a part, not the final piece. */
const BIG_ROW = 3000;

/** Row i as the database holds it: text (some not ASCII), a real, a blob, an integer that
 * is unsafe as a number in one row, and NULLs. */
function expected(i) {
  return {
    id: i,
    s: i % 7 === 0 ? `ünï ${i} 𝄞 ${'y'.repeat(150)}` : `row ${i} ${'x'.repeat(180)}`,
    r: i / 8,
    b: i % 5 === 0 ? Buffer.from([i & 255, 0, 255]) : null,
    big: i === BIG_ROW ? BIG : i,
  };
}

async function filled(options) {
  const db = await tmp.open(undefined, options);
  await db.execute('CREATE TABLE t(id INTEGER PRIMARY KEY, s TEXT, r REAL, b BLOB, big INTEGER)');
  const rows = [];
  for (let i = 1; i <= ROWS; i++) {
    const e = expected(i);
    rows.push([e.id, e.s, e.r, e.b, e.big]);
  }
  await db.executeBatch('INSERT INTO t VALUES (?, ?, ?, ?, ?)', rows);
  return db;
}

/** Counts the parts delivered while `fn` runs (and calls `onPart` at each). */
async function countingParts(fn, onPart = () => {}) {
  const deliver = Requests.prototype.deliver;
  let parts = 0;
  Requests.prototype.deliver = function (batch, i) {
    if (batch[i + 1] === COMPLETION_PART) {
      parts++;
      onPart();
    }
    return deliver.call(this, batch, i);
  };
  try {
    return { value: await fn(), parts };
  } finally {
    Requests.prototype.deliver = deliver;
  }
}

test('a select larger than a part arrives in parts and resolves with every row in order', async () => {
  const db = await filled();
  const { value: rows, parts } = await countingParts(() => db.select('SELECT * FROM t ORDER BY id'));
  assert.ok(parts >= 3, `${parts} parts`);
  assert.equal(rows.length, ROWS);
  for (let i = 1; i <= ROWS; i++) {
    assert.deepEqual(rows[i - 1], expected(i), `row ${i}`);
  }
  // Arrays, a prepared statement, and a result with no row: the same way.
  const arrays = await db.select('SELECT id, s FROM t WHERE id > ? ORDER BY id', [10], { rowMode: 'array' });
  assert.deepEqual(arrays.at(0), [11, expected(11).s]);
  assert.deepEqual(arrays.at(-1), [ROWS, expected(ROWS).s]);
  assert.equal(arrays.length, ROWS - 10);
  const statement = db.prepare('SELECT id, s FROM t WHERE s <> ? ORDER BY id');
  const { value: ids, parts: statementParts } = await countingParts(() => statement.select(['']));
  assert.ok(statementParts >= 1);
  assert.deepEqual(
    ids.map((r) => r.id),
    Array.from({ length: ROWS }, (_, k) => k + 1),
  );
  assert.deepEqual(await db.select('SELECT * FROM t WHERE id < 0'), []);
  await db.close();
});

test("an integer that does not fit intMode 'number' in a later part rejects, and the database goes on", async () => {
  const db = await filled({ intMode: 'number' });
  const { value: outcome, parts } = await countingParts(() =>
    db.select('SELECT * FROM t ORDER BY id').then(
      () => 'resolved',
      (e) => e,
    ),
  );
  assert.ok(parts >= 1);
  assert.ok(outcome instanceof RangeError, String(outcome));
  assert.match(outcome.message, /intMode/);
  assert.equal((await db.select('SELECT id FROM t ORDER BY id')).length, ROWS);
  assert.deepEqual(await db.selectOne('SELECT count(*) AS n FROM t'), { n: ROWS });
  await db.close();
});

test('a select aborted between its parts rejects with the reason; its later parts are dropped', async () => {
  const db = await filled();
  const controller = new AbortController();
  const reason = new Error('enough');
  const { value: outcome, parts } = await countingParts(
    () =>
      db.select('SELECT * FROM t ORDER BY id', [], { signal: controller.signal }).then(
        () => 'resolved',
        (e) => e,
      ),
    () => controller.abort(reason),
  );
  assert.equal(outcome, reason);
  assert.ok(parts >= 1);
  // Whatever the reader still sends for it goes nowhere; later requests get their own rows.
  for (let k = 0; k < 3; k++) {
    assert.equal((await db.select('SELECT * FROM t ORDER BY id')).length, ROWS);
  }
  await db.close();
});
