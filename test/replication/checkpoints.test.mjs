// `checkpoints: 'external'` (for replicators such as Litestream, which run checkpoints
// themselves): the writer then never copies the WAL into the database file.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Database } from '../../dist/index.mjs';

async function sizesAfterLoad(checkpoints) {
  const dir = mkdtempSync(join(tmpdir(), 'quietsqlite-ckpt-'));
  const path = join(dir, 'a.db');
  const db = await Database.open(path, checkpoints === undefined ? {} : { checkpoints });
  try {
    await db.execute('CREATE TABLE t (b BLOB)');
    // About 1500 WAL pages, past the writer's idle threshold (1000).
    await db.executeBatch('INSERT INTO t VALUES (?)', Array.from({ length: 1500 }, () => [Buffer.alloc(3000, 1)]));
    // An idle 'auto' writer checkpoints 5 ms after its last request: wait up to 5 s for the
    // file to grow ('external': it never does; an 'auto' writer takes milliseconds).
    const deadline = Date.now() + (checkpoints === 'external' ? 1000 : 5000);
    while (statSync(path).size < 4_000_000 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    const before = { db: statSync(path).size, wal: statSync(`${path}-wal`).size };
    // An explicit checkpoint still runs in both modes.
    await db.execute('PRAGMA wal_checkpoint(PASSIVE)');
    const after = statSync(path).size;
    return { ...before, afterExplicit: after };
  } finally {
    await db.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

test("checkpoints: 'auto' (the default) copies a large WAL into the database file when idle", async () => {
  for (const mode of [undefined, 'auto']) {
    const s = await sizesAfterLoad(mode);
    assert.ok(s.db > 4_000_000, `database file ${s.db} bytes: checkpointed`);
  }
});

test("checkpoints: 'external' leaves the WAL to another process", async () => {
  const s = await sizesAfterLoad('external');
  assert.ok(s.db < 100_000, `database file ${s.db} bytes: never checkpointed by the writer`);
  assert.ok(s.wal > 4_000_000, `WAL ${s.wal} bytes holds the writes`);
  assert.ok(s.afterExplicit > 4_000_000, 'an explicit PRAGMA wal_checkpoint still works');
});

test('checkpoints: bad values are TypeErrors', async () => {
  for (const bad of ['none', 'EXTERNAL', true, 0]) {
    await assert.rejects(Database.open(':memory:', { checkpoints: bad }), {
      name: 'TypeError',
      message: "checkpoints must be 'auto' or 'external'",
    });
  }
});
