// Packing parameters: executeBatch's sets (docs/experiments/005-batch-params.md) and one
// request's positional values (078). They become flat typed arrays plus one joined string,
// so they cross into native code with a handful of copies instead of one Node-API
// conversion per value. The type rules are those of DESIGN.md ("Values"). A batch value
// that breaks them is reported here, naming it, before anything is sent; a request's is
// left to the binding, which names it as it always has.

import { types } from 'node:util';
import { binding } from './native';

const { isProxy } = types;

export const PACKED_NULL = 0;
export const PACKED_INTEGER = 1;
export const PACKED_REAL = 2;
export const PACKED_TEXT = 3;
export const PACKED_BLOB = 4;
export const PACKED_BIGINT = 5;

export interface PackedSets {
  setLens: Uint32Array;
  tags: Uint8Array;
  nums: Float64Array;
  bigs: BigInt64Array;
  text: string;
  /** Every BLOB's bytes, back to back (`nums` holds each one's length): valid until
   * `release()`, which the caller makes once the addon has copied them. */
  blobs: Buffer;
  release(): void;
}

/** The most parameters one statement takes (one truth: the native core's constant). */
export const MAX_PARAMETERS: number = binding.MAX_PARAMETERS;
/** The longest TEXT or BLOB value, in bytes (SQLite's limit, the core's constant). */
const MAX_VALUE_BYTES: number = binding.MAX_VALUE_BYTES;

// The engine's own getters, not properties an object may shadow (`{ byteLength: 1e9 }` on a
// Uint8Array instance): a view binds exactly its own bytes.
const typedArrayProto = Object.getPrototypeOf(Uint8Array.prototype) as object;
function intrinsicGetter(proto: object, name: string): (this: unknown) => unknown {
  return Object.getOwnPropertyDescriptor(proto, name)!.get!;
}
const TA_BUFFER = intrinsicGetter(typedArrayProto, 'buffer');
const TA_OFFSET = intrinsicGetter(typedArrayProto, 'byteOffset');
const TA_LENGTH = intrinsicGetter(typedArrayProto, 'byteLength');
const DV_BUFFER = intrinsicGetter(DataView.prototype, 'buffer');
const DV_OFFSET = intrinsicGetter(DataView.prototype, 'byteOffset');
const DV_LENGTH = intrinsicGetter(DataView.prototype, 'byteLength');

// ES2024 string methods (Node 20+), not in the ES2022 lib this package compiles against.
type Es2024String = string & { isWellFormed(): boolean; toWellFormed(): string };
function wellFormed(x: string): string {
  const s = x as Es2024String;
  return s.isWellFormed() ? x : s.toWellFormed();
}

/** A Buffer over exactly the bytes of an ArrayBuffer view (no copy). A view of a detached
 * buffer has no bytes: an empty BLOB, as `execute` binds it. */
function viewBytes(x: ArrayBufferView): Buffer {
  const dv = x instanceof DataView;
  let length: number;
  try {
    length = (dv ? DV_LENGTH : TA_LENGTH).call(x) as number;
  } catch {
    // DataView's getter throws on a detached buffer (a typed array's answers 0).
    return Buffer.alloc(0);
  }
  if (length === 0) return Buffer.alloc(0);
  const buffer = (dv ? DV_BUFFER : TA_BUFFER).call(x) as ArrayBuffer;
  const offset = (dv ? DV_OFFSET : TA_OFFSET).call(x) as number;
  return Buffer.from(buffer, offset, length);
}

/** TEXT the packed path joins into one string at most (UTF-16 units): V8's strings end near
 * 2^29; larger batches take the per-value path, which has no such total. */
const PACKED_TEXT_MAX = 1 << 28;

const INT64_MIN = -9223372036854775808;
const INT64_LIMIT = 9223372036854775808;

/** How a number binds, as the binding's `to_value` binds it: an integral number within
 * int64 as an INTEGER, any other as a REAL (2^63 itself does not fit). */
function numberTag(x: number): number {
  return Number.isInteger(x) && x >= INT64_MIN && x < INT64_LIMIT ? PACKED_INTEGER : PACKED_REAL;
}

function unsupported(where: string, v: unknown): TypeError {
  const kind = v === null ? 'null' : typeof v === 'object' ? 'object' : typeof v;
  return new TypeError(
    `${where} has an unsupported type (${kind}); use a number, bigint, string, boolean, null, Buffer or typed array`,
  );
}

/** The most values `packParams` packs; longer arrays take the per-value path. */
const PACK_MAX_VALUES = 32;
/** The most TEXT (UTF-16 units) `packParams` joins: large values gain nothing from packing,
 * and no packed value can then reach SQLite's length limit. */
const PACK_MAX_TEXT = 1 << 16;

/** One request's packed parameters: the count, then a tag and a number per value
 * (`unpack_params` in the core reads it). Reused by every request: filled by `packParams`
 * and read by the native call made right after it, before any other JavaScript runs. */
export const PACKED_LAYOUT = new Float64Array(1 + 2 * PACK_MAX_VALUES);
let packing = false;

/**
 * Packs one request's positional parameters into `PACKED_LAYOUT` and returns their TEXT
 * joined (docs/experiments/078-packed-request-parameters.md). The type rules are
 * `to_value`'s in the binding. Otherwise it returns what to send value by value:
 * - undefined, having read no value: `params` itself goes (not an array, fewer than 2 or
 *   more than 32 values, or a call made while packing: a getter of an element that sends a
 *   request of its own must not overwrite the layout);
 * - an array of the values, from the value that cannot be packed (a BLOB, a BigInt, a value
 *   of a refused type, which the binding then names, or text past the bound): each element
 *   is read once, and none after a refused one, as the binding alone would read them.
 */
export function packParams(params: unknown): string | unknown[] | undefined {
  // A Proxy of an array was made a plain array by `bindable`; one of an object fails
  // Array.isArray without calling a trap.
  if (packing || !Array.isArray(params)) return undefined;
  const n = params.length;
  if (n < 2 || n > PACK_MAX_VALUES) return undefined;
  packing = true;
  try {
    const layout = PACKED_LAYOUT;
    let text = '';
    for (let j = 0; j < n; j++) {
      const x: unknown = params[j];
      const at = 1 + 2 * j;
      switch (typeof x) {
        case 'number':
          layout[at] = numberTag(x);
          layout[at + 1] = x;
          break;
        case 'string':
          if (text.length + x.length > PACK_MAX_TEXT) return unpacked(params as unknown[], n, j, x, text);
          layout[at] = PACKED_TEXT;
          layout[at + 1] = x.length;
          text += wellFormed(x);
          break;
        case 'boolean':
          layout[at] = PACKED_INTEGER;
          layout[at + 1] = x ? 1 : 0;
          break;
        case 'undefined':
          layout[at] = PACKED_NULL;
          break;
        case 'object':
          if (x !== null) return unpacked(params as unknown[], n, j, x, text);
          layout[at] = PACKED_NULL;
          break;
        default:
          // A BigInt, or a value the binding refuses.
          return unpacked(params as unknown[], n, j, x, text);
      }
    }
    layout[0] = n;
    return text;
  } finally {
    packing = false;
  }
}

/** Whether the binding refuses `x` as a parameter by its type or range (it then names it,
 * and reads no value after it). */
function refused(x: unknown): boolean {
  switch (typeof x) {
    case 'function':
    case 'symbol':
      return true;
    case 'object':
      return x !== null && !ArrayBuffer.isView(x);
    case 'bigint':
      return BigInt.asIntN(64, x) !== x;
    default:
      return false;
  }
}

/** The values of `params` for the per-value path, when its value `x` at `j` (of `n`) cannot
 * be packed: those before it taken back from the layout and `text` (a boolean as 1 or 0, a
 * string well-formed: each binds as the original does), `x`, then the rest, read now, up to
 * and including the first the binding refuses: it names that one, and, as when it reads
 * the array itself, nothing after it is read. */
function unpacked(params: unknown[], n: number, j: number, x: unknown, text: string): unknown[] {
  const layout = PACKED_LAYOUT;
  const values: unknown[] = [];
  let t = 0;
  for (let k = 0; k < j; k++) {
    const tag = layout[1 + 2 * k];
    const num = layout[2 + 2 * k]!;
    if (tag === PACKED_TEXT) {
      values[k] = text.slice(t, t + num);
      t += num;
    } else {
      values[k] = tag === PACKED_NULL ? null : num;
    }
  }
  values[j] = x;
  // Views before this index are copies already (ours: no getter can reach them).
  let copied = 0;
  for (let k = j + 1; k < n && !refused(values[k - 1]); k++) {
    // The binding copies a view's bytes when it reads the view. Reading a later element may
    // run a getter (an accessor, or a hole's prototype), which could change or detach the
    // bytes of a view read before it: those are copied first, so what binds is what the
    // view held when it was read, as when the binding reads the array itself.
    if (!isDataProperty(params, k)) {
      copyViews(values, copied, k);
      copied = k;
    }
    values[k] = params[k];
  }
  return values;
}

function isDataProperty(a: unknown[], k: number): boolean {
  const d = Object.getOwnPropertyDescriptor(a, k);
  return d !== undefined && 'value' in d;
}

/** A view as a copy of its bytes (read with the engine's own getters, as `execute` reads
 * them); any other value as it is. */
function copyOfView(v: unknown): unknown {
  return ArrayBuffer.isView(v) ? Buffer.from(viewBytes(v)) : v;
}

/** Replaces each view in `values[from..end)` by a copy of its bytes. */
function copyViews(values: unknown[], from: number, end: number): void {
  for (let k = from; k < end; k++) values[k] = copyOfView(values[k]);
}

/**
 * A packed part's BLOBs, copied back to back as they are read. One buffer is kept for the
 * next part (a copy per BLOB, each a Buffer of its own, made a batch of small BLOBs 25-50%
 * slower: docs/experiments/088). It stays in use until the caller releases it after the
 * addon's copy: any code that runs before then (a getter that sends a batch, a hook of
 * `instanceof`) packs into one of its own. A kept buffer that grew past KEPT_MAX is let go
 * once used; the one kept is zeroed, so that it holds none of the caller's bytes.
 */
class BlobBytes {
  static #kept: Buffer | undefined;
  static #inUse = false;
  static readonly KEPT_MAX = 4 << 20;

  #buf: Buffer;
  #used = 0;
  readonly #shared: boolean;

  private constructor(buf: Buffer, shared: boolean) {
    this.#buf = buf;
    this.#shared = shared;
  }

  /** A buffer to copy a part's BLOBs into; `release()` it when the packing ends. */
  static take(): BlobBytes {
    if (BlobBytes.#inUse) return new BlobBytes(Buffer.allocUnsafeSlow(1024), false);
    const buf = (BlobBytes.#kept ??= Buffer.alloc(64 * 1024));
    BlobBytes.#inUse = true;
    return new BlobBytes(buf, true);
  }

  push(bytes: Buffer): void {
    const need = this.#used + bytes.length;
    if (need > this.#buf.length) {
      const grown = Buffer.allocUnsafeSlow(Math.max(need, this.#buf.length * 2));
      this.#buf.copy(grown, 0, 0, this.#used);
      this.#buf = grown;
    }
    bytes.copy(this.#buf, this.#used);
    this.#used = need;
  }

  /** The bytes copied: valid until the next packing (the addon copies them at once). */
  bytes(): Buffer {
    return this.#buf.subarray(0, this.#used);
  }

  /** Its bytes are no longer needed (copied by the addon, or the packing failed): the kept
   * buffer may be used again. */
  release(): void {
    if (!this.#shared) return;
    BlobBytes.#inUse = false;
    if (this.#buf.length > BlobBytes.KEPT_MAX) {
      BlobBytes.#kept = undefined;
      return;
    }
    this.#buf.fill(0, 0, this.#used);
    this.#used = 0;
    BlobBytes.#kept = this.#buf;
  }
}

/** Packs `sets[from..to)` when every one of them is an array; undefined otherwise (named sets
 * take the per-value path). Throws TypeError/RangeError for a value that cannot be bound,
 * naming it by its index in `sets`. The caller releases what it returns once the addon has
 * copied it. */
export function packParamSets(sets: readonly unknown[], from = 0, to = sets.length): PackedSets | undefined {
  let total = 0;
  // Each set and its length are read once: a set that grew while its values were read (a
  // getter pushing to it) shifted its extra values into the next sets.
  const count = to - from;
  const taken: unknown[][] = new Array(count);
  const setLens = new Uint32Array(count);
  for (let k = 0; k < count; k++) {
    const s = sets[from + k];
    if (!Array.isArray(s)) return undefined;
    taken[k] = s;
    setLens[k] = s.length;
    // A sparse set may claim 2^32-1 values: refused before anything is sized by it.
    if (s.length > MAX_PARAMETERS) {
      throw new RangeError(
        `paramSets[${from + k}] has ${s.length} elements; a statement takes at most ${MAX_PARAMETERS} parameters`,
      );
    }
    total += s.length;
  }
  const tags = new Uint8Array(total);
  const nums = new Float64Array(total);
  const texts: string[] = [];
  const bigs: bigint[] = [];
  const blobs = BlobBytes.take();
  let packed = false;
  try {
    let v = 0;
    let textUnits = 0;
    for (let k = 0; k < count; k++) {
      const set = taken[k]!;
      const n = setLens[k]!;
      const i = from + k;
      for (let j = 0; j < n; j++, v++) {
        const x = set[j];
        switch (typeof x) {
          case 'number':
            tags[v] = numberTag(x);
            nums[v] = x;
            break;
          case 'string':
            tags[v] = PACKED_TEXT;
            nums[v] = x.length;
            // Each value is made well-formed on its own (a lone surrogate becomes U+FFFD, as
            // `execute` converts it): joined raw, a lone surrogate at a value's edge could pair
            // with its neighbour's and shift every later value. U+FFFD keeps the UTF-16 length.
            texts.push(wellFormed(x));
            textUnits += x.length;
            if (textUnits > PACKED_TEXT_MAX) return undefined;
            break;
          case 'boolean':
            tags[v] = PACKED_INTEGER;
            nums[v] = x ? 1 : 0;
            break;
          case 'bigint':
            if (BigInt.asIntN(64, x) !== x) {
              throw new RangeError(`paramSets[${i}][${j}] is a BigInt outside the 64-bit signed integer range`);
            }
            tags[v] = PACKED_BIGINT;
            bigs.push(x);
            break;
          case 'undefined':
            tags[v] = PACKED_NULL;
            break;
          case 'object':
            if (x === null) {
              tags[v] = PACKED_NULL;
            } else if (ArrayBuffer.isView(x)) {
              const bytes = viewBytes(x);
              // Refused before anything is copied, as `execute` refuses it.
              if (bytes.length > MAX_VALUE_BYTES) {
                throw new RangeError(`paramSets[${i}][${j}] is longer than SQLite's limit of ${MAX_VALUE_BYTES} bytes`);
              }
              tags[v] = PACKED_BLOB;
              nums[v] = bytes.length;
              // Copied now: a getter of a later value may change, detach or shrink these bytes
              // before the addon copies them (as `execute` binds what a view held when read).
              blobs.push(bytes);
            } else {
              throw unsupported(`paramSets[${i}][${j}]`, x);
            }
            break;
          default:
            throw unsupported(`paramSets[${i}][${j}]`, x);
        }
      }
    }
    const out = {
      setLens,
      tags,
      nums,
      bigs: BigInt64Array.from(bigs),
      text: texts.join(''),
      blobs: blobs.bytes(),
      release: () => blobs.release(),
    };
    packed = true;
    return out;
  } finally {
    if (!packed) blobs.release();
  }
}

/**
 * What the binding is given for a request's `params`: a Proxy of an array as a plain copy of
 * its values as they are now (`paramsAsOfNow`), anything else as it is. Array.isArray says
 * such a Proxy is an array, but the binding's own test does not, and it bound one by name
 * ('0', '1', ...) where `iterate()` and `executeBatch` bound it by position.
 */
export function bindable(params: unknown): unknown {
  return isProxy(params) && Array.isArray(params) ? paramsAsOfNow(params) : params;
}

/**
 * The parameters as they are now, for a request that converts them later (`iterate()` binds
 * at its first `next()`): the array or object is copied, and so are the bytes of any view in
 * it, so that changing them after the call changes nothing, as for every other method.
 */
export function paramsAsOfNow(params: unknown): unknown {
  // A lone view is refused by the conversion later, with select()'s message.
  if (params === undefined || params === null || typeof params !== 'object' || ArrayBuffer.isView(params)) return params;
  if (Array.isArray(params)) {
    // Checked before anything is sized by it: a sparse array may claim 2^32-1 elements
    // (copying those blocked the event loop for minutes).
    if (params.length > MAX_PARAMETERS) {
      throw new RangeError(`params has ${params.length} elements; a statement takes at most ${MAX_PARAMETERS} parameters`);
    }
    const out: unknown[] = new Array(params.length);
    for (let i = 0; i < params.length; i++) out[i] = copyOfView(params[i]);
    return out;
  }
  // Any other object is read now, its own enumerable keys as the conversion reads them (a
  // class instance left as it was bound the values it had at the first next()).
  // Without a prototype: an own `__proto__` key (JSON.parse makes one) is a key like any other
  // here, as the binding reads it, not a change of the copy's prototype.
  const out: Record<string, unknown> = Object.create(null) as Record<string, unknown>;
  for (const key of Object.keys(params)) out[key] = copyOfView((params as Record<string, unknown>)[key]);
  return out;
}
