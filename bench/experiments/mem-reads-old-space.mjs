// T11's RSS growth outside the benchmark (experiment 083): the memory suite's `mem-reads`
// sample function itself (bench/lib/cases.mjs), called ten times in one process with a pause
// between samples (in the benchmark, the other peers' samples and the coordinator's messages
// come between them), printing after each sample the peak RSS of its ten reads and V8's old
// space in use. Uses the quietsqlite of this checkout (dist/ and native/).
//   node bench/experiments/mem-reads-old-space.mjs <copy of a bench database> [pause ms=100]
// e.g. cp .tmp/bench/seed-42.db /tmp/memprobe.db first (the reads leave a -wal beside it).
import v8 from 'node:v8';
import { KINDS } from '../lib/cases.mjs';
import { subRandom } from '../lib/data.mjs';
import * as peer from '../peers/quietsqlite.mjs';

const [file, pauseArg = '100'] = process.argv.slice(2);
if (!file) throw new Error('usage: mem-reads-old-space.mjs <database> [pause ms]');
await peer.load();
const conn = await peer.open(file, {});
const kind = KINDS.memReads;
const ctx = {
  conn,
  peer: { name: peer.name, sync: peer.sync },
  params: { rows: 10000, perBlock: 10 },
  rnd: (i) => subRandom(42, `mem-reads:${i}`),
};
kind.prepare(ctx);
const out = [];
for (let s = 0; s < 10; s++) {
  const { series } = await kind.sample(ctx, s);
  const old = v8.getHeapSpaceStatistics().find((x) => x.space_name === 'old_space');
  out.push(`${Math.max(...series.rss).toFixed(0)}/${(old.space_used_size / 2 ** 20).toFixed(0)}`);
  await new Promise((resolve) => setTimeout(resolve, Number(pauseArg)));
}
console.log(`per sample, peak RSS / old space in use (MB): ${out.join(' ')}`);
await conn.close();
