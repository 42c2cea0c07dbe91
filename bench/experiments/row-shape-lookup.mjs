// Experiment 014, "Row shapes": the cost per result of finding the row builder by its names
// (decode the names, Map lookup) vs a per-statement cache checked by comparing the bytes.
//   node bench/experiments/row-shape-lookup.mjs
const names = Buffer.from('id\0name\0price\0');
const buf = Buffer.concat([Buffer.alloc(100), names, Buffer.alloc(50)]);
const off = 100, len = names.length;
const map = new Map([[names.toString(), () => 1]]);
const cached = { bytes: Buffer.from(names), build: () => 1 };
let sink = 0;
function byKey() { const k = buf.toString('utf8', off, off + len); return map.get(k); }
function byStmt() { return buf.compare(cached.bytes, 0, len, off, off + len) === 0 ? cached.build : undefined; }
for (const [name, f] of [['decode+Map', byKey], ['compare bytes', byStmt], ['decode+Map', byKey], ['compare bytes', byStmt]]) {
  const n = 2e6; const t0 = process.hrtime.bigint();
  for (let i = 0; i < n; i++) sink += f()();
  console.log(name, (Number(process.hrtime.bigint() - t0) / n).toFixed(1), 'ns/result');
}
