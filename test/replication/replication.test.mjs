// Continuous replication with Litestream (docs/guides/replication.md): a quietsqlite database
// under continuous writes in a child process while `litestream replicate` ships it to a file
// replica; restores are checked for integrity and for holding exactly a gap-free prefix of
// the committed transactions. The guarantee tested: a restore taken while writes run holds a
// consistent prefix; once writes stop (clean exit or SIGKILL), everything committed reaches
// the replica within a bounded catch-up time. Skips when Litestream cannot be had
// (`node scripts/litestream.mjs` installs it).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Database } from '../../dist/index.mjs';
import { findLitestream } from '../../scripts/litestream.mjs';

const litestream = findLitestream();
const skip = litestream.path ? false : `skipped: ${litestream.reason}`;
const writerScript = fileURLToPath(new URL('./writer.mjs', import.meta.url));
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** `promise`, or a failure with `why()` after `ms` (the timer does not outlive it). */
async function within(promise, ms, why) {
  let timer;
  const late = new Promise((_, reject) => { timer = setTimeout(() => reject(new Error(why())), ms); });
  try { return await Promise.race([promise, late]); } finally { clearTimeout(timer); }
}

function setup() {
  const dir = mkdtempSync(join(tmpdir(), 'quietsqlite-repl-'));
  const db = join(dir, 'app.db');
  const replica = join(dir, 'replica');
  const config = join(dir, 'litestream.yml');
  // Short intervals keep the test fast; production defaults are 1 s (see the guide).
  writeFileSync(config, [
    'dbs:',
    `  - path: ${db}`,
    '    monitor-interval: 50ms',
    '    replica:',
    '      type: file',
    `      path: ${replica}`,
    '      sync-interval: 100ms',
    '',
  ].join('\n'));
  return { dir, db, replica, config };
}

function startLitestream(config) {
  const p = spawn(litestream.path, ['replicate', '-config', config], { stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  p.stderr.on('data', (d) => { log = (log + d).slice(-4000); });
  return { p, log: () => log };
}

async function stop(child, signal = 'SIGTERM') {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((r) => child.once('exit', r));
  child.kill(signal);
  await exited;
}

function startWriter(path, durationMs, checkpoints) {
  const p = spawn(process.execPath, [writerScript, path, String(durationMs), checkpoints], { stdio: ['ignore', 'pipe', 'pipe'] });
  const w = { p, last: 0, at: 0, err: '' };
  let buf = '';
  p.stdout.on('data', (d) => {
    buf += d;
    const lines = buf.split('\n');
    buf = lines.pop();
    if (lines.length) { w.last = Number(lines[lines.length - 1]); w.at = performance.now(); }
  });
  p.stderr.on('data', (d) => { w.err += d; });
  w.exit = new Promise((r) => p.once('exit', (code, signal) => r({ code, signal })));
  return w;
}

/** `promise`, its rejection naming `what` (an open that fails says which file it was). */
async function labelled(what, promise) {
  try { return await promise; } catch (e) { e.message = `${what}: ${e.message}`; throw e; }
}

let restoreN = 0;
/** Restores the replica into a new file and checks it; returns its last transaction number. */
async function restoreAndCheck(env) {
  const out = join(env.dir, `restored-${++restoreN}.db`);
  const r = spawnSync(litestream.path, ['restore', '-o', out, `file://${env.replica}`], { encoding: 'utf8' });
  if (r.status !== 0) return { n: -1, out, error: r.stderr };
  const db = await labelled(`opening restore ${restoreN}`, Database.open(out, { readonly: true, readers: 1 }));
  try {
    assert.deepEqual(await db.select('PRAGMA integrity_check'), [{ integrity_check: 'ok' }]);
    const hasLog = await db.selectOne("SELECT count(*) AS c FROM sqlite_schema WHERE name = 'log'");
    if (hasLog.c === 0) return { n: 0, out };
    const { n, sum } = await db.selectOne('SELECT n, sum FROM totals');
    const log = await db.selectOne('SELECT count(*) AS c, coalesce(max(seq), 0) AS m, coalesce(sum(seq), 0) AS s FROM log');
    // Whole transactions only, and no gap: the restore is a prefix of the commits.
    assert.deepEqual({ c: log.c, m: log.m, s: log.s }, { c: n, m: n, s: sum }, 'log and totals agree');
    assert.equal(sum, (n * (n + 1)) / 2, 'transactions 1..n, none missing');
    const items = await db.selectOne('SELECT count(*) AS c FROM items');
    assert.equal(items.c, 20 * Math.floor(n / 10), 'every batch of a restored transaction');
    const cols = (await db.select('PRAGMA table_info(log)')).map((c) => c.name);
    assert.equal(cols.includes('note'), n >= 40, 'the schema change is there exactly when transaction 40 is');
    return { n, out };
  } finally {
    await db.close();
  }
}

/** Restores until the replica holds transaction `target`; returns the elapsed ms and the restore. */
async function waitForReplica(env, target, since, limitMs = 15_000) {
  for (;;) {
    const r = await restoreAndCheck(env);
    if (r.n >= target) return { lagMs: performance.now() - since, ...r };
    if (performance.now() - since > limitMs) {
      assert.fail(`the replica holds transaction ${r.n} after ${limitMs} ms, not ${target}${r.error ? `: ${r.error}` : ''}`);
    }
    await sleep(50);
  }
}

async function scenario(t, { kill, checkpoints }) {
  const env = setup();
  const ls = startLitestream(env.config);
  try {
    const w = startWriter(env.db, kill ? 10_000 : 2500, checkpoints);
    // Under load: wait for some commits, then time how long one takes to reach the replica.
    while (w.last < 100 && w.p.exitCode === null) await sleep(20);
    assert.ok(w.last >= 100, `writer stalled at ${w.last}: ${w.err}`);
    const n0 = w.last;
    const underLoad = await waitForReplica(env, n0, w.at);
    assert.ok(w.p.exitCode === null, 'still writing while the lag was measured');
    let last;
    if (kill) {
      await sleep(300);
      w.p.kill('SIGKILL');
      const { signal } = await w.exit;
      assert.equal(signal, 'SIGKILL');
      // The commits the writer made but had not printed yet count too: read the source.
      const src = await labelled('opening the source after SIGKILL', Database.open(env.db, { readonly: true, readers: 1 }));
      last = (await src.selectOne('SELECT n FROM totals')).n;
      await src.close();
      assert.ok(last >= w.last, 'every reported commit is in the source');
    } else {
      const { code } = await w.exit;
      assert.equal(code, 0, w.err);
      last = w.last;
    }
    const catchUp = await waitForReplica(env, last, w.at);
    assert.equal(catchUp.n, last, 'the replica holds every committed transaction, nothing more');
    t.diagnostic(`${kill ? 'SIGKILL' : 'clean stop'}, checkpoints ${checkpoints}: ${last} transactions; ` +
      `lag under load ${underLoad.lagMs.toFixed(0)} ms (transaction ${n0}), catch-up after the last commit ${catchUp.lagMs.toFixed(0)} ms ` +
      '(each includes one restore)');
    return { env, ls, last, restored: catchUp.out };
  } catch (e) {
    e.message += `\nlitestream log:\n${ls.log()}`;
    await stop(ls.p);
    rmSync(env.dir, { recursive: true, force: true });
    throw e;
  }
}

test('litestream replicates a database under write load; restores are whole', { skip }, async (t) => {
  const { env, ls, last, restored } = await scenario(t, { kill: false, checkpoints: 'auto' });
  try {
    // A read-only database on the restored copy, with a live query that sees another
    // process's writes to that copy (cross-process detection through data_version).
    const replica = await Database.open(restored, { readonly: true });
    const live = replica.stream('SELECT count(*) AS n FROM log');
    const seen = [];
    const sawMore = new Promise((resolve) => live.subscribe(([{ n }]) => { seen.push(n); if (n > last) resolve(); }));
    const other = startWriter(restored, 300, 'auto');
    assert.equal((await other.exit).code, 0, other.err);
    await within(sawMore, 5000, () => `the live query saw only ${seen}`);
    assert.equal(seen[0], last);
    live.end();
    await replica.close();
  } finally {
    await stop(ls.p);
    rmSync(env.dir, { recursive: true, force: true });
  }
});

test('litestream: a writer SIGKILLed mid-load loses nothing it committed', { skip }, async (t) => {
  const { env, ls } = await scenario(t, { kill: true, checkpoints: 'auto' });
  await stop(ls.p);
  rmSync(env.dir, { recursive: true, force: true });
});

test("litestream with checkpoints: 'external' (Litestream runs every checkpoint)", { skip }, async (t) => {
  const { env, ls } = await scenario(t, { kill: false, checkpoints: 'external' });
  await stop(ls.p);
  rmSync(env.dir, { recursive: true, force: true });
});

test('live queries on a read-only follower (litestream restore -f) see the primary\'s later commits', { skip }, async (t) => {
  const env = setup();
  const ls = startLitestream(env.config);
  const followed = join(env.dir, 'follower.db');
  let follower;
  let replica;
  try {
    const w1 = startWriter(env.db, 400, 'auto');
    assert.equal((await w1.exit).code, 0, w1.err);
    await waitForReplica(env, w1.last, performance.now());
    follower = spawn(litestream.path, ['restore', '-f', '-follow-interval', '100ms', '-o', followed, `file://${env.replica}`],
      { stdio: ['ignore', 'ignore', 'pipe'] });
    let flog = '';
    follower.stderr.on('data', (d) => { flog = (flog + d).slice(-4000); });
    // The first restore is a WAL-mode file, and a WAL-mode reader holds a shared lock for
    // as long as it is open, which the follower's exclusive lock waits for: it would apply
    // nothing more. Once the follower has applied a transaction, the file is in rollback
    // mode (its header's read/write versions are 1), and readers lock only while reading.
    const w2 = startWriter(env.db, 200, 'auto');
    assert.equal((await w2.exit).code, 0, w2.err);
    for (let i = 0; ; i++) {
      let header;
      try { header = readFileSync(followed).subarray(18, 20); } catch { header = Buffer.alloc(2); }
      if (header[0] === 1 && header[1] === 1) break;
      if (i > 200) throw new Error(`the follower applied nothing: ${flog}`);
      await sleep(50);
    }
    replica = await Database.open(followed, { readonly: true, readers: 1 });
    const live = replica.stream('SELECT count(*) AS n, coalesce(sum(seq), 0) AS s FROM log');
    const seen = [];
    let want = -1;
    let reached;
    const check = () => { if (seen.at(-1)?.n === want) reached?.(); };
    live.subscribe(([row]) => { seen.push(row); check(); });
    const until = async (n, what) => {
      want = n;
      const got = new Promise((r) => { reached = r; });
      check();
      await within(got, 10_000, () => `${what}: the live query saw ${JSON.stringify(seen.slice(-5))}\n${flog}`);
    };
    await until(w2.last, 'the follower\'s copy');
    const w3 = startWriter(env.db, 400, 'auto');
    assert.equal((await w3.exit).code, 0, w3.err);
    const t0 = performance.now();
    await until(w3.last, 'the primary\'s later commits');
    // Whole transactions only: every count it showed came with its matching sum.
    for (const { n, s } of seen) assert.equal(s, (n * (n + 1)) / 2);
    t.diagnostic(`follower live query: ${seen.length} emissions, reached transaction ${w3.last} ${(performance.now() - t0).toFixed(0)} ms after the primary's last commit`);
    live.end();
  } finally {
    await replica?.close();
    if (follower) await stop(follower);
    await stop(ls.p);
    rmSync(env.dir, { recursive: true, force: true });
  }
});
