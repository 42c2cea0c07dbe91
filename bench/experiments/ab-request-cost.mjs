// Interleaved A/B of request-cost.mjs: variants run in alternating order, each round a fresh
// process per variant; prints the median per case and measure.
//   node bench/experiments/ab-request-cost.mjs <rounds> <cases> <ms> <name=root[:ENV=V,...]> ...
// HOG=1: a busy-looping process runs beside every measured one, so that the JS thread and the
// native thread it waits for share the other CPU (experiment 025).
import { spawn, spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
const [rounds, cases, ms, ...specs] = process.argv.slice(2);
const script = fileURLToPath(new URL('./request-cost.mjs', import.meta.url));
const variants = specs.map((s) => {
  // Split at the first '=' only: the environment part has its own.
  const at = s.indexOf('=');
  const [name, rest] = [s.slice(0, at), s.slice(at + 1)];
  const [root, envs = ''] = rest.split(':');
  const env = Object.fromEntries(envs.split(',').filter(Boolean).map((kv) => kv.split('=')));
  return { name, root, env, runs: [] };
});
for (let r = 0; r < Number(rounds); r++) {
  const order = r % 2 === 0 ? variants : [...variants].reverse();
  for (const v of order) {
    const hog = process.env.HOG ? spawn(process.execPath, ['-e', 'for (;;);'], { stdio: 'ignore' }) : null;
    const p = spawnSync(process.execPath, [script, v.root, cases, ms], { env: { ...process.env, ...v.env, JSON_OUT: '' }, encoding: 'utf8' });
    hog?.kill();
    if (p.status !== 0) throw new Error(p.stderr);
    const out = {};
    for (const line of p.stdout.trim().split('\n')) {
      const m = /\s(\w+)\s+wall\s+([\d.]+) us\s+js\s+([\d.]+) us\s+cpu\s+([\d.]+) us\s+main\s+([\d.]+) us\s+keepAlive\/op ([\d.]+)/.exec(line);
      if (m) out[m[1]] = { wall: +m[2], js: +m[3], cpu: +m[4], main: +m[5], ka: +m[6] };
    }
    v.runs.push(out);
  }
}
const med = (a) => { const s = [...a].sort((x, y) => x - y); return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2; };
const names = Object.keys(variants[0].runs[0]);
for (const c of names) {
  for (const v of variants) {
    const f = (k) => med(v.runs.map((r) => r[c][k]));
    console.log(`${c.padEnd(7)} ${v.name.padEnd(10)} wall ${f('wall').toFixed(1).padStart(7)}  js ${f('js').toFixed(1).padStart(7)}  cpu ${f('cpu').toFixed(1).padStart(7)}  main ${f('main').toFixed(1).padStart(7)}  keepAlive/op ${f('ka').toFixed(2)}   main runs: ${v.runs.map((r) => r[c].main.toFixed(1)).join(' ')}`);
  }
}
