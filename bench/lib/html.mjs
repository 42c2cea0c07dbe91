// Self-contained HTML dashboard: inline CSS and SVG only (no scripts, no network), so it
// opens offline and can be attached to an issue as one file.
import { formatDuration, formatRatio, formatValue } from './format.mjs';
import { cellState, findCase, ratioToBaseline } from './results.mjs';
import { METRICS, SUITES } from './suites.mjs';
import { peerOrder } from './report.mjs';
import { targetMark } from './targets.mjs';

export const PEER_COLORS = {
  'better-sqlite3': '#4e79a7',
  'node:sqlite': '#59a14f',
  sqlite3: '#9c755f',
  quietsqlite: '#e15759',
};
const colorOf = (p) => PEER_COLORS[p] ?? '#888';

const esc = (s) => String(s ?? '').replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]);

/**
 * Grouped horizontal bars: one group per case x metric, one bar per peer. Each group is
 * scaled to its own largest value (units differ between groups); the thin line is the p90.
 */
export function barChart(results, suite, peers) {
  const W = 1100;
  const labelW = 330;
  const plotW = 520;
  const barH = 15;
  const gap = 3;
  const groupGap = 14;
  const groups = [];
  for (const def of suite.cases) {
    const c = findCase(results, def.id);
    if (!c) continue;
    for (const m of c.metrics) groups.push({ c, m });
  }
  const groupH = Math.max(peers.length * (barH + gap) - gap, 44);
  const H = groups.length * (groupH + groupGap) + 10;
  const parts = [`<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" role="img" aria-label="${esc(suite.title)}">`];
  let y = 6;
  for (const { c, m } of groups) {
    const unit = METRICS[m].unit;
    const cells = peers.map((p) => cellState(c, p, m));
    const max = Math.max(1e-12, ...cells.filter((s) => s.state === 'value').map((s) => Math.max(s.summary.median, Number.isFinite(s.summary.p90) ? s.summary.p90 : 0)));
    // Case label (wrapped to the label column) and the metric under it.
    const lines = wrap(c.label, 44);
    const top = y + groupH / 2 - (lines.length * 14 + 12) / 2 + 11;
    lines.forEach((l, k) => parts.push(`<text x="0" y="${top + k * 14}" class="g">${esc(l)}</text>`));
    parts.push(`<text x="0" y="${top + lines.length * 14}" class="m">${esc(METRICS[m].label)} ${METRICS[m].better === 'higher' ? '↑ higher is better' : '↓ lower is better'}</text>`);
    peers.forEach((p, i) => {
      const by = y + i * (barH + gap);
      const st = cells[i];
      if (st.state !== 'value') {
        const txt = st.state === 'error' ? 'error' : st.state === 'skipped' ? 'skipped' : 'n/a';
        parts.push(`<text x="${labelW + 4}" y="${by + barH - 3}" class="na"><title>${esc(st.reason ?? '')}</title>${txt} · ${esc(p)}</text>`);
        return;
      }
      const v = st.summary.median;
      const w = Math.max(1, (Math.max(0, v) / max) * plotW);
      parts.push(`<rect x="${labelW}" y="${by}" width="${w.toFixed(1)}" height="${barH}" fill="${colorOf(p)}" rx="2"><title>${esc(p)}: median ${esc(formatValue(v, unit))}, p90 ${esc(formatValue(st.summary.p90, unit))}, MAD ${esc(formatValue(st.summary.mad, unit))}, n=${st.summary.n}</title></rect>`);
      if (Number.isFinite(st.summary.p90) && st.summary.n > 1) {
        const px = labelW + (Math.max(0, st.summary.p90) / max) * plotW;
        const x0 = labelW + w;
        parts.push(`<line x1="${x0.toFixed(1)}" x2="${px.toFixed(1)}" y1="${by + barH / 2}" y2="${by + barH / 2}" class="p90"/><line x1="${px.toFixed(1)}" x2="${px.toFixed(1)}" y1="${by + 3}" y2="${by + barH - 3}" class="p90"/>`);
      }
      const r = unit === 'count' || METRICS[m].noRatio ? '' : p === c.baseline ? 'baseline' : formatRatio(ratioToBaseline(results, c.id, p, m));
      parts.push(`<text x="${labelW + plotW + 8}" y="${by + barH - 3}" class="v">${esc(formatValue(v, unit))}${r ? ` · ${esc(r)}` : ''}</text>`);
    });
    y += groupH + groupGap;
  }
  parts.push('</svg>');
  return parts.join('');
}

/** Greedy word wrap. */
function wrap(text, width) {
  const out = [''];
  for (const word of String(text).split(' ')) {
    const cur = out[out.length - 1];
    if (cur && cur.length + 1 + word.length > width) out.push(word);
    else out[out.length - 1] = cur ? `${cur} ${word}` : word;
  }
  return out;
}

/** Peers with at least one value in the suite (the rest are listed once, not charted). */
export function chartedPeers(results, suite, peers) {
  const cases = suite.cases.map((d) => findCase(results, d.id)).filter(Boolean);
  return peers.filter((p) => cases.some((c) => c.peers[p]?.summary && Object.keys(c.peers[p].summary).length));
}

/** "Nice" axis ticks covering [0, max]. */
export function niceTicks(max, count = 5) {
  if (!(max > 0)) return [0, 1];
  const raw = max / count;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 2.5, 5, 10].map((f) => f * mag).find((s) => s >= raw);
  const ticks = [];
  for (let v = 0; v <= max + step * 0.999; v += step) ticks.push(Number(v.toPrecision(12)));
  return ticks;
}

/** Line chart from zero: series = [{ name, points: [[x, y]] }]. */
export function lineChart({ series, xLabel, yLabel, width = 1100, height = 280 }) {
  const padL = 60;
  const padR = 170;
  const padT = 12;
  const padB = 40;
  const pw = width - padL - padR;
  const ph = height - padT - padB;
  const all = series.flatMap((s) => s.points);
  if (!all.length) return '';
  const yTicks = niceTicks(Math.max(...all.map((p) => p[1])));
  const xTicks = niceTicks(Math.max(...all.map((p) => p[0])));
  const yMax = yTicks[yTicks.length - 1] || 1;
  const xMax = xTicks[xTicks.length - 1] || 1;
  const xs = (x) => padL + (x / xMax) * pw;
  const ys = (y) => padT + ph - (y / yMax) * ph;
  const parts = [`<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" role="img" aria-label="${esc(yLabel)}">`];
  for (const v of yTicks) {
    parts.push(`<line x1="${padL}" x2="${padL + pw}" y1="${ys(v).toFixed(1)}" y2="${ys(v).toFixed(1)}" class="grid"/><text x="${padL - 6}" y="${(ys(v) + 4).toFixed(1)}" class="ax" text-anchor="end">${esc(v)}</text>`);
  }
  for (const t of xTicks) parts.push(`<text x="${xs(t).toFixed(1)}" y="${padT + ph + 16}" class="ax" text-anchor="middle">${esc(t)}</text>`);
  parts.push(`<text x="${padL + pw / 2}" y="${height - 4}" class="ax" text-anchor="middle">${esc(xLabel)}</text>`);
  parts.push(`<text x="14" y="${padT + ph / 2}" class="ax" text-anchor="middle" transform="rotate(-90 14 ${padT + ph / 2})">${esc(yLabel)}</text>`);
  series.forEach((s, i) => {
    const d = s.points.map((p, j) => `${j ? 'L' : 'M'}${xs(p[0]).toFixed(1)},${ys(p[1]).toFixed(1)}`).join('');
    parts.push(`<path d="${d}" fill="none" stroke="${colorOf(s.name)}" stroke-width="1.8"/>`);
    parts.push(`<rect x="${padL + pw + 16}" y="${padT + i * 20}" width="12" height="12" fill="${colorOf(s.name)}"/><text x="${padL + pw + 34}" y="${padT + i * 20 + 11}" class="v">${esc(s.name)}</text>`);
  });
  parts.push('</svg>');
  return parts.join('');
}

function seriesFor(results, caseId, key, peers, toPoints) {
  const c = findCase(results, caseId);
  if (!c) return [];
  return peers.filter((p) => c.peers[p]?.series?.[key]?.length).map((p) => ({ name: p, points: toPoints(c.peers[p].series[key]) }));
}

const CSS = `
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:24px auto;max-width:1140px;color:#222;background:#fafafa}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 6px;border-bottom:1px solid #ddd;padding-bottom:4px}
.sub{color:#555}.card{background:#fff;border:1px solid #e3e3e3;border-radius:6px;padding:12px 16px;margin:12px 0}
table{border-collapse:collapse;font-size:13px}td,th{border-bottom:1px solid #eee;padding:4px 10px;text-align:left;vertical-align:top}
th{background:#f3f3f3}.met,.notmet,.pending{white-space:nowrap;border-radius:3px;padding:1px 6px}.met{color:#fff;background:#2e7d32}.notmet{color:#fff;background:#c62828}
.pending{color:#555;background:#e0e0e0}.legend span{display:inline-block;margin-right:16px}
.sw{display:inline-block;width:12px;height:12px;border-radius:2px;vertical-align:-1px;margin-right:5px}
svg text{font:12px system-ui,sans-serif;fill:#222}svg .g{font-weight:600}svg .m{fill:#666;font-size:11px}svg .v{fill:#333}
svg .na{fill:#999;font-style:italic}svg .p90{stroke:#222;stroke-width:1;opacity:.6}svg .grid{stroke:#eee}svg .ax{fill:#666;font-size:11px}
.about{color:#444;margin:2px 0 8px}code{background:#f0f0f0;padding:0 3px;border-radius:3px}small{color:#666}
`;

/** The whole dashboard page. */
export function renderHtml(results) {
  const peers = peerOrder(results);
  const e = results.env ?? {};
  const out = [];
  out.push(`<!doctype html><html lang="en"><head><meta charset="utf-8"><title>quietsqlite benchmark — ${esc(results.label)}</title><style>${CSS}</style></head><body>`);
  out.push(`<h1>quietsqlite benchmark — ${esc(results.label)}</h1>`);
  out.push(`<div class="sub">${esc(results.date)} · ${esc(results.mode)} run · ${esc(formatDuration(results.durationMs))} · seed ${esc(results.seed)} · ${esc(e.cpus)} x ${esc(e.cpuModel)}, ${esc(e.os)}</div>`);
  out.push('<div class="card legend">');
  for (const p of peers) {
    const i = results.peers[p];
    out.push(`<span><span class="sw" style="background:${colorOf(p)}"></span><b>${esc(p)}</b> ${esc(i.version ?? '')} <small>SQLite ${esc(i.sqlite ?? '?')}, ${esc(i.node ?? '')}${i.available ? '' : ` — unavailable: ${esc(i.reason)}`}</small></span>`);
  }
  out.push('<div><small>Bars are medians (each group scaled to its own largest value); the thin line reaches the p90. Labels: median · ratio to better-sqlite3 measured in this run (live queries: to the naive sqlite3 baseline). "n/a": the peer lacks the capability.</small></div></div>');
  if (results.targets?.length) {
    out.push('<h2>Targets (quietsqlite)</h2><div class="card"><table><tr><th>target</th><th>status</th><th>measured</th><th>goal</th></tr>');
    for (const t of results.targets) {
      const cls = t.met === true ? 'met' : t.met === false ? 'notmet' : 'pending';
      out.push(`<tr><td>${esc(t.id)}</td><td><span class="${cls}">${esc(targetMark(t.met))}</span></td><td>${esc(t.measured)}</td><td>${esc(t.text)}</td></tr>`);
    }
    out.push('</table></div>');
  }
  for (const suite of SUITES) {
    if (!suite.cases.some((d) => findCase(results, d.id))) continue;
    out.push(`<h2 id="suite-${suite.n}">${suite.n}. ${esc(suite.title)}</h2><div class="card"><div class="about">${mdInline(suite.about)}</div>`);
    const charted = chartedPeers(results, suite, peers);
    const skipped = peers.filter((p) => !charted.includes(p));
    if (skipped.length) out.push(`<div class="about"><small>n/a in this suite: ${skipped.map((p) => `${esc(p)} (${esc(suiteReason(results, suite, p))})`).join(', ')}</small></div>`);
    if (charted.length) out.push(barChart(results, suite, charted));
    if (suite.id === 'eld') {
      const s = seriesFor(results, 'eld-10k', 'timeline', peers, (t) => t);
      if (s.length) out.push('<div class="about"><b>Event-loop delay over time</b> while 10k-row selects run back to back (worst delay in each 50 ms window, first measured round):</div>', lineChart({ series: s, xLabel: 'time (ms)', yLabel: 'delay (ms)' }));
    }
    if (suite.id === 'memory') {
      for (const [id, what, per] of [['mem-reads', 'reads of 10k rows', 1], ['mem-streams', 'writes with 100 streams open', 10]]) {
        const s = seriesFor(results, id, 'rss', peers, (r) => r.map((v, i) => [(i + 1) * per, v]));
        if (s.length) out.push(`<div class="about"><b>RSS over ${esc(what)}</b>:</div>`, lineChart({ series: s, xLabel: what, yLabel: 'RSS (MB)', height: 240 }));
      }
    }
    out.push('</div>');
  }
  const problems = [];
  for (const c of results.cases) for (const [p, pc] of Object.entries(c.peers)) if (pc.error) problems.push(`<li><b>${esc(c.id)}</b> / ${esc(p)}: <code>${esc(String(pc.error).split('\n')[0])}</code></li>`);
  if (problems.length) out.push(`<h2>Errors</h2><div class="card"><ul>${problems.join('')}</ul></div>`);
  out.push('<p><small>Generated by <code>bench/run.mjs</code>. Absolute times from different runs are not comparable; compare ratios, or use <code>--compare</code>.</small></p>');
  out.push('</body></html>');
  return out.join('\n');
}

/** Why a peer has no value anywhere in a suite. */
function suiteReason(results, suite, peer) {
  if (results.peers[peer]?.available === false) return `unavailable: ${results.peers[peer].reason}`;
  for (const d of suite.cases) {
    const pc = findCase(results, d.id)?.peers[peer];
    if (pc?.na) return pc.na;
    if (pc?.error) return 'error';
  }
  return 'not run';
}

/** The tiny bit of Markdown used in suite descriptions: `code`. */
function mdInline(s) {
  return esc(s).replace(/`([^`]+)`/g, '<code>$1</code>');
}
