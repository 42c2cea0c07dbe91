// What an await costs with and without an AsyncLocalStorage in use (transaction bodies run
// inside one): Node 20 turns on promise hooks for it, Node 24 does not.
//   node bench/experiments/als-promise-cost.mjs   (and the same with Node 24's node)
import { AsyncLocalStorage } from 'node:async_hooks';

const settled = (async () => {})();
const then = settled.then;
async function loop(n) {
  for (let i = 0; i < n; i++) await new Promise((r) => then.call(settled, r));
}
async function bench(label) {
  await loop(1e5);
  const t0 = performance.now();
  await loop(1e6);
  console.log(`${process.version} ${label}: ${(((performance.now() - t0) * 1000) / 1e6).toFixed(3)} us per await`);
}
await bench('no AsyncLocalStorage');
await new AsyncLocalStorage().run(1, () => bench('inside AsyncLocalStorage.run'));
