// Node's own timers and DOMException, taken when this module loads. A fake clock installed
// later (jest.useFakeTimers(), @sinonjs/fake-timers, node:test's mock timers) replaces the
// globals and node:timers' exports, and a browser-like test environment (jsdom) replaces the
// globals with ones whose handles are numbers and has no setImmediate: with either, a
// request's `timeoutMs` never fired (or fired on the fake clock's time), and an iterator's
// timer had no `unref`. Node 20 defines the global DOMException lazily, on first use: with
// `globalThis` frozen by then, making a TimeoutError threw inside a timer and ended the
// process.

import * as nodeTimers from 'node:timers';

const nodeSetTimeout = nodeTimers.setTimeout;
const nodeClearTimeout = nodeTimers.clearTimeout;
// Through an abort reason, not the global: on Node 20, reading the global defines it, which a
// globalThis frozen before this module loads refuses.
const NodeDOMException = (AbortSignal.abort().reason as DOMException).constructor as typeof DOMException;

/** A timer of Node's own: `ms` of real time. */
export function startTimer(callback: () => void, ms: number): NodeJS.Timeout {
  return nodeSetTimeout(callback, ms);
}

export function stopTimer(timer: NodeJS.Timeout): void {
  nodeClearTimeout(timer);
}

/** The error of a `timeoutMs` that expired, as `AbortSignal.timeout`'s reason is. */
export function timeoutError(): DOMException {
  return new NodeDOMException('The operation was aborted due to timeout', 'TimeoutError');
}

/**
 * Node's own `setImmediate`, or undefined when what node:timers exports at load is not it
 * (a fake clock installed before this module loaded). Node's own registers an active
 * 'Immediate' resource as soon as it is called. Its callbacks must not throw.
 */
export const afterThisTurn: ((callback: () => void) => unknown) | undefined = nodeOwnSetImmediate();

function nodeOwnSetImmediate(): ((callback: () => void) => unknown) | undefined {
  const set = nodeTimers.setImmediate;
  const immediates = (): number => process.getActiveResourcesInfo().filter((r) => r === 'Immediate').length;
  try {
    const before = immediates();
    // The probe is left to run (a no-op, at the next check phase): clearing it could hand a
    // fake's handle to Node's own clearImmediate (a clock that fakes only setImmediate),
    // which under Node 20 breaks every later immediate of the process.
    set(() => {});
    return immediates() > before ? set : undefined;
  } catch {
    return undefined;
  }
}
