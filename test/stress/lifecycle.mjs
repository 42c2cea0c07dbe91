// Lifecycle: open/close cycles, Workers terminated mid-query and mid-transaction, databases
// dropped without close(). After each phase the process's threads (/proc/self/task), file
// descriptors (/proc/self/fd) and RSS must come back to the baseline taken before it.
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import { Database, collectGarbage, describeError, mainIf, removeDir, resources, root, sleep, tempDir, withDeadline } from './common.mjs';

const RSS_SLACK_MB = 64;

/** Polls until threads and descriptors are back at `base` (they end asynchronously). */
async function settle(base, ms = 5000) {
  const until = performance.now() + ms;
  let now = resources();
  while ((now.threads > base.threads || now.fds > base.fds) && performance.now() < until) {
    await collectGarbage(1);
    await sleep(50);
    now = resources();
  }
  return now;
}

function compare(phase, base, after, failures) {
  if (after.threads > base.threads) failures.push(`${phase}: ${after.threads - base.threads} threads left (baseline ${base.threads}, now ${after.threads})`);
  if (after.fds > base.fds) failures.push(`${phase}: ${after.fds - base.fds} file descriptors left (baseline ${base.fds}, now ${after.fds})`);
  if (after.rssMb > base.rssMb + RSS_SLACK_MB) failures.push(`${phase}: RSS grew from ${base.rssMb} MB to ${after.rssMb} MB`);
  return { phase, before: base, after };
}

const WORKER = `
const { parentPort, workerData } = require('node:worker_threads');
(async () => {
  const { Database } = await import(workerData.lib);
  const db = await Database.open(workerData.file, { readers: 2 });
  await db.execute('CREATE TABLE IF NOT EXISTS t(x)');
  if (workerData.mode === 'query') {
    const slow = 'WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 20000000) SELECT count(*) FROM c';
    db.select(slow).catch(() => {});
    db.select(slow).catch(() => {});
    parentPort.postMessage('running');
  } else {
    await db.transaction(async (tx) => {
      await tx.execute("INSERT INTO t VALUES ('uncommitted')");
      parentPort.postMessage('running');
      await new Promise(() => {});
    });
  }
  setInterval(() => {}, 1 << 30);
})();
`;

async function terminateWorker(file, mode) {
  const w = new Worker(WORKER, { eval: true, workerData: { lib: join(root, 'dist/index.mjs'), file, mode } });
  const running = new Promise((resolve, reject) => {
    w.once('message', resolve);
    w.once('error', reject);
  });
  await withDeadline(running, 30_000, 'the worker');
  await sleep(20);
  await w.terminate();
}

export async function run({ cycles = 50, workers = 3, dropped = 20 } = {}, progress = () => {}) {
  const dir = await tempDir();
  const failures = [];
  const phases = [];
  try {
    // Warm-up: the addon, the first thread pools and V8's own memory are not leaks.
    for (const path of [join(dir, 'warm.db'), ':memory:']) {
      const warm = await Database.open(path);
      await warm.execute('CREATE TABLE IF NOT EXISTS t(x)');
      await warm.select('SELECT 1');
      const it = warm.stream('SELECT count(*) FROM t')[Symbol.asyncIterator]();
      await it.next();
      await it.return();
      await warm.close();
    }
    // A Worker that ends normally: Node's own worker machinery is part of the baseline.
    const plain = new Worker('require("node:worker_threads").parentPort.postMessage(1)', { eval: true });
    await new Promise((r) => plain.once('message', r));
    await plain.terminate();
    await collectGarbage();

    // 1. open/close cycles (a file and :memory:), a few queries each.
    let base = await settle(resources());
    for (let i = 0; i < cycles; i++) {
      const db = await Database.open(i % 2 ? ':memory:' : join(dir, `cycle-${i % 5}.db`), { readers: 1 + (i % 3) });
      await db.execute('CREATE TABLE IF NOT EXISTS t(x)');
      await db.execute('INSERT INTO t VALUES (?)', [i]);
      await db.select('SELECT * FROM t');
      const live = db.stream('SELECT count(*) AS n FROM t');
      const it = live[Symbol.asyncIterator]();
      await it.next();
      await it.return();
      await db.close();
      if ((i + 1) % Math.max(1, Math.floor(cycles / 10)) === 0) progress(`lifecycle: ${i + 1}/${cycles} open/close cycles ${JSON.stringify(resources())}`);
    }
    phases.push(compare(`${cycles} open/close cycles`, base, await settle(base), failures));

    // 2. Workers terminated mid-query and mid-transaction: their threads and locks end.
    for (const mode of ['query', 'transaction']) {
      base = await settle(resources());
      const file = join(dir, `worker-${mode}.db`);
      for (let i = 0; i < workers; i++) {
        try {
          await terminateWorker(file, mode);
        } catch (err) {
          failures.push(`worker ${mode} ${i}: ${describeError(err)}`);
        }
      }
      phases.push(compare(`${workers} Workers terminated mid-${mode}`, base, await settle(base, 10_000), failures));
      // The file must be writable again, and nothing of the terminated transactions kept.
      const db = await Database.open(file, { busyTimeout: 2000 });
      try {
        await db.execute("INSERT INTO t VALUES ('after')");
        const { n } = await db.selectOne("SELECT count(*) AS n FROM t WHERE x = 'uncommitted'");
        if (n !== 0) failures.push(`Workers terminated mid-${mode}: ${n} uncommitted rows were kept`);
      } catch (err) {
        failures.push(`Workers terminated mid-${mode}: the file cannot be written afterwards: ${describeError(err)}`);
      } finally {
        await db.close();
      }
      progress(`lifecycle: workers terminated mid-${mode} ${JSON.stringify(resources())}`);
    }

    // 3. Databases dropped without close(): collected, their threads and files end.
    base = await settle(resources());
    await (async () => {
      for (let i = 0; i < dropped; i++) {
        const db = await Database.open(join(dir, `dropped-${i}.db`), { readers: 1 });
        await db.execute('CREATE TABLE t(x)');
        await db.select('SELECT * FROM t');
      }
    })();
    await collectGarbage(3);
    phases.push(compare(`${dropped} databases dropped without close()`, base, await settle(base, 10_000), failures));
    progress(`lifecycle: dropped databases ${JSON.stringify(resources())}`);
  } finally {
    await removeDir(dir);
  }
  return { failures, figures: { cycles, workers, dropped, rssSlackMb: RSS_SLACK_MB, phases } };
}

mainIf(import.meta, run);
