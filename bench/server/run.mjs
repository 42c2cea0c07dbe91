// `npm run bench:server`: the HTTP service (server.mjs) under autocannon, one server process
// per driver, the same three loads for each, results side by side in one markdown file.
//
//   npm run bench:server [-- --duration 10 --drivers better-sqlite3,quietsqlite --no-write]
//
// Loads (latency and requests/s are those of the point endpoint, GET /items/:id):
//   a. point:        POINT_CONNECTIONS connections on GET /items/:id (random ids)
//   b. point+large:  the same, while LARGE_CONNECTIONS other connections fetch
//                    GET /items?limit=10000 back to back
//   c. mix 90/10:    POINT_CONNECTIONS connections, each sending 9 point reads then 1 POST /items
import { spawn } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { cpus, loadavg, tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { node24Available, node24Path } from '../../scripts/node24.mjs';
import { DRIVERS } from './server.mjs';

const require = createRequire(import.meta.url);
const autocannon = require('autocannon');
const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, '..', '..');

const ROWS = 100_000;
const LARGE_LIMIT = 10_000;
const POINT_CONNECTIONS = 8;
const LARGE_CONNECTIONS = 2;
const WARMUP_S = 2;

const { values: args } = parseArgs({
  options: {
    duration: { type: 'string', default: '10' },
    drivers: { type: 'string', default: DRIVERS.join(',') },
    out: { type: 'string', default: join(root, 'bench', 'results') },
    label: { type: 'string', default: 'server' },
    'no-write': { type: 'boolean', default: false },
    help: { type: 'boolean', short: 'h', default: false },
  },
});
if (args.help) {
  console.log(`usage: node bench/server/run.mjs [options]     (npm run bench:server -- [options])

  --duration S     seconds per load, 1 to 120 (default 10)
  --drivers LIST   comma-separated drivers (default: ${DRIVERS.join(',')})
  --label NAME     name used in <out>/<date>-<label>.{md,json} (default "server")
  --out DIR        where results go (default bench/results)
  --no-write       do not write result files (still prints the summary)
  -h, --help       this text

QUIETSQLITE_OPEN_OPTIONS='<json>' passes open options to quietsqlite (e.g. '{"readers":4}').`);
  process.exit(0);
}
const duration = Number(args.duration);
if (!(duration >= 1 && duration <= 120)) throw new RangeError('--duration is seconds, 1 to 120');
const drivers = args.drivers.split(',').map((s) => s.trim()).filter(Boolean);
for (const d of drivers) if (!DRIVERS.includes(d)) throw new RangeError(`unknown driver ${d}; one of ${DRIVERS.join(', ')}`);

/** The same deterministic rows for every driver, written once with better-sqlite3. */
function seed(path) {
  const Database = require('better-sqlite3');
  const db = new Database(path);
  db.exec(`CREATE TABLE items(
    id INTEGER PRIMARY KEY, name TEXT NOT NULL, category TEXT NOT NULL,
    price REAL NOT NULL, qty INTEGER NOT NULL, note TEXT NOT NULL)`);
  const ins = db.prepare('INSERT INTO items(id, name, category, price, qty, note) VALUES (?, ?, ?, ?, ?, ?)');
  const cats = ['tools', 'garden', 'kitchen', 'books', 'toys', 'office'];
  let x = 42;
  const rnd = () => ((x = (Math.imul(x, 1103515245) + 12345) >>> 0) / 2 ** 32);
  db.transaction(() => {
    for (let i = 1; i <= ROWS; i++) {
      ins.run(i, `item ${i}`, cats[i % cats.length], Math.round(rnd() * 10000) / 100, Math.floor(rnd() * 500),
        `note for item ${i}: ${'lorem ipsum '.repeat(1 + (i % 4))}`.trim());
    }
  })();
  db.close();
}

/** Starts a server process; resolves with { port, version, stop }. */
async function startServer(driver, dbPath) {
  const node = driver === 'node:sqlite' ? node24Path : process.execPath;
  const child = spawn(node, [join(here, 'server.mjs'), '--driver', driver, '--db', dbPath], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const exited = new Promise((resolve) => child.once('exit', resolve));
  const stop = async () => {
    child.stdin.end();
    const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
    await exited;
    clearTimeout(timer);
  };
  live.add(child);
  const line = await new Promise((resolve, reject) => {
    const rl = createInterface({ input: child.stdout });
    rl.once('line', resolve);
    child.once('exit', (code) => reject(new Error(`${driver} server exited (${code}) before listening`)));
  });
  const { port, version } = JSON.parse(line);
  return { port, version, stop: async () => { await stop(); live.delete(child); } };
}
// Servers also exit when their stdin closes (this process died); this covers a normal exit
// through an error.
const live = new Set();
process.on('exit', () => { for (const c of live) c.kill(); });

/** One autocannon instance; latencies of requests tagged 'point' are collected here. */
function load(port, requests, connections, seconds, sink) {
  return new Promise((resolve, reject) => {
    const inst = autocannon({ url: `http://127.0.0.1:${port}`, connections, duration: seconds, requests }, (err, res) =>
      err ? reject(err) : resolve(res));
    inst.on('response', (client, status, bytes, ms) => {
      const req = client.requestIterator.currentRequest;
      const bucket = sink[req.tag];
      if (!bucket) return;
      if (status >= 200 && status < 300) bucket.lat.push(ms);
      else bucket.bad++;
    });
  });
}

let rng = 7;
const randomId = () => 1 + ((rng = (Math.imul(rng, 1664525) + 1013904223) >>> 0) % ROWS);
const point = { tag: 'point', method: 'GET', setupRequest: (req) => ({ ...req, path: `/items/${randomId()}` }) };
const large = { tag: 'large', method: 'GET', path: `/items?limit=${LARGE_LIMIT}` };
const write = {
  tag: 'write', method: 'POST', path: '/items', headers: { 'content-type': 'application/json' },
  body: JSON.stringify({ name: 'new item', category: 'tools', price: 9.5, qty: 3, note: 'added under load' }),
};

function summarize(bucket, seconds) {
  const lat = Float64Array.from(bucket.lat).sort();
  const q = (p) => (lat.length ? lat[Math.min(lat.length - 1, Math.floor(p * lat.length))] : NaN);
  return { rps: lat.length / seconds, p50: q(0.5), p99: q(0.99), max: lat.length ? lat[lat.length - 1] : NaN, n: lat.length, bad: bucket.bad };
}

const SCENARIOS = [
  { id: 'a', title: `a. point reads alone (${POINT_CONNECTIONS} connections)`,
    run: (port, sink) => load(port, [point], POINT_CONNECTIONS, duration, sink) },
  { id: 'b', title: `b. point reads (${POINT_CONNECTIONS} connections) while ${LARGE_CONNECTIONS} connections fetch ${LARGE_LIMIT.toLocaleString('en')} rows`,
    run: (port, sink) => Promise.all([
      load(port, [point], POINT_CONNECTIONS, duration, sink),
      load(port, [large], LARGE_CONNECTIONS, duration, sink),
    ]) },
  { id: 'c', title: `c. 90/10 read/write mix (${POINT_CONNECTIONS} connections, each 9 point reads then 1 insert)`,
    run: (port, sink) => load(port, [...Array(9).fill(point), write], POINT_CONNECTIONS, duration, sink) },
];

const tmp = mkdtempSync(join(tmpdir(), 'quietsqlite-bench-server-'));
const started = Date.now();
const results = {}; // driver -> { version, a: {...}, b: {...}, c: {...} } or { unavailable }
try {
  const seedPath = join(tmp, 'seed.db');
  seed(seedPath);
  for (const driver of drivers) {
    if (driver === 'node:sqlite' && !node24Available()) {
      results[driver] = { unavailable: 'needs the Node 24 binary: node scripts/node24.mjs install' };
      console.log(`${driver}: unavailable (${results[driver].unavailable})`);
      continue;
    }
    if (driver === 'quietsqlite' && !existsSync(join(root, 'dist', 'index.mjs'))) {
      results[driver] = { unavailable: 'dist/ is missing: npm run build' };
      continue;
    }
    // A fresh copy per driver, so earlier writes do not change what the next one reads.
    const dbPath = join(tmp, `${driver.replace(':', '-')}.db`);
    copyFileSync(seedPath, dbPath);
    const server = await startServer(driver, dbPath);
    const r = (results[driver] = { version: server.version });
    try {
      await load(server.port, [point, large, write], POINT_CONNECTIONS, WARMUP_S, {});
      for (const s of SCENARIOS) {
        const sink = { point: { lat: [], bad: 0 }, large: { lat: [], bad: 0 }, write: { lat: [], bad: 0 } };
        await s.run(server.port, sink);
        r[s.id] = { point: summarize(sink.point, duration), large: summarize(sink.large, duration), write: summarize(sink.write, duration) };
        const p = r[s.id].point;
        console.log(`${driver.padEnd(14)} ${s.id}: ${p.rps.toFixed(0).padStart(7)} req/s  p50 ${p.p50.toFixed(2)} ms  p99 ${p.p99.toFixed(2)} ms  max ${p.max.toFixed(1)} ms` +
          (s.id === 'b' ? `  (large: ${r.b.large.rps.toFixed(1)} req/s)` : '') +
          (p.bad + r[s.id].write.bad + r[s.id].large.bad ? `  NON-2XX ${p.bad + r[s.id].write.bad + r[s.id].large.bad}` : ''));
      }
    } finally {
      await server.stop();
    }
  }
} finally {
  rmSync(tmp, { recursive: true, force: true });
}

const ms = (v) => (Number.isNaN(v) ? 'n/a' : v < 10 ? v.toFixed(2) : v.toFixed(1));
const k = (v) => (v >= 1000 ? `${(v / 1000).toFixed(1)}k` : v.toFixed(0));
const lines = [];
const now = new Date();
lines.push(`# HTTP service under load (bench/server)`, '');
lines.push(`Run ${now.toISOString()} with \`npm run bench:server\` (${duration} s per load, ${WARMUP_S} s warm-up per driver, ` +
  `${((Date.now() - started) / 1000).toFixed(0)} s in all). Machine: ${cpus().length} cores (${cpus()[0]?.model ?? 'unknown'}), ` +
  `load average ${loadavg().map((v) => v.toFixed(2)).join(' ')} at the end. autocannon and the server run on the same machine, ` +
  `the server in its own process. ${ROWS.toLocaleString('en')} rows; point reads pick random ids.`, '');
lines.push('Drivers:', '');
for (const d of drivers) lines.push(`- ${d}: ${results[d]?.version ?? results[d]?.unavailable ?? 'not run'}`);
lines.push('');
lines.push('Requests/s and latency (ms) of the point endpoint `GET /items/:id`:', '');
lines.push(`| load | ${drivers.map((d) => `${d} req/s | p50 | p99 | max`).join(' | ')} |`);
lines.push(`|---|${drivers.map(() => '---:|---:|---:|---:').join('|')}|`);
for (const s of SCENARIOS) {
  const cells = drivers.map((d) => {
    const p = results[d]?.[s.id]?.point;
    return p ? `${k(p.rps)} | ${ms(p.p50)} | ${ms(p.p99)} | ${ms(p.max)}` : 'n/a | | |';
  });
  lines.push(`| ${s.title} | ${cells.join(' | ')} |`);
}
lines.push('');
lines.push(`Large endpoint in load b (\`GET /items?limit=${LARGE_LIMIT}\`, ${LARGE_CONNECTIONS} connections): ` +
  drivers.map((d) => { const l = results[d]?.b?.large; return `${d} ${l ? `${l.rps.toFixed(1)} req/s, p50 ${ms(l.p50)} ms` : 'n/a'}`; }).join('; ') + '.');
lines.push(`Writes in load c (\`POST /items\`): ` +
  drivers.map((d) => { const w = results[d]?.c?.write; return `${d} ${w ? `${k(w.rps)} req/s, p99 ${ms(w.p99)} ms` : 'n/a'}`; }).join('; ') + '.');
const bad = drivers.flatMap((d) => SCENARIOS.map((s) => { const x = results[d]?.[s.id]; return x ? x.point.bad + x.large.bad + x.write.bad : 0; })).reduce((a, b) => a + b, 0);
lines.push(`Responses other than 2xx: ${bad}.`);
const qs = results.quietsqlite?.b?.point;
const syncP99 = ['better-sqlite3', 'node:sqlite'].map((d) => results[d]?.b?.point?.p99).filter((v) => v > 0);
if (qs && syncP99.length) {
  const best = Math.min(...syncP99);
  lines.push('', `T15 (issue 11): quietsqlite's point p99 under load b is ${(qs.p99 / best).toFixed(2)}x the best synchronous driver's ` +
    `(${ms(qs.p99)} ms vs ${ms(best)} ms; target <= 0.2x).`);
}
const text = lines.join('\n') + '\n';
console.log('\n' + text);
if (!args['no-write']) {
  mkdirSync(args.out, { recursive: true });
  const base = `${now.toISOString().slice(0, 10)}-${args.label}`;
  let name = base;
  for (let i = 2; existsSync(join(args.out, `${name}.md`)); i++) name = `${base}-${i}`;
  writeFileSync(join(args.out, `${name}.md`), text);
  writeFileSync(join(args.out, `${name}.json`), JSON.stringify({ date: now.toISOString(), duration, results }, null, 2) + '\n');
  console.log(`wrote ${relative(process.cwd(), join(args.out, `${name}.md`))} (and .json)`);
}
