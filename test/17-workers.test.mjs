// worker_threads: databases inside Workers, and terminating a Worker with work in flight.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import { spawnSync } from 'node:child_process';
import { Database, openMemory, tempDir } from './fixtures/helpers.mjs';

const WORKER = new URL('./fixtures/worker.mjs', import.meta.url);

/** Resolves with the worker's first message; rejects if it errors or exits first. */
function firstMessage(worker) {
  return new Promise((resolve, reject) => {
    worker.once('message', resolve);
    worker.once('error', reject);
    worker.once('exit', (code) => reject(new Error(`worker exited (${code}) before sending a message`)));
  });
}

test('two Workers use their own databases at the same time', { timeout: 30_000 }, async (t) => {
  const dir = await tempDir(t);
  const rows = 100;
  const workers = ['alpha', 'beta'].map(
    (name) => new Worker(WORKER, { workerData: { mode: 'work', name, rows, path: join(dir, `${name}.db`) } }),
  );
  const exits = workers.map((w) => once(w, 'exit'));
  // The main thread works on a database of its own meanwhile.
  const main = await openMemory(t);
  await main.execute('CREATE TABLE m(i)');
  const mainWork = main.executeBatch('INSERT INTO m VALUES (?)', Array.from({ length: 500 }, (_, i) => [i]));

  const results = await Promise.all(workers.map(firstMessage));
  assert.deepStrictEqual(await Promise.all(exits), [[0], [0]], 'both workers exit cleanly');
  const sum = (rows * (rows - 1)) / 2 - 3;
  for (const [i, name] of ['alpha', 'beta'].entries()) {
    assert.deepStrictEqual(results[i], {
      name,
      seen: rows,
      totals: { n: rows + 2, s: sum, owners: 1 },
      json: [{ owner: name }],
    });
  }
  assert.deepStrictEqual(await mainWork, { changes: 500 });
});

test('two Workers with :memory: databases do not share them', { timeout: 30_000 }, async () => {
  const workers = ['one', 'two'].map(
    (name) => new Worker(WORKER, { workerData: { mode: 'work', name, rows: 20, path: ':memory:' } }),
  );
  const results = await Promise.all(workers.map(firstMessage));
  for (const r of results) assert.deepStrictEqual(r.totals, { n: 22, s: 187, owners: 1 });
});

test('terminating a Worker with queries in flight does not crash the process', { timeout: 30_000 }, async (t) => {
  const dir = await tempDir(t);
  for (let round = 0; round < 2; round++) {
    const path = round === 1 ? ':memory:' : join(dir, `busy${round}.db`);
    const worker = new Worker(WORKER, { workerData: { mode: 'busy', path } });
    assert.equal(await firstMessage(worker), 'busy');
    // Give the native threads a moment to be mid-query, then pull the rug.
    await new Promise((resolve) => setTimeout(resolve, 10 + round * 20));
    const exitCode = await worker.terminate();
    assert.equal(typeof exitCode, 'number');
  }
  // The parent keeps working: new databases open and answer.
  const db = await openMemory(t);
  await db.execute('CREATE TABLE after(x)');
  await db.execute('INSERT INTO after VALUES (1)');
  assert.deepStrictEqual(await db.select('SELECT x FROM after'), [{ x: 1 }]);
  // A file database a terminated worker was using can be opened again.
  const again = await Database.open(join(dir, 'busy0.db'));
  t.after(() => again.close());
  const { n } = await again.selectOne('SELECT count(*) AS n FROM t');
  assert.ok(n >= 0 && n <= 100, `committed inserts: ${n}`);
  assert.deepStrictEqual((await again.execute('PRAGMA integrity_check')).rows, [{ integrity_check: 'ok' }]);
  // And a fresh worker still works after the terminations.
  const w = new Worker(WORKER, { workerData: { mode: 'work', name: 'late', rows: 10, path: join(dir, 'late.db') } });
  assert.deepStrictEqual((await firstMessage(w)).totals, { n: 12, s: 42, owners: 1 });
});

test('Workers that load the addon one after another work and leave no memory behind', { skip: process.platform !== 'linux' && 'reads /proc', timeout: 60_000 }, () => {
  // The main thread never loads the addon, so each Worker is the first environment to
  // register it since the last one ended. mimalloc 3 as the addon's allocator crashed the
  // process (SIGSEGV in its thread setup) in the second Worker (docs/experiments/048); and
  // an allocator that reserved its address space again per load would grow by it per round.
  const root = new URL('..', import.meta.url).pathname;
  const worker = `import { createRequire } from 'node:module';
const require = createRequire(${JSON.stringify(root)});
const { Database } = require('./dist/index.js');
const db = await Database.open(':memory:', { readers: 1 });
await db.execute('CREATE TABLE t(x)');
await db.executeBatch('INSERT INTO t VALUES (?)', Array.from({ length: 2000 }, (_, i) => [i]));
if ((await db.select('SELECT x FROM t')).length !== 2000) throw new Error('wrong row count');
await db.close();
`;
  const source = `import { Worker } from 'node:worker_threads';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
const vmKiB = () => Number(/VmSize:\\s+(\\d+)/.exec(readFileSync('/proc/self/status', 'utf8'))[1]);
const sizes = [];
for (let round = 0; round < 6; round++) {
  const w = new Worker(${JSON.stringify(worker)}, { eval: true });
  const [code] = await once(w, 'exit');
  if (code !== 0) throw new Error('worker exited with ' + code);
  sizes.push(vmKiB());
}
process.stdout.write(JSON.stringify(sizes));`;
  const res = spawnSync(process.execPath, ['--input-type=module', '-e', source], { encoding: 'utf8' });
  assert.equal(res.status, 0, res.stderr);
  const sizes = JSON.parse(res.stdout);
  const growthMiB = (sizes[sizes.length - 1] - sizes[0]) / 1024;
  assert.ok(growthMiB < 256, `address space grew by ${growthMiB.toFixed(0)} MiB over 5 rounds: ${sizes.join(', ')} KiB`);
});
