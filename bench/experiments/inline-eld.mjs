// Event-loop delay while 10k-row selects run back to back (T8), with and without
// `inlineReads` (experiment 022): every select goes over the inline budget, so with the
// option on this measures the fallback path. Fresh process per variant, alternating order.
//   node bench/experiments/inline-eld.mjs [rounds=4] [ms=2000]
//   (internal) node bench/experiments/inline-eld.mjs --run <off|on> <ms>
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';

if (process.argv[2] === '--run') {
  const [variant, ms] = [process.argv[3], Number(process.argv[4])];
  const require = createRequire(import.meta.url);
  const { Database } = require('../../dist/index.js');
  const dir = mkdtempSync(join(tmpdir(), 'qs-eld-'));
  const db = await Database.open(join(dir, 'e.db'), variant === 'on' ? { inlineReads: true } : undefined);
  await db.execute('CREATE TABLE items(id INTEGER PRIMARY KEY, name TEXT, price REAL)');
  await db.executeBatch('INSERT INTO items VALUES (?, ?, ?)', Array.from({ length: 10000 }, (_, i) => [i + 1, `item ${i}`, i / 3]));
  for (let i = 0; i < 5; i++) await db.select('SELECT * FROM items');
  const h = monitorEventLoopDelay({ resolution: 1 });
  h.enable();
  const end = performance.now() + ms;
  let n = 0;
  while (performance.now() < end) {
    await db.select('SELECT * FROM items');
    n++;
  }
  h.disable();
  const d = await db.diagnostics();
  await db.close();
  rmSync(dir, { recursive: true, force: true });
  console.log(JSON.stringify({ p99: h.percentile(99) / 1e6, max: h.max / 1e6, perSelectMs: ms / n, inline: d.inlineReads, fallbacks: d.inlineFallbacks }));
} else {
  const rounds = Number(process.argv[2] ?? 4);
  const ms = process.argv[3] ?? '2000';
  const runs = { off: [], on: [] };
  for (let r = 0; r < rounds; r++) {
    for (const v of r % 2 === 0 ? ['off', 'on'] : ['on', 'off']) {
      const p = spawnSync(process.execPath, [fileURLToPath(import.meta.url), '--run', v, ms], { encoding: 'utf8' });
      if (p.status !== 0) throw new Error(p.stderr);
      runs[v].push(JSON.parse(p.stdout));
    }
  }
  const med = (a) => { const s = [...a].sort((x, y) => x - y); return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2; };
  for (const v of ['off', 'on']) {
    const f = (k) => med(runs[v].map((x) => x[k]));
    console.log(`${v.padEnd(4)} eld p99 ${f('p99').toFixed(2)} ms  max ${f('max').toFixed(2)} ms  per select ${f('perSelectMs').toFixed(2)} ms  inline ${f('inline')} fallbacks ${f('fallbacks')}   p99 runs: ${runs[v].map((x) => x.p99.toFixed(2)).join(' ')}`);
  }
}
