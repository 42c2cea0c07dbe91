// Cost of one microtask hop queued with queueMicrotask and with then() on a settled promise
// (experiment 041): a callback that queues itself 2 million times.
//   node bench/experiments/microtask-hop.mjs [als]
// `als`: first run an AsyncLocalStorage once, as a transaction does (in Node 20 that turns
// on the promise hooks for good).
import { AsyncLocalStorage } from 'node:async_hooks';
const als = new AsyncLocalStorage();
if (process.argv[2] === 'als') als.run(1, () => {});
const N = 2_000_000;
const R = Promise.resolve();
async function chain(kind) {
  let n = 0;
  await new Promise((done) => {
    const hop = kind === 'qm'
      ? () => { if (++n < N) queueMicrotask(hop); else done(); }
      : () => { if (++n < N) R.then(hop); else done(); };
    hop();
  });
}
for (const kind of ['qm', 'then', 'qm', 'then']) {
  const t = process.hrtime.bigint();
  await chain(kind);
  console.log(process.version, process.argv[2] ?? '', kind, (Number(process.hrtime.bigint() - t) / N).toFixed(0), 'ns per hop');
}
