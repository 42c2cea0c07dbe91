// The results model: raw samples in, summaries and ratios out. Pure functions, no I/O.
//
// results = {
//   schema: 1, label, date, mode, seed, durationMs, env, peers: { [peer]: info },
//   cases: [{ id, suite, label, metrics: [key], baseline, peers: { [peer]: PeerCase } }],
//   targets: [...]
// }
// PeerCase = { na?: reason, skipped?: true } | { error?: message, samples: { [metric]: number[] },
//              summary: { [metric]: { n, median, p90, mad, min, max } }, series?: {...} }
import { median, ratio, summarize } from './stats.mjs';
import { BASELINE, METRICS } from './suites.mjs';

export const RESULTS_SCHEMA = 1;

/** Empty per-case record for the coordinator to fill. */
export function newCaseResult(def, suite) {
  return { id: def.id, suite: suite.id, label: def.label, metrics: def.metrics, baseline: def.baseline ?? suite.baseline ?? BASELINE, peers: {} };
}

/** Append one sample ({ metrics, series }) for a peer. */
export function addSample(caseResult, peer, index, sample) {
  const pc = (caseResult.peers[peer] ??= { samples: {}, blocks: [] });
  for (const [k, v] of Object.entries(sample.metrics ?? {})) (pc.samples[k] ??= []).push(v);
  if (sample.series) pc.blocks.push({ index, series: sample.series });
}

/**
 * Turn blocks and samples into summaries. `finalize: 'rss'` cases concatenate their RSS
 * blocks in round order and derive peak and growth (second half's peak minus the first's).
 * Other series (event-loop timeline) keep the first measured block.
 */
export function finalizeCase(caseResult, def) {
  for (const pc of Object.values(caseResult.peers)) {
    if (pc.na) continue;
    const blocks = (pc.blocks ?? []).sort((a, b) => a.index - b.index);
    delete pc.blocks;
    if (def.finalize === 'rss') {
      const rss = blocks.flatMap((b) => b.series.rss ?? []);
      if (rss.length) {
        pc.series = { rss };
        const { peak, growth } = rssGrowth(rss);
        pc.samples.rssPeak = [peak];
        pc.samples.rssGrowth = [growth];
      }
    } else if (blocks.length) {
      pc.series = blocks[0].series;
    }
    pc.summary = {};
    for (const k of def.metrics) {
      if (pc.samples[k]?.length) pc.summary[k] = summarize(pc.samples[k], METRICS[k].better);
    }
  }
  return caseResult;
}

/** Peak RSS and growth: max of the second half minus max of the first half. */
export function rssGrowth(series) {
  const half = Math.floor(series.length / 2);
  const max = (a) => a.reduce((m, v) => Math.max(m, v), -Infinity);
  return { peak: max(series), growth: series.length >= 2 ? max(series.slice(half)) - max(series.slice(0, half)) : 0 };
}

/** RSS has plateaued when the second half grew by at most max(4 MB, 3% of the peak). */
export function rssPlateaued(series) {
  const { peak, growth } = rssGrowth(series);
  return growth <= Math.max(4, 0.03 * peak);
}

export function findCase(results, caseId) {
  return results.cases.find((c) => c.id === caseId);
}

/** The summary of one metric for one peer, or undefined (n/a, error, not run). */
export function summaryOf(results, caseId, peer, metric) {
  return findCase(results, caseId)?.peers[peer]?.summary?.[metric];
}

export function medianOf(results, caseId, peer, metric) {
  return summaryOf(results, caseId, peer, metric)?.median;
}

/**
 * Ratio of a peer's median to the case baseline's median for the same metric; NaN when
 * either is missing, the metric takes no ratio, or the baseline is not positive.
 */
export function ratioToBaseline(results, caseId, peer, metric) {
  const c = findCase(results, caseId);
  const m = METRICS[metric];
  if (!c || m?.noRatio || m?.unit === 'count') return NaN;
  const base = medianOf(results, caseId, c.baseline, metric);
  return base > 0 ? ratio(medianOf(results, caseId, peer, metric), base) : NaN;
}

/** Cell state for a peer in a case: 'value' | 'na' | 'skipped' | 'error' | 'missing'. */
export function cellState(caseResult, peer, metric) {
  const pc = caseResult.peers[peer];
  if (!pc) return { state: 'missing' };
  if (pc.skipped) return { state: 'skipped', reason: pc.na };
  if (pc.na) return { state: 'na', reason: pc.na };
  const s = pc.summary?.[metric];
  if (s) return { state: 'value', summary: s, error: pc.error };
  if (pc.error) return { state: 'error', reason: pc.error };
  return { state: 'missing' };
}

/** Median of a list (re-exported for targets' convenience). */
export { median };
