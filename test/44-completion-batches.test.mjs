// Completion batches (crates/node/src/batch.rs, experiment 042): small results arrive in a
// scratch Buffer the database keeps and reuses, the rest as values beside it. These tests
// fill batches past what the scratch holds, mix every kind of entry in one batch, and check
// that nothing decoded from the scratch changes when the scratch is written again.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { openMemory, openTemp, rejectsAsync, SqliteError } from './fixtures/helpers.mjs';

/** Watches what the addon's takes return: whether a batch said more were queued, and
 * whether one came with values beside the scratch. */
function watchTakes(t) {
  const native = createRequire(import.meta.url)('../native/quietsqlite.node');
  const take = native.dbTakeCompletions;
  const seen = { takes: 0, more: 0, withValues: 0 };
  native.dbTakeCompletions = function (handle, micros, scratch) {
    const values = take.call(this, handle, micros, scratch);
    if (values !== undefined) {
      seen.takes++;
      if (scratch.readUInt32LE(4) === 1) seen.more++;
      if (values !== null) seen.withValues++;
    }
    return values;
  };
  t.after(() => {
    native.dbTakeCompletions = take;
  });
  return seen;
}

test('the batch layout constants agree between Rust and TypeScript', async () => {
  const rust = readFileSync(new URL('../crates/node/src/batch.rs', import.meta.url), 'utf8');
  const { BATCH } = await import('../dist/requests.js');
  const consts = {};
  for (const m of rust.matchAll(/^pub const ([A-Z_0-9]+): (?:u32|usize) = ([A-Z_0-9 +*]+);/gm)) {
    // Values are numbers, products and sums of the constants above them.
    const expr = m[2].replace(/[A-Z_][A-Z_0-9]*/g, (name) => {
      assert.ok(name in consts, `${name} is defined before ${m[1]}`);
      return String(consts[name]);
    });
    assert.match(expr, /^[0-9 +*]+$/);
    consts[m[1]] = Function(`return ${expr}`)();
  }
  assert.deepEqual(Object.keys(BATCH).sort(), Object.keys(consts).sort(), 'the same constants on both sides');
  for (const [name, value] of Object.entries(BATCH)) {
    assert.equal(consts[name], value, `${name} in batch.rs and src/requests.ts`);
  }
});

async function items(t, count) {
  const db = await openTemp(t, { readers: 2 });
  await db.execute('CREATE TABLE items(id INTEGER PRIMARY KEY, name TEXT, big INTEGER, data BLOB)');
  await db.executeBatch(
    'INSERT INTO items VALUES (?, ?, ?, ?)',
    Array.from({ length: count }, (_, i) => [i + 1, `item ${i + 1}`, 2n ** 60n + BigInt(i), Buffer.from([i & 255, 7])]),
  );
  return db;
}

test('more completions at once than one batch holds all arrive, each with its own row', async (t) => {
  const db = await items(t, 3000);
  const seen = watchTakes(t);
  // Sent in one synchronous run: the readers queue far more than 512 completions before
  // the JS thread takes the first batch.
  const ids = Array.from({ length: 3000 }, (_, i) => ((i * 7919) % 3000) + 1);
  const rows = await Promise.all(ids.map((id) => db.selectOne('SELECT * FROM items WHERE id = ?', [id])));
  rows.forEach((row, i) => {
    const id = ids[i];
    assert.equal(row.id, id);
    assert.equal(row.name, `item ${id}`);
    assert.equal(row.big, 2n ** 60n + BigInt(id - 1));
    assert.deepEqual(row.data, Buffer.from([(id - 1) & 255, 7]));
  });
  assert.ok(seen.more > 0, `a batch left completions queued (${JSON.stringify(seen)})`);
});

test('results too many for the scratch arrive as Buffers of their own, unchanged', async (t) => {
  const db = await items(t, 100);
  const seen = watchTakes(t);
  // ~3.9 KB each: a batch of them fills the scratch's result area many times over.
  const sql = "SELECT id, printf('%.3900c', char(64 + id % 26)) AS pad FROM items WHERE id = ?";
  for (const rowMode of ['object', 'array']) {
    const got = await Promise.all(Array.from({ length: 100 }, (_, i) => db.select(sql, [i + 1], { rowMode })));
    got.forEach((rows, i) => {
      const row = rowMode === 'array' ? { id: rows[0][0], pad: rows[0][1] } : rows[0];
      assert.equal(row.id, i + 1);
      assert.equal(row.pad, String.fromCharCode(64 + ((i + 1) % 26)).repeat(3900));
    });
  }
  assert.ok(seen.withValues > 0, `some rows came as values (${JSON.stringify(seen)})`);
});

test('values decoded from the scratch stay as they were when later batches reuse it', async (t) => {
  const db = await items(t, 200);
  const first = await Promise.all(Array.from({ length: 100 }, (_, i) => db.selectOne('SELECT * FROM items WHERE id = ?', [i + 1])));
  const snapshot = first.map((r) => [r.id, r.name, r.big, Buffer.from(r.data)]);
  await Promise.all(Array.from({ length: 100 }, (_, i) => db.selectOne('SELECT * FROM items WHERE id = ?', [200 - i])));
  await db.selectOne("SELECT x'ffffffff' AS data, 'overwritten' AS name");
  first.forEach((r, i) => {
    assert.deepEqual([r.id, r.name, r.big, r.data], snapshot[i]);
  });
});

test('one batch mixing rows, writes, errors, JSON and nothing delivers each to its own request', async (t) => {
  for (const intMode of ['auto', 'bigint', 'number']) {
    const db = await openMemory(t, { intMode });
    await db.execute('CREATE TABLE w(id INTEGER PRIMARY KEY, v TEXT)');
    const big = 2n ** 60n;
    const calls = [];
    for (let i = 0; i < 40; i++) {
      calls.push(db.execute('INSERT INTO w(v) VALUES (?) RETURNING id, v', [`v${i}`]));
      calls.push(db.execute('INSERT INTO w(v) VALUES (?)', [`plain${i}`]));
      calls.push(db.select('SELECT no_such_column FROM w'));
      calls.push(db.selectBytes('SELECT 1 AS one'));
      calls.push(db.selectOne('SELECT ? AS n', [i]));
    }
    // A rowid beyond 2^53 (a BigInt, never a float64 of the scratch), and RETURNING rows
    // too large for it.
    calls.push(db.execute("INSERT INTO w(v) VALUES (printf('%.6000c', 'r')) RETURNING v"));
    calls.push(db.execute('INSERT INTO w(id, v) VALUES (?, ?)', [big, 'big']));
    const settled = await Promise.allSettled(calls);
    let rowid = 0;
    for (let i = 0; i < 40; i++) {
      const [returning, plain, failed, json, one] = settled.slice(i * 5, i * 5 + 5);
      rowid++;
      const id = intMode === 'bigint' ? BigInt(rowid) : rowid;
      assert.deepEqual(returning.value, { changes: 1, lastInsertRowid: id, rows: [{ id, v: `v${i}` }] });
      rowid++;
      assert.deepEqual(plain.value, { changes: 1, lastInsertRowid: intMode === 'bigint' ? BigInt(rowid) : rowid, rows: [] });
      assert.equal(failed.status, 'rejected');
      assert.ok(failed.reason instanceof SqliteError);
      assert.match(failed.reason.message, /no such column/);
      assert.equal(json.value.toString(), '[{"one":1}]');
      assert.deepEqual(one.value, { n: intMode === 'bigint' ? BigInt(i) : i });
    }
    const [longReturning, bigInsert] = settled.slice(200);
    if (intMode === 'number') {
      assert.equal(bigInsert.status, 'rejected');
      assert.ok(bigInsert.reason instanceof RangeError);
    } else {
      assert.deepEqual(bigInsert.value, { changes: 1, lastInsertRowid: big, rows: [] });
    }
    assert.equal(longReturning.value.rows[0].v, 'r'.repeat(6000));
    assert.equal(await db.selectOne('SELECT count(*) AS n FROM w', [], { rowMode: 'array' }).then((r) => Number(r[0])), 82);
    await db.close();
  }
});

test('a transaction of many small steps resolves each with its own result', async (t) => {
  const db = await openMemory(t);
  await db.execute('CREATE TABLE t(id INTEGER PRIMARY KEY, v INTEGER)');
  const out = await db.transaction(async (tx) => {
    const seen = [];
    for (let i = 0; i < 300; i++) {
      const r = await tx.execute('INSERT INTO t(v) VALUES (?)', [i * 3]);
      const row = await tx.selectOne('SELECT v FROM t WHERE id = ?', [r.lastInsertRowid]);
      seen.push([r.lastInsertRowid, row.v]);
    }
    return seen;
  });
  out.forEach(([id, v], i) => assert.deepEqual([id, v], [i + 1, i * 3]));
  await rejectsAsync(() => db.select('SELECT * FROM nowhere'), SqliteError);
});

test('lastInsertRowid at the edges of what a float64 holds exactly, in every intMode', async (t) => {
  const SAFE = 2n ** 53n - 1n;
  for (const intMode of ['auto', 'bigint', 'number']) {
    const db = await openMemory(t, { intMode });
    await db.execute('CREATE TABLE r(id INTEGER PRIMARY KEY)');
    for (const id of [SAFE, -SAFE, SAFE + 1n, -SAFE - 1n]) {
      const safe = id >= -SAFE && id <= SAFE;
      const insert = () => db.execute('INSERT INTO r(id) VALUES (?)', [id]);
      if (!safe && intMode === 'number') {
        const err = await rejectsAsync(insert, RangeError);
        assert.match(err.message, /changes stand/);
        continue;
      }
      const r = await insert();
      const want = intMode === 'bigint' || !safe ? id : Number(id);
      assert.deepEqual(r, { changes: 1, lastInsertRowid: want, rows: [] }, `${intMode} ${id}`);
    }
    await db.close();
  }
});

test('a scratch whose memory was taken away: the batch comes in a new Buffer, which becomes the scratch', async (t) => {
  const native = createRequire(import.meta.url)('../native/quietsqlite.node');
  const take = native.dbTakeCompletions;
  const scratches = new Set();
  let detached = 0;
  native.dbTakeCompletions = function (handle, micros, scratch) {
    scratches.add(scratch);
    // Hostile code that reached the scratch transfers its memory away (detaching it).
    if (detached < 3 && scratch.byteLength > 0) {
      structuredClone(scratch.buffer, { transfer: [scratch.buffer] });
      detached++;
    }
    return take.call(this, handle, micros, scratch);
  };
  t.after(() => {
    native.dbTakeCompletions = take;
  });
  const db = await items(t, 300);
  for (let round = 0; round < 5; round++) {
    const rows = await Promise.all(Array.from({ length: 300 }, (_, i) => db.selectOne('SELECT id, name FROM items WHERE id = ?', [i + 1])));
    rows.forEach((row, i) => assert.deepEqual(row, { id: i + 1, name: `item ${i + 1}` }));
    const w = await db.execute('INSERT INTO items(name) VALUES (?) RETURNING id', ['new']);
    assert.equal(w.rows[0].id, 301 + round);
  }
  assert.equal(detached, 3, 'three scratches were detached');
  assert.ok(scratches.size >= 4, `the database took new scratches (${scratches.size})`);
});

test('the per-request calls refuse a handle that is no open database of this thread', async (t) => {
  const native = createRequire(import.meta.url)('../native/quietsqlite.node');
  const db = await openMemory(t);
  assert.deepEqual(await db.selectOne('SELECT 1 AS one'), { one: 1 });
  for (const handle of [0, 0xffffffff]) {
    assert.throws(() => native.dbRead(handle, 1, 'SELECT 1', [], 0, false), /no open database has this handle/);
    assert.throws(() => native.dbExecute(handle, 1, 0, 'SELECT 1', [], false), /no open database has this handle/);
    assert.throws(() => native.dbTakeCompletions(handle, 0, Buffer.alloc(65536)), /no open database has this handle/);
    assert.throws(() => native.dbKeepAlive(handle, true), /no open database has this handle/);
  }
  // The database itself is untouched.
  assert.deepEqual(await db.selectOne('SELECT 2 AS two'), { two: 2 });
});

test('the per-request calls refuse arguments of the wrong type with an error, not a crash', async (t) => {
  const native = createRequire(import.meta.url)('../native/quietsqlite.node');
  const db = await openMemory(t);
  const refuses = (call, message) => assert.throws(call, (e) => e instanceof Error && message.test(e.message));
  refuses(() => native.dbRead(), /^handle must be a number$/);
  refuses(() => native.dbRead('1', 1, 'SELECT 1', [], 0), /^handle must be a number$/);
  refuses(() => native.dbRead(0, {}, 'SELECT 1', [], 0), /^id must be a number$/);
  refuses(() => native.dbRead(0, 1, 'SELECT 1', [], 'rows'), /^format must be a number$/);
  refuses(() => native.dbRead(0, 1, 'SELECT 1', [], 0, 'yes'), /^cancellable must be a boolean$/);
  // An absent cancellable (undefined or null) is allowed: the handle is what is refused.
  refuses(() => native.dbRead(0, 1, 'SELECT 1', [], 0, null), /no open database has this handle/);
  refuses(() => native.dbRead(0, 1, 'SELECT 1', [], 0), /no open database has this handle/);
  refuses(() => native.dbTakeCompletions(), /^handle must be a number$/);
  refuses(() => native.dbTakeCompletions(0, 'soon', Buffer.alloc(65536)), /^maxMicros must be a number$/);
  refuses(() => native.dbTakeCompletions(0, 0, Buffer.alloc(65536)), /no open database has this handle/);
  refuses(() => native.dbKeepAlive(), /^handle must be a number$/);
  refuses(() => native.dbKeepAlive(0, 'yes'), /^on must be a boolean$/);
  refuses(() => native.dbKeepAlive(0), /^on must be a boolean$/);
  refuses(() => native.dbKeepAlive(0, false), /no open database has this handle/);
  assert.deepEqual(await db.selectOne('SELECT 3 AS three'), { three: 3 });
});

test('a completion that comes while the JS thread sleeps is delivered after any mix of polled bursts', () => {
  // Completions come by a threadsafe call only when none is queued (experiment 068): the
  // callback of a queued call takes whatever was pushed since. Bursts taken by the JS
  // thread's polls leave such a call queued; each slow read below finishes only after the
  // thread went to sleep in the event loop, so it needs that call, or one of its own, to
  // wake it. A lost wake-up leaves a promise unsettled (and the database unable to close):
  // the scenario runs in a child process, killed if it has not finished in time.
  const root = fileURLToPath(new URL('..', import.meta.url));
  const source = `import { createRequire } from 'node:module';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
const { Database } = createRequire(${JSON.stringify(root + '/')})('./dist/index.js');
const dir = mkdtempSync(join(tmpdir(), 'qs-wake-'));
const db = await Database.open(join(dir, 'w.db'), { readers: 2 });
await db.execute('CREATE TABLE t(x)');
await db.execute('INSERT INTO t VALUES (1)');
const slow = 'WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < 30000) SELECT count(*) AS n FROM c';
let ok = 0;
for (let round = 0; round < 150; round++) {
  const burst = await Promise.all(Array.from({ length: 1 + (round % 17) }, () => db.selectOne('SELECT x FROM t')));
  if (burst.every((r) => r.x === 1)) ok++;
  if (round % 3 === 0) await new Promise((resolve) => setImmediate(resolve));
  if (round % 5 === 0) await new Promise((resolve) => setTimeout(resolve, 1));
  if ((await db.selectOne(slow)).n === 30000) ok++;
}
await db.close();
rmSync(dir, { recursive: true, force: true });
process.stdout.write(String(ok));`;
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', source], { encoding: 'utf8', timeout: 60_000 });
  assert.equal(r.signal, null, `the child did not finish in 60 s: a completion was never delivered (${r.stderr})`);
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stdout, '300', 'every burst and every slow read came back right');
});
