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
  FORMAT_VERSION: 2,
  HEADER_BYTES: 32,
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
const EMPTY_BIGS = new BigInt64Array(0);
const EMPTY_CHUNKS = new Float64Array(0);
const MAX_STRING_LENGTH = bufferConstants.MAX_STRING_LENGTH;

type Build = (
  rows: number,
  tags: Uint8Array,
  nums: Float64Array,
  bigs: BigInt64Array,
  rowChunks: Float64Array,
  cellChunks: Float64Array,
  buf: Buffer,
  textBase: number,
  latin1: boolean,
) => unknown[];

/** Builders by row mode and int mode, then by the column-name list: no key is concatenated
 * per result. */
const factories: Record<string, Map<string, Build>> = {};
const MAX_FACTORIES = 512;

function unsafeInteger(value: bigint): never {
  throw new RangeError(
    `integer ${value} does not fit in a JS number without losing precision (intMode is 'number'); ` +
      "use intMode 'auto' or 'bigint'",
  );
}

/** Decodes the text bytes [start, end) of `buf` as one string. A chunk longer than the
 * longest string V8 makes holds exactly one value, its first (crates/core/src/encode.rs):
 * the first TEXT cell from `cell` on, which the error names. */
function decodeChunk(
  buf: Buffer,
  start: number,
  end: number,
  latin1: boolean,
  names: string[],
  tags: Uint8Array,
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
  while (cell < tags.length && tags[cell] !== ENCODING.TAG_TEXT && tags[cell] !== ENCODING.TAG_TEXT_CHUNK) cell++;
  throw new RangeError(
    `the value of column ${JSON.stringify(names[cell % names.length])} is longer than the longest string ` +
      `JavaScript can hold (${MAX_STRING_LENGTH} characters); read it in parts with substr() or as a BLOB`,
  );
}

/** Generates the builder for one column list, row mode and integer mode. Each cell is an
 * inline expression (no call per cell): see docs/experiments/001-result-path.md. */
function makeFactory(names: string[], rowMode: RowMode, intMode: IntMode): Build {
  const int = intMode === 'bigint' ? 'BigInt(x)' : 'x';
  // Common tags first: INT, REAL, TEXT, NULL; BLOB and BIGINT go through small closures, and
  // so does a TEXT cell that starts a chunk inside a row (TAG_TEXT_CHUNK: rare, rows with a
  // lot of text). Chunks entered between rows switch in the row loop, outside the cells.
  const E = ENCODING;
  const cell =
    `(t = tags[i], x = nums[i++], t === ${E.TAG_INT} ? ${int} : t === ${E.TAG_REAL} ? x : ` +
    `t === ${E.TAG_TEXT} ? (s = text.slice(tp, x), tp = x, s) : t === ${E.TAG_NULL} ? null : ` +
    `t === ${E.TAG_BLOB} ? blob(x) : ` +
    `t === ${E.TAG_TEXT_CHUNK} ? (text = cellChunk(i - 1), tp = x, text.slice(0, x)) : big())`;
  let row: string;
  if (rowMode === 'array') {
    row = `[${names.map(() => cell).join(', ')}]`;
  } else {
    // A quoted `"__proto__": v` would set the prototype; a computed key defines a property.
    const fields = names.map((n) => (n === '__proto__' ? `["__proto__"]: ${cell}` : `${JSON.stringify(n)}: ${cell}`));
    row = `{ ${fields.join(', ')} }`;
  }
  const big = intMode === 'number' ? 'unsafeInteger(bigs[gp++])' : 'bigs[gp++]';
  const source = `
    return function build(n, tags, nums, bigs, rowChunks, cellChunks, buf, textBase, latin1) {
      let i = 0, tp = 0, bp = 0, gp = 0, t = 0, x = 0, s = '', text = '', kr = 0, kc = 0;
      let next = rowChunks.length === 0 ? -1 : rowChunks[0];
      const rl = rowChunks.length, cl = cellChunks.length;
      const textEnd = Math.max(rl === 0 ? 0 : rowChunks[rl - 1], cl === 0 ? 0 : cellChunks[cl - 1]);
      const blobBase = textBase + textEnd;
      const blob = (end) => { const b = Buffer.from(buf.subarray(blobBase + bp, blobBase + end)); bp = end; return b; };
      const big = () => ${big};
      const cellChunk = (cell) => {
        const str = decodeChunk(buf, textBase + cellChunks[kc], textBase + cellChunks[kc + 1], latin1, names, tags, cell);
        kc += 2;
        return str;
      };
      const out = new Array(n);
      for (let r = 0; r < n; r++) {
        if (r === next) {
          text = decodeChunk(buf, textBase + rowChunks[kr + 1], textBase + rowChunks[kr + 2], latin1, names, tags, i);
          tp = 0;
          kr += 3;
          next = kr < rl ? rowChunks[kr] : -1;
        }
        out[r] = ${row};
      }
      return out;
    };`;
  return new Function('unsafeInteger', 'Buffer', 'decodeChunk', 'names', source)(
    unsafeInteger,
    Buffer,
    decodeChunk,
    names,
  ) as Build;
}

function factoryFor(namesKey: string, rowMode: RowMode, intMode: IntMode): Build {
  const byNames = (factories[rowMode + intMode] ??= new Map<string, Build>());
  let f = byNames.get(namesKey);
  if (f === undefined) {
    if (byNames.size >= MAX_FACTORIES) byNames.clear();
    const names = namesKey.length === 0 ? [] : namesKey.slice(0, -1).split('\u0000');
    f = makeFactory(names, rowMode, intMode);
    byNames.set(namesKey, f);
  }
  return f;
}

/** Decodes a result buffer into rows. */
export function decodeRows(input: Buffer, rowMode: RowMode, intMode: IntMode): unknown[] {
  // Typed-array views need 8-byte alignment; buffers from the addon have it, copies may not.
  const buf = (input.byteOffset & 7) === 0 ? input : Buffer.from(input);
  const h = new Uint32Array(buf.buffer, buf.byteOffset, 8);
  if (h[0] !== FORMAT_VERSION) throw new Error(`quietsqlite: unknown result format ${h[0]}`);
  const rows = h[1]!;
  if (rows === 0) return [];
  const cols = h[2]!;
  const flags = h[3]!;
  const namesLen = h[4]!;
  const rowChunkCount = h[5]!;
  const cellChunkCount = h[6]!;
  const bigCount = h[7]!;
  const cells = rows * cols;
  let off = HEADER_BYTES;
  const nums = new Float64Array(buf.buffer, buf.byteOffset + off, cells);
  off += cells * 8;
  const bigs = bigCount === 0 ? EMPTY_BIGS : new BigInt64Array(buf.buffer, buf.byteOffset + off, bigCount);
  off += bigCount * 8;
  const rowChunks =
    rowChunkCount === 0 ? EMPTY_CHUNKS : new Float64Array(buf.buffer, buf.byteOffset + off, rowChunkCount * 3);
  off += rowChunkCount * 24;
  const cellChunks =
    cellChunkCount === 0 ? EMPTY_CHUNKS : new Float64Array(buf.buffer, buf.byteOffset + off, cellChunkCount * 2);
  off += cellChunkCount * 16;
  const tags = new Uint8Array(buf.buffer, buf.byteOffset + off, cells);
  off += cells;
  const namesKey = buf.toString('utf8', off, off + namesLen);
  off += namesLen;
  const latin1 = (flags & FLAG_ASCII_TEXT) !== 0;
  return factoryFor(namesKey, rowMode, intMode)(rows, tags, nums, bigs, rowChunks, cellChunks, buf, off, latin1);
}

/** The first row of a result, or undefined. */
export function decodeFirstRow(buf: Buffer, rowMode: RowMode, intMode: IntMode): unknown {
  return decodeRows(buf, rowMode, intMode)[0];
}

/** An i64 the binding delivered as number or bigint, under the database's intMode. */
export function convertInteger(value: number | bigint, intMode: IntMode): number | bigint {
  if (typeof value === 'number') return intMode === 'bigint' ? BigInt(value) : value;
  if (intMode === 'number') return unsafeInteger(value);
  return value;
}
