// Small, dependency-free statistics used by the coordinator, the report and --compare.
// Every function takes plain arrays of numbers and never mutates them.

/** Sorted copy with non-finite values dropped. */
export function sorted(values) {
  return values.filter((v) => Number.isFinite(v)).sort((a, b) => a - b);
}

/** Linear-interpolated quantile (q in [0, 1]) of a sorted array; NaN when empty. */
export function quantileSorted(s, q) {
  if (s.length === 0) return NaN;
  if (s.length === 1) return s[0];
  const pos = (s.length - 1) * Math.min(1, Math.max(0, q));
  const lo = Math.floor(pos);
  const hi = Math.ceil(pos);
  return s[lo] + (s[hi] - s[lo]) * (pos - lo);
}

export function quantile(values, q) {
  return quantileSorted(sorted(values), q);
}

export function median(values) {
  return quantile(values, 0.5);
}

/** Median absolute deviation from the median (unscaled). */
export function mad(values) {
  const m = median(values);
  if (!Number.isFinite(m)) return NaN;
  return median(values.map((v) => Math.abs(v - m)));
}

export function mean(values) {
  const s = sorted(values);
  return s.length ? s.reduce((a, b) => a + b, 0) / s.length : NaN;
}

/**
 * Summary of one metric's samples. `better` says which direction is good: the "p90" we
 * report is the tail on the bad side (90th percentile of a time, 10th of a throughput),
 * so "p90" always reads as "9 samples in 10 were at least this good".
 */
export function summarize(values, better = 'lower') {
  const s = sorted(values);
  return {
    n: s.length,
    median: quantileSorted(s, 0.5),
    p90: quantileSorted(s, better === 'higher' ? 0.1 : 0.9),
    mad: mad(s),
    min: s.length ? s[0] : NaN,
    max: s.length ? s[s.length - 1] : NaN,
  };
}

/**
 * The project's noise rule: a move smaller than max(10% of the old median, 3 x MAD) is
 * noise. We take the larger MAD of the two runs so a noisy run cannot make a move look real.
 */
export function noiseThreshold(oldSummary, newSummary, { rel = 0.1, madFactor = 3 } = {}) {
  const madOld = Number.isFinite(oldSummary.mad) ? oldSummary.mad : 0;
  const madNew = Number.isFinite(newSummary?.mad) ? newSummary.mad : 0;
  return Math.max(rel * Math.abs(oldSummary.median), madFactor * Math.max(madOld, madNew));
}

/**
 * Classify a change between two summaries of the same metric.
 * Returns { delta, rel, threshold, moved, direction: 'better'|'worse'|'noise' }.
 */
export function classifyChange(oldSummary, newSummary, better = 'lower', opts) {
  const delta = newSummary.median - oldSummary.median;
  const rel = oldSummary.median !== 0 ? delta / Math.abs(oldSummary.median) : delta === 0 ? 0 : Infinity;
  const threshold = noiseThreshold(oldSummary, newSummary, opts);
  const moved = Math.abs(delta) > threshold;
  let direction = 'noise';
  if (moved) direction = (delta < 0) === (better === 'lower') ? 'better' : 'worse';
  return { delta, rel, threshold, moved, direction };
}

/** a / b, or NaN when either side is missing or b is zero. */
export function ratio(a, b) {
  if (!Number.isFinite(a) || !Number.isFinite(b) || b === 0) return NaN;
  return a / b;
}
