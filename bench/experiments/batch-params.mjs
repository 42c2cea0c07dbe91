// Historical: it captures results from the completion callback's [id, status, payload]
// array, which experiment 042 replaced (the callback takes its batch through a scratch
// Buffer); it does not run against builds since then.
// Experiment 005: executeBatch parameters, one Node-API conversion per value (A) vs sets
// packed in JS into typed arrays + one string (B). Interleaved A B B A ..., fresh table each.
//   node bench/experiments/batch-params.mjs [rows=100000] [rounds=6]
import { createRequire } from 'node:module';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const require = createRequire(import.meta.url);
const { binding } = require('../../dist/native.js');
const { packParamSets } = require('../../dist/params.js');
const N = Number(process.argv[2] ?? 100000);
const ROUNDS = Number(process.argv[3] ?? 6);
const file = join(mkdtempSync(join(tmpdir(), 'qs-exp005-')), 'b.db');
const rows = Array.from({ length: N }, (_, i) => [i, `item ${i}`, `description of item ${i} `.padEnd(90, 'abcdefghij'), i / 7, `cat${i % 20}`, 1700000000 + i]);
const sql = 'INSERT INTO items VALUES (?, ?, ?, ?, ?, ?)';

// Talk to the addon directly so both paths share everything else.
let pending = new Map();
const nd = new binding.NativeDatabase(file, { readers: 1, readonly: false, busyTimeout: 5000, pragmas: [] }, (batch) => {
  for (let i = 0; i < batch.length; i += 3) {
    const p = pending.get(batch[i]);
    pending.delete(batch[i]);
    if (batch[i + 1] === 0) p.resolve(batch[i + 2]);
    else p.reject(new Error(String(batch[i + 2][1])));
  }
}, 1);
nd.keepAlive(true);
let nextId = 2;
const call = (f) => new Promise((resolve, reject) => { const id = nextId++; pending.set(id, { resolve, reject }); f(id); });
await new Promise((resolve, reject) => pending.set(1, { resolve, reject }));
await call((id) => nd.execute(id, 0, 'CREATE TABLE items(id INTEGER PRIMARY KEY, name TEXT, description TEXT, price REAL, category TEXT, created_at INTEGER)', undefined));

const variants = {
  'A per-value conversion': (id) => nd.executeBatch(id, 0, sql, rows),
  'B packed in JS': (id) => {
    const p = packParamSets(rows);
    nd.executeBatchPacked(id, 0, sql, p.setLens, p.tags, p.nums, p.bigs, p.text, p.blobs);
    p.release();
  },
};
const res = Object.fromEntries(Object.keys(variants).map((k) => [k, { js: [], total: [] }]));
for (let r = 0; r < ROUNDS; r++) {
  const order = r % 2 ? Object.keys(variants).reverse() : Object.keys(variants);
  for (const name of order) {
    await call((id) => nd.execute(id, 0, 'DELETE FROM items', undefined));
    let js = 0;
    const t0 = performance.now();
    await call((id) => { variants[name](id); js = performance.now() - t0; });
    const total = performance.now() - t0;
    if (r > 0) { res[name].js.push(js); res[name].total.push(total); }
  }
}
const med = (a) => [...a].sort((x, y) => x - y)[a.length >> 1];
console.log(`rows=${N} rounds=${ROUNDS - 1} medians`);
for (const [name, s] of Object.entries(res)) {
  console.log(`${name.padEnd(24)} JS thread ${med(s.js).toFixed(1).padStart(7)} ms   total ${med(s.total).toFixed(1).padStart(7)} ms   ${(N / med(s.total)).toFixed(0)}k rows/s`);
}
await call((id) => nd.close(id));
nd.keepAlive(false);
nd.dispose();
