// executeBatch of 1k rows, each with a BLOB of `size` bytes: wall time per batch, the median
// of 60 after 20 of warm-up (experiment 088).
//   node bench/experiments/batch-blobs.mjs <root of a built checkout> [size=1024]
import { createRequire } from 'node:module';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
const require = createRequire(import.meta.url);
const root = resolve(process.argv[2]);
const size = Number(process.argv[3] ?? 1024);
const { Database } = require(root + '/dist/index.js');
const dir = mkdtempSync(join(tmpdir(), 'qs-bb-'));
const db = await Database.open(join(dir, 'b.db'));
await db.execute('CREATE TABLE b(id INTEGER PRIMARY KEY, k INTEGER, v BLOB)');
const sets = Array.from({ length: 1000 }, (_, i) => [i, Buffer.alloc(size, i & 255)]);
const times = [];
for (let i = 0; i < 80; i++) {
  const t0 = performance.now();
  await db.executeBatch('INSERT INTO b(k, v) VALUES (?, ?)', sets);
  if (i >= 20) times.push(performance.now() - t0);
  await db.execute('DELETE FROM b');
}
times.sort((a, b) => a - b);
console.log(`${size}-byte BLOBs, 1k rows: median ${(times[times.length >> 1] * 1000).toFixed(0)} us per batch`);
await db.close();
rmSync(dir, { recursive: true, force: true });
