// Experiment 018: where the JS thread's time goes for 1k-row selects (bench items shape).
//   node --cpu-prof --cpu-prof-dir=DIR bench/experiments/select-profile.mjs <root> [rows=1000] [seconds=4]
//   node bench/experiments/select-profile.mjs --summary DIR/<file>.cpuprofile
import { createRequire } from 'node:module';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

if (process.argv[2] === '--summary') {
  const p = JSON.parse(readFileSync(process.argv[3], 'utf8'));
  const self = new Map();
  const dt = p.timeDeltas;
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  // Shares of the time the thread was busy: '(idle)' samples are left out.
  let total = 0;
  p.samples.forEach((id, i) => {
    if (byId.get(id).callFrame.functionName !== '(idle)') total += dt[i] ?? 0;
  });
  p.samples.forEach((id, i) => {
    const n = byId.get(id);
    const key = `${n.callFrame.functionName || '(anon)'} ${n.callFrame.url.split('/').slice(-1)[0]}:${n.callFrame.lineNumber}`;
    self.set(key, (self.get(key) ?? 0) + (dt[i] ?? 0));
  });
  self.delete('(idle) :-1');
  const top = [...self].sort((a, b) => b[1] - a[1]).slice(0, 25);
  for (const [k, v] of top) console.log(`${((100 * v) / total).toFixed(1).padStart(5)}%  ${k}`);
  process.exit(0);
}
const require = createRequire(import.meta.url);
const root = resolve(process.argv[2]);
const N = Number(process.argv[3] ?? 1000);
const seconds = Number(process.argv[4] ?? 4);
const { Database } = require(root + '/dist/index.js');
const dir = mkdtempSync(join(tmpdir(), 'qs-prof-'));
const db = await Database.open(join(dir, 'p.db'), { readers: 1 });
await db.execute(
  'CREATE TABLE items(id INTEGER PRIMARY KEY, name TEXT, description TEXT, price REAL, category TEXT, created_at INTEGER)',
);
const desc = 'x'.repeat(90);
await db.executeBatch(
  'INSERT INTO items VALUES (?, ?, ?, ?, ?, ?)',
  Array.from({ length: 20000 }, (_, i) => [i + 1, `item ${i}`, `${desc}${i}`, i / 7, `cat ${i % 200}`, 1700000000 + i]),
);
const sql = 'SELECT * FROM items WHERE id > ? ORDER BY id LIMIT ?';
const touch = (rows) => {
  let a = 0;
  for (const r of rows) a += r.id + r.name.length + r.description.length + r.price + r.category.length + r.created_at;
  return a;
};
const end = performance.now() + seconds * 1000;
let n = 0;
const e0 = performance.eventLoopUtilization();
while (performance.now() < end) {
  touch(await db.select(sql, [(n * 911) % (20000 - N), N]));
  n++;
}
const elu = performance.eventLoopUtilization(e0);
console.log(`${n} selects, event-loop active ${((elu.active * 1000) / n).toFixed(1)} us per select`);
await db.close();
rmSync(dir, { recursive: true, force: true });
