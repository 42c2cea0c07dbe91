// Memory a result leaves behind (issue 8, class 7): a kept field must not keep the whole
// result's text alive, and a result whose text adds up to more than V8's maximum string
// length must still arrive when every value fits. The heavy cases run in child processes so
// their heaps (and flags) are their own.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { constants } from 'node:buffer';
import { openMemory } from './fixtures/helpers.mjs';

const root = fileURLToPath(new URL('..', import.meta.url));

/** Runs `body` (an ES module source) in a child Node with `flags`; returns its JSON output. */
function child(body, flags = []) {
  const source = `import { createRequire } from 'node:module';
const require = createRequire(${JSON.stringify(root + '/')});
const { Database } = require('./dist/index.js');
const out = (v) => process.stdout.write(JSON.stringify(v));
${body}`;
  const r = spawnSync(process.execPath, [...flags, '--input-type=module', '-e', source], {
    encoding: 'utf8',
    maxBuffer: 1 << 20,
  });
  assert.equal(r.status, 0, `child failed (${r.status ?? r.signal}): ${r.stderr}`);
  return JSON.parse(r.stdout);
}

// 10,000 rows of ~1,000 characters: ~10 MB of text per result.
const BIG_RESULT = `WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 10000)
  SELECT i, printf('name-%08d', i) AS name, printf('%.*c', 1000, char(97 + i % 26)) AS pad FROM c`;

test('a kept short field does not keep its whole result alive', () => {
  const r = child(
    `const db = await Database.open(':memory:', { readers: 1 });
const sql = ${JSON.stringify(BIG_RESULT)};
const settle = () => { for (let i = 0; i < 4; i++) globalThis.gc(); };
// Warm up (code, factories, reader) so the baseline holds no one-off allocations.
await db.select(sql);
settle();
const before = process.memoryUsage();
const kept = [];
for (let k = 0; k < 30; k++) {
  const rows = await db.select(sql);
  kept.push(rows[1000 + k].name); // 13 characters: a V8 sliced string when cut from a longer one
}
settle();
const after = process.memoryUsage();
await db.close();
out({ kept, heap: after.heapUsed - before.heapUsed, external: after.external - before.external });`,
    ['--expose-gc'],
  );
  assert.deepEqual(r.kept, Array.from({ length: 30 }, (_, k) => `name-${String(1001 + k).padStart(8, '0')}`));
  // 30 results of ~10 MB: keeping each whole would retain ~300 MB; a bounded chunk each is tiny.
  const MB = 1024 * 1024;
  assert.ok(r.heap < 50 * MB, `heap grew by ${(r.heap / MB).toFixed(1)} MB for 30 kept 13-character fields`);
  assert.ok(r.external < 50 * MB, `external memory grew by ${(r.external / MB).toFixed(1)} MB`);
});

test('kept fields of every kind stay correct after their result is collected', async (t) => {
  // Text spanning many chunks, with non-ASCII and astral characters, short and long values,
  // next to blobs, bigints and NULLs: every field read back equals what SQLite returns.
  const db = await openMemory(t);
  const sql = `WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 3000)
    SELECT i, printf('%.*c', i % 97 + 1, 'x') || CASE WHEN i % 7 = 0 THEN 'é😀' ELSE '' END AS a,
      CASE WHEN i % 5 = 0 THEN NULL ELSE printf('%.*c', (i * 37) % 1500 + 1, char(65 + i % 26)) END AS b,
      x'00ff' AS blob, 9007199254740993 AS big, '' AS empty FROM c`;
  const rows = await db.select(sql);
  const arrays = await db.select(sql, [], { rowMode: 'array' });
  assert.equal(rows.length, 3000);
  for (let k = 0; k < rows.length; k++) {
    const i = k + 1;
    const a = 'x'.repeat(i % 97 + 1) + (i % 7 === 0 ? 'é😀' : '');
    const b = i % 5 === 0 ? null : String.fromCharCode(65 + (i % 26)).repeat((i * 37) % 1500 + 1);
    const expected = { i, a, b, blob: Buffer.from([0, 255]), big: 9007199254740993n, empty: '' };
    assert.deepEqual(rows[k], expected, `row ${i}`);
    assert.deepEqual(arrays[k], Object.values(expected), `array row ${i}`);
  }
});

test('rows holding more text than a chunk are cut inside and read back whole', async (t) => {
  // Rows of up to ~600 KB of text in four columns (chunks are cut inside such rows), with
  // non-ASCII text, NULLs, blobs and empty strings between them, in both row modes.
  const db = await openMemory(t);
  const sql = `WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 40)
    SELECT i, printf('%.*c', (i * 7919) % 200000 + 1, char(97 + i % 26)) AS a,
      CASE WHEN i % 3 = 0 THEN NULL ELSE printf('%.*c', (i * 104729) % 150000 + 1, 'é') END AS b,
      CASE WHEN i % 4 = 0 THEN x'01' ELSE '' END AS c,
      printf('%.*c', (i * 1299709) % 250000 + 1, char(65 + i % 26)) || '😀' AS d FROM c`;
  const expected = Array.from({ length: 40 }, (_, k) => {
    const i = k + 1;
    return {
      i,
      a: String.fromCharCode(97 + (i % 26)).repeat(((i * 7919) % 200000) + 1),
      b: i % 3 === 0 ? null : 'é'.repeat(((i * 104729) % 150000) + 1),
      c: i % 4 === 0 ? Buffer.from([1]) : '',
      d: String.fromCharCode(65 + (i % 26)).repeat(((i * 1299709) % 250000) + 1) + '😀',
    };
  });
  const rows = await db.select(sql);
  const arrays = await db.select(sql, [], { rowMode: 'array' });
  assert.equal(rows.length, 40);
  for (let k = 0; k < 40; k++) {
    assert.deepEqual(rows[k], expected[k], `row ${k + 1}`);
    assert.deepEqual(arrays[k], Object.values(expected[k]), `array row ${k + 1}`);
  }
});

/** Rows of a size set by `n`, with keys and text set by `round` and `m`, and what they hold. */
const POOL_SQL = "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < ?) " +
  "SELECT i, ? || '-' || i AS k, printf('%.*c', (i * ?) % 300 + 1, char(97 + i % 26)) AS t FROM c";
const POOL_EXPECTED = `(round, n, m) => Array.from({ length: n }, (_, j) => {
  const i = j + 1;
  return { i, k: round + '-' + i, t: String.fromCharCode(97 + (i % 26)).repeat((i * m) % 300 + 1) };
})`;

test('results written into the memory of collected results hold exactly their own bytes', () => {
  // The memory of a large result whose Buffer V8 has collected is kept a moment and written
  // into again (docs/experiments/038-result-buffer-pool.md). Results of sizes that repeat, go
  // up and go down, with collections between them: every row, every JSON byte and every
  // length must be this result's own, and results (and a view into one) kept across rounds
  // must not change. Selects run first, alone, so that their reuse is counted apart.
  const r = child(
    `const db = await Database.open(':memory:', { readers: 1 });
const pool = () => db[Symbol.for('quietsqlite.resultPool')]();
const sql = ${JSON.stringify(POOL_SQL)};
const expectedOf = ${POOL_EXPECTED};
const sizes = [20000, 20000, 3000, 12000, 12000, 600, 16000];
const wrong = [];
const kept = [];
const settle = async () => {
  globalThis.gc();
  // Finalizers run after the collection's sweeping, a few turns later.
  await new Promise((resolve) => setTimeout(resolve, 20));
};
const start = pool();
for (let round = 0; round < 14; round++) {
  const n = sizes[round % sizes.length];
  const expected = expectedOf(round, n, 7 + round);
  const rows = await db.select(sql, [n, String(round), 7 + round]);
  if (rows.length !== n || rows.some((row, j) => row.i !== expected[j].i || row.k !== expected[j].k || row.t !== expected[j].t)) {
    wrong.push('rows ' + round);
  }
  if (round % 5 === 0) kept.push({ round, rows, expected });
  await settle();
}
const afterRows = pool();
for (let round = 14; round < 28; round++) {
  const n = sizes[round % sizes.length];
  const text = JSON.stringify(expectedOf(round, n, 7 + round));
  const json = await db.selectBytes(sql, [n, String(round), 7 + round]);
  if (json.length !== Buffer.byteLength(text) || json.toString() !== text) wrong.push('json ' + round);
  if (round % 5 === 0) kept.push({ round, json, text });
  if (round % 5 === 3) kept.push({ round, json: json.subarray(100, 5000), text: Buffer.from(text).subarray(100, 5000).toString() });
  await settle();
}
const afterJson = pool();
for (const k of kept) {
  if (k.rows ? JSON.stringify(k.rows) !== JSON.stringify(k.expected) : k.json.toString() !== k.text) wrong.push('kept ' + k.round);
}
await db.close();
out({
  wrong,
  kept: kept.length,
  rowsReused: afterRows.reusedBySize - start.reusedBySize,
  jsonReused: afterJson.reusedLargest - afterRows.reusedLargest,
});`,
    ['--expose-gc'],
  );
  assert.deepEqual(r.wrong, []);
  assert.equal(r.kept, 8);
  assert.ok(r.rowsReused > 0, 'no select result was written into a kept buffer');
  assert.ok(r.jsonReused > 0, 'no selectBytes result was written into a kept buffer');
});

test('a Worker that loaded the addon alone leaves no pool thread behind', { skip: process.platform !== 'linux' && 'reads /proc' }, () => {
  // Node may unload an addon that only Workers loaded when the last of them ends; the pool's
  // thread must be gone by then. The main thread here never loads the addon.
  const worker = `import { createRequire } from 'node:module';
import { parentPort } from 'node:worker_threads';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
const require = createRequire(${JSON.stringify(root + '/')});
const { Database } = require('./dist/index.js');
const db = await Database.open(':memory:', { readers: 1 });
for (let k = 0; k < 30; k++) await db.selectBytes(${JSON.stringify(POOL_SQL)}, [20000, 'w', 7]);
// Collect the results, so that their buffers are in the pool and its thread runs.
setFlagsFromString('--expose-gc');
runInNewContext('gc')();
await new Promise((resolve) => setTimeout(resolve, 50));
parentPort.postMessage(db[Symbol.for('quietsqlite.resultPool')]());
setInterval(() => {}, 1000); // alive until terminated
`;
  const source = `import { Worker } from 'node:worker_threads';
import { readdirSync, readFileSync } from 'node:fs';
const names = () => readdirSync('/proc/self/task').map((t) => { try { return readFileSync('/proc/self/task/' + t + '/comm', 'utf8').trim(); } catch { return ''; } });
const w = new Worker(${JSON.stringify(worker)}, { eval: true });
const stats = await new Promise((resolve, reject) => { w.once('message', resolve); w.once('error', reject); });
const during = names().filter((n) => n === ${JSON.stringify('quietsqlite-mem')}).length;
await w.terminate();
const after = names().filter((n) => n === ${JSON.stringify('quietsqlite-mem')}).length;
process.stdout.write(JSON.stringify({ stats, during, after }));`;
  const res = spawnSync(process.execPath, ['--input-type=module', '-e', source], { encoding: 'utf8' });
  assert.equal(res.status, 0, res.stderr);
  const r = JSON.parse(res.stdout);
  assert.ok(r.stats.kept > 0 && r.during === 1, `the pool was in use in the Worker: ${res.stdout}`);
  assert.equal(r.after, 0, 'the pool thread was left after the Worker ended');
});

test('the result encoding constants agree between Rust and TypeScript', async () => {
  const rust = readFileSync(new URL('../crates/core/src/encode.rs', import.meta.url), 'utf8');
  const { ENCODING } = await import('../dist/rows.js');
  const consts = {};
  for (const m of rust.matchAll(/^pub const ([A-Z_0-9]+): (?:u8|u32|usize) = ([0-9_]+);/gm)) {
    consts[m[1]] = Number(m[2].replaceAll('_', ''));
  }
  assert.ok(Object.keys(ENCODING).length > 0);
  for (const [name, value] of Object.entries(ENCODING)) {
    assert.equal(consts[name], value, `${name} in encode.rs and src/rows.ts`);
  }
});

// Text just above V8's limit: 513 values of 1 MiB (one byte per character).
const LIMIT = constants.MAX_STRING_LENGTH;
const VALUE = 1 << 20;
const COUNT = Math.floor(LIMIT / VALUE) + 1;

test('a result whose text exceeds the maximum string length arrives whole', () => {
  assert.ok(COUNT * VALUE > LIMIT);
  const r = child(
    `const db = await Database.open(':memory:', { readers: 1 });
const sql = "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < ${COUNT}) " +
  "SELECT i, printf('%.*c', ${VALUE}, char(97 + i % 26)) AS t FROM c";
const rows = await db.select(sql);
const repeated = Array.from({ length: 26 }, (_, k) => String.fromCharCode(97 + k).repeat(${VALUE}));
let total = 0, wrong = [];
for (const row of rows) {
  total += row.t.length;
  if (row.t !== repeated[row.i % 26]) wrong.push(row.i);
}
const count = rows.length;
rows.length = 0;
// selectBytes resolves with a Buffer (no string limit): check its framing and size.
const json = await db.selectBytes(sql);
const jsonOk = Buffer.isBuffer(json) && json[0] === 0x5b && json[json.length - 1] === 0x5d &&
  json.indexOf('"t":"' + 'b'.repeat(64)) > 0;
await db.close();
out({ count, total, wrong, jsonLength: json.length, jsonOk });`,
    ['--max-old-space-size=4096'],
  );
  assert.equal(r.count, COUNT);
  assert.equal(r.total, COUNT * VALUE);
  assert.deepEqual(r.wrong, []);
  assert.ok(r.jsonOk);
  assert.ok(r.jsonLength > COUNT * VALUE);
});

test('a single value longer than the maximum string length is a RangeError naming its column', () => {
  const r = child(
    `const db = await Database.open(':memory:', { readers: 1 });
let error;
try {
  await db.select("SELECT 1 AS id, printf('%.*c', ${LIMIT + 1}, 'z') AS huge_text");
} catch (e) {
  error = { name: e.name, message: e.message };
}
// The database stays usable.
const after = await db.select("SELECT 'ok' AS v");
await db.close();
out({ error, after });`,
    ['--max-old-space-size=4096'],
  );
  assert.equal(r.error?.name, 'RangeError', JSON.stringify(r.error));
  assert.match(r.error.message, /huge_text/);
  assert.deepEqual(r.after, [{ v: 'ok' }]);
});

// Node 20 decodes non-ASCII UTF-8 at ~55 MB/s on the dev machine (10 s for this value); Node
// 24 is several times faster, and `npm test` runs every file under Node 24 too.
const slowUtf8 = Number(process.versions.node.split('.')[0]) < 24 && 'slow UTF-8 decoding before Node 24; runs under Node 24';

test('a non-ASCII value with more UTF-8 bytes than the string limit but fewer characters arrives', { skip: slowUtf8 }, () => {
  // 'é' is 2 bytes: ~540 MB of UTF-8 (more than Node decodes into one string at once) for
  // 270 M characters (fewer than the limit), after an ASCII character so that the piece
  // boundary falls inside a character.
  const count = Math.floor(LIMIT / 2) + 1000;
  const r = child(
    `const db = await Database.open(':memory:', { readers: 1 });
const row = await db.selectOne("SELECT 'a' || printf('%.*c', ${count}, 'é') AS t, 'after' AS u");
const t = row.t;
const ok = t.length === ${count + 1} && t === 'a' + 'é'.repeat(${count});
await db.close();
out({ ok, length: t.length, u: row.u });`,
    ['--max-old-space-size=4096'],
  );
  assert.deepEqual(r, { ok: true, length: count + 1, u: 'after' });
});

// Node 20 cannot make a Buffer over 4 GiB (buffer.constants.MAX_LENGTH is 2^32 there; 2^53 - 1
// from Node 22). Creating one failed inside Node, which had already freed the result, and the
// binding freed it a second time: the process died. Now that request rejects, the others of
// the same delivery settle, and the database stays usable.
const overLimit = constants.MAX_LENGTH <= 2 ** 32 ? false : 'Node.js Buffers here reach 2^53 - 1 bytes: no result can exceed them';
test('a result larger than the largest Buffer rejects with a RangeError; other requests settle', { skip: overLimit }, () => {
  const r = child(
    `const db = await Database.open(':memory:', { readers: 1 });
const other = db.select('SELECT 42 AS x');
let outcome;
try {
  const rows = await db.select('SELECT zeroblob(900000000) AS b FROM (VALUES (1),(2),(3),(4),(5))');
  outcome = 'resolved with ' + rows.length + ' rows';
} catch (e) {
  outcome = e.name + ': ' + e.message;
}
const x = (await other)[0].x;
const after = (await db.selectOne('SELECT 7 AS y')).y;
await db.close();
out({ outcome, x, after });`,
  );
  assert.match(r.outcome, /^RangeError: the result is too large/);
  assert.equal(r.x, 42);
  assert.equal(r.after, 7);
});

// Each call given an AbortSignal or a timeout takes another path (the request's abort
// listener and timer); a closure made per request there kept finished ones alive too
// (docs/experiments/067: 490-550 bytes a query).
const CANCELLABLE = [
  ['', 'undefined'],
  [', each with an AbortSignal', '{ signal: new AbortController().signal }'],
  [', each with a timeout', '{ timeoutMs: 60_000 }'],
];
for (const [name, options] of CANCELLABLE) {
  test(`requests in flight do not keep finished ones alive past a young-generation collection${name}`, () => {
    // 64 point queries in flight, after one full collection (as any long-running process
    // has had): what the young-generation collections move to the old generation, per
    // query. A table of the requests that keeps finished ones reachable from the old
    // generation (a Map, whose replaced tables keep their entries) made it 150-220 bytes a
    // query, and a fifth of the time went to scavenges (docs/experiments/066); with nothing
    // kept, it is under one. The young generation's size is pinned so that the run has
    // scavenges enough to judge by.
    const r = child(
      `const { GCProfiler } = await import('node:v8');
const db = await Database.open(':memory:', { readers: 2 });
await db.execute('CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT)');
await db.executeBatch('INSERT INTO t VALUES (?, ?)', Array.from({ length: 1000 }, (_, i) => [i, 'v' + i]));
const options = ${options};
const run = async (n) => {
  let left = n;
  await Promise.all(Array.from({ length: 64 }, async () => {
    while (left-- > 0) await db.selectOne('SELECT * FROM t WHERE id = ?', [left % 1000], options);
  }));
};
await run(20000);
globalThis.gc();
const profiler = new GCProfiler();
profiler.start();
const queries = 100000;
await run(queries);
const { statistics } = profiler.stop();
const old = (s) => s.heapSpaceStatistics.find((x) => x.spaceName === 'old_space').spaceUsedSize;
let promoted = 0;
let scavenges = 0;
for (const s of statistics) {
  if (s.gcType !== 'Scavenge') continue;
  scavenges++;
  // Never negative: sweeping after the full collection may shrink the old generation meanwhile.
  promoted += Math.max(0, old(s.afterGC) - old(s.beforeGC));
}
await db.close();
out({ scavenges, perQuery: promoted / queries });`,
      ['--expose-gc', '--min-semi-space-size=4', '--max-semi-space-size=4'],
    );
    assert.ok(r.scavenges >= 5, `enough young collections to judge: ${r.scavenges}`);
    assert.ok(r.perQuery < 20, `${r.perQuery.toFixed(1)} bytes a query promoted by ${r.scavenges} scavenges`);
  });
}
