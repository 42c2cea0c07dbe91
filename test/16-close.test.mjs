// Closing: in-flight work settles, later calls reject clearly, close is idempotent; and the
// process lifetime: an idle database lets Node exit, in-flight work keeps it alive.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import v8 from 'node:v8';
import {
  Database,
  PANIC,
  COUNT_TO,
  calibrateCount,
  openMemory,
  openTemp,
  rejectsAsync,
  threadCount,
  settleThreads,
} from './fixtures/helpers.mjs';

const CLOSED = 'ERR_QUIETSQLITE_CLOSED';
const ENTRY = pathToFileURL(fileURLToPath(new URL('../dist/index.mjs', import.meta.url))).href;

function isClosedError(err) {
  return err instanceof Error && err.code === CLOSED && /closed/i.test(err.message);
}

test('close() while 500 queries are in flight: every one settles, results are right', { timeout: 20_000 }, async (t) => {
  const db = await openTemp(t, { readers: 2 });
  await db.execute('CREATE TABLE t(i INTEGER)');
  const n = await calibrateCount(db, 50);
  const calls = [];
  for (let i = 0; i < 500; i++) {
    let p;
    switch (i % 6) {
      case 0: p = db.execute('INSERT INTO t VALUES (?)', [i]).then((r) => assert.equal(r.changes, 1)); break;
      case 1: p = db.select('SELECT ? AS i', [i]).then((r) => assert.deepStrictEqual(r, [{ i }])); break;
      case 2: p = db.selectOne('SELECT ? AS s', [`v${i}`]).then((r) => assert.deepStrictEqual(r, { s: `v${i}` })); break;
      case 3: p = db.selectBytes('SELECT ? AS i', [i]).then((b) => assert.equal(b.toString(), `[{"i":${i}}]`)); break;
      case 4: p = db.executeBatch('INSERT INTO t VALUES (?)', [[i], [i]]).then((r) => assert.equal(r.changes, 2)); break;
      case 5: p = i % 100 === 5 ? db.select(COUNT_TO, [n]).then((r) => assert.deepStrictEqual(r, [{ n }])) : db.select('SELECT 1'); break;
    }
    calls.push(p);
  }
  const closing = db.close();
  assert.equal(db.isOpen, false, 'isOpen is false as soon as close() is called');
  // Calls made after close() reject, even while the close is still in progress.
  const late = Promise.allSettled([db.select('SELECT 1'), db.execute('SELECT 1'), db.selectBytes('SELECT 1')]);

  const settled = await Promise.allSettled(calls);
  const unclear = settled.filter((s) => s.status === 'rejected' && !isClosedError(s.reason));
  assert.deepStrictEqual(unclear.map((s) => s.reason), [], 'rejections must be the clear closed error');
  const fulfilled = settled.filter((s) => s.status === 'fulfilled').length;
  t.diagnostic(`${fulfilled} of 500 in-flight calls completed, ${500 - fulfilled} rejected as closed`);
  for (const s of await late) {
    assert.equal(s.status, 'rejected');
    assert.ok(isClosedError(s.reason), String(s.reason));
  }
  await closing;
  assert.equal(db.isOpen, false);
});

test('after close every call rejects with ERR_QUIETSQLITE_CLOSED (never throws)', async (t) => {
  const db = await openTemp(t);
  await db.execute('CREATE TABLE t(a)');
  await db.close();
  const calls = [
    () => db.select('SELECT 1'),
    () => db.selectOne('SELECT 1'),
    () => db.selectBytes('SELECT 1'),
    () => db.execute('INSERT INTO t VALUES (1)'),
    () => db.executeBatch('INSERT INTO t VALUES (?)', [[1]]),
    () => db.transaction(async () => 1),
    () => db[PANIC](),
    // Even invalid calls report the closed state rather than misuse.
    () => db.select(42),
  ];
  for (const call of calls) {
    const err = await rejectsAsync(call, Error);
    assert.ok(isClosedError(err), `${call}: ${err}`);
  }
});

test('close is idempotent', async (t) => {
  const db = await openMemory(t);
  const a = db.close();
  const b = db.close();
  await Promise.all([a, b]);
  await db.close();
  assert.equal(await db.close(), undefined);
  assert.equal(db.isOpen, false);
});

test('a closed file database can be reopened and has every completed write', async (t) => {
  const first = await openTemp(t);
  const path = first.path;
  await first.execute('CREATE TABLE t(i)');
  const writes = Array.from({ length: 100 }, (_, i) => first.execute('INSERT INTO t VALUES (?)', [i]));
  await first.close();
  const done = (await Promise.allSettled(writes)).filter((s) => s.status === 'fulfilled').length;
  const again = await Database.open(path);
  t.after(() => again.close());
  assert.equal((await again.selectOne('SELECT count(*) AS n FROM t')).n, done);
});

test('close() removes the -wal and -shm files when no other connection has the database open', async (t) => {
  // SQLite removes them as the last connection closes, if that one may write. The readers
  // used to close after the writer, so once any of them had read, the files stayed.
  const first = await openTemp(t);
  const path = first.path;
  const files = () => ['-wal', '-shm'].filter((suffix) => existsSync(path + suffix));
  await first.execute('CREATE TABLE t(i)');
  await first.execute('INSERT INTO t VALUES (1)');
  await Promise.all([first.select('SELECT * FROM t'), first.select('SELECT * FROM t'), first.selectOne('SELECT count(*) FROM t')]);
  await first.close();
  assert.deepEqual(files(), []);
  // Another Database still has the file open: its files stay, and go when it closes.
  const a = await Database.open(path);
  const b = await Database.open(path, { readonly: true });
  await a.select('SELECT * FROM t');
  await b.select('SELECT * FROM t');
  await a.close();
  assert.deepEqual(files(), ['-wal', '-shm']);
  await b.close();
  const c = await Database.open(path);
  await c.select('SELECT * FROM t');
  await c.close();
  assert.deepEqual(files(), []);
});

test('open/close cycles leave no native threads behind', async (t) => {
  const warm = await openTemp(t, { readers: 2 }); // warms up libuv's pool and the addon
  await warm.close();
  const before = await settleThreads(0, 200);
  if (before === undefined) return t.skip('needs /proc/self/task');
  for (let i = 0; i < 20; i++) {
    const db = await Database.open(':memory:', { readers: 3 });
    await db.select('SELECT 1');
    await db.close();
  }
  const open = await Promise.all(Array.from({ length: 5 }, () => Database.open(':memory:', { readers: 2 })));
  assert.ok((await threadCount()) > before, 'open databases do have threads');
  await Promise.all(open.map((db) => db.close()));
  const after = await settleThreads(before + 2);
  assert.ok(after <= before + 2, `threads: ${before} before, ${after} after 25 open/close cycles`);
});

/** Runs an ESM snippet in a child Node; resolves with its exit status, output and duration. */
function runChild(code, timeoutMs, nodeFlags = []) {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const child = spawn(process.execPath, [...nodeFlags, '--input-type=module', '-e', code], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill('SIGKILL');
    }, timeoutMs);
    child.on('error', reject);
    child.on('close', (status, signal) => {
      clearTimeout(timer);
      resolve({ status, signal, stdout, stderr, timedOut, ms: performance.now() - t0 });
    });
  });
}

test('an open but idle database does not keep the process alive', { timeout: 20_000 }, async () => {
  const code = `
    import { Database } from ${JSON.stringify(ENTRY)};
    const db = await Database.open(':memory:');
    await db.execute('CREATE TABLE t(a)');
    await db.execute('INSERT INTO t VALUES (1)');
    console.log(JSON.stringify(await db.select('SELECT a FROM t')));
    // A failed query must not leave anything holding the loop either.
    await db.select('SELECT * FROM missing').catch(() => console.log('failed as expected'));
    // ...and then nothing: no close(), no timers.
  `;
  const r = await runChild(code, 8_000);
  assert.equal(r.timedOut, false, `the child did not exit by itself within 8 s (stderr: ${r.stderr})`);
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stdout, '[{"a":1}]\nfailed as expected\n');
});

test('a database first loaded while a fake clock is installed still lets the process exit', { timeout: 20_000 }, async () => {
  // A fake clock (node:test's mock timers, @sinonjs/fake-timers) replaces node:timers' export
  // too; a setImmediate taken from it at load never runs, and the event loop was held forever.
  const code = `
    import { mock } from 'node:test';
    mock.timers.enable({ apis: ['setImmediate'] });
    const { Database } = await import(${JSON.stringify(ENTRY)});
    mock.timers.reset();
    const db = await Database.open(':memory:');
    for (let i = 0; i < 3; i++) await db.select('SELECT 1');
    console.log('done');
  `;
  const r = await runChild(code, 8_000);
  assert.equal(r.timedOut, false, `the child did not exit by itself within 8 s (stderr: ${r.stderr})`);
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stdout, 'done\n');
});

test('with a fake clock installed at load, transactions whose requests fail still settle', { timeout: 20_000 }, async () => {
  // A failure of a transaction's request that a poll takes waits for a later turn of the
  // event loop (test/34); with no real setImmediate it waited for a delivery that never came,
  // and the transaction, and close() after it, hung.
  const code = `
    import { mock } from 'node:test';
    mock.timers.enable({ apis: ['setImmediate'] });
    const { Database } = await import(${JSON.stringify(ENTRY)});
    mock.timers.reset();
    const db = await Database.open(':memory:');
    await db.execute('CREATE TABLE t(v UNIQUE)');
    await db.execute("INSERT INTO t VALUES ('dup')");
    for (let i = 0; i < 100; i++) {
      await db.transaction(async (tx) => {
        const err = await tx.execute("INSERT INTO t VALUES ('dup')").catch((e) => e);
        if (err.code !== 'SQLITE_CONSTRAINT_UNIQUE') throw err;
      });
    }
    await db.close();
    console.log('settled');
  `;
  const r = await runChild(code, 8_000);
  assert.equal(r.timedOut, false, `the child did not finish within 8 s (stderr: ${r.stderr})`);
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stdout, 'settled\n');
});

test("timeoutMs keeps real time under a fake clock, browser-like timer globals and a frozen globalThis", { timeout: 30_000 }, async () => {
  // The timers of timeoutMs were the global ones: a fake clock installed after load never
  // fired them (a runaway query ran on, and close() waited behind it); jsdom's globals (no
  // setImmediate, number handles) broke iterate() and subscribe(); and on Node 20, with
  // globalThis frozen after load, the lazy global DOMException threw inside the timer and
  // ended the process.
  const RUNAWAY = 'WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c';
  const fake = await runChild(`
    import { mock } from 'node:test';
    const { Database } = await import(${JSON.stringify(ENTRY)});
    const db = await Database.open(':memory:');
    mock.timers.enable({ apis: ['setTimeout', 'setImmediate', 'setInterval'] });
    const select = await db.select(${JSON.stringify(RUNAWAY)}, [], { timeoutMs: 100 }).catch((e) => e.name);
    let iterated;
    try { for await (const _ of db.iterate(${JSON.stringify(RUNAWAY)}, [], { timeoutMs: 100 })); } catch (e) { iterated = e.name; }
    await db.close();
    mock.timers.reset();
    console.log(select, iterated);
  `, 10_000);
  assert.equal(fake.timedOut, false, `a timeout under a fake clock did not fire within 10 s (stderr: ${fake.stderr})`);
  assert.equal(fake.stdout, 'TimeoutError TimeoutError\n', fake.stderr);
  const browserLike = await runChild(`
    const nodeSetTimeout = globalThis.setTimeout;
    globalThis.setTimeout = (fn, ms, ...args) => { nodeSetTimeout(fn, ms, ...args); return 1; };
    delete globalThis.setImmediate;
    const { Database } = await import(${JSON.stringify(ENTRY)});
    const db = await Database.open(':memory:', { timeoutMs: 5000 });
    const rows = [];
    for await (const row of db.iterate('SELECT 1 AS x')) rows.push(row.x);
    const live = db.stream('SELECT 1');
    live.end();
    const told = await new Promise((resolve) => live.subscribe(() => {}, (err) => resolve(err.code)));
    await db.close();
    console.log(rows.join(), told);
  `, 10_000);
  assert.equal(browserLike.status, 0, browserLike.stderr);
  assert.equal(browserLike.stdout, '1 ERR_QUIETSQLITE_CLOSED\n');
  const frozen = await runChild(`
    const { Database } = await import(${JSON.stringify(ENTRY)});
    const db = await Database.open(':memory:');
    Object.freeze(globalThis);
    const name = await db.select(${JSON.stringify(RUNAWAY)}, [], { timeoutMs: 50 }).catch((e) => e.name);
    await db.close();
    console.log(name);
  `, 10_000);
  assert.equal(frozen.status, 0, frozen.stderr);
  assert.equal(frozen.stdout, 'TimeoutError\n');
});

test('a clock that fakes only setImmediate at load breaks neither the release nor later immediates', { timeout: 20_000 }, async () => {
  // As @sinonjs/fake-timers does with toFake: ['setImmediate']: the global and node:timers'
  // export are replaced, clearImmediate is not. Handing the fake's handle to Node's own
  // clearImmediate stopped every later immediate under Node 20.
  const code = `
    import { createRequire } from 'node:module';
    const require = createRequire(import.meta.url);
    const timers = require('node:timers');
    const real = timers.setImmediate;
    const fake = () => ({ ref() {}, unref() {}, hasRef: () => true });
    timers.setImmediate = fake;
    globalThis.setImmediate = fake;
    const { Database } = await import(${JSON.stringify(ENTRY)});
    timers.setImmediate = real;
    globalThis.setImmediate = real;
    const db = await Database.open(':memory:');
    for (let i = 0; i < 3; i++) await db.select('SELECT 1');
    setImmediate(() => console.log('immediate ran'));
  `;
  const r = await runChild(code, 8_000);
  assert.equal(r.timedOut, false, `the child did not exit by itself within 8 s (stderr: ${r.stderr})`);
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stdout, 'immediate ran\n');
});

const queryObjectsMissing = typeof v8.queryObjects !== 'function' && 'v8.queryObjects came in Node 20.13';

/** How many request bookkeeping objects a child process still holds after running
 * `work` (the text of an async function declaration named `work`, given `Database`) and
 * a few collections. */
async function requestsAliveAfter(work) {
  const code = `
    import { createRequire } from 'node:module';
    import { queryObjects } from 'node:v8';
    const require = createRequire(${JSON.stringify(ENTRY)});
    const { Database } = require('./index.js');
    const { Requests } = require('./requests.js');
    // In a function of its own: a suspended frame (this module's) would keep its last db.
    ${work}
    await work();
    for (let i = 0; i < 5; i++) {
      await new Promise((resolve) => setTimeout(resolve, 20));
      globalThis.gc();
    }
    console.log(queryObjects(Requests, { format: 'count' }));
  `;
  const r = await runChild(code, 15_000, ['--expose-gc']);
  assert.equal(r.timedOut, false, r.stderr);
  assert.equal(r.status, 0, r.stderr);
  return Number(r.stdout);
}

test('a closed database leaves nothing of its request bookkeeping pinned', { timeout: 20_000, skip: queryObjectsMissing }, async () => {
  // The open request pinned the bookkeeping object itself until the Database took over; the
  // pin stayed on it, with its 64 KiB scratch, for the life of the process.
  const alive = await requestsAliveAfter(`async function work() {
    const dbs = [];
    for (let i = 0; i < 3; i++) dbs.push(await Database.open(':memory:'));
    for (const db of dbs) await db.select('SELECT 1');
    for (const db of dbs) await db.close();
  }`);
  assert.equal(alive, 0, 'request bookkeeping objects still alive after close');
});

test('an open the addon refuses at once leaves no completion channel, and nothing it holds, behind', { timeout: 20_000, skip: queryObjectsMissing }, async () => {
  // The constructor made the threadsafe function that delivers completions, then failed
  // (an in-memory URI, refused before any thread starts): nothing released it, and its
  // callback kept each failed open's request bookkeeping alive.
  const alive = await requestsAliveAfter(`async function work() {
    for (let i = 0; i < 20; i++) {
      await Database.open('file::memory:').then(
        () => { throw new Error('opened'); },
        (err) => { if (!(err instanceof TypeError)) throw err; },
      );
    }
  }`);
  assert.equal(alive, 0, 'request bookkeeping of failed opens still alive');
});

test('a failed open pins its native object until it lets go of the event loop, and not longer', { timeout: 20_000 }, async (t) => {
  // A failed open lets go of the event loop on an immediate, by the database's handle. Once
  // open() has rejected, nothing else holds the native object: collected and finalized
  // before that immediate, its handle would be gone and the call would throw there,
  // uncaught. The open pins the native object while its request is in flight (experiment
  // 086); without the pin this child died with "no open database has this handle". The
  // collection is forced after a tick, once V8 no longer keeps the object for the job that
  // delivered the failure. Nothing stays pinned: the native objects alive after 50 failed
  // opens are no more than after 5.
  const dir = mkdtempSync(join(tmpdir(), 'qs-failed-open-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const path = join(dir, 'not-a-database.db');
  writeFileSync(path, Buffer.alloc(8192, 7));
  const code = `
    import { createRequire } from 'node:module';
    import { queryObjects } from 'node:v8';
    import { Database } from ${JSON.stringify(ENTRY)};
    const { NativeDatabase } = createRequire(${JSON.stringify(ENTRY)})('../native/quietsqlite.node');
    const alive = async () => {
      for (let i = 0; i < 3; i++) {
        await new Promise((resolve) => setTimeout(resolve, 20));
        globalThis.gc();
      }
      return queryObjects(NativeDatabase, { format: 'count' });
    };
    let afterFive = 0;
    for (let i = 0; i < 50; i++) {
      const outcome = await Database.open(${JSON.stringify(path)}).then(
        () => 'opened',
        (err) => err.code,
      );
      if (outcome !== 'SQLITE_NOTADB') throw new Error('unexpected: ' + outcome);
      await new Promise((resolve) => process.nextTick(resolve));
      globalThis.gc();
      await new Promise((resolve) => setImmediate(resolve));
      await new Promise((resolve) => setImmediate(resolve));
      if (i === 4) afterFive = await alive();
    }
    const afterFifty = await alive();
    console.log(afterFifty <= afterFive ? 'done' : 'native objects alive: ' + afterFive + ' after 5, ' + afterFifty + ' after 50');
  `;
  const r = await runChild(code, 15_000, ['--expose-gc', '--no-warnings']);
  assert.equal(r.timedOut, false, r.stderr);
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stdout, 'done\n');
});

test('in-flight work keeps the process alive until it completes', { timeout: 20_000 }, async (t) => {
  // Nothing but the query is pending in the child: no await, no timer.
  const code = `
    import { Database } from ${JSON.stringify(ENTRY)};
    const db = await Database.open(':memory:');
    db.select(${JSON.stringify(COUNT_TO)}, [400000]).then(
      (rows) => console.log('result ' + JSON.stringify(rows)),
      (err) => console.log('error ' + err.message),
    );
  `;
  const r = await runChild(code, 15_000);
  t.diagnostic(`child ran for ${r.ms.toFixed(0)} ms`);
  assert.equal(r.timedOut, false, r.stderr);
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stdout, 'result [{"n":400000}]\n');
});

/** Records every `dbKeepAlive(handle, on)` the addon is asked for until the test ends. */
function countKeepAlives(t) {
  const native = createRequire(import.meta.url)('../native/quietsqlite.node');
  const keepAlive = native.dbKeepAlive;
  const calls = [];
  native.dbKeepAlive = function (handle, on) {
    calls.push(on);
    return keepAlive.call(this, handle, on);
  };
  t.after(() => {
    native.dbKeepAlive = keepAlive;
  });
  return calls;
}

test('awaited requests one after another hold the event loop once, not once per request', async (t) => {
  // The addon's keep-alive is a native call each way; toggling it per request was two native
  // calls per query of an awaited loop (issue 11). Count them through the addon's export.
  const calls = countKeepAlives(t);
  const db = await openMemory(t);
  await db.execute('CREATE TABLE t(a)');
  const get = async (a) => (await db.selectOne('SELECT a FROM t WHERE a = ?', [a]))?.a;
  calls.length = 0;
  for (let i = 0; i < 20; i++) await db.execute('INSERT INTO t VALUES (?)', [i]);
  for (let i = 0; i < 20; i++) assert.equal(await get(i), i);
  await db.transaction(async (tx) => {
    for (let i = 20; i < 40; i++) await tx.execute('INSERT INTO t VALUES (?)', [i]);
    assert.equal((await tx.selectOne('SELECT count(*) AS n FROM t')).n, 40);
  });
  assert.ok(calls.length <= 2, `dbKeepAlive was called ${calls.length} times for 62 awaited requests`);
  // ...and once idle, the hold is let go.
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(calls.at(-1), false, 'the event loop is let go once nothing is in flight');
});

test('an awaited loop that awaits many times between its requests still holds the event loop once', async (t) => {
  // The hold used to be let go 16 microtasks after the last completion: code that awaited
  // through more layers than that before its next request paid two native calls per request.
  const calls = countKeepAlives(t);
  const db = await openMemory(t);
  await db.execute('CREATE TABLE t(a)');
  calls.length = 0;
  for (let i = 0; i < 20; i++) {
    for (let j = 0; j < 40; j++) await null;
    await db.execute('INSERT INTO t VALUES (?)', [i]);
    for (let j = 0; j < 40; j++) await null;
    assert.equal((await db.selectOne('SELECT count(*) AS n FROM t')).n, i + 1);
  }
  assert.ok(calls.length <= 2, `dbKeepAlive was called ${calls.length} times for 40 awaited requests`);
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(calls.at(-1), false, 'the event loop is let go once nothing is in flight');
});

test('a write in flight keeps the process alive and is committed', { timeout: 20_000 }, async (t) => {
  const dir = (await openTemp(t)).path.replace(/test\.db$/, '');
  const path = `${dir}child.db`;
  const code = `
    import { Database } from ${JSON.stringify(ENTRY)};
    const db = await Database.open(${JSON.stringify(path)});
    await db.execute('CREATE TABLE t(x)');
    db.execute(${JSON.stringify(COUNT_TO.replace('SELECT count(*) AS n FROM c', 'INSERT INTO t SELECT x FROM c'))}, [300000])
      .then((r) => console.log('changes ' + r.changes));
  `;
  const r = await runChild(code, 15_000);
  assert.equal(r.timedOut, false, r.stderr);
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stdout, 'changes 300000\n');
  const db = await Database.open(path);
  t.after(() => db.close());
  assert.equal((await db.selectOne('SELECT count(*) AS n FROM t')).n, 300000);
});
