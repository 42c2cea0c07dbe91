// Command-line options for bench/run.mjs.
import { parseArgs as nodeParseArgs } from 'node:util';
import { PEERS } from './suites.mjs';

export const USAGE = `usage: node bench/run.mjs [options]     (npm run bench -- [options])

  --quick              fewer iterations, same suites (about 2-3 minutes)
  --label NAME         name used in bench/results/<date>-<label>.{md,json,html} (default "run")
  --compare FILE       an older result (.json, or the .md beside it): print what moved beyond noise
  --suites LIST        comma-separated suite numbers or ids (default: all), e.g. 1,2,select
  --peers LIST         comma-separated peers (default: ${PEERS.join(',')})
  --seed N             data and parameter seed (default 42)
  --readers N          quietsqlite reader connections (default: the library's default)
  --node-flags=FLAGS   Node/V8 flags for every peer's worker process, space-separated, e.g.
                       --node-flags="--min-semi-space-size=16" (default: none)
  --out DIR            where results go (default bench/results)
  --tmp DIR            where database files go (default .tmp/bench)
  --no-write           do not write result files (still prints the summary)
  -h, --help           this text`;

export function parseArgs(argv) {
  const { values } = nodeParseArgs({
    args: argv,
    strict: true,
    options: {
      quick: { type: 'boolean', default: false },
      label: { type: 'string', default: 'run' },
      compare: { type: 'string' },
      suites: { type: 'string' },
      peers: { type: 'string' },
      seed: { type: 'string', default: '42' },
      readers: { type: 'string' },
      'node-flags': { type: 'string' },
      out: { type: 'string' },
      tmp: { type: 'string' },
      'no-write': { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h', default: false },
    },
  });
  const list = (s) => (s ? s.split(',').map((x) => x.trim()).filter(Boolean) : []);
  const peers = values.peers ? list(values.peers) : [...PEERS];
  const unknown = peers.filter((p) => !PEERS.includes(p));
  if (unknown.length) throw new Error(`unknown peer(s): ${unknown.join(', ')} (known: ${PEERS.join(', ')})`);
  const seed = Number(values.seed);
  if (!Number.isInteger(seed)) throw new Error('--seed must be an integer');
  const readers = values.readers === undefined ? undefined : Number(values.readers);
  if (readers !== undefined && !(Number.isInteger(readers) && readers > 0)) throw new Error('--readers must be a positive integer');
  const nodeFlags = (values['node-flags'] ?? '').split(/\s+/).filter(Boolean);
  const notFlag = nodeFlags.find((f) => !f.startsWith('--'));
  if (notFlag !== undefined) throw new Error(`--node-flags takes flags that start with "--" (not ${JSON.stringify(notFlag)})`);
  if (!/^[\w.-]+$/.test(values.label)) throw new Error('--label may contain letters, digits, ".", "-" and "_" only');
  return {
    quick: values.quick,
    label: values.label,
    compare: values.compare,
    suites: list(values.suites),
    peers,
    seed,
    readers,
    nodeFlags,
    out: values.out,
    tmp: values.tmp,
    write: !values['no-write'],
    help: values.help,
  };
}

/** "2025-11-22" in local time: results sort by date, and one label per day stays unique. */
export function dateStamp(d = new Date()) {
  const p = (n) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}`;
}

/** bench/results/<date>-<label>.<ext> */
export function resultPaths(dir, date, label) {
  const base = `${dir.replace(/\/$/, '')}/${date}-${label}`;
  return { md: `${base}.md`, json: `${base}.json`, html: `${base}.html` };
}
