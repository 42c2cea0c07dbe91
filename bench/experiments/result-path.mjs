// Historical: it captures results from the completion callback's [id, status, payload]
// array, which experiment 042 replaced (the callback takes its batch through a scratch
// Buffer); it does not run against builds since then.
// Experiment 001: how should rows become JS objects? (docs/experiments/001-result-path.md)
// Every candidate turns the SAME native result into rows on the JS thread; we time that
// step plus touching every field, interleaved, and report medians. Reference: better-sqlite3
// (.all() + touch), which does the query on the JS thread too.
//
//   node bench/experiments/result-path.mjs [rows=10000] [rounds=40]
import { createRequire } from 'node:module';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse, toFormat1 } from './format1.mjs';

const require = createRequire(import.meta.url);
const { Database } = require('../../dist/index.js');
const { decodeRows } = require('../../dist/rows.js');
const BetterSqlite3 = require('better-sqlite3');

const N = Number(process.argv[2] ?? 10000);
const ROUNDS = Number(process.argv[3] ?? 40);
const dir = mkdtempSync(join(tmpdir(), 'qs-exp001-'));
const file = join(dir, 'items.db');

// Deterministic items table as in BENCHMARKS.md.
function seed(db) {
  db.exec(`CREATE TABLE items(id INTEGER PRIMARY KEY, name TEXT, description TEXT, price REAL, category TEXT, created_at INTEGER)`);
  const ins = db.prepare('INSERT INTO items VALUES (?, ?, ?, ?, ?, ?)');
  let x = 12345;
  const rnd = () => ((x = (x * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff);
  db.transaction(() => {
    for (let i = 1; i <= N; i++) {
      ins.run(i, `item ${i}`, `description of item ${i} `.padEnd(90, 'abcdefghij'), Math.round(rnd() * 100000) / 100, `cat${i % 20}`, 1700000000 + i);
    }
  })();
}
const bs = new BetterSqlite3(file);
bs.pragma('journal_mode = WAL');
seed(bs);
const bsStmt = bs.prepare('SELECT * FROM items');

const db = await Database.open(file, { readers: 2 });
// The raw encoded result and the raw JSON, straight from the addon (bypassing decoding).
const rawRows = await rawResult(0);
const rawJson = await db.selectBytes('SELECT * FROM items');
// Candidates 3b and 3c were written for format 1 (one text section, before experiment 010).
const rawV1 = toFormat1(parse(rawRows.buf));

async function rawResult(format) {
  // Reach the addon through the same loader the package uses.
  const { binding } = require('../../dist/native.js');
  return new Promise((resolve, reject) => {
    const nd = new binding.NativeDatabase(file, { readers: 1, readonly: true, busyTimeout: 5000, pragmas: [] }, (batch) => {
      for (let i = 0; i < batch.length; i += 3) {
        if (batch[i] === 1) continue; // open
        if (batch[i + 1] !== 0) reject(new Error(String(batch[i + 2])));
        else { nd.keepAlive(false); resolve({ buf: batch[i + 2], nd }); }
      }
    }, 1);
    nd.keepAlive(true);
    nd.read(2, 'SELECT * FROM items', undefined, format);
  });
}

function touch(rows) {
  let acc = 0;
  for (const r of rows) {
    acc += r.id + r.name.length + r.description.length + r.price + r.category.length + r.created_at;
  }
  return acc;
}

// Candidate 3b: generated code with the tag switch inlined per column (no v() closure).
function makeInline(names) {
  const cell = (k) => `(t = tags[i], x = nums[i++], t === 5 || t === 1 ? x : t === 2 ? (s = text.slice(tp, x), tp = x, s) : t === 0 ? null : slow(t, x))`;
  const src = `return function(n, tags, nums, text, slow) { let i = 0, tp = 0, t, x, s; const out = new Array(n);
    for (let r = 0; r < n; r++) out[r] = { ${names.map((nm, k) => `${JSON.stringify(nm)}: ${cell(k)}`).join(', ')} };
    return out; }`;
  return new Function(src)();
}
function decodeInline(buf, build) {
  const h = new Uint32Array(buf.buffer, buf.byteOffset, 8);
  const [rows, cols, namesLen, textLen] = [h[1], h[2], h[4], h[5]];
  const cells = rows * cols;
  let off = 32;
  const nums = new Float64Array(buf.buffer, buf.byteOffset + off, cells); off += cells * 8 + h[7] * 8;
  const tags = new Uint8Array(buf.buffer, buf.byteOffset + off, cells); off += cells + namesLen;
  const text = buf.toString(h[3] & 1 ? 'latin1' : 'utf8', off, off + textLen);
  return build(rows, tags, nums, text, () => { throw new Error('not in this data'); });
}
// Candidate 3c: no shared string, one decode per text field (ASCII data: byte == unit offsets).
function decodePerField(buf) {
  const h = new Uint32Array(buf.buffer, buf.byteOffset, 8);
  const [rows, cols, namesLen, textLen] = [h[1], h[2], h[4], h[5]];
  const cells = rows * cols;
  let off = 32;
  const nums = new Float64Array(buf.buffer, buf.byteOffset + off, cells); off += cells * 8 + h[7] * 8;
  const tags = new Uint8Array(buf.buffer, buf.byteOffset + off, cells); off += cells;
  const names = buf.toString('utf8', off, off + namesLen).slice(0, -1).split('\0'); off += namesLen;
  const base = off;
  let tp = 0;
  const out = new Array(rows);
  for (let r = 0, i = 0; r < rows; r++) {
    const o = {};
    for (let c = 0; c < cols; c++, i++) {
      const t = tags[i], x = nums[i];
      o[names[c]] = t === 2 ? (tp = x, buf.latin1Slice(base + tp - (x - tp), base + x)) : t === 0 ? null : x;
    }
    out[r] = o;
  }
  return out;
}
const inlineBuild = makeInline(['id', 'name', 'description', 'price', 'category', 'created_at']);

const candidates = {
  'better-sqlite3 .all() (query on JS thread)': () => bsStmt.all(),
  '1 napi objects from buffer': () => rawRows.nd.experimentNativeRows(rawRows.buf),
  '2 JSON.parse(selectBytes)': () => JSON.parse(rawJson.toString('utf8')),
  '3 one string + slices, factory (closure)': () => decodeRows(rawRows.buf, 'object', 'auto'),
  '3b one string + slices, factory (inline)': () => decodeInline(rawV1, inlineBuild),
  '3c per-field decode, dynamic keys': () => decodePerField(rawV1),
};
// Sanity: every candidate yields the same touched sum.
const expected = touch(bsStmt.all());
for (const [name, f] of Object.entries(candidates)) {
  const got = touch(f());
  if (Math.abs(got - expected) > 1e-6 * Math.abs(expected)) throw new Error(`${name}: touched sum ${got} != ${expected}`);
}
const names = Object.keys(candidates);
const samples = Object.fromEntries(names.map((n) => [n, { decode: [], touch: [] }]));
for (let r = 0; r < ROUNDS; r++) {
  const order = r % 2 ? [...names].reverse() : names;
  for (const n of order) {
    const t0 = performance.now();
    const rows = candidates[n]();
    const t1 = performance.now();
    touch(rows);
    const t2 = performance.now();
    if (r >= 5) { samples[n].decode.push(t1 - t0); samples[n].touch.push(t2 - t1); }
  }
}
const med = (a) => { const s = [...a].sort((x, y) => x - y); return s[s.length >> 1]; };
console.log(`rows=${N} rounds=${ROUNDS - 5} (medians, ms, JS thread)  node ${process.version}`);
console.log('candidate'.padEnd(46), 'build'.padStart(8), 'touch'.padStart(8), 'total'.padStart(8));
for (const n of names) {
  const d = med(samples[n].decode), t = med(samples[n].touch);
  console.log(n.padEnd(46), d.toFixed(3).padStart(8), t.toFixed(3).padStart(8), (d + t).toFixed(3).padStart(8));
}
rawRows.nd.close(99);
await db.close();
bs.close();
