// Per-request cost of small operations for one package checkout (experiments 015-017):
// point queries (sequential, 64 in flight), sequential inserts, interactive transactions,
// awaited tx.execute loops. Reports per operation: wall µs, event-loop active µs, process
// CPU µs (all threads) and native keepAlive calls. Run it alternately for two checkouts.
//
//   node bench/experiments/request-cost.mjs <package root> [cases=all] [ms per case=1500]
// INLINE=1 (or INLINE=<budget µs>) opens the database with `inlineReads` (experiment 022).
import { createRequire } from 'node:module';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';

const root = resolve(process.argv[2] ?? '.');
const only = (process.argv[3] ?? 'all').split(',');
const ms = Number(process.argv[4] ?? 1500);
const require = createRequire(import.meta.url);
const { Database } = require(root + '/dist/index.js');
const native = require(root + '/native/quietsqlite.node');
let keepAlives = 0;
// The hold is `dbKeepAlive(handle, on)` since experiment 086, a method of the database
// object before it: whichever this checkout has is counted.
if (typeof native.dbKeepAlive === 'function') {
  const keepAlive = native.dbKeepAlive;
  native.dbKeepAlive = function (handle, on) {
    keepAlives++;
    return keepAlive.call(this, handle, on);
  };
} else {
  const keepAlive = native.NativeDatabase.prototype.keepAlive;
  native.NativeDatabase.prototype.keepAlive = function (on) {
    keepAlives++;
    return keepAlive.call(this, on);
  };
}

const dir = mkdtempSync(join(tmpdir(), 'qs-reqcost-'));
const inline = process.env.INLINE;
// READERS=n: that many reader connections (default: the library's).
const readers = process.env.READERS ? { readers: Number(process.env.READERS) } : {};
const db = await Database.open(join(dir, 'r.db'), {
  ...readers,
  ...(inline ? { inlineReads: inline === '1' ? true : { budgetUs: Number(inline) } } : {}),
});
const N = 10000;
await db.execute('CREATE TABLE items(id INTEGER PRIMARY KEY, name TEXT, price REAL)');
await db.execute('CREATE TABLE writes(id INTEGER PRIMARY KEY, name TEXT, price REAL)');
await db.executeBatch('INSERT INTO items VALUES (?, ?, ?)', Array.from({ length: N }, (_, i) => [i + 1, `item ${i}`, i / 3]));
let x = 1;
const nextId = () => ((x = (x * 48271) % 2147483647) % N) + 1;
const point = 'SELECT * FROM items WHERE id = ?';
const signal = new AbortController().signal;
const insert = 'INSERT INTO writes(name, price) VALUES (?, ?)';

const cases = {
  // T2
  async seq() {
    const row = await db.selectOne(point, [nextId()]);
    if (row === undefined) throw new Error('missing row');
    return 1;
  },
  // T1: 64 lanes, one "op" = 64 queries
  async par64() {
    await Promise.all(Array.from({ length: 64 }, () => db.selectOne(point, [nextId()])));
    return 64;
  },
  // T1 with cancellation: every call given one shared AbortSignal, or a timeout (experiment 067)
  async par64signal() {
    await Promise.all(Array.from({ length: 64 }, () => db.selectOne(point, [nextId()], { signal })));
    return 64;
  },
  async par64timeout() {
    await Promise.all(Array.from({ length: 64 }, () => db.selectOne(point, [nextId()], { timeoutMs: 60_000 })));
    return 64;
  },
  // 1k-row select, sequential (over an inline budget: falls back to a reader)
  async sel1k() {
    const start = nextId() % (N - 1000);
    const rows = await db.select('SELECT * FROM items WHERE id > ? AND id <= ? + 1000', [start, start]);
    if (rows.length !== 1000) throw new Error('short result');
    return 1;
  },
  // T12
  async insert() {
    await db.execute(insert, ['n', 1.5]);
    return 1;
  },
  // T13
  async itx() {
    await db.transaction(async (tx) => {
      const r = await tx.execute(insert, ['t', 600]);
      const row = await tx.selectOne('SELECT * FROM writes WHERE id = ?', [r.lastInsertRowid]);
      if (row.price > 500) await tx.execute('DELETE FROM writes WHERE id = ?', [row.id]);
    });
    return 1;
  },
  // T14: one op = 100 awaited tx.execute in one transaction (per-execute numbers)
  async txloop() {
    await db.transaction(async (tx) => {
      for (let i = 0; i < 100; i++) await tx.execute(insert, ['l', i]);
    });
    return 100;
  },
};

/** CPU time of the JS thread alone (Linux), ns: not inflated by time spent descheduled. */
const mainCpuNs = () => Number(readFileSync(`/proc/self/task/${process.pid}/schedstat`, 'utf8').split(' ')[0]);

async function measure(fn, time) {
  let n = 0;
  const m0 = mainCpuNs();
  const k0 = keepAlives;
  const c0 = process.cpuUsage();
  const e0 = performance.eventLoopUtilization();
  const t0 = performance.now();
  const end = t0 + time;
  while (performance.now() < end) n += await fn();
  const wall = performance.now() - t0;
  const elu = performance.eventLoopUtilization(e0);
  const cpu = process.cpuUsage(c0);
  const main = mainCpuNs() - m0;
  return {
    mainUs: main / 1000 / n,
    wallUs: (wall * 1000) / n,
    jsUs: (elu.active * 1000) / n,
    cpuUs: (cpu.user + cpu.system) / n,
    keepAlive: (keepAlives - k0) / n,
    n,
  };
}

const out = {};
for (const [name, fn] of Object.entries(cases)) {
  if (!only.includes('all') && !only.includes(name)) continue;
  await measure(fn, 200);
  out[name] = await measure(fn, ms);
  if (name === 'insert' || name === 'txloop' || name === 'itx') await db.execute('DELETE FROM writes');
}
await db.close();
rmSync(dir, { recursive: true, force: true });
const r = (v) => (v < 10 ? v.toFixed(2) : v.toFixed(1));
for (const [name, m] of Object.entries(out)) {
  console.log(
    `${root.slice(-12).padEnd(12)} ${name.padEnd(7)} wall ${r(m.wallUs).padStart(6)} us  js ${r(m.jsUs).padStart(6)} us  cpu ${r(m.cpuUs).padStart(6)} us  main ${r(m.mainUs).padStart(6)} us  keepAlive/op ${m.keepAlive.toFixed(2)}  n ${m.n}`,
  );
}
if (process.env.JSON_OUT) {
  const { appendFileSync } = await import('node:fs');
  appendFileSync(process.env.JSON_OUT, JSON.stringify({ root, out }) + '\n');
}
