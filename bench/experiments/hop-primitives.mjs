// What our ways of deferring work cost (experiment 056): three chained microtask hops through a
// settled promise (the poll's hops), one hop and then a process.nextTick (a tick queued from a
// microtask runs once the microtask queue is empty), and setImmediate chained (each needs a turn
// of the event loop). Without and inside an AsyncLocalStorage (Node 20 turns on promise hooks).
//   node bench/experiments/hop-primitives.mjs   (and the same with Node 24's node)
import { AsyncLocalStorage } from 'node:async_hooks';
const S = (async () => {})(); const then = S.then;
const hop = (f) => then.call(S, f);
const tick = process.nextTick;
function chain3(n, done) { let i = 0; const step = () => { if (++i >= 3 * n) return done(); hop(step); }; hop(step); }
function thenTick(n, done) { let i = 0; const t = () => { if (++i >= n) return done(); hop(h); }; const h = () => tick(t); hop(h); }
function immediate(n, done) { let i = 0; const t = () => { if (++i >= n) return done(); setImmediate(t); }; setImmediate(t); }
async function bench(label) {
  for (const [name, f] of [['3 hops', chain3], ['hop+tick', thenTick], ['setImmediate', immediate]]) {
    const n = 300000;
    await new Promise((r) => f(n / 10, r));
    const t0 = performance.now();
    await new Promise((r) => f(n, r));
    console.log(`${process.version} ${label} ${name}: ${((performance.now() - t0) * 1e6 / n).toFixed(0)} ns per unit`);
  }
}
await bench('plain');
await new AsyncLocalStorage().run(1, () => bench('ALS'));
