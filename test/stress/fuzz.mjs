// Property-based fuzzing (fast-check) of parameters, options and SQL text across every
// method. Cases are generated in chunks of CHUNK from seed + chunk index, so a run is
// reproducible and can resume after a crash: `runFuzz` starts this file as a child process,
// and if the child dies (a crash) it records the case being run and starts a new child at
// the next chunk.
//
// Properties checked for every generated call:
//  - it settles (no hang) and fails, if it fails, with a typed error (common.typedError);
//  - an error message never contains a string parameter's value;
//  - every accepted value reads back as DESIGN.md's Values table says; a value the table
//    does not accept is rejected (TypeError / RangeError) and nothing of its call is stored;
//  - SQL text with an embedded NUL followed by more text is rejected, never run cut short;
//  - an already-aborted `signal` rejects with exactly its reason;
//  - a transaction that rejects leaves nothing; one that resolves keeps exactly what its
//    body's successful statements and savepoints wrote;
//  - selectBytes always returns valid JSON.
import fc from 'fast-check';
import { closeSync, openSync, readFileSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { Database, describeError, mainIf, removeDir, runKind, tempDir, typedError, withDeadline } from './common.mjs';

export const CHUNK = 100;
const HANG_MS = 30_000;

// ---- arbitraries ----

const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;

const char = fc.oneof(
  { weight: 6, arbitrary: fc.integer({ min: 0x20, max: 0x7e }).map((c) => String.fromCharCode(c)) },
  { weight: 2, arbitrary: fc.integer({ min: 0, max: 0xffff }).map((c) => String.fromCharCode(c)) },
  { weight: 2, arbitrary: fc.constantFrom('\0', '\uD800', '\uDBFF', '\uDC00', '\uDFFF', '😀', 'é', '\u2028', '\n', "'", '"') },
);
const plainText = fc.array(char, { maxLength: 40 }).map((a) => a.join(''));
// Lone surrogates at a value's edges: where joining or splitting text goes wrong.
const text = fc.oneof(
  { weight: 4, arbitrary: plainText },
  { weight: 1, arbitrary: fc.tuple(plainText, fc.constantFrom('\uD800', '\uDBFF', '\uD83D')).map(([t, s]) => t + s) },
  { weight: 1, arbitrary: fc.tuple(fc.constantFrom('\uDC00', '\uDFFF', '\uDE00'), plainText).map(([s, t]) => s + t) },
);

const TYPED = [
  Int8Array, Uint8Array, Uint8ClampedArray, Int16Array, Uint16Array, Int32Array, Uint32Array,
  Float32Array, Float64Array, BigInt64Array, BigUint64Array,
  ...(typeof globalThis.Float16Array === 'function' ? [globalThis.Float16Array] : []),
];

/** A view of any kind over random bytes, possibly a subarray of a larger buffer. */
const view = fc
  .record({
    kind: fc.integer({ min: 0, max: TYPED.length + 1 }),
    bytes: fc.uint8Array({ maxLength: 96 }),
    before: fc.integer({ min: 0, max: 3 }),
    after: fc.integer({ min: 0, max: 3 }),
  })
  .map(({ kind, bytes, before, after }) => {
    const C = TYPED[kind];
    const size = C ? C.BYTES_PER_ELEMENT : 1;
    const n = Math.floor(bytes.length / size);
    const ab = new ArrayBuffer((before + n + after) * size);
    const off = before * size;
    new Uint8Array(ab, off, n * size).set(bytes.subarray(0, n * size));
    // Guard bytes around the view: they must never reach the database.
    new Uint8Array(ab, 0, off).fill(0xee);
    new Uint8Array(ab, off + n * size).fill(0xee);
    if (C) return new C(ab, off, n);
    if (kind === TYPED.length) return new DataView(ab, off, n * size);
    return Buffer.from(ab, off, n * size);
  });

const number = fc.oneof(
  fc.double(),
  fc.integer(),
  fc.constantFrom(-0, NaN, Infinity, -Infinity, 2 ** 53 + 1, 2 ** 53, -(2 ** 53), 2 ** 63, -(2 ** 63), 1e300, 5e-324, 0.1),
);
const bigint = fc.oneof(
  fc.bigInt({ min: INT64_MIN, max: INT64_MAX }),
  fc.bigInt({ min: -(2n ** 70n), max: 2n ** 70n }),
  fc.constantFrom(INT64_MAX, INT64_MIN, INT64_MAX + 1n, INT64_MIN - 1n, 0n, -1n),
);
const unsupported = fc.constantFrom(
  () => ({}), () => new Date(0), () => () => 1, () => Symbol('s'), () => [1], () => new Map(),
  () => new ArrayBuffer(4), () => Promise.resolve(1), () => Object.create(null), () => new Number(1), () => new String('s'),
).map((make) => make());

/** Any JS value a caller might pass as a parameter. */
export const value = fc.oneof(
  { weight: 4, arbitrary: number },
  { weight: 3, arbitrary: bigint },
  { weight: 4, arbitrary: text },
  { weight: 1, arbitrary: fc.boolean() },
  { weight: 1, arbitrary: fc.constantFrom(null, undefined) },
  { weight: 3, arbitrary: view },
  { weight: 1, arbitrary: unsupported },
);

/** What the Values table says `v` must be stored as (or which error it must raise). */
export function expected(v) {
  switch (typeof v) {
    case 'number':
      if (Number.isNaN(v)) return { ok: true, type: 'null', value: null }; // SQLite binds NaN as NULL
      if (Number.isInteger(v) && v >= -(2 ** 63) && v < 2 ** 63) return { ok: true, type: 'integer', value: BigInt(v) };
      return { ok: true, type: 'real', value: v };
    case 'bigint':
      return v >= INT64_MIN && v <= INT64_MAX ? { ok: true, type: 'integer', value: v } : { ok: false, error: RangeError };
    case 'boolean':
      return { ok: true, type: 'integer', value: v ? 1n : 0n };
    case 'string':
      return { ok: true, type: 'text', value: v.toWellFormed() };
    case 'undefined':
      return { ok: true, type: 'null', value: null };
    case 'object':
      if (v === null) return { ok: true, type: 'null', value: null };
      if (ArrayBuffer.isView(v)) return { ok: true, type: 'blob', value: Buffer.from(v.buffer, v.byteOffset, v.byteLength) };
      return { ok: false, error: TypeError };
    default:
      return { ok: false, error: TypeError };
  }
}

function sameValue(got, exp) {
  if (exp.type === 'blob') return Buffer.isBuffer(got) && got.equals(exp.value);
  if (exp.type === 'real') return typeof got === 'number' && Object.is(got, exp.value);
  return got === exp.value;
}

function show(v) {
  if (typeof v === 'bigint') return `${v}n`;
  if (typeof v === 'string') return JSON.stringify(v.length > 60 ? v.slice(0, 60) + '…' : v).replace(/[\ud800-\udfff]/g, (c) => `\\u${c.charCodeAt(0).toString(16)}`);
  if (typeof v === 'symbol') return 'Symbol()';
  if (typeof v === 'function') return 'function';
  if (Object.is(v, -0)) return '-0';
  if (ArrayBuffer.isView(v)) return `${v.constructor.name}(${v.byteLength} bytes @${v.byteOffset})`;
  if (Array.isArray(v)) return `Array(length ${v.length})`;
  if (v !== null && typeof v === 'object') return v.constructor?.name ?? 'object';
  return String(v);
}

const huge = fc.constantFrom(
  () => Object.assign([], { length: 2 ** 32 - 1 }),
  () => new Array(1_000_000),
  () => Object.assign([1], { length: 70_000 }),
  () => Array.from({ length: 40_000 }, () => 1),
).map((make) => make());

const namedKey = fc.oneof(
  fc.constantFrom('a', 'b', ':a', '@a', '$a', '', '0', 'a b', '😀', '__proto__', 'constructor', ':'),
  text,
);
const params = fc.oneof(
  { weight: 6, arbitrary: fc.array(value, { maxLength: 4 }) },
  { weight: 2, arbitrary: fc.dictionary(namedKey, value, { maxKeys: 4 }) },
  { weight: 1, arbitrary: fc.record({ a: value, ':a': value }) },
  { weight: 1, arbitrary: fc.constantFrom(undefined, null, 5, 'x', true) },
  { weight: 1, arbitrary: fc.array(value, { maxLength: 3 }).map((a) => { const s = [...a]; s.length += 2; return s; }) },
  // Rare: an input that crashes must not keep the rest of the properties from running.
  { weight: 1, arbitrary: huge },
).map((p) => p);
const paramsWeighted = fc.oneof({ weight: 60, arbitrary: params.filter((p) => !Array.isArray(p) || p.length < 1000) }, { weight: 1, arbitrary: params });

const options = fc.oneof(
  { weight: 4, arbitrary: fc.constant(undefined) },
  { weight: 2, arbitrary: fc.record({ rowMode: fc.constantFrom('object', 'array') }) },
  { weight: 2, arbitrary: fc.constantFrom('aborted', 'timeout0').map((k) => ({ signal: k === 'aborted' ? AbortSignal.abort() : AbortSignal.timeout(0) })) },
  { weight: 2, arbitrary: fc.record({ timeoutMs: fc.oneof(fc.integer({ min: 1, max: 60_000 }), fc.constantFrom(0, -1, NaN, Infinity, 1.5, 2 ** 40)) }) },
  { weight: 1, arbitrary: fc.record({ signal: fc.constantFrom({}, 'x', null) }) },
  { weight: 1, arbitrary: fc.constantFrom(null, 5, 'x', [], { rowMod: 'array' }, { rowMode: 'columns' }, { force: true }) },
);

const VALID_SQL = [
  'SELECT ?', 'SELECT ?1, ?2', 'SELECT :a', 'SELECT @a, $b', 'SELECT * FROM g', 'SELECT count(*) AS n FROM g WHERE x = ?',
  'INSERT INTO g(x) VALUES (?)', 'INSERT INTO g(x) VALUES (:a)', 'UPDATE g SET x = ? WHERE rowid = 1', 'DELETE FROM g WHERE x = ?',
  'INSERT INTO g(x) VALUES (?) RETURNING rowid, x', 'SELECT 1; SELECT 2', 'CREATE TABLE IF NOT EXISTS g2(x)',
  'PRAGMA user_version', 'SELECT json(?)', 'SELECT hex(?)', 'SELECT length(?)', '  ', '-- only a comment', '/* c */',
  "SELECT 'a' || char(0) || 'b'", 'SELECT x FROM g LIMIT 3', 'BEGIN', 'COMMIT', 'ROLLBACK', 'SAVEPOINT s', 'RELEASE s', 'END',
];
const sql = fc.oneof(
  { weight: 60, arbitrary: fc.constantFrom(...VALID_SQL) },
  { weight: 20, arbitrary: text },
  { weight: 10, arbitrary: fc.tuple(fc.constantFrom(...VALID_SQL), text).map(([a, b]) => `${a}\0${b || 'x'}`) },
  { weight: 10, arbitrary: fc.tuple(fc.constantFrom(...VALID_SQL), fc.constantFrom(...VALID_SQL)).map(([a, b]) => `${a}; ${b}`) },
  { weight: 10, arbitrary: fc.integer({ min: 1, max: 500 }).map((n) => 'SELECT 1;'.repeat(n)) },
  // Rare: a script long enough to have crashed every method (a recursion per statement).
  { weight: 1, arbitrary: fc.constant('SELECT 1;'.repeat(20_000)) },
  { weight: 10, arbitrary: fc.constantFrom(null, 42, undefined, {}, Symbol('sql')) },
);

const METHODS = ['select', 'selectOne', 'selectBytes', 'execute', 'executeBatch', 'stream'];
const garbageCase = fc.record({
  kind: fc.constant('call'),
  method: fc.constantFrom(...METHODS),
  inTx: fc.boolean(),
  viaDb: fc.boolean(),
  sql,
  params: paramsWeighted,
  options,
});

/** Rows of [a, b] written by one method and read back. */
const roundTripCase = fc.record({
  kind: fc.constant('roundtrip'),
  method: fc.constantFrom('execute', 'executeNamed', 'batch', 'batchNamed', 'txExecute', 'txBatch'),
  rows: fc.array(fc.tuple(value, value), { minLength: 1, maxLength: 4 }),
});

/** A transaction body: inserts, savepoints that may throw, control statements, a throw. */
const txStep = fc.oneof(
  fc.constant({ op: 'insert' }),
  fc.record({ op: fc.constant('savepoint'), inserts: fc.integer({ min: 0, max: 2 }), fail: fc.boolean() }),
  fc.constant({ op: 'concurrent' }),
  fc.record({ op: fc.constant('control'), sql: fc.constantFrom('COMMIT', 'ROLLBACK', 'END', 'RELEASE x', 'BEGIN', 'COMMIT; SELECT 1') }),
  fc.constant({ op: 'dbInsert' }),
  fc.constant({ op: 'abortThenWrite' }),
);
const txCase = fc.record({
  kind: fc.constant('transaction'),
  steps: fc.array(txStep, { minLength: 1, maxLength: 5 }),
  fail: fc.boolean(),
});

const openCase = fc.record({
  kind: fc.constant('open'),
  path: fc.constantFrom(':memory:', ':memory:', ':memory:', 'nul\0in-path.db', '', 'file::memory:?cache=shared'),
  options: fc.oneof(
    fc.record({ readers: fc.constantFrom(0, 1, 2, 65, 1.5, '2', -1) }, { requiredKeys: [] }),
    fc.record({ timeoutMs: fc.constantFrom(1, 1000, -1, NaN, 'x') }),
    fc.record({ intMode: fc.constantFrom('auto', 'number', 'bigint', 'x', 1) }),
    fc.record({ busyTimeout: fc.constantFrom(0, 100, -1, 1.5, 2 ** 40) }),
    fc.record({ pragmas: fc.constantFrom({ cache_size: 10 }, { 'bad name': 1 }, { cache_size: {} }, 5) }),
    fc.constantFrom(null, 5, 'x', { bogus: 1 }, { readonly: 'yes' }),
  ),
});

export const fuzzCase = fc.oneof(
  { weight: 10, arbitrary: garbageCase },
  { weight: 6, arbitrary: roundTripCase },
  { weight: 2, arbitrary: txCase },
  { weight: 1, arbitrary: openCase },
);

export function describeCase(c) {
  switch (c.kind) {
    case 'call':
      return `${c.inTx ? (c.viaDb ? 'db-in-tx.' : 'tx.') : 'db.'}${c.method}(${show(c.sql)}, ${Array.isArray(c.params) ? `[${c.params.length > 8 ? `length ${c.params.length}` : c.params.map(show).join(', ')}]` : c.params && typeof c.params === 'object' ? `{${Object.entries(c.params).map(([k, v]) => `${show(k)}: ${show(v)}`).join(', ')}}` : show(c.params)}, ${c.options === undefined ? 'undefined' : show(c.options)})`;
    case 'roundtrip':
      return `roundtrip ${c.method} rows ${c.rows.map((r) => `[${r.map(show).join(', ')}]`).join(' ')}`;
    case 'transaction':
      return `transaction ${JSON.stringify(c.steps)} fail=${c.fail}`;
    default:
      return `open ${show(c.path)} ${show(c.options)} ${JSON.stringify(c.options, (k, v) => (typeof v === 'number' && !Number.isFinite(v) ? String(v) : v))}`;
  }
}

// ---- running cases ----

function secretStrings(p) {
  const out = [];
  const add = (v) => typeof v === 'string' && v.length >= 8 && /[A-Za-z0-9]{4}/.test(v) && out.push(v);
  if (Array.isArray(p)) p.slice(0, 16).forEach(add);
  else if (p && typeof p === 'object') Object.values(p).forEach(add);
  return out;
}

class Fuzzer {
  constructor(db, dir) {
    this.db = db;
    this.dir = dir;
    this.tag = 1;
    this.failures = [];
    this.figures = { calls: 0, resolved: 0, rejected: 0, syncThrows: 0, valuesRoundTripped: 0, internalErrors: 0, errorKinds: {} };
  }

  fail(c, message) {
    if (this.failures.length < 200) this.failures.push(`${message} — case: ${describeCase(c)}`);
  }

  /** Checks one failure: typed, no parameter value in its message. */
  checkError(c, err, secrets = []) {
    const name = err?.code ?? err?.constructor?.name ?? typeof err;
    this.figures.errorKinds[name] = (this.figures.errorKinds[name] ?? 0) + 1;
    if (err?.code === 'ERR_QUIETSQLITE_INTERNAL') this.figures.internalErrors++;
    if (err?.hang) return this.fail(c, err.message);
    if (!typedError(err)) return this.fail(c, `untyped failure ${describeError(err)}`);
    for (const s of secrets) {
      if (String(err.message).includes(s) && !(typeof c.sql === 'string' && c.sql.includes(s))) {
        return this.fail(c, `error message contains a parameter value: ${describeError(err)}`);
      }
    }
  }

  /** Calls `fn`, counting it; returns { ok, value } or { ok: false, error }. */
  async call(c, fn, secrets) {
    this.figures.calls++;
    let p;
    try {
      p = fn();
    } catch (err) {
      this.figures.syncThrows++;
      this.checkError(c, err, secrets);
      return { ok: false, error: err };
    }
    try {
      const value = await withDeadline(Promise.resolve(p), HANG_MS, 'the call');
      this.figures.resolved++;
      return { ok: true, value };
    } catch (err) {
      this.figures.rejected++;
      this.checkError(c, err, secrets);
      return { ok: false, error: err };
    }
  }

  async run(c) {
    if (c.kind === 'call') return this.runCall(c);
    if (c.kind === 'roundtrip') return this.runRoundTrip(c);
    if (c.kind === 'transaction') return this.runTransaction(c);
    return this.runOpen(c);
  }

  async invoke(target, c) {
    const { method, sql, params, options } = c;
    if (method === 'stream') {
      const live = target.stream(sql, params, options);
      const it = live[Symbol.asyncIterator]();
      try {
        const first = await it.next();
        return first.value;
      } finally {
        await it.return?.();
      }
    }
    if (method === 'executeBatch') {
      const sets = Array.isArray(params) && params.length < 100 ? [params, params] : params;
      return target.executeBatch(sql, sets, options);
    }
    return target[method](sql, params, options);
  }

  async runCall(c) {
    const secrets = secretStrings(c.params);
    let r;
    if (c.inTx && c.method !== 'stream') {
      // The body swallows the call's outcome so the transaction itself commits; the call is
      // checked like any other. A leaked transaction-control statement shows up below.
      let inner;
      const outer = await this.call(c, () =>
        this.db.transaction(async (tx) => {
          inner = await this.call(c, () => this.invoke(c.viaDb ? this.db : tx, c), secrets);
        }),
      );
      this.figures.calls--; // the transaction call itself is not a generated call
      r = inner ?? outer;
    } else {
      r = await this.call(c, () => this.invoke(this.db, c), secrets);
    }
    // A stream that ended before its first run (an already-aborted signal) never bound its
    // parameters: it yields no rows (undefined) and there is nothing to check.
    const ran = !(c.method === 'stream' && r.ok && r.value === undefined);
    if (r.ok && ran && c.params && typeof c.params === 'object' && !Array.isArray(c.params)) {
      const keys = Object.keys(c.params);
      const bare = keys.map((k) => k.replace(/^[:@$]/, ''));
      if (new Set(bare).size !== bare.length) this.fail(c, 'named parameters given twice (with and without a prefix) were accepted');
    }
    const sqlText = typeof c.sql === 'string' ? c.sql : '';
    const nul = sqlText.indexOf('\0');
    if (r.ok && nul >= 0 && /[^\s\0]/.test(sqlText.slice(nul + 1)) && !/'[^']*\0[^']*'/.test(sqlText)) {
      this.fail(c, 'SQL text with an embedded NUL ran (cut short) instead of being rejected');
    }
    const sig = c.options?.signal;
    if (sig instanceof AbortSignal && sig.aborted && sig.reason?.name === 'AbortError' && c.method !== 'stream') {
      // Argument validation may come first (as in Node's own APIs), but the call must never
      // run, and never refuse the option itself.
      if (r.ok) this.fail(c, 'a call with an already-aborted signal resolved');
      else if (r.error !== sig.reason && /signal|timeoutMs/.test(String(r.error?.message))) {
        this.fail(c, `an already-aborted signal did not reject with its reason: ${describeError(r.error)}`);
      }
    }
    if (r.ok && c.method === 'selectBytes') {
      try {
        JSON.parse(r.value.toString('utf8'));
      } catch {
        this.fail(c, 'selectBytes returned invalid JSON');
      }
    }
  }

  async runRoundTrip(c) {
    const tag = this.tag++;
    const rows = c.rows.map(([a, b], seq) => ({ a, b, seq, ea: expected(a), eb: expected(b) }));
    const secrets = secretStrings(c.rows.flat());
    const all = rows.every((r) => r.ea.ok && r.eb.ok);
    const insert = 'INSERT INTO v(tag, seq, a, b) VALUES (?, ?, ?, ?)';
    const insertNamed = 'INSERT INTO v(tag, seq, a, b) VALUES (:tag, :seq, :a, :b)';
    const stored = new Set(); // seqs that must be present
    if (c.method === 'execute' || c.method === 'executeNamed' || c.method === 'txExecute') {
      const one = (target, r) =>
        c.method === 'executeNamed'
          ? target.execute(insertNamed, { tag, seq: r.seq, a: r.a, b: r.b })
          : target.execute(insert, [tag, r.seq, r.a, r.b]);
      const each = async (target) => {
        for (const r of rows) {
          const res = await this.call(c, () => one(target, r), secrets);
          this.expectOutcome(c, res, r.ea.ok && r.eb.ok);
          if (res.ok) stored.add(r.seq);
        }
      };
      if (c.method === 'txExecute') {
        await this.db.transaction((tx) => each(tx)).catch((err) => this.fail(c, `transaction failed: ${describeError(err)}`));
      } else {
        await each(this.db);
      }
    } else {
      const sets = rows.map((r) => (c.method === 'batchNamed' ? { tag, seq: r.seq, a: r.a, b: r.b } : [tag, r.seq, r.a, r.b]));
      const sqlText = c.method === 'batchNamed' ? insertNamed : insert;
      const res =
        c.method === 'txBatch'
          ? await this.call(c, () => this.db.transaction((tx) => tx.executeBatch(sqlText, sets)), secrets)
          : await this.call(c, () => this.db.executeBatch(sqlText, sets), secrets);
      this.expectOutcome(c, res, all);
      if (res.ok) rows.forEach((r) => stored.add(r.seq));
    }
    const back = await this.db.select('SELECT seq, a, b, typeof(a) AS ta, typeof(b) AS tb FROM v WHERE tag = ? ORDER BY seq', [tag]);
    if (back.length !== stored.size) return this.fail(c, `read back ${back.length} rows, expected ${stored.size} (all or nothing)`);
    for (const row of back) {
      const r = rows[Number(row.seq)];
      if (!r || !stored.has(r.seq)) return this.fail(c, `unexpected row seq ${row.seq}`);
      for (const [got, type, exp, label] of [[row.a, row.ta, r.ea, 'a'], [row.b, row.tb, r.eb, 'b']]) {
        if (type !== exp.type || !sameValue(got, exp)) {
          return this.fail(c, `row ${row.seq} column ${label}: stored ${type} ${show(got)}, expected ${exp.type} ${show(exp.value)}`);
        }
        this.figures.valuesRoundTripped++;
      }
    }
  }

  expectOutcome(c, res, shouldSucceed) {
    if (shouldSucceed && !res.ok) this.fail(c, `a valid value was refused: ${describeError(res.error)}`);
    if (!shouldSucceed && res.ok) this.fail(c, 'an invalid value was accepted');
    if (!shouldSucceed && !res.ok && !(res.error instanceof TypeError || res.error instanceof RangeError)) {
      this.fail(c, `an invalid value raised ${describeError(res.error)} (expected TypeError/RangeError)`);
    }
  }

  async runTransaction(c) {
    const tag = this.tag++;
    let kept = 0;
    const ins = (t) => t.execute('INSERT INTO v(tag, seq) VALUES (?, 0)', [tag]);
    const ctrl = new AbortController();
    const res = await this.call(c, () =>
      this.db.transaction(async (tx) => {
        for (const s of c.steps) {
          if (s.op === 'abortThenWrite') {
            // The body keeps running after its signal aborted: whatever it writes now,
            // through tx or routed through db, must not be committed.
            ctrl.abort();
            await new Promise((r) => setTimeout(r, 2));
            await ins(this.db).catch(() => {});
            await ins(tx).catch(() => {});
            continue;
          }
          if (s.op === 'insert') {
            await ins(tx);
            kept++;
          } else if (s.op === 'dbInsert') {
            await ins(this.db); // routed to the transaction
            kept++;
          } else if (s.op === 'savepoint') {
            const r = await this.call(c, () =>
              tx.transaction(async (sp) => {
                for (let i = 0; i < s.inserts; i++) await ins(sp);
                if (s.fail) throw new RangeError('savepoint body fails on purpose');
              }),
            );
            if (r.ok) kept += s.inserts;
          } else if (s.op === 'concurrent') {
            const both = await Promise.allSettled([
              this.call(c, () => tx.transaction((sp) => ins(sp))),
              this.call(c, () => tx.transaction((sp) => ins(sp))),
            ]);
            for (const b of both) if (b.value.ok) kept++;
          } else {
            await this.call(c, () => tx.execute(s.sql));
          }
        }
        if (c.fail) throw new RangeError('transaction body fails on purpose');
      }, { signal: ctrl.signal }),
    );
    const [{ n }] = await this.db.select('SELECT count(*) AS n FROM v WHERE tag = ?', [tag]);
    const want = res.ok ? kept : 0;
    if (Number(n) !== want) this.fail(c, `transaction ${res.ok ? 'resolved' : `rejected (${describeError(res.error)})`}: ${n} rows kept, expected ${want}`);
    // Whatever happened, the writer is usable and not inside a leftover transaction.
    const probe = await this.call(c, () => this.db.execute('INSERT INTO g(x) VALUES (1)'));
    if (!probe.ok) this.fail(c, `the writer is unusable after the transaction: ${describeError(probe.error)}`);
  }

  async runOpen(c) {
    const r = await this.call(c, () => Database.open(c.path, c.options));
    if (r.ok) await r.value.close();
    if (c.path.includes('\0') && (r.ok || /SQL/.test(String(r.error?.message)))) {
      this.fail(c, `a path with a NUL byte: ${r.ok ? 'opened' : `the error does not name the problem: ${describeError(r.error)}`}`);
    }
  }
}

/** Runs chunks [from, from + chunks) of the case sequence of `seed` in this process. */
export async function run({ seed = 1, from = 0, chunks = 1, caseFile }, progress) {
  const dir = await tempDir();
  const db = await Database.open(join(dir, 'fuzz.db'), { intMode: 'bigint', busyTimeout: 2000 });
  await db.execute('CREATE TABLE v(tag INTEGER, seq INTEGER, a, b); CREATE INDEX v_tag ON v(tag); CREATE TABLE g(x)');
  let f = new Fuzzer(db, dir);
  const fd = caseFile ? openSync(caseFile, 'w') : undefined;
  try {
    for (let k = from; k < from + chunks; k++) {
      const cases = fc.sample(fuzzCase, { seed: seed + k, numRuns: CHUNK });
      for (let i = 0; i < cases.length; i++) {
        if (fd !== undefined) {
          const line = Buffer.from(`chunk ${k} case ${i}: ${describeCase(cases[i])}\n`.padEnd(600, ' ').slice(0, 600));
          writeSync(fd, line, 0, line.length, 0);
        }
        await f.run(cases[i]);
      }
      // Reported per chunk: if a later chunk crashes, the finished ones still count.
      progress(`CHUNK ${JSON.stringify({ chunk: k, figures: f.figures, failures: f.failures })}`);
      const next = new Fuzzer(db, dir);
      next.tag = f.tag;
      f = next;
    }
  } finally {
    if (fd !== undefined) closeSync(fd);
    await db.close();
    await removeDir(dir);
  }
  return { failures: [], figures: { chunks } };
}

/**
 * Runs at least `calls` generated calls in child processes; a child that crashes is
 * reported with the case it was running, and the run goes on from the next chunk.
 */
export async function runFuzz({ calls = 2000, seed = 20261122, node = process.execPath, chunksPerChild = 20 } = {}, progress = () => {}) {
  const dir = await tempDir('quietsqlite-fuzz-');
  const caseFile = join(dir, 'current-case.txt');
  const failures = [];
  const figures = { calls: 0, resolved: 0, rejected: 0, syncThrows: 0, valuesRoundTripped: 0, internalErrors: 0, crashes: 0, children: 0, errorKinds: {} };
  let chunk = 0;
  try {
    while (figures.calls < calls) {
      const perCall = figures.calls > 0 ? figures.calls / chunk : CHUNK * 0.9;
      const chunks = Math.max(1, Math.min(chunksPerChild, Math.ceil((calls - figures.calls) / perCall)));
      figures.children++;
      let lastChunk = chunk - 1;
      const r = await runKind('fuzz', { seed, from: chunk, chunks, caseFile }, {
        node,
        progress: (line) => {
          if (!line.startsWith('CHUNK ')) return progress(line);
          const c = JSON.parse(line.slice(6));
          lastChunk = c.chunk;
          for (const [k, v] of Object.entries(c.figures)) {
            if (k === 'errorKinds') for (const [e, n] of Object.entries(v)) figures.errorKinds[e] = (figures.errorKinds[e] ?? 0) + n;
            else figures[k] = (figures[k] ?? 0) + v;
          }
          failures.push(...c.failures);
        },
      });
      if (r.failures.length > 0) {
        // Crashed: the child left the case it was running in caseFile.
        figures.crashes++;
        let last = '';
        try {
          last = readFileSync(caseFile, 'utf8').trim();
        } catch {}
        failures.push(`crash (${r.failures.join('; ').slice(0, 300)}) while running ${last || 'an unknown case'}`);
        const at = /^chunk (\d+) case (\d+)/.exec(last);
        // The cases run before the crash in that chunk count as calls (roughly one each).
        if (at) figures.calls += Number(at[2]);
        chunk = Math.max(lastChunk + 1, at ? Number(at[1]) + 1 : chunk + 1);
      } else {
        chunk += chunks;
      }
      progress(`fuzz ${figures.calls}/${calls} calls, ${failures.length} failures, ${figures.crashes} crashes`);
    }
  } finally {
    await removeDir(dir);
  }
  return { failures, figures };
}

mainIf(import.meta, run);
