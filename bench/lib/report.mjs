// Reports: Markdown file, terminal summary, machine-readable JSON, and --compare.
import { existsSync, readFileSync } from 'node:fs';
import { classifyChange, ratio } from './stats.mjs';
import { formatDuration, formatPct, formatRatio, formatValue, mdTable, textTable } from './format.mjs';
import { cellState, findCase, ratioToBaseline } from './results.mjs';
import { METRICS, PEERS, SUITES } from './suites.mjs';
import { targetMark } from './targets.mjs';

const arrow = (k) => (METRICS[k].better === 'higher' ? '↑' : '↓');
const metricLabel = (k) => `${METRICS[k].label} ${arrow(k)}`;

/** Peers in display order: the known four first, then anything else in the results. */
export function peerOrder(results) {
  const names = Object.keys(results.peers ?? {});
  return [...PEERS.filter((p) => names.includes(p)), ...names.filter((p) => !PEERS.includes(p))];
}

/** One table cell: "17.1 ms · 0.52x", "n/a", "error". */
export function cellText(results, c, peer, metric, { ratioShown = true } = {}) {
  const st = cellState(c, peer, metric);
  if (st.state === 'na') return 'n/a';
  if (st.state === 'skipped') return 'skipped';
  if (st.state === 'error') return 'error';
  if (st.state === 'missing') return results.peers?.[peer]?.available === false ? 'n/a' : '–';
  const v = formatValue(st.summary.median, METRICS[metric].unit);
  if (!ratioShown || peer === c.baseline || METRICS[metric].unit === 'count') return v;
  const r = ratioToBaseline(results, c.id, peer, metric);
  return Number.isFinite(r) ? `${v} · ${formatRatio(r)}` : v;
}

function suiteRows(results, suite, peers) {
  const rows = [['case', 'metric', ...peers]];
  for (const def of suite.cases) {
    const c = findCase(results, def.id);
    if (!c) continue;
    for (const m of c.metrics) rows.push([c.label, metricLabel(m), ...peers.map((p) => cellText(results, c, p, m))]);
  }
  return rows;
}

function ranSuites(results) {
  return SUITES.filter((s) => s.cases.some((d) => findCase(results, d.id)));
}

/** The Markdown report. */
export function renderMarkdown(results) {
  const peers = peerOrder(results);
  const out = [];
  out.push(`# quietsqlite benchmark — ${results.label}`);
  out.push('');
  out.push(`${results.date} · ${results.mode} run · ${formatDuration(results.durationMs)} · seed ${results.seed}`);
  out.push('');
  const e = results.env ?? {};
  const addon = e.addonBytes == null ? '' : ` quietsqlite addon: ${(e.addonBytes / 1e6).toFixed(2)} MB (native/quietsqlite.node, unstripped).`;
  const flags = e.nodeFlags?.length ? ` Worker flags: \`${e.nodeFlags.join(' ')}\`.` : '';
  out.push(`Machine: ${e.cpus} x ${e.cpuModel}, ${e.totalMemGB} GB RAM, ${e.os}. Coordinator ${e.node}.${addon}${flags}`);
  out.push('');
  out.push(mdTable([
    ['peer', 'version', 'SQLite', 'Node', 'pragmas', 'status'],
    ...peers.map((p) => {
      const i = results.peers[p];
      const pr = i.pragmas ? `journal_mode=${i.pragmas.journal_mode}, synchronous=${i.pragmas.synchronous}` : '';
      return [p, i.version ?? '', i.sqlite ?? '', i.node ?? '', pr, i.available ? 'ok' : `unavailable: ${i.reason}`];
    }),
  ]));
  out.push('');
  out.push('Cells show the median and its ratio to better-sqlite3 (live queries: to the naive sqlite3 baseline) from this run; ↓ lower is better, ↑ higher is better. "n/a": the peer lacks the capability. p90 and MAD are in the raw table at the end. Times are per operation unless the case says otherwise.');
  out.push('');
  if (results.targets?.length) {
    out.push('## Targets (quietsqlite)');
    out.push('');
    out.push(mdTable([['target', 'goal', 'measured', 'status'], ...results.targets.map((t) => [t.id, t.text, t.measured, targetMark(t.met)])]));
    out.push('');
  }
  for (const suite of ranSuites(results)) {
    out.push(`## ${suite.n}. ${suite.title}`);
    out.push('');
    out.push(suite.about);
    out.push('');
    out.push(mdTable(suiteRows(results, suite, peers)));
    out.push('');
  }
  // Errors one by one; n/a grouped by peer and reason.
  const problems = [];
  const na = new Map();
  for (const c of results.cases) {
    for (const [p, pc] of Object.entries(c.peers)) {
      if (pc.error) problems.push(`- ${c.id} / ${p}: error: ${firstLine(pc.error)}`);
      else if (pc.na) {
        const key = pc.skipped ? `${p}: skipped (${pc.na})` : `${p}: n/a (${pc.na})`;
        na.set(key, [...(na.get(key) ?? []), c.id]);
      }
    }
  }
  for (const [key, ids] of na) problems.push(`- ${key}: ${ids.join(', ')}`);
  for (const p of peers) if (results.peers[p].available === false) problems.push(`- ${p}: unavailable (${results.peers[p].reason})`);
  if (problems.length) {
    out.push('## Not measured');
    out.push('');
    out.push(...problems);
    out.push('');
  }
  out.push('## Raw results');
  out.push('');
  out.push('Machine-readable (also in the .json beside this file); used by `--compare`.');
  out.push('');
  out.push(mdTable(rawRows(results)));
  out.push('');
  return out.join('\n');
}

const firstLine = (s) => String(s).split('\n')[0];

const RAW_HEADER = ['case', 'metric', 'peer', 'unit', 'median', 'p90', 'mad', 'n'];
function rawRows(results) {
  const rows = [RAW_HEADER];
  for (const c of results.cases) {
    for (const m of c.metrics) {
      for (const p of peerOrder(results)) {
        const s = c.peers[p]?.summary?.[m];
        if (s) rows.push([c.id, m, p, METRICS[m].unit, num(s.median), num(s.p90), num(s.mad), s.n]);
      }
    }
  }
  return rows;
}
const num = (v) => (Number.isFinite(v) ? Number(v.toPrecision(6)) : '');

/** Rebuild a minimal results object from a report's raw table (for --compare on a .md). */
export function parseMarkdownResults(md) {
  const lines = md.split('\n');
  const start = lines.findIndex((l) => /^\|\s*case\s*\|\s*metric\s*\|\s*peer\s*\|/.test(l));
  if (start < 0) throw new Error('no raw results table found in the Markdown report');
  const results = { cases: [], peers: {} };
  for (const line of lines.slice(start + 2)) {
    if (!line.startsWith('|')) break;
    const [caseId, metric, peer, , medianS, p90S, madS, nS] = line.split('|').slice(1, -1).map((s) => s.trim());
    let c = results.cases.find((x) => x.id === caseId);
    if (!c) results.cases.push((c = { id: caseId, metrics: [], peers: {}, baseline: baselineOf(caseId) }));
    if (!c.metrics.includes(metric)) c.metrics.push(metric);
    results.peers[peer] ??= { available: true };
    const pc = (c.peers[peer] ??= { summary: {} });
    pc.summary[metric] = { median: Number(medianS), p90: Number(p90S), mad: madS === '' ? NaN : Number(madS), n: Number(nS) };
  }
  return results;
}

function baselineOf(caseId) {
  for (const s of SUITES) for (const c of s.cases) if (c.id === caseId) return c.baseline ?? s.baseline ?? 'better-sqlite3';
  return 'better-sqlite3';
}

/** Terminal summary: one compact table per suite, then the targets. */
export function renderSummary(results) {
  const peers = peerOrder(results);
  const out = [];
  for (const suite of ranSuites(results)) {
    out.push('');
    out.push(`${suite.n}. ${suite.title}`);
    out.push(textTable(suiteRows(results, suite, peers), 2));
  }
  if (results.targets?.length) {
    out.push('');
    out.push('Targets (quietsqlite)');
    out.push(textTable([['target', 'status', 'measured', 'goal'], ...results.targets.map((t) => [t.id, targetMark(t.met), t.measured, t.text])], 4));
  }
  return out.join('\n');
}

/** One line per peer for a finished case, for live progress output. */
export function caseLine(results, c) {
  const m = c.metrics[0];
  const parts = peerOrder(results).map((p) => `${p} ${cellText(results, c, p, m)}`);
  return `  ${c.id} ${METRICS[m].label}: ${parts.join(' | ')}`;
}

/**
 * Compare two results objects. Returns [{ caseId, metric, peer, unit, old, new, change,
 * oldRatio, newRatio }] for every metric measured in both, classified by the noise rule,
 * plus entries whose availability changed (a value appearing or disappearing).
 */
export function compareResults(older, newer) {
  const changes = [];
  for (const c of newer.cases) {
    const o = older.cases.find((x) => x.id === c.id);
    if (!o) continue;
    for (const metric of c.metrics) {
      const better = METRICS[metric]?.better ?? 'lower';
      const peers = new Set([...Object.keys(c.peers), ...Object.keys(o.peers)]);
      for (const peer of peers) {
        const a = o.peers[peer]?.summary?.[metric];
        const b = c.peers[peer]?.summary?.[metric];
        if (!a && !b) continue;
        const entry = { caseId: c.id, metric, peer, unit: METRICS[metric]?.unit };
        if (!a || !b) {
          changes.push({ ...entry, old: a, new: b, change: { direction: b ? 'appeared' : 'disappeared', moved: true } });
          continue;
        }
        const oBase = o.peers[o.baseline]?.summary?.[metric]?.median;
        const nBase = c.peers[c.baseline]?.summary?.[metric]?.median;
        changes.push({ ...entry, old: a, new: b, change: classifyChange(a, b, better), oldRatio: ratio(a.median, oBase), newRatio: ratio(b.median, nBase) });
      }
    }
  }
  return changes;
}

export function renderCompare(changes, { oldName, newName }) {
  const moved = changes.filter((c) => c.change.moved);
  const out = [`Compared with ${oldName} (noise: a move under max(10%, 3x MAD) is ignored):`];
  if (!moved.length) {
    out.push(`  nothing moved beyond noise (${changes.length} numbers compared)`);
    return out.join('\n');
  }
  const rows = [['case', 'metric', 'peer', 'before', 'after', 'change', 'noise band', 'verdict', 'vs baseline']];
  moved.sort((a, b) => Math.abs(b.change.rel ?? 0) - Math.abs(a.change.rel ?? 0));
  for (const m of moved) {
    if (!m.old || !m.new) {
      rows.push([m.caseId, m.metric, m.peer, m.old ? formatValue(m.old.median, m.unit) : 'n/a', m.new ? formatValue(m.new.median, m.unit) : 'n/a', '', '', m.change.direction, '']);
      continue;
    }
    const band = m.change.threshold / Math.abs(m.old.median || 1);
    const vs = Number.isFinite(m.oldRatio) && Number.isFinite(m.newRatio) && m.peer !== baselineOf(m.caseId) ? `${formatRatio(m.oldRatio)} -> ${formatRatio(m.newRatio)}` : '';
    rows.push([m.caseId, m.metric, m.peer, formatValue(m.old.median, m.unit), formatValue(m.new.median, m.unit), formatPct(m.change.rel), `±${(band * 100).toFixed(0)}%`, m.change.direction, vs]);
  }
  out.push(textTable(rows, 3));
  out.push(`  ${moved.length} of ${changes.length} numbers moved beyond noise (${newName}). A win counts only if it reproduces in a second run.`);
  return out.join('\n');
}

/** Results as JSON, without bulky per-sample arrays beyond what --compare and charts need. */
export function toJson(results) {
  return JSON.stringify(results, (k, v) => (typeof v === 'number' && !Number.isFinite(v) ? null : v), 1);
}

/** Load an older result for --compare: a .json, or a .md (its .json sibling if present). */
export function loadResultsFile(path) {
  if (path.endsWith('.json')) return JSON.parse(readFileSync(path, 'utf8'));
  const sibling = path.replace(/\.md$/, '.json');
  if (sibling !== path && existsSync(sibling)) return JSON.parse(readFileSync(sibling, 'utf8'));
  return parseMarkdownResults(readFileSync(path, 'utf8'));
}
