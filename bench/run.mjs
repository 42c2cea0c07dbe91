#!/usr/bin/env node
// Benchmark coordinator: `npm run bench` (see bench/README.md).
//
// Each peer runs in its own child process (node:sqlite's under Node 24) so peers never share
// a heap or an event loop. Per suite the coordinator starts fresh workers on fresh copies of
// one seeded database, then for each case asks the peers for samples in interleaved rounds
// (A B C D, D C B A, ...). Nothing runs in the coordinator while a worker is sampling, apart
// from waiting for its answer.
import { copyFileSync, existsSync, mkdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { basename, dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { USAGE, dateStamp, parseArgs, resultPaths } from './lib/args.mjs';
import { formatDuration } from './lib/format.mjs';
import { renderHtml } from './lib/html.mjs';
import { PeerProcess } from './lib/peer-process.mjs';
import { Progress } from './lib/progress.mjs';
import { caseLine, compareResults, loadResultsFile, renderCompare, renderMarkdown, renderSummary, toJson } from './lib/report.mjs';
import { RESULTS_SCHEMA, addSample, finalizeCase, newCaseResult } from './lib/results.mjs';
import { counts, interleave, warmupRound } from './lib/schedule.mjs';
import { SYNC_PEERS, peerApplies, selectSuites } from './lib/suites.mjs';
import { evaluateTargets } from './lib/targets.mjs';
import { node24Available, node24Path } from '../scripts/node24.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');

let opts;
try {
  opts = parseArgs(process.argv.slice(2));
} catch (err) {
  console.error(`${err.message}\n\n${USAGE}`);
  process.exit(2);
}
if (opts.help) {
  console.log(USAGE);
  process.exit(0);
}

const suites = (() => {
  try {
    return selectSuites(opts.suites);
  } catch (err) {
    console.error(err.message);
    process.exit(2);
  }
})();

const outDir = resolve(opts.out ?? join(root, 'bench', 'results'));
const tmpDir = resolve(opts.tmp ?? join(root, '.tmp', 'bench'));
const progress = new Progress();
const live = new Set(); // worker processes, killed on Ctrl-C
const started = new Date();

process.on('SIGINT', () => {
  progress.done();
  for (const w of live) w.kill();
  console.error('\ninterrupted');
  process.exit(130);
});

/** How to start a peer's worker: node:sqlite needs the Node 24 binary. */
function spawnPeer(peer) {
  const w =
    peer === 'node:sqlite'
      ? new PeerProcess(peer, { execPath: node24Path, execArgv: ['--disable-warning=ExperimentalWarning', ...opts.nodeFlags] })
      : new PeerProcess(peer, { execArgv: opts.nodeFlags });
  live.add(w);
  w.child.on('exit', () => live.delete(w));
  return w;
}

const fileName = (peer) => peer.replace(/[^\w-]/g, '-');

async function discoverPeers() {
  const peers = {};
  await Promise.all(
    opts.peers.map(async (peer) => {
      if (peer === 'node:sqlite' && !node24Available()) {
        peers[peer] = { available: false, reason: 'Node 24 not installed (node scripts/node24.mjs install)' };
        return;
      }
      const w = spawnPeer(peer);
      const r = await w.request('hello', {}, 60_000);
      await w.close();
      if (r.ok) {
        const { ok, id, ...info } = r;
        peers[peer] = { available: true, ...info };
      } else peers[peer] = { available: false, reason: (r.na ?? r.error ?? 'unknown').split('\n')[0] };
    }),
  );
  return peers;
}

/**
 * Build the database once with the first driver that works (better-sqlite3 when installed,
 * whatever --peers says, so the file is the same in every run); peers get copies of it.
 */
async function seedDatabase(path) {
  const errors = [];
  for (const seeder of ['better-sqlite3', 'node:sqlite', 'sqlite3', 'quietsqlite']) {
    if (seeder === 'node:sqlite' && !node24Available()) continue;
    for (const suffix of ['', '-wal', '-shm']) rmSync(path + suffix, { force: true });
    const w = spawnPeer(seeder);
    const hello = await w.request('hello', {}, 60_000);
    const r = hello.ok ? await w.request('seed', { path, seed: opts.seed }, 600_000) : hello;
    await w.close();
    if (r.ok) return seeder;
    errors.push(`${seeder}: ${String(r.error ?? r.na).split('\n')[0]}`);
  }
  throw new Error(`no driver could build the database:\n  ${errors.join('\n  ')}`);
}

/**
 * Fresh worker processes on fresh copies of the seeded database: every suite (and every
 * `isolate` case, e.g. memory) starts from identical data and a clean heap.
 */
async function startWorkers(peers, seedPath) {
  const workers = {};
  await Promise.all(
    opts.peers.filter((p) => peers[p].available).map(async (peer) => {
      const path = join(tmpDir, `${fileName(peer)}.db`);
      for (const suffix of ['-wal', '-shm']) rmSync(path + suffix, { force: true });
      copyFileSync(seedPath, path);
      const w = spawnPeer(peer);
      const hello = await w.request('hello', {}, 60_000);
      const opened = hello.ok ? await w.request('open', { path, options: { readers: opts.readers } }, 60_000) : hello;
      if (opened.ok) {
        workers[peer] = w;
        peers[peer].pragmas ??= opened.pragmas; // as the peer's connection reports them
      } else {
        progress.log(`  ${peer}: could not open the database: ${(opened.error ?? opened.na).split('\n')[0]}`);
        await w.close();
      }
    }),
  );
  return workers;
}

const stopWorkers = (workers) => Promise.all(Object.values(workers).map((w) => w.close()));

async function runSuite(suite, peers, seedPath, results) {
  let workers = null;
  for (const def of suite.cases) {
    const cr = newCaseResult(def, suite);
    const caseStart = Date.now();
    if (!workers || def.isolate) {
      if (workers) await stopWorkers(workers);
      workers = await startWorkers(peers, seedPath);
    }
    const active = [];
    for (const peer of opts.peers) {
      if (!peers[peer].available) continue;
      if (!peerApplies(def, peer)) {
        cr.peers[peer] = { na: SYNC_PEERS.has(peer) ? 'synchronous driver' : 'not applicable' };
        continue;
      }
      if (opts.quick && def.quickSkip?.includes(peer)) {
        cr.peers[peer] = { na: 'in --quick', skipped: true };
        continue;
      }
      const w = workers[peer];
      if (!w || w.exited) {
        cr.peers[peer] = { error: 'worker not running', samples: {} };
        continue;
      }
      const r = await w.request('prepare', { caseId: def.id, seed: opts.seed, quick: opts.quick });
      if (r.ok) active.push(peer);
      else if (r.na) cr.peers[peer] = { na: r.na };
      else cr.peers[peer] = { error: r.error, samples: {} };
    }

    const { iterations, warmup } = counts(def, opts.quick);
    const failed = new Set();
    // Warm-up: at least `warmup` samples and, when warm-up is wanted at all, at least
    // 1 s (quick: 100 ms) of work per peer, so the JIT has settled before measuring.
    if (warmup > 0) {
      const spent = Object.fromEntries(active.map((p) => [p, { n: 0, ms: 0 }]));
      const minMs = opts.quick ? 100 : 1000;
      for (let round = 0; round < 200; round++) {
        const todo = warmupRound(active, round, spent, { minCount: warmup, minMs }).filter((p) => !failed.has(p));
        if (!todo.length) break;
        for (const peer of todo) {
          progress.status({ suite: `${suite.n}. ${suite.title}`, caseId: def.id, peer, warm: true });
          const t0 = performance.now();
          const r = await workers[peer].request('sample', { caseId: def.id, index: -1 - spent[peer].n, warm: true });
          spent[peer].ms += performance.now() - t0;
          spent[peer].n++;
          if (!r.ok) fail(cr, def, peer, r, failed);
        }
      }
    }
    for (const step of interleave(active, iterations, 0)) {
      if (failed.has(step.peer)) continue;
      progress.status({ suite: `${suite.n}. ${suite.title}`, caseId: def.id, peer: step.peer, iter: step.index + 1, of: iterations, warm: step.warm });
      const r = await workers[step.peer].request('sample', { caseId: def.id, index: step.index, warm: step.warm });
      if (!r.ok) {
        fail(cr, def, step.peer, r, failed);
        continue;
      }
      if (!step.warm) addSample(cr, step.peer, step.index, r);
    }
    for (const peer of active) if (!workers[peer].exited) await workers[peer].request('teardown', { caseId: def.id }, 60_000);
    finalizeCase(cr, def);
    cr.durationMs = Date.now() - caseStart;
    results.cases.push(cr);
    progress.log(`${caseLine(results, cr)}  (${formatDuration(cr.durationMs)})`);
  }
  if (workers) await stopWorkers(workers);
}

/** A peer's sample failed: record n/a or the error and stop asking it in this case. */
function fail(cr, def, peer, r, failed) {
  failed.add(peer);
  if (r.na) cr.peers[peer] = { na: r.na };
  else (cr.peers[peer] ??= { samples: {} }).error = r.error;
  progress.log(`  ${def.id} / ${peer}: ${r.na ? `n/a: ${r.na}` : `error: ${String(r.error).split('\n')[0]}`}`);
}

function uniquePaths(date, label) {
  let paths = resultPaths(outDir, date, label);
  for (let i = 2; existsSync(paths.md) || existsSync(paths.json); i++) paths = resultPaths(outDir, date, `${label}-${i}`);
  return paths;
}

async function main() {
  mkdirSync(tmpDir, { recursive: true });
  console.log(`quietsqlite benchmark: ${opts.quick ? 'quick' : 'full'} run, suites ${suites.map((s) => s.n).join(',')}, seed ${opts.seed}`);
  const peers = await discoverPeers();
  for (const p of opts.peers) {
    const i = peers[p];
    console.log(`  ${p.padEnd(15)} ${i.available ? `${i.version} (SQLite ${i.sqlite}, ${i.node})` : `unavailable: ${i.reason}`}`);
  }
  const seedPath = join(tmpDir, `seed-${opts.seed}.db`);
  const t = Date.now();
  const seeder = await seedDatabase(seedPath);
  console.log(`  database seeded with ${seeder} in ${formatDuration(Date.now() - t)}`);

  const cpus = os.cpus();
  const results = {
    schema: RESULTS_SCHEMA,
    label: opts.label,
    date: started.toISOString(),
    mode: opts.quick ? 'quick' : 'full',
    seed: opts.seed,
    durationMs: 0,
    env: {
      node: process.version,
      node24: node24Available() ? node24Path : null,
      cpus: cpus.length,
      cpuModel: cpus[0]?.model?.trim() ?? '?',
      totalMemGB: Math.round(os.totalmem() / 2 ** 30),
      os: `${os.type()} ${os.release()} ${os.arch()}`,
      readers: opts.readers ?? null,
      nodeFlags: opts.nodeFlags,
      // The size of the addon under test: SQLite's compile options move it (issue 13).
      addonBytes: addonSize(),
    },
    peers,
    cases: [],
    targets: [],
  };

  for (const suite of suites) {
    progress.log(`${suite.n}. ${suite.title}`);
    await runSuite(suite, peers, seedPath, results);
  }
  progress.done();
  results.durationMs = Date.now() - started.getTime();
  results.targets = evaluateTargets(results);

  console.log(renderSummary(results));
  console.log(`\nfinished in ${formatDuration(results.durationMs)}`);

  let paths;
  if (opts.write) {
    mkdirSync(outDir, { recursive: true });
    paths = uniquePaths(dateStamp(started), opts.label);
    writeFileSync(paths.json, toJson(results));
    writeFileSync(paths.md, renderMarkdown(results));
    writeFileSync(paths.html, renderHtml(results));
    console.log(`wrote ${[paths.md, paths.json, paths.html].map((p) => p.replace(`${root}/`, '')).join(', ')}`);
  }
  if (opts.compare) {
    const older = loadResultsFile(resolve(opts.compare));
    console.log(`\n${renderCompare(compareResults(older, results), { oldName: basename(opts.compare), newName: paths ? basename(paths.md) : 'this run' })}`);
  }
}

main().catch((err) => {
  progress.done();
  for (const w of live) w.kill();
  console.error(err.stack || err);
  process.exit(1);
});

/** Bytes of the quietsqlite addon the benchmark loads (native/quietsqlite.node), or null. */
function addonSize() {
  const file = join(dirname(fileURLToPath(import.meta.url)), '..', 'native', 'quietsqlite.node');
  return existsSync(file) ? statSync(file).size : null;
}
