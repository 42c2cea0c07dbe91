// Unit tests for the benchmark harness's own logic (bench/lib): statistics and the noise
// rule, interleaving, results/targets, report writing and --compare. No database work.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseArgs, resultPaths, dateStamp } from '../bench/lib/args.mjs';
import { hashString, makeRowToucher, makeToucher, prng, seedPlan, ITEMS_ROWS } from '../bench/lib/data.mjs';
import { formatMs, formatRatio, formatValue, mdTable, textTable } from '../bench/lib/format.mjs';
import { chartedPeers, lineChart, niceTicks, renderHtml } from '../bench/lib/html.mjs';
import { cellText, compareResults, parseMarkdownResults, renderCompare, renderMarkdown, renderSummary, toJson } from '../bench/lib/report.mjs';
import { addSample, finalizeCase, newCaseResult, ratioToBaseline, rssGrowth, rssPlateaued } from '../bench/lib/results.mjs';
import { counts, interleave, roundOrder, warmupRound } from '../bench/lib/schedule.mjs';
import { classifyChange, mad, median, noiseThreshold, quantile, summarize } from '../bench/lib/stats.mjs';
import { ALL_CASES, METRICS, PEERS, SUITES, caseById, peerApplies, selectSuites } from '../bench/lib/suites.mjs';
import { evaluateTargets } from '../bench/lib/targets.mjs';
import { README_ROWS, readmeTables, statusOfBoth } from '../bench/lib/readme-tables.mjs';

describe('stats', () => {
  it('median and quantiles', () => {
    assert.equal(median([3, 1, 2]), 2);
    assert.equal(median([4, 1, 3, 2]), 2.5);
    assert.ok(Number.isNaN(median([])));
    assert.equal(quantile([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 0.9), 9.1);
    assert.equal(quantile([5], 0.9), 5);
    assert.equal(median([1, NaN, 3, Infinity, 2]), 2, 'non-finite values are ignored');
  });

  it('MAD is the median absolute deviation', () => {
    assert.equal(mad([1, 1, 2, 2, 4, 6, 9]), 1);
    assert.equal(mad([5, 5, 5]), 0);
  });

  it('p90 is on the bad side of the metric', () => {
    const v = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10];
    assert.equal(summarize(v, 'lower').p90, 9.1);
    assert.equal(summarize(v, 'higher').p90, 1.9);
    const s = summarize(v);
    assert.equal(s.n, 10);
    assert.equal(s.median, 5.5);
    assert.equal(s.min, 1);
    assert.equal(s.max, 10);
  });

  it('noise threshold is max(10% of the old median, 3 x the larger MAD)', () => {
    assert.equal(noiseThreshold({ median: 100, mad: 1 }, { median: 90, mad: 2 }), 10);
    assert.equal(noiseThreshold({ median: 100, mad: 5 }, { median: 90, mad: 2 }), 15);
    assert.equal(noiseThreshold({ median: 100, mad: 1 }, { median: 90, mad: 6 }), 18);
    assert.equal(noiseThreshold({ median: 100, mad: NaN }, { median: 90, mad: null }), 10);
  });

  it('classifies moves by direction and noise', () => {
    const old = { median: 100, mad: 1 };
    assert.equal(classifyChange(old, { median: 95, mad: 1 }, 'lower').direction, 'noise');
    assert.equal(classifyChange(old, { median: 85, mad: 1 }, 'lower').direction, 'better');
    assert.equal(classifyChange(old, { median: 115, mad: 1 }, 'lower').direction, 'worse');
    assert.equal(classifyChange(old, { median: 115, mad: 1 }, 'higher').direction, 'better');
    assert.equal(classifyChange(old, { median: 85, mad: 1 }, 'higher').direction, 'worse');
    // a 20% move inside a wide MAD band is still noise
    assert.equal(classifyChange({ median: 100, mad: 8 }, { median: 120, mad: 8 }, 'lower').direction, 'noise');
    const c = classifyChange(old, { median: 80, mad: 1 }, 'lower');
    assert.equal(c.rel, -0.2);
    assert.equal(c.moved, true);
  });
});

describe('schedule', () => {
  it('alternates direction every round', () => {
    assert.deepEqual(roundOrder(['A', 'B', 'C', 'D'], 0), ['A', 'B', 'C', 'D']);
    assert.deepEqual(roundOrder(['A', 'B', 'C', 'D'], 1), ['D', 'C', 'B', 'A']);
    assert.deepEqual(roundOrder(['A', 'B', 'C', 'D'], 2), ['A', 'B', 'C', 'D']);
  });

  it('interleaves peers, never one peer\'s whole run then the next', () => {
    const plan = interleave(['A', 'B', 'C'], 3, 1);
    assert.equal(plan.map((s) => s.peer).join(''), 'ABCCBAABCCBA');
    assert.deepEqual(plan.filter((s) => s.warm).map((s) => s.index), [-1, -1, -1]);
    assert.deepEqual([...new Set(plan.filter((s) => !s.warm).map((s) => s.index))], [0, 1, 2]);
    // every peer gets the same sample indices (so the same parameters)
    for (const p of ['A', 'B', 'C']) assert.deepEqual(plan.filter((s) => s.peer === p && !s.warm).map((s) => s.index), [0, 1, 2]);
    assert.deepEqual(interleave([], 5, 2), []);
  });

  it('warms every peer up to a count and a minimum amount of work', () => {
    const spent = { A: { n: 0, ms: 0 }, B: { n: 0, ms: 0 } };
    const rule = { minCount: 2, minMs: 100 };
    assert.deepEqual(warmupRound(['A', 'B'], 0, spent, rule), ['A', 'B']);
    assert.deepEqual(warmupRound(['A', 'B'], 1, spent, rule), ['B', 'A']);
    spent.A = { n: 2, ms: 150 }; // done
    spent.B = { n: 2, ms: 40 }; // fast samples: needs more time
    assert.deepEqual(warmupRound(['A', 'B'], 2, spent, rule), ['B']);
    spent.B = { n: 5, ms: 100 };
    assert.deepEqual(warmupRound(['A', 'B'], 3, spent, rule), []);
  });

  it('picks iteration counts per mode', () => {
    assert.deepEqual(counts({ iters: [30, 5], warm: [3, 1] }, false), { iterations: 30, warmup: 3 });
    assert.deepEqual(counts({ iters: [30, 5], warm: [3, 1] }, true), { iterations: 5, warmup: 1 });
    assert.deepEqual(counts({}, false), { iterations: 30, warmup: 3 });
  });

  it('full runs measure at least 30 iterations except multi-second cases', () => {
    const slow = new Set(['batch-10k', 'batch-100k', 'eld-idle', 'eld-10k', 'live-unchanged', 'live-fanout', 'live-keyed', 'mem-reads', 'mem-iterate', 'mem-streams']);
    for (const c of ALL_CASES) if (!slow.has(c.id)) assert.ok(counts(c, false).iterations >= 30, c.id);
  });
});

describe('suites', () => {
  it('has the twelve suites with unique case ids and known metrics', () => {
    assert.deepEqual(SUITES.map((s) => s.n), [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]);
    const ids = ALL_CASES.map((c) => c.id);
    assert.equal(new Set(ids).size, ids.length);
    for (const c of ALL_CASES) for (const m of c.metrics) assert.ok(METRICS[m], `${c.id}: ${m}`);
  });

  it('marks async-only cases n/a for synchronous peers', () => {
    assert.equal(peerApplies(caseById('point-64'), 'better-sqlite3'), false);
    assert.equal(peerApplies(caseById('point-64'), 'sqlite3'), true);
    assert.equal(peerApplies(caseById('point-seq'), 'node:sqlite'), true);
  });

  it('selects suites by number or id', () => {
    assert.deepEqual(selectSuites(['1', 'select', '9']).map((s) => s.n), [1, 2, 9]);
    assert.equal(selectSuites([]).length, 12);
    assert.throws(() => selectSuites(['nope']), /unknown suite/);
  });
});

describe('data', () => {
  it('is deterministic', () => {
    const a = prng(42);
    const b = prng(42);
    for (let i = 0; i < 5; i++) assert.equal(a(), b());
    assert.notEqual(prng(43)(), prng(42)());
    assert.equal(hashString('items'), hashString('items'));
    const first = (seed) => seedPlan(seed)[0].rows().next().value;
    assert.deepEqual(first(42), first(42));
    assert.notDeepEqual(first(42), first(7));
    assert.equal(seedPlan(42)[0].count, ITEMS_ROWS);
    const row = first(42);
    assert.equal(row.length, 5);
    assert.ok(row[1].length >= 80 && row[1].length <= 100, 'description ~90 chars');
  });

  it('touchers read every field', () => {
    const rows = [{ a: 'xy', b: 1, c: null }, { a: 'z', b: 2, c: 3 }];
    assert.equal(makeToucher(['a', 'b', 'c'])(rows), 2 + 1 + 0 + 1 + 1 + 1);
    assert.equal(makeRowToucher(['a', 'b', 'c'])(rows[0]), 3);
    assert.equal(makeRowToucher(['a'])(undefined), 0);
  });
});

describe('format', () => {
  it('formats units compactly', () => {
    assert.equal(formatMs(0.0048), '4.80 µs');
    assert.equal(formatMs(17.12), '17.1 ms');
    assert.equal(formatValue(207_000, 'op/s'), '207k/s');
    assert.equal(formatValue(1_234_000, 'rows/s'), '1.23M rows/s');
    assert.equal(formatValue(NaN, 'ms'), 'n/a');
    assert.equal(formatRatio(0.0184), '0.018x');
    assert.equal(formatRatio(1.5), '1.50x');
    assert.equal(formatRatio(NaN), '');
  });

  it('renders tables', () => {
    assert.equal(mdTable([['a', 'b'], ['1', 'x|y']]), '| a | b |\n|---|---|\n| 1 | x\\|y |');
    assert.equal(textTable([['k', 'v'], ['long', '1']]), 'k     v\n----  -\nlong  1');
  });
});

describe('args', () => {
  it('parses options with defaults', () => {
    const o = parseArgs([]);
    assert.equal(o.quick, false);
    assert.equal(o.label, 'run');
    assert.deepEqual(o.peers, PEERS);
    assert.equal(o.seed, 42);
    const q = parseArgs(['--quick', '--label', 'exp-1', '--suites', '1,2', '--peers', 'sqlite3,quietsqlite', '--compare', 'x.md']);
    assert.equal(q.quick, true);
    assert.equal(q.label, 'exp-1');
    assert.deepEqual(q.suites, ['1', '2']);
    assert.deepEqual(q.peers, ['sqlite3', 'quietsqlite']);
    assert.equal(q.compare, 'x.md');
    assert.deepEqual(o.nodeFlags, []);
    assert.deepEqual(parseArgs(['--node-flags=--min-semi-space-size=16  --expose-gc ']).nodeFlags, ['--min-semi-space-size=16', '--expose-gc']);
  });

  it('rejects bad input', () => {
    assert.throws(() => parseArgs(['--peers', 'mysql']), /unknown peer/);
    assert.throws(() => parseArgs(['--label', '../x']), /label/);
    assert.throws(() => parseArgs(['--bogus']));
    assert.throws(() => parseArgs(['--node-flags', 'max-semi-space-size=16']), /start with "--"/);
  });

  it('names result files by date and label', () => {
    assert.equal(dateStamp(new Date(2025, 0, 5)), '2025-01-05');
    assert.deepEqual(resultPaths('bench/results/', '2025-01-05', 'run'), {
      md: 'bench/results/2025-01-05-run.md',
      json: 'bench/results/2025-01-05-run.json',
      html: 'bench/results/2025-01-05-run.html',
    });
  });
});

// A small fake run: point queries, a 10k select, an async-only case and an RSS series.
function fakeResults({ qsPoint64 = 370_000, qsAvailable = true, scale = 1 } = {}) {
  const peers = {
    'better-sqlite3': { available: true, version: '12', sqlite: '3.5', node: 'v20' },
    'node:sqlite': { available: true, version: 'node v24', sqlite: '3.5', node: 'v24' },
    sqlite3: { available: true, version: '6', sqlite: '3.5', node: 'v20' },
    quietsqlite: qsAvailable ? { available: true, version: '0.1', sqlite: '3.5', node: 'v20' } : { available: false, reason: 'not built' },
  };
  const results = { schema: 1, label: 't', date: '2025-01-01T00:00:00Z', mode: 'quick', seed: 42, durationMs: 1000, env: { cpus: 2, cpuModel: 'cpu', totalMemGB: 24, os: 'linux', node: 'v20' }, peers, cases: [], targets: [] };
  const add = (caseId, perPeer) => {
    const def = caseById(caseId);
    const suite = SUITES.find((s) => s.id === def.suite || s.cases.some((c) => c.id === caseId));
    const cr = newCaseResult(def, suite);
    for (const [peer, val] of Object.entries(perPeer)) {
      if (!peers[peer].available) continue;
      if (val === 'na') {
        cr.peers[peer] = { na: 'synchronous driver' };
        continue;
      }
      for (let i = 0; i < 5; i++) addSample(cr, peer, i, typeof val === 'function' ? val(i) : { metrics: Object.fromEntries(def.metrics.map((m) => [m, val[m] * (1 + (i - 2) * 0.01)])) });
    }
    finalizeCase(cr, def);
    results.cases.push(cr);
  };
  add('point-seq', {
    'better-sqlite3': { qps: 200_000 * scale, wall: 0.005, main: 0.005 },
    'node:sqlite': { qps: 240_000 * scale, wall: 0.0042, main: 0.0042 },
    sqlite3: { qps: 14_000, wall: 0.07, main: 0.05 },
    quietsqlite: { qps: 60_000, wall: 0.017, main: 0.01 },
  });
  add('point-64', { 'better-sqlite3': 'na', 'node:sqlite': 'na', sqlite3: { qps: 60_000, main: 0.03 }, quietsqlite: { qps: qsPoint64, main: 0.004 } });
  add('select-10k', {
    'better-sqlite3': { wall: 20, main: 20, mainTouch: 20.3 },
    'node:sqlite': { wall: 9, main: 9, mainTouch: 13 },
    sqlite3: { wall: 35, main: 25, mainTouch: 25.3 },
    quietsqlite: { wall: 4, main: 2, mainTouch: 3 },
  });
  add('mem-reads', {
    'better-sqlite3': (i) => ({ metrics: {}, series: { rss: Array.from({ length: 10 }, (_, j) => 100 + (i * 10 + j) * 0.5) } }),
    quietsqlite: (i) => ({ metrics: {}, series: { rss: Array.from({ length: 10 }, () => 90 + (i % 2)) } }),
  });
  results.targets = evaluateTargets(results);
  return results;
}

describe('results and targets', () => {
  it('computes ratios to the baseline within the run', () => {
    const r = fakeResults();
    assert.ok(Math.abs(ratioToBaseline(r, 'select-10k', 'quietsqlite', 'wall') - 0.2) < 1e-9);
    assert.ok(Number.isNaN(ratioToBaseline(r, 'point-64', 'quietsqlite', 'qps')), 'no baseline value: no ratio');
  });

  it('derives RSS peak and growth from the concatenated blocks', () => {
    const r = fakeResults();
    const bs3 = r.cases.find((c) => c.id === 'mem-reads').peers['better-sqlite3'];
    assert.equal(bs3.series.rss.length, 50);
    assert.equal(bs3.summary.rssPeak.median, 100 + 49 * 0.5);
    assert.equal(bs3.summary.rssGrowth.median, 12.5);
    assert.deepEqual(rssGrowth([1, 2, 3, 4]), { peak: 4, growth: 2 });
    assert.equal(rssPlateaued([100, 101, 100, 101]), true);
    assert.equal(rssPlateaued([100, 110, 120, 130]), false);
  });

  it('evaluates targets against the best synchronous peer', () => {
    const t = Object.fromEntries(fakeResults().targets.map((x) => [x.id, x]));
    assert.equal(t.T1.met, true); // 370k >= 1.5 x node:sqlite's 240k
    assert.match(t.T1.measured, /node:sqlite/);
    assert.equal(t.T2.met, false); // 60k < 0.6 x 240k
    assert.equal(t.T3.met, true); // 4 / 9 = 0.44
    assert.equal(t.T4.met, true); // 3 / 20.3 and 3 / 13
    assert.equal(t.T11.met, true); // flat, and peak 91 MB <= 1.1 x better-sqlite3's 124.5 MB
    assert.equal(t.T6.met, null, 'json suite not run');
    assert.equal(t.T6.measured, 'suite not run');
    assert.equal(t.T12.met, null, 'writes suite not run');
    const worse = Object.fromEntries(fakeResults({ qsPoint64: 350_000 }).targets.map((x) => [x.id, x]));
    assert.equal(worse.T1.met, false);
  });

  it('reports targets as not measured when quietsqlite is unavailable', () => {
    const t = fakeResults({ qsAvailable: false }).targets;
    assert.ok(t.every((x) => x.met === null));
    assert.match(t[0].measured, /unavailable/);
  });
});

describe('report', () => {
  it('writes n/a (never 0) for missing capabilities and unavailable peers', () => {
    const md = renderMarkdown(fakeResults({ qsAvailable: false }));
    const row = md.split('\n').find((l) => l.startsWith('| 64 in flight | throughput'));
    assert.ok(row, 'row for point-64');
    const cells = row.split('|').map((s) => s.trim());
    assert.equal(cells[3], 'n/a'); // better-sqlite3
    assert.equal(cells[4], 'n/a'); // node:sqlite
    assert.equal(cells[6], 'n/a'); // quietsqlite (unavailable)
    assert.doesNotMatch(row, /\| 0 \|/);
    assert.match(md, /unavailable: not built/);
    assert.match(md, /## Targets/);
    assert.match(renderSummary(fakeResults()), /Targets/);
  });

  it('shows peers skipped in --quick as "skipped", not n/a or 0', () => {
    const r = fakeResults();
    const c = r.cases.find((x) => x.id === 'point-64');
    c.peers.sqlite3 = { na: 'in --quick', skipped: true };
    assert.equal(cellText(r, c, 'sqlite3', 'qps'), 'skipped');
    assert.equal(cellText(r, c, 'better-sqlite3', 'qps'), 'n/a');
    assert.match(renderMarkdown(r), /sqlite3: skipped \(in --quick\): point-64/);
  });

  it('shows medians with ratios to better-sqlite3', () => {
    const md = renderMarkdown(fakeResults());
    const row = md.split('\n').find((l) => l.startsWith('| 10,000 rows | wall'));
    assert.match(row, /20\.0 ms/);
    assert.match(row, /4\.00 ms · 0\.20x/);
  });

  it('round-trips the raw table for --compare on a .md', () => {
    const r = fakeResults();
    const parsed = parseMarkdownResults(renderMarkdown(r));
    const orig = r.cases.find((c) => c.id === 'select-10k').peers.quietsqlite.summary.wall;
    const back = parsed.cases.find((c) => c.id === 'select-10k').peers.quietsqlite.summary.wall;
    assert.ok(Math.abs(back.median - orig.median) < 1e-9);
    assert.ok(Math.abs(back.mad - orig.mad) < 1e-9);
    assert.equal(back.n, 5);
    assert.equal(parsed.cases.find((c) => c.id === 'point-64').baseline, 'better-sqlite3');
    assert.throws(() => parseMarkdownResults('# nothing'), /raw results/);
  });

  it('compare flags only moves beyond noise', () => {
    const older = JSON.parse(toJson(fakeResults()));
    const same = compareResults(older, fakeResults());
    assert.ok(same.length > 0);
    assert.ok(same.every((c) => !c.change.moved), 'identical runs: nothing moved');
    assert.match(renderCompare(same, { oldName: 'a', newName: 'b' }), /nothing moved/);

    const faster = compareResults(older, fakeResults({ scale: 1.5 }));
    const moved = faster.filter((c) => c.change.moved);
    assert.deepEqual(moved.map((c) => `${c.caseId}/${c.metric}/${c.peer}/${c.change.direction}`).sort(), [
      'point-seq/qps/better-sqlite3/better',
      'point-seq/qps/node:sqlite/better',
    ]);
    const text = renderCompare(faster, { oldName: 'a.md', newName: 'b.md' });
    assert.match(text, /\+50\.0%/);
    assert.match(text, /2 of \d+ numbers moved/);

    const gone = compareResults(older, fakeResults({ qsAvailable: false }));
    assert.ok(gone.some((c) => c.peer === 'quietsqlite' && c.change.direction === 'disappeared'));
  });

  it('JSON has no NaN/Infinity', () => {
    const text = toJson({ a: NaN, b: Infinity, c: 1 });
    assert.deepEqual(JSON.parse(text), { a: null, b: null, c: 1 });
  });
});

describe('html dashboard', () => {
  it('is self-contained with one chart per suite', () => {
    const html = renderHtml(fakeResults());
    assert.match(html, /^<!doctype html>/);
    assert.doesNotMatch(html, /<script/i);
    assert.doesNotMatch(html, /(src|href)=["']?https?:/i);
    assert.equal((html.match(/<h2 id="suite-\d+">/g) ?? []).length, 3, 'suites 1, 2 and 10 were run');
    assert.ok((html.match(/<svg/g) ?? []).length >= 4, 'bars per suite plus the RSS line chart');
    assert.match(html, /n\/a · better-sqlite3/);
  });

  it('leaves peers without any value in a suite out of its chart', () => {
    const r = fakeResults();
    const suite = SUITES.find((s) => s.id === 'memory');
    assert.deepEqual(chartedPeers(r, suite, PEERS), ['better-sqlite3', 'quietsqlite']);
    assert.match(renderHtml(r), /n\/a in this suite: node:sqlite \(not run\), sqlite3 \(not run\)/);
  });

  it('draws line charts and nice ticks', () => {
    assert.deepEqual(niceTicks(10), [0, 2, 4, 6, 8, 10]);
    assert.deepEqual(niceTicks(0.9, 3), [0, 0.5, 1]);
    const svg = lineChart({ series: [{ name: 'quietsqlite', points: [[0, 1], [50, 2]] }], xLabel: 'x', yLabel: 'y' });
    assert.match(svg, /<path d="M/);
    assert.equal(lineChart({ series: [], xLabel: 'x', yLabel: 'y' }), '');
  });
});

describe('README tables', () => {
  // Two reports holding every README row's case, quietsqlite's value being `k` in run 1 and
  // `2k` in run 2; better-sqlite3 has a value only for point-seq.
  function report(scale, targets) {
    const cases = [...new Set(README_ROWS.map((r) => r[1]))].map((id) => ({
      id,
      peers: {
        quietsqlite: { summary: Object.fromEntries(README_ROWS.filter((r) => r[1] === id).map((r) => [r[2], { median: scale }])) },
        'better-sqlite3': id === 'point-seq' ? { summary: { qps: { median: 1000 * scale } } } : { na: 'synchronous driver' },
      },
    }));
    return { cases, targets };
  }
  const t = (id, met) => ({ id, text: `target ${id}`, met, measured: `${id} measured` });

  it('shows run 1 and run 2 side by side, n/a where a peer has no value', () => {
    const out = readmeTables([report(1, [t('T1', true)]), report(2, [t('T1', true)])]).split('\n');
    assert.equal(out[2], '| point query, sequential | 1.00k/s (2.00k/s) | n/a | n/a | 1.00/s (2.00/s) |');
    assert.match(out.find((l) => l.startsWith('| 10k-row select, wall |')), /\| n\/a \| n\/a \| n\/a \| 1\.00 ms \(2\.00 ms\) \|$/);
    assert.match(out.find((l) => l.includes('inlineReads')), /^\| [^|]+ \| n\/a \| n\/a \| n\/a \| 1\.00\/s \(2\.00\/s\) \|$/);
  });

  it('names a target met in one run or in neither, and a report without a case is an error', () => {
    const out = readmeTables([
      report(1, [t('T1', true), t('T2', false), t('T3', false), t('T4', null)]),
      report(2, [t('T1', false), t('T2', true), t('T3', false), t('T4', null)]),
    ]);
    assert.match(out, /\| T1 \| target T1 \| T1 measured \| T1 measured \| met in one run \|/);
    assert.match(out, /\| T2 \| .* \| met in one run \|/);
    assert.match(out, /\| T3 \| .* \| NOT met \|/);
    assert.match(out, /\| T4 \| .* \| not measured \|/);
    assert.equal(statusOfBoth(true, true), 'met');
    const broken = report(1, []);
    broken.cases = broken.cases.filter((c) => c.id !== 'eld-10k');
    assert.throws(() => readmeTables([broken, report(2, [])]), /case eld-10k is not in the report/);
  });
});
