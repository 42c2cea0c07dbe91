// The encoded result of one real select, as the addon delivers a large one (a Buffer of its
// own), copied to an 8-byte-aligned Buffer at offset 0, for probes that decode it again and
// again (decode-rows.mjs, numeric-array-rows.mjs; experiment 081).
import { createRequire } from 'node:module';
import { join } from 'node:path';

/** Runs `sql` with `params` on `database` through the checkout at `root`; returns
 * `{ decodeRows, buf }`: that checkout's decoder and the result's bytes. */
export async function capturedResult(root, database, sql, params) {
  const require = createRequire(import.meta.url);
  const { Database } = require(join(root, 'dist/index.js'));
  const { decodeRows } = require(join(root, 'dist/rows.js'));
  const { Requests } = require(join(root, 'dist/requests.js'));
  const db = await Database.open(database, { readonly: true, readers: 1 });
  let captured;
  const convert = Requests.prototype.convert;
  Requests.prototype.convert = function (kind, rowMode, payload) {
    if (Buffer.isBuffer(payload)) captured = payload;
    return convert.call(this, kind, rowMode, payload);
  };
  try {
    await db.select(sql, params);
  } finally {
    Requests.prototype.convert = convert;
    await db.close();
  }
  if (captured === undefined) throw new Error('no result buffer captured (too few rows for a buffer of its own?)');
  const buf = Buffer.allocUnsafeSlow(captured.length);
  captured.copy(buf);
  return { decodeRows, buf };
}
