// JS-thread time to decode a one-row result (a point query's), as an inline read decodes it
// out of its scratch buffer: experiment 039. The result is captured from a real read of a
// row shaped like the bench's `items`, then decoded again and again.
//   node bench/experiments/decode-one-row.mjs <package root> [iterations=2000000]
import { createRequire } from 'node:module';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

const root = resolve(process.argv[2] ?? '.');
const n = Number(process.argv[3] ?? 2_000_000);
const require = createRequire(import.meta.url);
const { Database } = require(join(root, 'dist/index.js'));
const { decodeRows, decodeRowsIn } = require(join(root, 'dist/rows.js'));
const { Requests } = require(join(root, 'dist/requests.js'));
const dir = mkdtempSync(join(tmpdir(), 'qs-decode-'));
const db = await Database.open(join(dir, 'd.db'));
await db.execute(
  'CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL, description TEXT NOT NULL, ' +
    'price REAL NOT NULL, category TEXT NOT NULL, created_at INTEGER NOT NULL)',
);
await db.execute('INSERT INTO items VALUES (1, ?, ?, 12.34, ?, 1700000123)', [
  'lorem ipsum dolor #1',
  'sit amet consectetur adipiscing elit sed do eiusmod tempor incididunt ut labore et dolore magna aliqua',
  'cat-7',
]);
// The encoded result, as the addon delivered it: a Buffer of its own before experiment 042,
// since then written into the completion scratch (its first entry's bytes).
let captured;
const convert = Requests.prototype.convert;
Requests.prototype.convert = function (kind, rowMode, payload) {
  if (Buffer.isBuffer(payload)) captured = Buffer.from(payload);
  return convert.call(this, kind, rowMode, payload);
};
const native = require(join(root, 'native/quietsqlite.node'));
const take = native.dbTakeCompletions;
const ENTRY_ROWS = 3;
native.dbTakeCompletions = function (handle, micros, scratch) {
  const values = take(handle, micros, scratch);
  if (values !== undefined && scratch !== undefined && scratch.readUInt32LE(12) === ENTRY_ROWS) {
    const [at, len] = [scratch.readUInt32LE(16), scratch.readUInt32LE(20)];
    captured = Buffer.from(scratch.subarray(at, at + len));
  }
  return values;
};
await db.selectOne('SELECT * FROM items WHERE id = ?', [1]);
Requests.prototype.convert = convert;
native.dbTakeCompletions = take;
await db.close();
rmSync(dir, { recursive: true, force: true });
// In a larger buffer at offset 0, as the inline scratch holds it.
const scratch = Buffer.allocUnsafeSlow(16 * 1024);
captured.copy(scratch, 0);
const len = captured.length;
let sink = 0;
// As a reader's result is decoded (a Buffer of its own), and as an inline read decodes out
// of its scratch buffer: through a kept view where the build has one (experiment 039).
const view = new Float64Array(scratch.buffer, scratch.byteOffset, scratch.length / 8);
const ways = {
  'own Buffer': () => decodeRows(scratch.subarray(0, len), 'object', 'auto')[0].price,
  // Since experiment 042 decodeRowsIn takes the result's offset (its third parameter, of five).
  inline: decodeRowsIn
    ? decodeRowsIn.length === 5
      ? () => decodeRowsIn(scratch, view, 0, 'object', 'auto')[0].price
      : () => decodeRowsIn(scratch, view, 'object', 'auto')[0].price
    : () => decodeRows(scratch.subarray(0, len), 'object', 'auto')[0].price,
};
for (const [name, once] of Object.entries(ways)) {
  for (let i = 0; i < 200_000; i++) sink += once();
  for (let round = 0; round < 3; round++) {
    const t = process.hrtime.bigint();
    for (let i = 0; i < n; i++) sink += once();
    const ns = Number(process.hrtime.bigint() - t) / n;
    console.log(`${root.padEnd(16)} ${name.padEnd(10)} round ${round}: ${ns.toFixed(0)} ns per one-row result (${len} bytes)`);
  }
}
if (sink === 0) console.log('');
