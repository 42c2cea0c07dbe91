// Turns the native row encoding (crates/core/src/encode.rs) into JS rows. Rows are plain
// objects built by a function generated once per column list, so every row of a shape
// shares one hidden class; the text of a result comes in chunks (about 64 KiB, cut between
// rows), each decoded with ONE string conversion, and each field is a slice of its chunk
// (see docs/experiments/001-result-path.md and 010-chunked-text.md): a kept field keeps at
// most its chunk alive, and no string is longer than a chunk.

import { constants as bufferConstants } from 'node:buffer';

export type IntMode = 'auto' | 'number' | 'bigint';
export type RowMode = 'object' | 'array';
export type SqlValue = number | bigint | string | Buffer | null;
export type Row = Record<string, SqlValue>;

/** Constants of the result encoding. Their home is crates/core/src/encode.rs;
 * test/24-result-memory.test.mjs checks that both sides agree. */
export const ENCODING = {
  FORMAT_VERSION: 3,
  HEADER_BYTES: 40,
  FLAG_ASCII_TEXT: 1,
  TAG_NULL: 0,
  TAG_REAL: 1,
  TAG_TEXT: 2,
  TAG_BLOB: 3,
  TAG_BIGINT: 4,
  TAG_INT: 5,
  TAG_TEXT_CHUNK: 6,
} as const;
const { HEADER_BYTES, FLAG_ASCII_TEXT, FORMAT_VERSION } = ENCODING;
/** Where the nums section starts, in float64s from the start of a result. */
const NUMS_AT = HEADER_BYTES / 8;
const EMPTY_BIGS = new BigInt64Array(0);
const MAX_STRING_LENGTH = bufferConstants.MAX_STRING_LENGTH;

/**
 * Builds the rows of one result. `buf` holds the result (not always at its start); `f` views
 * the same memory as float64s from the same start. Sections are found by position from
 * there: `tagsAt` and `textBase` in bytes, `numsAt`, `rowChunksAt` and `cellChunksAt` in
 * float64s (with their lengths).
 */
type Build = (
  rows: number,
  buf: Buffer,
  f: Float64Array,
  numsAt: number,
  tagsAt: number,
  bigs: BigInt64Array,
  rowChunksAt: number,
  rowChunksLen: number,
  cellChunksAt: number,
  cellChunksLen: number,
  textBase: number,
  latin1: boolean,
) => unknown[];

/** A column list seen before: its names as the encoding has them (to confirm that a hash
 * match is this list) and its builders, made on first use, by row mode and int mode. */
interface Shape {
  bytes: Uint8Array;
  names: string[];
  builds: (Build | undefined)[];
}

/** Column lists by the hash the encoder writes of their names (crates/core/src/encode.rs),
 * cut to 30 bits so that the key is a small integer: a result of a known list decodes no
 * names. Lists whose hashes agree share an entry. Bounded: all are forgotten when full. */
const shapes = new Map<number, Shape[]>();
let shapeCount = 0;
const MAX_SHAPES = 512;
/** Row builders generated since the process started (tests check that known lists reuse theirs). */
let buildersMade = 0;

/** The value stays out of the message, as parameter values do: it can be one. */
function unsafeInteger(_value: bigint): never {
  throw new RangeError(
    "an integer of the result is beyond 2^53 and does not fit in a JS number without losing precision (intMode is 'number'); " +
      "use intMode 'auto' or 'bigint'",
  );
}

/** Decodes the text bytes [start, end) of `buf` as one string. A chunk longer than the
 * longest string V8 makes holds exactly one value, its first (crates/core/src/encode.rs):
 * the first TEXT cell from `cell` on (of `cells`, tagged from `tagsAt`), which the error names. */
function decodeChunk(
  buf: Buffer,
  start: number,
  end: number,
  latin1: boolean,
  names: string[],
  tagsAt: number,
  cells: number,
  cell: number,
): string {
  if (end - start <= MAX_STRING_LENGTH) return buf.toString(latin1 ? 'latin1' : 'utf8', start, end);
  if (!latin1) {
    // More UTF-8 bytes than Node decodes at once, maybe fewer characters than the limit:
    // decode pieces cut at character boundaries and join them (the join throws if not).
    try {
      let out = '';
      for (let a = start; a < end; ) {
        let b = Math.min(end, a + MAX_STRING_LENGTH);
        while (b < end && (buf[b]! & 0xc0) === 0x80) b--; // not inside a character
        out += buf.toString('utf8', a, b);
        a = b;
      }
      return out;
    } catch (e) {
      if (!(e instanceof RangeError)) throw e;
    }
  }
  const tagOf = (c: number): number => buf[tagsAt + c]!;
  while (cell < cells && tagOf(cell) !== ENCODING.TAG_TEXT && tagOf(cell) !== ENCODING.TAG_TEXT_CHUNK) cell++;
  throw new RangeError(
    `the value of column ${JSON.stringify(names[cell % names.length])} is longer than the longest string ` +
      `JavaScript can hold (${MAX_STRING_LENGTH} characters); read it in parts with substr() or as a BLOB`,
  );
}

/** The prototype of rows, as it was when this module loaded. */
const OBJECT_PROTOTYPE: object = Object.prototype;

/** Whether object rows of `names` can be made by assignment in a constructor: no name is
 * found on Object.prototype, where a setter or a read-only value would catch it. */
function byConstructor(names: string[]): boolean {
  return names.every((n) => !(n in OBJECT_PROTOTYPE));
}

/** The source of the builder for one column list, row mode and integer mode (exported for
 * tests). Each cell is an inline expression (no call per cell): see
 * docs/experiments/001-result-path.md. */
export function builderSource(names: string[], rowMode: RowMode, intMode: IntMode): string {
  const int = intMode === 'bigint' ? 'BigInt(x)' : 'x';
  // Common tags first: INT, REAL, TEXT, NULL; BLOB and BIGINT go through small closures, and
  // so does a TEXT cell that starts a chunk inside a row (TAG_TEXT_CHUNK: rare, rows with a
  // lot of text). Chunks entered between rows switch in the row loop, outside the cells.
  // Tags are read from `buf` and values from `f` at fixed distances from the cell index.
  const E = ENCODING;
  const cell =
    `(t = buf[ta + i], x = f[na + i++], t === ${E.TAG_INT} ? ${int} : t === ${E.TAG_REAL} ? x : ` +
    `t === ${E.TAG_TEXT} ? (s = text.slice(tp, x), tp = x, s) : t === ${E.TAG_NULL} ? null : ` +
    `t === ${E.TAG_BLOB} ? blob(x) : ` +
    `t === ${E.TAG_TEXT_CHUNK} ? (text = cellChunk(i - 1), tp = x, text.slice(0, x)) : big())`;
  let row: string;
  let rowClass = '';
  if (rowMode === 'array') {
    // A rest parameter, not an array literal: it has no allocation site either (see below).
    // Its arrays hold any value, so all-number rows box their doubles (experiment 081).
    rowClass = `
      const arrayOf = (...values) => values;`;
    row = `arrayOf(${names.map(() => cell).join(', ')})`;
  } else if (byConstructor(names)) {
    // A constructor, not a literal (experiment 081): it has no allocation site for V8 to
    // decide to allocate in the old generation, and after a first row of nulls its fields
    // hold any value, so optimized code keeps small integers unboxed. Named `Object`, with
    // Object.prototype as its prototype, so rows are plain objects to debuggers too. Strict:
    // a read-only property added to Object.prototype later throws instead of dropping a field.
    const args = names.map((_, k) => `c${k}`);
    rowClass = `
      const Row = (() => {
        function Object(${args.join(', ')}) {
          'use strict';
          ${names.map((n, k) => `this[${JSON.stringify(n)}] = ${args[k]};`).join(' ')}
        }
        Object.prototype = objectPrototype;
        new Object(${names.map(() => 'null').join(', ')});
        return Object;
      })();`;
    row = `new Row(${names.map(() => cell).join(', ')})`;
  } else {
    // A quoted `"__proto__": v` would set the prototype; a computed key defines a property.
    const fields = names.map((n) => (n === '__proto__' ? `["__proto__"]: ${cell}` : `${JSON.stringify(n)}: ${cell}`));
    row = `{ ${fields.join(', ')} }`;
  }
  const big = intMode === 'number' ? 'unsafeInteger(bigs[gp++])' : 'bigs[gp++]';
  return `${rowClass}
    return function build(n, buf, f, na, ta, bigs, rc, rl, cc, cl, textBase, latin1) {
      let i = 0, tp = 0, bp = 0, gp = 0, t = 0, x = 0, s = '', text = '', kr = 0, kc = 0;
      let next = rl === 0 ? -1 : f[rc];
      const textEnd = Math.max(rl === 0 ? 0 : f[rc + rl - 1], cl === 0 ? 0 : f[cc + cl - 1]);
      const blobBase = textBase + textEnd;
      const cells = n * names.length;
      const blob = (end) => { const b = Buffer.from(buf.subarray(blobBase + bp, blobBase + end)); bp = end; return b; };
      const big = () => ${big};
      const cellChunk = (cell) => {
        const str = decodeChunk(buf, textBase + f[cc + kc], textBase + f[cc + kc + 1], latin1, names, ta, cells, cell);
        kc += 2;
        return str;
      };
      const out = new Array(n);
      for (let r = 0; r < n; r++) {
        if (r === next) {
          text = decodeChunk(buf, textBase + f[rc + kr + 1], textBase + f[rc + kr + 2], latin1, names, ta, cells, i);
          tp = 0;
          kr += 3;
          next = kr < rl ? f[rc + kr] : -1;
        }
        out[r] = ${row};
      }
      return out;
    };`;
}

/** False once the process refused to compile a builder: it forbids code generation from
 * strings (`node --disallow-code-generation-from-strings`, a locked-down realm). */
let codeFromStrings = true;

/** The builder for one column list, row mode and integer mode: generated, or interpreted
 * where code generation is forbidden. */
function makeFactory(names: string[], rowMode: RowMode, intMode: IntMode): Build {
  if (codeFromStrings) {
    const source = builderSource(names, rowMode, intMode);
    let factory: (...args: unknown[]) => Build;
    try {
      factory = new Function('unsafeInteger', 'Buffer', 'decodeChunk', 'names', 'objectPrototype', source) as typeof factory;
    } catch (err) {
      // A SyntaxError is a fault of builderSource, not of the process: it surfaces.
      if (err instanceof SyntaxError) throw err;
      codeFromStrings = false;
      return interpretedBuilder(names, rowMode, intMode);
    }
    return factory(unsafeInteger, Buffer, decodeChunk, names, OBJECT_PROTOTYPE);
  }
  return interpretedBuilder(names, rowMode, intMode);
}

/** builderSource's builder as a closure that reads cell after cell in a loop: the same rows
 * (test/11 compares them in a child process that forbids code generation), more slowly. */
function interpretedBuilder(names: string[], rowMode: RowMode, intMode: IntMode): Build {
  const E = ENCODING;
  const width = names.length;
  // As builderSource: assignment where no name is on Object.prototype, else a definition
  // (which is what an object literal's fields are).
  const defining = rowMode === 'object' && !byConstructor(names);
  return (n, buf, f, na, ta, bigs, rc, rl, cc, cl, textBase, latin1) => {
    let i = 0, tp = 0, bp = 0, gp = 0, text = '', kr = 0, kc = 0;
    let next = rl === 0 ? -1 : f[rc]!;
    const textEnd = Math.max(rl === 0 ? 0 : f[rc + rl - 1]!, cl === 0 ? 0 : f[cc + cl - 1]!);
    const blobBase = textBase + textEnd;
    const cells = n * width;
    const cell = (): unknown => {
      const t = buf[ta + i]!;
      const x = f[na + i++]!;
      switch (t) {
        case E.TAG_INT:
          return intMode === 'bigint' ? BigInt(x) : x;
        case E.TAG_REAL:
          return x;
        case E.TAG_TEXT: {
          const s = text.slice(tp, x);
          tp = x;
          return s;
        }
        case E.TAG_NULL:
          return null;
        case E.TAG_BLOB: {
          const b = Buffer.from(buf.subarray(blobBase + bp, blobBase + x));
          bp = x;
          return b;
        }
        case E.TAG_TEXT_CHUNK:
          text = decodeChunk(buf, textBase + f[cc + kc]!, textBase + f[cc + kc + 1]!, latin1, names, ta, cells, i - 1);
          kc += 2;
          tp = x;
          return text.slice(0, x);
        default: {
          const big = bigs[gp++]!;
          return intMode === 'number' ? unsafeInteger(big) : big;
        }
      }
    };
    const out = new Array<unknown>(n);
    for (let r = 0; r < n; r++) {
      if (r === next) {
        text = decodeChunk(buf, textBase + f[rc + kr + 1]!, textBase + f[rc + kr + 2]!, latin1, names, ta, cells, i);
        tp = 0;
        kr += 3;
        next = kr < rl ? f[rc + kr]! : -1;
      }
      if (rowMode === 'array') {
        const row = new Array<unknown>(width);
        for (let k = 0; k < width; k++) row[k] = cell();
        out[r] = row;
      } else {
        const row: Record<string, unknown> = {};
        for (let k = 0; k < width; k++) {
          const value = cell();
          if (defining) Object.defineProperty(row, names[k]!, { value, writable: true, enumerable: true, configurable: true });
          else row[names[k]!] = value;
        }
        out[r] = row;
      }
    }
    return out;
  };
}

/** The column list whose names take `len` bytes at `at` in `buf` and hash to `hash`. */
function shapeOf(buf: Buffer, at: number, len: number, hash: number): Shape {
  const key = hash & 0x3fffffff;
  const same = shapes.get(key);
  if (same !== undefined) {
    for (let k = 0; k < same.length; k++) {
      const b = same[k]!.bytes;
      if (b.length !== len) continue;
      let i = 0;
      while (i < len && b[i] === buf[at + i]) i++;
      if (i === len) return same[k]!;
    }
  }
  if (shapeCount >= MAX_SHAPES) {
    shapes.clear();
    shapeCount = 0;
  }
  const text = buf.toString('utf8', at, at + len);
  const shape: Shape = {
    bytes: new Uint8Array(buf.subarray(at, at + len)),
    names: text.length === 0 ? [] : text.slice(0, -1).split('\u0000'),
    builds: [],
  };
  const list = shapes.get(key);
  if (list === undefined) shapes.set(key, [shape]);
  else list.push(shape);
  shapeCount++;
  return shape;
}

/** Where a shape keeps its builder for these modes. Unknown values (validated away before
 * this) fall where makeFactory's defaults would build them, so a slot holds one kind of builder. */
const slotOf = (rowMode: RowMode, intMode: IntMode): number =>
  (rowMode === 'array' ? 3 : 0) + (intMode === 'bigint' ? 2 : intMode === 'number' ? 1 : 0);

/** Column lists known and row builders made so far (for tests). */
export function rowShapeStats(): { shapes: number; buildersMade: number } {
  return { shapes: shapeCount, buildersMade };
}

/** A little-endian u32 of the header. */
const u32 = (buf: Buffer, at: number): number =>
  (buf[at]! | (buf[at + 1]! << 8) | (buf[at + 2]! << 16)) + buf[at + 3]! * 0x1000000;

/** Decodes a result buffer into rows. */
export function decodeRows(input: Buffer, rowMode: RowMode, intMode: IntMode): unknown[] {
  // Float64 views need 8-byte alignment; buffers from the addon have it, copies may not.
  const buf = (input.byteOffset & 7) === 0 ? input : Buffer.from(input);
  return decodeRowsIn(buf, undefined, 0, rowMode, intMode);
}

/**
 * Decodes the result at byte `at` (a multiple of 8) of `buf` (8-byte aligned). `view`, when
 * given, is a Float64Array over all of `buf`'s memory, kept by a caller that decodes into
 * one buffer again and again (inline reads, completion batches); otherwise one is made.
 */
export function decodeRowsIn(
  buf: Buffer,
  view: Float64Array | undefined,
  at: number,
  rowMode: RowMode,
  intMode: IntMode,
): unknown[] {
  if (u32(buf, at) !== FORMAT_VERSION) throw new Error(`quietsqlite: unknown result format ${u32(buf, at)}`);
  const rows = u32(buf, at + 4);
  if (rows === 0) return [];
  const cells = rows * u32(buf, at + 8);
  const flags = u32(buf, at + 12);
  const namesLen = u32(buf, at + 16);
  const rowChunksLen = u32(buf, at + 20) * 3;
  const cellChunksLen = u32(buf, at + 24) * 2;
  const bigCount = u32(buf, at + 28);
  const hash = u32(buf, at + 32);
  const numsAt = at / 8 + NUMS_AT;
  const rowChunksAt = numsAt + cells + bigCount;
  const cellChunksAt = rowChunksAt + rowChunksLen;
  const tagsAt = (cellChunksAt + cellChunksLen) * 8;
  const f = view ?? new Float64Array(buf.buffer, buf.byteOffset, tagsAt / 8);
  const bigs = bigCount === 0 ? EMPTY_BIGS : new BigInt64Array(buf.buffer, buf.byteOffset + (numsAt + cells) * 8, bigCount);
  const namesAt = tagsAt + cells;
  const shape = shapeOf(buf, namesAt, namesLen, hash);
  const slot = slotOf(rowMode, intMode);
  let build = shape.builds[slot];
  if (build === undefined) {
    build = shape.builds[slot] = makeFactory(shape.names, rowMode, intMode);
    buildersMade++;
  }
  const latin1 = (flags & FLAG_ASCII_TEXT) !== 0;
  return build(rows, buf, f, numsAt, tagsAt, bigs, rowChunksAt, rowChunksLen, cellChunksAt, cellChunksLen, namesAt + namesLen, latin1);
}

/** An i64 the binding delivered as number or bigint, under the database's intMode. */
export function convertInteger(value: number | bigint, intMode: IntMode): number | bigint {
  if (typeof value === 'number') return intMode === 'bigint' ? BigInt(value) : value;
  if (intMode === 'number') return unsafeInteger(value);
  return value;
}
