// Helpers shared by workers and peers.

/** Thrown when a peer lacks a capability: the report shows "n/a", never 0. */
export class NotAvailable extends Error {
  constructor(message) {
    super(message);
    this.name = 'NotAvailable';
  }
}

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** Yield to the event loop once (lets timers and I/O callbacks run). */
export const tick = () => new Promise((resolve) => setImmediate(resolve));

/** Shallow row-by-row, field-by-field equality; used by the naive live baseline. */
export function sameRows(a, b) {
  if (!a || !b || a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) {
    const x = a[i];
    const y = b[i];
    for (const k in x) if (x[k] !== y[k]) return false;
  }
  return true;
}
