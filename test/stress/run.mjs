// `npm run stress` (full) and `npm run stress -- --quick`: the reliability suite. Each kind
// runs in its own process (common.runKind); progress goes to stdout, and a summary with the
// figures is written to test/stress/results/<date>-<quick|full>.md (docs/reliability.md
// quotes it). Exit code 1 when any kind reports a failure.
//
//   node test/stress/run.mjs [--quick] [--only=fuzz,crash,faults,lifecycle,soak] [--seed=N]
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { join, relative } from 'node:path';
import { node24Available, node24Path } from '../../scripts/node24.mjs';
import { here, root, runKind } from './common.mjs';
import { runFuzz } from './fuzz.mjs';

const args = process.argv.slice(2);
const quick = args.includes('--quick');
const only = args.find((a) => a.startsWith('--only='))?.slice(7).split(',');
const seed = Number(args.find((a) => a.startsWith('--seed='))?.slice(7) ?? 20261122);

/** The scale of each kind, full and quick (npm test's subset is in test/50-reliability.test.mjs). */
export const SCALES = {
  full: { fuzz: { calls: 100_000, node24Share: 0.3 }, crash: { kills: 50 }, faults: {}, lifecycle: { cycles: 1000, workers: 20, dropped: 100 }, soak: { seconds: 600 } },
  quick: { fuzz: { calls: 10_000, node24Share: 0.3 }, crash: { kills: 20 }, faults: {}, lifecycle: { cycles: 50, workers: 3, dropped: 20 }, soak: { seconds: 45 } },
};

const scale = SCALES[quick ? 'quick' : 'full'];
const kinds = Object.keys(scale).filter((k) => !only || only.includes(k));
const started = new Date();
const log = (line) => console.log(`[${((Date.now() - started) / 1000).toFixed(0).padStart(4)}s] ${line}`);

async function runOne(kind) {
  const p = scale[kind];
  if (kind !== 'fuzz') return runKind(kind, { ...p, seed }, { progress: log });
  // Fuzz: most calls under this Node, a share under Node 24 (Float16Array exists there).
  const parts = [{ node: process.execPath, calls: Math.round(p.calls * (1 - p.node24Share)), seed }];
  if (node24Available()) parts.push({ node: node24Path, calls: p.calls - parts[0].calls, seed: seed + 7919 });
  else parts[0].calls = p.calls;
  const out = { failures: [], figures: { parts: [] } };
  for (const part of parts) {
    const r = await runFuzz(part, (l) => log(`${l} (node ${part.node === process.execPath ? process.version : '24'})`));
    out.failures.push(...r.failures);
    out.figures.parts.push({ node: part.node === process.execPath ? process.version : 'v24', seed: part.seed, ...r.figures });
  }
  return out;
}

/** Failures grouped by their message without the case, most frequent first. */
function grouped(failures) {
  const groups = new Map();
  for (const f of failures) {
    const key = f.replace(/ — case: .*/s, '').replace(/\d+/g, 'N').slice(0, 140);
    const g = groups.get(key) ?? { n: 0, example: f };
    g.n++;
    groups.set(key, g);
  }
  return [...groups.values()].sort((a, b) => b.n - a.n);
}

const esc = (s) => String(s).replace(/\|/g, '\\|').replace(/\n/g, ' ').replace(/[\ud800-\udfff]/g, '\ufffd');

function report(results, seconds) {
  const mode = quick ? 'quick' : 'full';
  const lines = [
    `# Reliability run: ${mode}, ${started.toISOString()}`,
    '',
    `Command: \`npm run stress${quick ? ' -- --quick' : ''}${only ? ` -- --only=${only.join(',')}` : ''}\` (seed ${seed}); Node ${process.version}${node24Available() ? ' and Node 24 (fuzz share)' : ''}; ${seconds.toFixed(0)} s in total; machine: ${cpus().length} cores.`,
    '',
    '| kind | failures | figures |',
    '|---|---|---|',
  ];
  for (const [kind, r] of Object.entries(results)) {
    lines.push(`| ${kind} | ${r.failures.length} | ${esc(summary(kind, r.figures))} |`);
  }
  for (const [kind, r] of Object.entries(results)) {
    lines.push('', `## ${kind}`, '', '```json', JSON.stringify(kind === 'soak' ? { ...r.figures, curve: undefined } : r.figures, null, 1), '```');
    if (kind === 'soak' && r.figures.curve) {
      lines.push('', 'Memory curve (MB, each point after a full collection) and promises in flight:', '', '| t (s) | RSS | live JS heap | outside the JS heap | threads | pending |', '|---|---|---|---|---|---|');
      for (const c of r.figures.curve) lines.push(`| ${c.s} | ${c.rssMb} | ${c.heapLiveMb} | ${c.outsideHeapMb} | ${c.threads} | ${c.pending} |`);
    }
    if (r.failures.length > 0) {
      lines.push('', `Failures (${r.failures.length}), grouped:`, '');
      for (const g of grouped(r.failures).slice(0, 25)) lines.push(`- ${g.n} x ${esc(g.example.slice(0, 400))}`);
    }
  }
  return lines.join('\n') + '\n';
}

function summary(kind, f = {}) {
  switch (kind) {
    case 'fuzz': {
      const t = (k) => (f.parts ?? []).reduce((s, p) => s + (p[k] ?? 0), 0);
      return `${t('calls')} generated calls (${t('resolved')} resolved, ${t('rejected') + t('syncThrows')} failed typed or not), ${t('valuesRoundTripped')} values read back, ${t('crashes')} crashes`;
    }
    case 'crash':
      return `${f.kills} SIGKILLs, ${f.unitsCommitted} units committed, ${f.unitsOnDisk} on disk at the end`;
    case 'faults':
      return `${f.cases} fault cases`;
    case 'lifecycle':
      return (f.phases ?? []).map((p) => `${p.phase}: threads ${p.before.threads}->${p.after.threads}, fds ${p.before.fds}->${p.after.fds}, RSS ${p.before.rssMb}->${p.after.rssMb} MB`).join('; ');
    case 'soak':
      return `${f.seconds} s, ${f.queries} live queries, ${f.promises} promises (${f.unsettled} unsettled), ${f.mismatched} final mismatches, RSS peak ${f.rssPeakMb} MB`;
    default:
      return '';
  }
}

const results = {};
for (const kind of kinds) {
  log(`== ${kind} ${JSON.stringify(scale[kind])}`);
  const r = await runOne(kind);
  results[kind] = r;
  log(`== ${kind}: ${r.failures.length} failures; ${summary(kind, r.figures)}`);
}
const seconds = (Date.now() - started) / 1000;
const dir = join(here, 'results');
mkdirSync(dir, { recursive: true });
const file = join(dir, `${started.toISOString().slice(0, 10)}-${quick ? 'quick' : 'full'}.md`);
writeFileSync(file, report(results, seconds));
const total = Object.values(results).reduce((s, r) => s + r.failures.length, 0);
log(`${total} failures in ${seconds.toFixed(0)} s; results: ${relative(root, file)}`);
for (const [kind, r] of Object.entries(results)) for (const g of grouped(r.failures).slice(0, 8)) log(`  ${kind}: ${g.n} x ${g.example.slice(0, 220)}`);
process.exitCode = total === 0 ? 0 : 1;
