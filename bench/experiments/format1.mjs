// Helpers for the row-path experiments: split an encoded result (the current format, with
// chunked text: crates/core/src/encode.rs) into its parts and re-assemble it, in the current
// format or as format 1 (32-byte header, one text
// section, global offsets: the format before experiment 010), so older decoders can be fed
// the same result. Text must be ASCII (a byte offset is then a UTF-16 offset).
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const { ENCODING } = require('../../dist/rows.js');

/** Splits a buffer of the current format (ASCII text) into its parts, with global text ends per cell. */
export function parse(buf) {
  const h = new Uint32Array(buf.buffer, buf.byteOffset, ENCODING.HEADER_BYTES / 4);
  const [rows, cols, flags, namesLen, rowChunkCount, cellChunkCount, bigCount, namesHash] = [h[1], h[2], h[3], h[4], h[5], h[6], h[7], h[8]];
  const cells = rows * cols;
  let off = ENCODING.HEADER_BYTES;
  const nums = new Float64Array(buf.buffer, buf.byteOffset + off, cells).slice();
  off += cells * 8;
  const bigs = buf.subarray(off, off + bigCount * 8);
  off += bigCount * 8;
  const rowChunks = new Float64Array(buf.buffer, buf.byteOffset + off, rowChunkCount * 3);
  off += rowChunkCount * 24;
  const cellChunks = new Float64Array(buf.buffer, buf.byteOffset + off, cellChunkCount * 2);
  off += cellChunkCount * 16;
  const tags = Uint8Array.from(buf.subarray(off, off + cells));
  off += cells;
  const names = buf.subarray(off, off + namesLen);
  off += namesLen;
  const textLen = Math.max(rowChunkCount ? rowChunks[rowChunkCount * 3 - 1] : 0, cellChunkCount ? cellChunks[cellChunkCount * 2 - 1] : 0);
  const text = buf.subarray(off, off + textLen);
  const blobs = buf.subarray(off + textLen);
  // Global end of each text cell (bytes == units for ASCII), entering chunks as the decoder does.
  const ends = new Float64Array(cells);
  let kr = 0, kc = 0, base = 0;
  for (let i = 0; i < cells; i++) {
    if (i % cols === 0 && kr < rowChunkCount && rowChunks[kr * 3] === i / cols) base = rowChunks[kr * 3 + 1], kr++;
    if (tags[i] === ENCODING.TAG_TEXT_CHUNK) base = cellChunks[kc * 2], kc++;
    if (tags[i] === ENCODING.TAG_TEXT || tags[i] === ENCODING.TAG_TEXT_CHUNK) ends[i] = base + nums[i];
  }
  return { rows, cols, flags, nums, bigs, tags, names, text, blobs, ends, bigCount, namesHash };
}

/** Builds a buffer: format 1 (no chunk tables), or (any other `version`) the current format
 * with the given tables. */
export function assemble(p, version, nums, tags, rowChunks = [], cellChunks = []) {
  const v1 = version === 1;
  const header = new Uint32Array([v1 ? 1 : ENCODING.FORMAT_VERSION, p.rows, p.cols, p.flags, p.names.length,
    v1 ? p.text.length : rowChunks.length / 3, v1 ? p.blobs.length : cellChunks.length / 2, p.bigCount,
    ...(v1 ? [] : [p.namesHash, 0])]);
  const parts = [Buffer.from(header.buffer), Buffer.from(nums.buffer), p.bigs];
  if (!v1) parts.push(Buffer.from(new Float64Array(rowChunks).buffer), Buffer.from(new Float64Array(cellChunks).buffer));
  parts.push(Buffer.from(tags), p.names, p.text, p.blobs);
  const out = Buffer.alloc(parts.reduce((a, b) => a + b.length, 0)); // 8-aligned (fresh allocation)
  let o = 0;
  for (const b of parts) { b.copy(out, o); o += b.length; }
  return out;
}

/** Format 1 (main): one text section, global ends, no chunk table. */
export function toFormat1(p) {
  const nums = p.nums.slice();
  const tags = p.tags.slice();
  for (let i = 0; i < tags.length; i++) {
    if (tags[i] === ENCODING.TAG_TEXT_CHUNK) tags[i] = ENCODING.TAG_TEXT;
    if (tags[i] === ENCODING.TAG_TEXT) nums[i] = p.ends[i];
  }
  return assemble(p, 1, nums, tags);
}
