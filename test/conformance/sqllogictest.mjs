// sqllogictest parser and runner.
//
// Format: see FORMAT.wiki shipped with the sqllogictest scripts. Where the
// wiki is silent, behaviour follows the reference C harness (sqllogictest.c
// + slt_sqlite.c); every such choice is marked "reference:" below.
//
// The database is reached only through an adapter:
//   adapter.execute(sql) -> Promise<unknown>   (result ignored; must reject on error)
//   adapter.query(sql)   -> Promise<Array<Array<value>>>
// where a value is null | number | bigint | string | Buffer/Uint8Array.
// All rendering of values into result text happens here, so two adapters
// returning the same JS values always produce the same verdicts.

import { createHash } from 'node:crypto';

// reference: the C harness hashes result sets with more than 8 values when
// no hash-threshold record has been seen (DEFAULT_HASH_THRESHOLD 8). Some of
// the scripts (select1/4/5) rely on this: they contain hashed results but no
// hash-threshold record.
export const DEFAULT_HASH_THRESHOLD = 8;

const SORT_MODES = new Set(['nosort', 'rowsort', 'valuesort']);
const HASH_LINE = /^(\d+) values hashing to ([0-9a-f]{32})$/;

// ---------------------------------------------------------------------------
// Parser
// ---------------------------------------------------------------------------

/**
 * Split script text into records.
 *
 * Every record has { kind, line, conditions } where line is the 1-based line
 * of the record's command line (after any skipif/onlyif prefixes) and
 * conditions is [{ op: 'skipif'|'onlyif', engine, line }].
 *
 * kinds:
 *   statement       { expectError, sql }
 *   query           { types, sortMode, label, sql, expected: string[] }
 *   hash-threshold  { threshold }
 *   halt            {}
 *   invalid         { message }   (malformed record; reported as a failure)
 */
export function parseScript(text) {
  const rawLines = text.split('\n');
  const records = [];
  let block = []; // [{ text, line }] for the current record, comments removed

  const flush = () => {
    if (block.length > 0) records.push(parseRecord(block));
    block = [];
  };

  for (let i = 0; i < rawLines.length; i++) {
    let line = rawLines[i];
    if (line.endsWith('\r')) line = line.slice(0, -1);
    if (line.trim() === '') {
      // Only whitespace-only lines separate records.
      flush();
    } else if (line.startsWith('#')) {
      // Comment lines vanish wherever they are (they do NOT separate records).
      continue;
    } else {
      block.push({ text: line, line: i + 1 });
    }
  }
  flush();
  return records;
}

function tokens(s) {
  return s.trim().split(/\s+/);
}

function parseRecord(block) {
  const conditions = [];
  let i = 0;
  // Leading skipif/onlyif lines are conditions for the record that follows.
  for (; i < block.length; i++) {
    const t = tokens(block[i].text);
    if (t[0] !== 'skipif' && t[0] !== 'onlyif') break;
    if (!t[1]) {
      return invalid(block[i].line, conditions, `${t[0]} without a database name`);
    }
    // Anything after the engine name (e.g. "# not compatible") is a comment.
    conditions.push({ op: t[0], engine: t[1], line: block[i].line });
  }
  if (i >= block.length) {
    return invalid(block[block.length - 1].line, conditions, 'conditions with no record after them');
  }

  const head = block[i];
  const t = tokens(head.text);
  const body = block.slice(i + 1);
  const base = { line: head.line, conditions };

  switch (t[0]) {
    case 'statement': {
      if (t[1] !== 'ok' && t[1] !== 'error') {
        return invalid(head.line, conditions, `statement argument must be "ok" or "error", got "${t[1] ?? ''}"`);
      }
      if (body.length === 0) return invalid(head.line, conditions, 'statement without SQL');
      return { kind: 'statement', ...base, expectError: t[1] === 'error', sql: joinSql(body) };
    }
    case 'query': {
      const types = t[1] ?? '';
      if (!/^[TIR]+$/.test(types)) {
        return invalid(head.line, conditions, `query type string must be one or more of T/I/R, got "${types}"`);
      }
      const sortMode = t[2] ?? 'nosort';
      if (!SORT_MODES.has(sortMode)) {
        return invalid(head.line, conditions, `unknown sort mode "${sortMode}"`);
      }
      // reference: only the first four tokens of the line are looked at.
      const label = t[3] ?? null;
      const sep = body.findIndex((l) => l.text === '----');
      const sqlLines = sep === -1 ? body : body.slice(0, sep);
      if (sqlLines.length === 0) return invalid(head.line, conditions, 'query without SQL');
      // No "----" (or nothing after it) means an empty result is expected.
      const resultLines = sep === -1 ? [] : body.slice(sep + 1);
      return {
        kind: 'query',
        ...base,
        types,
        sortMode,
        label,
        sql: joinSql(sqlLines),
        expected: resultLines.map((l) => l.text),
      };
    }
    case 'hash-threshold': {
      const n = Number(t[1]);
      if (!Number.isInteger(n) || n < 0) {
        return invalid(head.line, conditions, `hash-threshold needs a non-negative integer, got "${t[1] ?? ''}"`);
      }
      return { kind: 'hash-threshold', ...base, threshold: n };
    }
    case 'halt':
      return { kind: 'halt', ...base };
    default:
      return invalid(head.line, conditions, `unknown record type "${t[0]}"`);
  }
}

function joinSql(lines) {
  return lines.map((l) => l.text).join('\n');
}

function invalid(line, conditions, message) {
  return { kind: 'invalid', line, conditions, message };
}

// ---------------------------------------------------------------------------
// Value rendering (the I/T/R rules)
// ---------------------------------------------------------------------------

const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;
const TWO_POW_63 = 2 ** 63;

function isBytes(v) {
  return v instanceof Uint8Array; // Buffer is a Uint8Array
}

// Bytes -> one JS char per byte, for the numeric prefix parsers below.
function bytesToLatin1(bytes) {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('latin1');
}

function clampInt64(b) {
  return b < INT64_MIN ? INT64_MIN : b > INT64_MAX ? INT64_MAX : b;
}

// Text -> integer the way SQLite's sqlite3_column_int64 does it: leading
// whitespace, optional sign, then the longest run of digits; anything else
// stops the scan ("12.7" -> 12, "1e3" -> 1, "abc" -> 0). Saturates at int64.
function textToInteger(s) {
  const m = /^[ \t\n\v\f\r]*([+-]?)(\d*)/.exec(s);
  if (!m[2]) return 0n;
  return clampInt64(BigInt(m[1] + m[2]));
}

// Text -> real the way SQLite's sqlite3_column_double does it: the longest
// prefix that looks like a decimal number; no such prefix gives 0.0.
function textToReal(s) {
  const m = /^[ \t\n\v\f\r]*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?/.exec(s);
  return m ? Number.parseFloat(m[0].trim()) : 0;
}

function numberToInteger(x) {
  // reference: reals are converted to integers by truncation toward zero,
  // saturating at the int64 range.
  if (Number.isNaN(x)) return 0n;
  if (x >= TWO_POW_63) return INT64_MAX;
  if (x <= -TWO_POW_63) return INT64_MIN;
  return BigInt(Math.trunc(x));
}

/**
 * "%.3f" as SQLite's own printf renders it: round half away from zero at the
 * third decimal, but never more than 16 significant digits; positions past
 * the 16th are printed as '0'. (So 2^63 renders as 9223372036854776000.000,
 * which is what the scripts expect; C's printf would print ...808.000.)
 */
export function formatReal(x) {
  if (Number.isNaN(x)) return 'NaN';
  if (!Number.isFinite(x)) return x > 0 ? 'Inf' : '-Inf';
  const sign = x < 0 ? '-' : ''; // -0.0 is not < 0, so it prints unsigned, like SQLite
  const a = Math.abs(x);
  // Below 1e13 there are at most 13 integer digits + 3 decimals = 16
  // significant digits, so toFixed (exact value, ties rounded up) is exact.
  if (a < 1e13) return sign + a.toFixed(3);
  // Otherwise round to 16 significant digits and pad with zeros.
  const [mant, e] = a.toExponential(15).split('e');
  const digits = mant.replace('.', ''); // exactly 16 digits
  const intLen = Number(e) + 1; // >= 14 here
  const intPart = intLen >= 16 ? digits + '0'.repeat(intLen - 16) : digits.slice(0, intLen);
  const frac = (intLen >= 16 ? '' : digits.slice(intLen)).padEnd(3, '0');
  return `${sign}${intPart}.${frac}`;
}

/**
 * A real as SQLite turns it into text ("%!.15g"): 15 significant digits,
 * trailing zeros dropped but always a ".0", exponent form outside
 * 1e-4 <= |x| < 1e15 ("1.0e+20").
 */
export function realToText(x) {
  if (Number.isNaN(x)) return 'NaN';
  if (!Number.isFinite(x)) return x > 0 ? 'Inf' : '-Inf';
  if (x === 0) return '0.0';
  const sign = x < 0 ? '-' : '';
  const [mant, e] = Math.abs(x).toExponential(14).split('e');
  const exp = Number(e);
  const digits = mant.replace('.', '').replace(/0+$/, '') || '0';
  let body;
  if (exp < -4 || exp >= 15) {
    const es = String(Math.abs(exp)).padStart(2, '0');
    body = `${digits[0]}.${digits.slice(1) || '0'}e${exp < 0 ? '-' : '+'}${es}`;
  } else if (exp >= 0) {
    body = `${digits.slice(0, exp + 1).padEnd(exp + 1, '0')}.${digits.slice(exp + 1) || '0'}`;
  } else {
    body = `0.${'0'.repeat(-exp - 1)}${digits}`;
  }
  return sign + body;
}

// Map a text value's UTF-8 bytes to the printable rendering: control and
// non-ASCII bytes become '@' (reference: per byte, so 'é' -> '@@'). A NUL
// byte ends the text, as it would for a C string.
function bytesToPrintable(bytes) {
  let out = '';
  for (const b of bytes) {
    if (b === 0) break;
    out += b < 0x20 || b > 0x7e ? '@' : String.fromCharCode(b);
  }
  return out === '' ? '(empty)' : out;
}

const PRINTABLE = /^[\x20-\x7e]+$/;

function describe(v) {
  if (v === undefined) return 'undefined';
  return `${typeof v} ${String(v).slice(0, 40)}`;
}

/** Render one value for a column of type 'I', 'T' or 'R'. */
export function formatValue(v, type) {
  if (v === null) return 'NULL';
  switch (type) {
    case 'I': {
      if (Number.isSafeInteger(v)) return String(v); // the common case, fast
      let i;
      if (typeof v === 'bigint') i = clampInt64(v);
      else if (typeof v === 'number') i = numberToInteger(v);
      else if (typeof v === 'string') i = textToInteger(v);
      else if (isBytes(v)) i = textToInteger(bytesToLatin1(v));
      else throw new TypeError(`cannot render ${describe(v)} as I`);
      return i.toString();
    }
    case 'R': {
      let r;
      if (typeof v === 'number') r = v;
      else if (typeof v === 'bigint') r = Number(v);
      else if (typeof v === 'string') r = textToReal(v);
      else if (isBytes(v)) r = textToReal(bytesToLatin1(v));
      else throw new TypeError(`cannot render ${describe(v)} as R`);
      return formatReal(r);
    }
    case 'T': {
      if (typeof v === 'string') {
        if (PRINTABLE.test(v)) return v; // the common case, fast
        return bytesToPrintable(Buffer.from(v, 'utf8'));
      }
      if (isBytes(v)) return bytesToPrintable(v);
      if (typeof v === 'bigint') return v.toString();
      if (typeof v === 'number') {
        // A JS number does not say whether SQLite had an INTEGER or a REAL.
        // Integral values inside the int64 range are shown as integers
        // (so a REAL 3.0 shows as "3" where SQLite would say "3.0").
        return Number.isInteger(v) && Math.abs(v) < TWO_POW_63 ? BigInt(v).toString() : realToText(v);
      }
      throw new TypeError(`cannot render ${describe(v)} as T`);
    }
    default:
      throw new TypeError(`unknown column type ${type}`);
  }
}

// ---------------------------------------------------------------------------
// Runner
// ---------------------------------------------------------------------------

function md5(text) {
  return createHash('md5').update(text, 'utf8').digest('hex');
}

// Rendered values never contain bytes below 0x20 (T values have them mapped
// to '@'), so joining a row's values with \x01 gives keys whose plain string
// order equals the reference's column-by-column strcmp order: where two rows
// first differ, either one value is a prefix of the other (\x01 sorts before
// any printable char, as NUL does for strcmp) or a character decides. JS
// string order is UTF-16 code unit order, which is byte order for ASCII.
const SEP = '\x01';

/**
 * Order rendered values as the sort mode says and return them as one string
 * with each value followed by '\n' (the exact text the MD5 is taken over).
 * Working on one string per row keeps large results (select4 returns
 * ~750k rows) cheap to sort and hash.
 */
function orderedText(flat, sortMode, width) {
  if (flat.length === 0) return '';
  if (sortMode === 'valuesort') return flat.sort().join('\n') + '\n';
  if (sortMode === 'rowsort') {
    const keys = new Array(flat.length / width);
    for (let r = 0, i = 0; r < keys.length; r++, i += width) {
      let key = flat[i];
      for (let c = 1; c < width; c++) key += SEP + flat[i + c];
      keys[r] = key;
    }
    keys.sort();
    return keys.join('\n').replaceAll(SEP, '\n') + '\n';
  }
  return flat.join('\n') + '\n';
}

function errorMessage(err) {
  return err && typeof err === 'object' && 'message' in err ? String(err.message) : String(err);
}

/** True if the record is meant for `engine` (case-insensitive, as in the reference). */
export function appliesTo(record, engine) {
  const me = engine.toLowerCase();
  for (const c of record.conditions) {
    const match = c.engine.toLowerCase() === me;
    if (c.op === 'skipif' && match) return false;
    if (c.op === 'onlyif' && !match) return false;
  }
  return true;
}

// The label hash for the result recorded in the script itself (used for
// skipped queries): either the hash from a "N values hashing to H" line or
// the MD5 of the listed values. These are already in sorted order.
function expectedLabelHash(expected) {
  if (expected.length === 1) {
    const m = HASH_LINE.exec(expected[0]);
    if (m) return m[2];
  }
  return md5(expected.map((v) => v + '\n').join(''));
}

/**
 * Run one script against an adapter.
 *
 * Every record that is reached counts exactly once:
 *   passed  - statement/query ran and behaved as the script says
 *   failed  - it did not, or the record is malformed, or a labeled result
 *             disagrees with an earlier one with the same label
 *   skipped - excluded for this engine by skipif/onlyif
 *   knownDeviations - failed, but exactly as an entry of
 *             options.knownDeviations describes (listed, not counted)
 * Control records (hash-threshold, halt) that apply are not counted.
 * `halted` is the line of the halt record that stopped the run, or null.
 *
 * options:
 *   file            name used in failure reports
 *   engine          database name for skipif/onlyif (default 'sqlite')
 *   hashThreshold   initial threshold (default DEFAULT_HASH_THRESHOLD)
 *   knownDeviations [{ line, sql?, message: RegExp, reason }]: records whose
 *                   script expectation cannot be met by SQLite. Each must fail
 *                   with a matching message, or the run gets a failure.
 *   onRecord        (record, outcome) => void, for progress/timing
 */
export async function runScript(text, adapter, options = {}) {
  const { file = '<script>', engine = 'sqlite', onRecord } = options;
  let hashThreshold = options.hashThreshold ?? DEFAULT_HASH_THRESHOLD;
  const labels = new Map(); // label -> { hash, line }
  const result = { file, passed: 0, failed: 0, skipped: 0, halted: null, knownDeviations: [], failures: [] };

  const known = (options.knownDeviations ?? []).map((k) => ({ ...k, seen: false }));

  const fail = (record, message, expected = null, actual = null) => {
    const k = known.find(
      (x) => !x.seen && x.line === record.line && (x.sql === undefined || x.sql === record.sql) && x.message.test(message),
    );
    if (k) {
      k.seen = true;
      result.knownDeviations.push({ file, line: record.line, message, reason: k.reason });
      onRecord?.(record, 'known-deviation');
      return;
    }
    result.failed++;
    result.failures.push({
      file,
      line: record.line,
      sql: record.sql ?? null,
      expected,
      actual,
      message,
    });
    onRecord?.(record, 'failed');
  };
  const pass = (record) => {
    result.passed++;
    onRecord?.(record, 'passed');
  };

  // Returns an error message if `label` was seen before with another hash.
  const checkLabel = (label, hash, line) => {
    const prev = labels.get(label);
    if (!prev) {
      labels.set(label, { hash, line });
      return null;
    }
    if (prev.hash === hash) return null;
    return `labeled result [${label}] does not agree with the result at line ${prev.line}`;
  };

  for (const record of parseScript(text)) {
    if (!appliesTo(record, engine)) {
      // reference: a skipped query with a label still has its recorded
      // result checked against other queries with that label (an empty
      // recorded result is not checked).
      if (record.kind === 'query' && record.label && record.expected.length > 0) {
        const msg = checkLabel(record.label, expectedLabelHash(record.expected), record.line);
        if (msg) {
          fail(record, `${msg} (recorded result of a query skipped for ${engine})`, record.expected.join('\n'), null);
          continue;
        }
      }
      result.skipped++;
      onRecord?.(record, 'skipped');
      continue;
    }

    // reference: conditions are looked at first, so a malformed record
    // meant only for another engine is just skipped.
    if (record.kind === 'invalid') {
      fail(record, `malformed record: ${record.message}`);
      continue;
    }

    if (record.kind === 'halt') {
      result.halted = record.line;
      break;
    }

    if (record.kind === 'hash-threshold') {
      hashThreshold = record.threshold;
      continue;
    }

    if (record.kind === 'statement') {
      let error = null;
      try {
        await adapter.execute(record.sql);
      } catch (err) {
        error = err;
      }
      if (record.expectError && error === null) {
        fail(record, 'statement succeeded but an error was expected', 'error', 'ok');
      } else if (!record.expectError && error !== null) {
        fail(record, `statement failed: ${errorMessage(error)}`, 'ok', 'error');
      } else {
        pass(record);
      }
      continue;
    }

    // record.kind === 'query'
    let rows;
    try {
      rows = await adapter.query(record.sql);
    } catch (err) {
      fail(record, `query failed: ${errorMessage(err)}`, record.expected.join('\n'), null);
      continue;
    }

    const width = record.types.length;
    let flat;
    try {
      if (!Array.isArray(rows)) throw new TypeError(`adapter.query returned ${describe(rows)}, not an array`);
      flat = new Array(rows.length * width);
      let i = 0;
      for (const row of rows) {
        if (!Array.isArray(row)) throw new TypeError(`row is ${describe(row)}, not an array`);
        // reference: the column count must equal the type string length.
        // (With zero rows the count cannot be checked through this adapter.)
        if (row.length !== width) {
          throw new TypeError(`wrong number of result columns: expected ${width} but got ${row.length}`);
        }
        for (let c = 0; c < width; c++) flat[i++] = formatValue(row[c], record.types[c]);
      }
    } catch (err) {
      fail(record, errorMessage(err), record.expected.join('\n'), null);
      continue;
    }

    const n = flat.length;
    const text = orderedText(flat, record.sortMode, width);
    const hashed = hashThreshold > 0 && n > hashThreshold;
    const hash = hashed || record.label ? md5(text) : null;

    // reference: which form the comparison takes depends only on the
    // current threshold; a listed result must match value for value and a
    // hashed result must match the "N values hashing to H" line exactly.
    // Unlike the reference we also require the number of listed values to
    // match (the C harness stops comparing at the shorter of the two lists).
    const expectedText = record.expected.map((v) => v + '\n').join('');
    const actualText = hashed ? `${n} values hashing to ${hash}\n` : text;
    const problems = [];
    // Exact, since no rendered value contains a newline.
    if (actualText !== expectedText) problems.push(hashed ? 'wrong result hash' : 'wrong result');
    if (record.label) {
      const msg = checkLabel(record.label, hash, record.line);
      if (msg) problems.push(msg);
    }
    if (problems.length > 0) {
      fail(record, problems.join('; '), record.expected.join('\n'), actualText.slice(0, -1));
    } else {
      pass(record);
    }
  }

  // A known deviation that did not show up is itself a failure: the entry
  // is stale (the record now passes, fails differently, or was not reached).
  for (const k of known) {
    if (k.seen) continue;
    result.failed++;
    result.failures.push({
      file,
      line: k.line,
      sql: k.sql ?? null,
      expected: null,
      actual: null,
      message: `known deviation did not occur as described (${k.message}); update the list. Reason given: ${k.reason}`,
    });
  }

  return result;
}

/** Human-readable summary of the first `max` failures. */
export function formatFailures(result, max = 5) {
  const parts = result.failures.slice(0, max).map((f) => {
    const lines = [`${f.file}:${f.line}: ${f.message}`];
    if (f.sql) lines.push(`  sql: ${f.sql.replace(/\n/g, '\n       ')}`);
    if (f.expected !== null) lines.push(`  expected:\n${indent(f.expected)}`);
    if (f.actual !== null) lines.push(`  actual:\n${indent(f.actual)}`);
    return lines.join('\n');
  });
  const more = result.failures.length - parts.length;
  if (more > 0) parts.push(`... and ${more} more failure(s)`);
  return parts.join('\n\n');
}

function indent(s) {
  const lines = s === '' ? ['(no values)'] : s.split('\n');
  const shown = lines.slice(0, 20).map((l) => `    ${l}`);
  if (lines.length > 20) shown.push(`    ... (${lines.length - 20} more lines)`);
  return shown.join('\n');
}
