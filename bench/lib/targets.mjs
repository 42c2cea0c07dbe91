// The project's performance targets, evaluated on one run's medians. "Best peer" is the
// faster of better-sqlite3 and node:sqlite on that measure in the same run.
import { formatRatio, formatValue } from './format.mjs';
import { findCase, medianOf, rssPlateaued } from './results.mjs';

const QS = 'quietsqlite';
const SYNC_PEERS = ['better-sqlite3', 'node:sqlite'];

/** { peer, value } of the best synchronous peer for a metric, or undefined. */
function best(results, caseId, metric, better) {
  let out;
  for (const peer of SYNC_PEERS) {
    const value = medianOf(results, caseId, peer, metric);
    if (!Number.isFinite(value)) continue;
    if (!out || (better === 'higher' ? value > out.value : value < out.value)) out = { peer, value };
  }
  return out;
}

const peerShort = (p) => (p === 'better-sqlite3' ? 'bs3' : p);

/**
 * A target comparing quietsqlite's `caseId/metric` to a reference value via `limit`:
 * for 'higher' the ratio qs/ref must be >= limit, for 'lower' <= limit.
 */
function vsBest(id, text, { caseId, metric, refCase = caseId, refMetric = metric, better, unit, limit, only }) {
  return (results) => {
    const qs = medianOf(results, caseId, QS, metric);
    const ref = only ? { peer: only, value: medianOf(results, refCase, only, refMetric) } : best(results, refCase, refMetric, better);
    if (!Number.isFinite(qs)) return pending(id, text, results, caseId);
    if (!ref || !Number.isFinite(ref.value)) return { id, text, met: null, measured: 'no reference peer measured' };
    const r = qs / ref.value;
    const met = better === 'higher' ? r >= limit : r <= limit;
    return { id, text, met, ratio: r, measured: `${formatRatio(r)} (${formatValue(qs, unit)} vs ${peerShort(ref.peer)} ${formatValue(ref.value, unit)})` };
  };
}

function pending(id, text, results, caseId) {
  let why = 'not measured';
  if (results.peers?.[QS]?.available === false) why = 'quietsqlite unavailable';
  else if (caseId && !findCase(results, caseId)) why = 'suite not run';
  else if (caseId) {
    const pc = findCase(results, caseId).peers[QS];
    if (pc?.na) why = `n/a: ${pc.na}`;
    else if (pc?.error) why = 'error (see report)';
  }
  return { id, text, met: null, measured: why };
}

/** A 'lower is better' ratio against the best peer whose limit applies to the ratio itself. */
const lowerVsBest = (id, text, caseId, metric, unit, limit) =>
  vsBest(id, text, { caseId, metric, better: 'lower', unit, limit });

// Issue 11's targets (performance round 2). T4, T5, T7 and T9 were met in round 1 and must
// stay met; T15 is measured by `npm run bench:server` (bench/server), not here.
export const TARGETS = [
  vsBest('T1', 'point query by id, 64 in flight >= 1.5x best peer sequential qps', { caseId: 'point-64', refCase: 'point-seq', metric: 'qps', better: 'higher', unit: 'op/s', limit: 1.5 }),
  vsBest('T2', 'point query, sequential awaits >= 0.6x best peer', { caseId: 'point-seq', metric: 'qps', better: 'higher', unit: 'op/s', limit: 0.6 }),
  // The same with the opt-in `inlineReads` (a read that finishes within its budget runs on the
  // JS thread): shown beside T2, which is measured with the defaults.
  vsBest('T2i', 'point query, sequential awaits, opened with inlineReads: true >= 0.6x best peer', { caseId: 'point-inline-seq', refCase: 'point-seq', metric: 'qps', better: 'higher', unit: 'op/s', limit: 0.6 }),
  lowerVsBest('T3', '10k-row select wall <= 0.5x best peer', 'select-10k', 'wall', 'ms', 0.5),
  (results) => {
    const id = 'T4';
    const text = '10k-row select main-thread incl. touching <= 0.25x better-sqlite3 and <= 0.35x best peer';
    const a = vsBest(id, text, { caseId: 'select-10k', metric: 'mainTouch', better: 'lower', unit: 'ms', limit: 0.25, only: 'better-sqlite3' })(results);
    const b = vsBest(id, text, { caseId: 'select-10k', metric: 'mainTouch', better: 'lower', unit: 'ms', limit: 0.35 })(results);
    if (a.met === null || b.met === null) return a.met === null ? a : b;
    return { id, text, met: a.met && b.met, ratio: b.ratio, measured: `vs bs3 ${a.measured}; vs best ${b.measured}` };
  },
  lowerVsBest('T5', '1k-row select main-thread incl. touching <= 0.35x best peer', 'select-1k', 'mainTouch', 'ms', 0.35),
  lowerVsBest('T6', '10k rows to JSON (selectBytes vs select + JSON.stringify) wall <= 0.25x best peer', 'json-10k', 'wall', 'ms', 0.25),
  lowerVsBest('T7', '10k rows to JSON main-thread <= 0.02x best peer', 'json-10k', 'main', 'ms', 0.02),
  (results) => {
    const id = 'T8';
    const text = 'event-loop delay p99 while 10k-row selects run back to back <= 3 ms';
    const qs = medianOf(results, 'eld-10k', QS, 'p99');
    if (!Number.isFinite(qs)) return pending(id, text, results, 'eld-10k');
    return { id, text, met: qs <= 3, ratio: qs / 3, measured: formatValue(qs, 'ms') };
  },
  (results) => {
    const id = 'T9';
    const text = 'batch insert of 1k and 100k rows in one transaction >= 1.0x best peer throughput';
    const parts = ['batch-1k', 'batch-100k'].map((caseId) => vsBest(id, text, { caseId, metric: 'rowsps', better: 'higher', unit: 'rows/s', limit: 1.0 })(results));
    if (parts.some((p) => p.met === null)) return parts.find((p) => p.met === null);
    return { id, text, met: parts.every((p) => p.met), ratio: Math.min(...parts.map((p) => p.ratio)), measured: `1k: ${parts[0].measured}; 100k: ${parts[1].measured}` };
  },
  (results) => {
    const id = 'T10';
    const text = '1k-row selects, 8 in flight vs 1 in flight >= 1.6x throughput';
    const one = medianOf(results, 'concurrent-1', QS, 'qps');
    const eight = medianOf(results, 'concurrent-8', QS, 'qps');
    if (!Number.isFinite(one) || !Number.isFinite(eight)) return pending(id, text, results, Number.isFinite(one) ? 'concurrent-8' : 'concurrent-1');
    const r = eight / one;
    return { id, text, met: r >= 1.6, ratio: r, measured: `${formatRatio(r)} (${formatValue(eight, 'op/s')} vs ${formatValue(one, 'op/s')})` };
  },
  (results) => {
    const id = 'T11';
    const text = 'RSS over 100 x 10k-row reads: no growth over the last half; peak <= 1.1x better-sqlite3';
    const series = findCase(results, 'mem-reads')?.peers[QS]?.series?.rss;
    if (!series?.length) return pending(id, text, results, 'mem-reads');
    const growth = medianOf(results, 'mem-reads', QS, 'rssGrowth');
    const peak = vsBest(id, text, { caseId: 'mem-reads', metric: 'rssPeak', better: 'lower', unit: 'MB', limit: 1.1, only: 'better-sqlite3' })(results);
    const flat = rssPlateaued(series);
    const met = peak.met === null ? null : flat && peak.met;
    return { id, text, met, ratio: peak.ratio, measured: `growth ${formatValue(growth, 'MB')} (allowed max(4 MB, 3%)); peak ${peak.measured}` };
  },
  lowerVsBest('T12', 'single-row insert, sequential awaits: latency <= 2x best peer', 'insert-100', 'wall', 'ms', 2),
  lowerVsBest('T13', 'interactive transaction (insert, read back, conditional delete) <= 3x best peer', 'tx-interactive', 'wall', 'ms', 3),
  lowerVsBest('T14', '1k tx.execute calls awaited one by one in a transaction <= 2x best peer', 'tx-loop-1k', 'wall', 'ms', 2),
];

export function evaluateTargets(results) {
  return TARGETS.map((t) => t(results));
}

export const targetMark = (met) => (met === true ? 'met' : met === false ? 'NOT met' : 'not measured');
