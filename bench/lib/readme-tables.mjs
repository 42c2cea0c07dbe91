// The README's Performance tables, made from two full runs' reports (bench/readme-table.mjs),
// so the numbers there are the reports' own, not copied by hand. Each cell is run 1's
// median with run 2's in parentheses.
import { formatValue } from './format.mjs';
import { targetMark } from './targets.mjs';

const PEERS = ['better-sqlite3', 'node:sqlite', 'sqlite3', 'quietsqlite'];

// [label, case id, metric, unit, peers shown (default: all)]
export const README_ROWS = [
  ['point query, sequential', 'point-seq', 'qps', 'op/s'],
  ['point query, sequential, `inlineReads: true`', 'point-inline-seq', 'qps', 'op/s', ['quietsqlite']],
  ['point query, 64 in flight', 'point-64', 'qps', 'op/s'],
  ['10-row select, wall', 'select-10', 'wall', 'ms'],
  ['1k-row select, wall', 'select-1k', 'wall', 'ms'],
  ['10k-row select, wall', 'select-10k', 'wall', 'ms'],
  ['10k-row select, main thread incl. reading every field', 'select-10k', 'mainTouch', 'ms'],
  ['10k rows to JSON, wall (peers: `JSON.stringify`; quietsqlite: `selectBytes`)', 'json-10k', 'wall', 'ms'],
  ['10k rows to JSON, main thread', 'json-10k', 'main', 'ms'],
  ['1k-row selects, 1 in flight', 'concurrent-1', 'qps', 'op/s'],
  ['1k-row selects, 8 in flight', 'concurrent-8', 'qps', 'op/s'],
  ['single-row insert, sequential (per insert)', 'insert-100', 'wall', 'ms'],
  ['interactive transaction (insert, read back, delete)', 'tx-interactive', 'wall', 'ms'],
  ['transaction of 1k awaited `tx.execute`', 'tx-loop-1k', 'wall', 'ms'],
  ['batch insert, 1k rows in one transaction', 'batch-1k', 'rowsps', 'rows/s'],
  ['batch insert, 100k rows in one transaction', 'batch-100k', 'rowsps', 'rows/s'],
  ['event-loop delay p99 while 10k-row selects run back to back', 'eld-10k', 'p99', 'ms'],
  ['RSS peak over 100 x 10k-row reads', 'mem-reads', 'rssPeak', 'MB'],
  ['live queries: 10 unchanged streams, 200 writes, extra main-thread time', 'live-unchanged', 'extraMain', 'ms'],
];

function median(run, caseId, peer, metric) {
  const c = run.cases.find((x) => x.id === caseId);
  if (!c) throw new Error(`case ${caseId} is not in the report`);
  return c.peers[peer]?.summary?.[metric]?.median;
}

/** "met" in both runs, "met in one run", else the status of run 1 ("NOT met", "not measured"). */
export function statusOfBoth(a, b) {
  if (a === true && b === true) return 'met';
  if (a === true || b === true) return 'met in one run';
  return targetMark(a);
}

/** The measures table and the targets table, Markdown, from two parsed JSON reports. */
export function readmeTables([run1, run2]) {
  const out = [`| measure | ${PEERS.join(' | ')} |`, `|---|${PEERS.map(() => '---|').join('')}`];
  for (const [label, caseId, metric, unit, only] of README_ROWS) {
    const cells = PEERS.map((peer) => {
      if (only && !only.includes(peer)) return 'n/a';
      const [a, b] = [run1, run2].map((r) => median(r, caseId, peer, metric));
      return a === undefined && b === undefined ? 'n/a' : `${formatValue(a, unit)} (${formatValue(b, unit)})`;
    });
    out.push(`| ${label} | ${cells.join(' | ')} |`);
  }
  out.push('', '| # | target | run 1 | run 2 | |', '|---|---|---|---|---|');
  for (const a of run1.targets) {
    const b = run2.targets.find((t) => t.id === a.id);
    out.push(`| ${a.id} | ${a.text} | ${a.measured} | ${b?.measured ?? 'n/a'} | ${statusOfBoth(a.met, b?.met ?? null)} |`);
  }
  return out.join('\n');
}
