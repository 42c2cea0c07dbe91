// What running a callback in its registration's async context costs (docs/decisions.md,
// "Callbacks run in the async context of the call that registered them"): a guarded direct
// call against AsyncResource.runInAsyncScope, and the making of one AsyncResource.
//
//   node bench/experiments/callback-scope.mjs
import { AsyncLocalStorage, AsyncResource } from 'node:async_hooks';

// An AsyncLocalStorage in use, as in an application with transactions: under Node 20 it
// installs the hook that runs for every AsyncResource made.
new AsyncLocalStorage().enterWith({ request: 1 });

const CALLS = 2_000_000;
const RESOURCES = 200_000;
let sink = 0;
const callback = (rows) => {
  sink += rows.length;
};
function callGuarded(cb, arg) {
  try {
    cb(arg);
  } catch (err) {
    queueMicrotask(() => {
      throw err;
    });
  }
}
const rows = [1, 2, 3];
const scope = new AsyncResource('callback-scope');
const nsPer = (n, t0) => ((performance.now() - t0) * 1e6) / n;
for (let round = 1; round <= 3; round++) {
  let t0 = performance.now();
  for (let i = 0; i < CALLS; i++) callGuarded(callback, rows);
  const direct = nsPer(CALLS, t0);
  t0 = performance.now();
  for (let i = 0; i < CALLS; i++) scope.runInAsyncScope(callGuarded, undefined, callback, rows);
  const scoped = nsPer(CALLS, t0);
  t0 = performance.now();
  for (let i = 0; i < RESOURCES; i++) new AsyncResource('callback-scope');
  const made = nsPer(RESOURCES, t0);
  console.log(
    `Node ${process.versions.node} round ${round}: direct ${direct.toFixed(1)} ns, ` +
      `runInAsyncScope ${scoped.toFixed(1)} ns, new AsyncResource ${made.toFixed(1)} ns`,
  );
}
if (sink === 0) throw new Error('the callback never ran');
