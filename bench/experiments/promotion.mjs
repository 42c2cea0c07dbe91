// Experiment 066: what the young generation's collections promote per request, with LANES
// async functions each awaiting one query after another for 3 s. Runs itself in a child
// under --trace-gc-nvp and sums the scavenges.
//   node bench/experiments/promotion.mjs LANES [db|one|exec] [package root]
// db: a point query (the default); one: selectOne('SELECT 1 AS v'); exec: execute('SELECT 1').
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const [lanesArg = '64', mode = 'db', root = '.'] = process.argv.slice(2);

if (process.env.PROMOTION_CHILD === undefined) {
  const child = spawnSync(process.execPath, ['--trace-gc-nvp', fileURLToPath(import.meta.url), lanesArg, mode, root], {
    encoding: 'utf8',
    env: { ...process.env, PROMOTION_CHILD: '1' },
    maxBuffer: 1 << 28,
  });
  if (child.status !== 0) throw new Error(child.stderr);
  let ops = 0;
  let scavenges = 0;
  const sum = { pause: 0, promoted: 0, allocated: 0 };
  for (const line of child.stdout.split('\n')) {
    if (line.startsWith('ops ')) ops = Number(line.slice(4));
    if (!/\bgc=s\b/.test(line)) continue;
    scavenges++;
    for (const field of line.trim().split(/\s+/)) {
      const [name, value] = field.split('=');
      if (name in sum) sum[name] += Number(value);
    }
  }
  console.log(
    `${lanesArg} lanes, ${mode}: ${ops} queries, ${scavenges} scavenges, ${sum.pause.toFixed(0)} ms paused, ` +
      `${(sum.promoted / 1e6).toFixed(1)} of ${(sum.allocated / 1e6).toFixed(1)} MB promoted: ${(sum.promoted / ops).toFixed(0)} B a query`,
  );
} else {
  const require = createRequire(resolve(root) + '/');
  const { Database } = require('./dist/index.js');
  const db = await Database.open(':memory:');
  await db.execute('CREATE TABLE items(id INTEGER PRIMARY KEY, name TEXT, price REAL)');
  await db.executeBatch('INSERT INTO items VALUES (?, ?, ?)', Array.from({ length: 10000 }, (_, i) => [i + 1, `item ${i}`, i / 3]));
  let x = 1;
  const nextId = () => ((x = (x * 48271) % 2147483647) % 10000) + 1;
  const query =
    mode === 'one' ? () => db.selectOne('SELECT 1 AS v')
    : mode === 'exec' ? () => db.execute('SELECT 1')
    : () => db.selectOne('SELECT * FROM items WHERE id = ?', [nextId()]);
  const end = performance.now() + 3000;
  let n = 0;
  await Promise.all(
    Array.from({ length: Number(lanesArg) }, async () => {
      while (performance.now() < end) {
        await query();
        n++;
      }
    }),
  );
  console.log('ops', n);
  await db.close();
}
