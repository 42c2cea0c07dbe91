// Historical: it captures results from the completion callback's [id, status, payload]
// array, which experiment 042 replaced (the callback takes its batch through a scratch
// Buffer); it does not run against builds since then.
// Experiment 010: text decoded in chunks instead of one string per result
// (docs/experiments/010-chunked-text.md). Every candidate turns the same result (the
// `items` table of BENCHMARKS.md, ASCII text) into rows on the JS thread; we time that step
// plus touching every field, interleaved (forward, then reverse order each round), and
// report medians. Then, per candidate, what 30 kept 13-character fields retain.
//
//   node --expose-gc bench/experiments/chunked-text.mjs [rows=10000] [rounds=40] [main-rows.js] [shape=items|wide]
//
// shape wide: 20 columns (8 short TEXT, 6 INTEGER, 6 REAL) like bench suite 4's wide table.
// With --expose-gc, a full GC runs before each timed sample (outside the clock), so every
// sample starts from the same heap state (the machine is shared; this steadies the medians).
// main-rows.js: the compiled src/rows.ts of the main branch (format 1, one string per
// result), e.g. from a checkout of main built with `npm run build:ts`. The format-1 buffer
// and other chunk sizes are re-encoded here from the branch's real result (ASCII text, so a
// byte offset is a UTF-16 offset).
import { createRequire } from 'node:module';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parse, assemble, toFormat1 } from './format1.mjs';

const require = createRequire(import.meta.url);
const { Database } = require('../../dist/index.js');
const { decodeRows, ENCODING } = require('../../dist/rows.js');
/** A fresh instance of the branch decoder: generated builders are cached per module, and a
 * candidate must not share a builder (and its type feedback) with another. */
function freshDecoder() {
  const path = require.resolve('../../dist/rows.js');
  delete require.cache[path];
  const d = require(path).decodeRows;
  delete require.cache[path];
  return d;
}

const N = Number(process.argv[2] ?? 10000);
const ROUNDS = Number(process.argv[3] ?? 40);
const mainRowsPath = process.argv[4];
const mainDecode = mainRowsPath ? require(resolve(mainRowsPath)).decodeRows : null;
const SHAPE = process.argv[5] ?? 'items';
const dir = mkdtempSync(join(tmpdir(), 'qs-exp010-'));
const file = join(dir, 'items.db');

const db = await Database.open(file, { readers: 1 });
if (SHAPE === 'wide') {
  const cols = Array.from({ length: 20 }, (_, k) => [`c${k}`, k % 5 < 2 ? 'TEXT' : k % 5 < 4 ? 'INTEGER' : 'REAL']).sort(
    (a, b) => (a[1] === 'TEXT') - (b[1] === 'TEXT'),
  );
  await db.execute(`CREATE TABLE items(id INTEGER PRIMARY KEY, ${cols.map(([n, t]) => `${n} ${t}`).join(', ')})`);
  const exprs = cols.map(([, t], k) =>
    t === 'TEXT' ? `substr('word' || (i * ${k + 7} % 997) || ' lorem ipsum', 1, 6 + (i + ${k}) % 9)` : t === 'INTEGER' ? `i * ${k + 3} % 1000000` : `(i * ${k + 11} % 100000) / 100.0`,
  );
  await db.execute(`WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < ${N})
    INSERT INTO items SELECT i, ${exprs.join(', ')} FROM c`);
} else {
  await db.execute(
    'CREATE TABLE items(id INTEGER PRIMARY KEY, name TEXT, description TEXT, price REAL, category TEXT, created_at INTEGER)',
  );
  await db.execute(`WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < ${N})
    INSERT INTO items SELECT i, 'item ' || i, substr('description of item ' || i || ' ' || printf('%.*c', 90, 'x'), 1, 90),
      (i * 7919 % 100000) / 100.0, 'cat' || (i % 20), 1700000000 + i FROM c`);
}

// The branch's real encoded result, straight from the addon.
const { binding } = require('../../dist/native.js');
const real = await new Promise((resolveRaw, reject) => {
  const nd = new binding.NativeDatabase(file, { readers: 1, readonly: true, busyTimeout: 5000, pragmas: [] }, (batch) => {
    for (let i = 0; i < batch.length; i += 3) {
      if (batch[i] === 1) continue; // open
      if (batch[i + 1] !== 0) reject(new Error(String(batch[i + 2])));
      else {
        nd.keepAlive(false);
        nd.close(99);
        resolveRaw(batch[i + 2]);
      }
    }
  }, 1);
  nd.keepAlive(true);
  nd.read(2, 'SELECT * FROM items', undefined, 0);
});

/** Format 2 with other chunk sizes, cut by the encoder's rules: a chunk ends with the row
 * that brings it to `bound` bytes (`perRow`: or after every row, a switch per row), and is
 * cut inside a row before a value that would take it past `4 * bound` (a TAG_TEXT_CHUNK cell).
 * `cellsOnly`: the first design of this experiment, every cut inside rows at `bound`. */
function rechunk(p, bound, { cellsOnly = false } = {}) {
  const nums = p.nums.slice();
  const tags = p.tags.slice();
  const rowChunks = [], cellChunks = [];
  let open = null, prev = 0;
  const close = () => {
    if (open === null) return;
    if (open.row === null) cellChunks.push(open.start, prev);
    else rowChunks.push(open.row, open.start, prev);
    open = null;
  };
  for (let i = 0; i < tags.length; i++) {
    if (i > 0 && i % p.cols === 0 && open !== null && !cellsOnly && prev - open.start >= bound) close();
    if (tags[i] !== ENCODING.TAG_TEXT && tags[i] !== ENCODING.TAG_TEXT_CHUNK) continue;
    const len = p.ends[i] - prev;
    const hard = cellsOnly ? bound : 4 * bound;
    if (open === null && !cellsOnly) {
      open = { start: prev, row: Math.floor(i / p.cols) };
      tags[i] = ENCODING.TAG_TEXT;
    } else if (open === null || prev - open.start + len > hard) {
      close();
      open = { start: prev, row: null };
      tags[i] = ENCODING.TAG_TEXT_CHUNK;
    } else tags[i] = ENCODING.TAG_TEXT;
    nums[i] = p.ends[i] - open.start;
    prev = p.ends[i];
  }
  close();
  return assemble(p, ENCODING.FORMAT_VERSION, nums, tags, rowChunks, cellChunks);
}

const parsed = parse(real);
const v1 = toFormat1(parsed);

/** Alternative: main's format, one shared string for short fields, but each field of 13+
 * characters (which V8 would make a slice) decoded on its own from the buffer. */
function perFieldLong(buf) {
  const h = new Uint32Array(buf.buffer, buf.byteOffset, 8);
  const [rows, cols, namesLen, textLen] = [h[1], h[2], h[4], h[5]];
  const cells = rows * cols;
  let off = 32;
  const nums = new Float64Array(buf.buffer, buf.byteOffset + off, cells); off += cells * 8 + h[7] * 8;
  const tags = new Uint8Array(buf.buffer, buf.byteOffset + off, cells); off += cells + namesLen;
  const base = off;
  const text = buf.toString('latin1', off, off + textLen);
  const out = new Array(rows);
  let tp = 0, i = 0;
  const cell = () => {
    const t = tags[i], x = nums[i++];
    if (t === 2) { const s = x - tp >= 13 ? buf.latin1Slice(base + tp, base + x) : text.slice(tp, x); tp = x; return s; }
    return t === 0 ? null : x;
  };
  for (let r = 0; r < rows; r++) {
    out[r] = { id: cell(), name: cell(), description: cell(), price: cell(), category: cell(), created_at: cell() };
  }
  return out;
}

const candidates = {};
if (mainDecode) candidates['main: one string per result (format 1)'] = () => mainDecode(v1, 'object', 'auto');
{
  const d = freshDecoder();
  candidates['branch: 64 KiB chunks (real addon result)'] = () => d(real, 'object', 'auto');
}
for (const kib of [4, 16, 256]) {
  const b = rechunk(parsed, kib * 1024);
  const d = freshDecoder();
  candidates[`branch decoder, ${kib} KiB chunks (re-cut)`] = () => d(b, 'object', 'auto');
}
{
  const b = rechunk(parsed, 64 * 1024, { cellsOnly: true });
  const d = freshDecoder();
  candidates['64 KiB, every cut inside rows (first design)'] = () => d(b, 'object', 'auto');
}
if (mainDecode && SHAPE === 'items') candidates['alt: per-field decode of 13+ char fields'] = () => perFieldLong(v1);

// Reads every field: a number adds itself, a string its length (generated per column list).
const columns = Object.keys(decodeRows(real, 'object', 'auto')[0]);
const touch = new Function('rows', `let acc = 0; for (const r of rows) { ${columns
  .map((c) => `acc += typeof r.${c} === 'string' ? r.${c}.length : r.${c};`)
  .join(' ')} } return acc;`);
// Sanity: every candidate yields the same rows.
const expected = JSON.stringify(decodeRows(real, 'object', 'auto'));
for (const [name, f] of Object.entries(candidates)) {
  if (JSON.stringify(f()) !== expected) throw new Error(`${name}: rows differ`);
}
const names = Object.keys(candidates);
const samples = Object.fromEntries(names.map((n) => [n, { build: [], touch: [] }]));
for (let r = 0; r < ROUNDS; r++) {
  const order = r % 2 ? [...names].reverse() : names;
  for (const n of order) {
    globalThis.gc?.();
    const t0 = performance.now();
    const rows = candidates[n]();
    const t1 = performance.now();
    touch(rows);
    const t2 = performance.now();
    if (r >= 5) { samples[n].build.push(t1 - t0); samples[n].touch.push(t2 - t1); }
  }
}

// Retention: keep one 13-character field of each of 30 results, collect, measure.
function retained(f) {
  if (typeof globalThis.gc !== 'function') return NaN;
  const settle = () => { for (let i = 0; i < 4; i++) globalThis.gc(); };
  settle();
  const m0 = process.memoryUsage();
  const kept = [];
  // From each result, keep one field of 13+ characters (V8 slices shorter ones by copying).
  for (let k = 0; k < 30; k++) {
    const rows = f();
    let found;
    for (let r = (N >> 1) + k; found === undefined && r < N; r++) {
      found = Object.values(rows[r]).find((v) => typeof v === 'string' && v.length >= 13);
    }
    kept.push(found);
  }
  settle();
  const m1 = process.memoryUsage();
  if (kept.length !== 30) throw new Error('unreachable');
  return (m1.heapUsed + m1.external - m0.heapUsed - m0.external) / 30;
}

const med = (a) => { const s = [...a].sort((x, y) => x - y); return s[s.length >> 1]; };
console.log(`rows=${N} rounds=${ROUNDS - 5} text=${(parsed.text.length / 1024).toFixed(0)} KiB (medians, ms, JS thread)  node ${process.version}`);
console.log('candidate'.padEnd(46), 'build'.padStart(8), 'touch'.padStart(8), 'total'.padStart(8), 'kept/field'.padStart(12));
for (const n of names) {
  const b = med(samples[n].build), t = med(samples[n].touch);
  const kept = retained(candidates[n]);
  const keptText = Number.isNaN(kept) ? 'n/a' : `${(kept / 1024).toFixed(1)} KiB`;
  console.log(n.padEnd(46), b.toFixed(3).padStart(8), t.toFixed(3).padStart(8), (b + t).toFixed(3).padStart(8), keptText.padStart(12));
}
await db.close();
rmSync(dir, { recursive: true, force: true });
