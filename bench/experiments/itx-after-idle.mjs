// T13's slow samples (experiments 043, 044): samples of 50 interactive transactions, each
// after a pause in which this process sleeps (`sleep`) or a neighbour process keeps both
// CPUs busy (`busy`, as the sqlite3 peer's own sample does in a full run). Per sample: µs per
// transaction; how the results reached JS (polls that found a result, polls that found
// none, takes from the event loop's callback, and sends); and for the JS thread and the
// writer, context switches (voluntary, involuntary), the CPU each last ran on, and their run
// and run-queue times from schedstat.
//   node bench/experiments/itx-after-idle.mjs <package root> <samples> <sleep|busy> [pause ms=10]
// EACH=1 prints every transaction's µs; EXTERNAL=1 opens with checkpoints: 'external';
// NOPATCH=1 leaves the native methods unwrapped (no counts).
import { createRequire } from 'node:module';
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';

const [rootArg, samplesArg = '40', pause = 'busy', pauseMsArg = '10'] = process.argv.slice(2);
const root = resolve(rootArg ?? '.');
const pauseMs = Number(pauseMsArg);
const require = createRequire(import.meta.url);
const { Database } = require(root + '/dist/index.js');
const native = require(root + '/native/quietsqlite.node');

const counts = { pollHit: 0, pollMiss: 0, loopTake: 0, sends: 0 };
// The calls made per request are exports of the addon, which the library looks up at
// every call (experiment 046).
const take = native.dbTakeCompletions;
if (!process.env.NOPATCH) {
  native.dbTakeCompletions = function (handle, maxMicros, scratch) {
    const out = take(handle, maxMicros, scratch);
    if (maxMicros > 0) counts[out === undefined ? 'pollMiss' : 'pollHit']++;
    else counts.loopTake++;
    return out;
  };
  for (const name of ['dbExecute', 'dbWriterRead', 'dbBegin', 'dbCommit', 'dbRollback', 'dbRead']) {
    const f = native[name];
    native[name] = function (...args) {
      counts.sends++;
      return f(...args);
    };
  }
}
// The neighbour: two busy loops for `ms` on request (one per CPU), answering when done.
const neighbour = spawn(
  process.execPath,
  [
    '-e',
    `const { Worker } = require('node:worker_threads');
     process.on('message', (ms) => {
       const burn = (ms) => { const end = Date.now() + ms; while (Date.now() < end); };
       const w = new Worker('const end = Date.now() + ' + ms + '; while (Date.now() < end);', { eval: true });
       burn(ms);
       w.on('exit', () => process.send('done'));
     });`,
  ],
  { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] },
);
const neighbourPause = (ms) =>
  new Promise((done) => {
    neighbour.once('message', done);
    neighbour.send(ms);
  });

const dir = mkdtempSync(join(tmpdir(), 'qs-itx-idle-'));
const db = await Database.open(join(dir, 't.db'), process.env.EXTERNAL ? { checkpoints: 'external' } : {});
await db.execute('CREATE TABLE writes(id INTEGER PRIMARY KEY, name TEXT, price REAL)');
const ins = 'INSERT INTO writes(name, price) VALUES (?, ?)';
const body = async (tx) => {
  const r = await tx.execute(ins, ['t', 600]);
  const row = await tx.selectOne('SELECT * FROM writes WHERE id = ?', [r.lastInsertRowid]);
  if (row.price > 500) await tx.execute('DELETE FROM writes WHERE id = ?', [row.id]);
};
for (let i = 0; i < 200; i++) await db.transaction(body);

// Per thread (JS, writer): context switches, voluntary and not, and the CPUs it ran on.
const threads = () => {
  const out = {};
  for (const tid of readdirSync('/proc/self/task')) {
    const comm = readFileSync(`/proc/self/task/${tid}/comm`, 'utf8').trim();
    const name = tid === String(process.pid) ? 'js' : comm.startsWith('quietsqlite-wri') ? 'writer' : null;
    if (name === null) continue;
    const status = readFileSync(`/proc/self/task/${tid}/status`, 'utf8');
    const v = Number(/voluntary_ctxt_switches:\s+(\d+)/.exec(status)[1]);
    const nv = Number(/nonvoluntary_ctxt_switches:\s+(\d+)/.exec(status)[1]);
    const stat = readFileSync(`/proc/self/task/${tid}/stat`, 'utf8');
    const cpu = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[36]);
    const [run, wait] = readFileSync(`/proc/self/task/${tid}/schedstat`, 'utf8').split(' ').map(Number);
    out[name] = { v, nv, cpu, run, wait };
  }
  return out;
};
const rows = [];
for (let s = 0; s < Number(samplesArg); s++) {
  if (pause === 'busy') await neighbourPause(pauseMs);
  else await new Promise((r) => setTimeout(r, pauseMs));
  const c0 = { ...counts };
  const th0 = threads();
  const t0 = performance.now();
  const each = [];
  for (let i = 0; i < 50; i++) {
    const a = performance.now();
    await db.transaction(body);
    each.push(Math.round((performance.now() - a) * 1000));
  }
  if (process.env.EACH) console.log(each.join(' '));
  const th1 = threads();
  const sw = Object.keys(th1).map((k) => `${k} v${th1[k].v - th0[k].v} nv${th1[k].nv - th0[k].nv} cpu${th1[k].cpu} run ${((th1[k].run - th0[k].run) / 1e6).toFixed(1)}ms wait ${((th1[k].wait - th0[k].wait) / 1e6).toFixed(1)}ms`).join(' ');
  const us = ((performance.now() - t0) * 1000) / 50;
  const d = Object.fromEntries(Object.keys(counts).map((k) => [k, counts[k] - c0[k]]));
  rows.push({ us, sw, ...d });
  await db.execute('DELETE FROM writes');
}
neighbour.kill();
await db.close();
rmSync(dir, { recursive: true, force: true });
for (const r of rows)
  console.log(`${r.us.toFixed(1).padStart(7)} us/tx  sends ${r.sends}  poll hit ${r.pollHit}  miss ${r.pollMiss}  loop takes ${r.loopTake}  ${r.sw}`);
const sorted = rows.map((r) => r.us).sort((a, b) => a - b);
console.log(`median ${sorted[sorted.length >> 1].toFixed(1)} us/tx; min ${sorted[0].toFixed(1)}; max ${sorted[sorted.length - 1].toFixed(1)}`);
