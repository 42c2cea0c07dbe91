// Validation of option objects: misuse is a TypeError/RangeError with a helpful message,
// and a misspelled option name is rejected rather than ignored.

import { availableParallelism } from 'node:os';
import { types } from 'node:util';
import { binding } from './native';
import type { IntMode, RowMode } from './rows';
import { checkSignal } from './signals';

export type PragmaValue = string | number | boolean;

export interface OpenOptions {
  /** Reader threads; default clamp(cores - 1, 2, 4). A spare reader comes on top (docs/api.md, "Readers and the spare"). */
  readers?: number | undefined;
  /** Open without a writer; writes reject with SqliteError SQLITE_READONLY. */
  readonly?: boolean | undefined;
  /** How INTEGER values come out; default 'auto'. */
  intMode?: IntMode | undefined;
  /** Pragmas applied to every connection (writer and readers), after the defaults. */
  pragmas?: Record<string, PragmaValue> | undefined;
  /** Milliseconds to wait for a lock held by another connection; default 5000. */
  busyTimeout?: number | undefined;
  /** Default `timeoutMs` of every query; default none. `0`, `null` or `Infinity`: none. */
  timeoutMs?: number | null | undefined;
  /** 'auto' (default): the WAL is checkpointed when the writer is idle, mostly on a thread
   * beside it; 'external': never by this database, another process does (a replicator such as
   * Litestream). See docs/guides/replication.md. */
  checkpoints?: 'auto' | 'external' | undefined;
  /** Encrypts the database (SQLite3 Multiple Ciphers): a passphrase, or a Buffer of raw key
   * bytes (32 bytes; ciphers 'chacha20', 'sqlcipher' and 'ascon128'). Applied to every
   * connection; a wrong or missing key rejects open with SQLITE_NOTADB. */
  encryptionKey?: string | Buffer;
  /** The cipher of an encrypted database; default 'chacha20'. Needs `encryptionKey`. */
  cipher?: Cipher | undefined;
  /** SQLite extensions (shared library paths) every connection loads when it opens. */
  extensions?: string[] | undefined;
  /** Bounded inline reads: a read runs on the JavaScript thread's own read connection for
   * at most a budget of SQLite work, then (if not done) on a reader as usual. `false`
   * (default): off; `true`: a budget of 50 µs; `{ budgetUs }`: 1 to 10000 µs. See docs/api.md. */
  inlineReads?: boolean | { budgetUs: number } | undefined;
}

/** The ciphers of SQLite3 Multiple Ciphers quietsqlite offers. */
export type Cipher = 'chacha20' | 'sqlcipher' | 'aes256cbc' | 'aes128cbc' | 'ascon128';

const CIPHERS: readonly Cipher[] = ['chacha20', 'sqlcipher', 'aes256cbc', 'aes128cbc', 'ascon128'];

/** An encryption key as the native layer takes it: the bytes, and whether they are a raw key. */
export interface KeyBytes {
  bytes: Buffer;
  raw: boolean;
  /** The bytes are a copy made here (of a string), to be wiped after the native call. */
  owned: boolean;
}

/** Checks a key given to open() or rekey() (`what` names it in messages, which never show it). */
export function checkKey(what: string, key: unknown): KeyBytes {
  if (typeof key === 'string') {
    if (key.length === 0) throw new RangeError(`${what} may not be empty`);
    // UTF-8 has no form for a lone surrogate: it would become U+FFFD, and passphrases that
    // differ in them would open each other's databases.
    if (/\p{Cs}/u.test(key)) throw new TypeError(`${what} holds a lone surrogate (it is not well-formed UTF-16)`);
    return { bytes: Buffer.from(key, 'utf8'), raw: false, owned: true };
  }
  if (Buffer.isBuffer(key)) {
    if (key.length === 0) throw new RangeError(`${what} may not be empty`);
    return { bytes: key, raw: true, owned: false };
  }
  throw new TypeError(`${what} must be a string (a passphrase) or a Buffer (raw key bytes)`);
}

/** Cancellation options every query method takes. */
export interface CallOptions {
  /** Aborting it rejects the call with `signal.reason` (see docs/api.md, Cancellation). */
  signal?: AbortSignal | undefined;
  /** Rejects with a `TimeoutError` DOMException after this many milliseconds; overrides the
   * database's default. `0`, `null` or `Infinity`: no timeout. */
  timeoutMs?: number | null | undefined;
}

export interface QueryOptions extends CallOptions {
  /** 'object' (default): plain objects; 'array': arrays of values in column order. */
  rowMode?: RowMode | undefined;
}

/** execute()'s options: RETURNING rows as objects (default) or arrays. */
export interface ExecuteOptions extends CallOptions {
  /** 'object' (default): plain objects; 'array': arrays of values in column order (duplicate
   * column names keep every value). */
  rowMode?: RowMode | undefined;
}

/** Options that make rows arrays: the overloads that take them give `SqlValue[]` rows. */
export type ArrayRowMode = { rowMode: 'array' };

/** Options that keep rows objects (`rowMode` 'object' or left out): the overloads that take
 * them give `Row` rows; a `rowMode` only known at run time gives `Row | SqlValue[]`. */
export type ObjectRowMode = { rowMode?: 'object' | undefined };

/** A statement's parameters: an array (positional) or a plain object (named); `null` or
 * left out for none. Typed as any object, so that interfaces are accepted; the call
 * refuses a `Map`, a `Date`, a lone `Buffer`, a promise or a class instance with a
 * `TypeError` (docs/api.md, Parameters). */
export type Params = readonly unknown[] | object | null;

/** A call's options once checked; `timeoutMs` 0 means no timeout. */
export interface CallSettings {
  rowMode: RowMode;
  signal: AbortSignal | undefined;
  timeoutMs: number;
}

/** The settings of a call made without options on a database without default timeout:
 * shared, so the common case allocates nothing. */
const PLAIN: CallSettings = Object.freeze({ rowMode: 'object', signal: undefined, timeoutMs: 0 });

/** The longest timer Node can set (larger delays would fire at once). */
const MAX_TIMEOUT_MS = 0x7fffffff;

function closest(name: string, known: readonly string[]): string | undefined {
  const lower = name.toLowerCase();
  return known.find((k) => k.toLowerCase() === lower || k.toLowerCase().startsWith(lower.slice(0, 4)));
}

export function checkKeys(what: string, value: unknown, known: readonly string[]): asserts value is Record<string, unknown> {
  // Any object: class instances (an aggregate's methods on a prototype) and objects of
  // another realm are fine; null and primitives are not.
  checkOptionsObject(what, value);
  for (const key of Object.keys(value)) {
    if (!known.includes(key)) refuseUnknown(what, key, known);
  }
}

/** Options are an object's properties: not a primitive, and not a Map or a Set, whose
 * entries are no properties and would be ignored. */
function checkOptionsObject(what: string, value: unknown): asserts value is object {
  if (value === null || typeof value !== 'object') throw new TypeError(`${what} options must be an object`);
  if (types.isMap(value) || types.isSet(value)) {
    throw new TypeError(`${what} options must be an object with the options as its properties, not a ${types.isMap(value) ? 'Map' : 'Set'}`);
  }
}

function refuseUnknown(what: string, key: string, known: readonly string[]): never {
  const hint = closest(key, known);
  throw new TypeError(`unknown ${what} option '${key}'${hint ? ` (did you mean '${hint}'?)` : ''}; known options: ${known.join(', ')}`);
}

/**
 * The options as a copy of the object's own properties (enumerable or not), each read once,
 * without a prototype; an unknown own enumerable key is refused as `checkKeys` refuses it.
 * (Not one that is not enumerable: an array's `length`, an Error's `stack` or Vue 2's
 * `__ob__` on a reactive object would be refused as misspellings.) A Map or a Set is
 * refused: its entries are not its properties, and would be ignored.
 * Nothing inherited is an option: a property added to Object.prototype (`encryptionKey`,
 * `extensions`: a library loaded from a path) is not seen, and a class instance's option on
 * its prototype is a `TypeError`, never ignored in silence. One read per property: a getter
 * cannot answer one check and then another (a key present, then undefined, opened a
 * plaintext database).
 */
export function ownOptions<T>(what: string, value: unknown, known: readonly string[]): Partial<T> {
  checkOptionsObject(what, value);
  const copy: Record<string, unknown> = Object.create(null);
  for (const key of Object.getOwnPropertyNames(value)) {
    if (known.includes(key)) copy[key] = (value as Record<string, unknown>)[key];
    else if (Object.prototype.propertyIsEnumerable.call(value, key)) refuseUnknown(what, key, known);
  }
  // Object.prototype's properties are not options, and a plain object has no others to
  // inherit: only a class instance's prototypes are looked at (each look costs; experiment 089).
  let proto = Object.getPrototypeOf(value) as object | null;
  while (proto !== null && proto !== Object.prototype) {
    for (const key of known) {
      if (!(key in copy) && Object.hasOwn(proto, key)) {
        throw new TypeError(`${what} option '${key}' is inherited: options must be the object's own properties`);
      }
    }
    proto = Object.getPrototypeOf(proto) as object | null;
  }
  return copy as Partial<T>;
}

export function isPlainObject(v: unknown): v is Record<string, unknown> {
  if (v === null || typeof v !== 'object') return false;
  const proto = Object.getPrototypeOf(v) as object | null;
  return proto === Object.prototype || proto === null || isObjectPrototypeOfAnotherRealm(proto);
}

/** An object literal made in another realm (a `vm` context, an iframe) has that realm's
 * Object.prototype: a prototype of nothing, whose constructor is an engine's own `Object`. */
function isObjectPrototypeOfAnotherRealm(proto: object): boolean {
  if (Object.getPrototypeOf(proto) !== null) return false;
  const ctor = Object.getOwnPropertyDescriptor(proto, 'constructor')?.value as unknown;
  return typeof ctor === 'function' && Function.prototype.toString.call(ctor) === 'function Object() { [native code] }';
}

export function defaultReaders(): number {
  return Math.min(4, Math.max(2, availableParallelism() - 1));
}

export interface ResolvedOpenOptions {
  readers: number;
  readonly: boolean;
  intMode: IntMode;
  busyTimeout: number;
  pragmas: string[][];
  timeoutMs: number;
  externalCheckpoints: boolean;
  /** Undefined when the database is not encrypted. */
  encryption: KeyBytes | undefined;
  cipher: Cipher;
  extensions: string[] | undefined;
  /** The inline-read budget in microseconds; undefined when inline reads are off. */
  inlineBudgetUs: number | undefined;
}

/** `inlineReads: true`'s budget in microseconds (docs/decisions.md, "Inline reads"). */
export const DEFAULT_INLINE_BUDGET_US = 50;
const MAX_INLINE_BUDGET_US: number = binding.MAX_INLINE_BUDGET_US;

function checkInlineReads(v: unknown): number | undefined {
  if (v === undefined || v === false) return undefined;
  if (v === true) return DEFAULT_INLINE_BUDGET_US;
  if (!isPlainObject(v)) throw new TypeError('inlineReads must be a boolean or { budgetUs: number }');
  const us = ownOptions<{ budgetUs: unknown }>('inlineReads', v, ['budgetUs']).budgetUs;
  if (typeof us !== 'number') throw new TypeError('inlineReads.budgetUs must be a number of microseconds');
  if (!Number.isInteger(us) || us < 1 || us > MAX_INLINE_BUDGET_US) {
    throw new RangeError(`inlineReads.budgetUs must be an integer from 1 to ${MAX_INLINE_BUDGET_US} (microseconds)`);
  }
  return us;
}

function renderPragmaValue(name: string, v: unknown): string {
  if (typeof v === 'boolean') return v ? 'ON' : 'OFF';
  if (typeof v === 'number' && Number.isFinite(v)) return String(v);
  if (typeof v === 'string') {
    // Identifiers (keywords such as WAL, NORMAL) and numbers pass as written; anything else
    // is quoted as a string literal ('UTF-16le').
    return /^[A-Za-z_][A-Za-z0-9_]*$/.test(v) || /^[+-]?\d+(\.\d+)?$/.test(v) ? v : `'${v.replace(/'/g, "''")}'`;
  }
  throw new TypeError(`pragma '${name}' must be a string, a finite number or a boolean`);
}

export function resolveOpenOptions(options: unknown): ResolvedOpenOptions {
  // No options: the defaults, whatever Object.prototype holds.
  if (options === undefined) options = Object.create(null);
  if (!isPlainObject(options)) throw new TypeError('options must be a plain object');
  const o = ownOptions<OpenOptions>('open', options, [
    'readers',
    'readonly',
    'intMode',
    'pragmas',
    'busyTimeout',
    'timeoutMs',
    'encryptionKey',
    'cipher',
    'checkpoints',
    'extensions',
    'inlineReads',
  ]);
  // One rule for every option: null is not "the default" (an `encryptionKey: null` from a
  // missing setting must not open a plaintext database); only timeoutMs gives null a meaning.
  for (const [name, value] of Object.entries(o)) {
    if (value === null && name !== 'timeoutMs') throw new TypeError(`${name} may not be null (leave it out for the default)`);
  }
  // Present but undefined is a key that failed to load (`process.env.DB_KEY`), not a request
  // for a plaintext database.
  if ('encryptionKey' in o && o.encryptionKey === undefined) {
    throw new TypeError('encryptionKey is undefined: leave the option out to open an unencrypted database');
  }
  const readers = o.readers ?? defaultReaders();
  if (!Number.isInteger(readers) || readers < 1 || readers > 64) {
    throw new RangeError('readers must be an integer from 1 to 64');
  }
  if (o.readonly !== undefined && typeof o.readonly !== 'boolean') throw new TypeError('readonly must be a boolean');
  const intMode = o.intMode ?? 'auto';
  if (intMode !== 'auto' && intMode !== 'number' && intMode !== 'bigint') {
    throw new TypeError("intMode must be 'auto', 'number' or 'bigint'");
  }
  const busyTimeout = o.busyTimeout ?? 5000;
  if (!Number.isInteger(busyTimeout) || busyTimeout < 0 || busyTimeout > 0x7fffffff) {
    throw new RangeError('busyTimeout must be an integer from 0 to 2147483647 (milliseconds)');
  }
  const pragmas: string[][] = [];
  if (o.pragmas !== undefined) {
    if (!isPlainObject(o.pragmas)) throw new TypeError('pragmas must be a plain object');
    for (const [name, value] of Object.entries(o.pragmas)) {
      if (!/^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$/.test(name)) {
        throw new TypeError(`invalid pragma name '${name}'`);
      }
      pragmas.push([name, renderPragmaValue(name, value)]);
    }
  }
  const timeoutMs = o.timeoutMs === undefined ? 0 : checkTimeout(o.timeoutMs);
  const checkpoints = o.checkpoints ?? 'auto';
  if (checkpoints !== 'auto' && checkpoints !== 'external') {
    throw new TypeError("checkpoints must be 'auto' or 'external'");
  }
  const externalCheckpoints = checkpoints === 'external';
  const encryption = o.encryptionKey === undefined ? undefined : checkKey('encryptionKey', o.encryptionKey);
  const cipher = o.cipher ?? 'chacha20';
  if (!CIPHERS.includes(cipher)) throw new TypeError(`cipher must be one of ${CIPHERS.map((c) => `'${c}'`).join(', ')}`);
  if (o.cipher !== undefined && encryption === undefined) {
    throw new TypeError("the 'cipher' option needs 'encryptionKey' (the database is encrypted only with a key)");
  }
  const extensions = o.extensions === undefined ? undefined : checkExtensions(o.extensions);
  const inlineBudgetUs = checkInlineReads(o.inlineReads);
  return {
    readers,
    readonly: o.readonly ?? false,
    intMode,
    busyTimeout,
    pragmas,
    timeoutMs,
    externalCheckpoints,
    encryption,
    cipher,
    extensions,
    inlineBudgetUs,
  };
}

/** Extension paths: non-empty strings without NUL (the loader names a file that fails). */
function checkExtensions(v: unknown): string[] {
  if (!Array.isArray(v)) throw new TypeError('extensions must be an array of paths (strings)');
  // Indexed, not map(): map() skips the holes of a sparse array, which reached the addon.
  const paths: string[] = [];
  for (let i = 0; i < v.length; i++) paths.push(checkExtensionPath(v[i], `extensions[${i}]`));
  return paths;
}

export function checkExtensionPath(p: unknown, what: string): string {
  if (typeof p !== 'string' || p.length === 0 || p.includes('\0')) {
    throw new TypeError(`${what} must be a non-empty string without NUL characters (an extension's path)`);
  }
  return p;
}

/** A `timeoutMs` value as milliseconds, 0 for none. */
export function checkTimeout(v: unknown): number {
  if (v === null || v === 0 || v === Infinity) return 0;
  if (typeof v !== 'number') throw new TypeError('timeoutMs must be a number of milliseconds (or null for none)');
  if (!(v > 0 && v <= MAX_TIMEOUT_MS)) {
    throw new RangeError(`timeoutMs must be from 1 to ${MAX_TIMEOUT_MS} milliseconds, or 0, null or Infinity for none`);
  }
  return v;
}

const QUERY_KEYS = ['rowMode', 'signal', 'timeoutMs'] as const;
const CALL_KEYS = ['signal', 'timeoutMs'] as const;

/**
 * Checks the options of a query method. `withRowMode`: select/selectOne/execute (which also take
 * `rowMode`); `defaultTimeoutMs`: the database's default (0 for none).
 */
export function resolveCallOptions(options: unknown, withRowMode: boolean, defaultTimeoutMs: number): CallSettings {
  if (options === undefined) {
    return defaultTimeoutMs === 0 ? PLAIN : { rowMode: 'object', signal: undefined, timeoutMs: defaultTimeoutMs };
  }
  if (!isPlainObject(options)) throw new TypeError('query options must be a plain object');
  const o = ownOptions<QueryOptions>('query', options, withRowMode ? QUERY_KEYS : CALL_KEYS);
  let rowMode: RowMode = 'object';
  if (withRowMode) {
    rowMode = o.rowMode === undefined ? 'object' : o.rowMode;
    if (rowMode !== 'object' && rowMode !== 'array') throw new TypeError("rowMode must be 'object' or 'array'");
  }
  const signal = checkSignal(o.signal);
  const timeoutMs = o.timeoutMs === undefined ? defaultTimeoutMs : checkTimeout(o.timeoutMs);
  return { rowMode, signal, timeoutMs };
}

/** Every method's SQL passes here: SQLite stops reading text at a NUL, so whatever follows
 * one would silently not run. */
export function checkSql(sql: unknown): asserts sql is string {
  if (typeof sql !== 'string') throw new TypeError(`sql must be a string, got ${sql === null ? 'null' : typeof sql}`);
  if (sql.includes('\0')) throw new TypeError('SQL text contains a NUL character');
}

/** The path given to Database.open (a NUL would end it early in the operating system). */
export function checkPath(path: unknown): asserts path is string {
  if (typeof path !== 'string' || path.length === 0) {
    throw new TypeError('path must be a non-empty string (a file path, a file: URI or :memory:)');
  }
  if (path.includes('\0')) throw new TypeError('the database path contains a NUL character');
}

export function checkParams(params: unknown): void {
  if (params === undefined || params === null) return;
  // A lone view too: its bytes are one value (the addon refuses it as well, later; iterate()
  // and stream() throw here, when called).
  if (typeof params !== 'object' || ArrayBuffer.isView(params)) {
    throw new TypeError('params must be an array (positional) or an object (named); a lone Buffer needs wrapping in an array');
  }
  if (!isParamSet(params)) throw new TypeError('params must be an array or a plain object (not a Map, a Date or a class instance)');
}

const MAX_ARRAY_LENGTH = 2 ** 32 - 1;

/** `executeBatch`'s `paramSets` must be an array (its sets are checked by `takeParamSets`). */
export function checkParamSets(paramSets: unknown): asserts paramSets is readonly unknown[] {
  if (!Array.isArray(paramSets)) throw new TypeError('paramSets must be an array of arrays or objects');
}

/** `paramSets` as a new array of its sets, each read once, each an array or a plain object.
 * (A Proxy may claim any length: an impossible one is refused here.) */
export function takeParamSets(paramSets: readonly unknown[]): unknown[] {
  const n = paramSets.length;
  if (!(n <= MAX_ARRAY_LENGTH)) throw new RangeError('paramSets claims a length no array can have');
  const sets: unknown[] = new Array(n);
  for (let i = 0; i < n; i++) {
    const set = paramSets[i];
    // Refused as the addon refuses it, and at once: a sparse array that claims billions of
    // sets is not walked to its end.
    if (typeof set !== 'object' || set === null || !isParamSet(set)) {
      throw new TypeError(`paramSets[${i}] must be an array or a plain object`);
    }
    sets[i] = set;
  }
  return sets;
}

/** An array (a Proxy of one too), or a plain object: a `Map`'s entries, a `Date` or a class
 * instance are not named parameters (a Map was read by its own properties, none, and its
 * entries were ignored in silence). */
export function isParamSet(v: object): boolean {
  return Array.isArray(v) || isPlainObject(v);
}
