// Turns the native row encoding (crates/core/src/encode.rs) into JS rows. Rows are plain
// objects built by a function generated once per column list, so every row of a shape
// shares one hidden class; all text of a result is decoded with ONE string conversion and
// each field is a slice of it (see docs/experiments/001-result-path.md).

export type IntMode = 'auto' | 'number' | 'bigint';
export type RowMode = 'object' | 'array';
export type SqlValue = number | bigint | string | Buffer | null;
export type Row = Record<string, SqlValue>;

const HEADER_BYTES = 32;
const FLAG_ASCII_TEXT = 1;
const FORMAT_VERSION = 1;
const EMPTY_BIGS = new BigInt64Array(0);

type Build = (
  rows: number,
  tags: Uint8Array,
  nums: Float64Array,
  bigs: BigInt64Array,
  text: string,
  buf: Buffer,
  blobBase: number,
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

/** Generates the builder for one column list, row mode and integer mode. Each cell is an
 * inline expression (no call per cell): see docs/experiments/001-result-path.md. */
function makeFactory(names: string[], rowMode: RowMode, intMode: IntMode): Build {
  const int = intMode === 'bigint' ? 'BigInt(x)' : 'x';
  // Common tags first: INT, REAL, TEXT, NULL; BLOB and BIGINT go through small closures.
  const cell =
    `(t = tags[i], x = nums[i++], t === 5 ? ${int} : t === 1 ? x : ` +
    `t === 2 ? (s = text.slice(tp, x), tp = x, s) : t === 0 ? null : t === 3 ? blob(x) : big())`;
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
    return function build(n, tags, nums, bigs, text, buf, blobBase) {
      let i = 0, tp = 0, bp = 0, gp = 0, t = 0, x = 0, s = '';
      const blob = (end) => { const b = Buffer.from(buf.subarray(blobBase + bp, blobBase + end)); bp = end; return b; };
      const big = () => ${big};
      const out = new Array(n);
      for (let r = 0; r < n; r++) out[r] = ${row};
      return out;
    };`;
  return new Function('unsafeInteger', 'Buffer', source)(unsafeInteger, Buffer) as Build;
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
  const textLen = h[5]!;
  const bigCount = h[7]!;
  const cells = rows * cols;
  let off = HEADER_BYTES;
  const nums = new Float64Array(buf.buffer, buf.byteOffset + off, cells);
  off += cells * 8;
  const bigs = bigCount === 0 ? EMPTY_BIGS : new BigInt64Array(buf.buffer, buf.byteOffset + off, bigCount);
  off += bigCount * 8;
  const tags = new Uint8Array(buf.buffer, buf.byteOffset + off, cells);
  off += cells;
  const namesKey = buf.toString('utf8', off, off + namesLen);
  off += namesLen;
  const text = textLen === 0 ? '' : buf.toString(flags & FLAG_ASCII_TEXT ? 'latin1' : 'utf8', off, off + textLen);
  off += textLen;
  return factoryFor(namesKey, rowMode, intMode)(rows, tags, nums, bigs, text, buf, off);
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
