// Writes that run into checkpoints (experiment 091): a loop of awaited single inserts of a 3 KB
// blob (each its own commit, about three WAL frames), and T14's loop (1k awaited tx.execute
// in one transaction, the table emptied after each), on a file in the temporary directory
// (its disk decides what a checkpoint's syncs cost). Prints, for the inserts, the total time,
// the stalls over 5 ms and those of 0.5-5 ms (count and sum), p50, p99, the largest, and the
// size the -wal file reached; for the transactions, their mean and largest time and how many
// took over 12 ms. Run two builds alternately, each in a fresh process:
//   node bench/experiments/checkpoint-stalls.mjs <root of a built checkout> [inserts] [transactions]
import { createRequire } from 'node:module';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { CREATE_WRITES, INSERT_WRITES, writesRows } from './writes-rows.mjs';

const require = createRequire(import.meta.url);
const { Database } = require(resolve(process.argv[2] ?? '.') + '/dist/index.js');
const inserts = Number(process.argv[3] ?? 12000);
const transactions = Number(process.argv[4] ?? 60);
const dir = mkdtempSync(join(tmpdir(), 'qs-ckpt-stalls-'));
const ms = (x) => x.toFixed(1);
try {
  const db = await Database.open(join(dir, 'i.db'));
  await db.execute('CREATE TABLE w (id INTEGER PRIMARY KEY, b BLOB)');
  const blob = Buffer.alloc(3000, 1);
  const lat = [];
  for (let i = 0; i < inserts; i++) {
    const t = performance.now();
    await db.execute('INSERT INTO w(b) VALUES (?)', [blob]);
    lat.push(performance.now() - t);
  }
  const { walBytes } = await db.diagnostics();
  await db.close();
  const sum = (a) => a.reduce((x, y) => x + y, 0);
  const big = lat.filter((x) => x > 5);
  const mid = lat.filter((x) => x > 0.5 && x <= 5);
  const sorted = [...lat].sort((a, b) => a - b);
  const at = (p) => sorted[Math.floor(p * (sorted.length - 1))];
  console.log(
    `inserts: total ${ms(sum(lat))} ms; >5 ms: ${big.length}, ${ms(sum(big))} ms; 0.5-5 ms: ${mid.length}, ${ms(sum(mid))} ms; ` +
      `p50 ${ms(at(0.5) * 1000)} µs, p99 ${ms(at(0.99) * 1000)} µs, max ${ms(at(1))} ms; wal ${(walBytes / 1e6).toFixed(1)} MB`,
  );

  // T14's loop.
  const tdb = await Database.open(join(dir, 't.db'));
  await tdb.execute(CREATE_WRITES);
  const rows = writesRows(1000);
  const body = async (tx) => {
    for (let i = 0; i < rows.length; i++) await tx.execute(INSERT_WRITES, rows[i]);
  };
  const times = [];
  for (let k = 0; k < transactions; k++) {
    const t = performance.now();
    await tdb.transaction(body);
    // The first three warm up (JIT, the file's first pages).
    if (k >= 3) times.push(performance.now() - t);
    await tdb.execute('DELETE FROM writes');
  }
  await tdb.close();
  console.log(
    `transactions: mean ${(sum(times) / times.length).toFixed(2)} ms, max ${ms(Math.max(...times))} ms, over 12 ms: ${times.filter((t) => t > 12).length} of ${times.length}`,
  );
} finally {
  rmSync(dir, { recursive: true, force: true });
}
