// Number formatting shared by the terminal, Markdown and HTML reports.

/** A value with its unit, compact: "4.80 µs", "17.1 ms", "207k/s", "1.23M rows/s", "85.2 MB". */
export function formatValue(v, unit) {
  if (v === undefined || v === null || Number.isNaN(v)) return 'n/a';
  switch (unit) {
    case 'ms':
      return formatMs(v);
    case 'op/s':
      return `${formatCount(v)}/s`;
    case 'rows/s':
      return `${formatCount(v)} rows/s`;
    case 'MB':
      return `${v.toFixed(1)} MB`;
    case 'count':
      return Number.isInteger(v) ? String(v) : v.toFixed(1);
    case 'x':
      return formatRatio(v);
    default:
      return String(v);
  }
}

export function formatMs(v) {
  const a = Math.abs(v);
  if (a === 0) return '0 ms';
  if (a < 1) return `${(v * 1000).toPrecision(3)} µs`;
  if (a < 10) return `${v.toFixed(2)} ms`;
  if (a < 100) return `${v.toFixed(1)} ms`;
  return `${v.toFixed(0)} ms`;
}

export function formatCount(v) {
  const a = Math.abs(v);
  if (a >= 1e6) return `${(v / 1e6).toPrecision(3)}M`;
  if (a >= 1e3) return `${(v / 1e3).toPrecision(3)}k`;
  return a >= 100 ? v.toFixed(0) : v.toPrecision(3);
}

/** "0.52x", "0.018x", "3.10x"; "" when not a number. */
export function formatRatio(r) {
  if (!Number.isFinite(r)) return '';
  return `${r < 0.1 ? r.toPrecision(2) : r.toFixed(2)}x`;
}

export function formatPct(r) {
  if (!Number.isFinite(r)) return '?';
  return `${r >= 0 ? '+' : ''}${(r * 100).toFixed(1)}%`;
}

export function formatDuration(ms) {
  if (ms < 10_000) return `${(ms / 1000).toFixed(1)} s`;
  const s = Math.round(ms / 1000);
  const m = Math.floor(s / 60);
  return m ? `${m} min ${String(s % 60).padStart(2, '0')} s` : `${s} s`;
}

/** Plain fixed-width table for the terminal. rows: string[][]; first row is the header;
 * the first `leftColumns` columns are left-aligned, the rest (numbers) right-aligned. */
export function textTable(rows, leftColumns = 1) {
  const widths = rows[0].map((_, c) => Math.max(...rows.map((r) => String(r[c] ?? '').length)));
  const line = (r) => r.map((cell, c) => (c < leftColumns ? String(cell ?? '').padEnd(widths[c]) : String(cell ?? '').padStart(widths[c]))).join('  ').trimEnd();
  return [line(rows[0]), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.slice(1).map(line)].join('\n');
}

/** Markdown table; pipes inside cells are escaped. */
export function mdTable(rows) {
  const esc = (s) => String(s ?? '').replace(/\|/g, '\\|');
  const [head, ...body] = rows;
  return [`| ${head.map(esc).join(' | ')} |`, `|${head.map(() => '---').join('|')}|`, ...body.map((r) => `| ${r.map(esc).join(' | ')} |`)].join('\n');
}
