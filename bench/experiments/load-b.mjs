// Load b of bench/server alone, against a server already running (for profiling it):
//   node bench/server/server.mjs --driver quietsqlite --db items.db   (prints its port)
//   node bench/experiments/load-b.mjs PORT SECONDS
// Prints the point endpoint's requests/s, p50, p99 and the large endpoint's rate.
import { createRequire } from 'node:module';
const require = createRequire(import.meta.url);
const autocannon = require('autocannon');
const [port, seconds = '5'] = process.argv.slice(2).map(Number);
let rng = 7;
const randomId = () => 1 + ((rng = (Math.imul(rng, 1664525) + 1013904223) >>> 0) % 100_000);
const lat = { point: [], large: [] };
function load(requests, connections) {
  return new Promise((resolve, reject) => {
    const inst = autocannon({ url: `http://127.0.0.1:${port}`, connections, duration: seconds, requests }, (e, r) => (e ? reject(e) : resolve(r)));
    inst.on('response', (client, status, bytes, ms) => lat[client.requestIterator.currentRequest.tag].push(ms));
  });
}
await Promise.all([
  load([{ tag: 'point', method: 'GET', setupRequest: (req) => ({ ...req, path: `/items/${randomId()}` }) }], 8),
  load([{ tag: 'large', method: 'GET', path: '/items?limit=10000' }], 2),
]);
const q = (a, p) => a.sort((x, y) => x - y)[Math.floor(p * a.length)];
console.log(`point ${(lat.point.length / seconds).toFixed(0)}/s p50 ${q(lat.point, 0.5).toFixed(2)} p99 ${q(lat.point, 0.99).toFixed(2)} ms; large ${(lat.large.length / seconds).toFixed(1)}/s`);
