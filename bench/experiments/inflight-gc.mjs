// 1k-row selects with k in flight, and the garbage collections they cost (experiment 054):
// 60 samples of 16 selects over a table of 20k rows with three text columns (every field read),
// then selects per second and V8's scavenges and mark-compacts over those samples.
//   node [V8 flags] bench/experiments/inflight-gc.mjs <package root> <readers> <k>
// e.g. node --min-semi-space-size=16 bench/experiments/inflight-gc.mjs . 2 8
import { createRequire } from 'node:module';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { PerformanceObserver, constants } from 'node:perf_hooks';

const root = resolve(process.argv[2] ?? '.');
const readers = Number(process.argv[3] ?? 2);
const k = Number(process.argv[4] ?? 8);
const { Database } = createRequire(import.meta.url)(join(root, 'dist', 'index.js'));
const dir = mkdtempSync(join(tmpdir(), 'qs-inflight-gc-'));
const db = await Database.open(join(dir, 'g.db'), { readers });
const N = 20000;
await db.execute('CREATE TABLE items(id INTEGER PRIMARY KEY, name TEXT, category TEXT, price REAL, qty INTEGER, note TEXT)');
await db.executeBatch(
  'INSERT INTO items VALUES (?, ?, ?, ?, ?, ?)',
  Array.from({ length: N }, (_, i) => [i + 1, `item ${i}`, `cat${i % 50}`, i / 3, i % 100, 'x'.repeat(i % 40)]),
);
const SQL = 'SELECT * FROM items WHERE id > ? AND id <= ? + 1000';
let sink = 0;
const touch = (rows) => {
  let s = 0;
  for (const r of rows) s += r.id + r.name.length + r.price + r.qty + r.note.length + r.category.length;
  return s;
};
let seed = 7;
const random = () => ((seed = (seed * 48271) % 2147483647) / 2147483647);

/** 16 selects, k at a time. */
async function sample() {
  const starts = Array.from({ length: 16 }, () => Math.floor(random() * (N - 1000)));
  let next = 0;
  await Promise.all(
    Array.from({ length: k }, async () => {
      while (next < 16) {
        const i = next++;
        sink += touch(await db.select(SQL, [starts[i], starts[i]]));
      }
    }),
  );
}

for (let s = 0; s < 5; s++) await sample();
const gcs = { minor: 0, major: 0 };
const observer = new PerformanceObserver((list) => {
  for (const e of list.getEntries()) {
    const kind = e.detail?.kind ?? e.kind;
    if (kind === constants.NODE_PERFORMANCE_GC_MINOR) gcs.minor++;
    else if (kind === constants.NODE_PERFORMANCE_GC_MAJOR) gcs.major++;
  }
});
observer.observe({ entryTypes: ['gc'] });
const t0 = performance.now();
for (let s = 0; s < 60; s++) await sample();
const seconds = (performance.now() - t0) / 1000;
await new Promise((r) => setImmediate(r)); // the observer's last entries
observer.disconnect();
console.log(
  `readers ${readers} k=${k}: ${((60 * 16) / seconds).toFixed(0)} selects/s, ${gcs.minor} scavenges, ${gcs.major} mark-compacts (checksum ${Math.round(sink) % 100000})`,
);
await db.close();
rmSync(dir, { recursive: true, force: true });
