// When the writer checkpoints (checkpoints: 'auto'): only once it has had no request for a
// while. A client that writes in a loop with a little work between writes is not idle, and
// a checkpoint between two of its writes would make the second wait for the checkpoint's
// syncs (docs/experiments/052-checkpoint-after-a-quiet-writer.md).
//
// A checkpoint is seen from outside: it copies the WAL's new pages into the database file,
// which grows. Nothing else writes to that file while the WAL holds its pages.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { statSync } from 'node:fs';
import { exitIfStuck, scratch, sleep } from './fixtures/tx-helpers.mjs';

const tmp = scratch('ckpt45');
exitIfStuck();

/** Keeps the JS thread busy for `us` microseconds: longer than the writer's poll after a
 * request, far shorter than the quiet a checkpoint waits for. */
function work(us) {
  const end = performance.now() + us / 1000;
  while (performance.now() < end);
}

/** 12 KB: a leaf and two overflow pages; with the parent and page 1, 5 WAL frames an awaited
 * insert (3 a row inside one transaction). */
const BLOB = Buffer.alloc(12_000, 7);

/** Awaited inserts of BLOB with 200 µs of work after each; returns how many checkpoints
 * happened meanwhile, counted as runs of iterations after which the file had grown (a
 * checkpoint seen mid-copy grows it twice in a row). */
async function insertLoop(db, path, rows) {
  let checkpoints = 0;
  let last = statSync(path).size;
  let growing = false;
  for (let i = 0; i < rows; i++) {
    await db.execute('INSERT INTO blobs(b) VALUES (?)', [BLOB]);
    work(200);
    const now = statSync(path).size;
    if (now !== last && !growing) checkpoints++;
    growing = now !== last;
    last = now;
  }
  return checkpoints;
}

async function openBlobs() {
  const path = tmp.file();
  const db = await tmp.open(path);
  await db.execute('CREATE TABLE blobs(id INTEGER PRIMARY KEY, b BLOB)');
  return { db, path };
}

/** Runs insertLoop on a new database up to three times, until its count of checkpoints is
 * `fine`. Stalls of the JS thread longer than the writer's quiet (a GC pause, a loaded
 * machine) let checkpoints in that a quiet machine would not see; a writer that checkpoints
 * where it should not does so in every attempt. Returns the last attempt's database, path
 * and count. */
async function loopUntil(rows, fine) {
  for (let attempt = 1; ; attempt++) {
    const { db, path } = await openBlobs();
    const checkpoints = await insertLoop(db, path, rows);
    if (fine(checkpoints) || attempt === 3) return { db, path, checkpoints };
    await db.close();
  }
}

test('a loop of writes with work between them runs no checkpoint; a pause after it does', async () => {
  // 3500 WAL frames: three and a half times the 1000 after which an idle writer
  // checkpoints, below the 4000 after which any gap will do. One stall of the JS thread
  // longer than the quiet may let one checkpoint in; a writer that checkpoints in every gap
  // runs two or three.
  const { db, path, checkpoints } = await loopUntil(700, (n) => n <= 1);
  assert.ok(checkpoints <= 1, `${checkpoints} checkpoints during the loop`);
  // The WAL holds 1000 pages or more whatever happened above (one transaction of ~1050
  // frames, no gap).
  await db.executeBatch('INSERT INTO blobs(b) VALUES (?)', Array.from({ length: 350 }, () => [BLOB]));
  // Only a checkpoint copies the rows into the file: wait for it to hold them all.
  const deadline = performance.now() + 5000;
  while (statSync(path).size < 1050 * BLOB.length && performance.now() < deadline) await sleep(5);
  assert.ok(statSync(path).size >= 1050 * BLOB.length, 'no checkpoint after the loop ended');
  const [{ n }] = await db.select('SELECT count(*) AS n FROM blobs');
  assert.equal(n, 1050);
  await db.close();
});

test('writes that never pause still get a checkpoint once the WAL holds 4000 pages', async () => {
  // ~9000 WAL frames without a pause: a checkpoint at about 4000 and 8000, not one per 1000,
  // and not none until the 20000 after which even a busy writer checkpoints.
  const fine = (n) => n >= 1 && n <= 4;
  const { db, checkpoints } = await loopUntil(1800, fine);
  assert.ok(fine(checkpoints), `${checkpoints} checkpoints during the loop`);
  await db.close();
});

test("checkpoints: 'external' never checkpoints, however long the writer is quiet", async () => {
  const path = tmp.file();
  const db = await tmp.open(path, { checkpoints: 'external' });
  await db.execute('CREATE TABLE blobs(id INTEGER PRIMARY KEY, b BLOB)');
  const before = statSync(path).size;
  // ~1200 WAL frames: past the 1000 after which an 'auto' writer checkpoints when quiet.
  await db.executeBatch('INSERT INTO blobs(b) VALUES (?)', Array.from({ length: 400 }, () => [BLOB]));
  await sleep(100);
  assert.equal(statSync(path).size, before);
  await db.close({ force: true });
});
