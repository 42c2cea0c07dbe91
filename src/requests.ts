// Request bookkeeping between the Database and the addon: ids, pending promises, and the
// completion callback. The callback is held by the addon's threadsafe function (a GC root),
// so it must not reach the native object strongly, or a database nobody closes could never
// be collected; it holds a WeakRef, and the database is pinned only while work is in flight.

import { errorFromNative, type NativeErrorDetail } from './errors';
import type { NativeDatabase } from './native';
import { convertInteger, decodeRows, type IntMode, type RowMode } from './rows';

export const enum Kind {
  Rows,
  FirstRow,
  Bytes,
  Execute,
  Batch,
  Done,
}

interface Pending {
  resolve: (value: unknown) => void;
  reject: (reason: unknown) => void;
  kind: Kind;
  rowMode: RowMode;
}

/** Receives live-query emissions (rows buffer) and errors for a subscription id. */
export interface Subscriber {
  emit(buf: Buffer): void;
  fail(err: Error): void;
  /** The database is closing. */
  end(): void;
}

/** Databases with work in flight: pinned so their pending promises always settle. */
const withWorkInFlight = new Set<object>();

export interface ExecuteResult {
  changes: number;
  lastInsertRowid: number | bigint;
  rows: unknown[];
}

export class Requests {
  private readonly pending = new Map<number, Pending>();
  readonly subscribers = new Map<number, Subscriber>();
  private nextId = 1;
  private inflight = 0;
  /** The addon's reference keeping the event loop alive is held (see settleIdle). */
  private busy = false;
  private native: WeakRef<NativeDatabase> | undefined;
  /** Weak: this object is reachable from the addon's completion callback (a GC root), and a
   * strong reference to the Database from here kept every unclosed database alive. */
  private owner: WeakRef<object> | undefined;

  constructor(readonly intMode: IntMode) {}

  attach(native: NativeDatabase, owner: object): void {
    this.native = new WeakRef(native);
    this.owner = new WeakRef(owner);
  }

  /** A fresh id for a request or subscription. */
  id(): number {
    let id = this.nextId;
    while (this.pending.has(id) || this.subscribers.has(id)) id = id >= 0x7fffffff ? 1 : id + 1;
    this.nextId = id >= 0x7fffffff ? 1 : id + 1;
    return id;
  }

  /** Registers a request; `send` hands it to the addon and may throw synchronously. */
  start<T>(kind: Kind, rowMode: RowMode, send: (id: number) => void, id = this.id()): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      try {
        send(id);
      } catch (err) {
        reject(err);
        return;
      }
      this.pending.set(id, { resolve: resolve as (v: unknown) => void, reject, kind, rowMode });
      if (this.inflight++ === 0 && !this.busy) this.setBusy(true);
    });
  }

  /** Ends every live query (the database is closing). */
  endSubscriptions(): void {
    for (const s of [...this.subscribers.values()]) s.end();
    this.subscribers.clear();
  }

  /** Counts work the addon does without a request (a live query's first run) as in flight. */
  hold(): void {
    if (this.inflight++ === 0 && !this.busy) this.setBusy(true);
  }

  release(): void {
    if (--this.inflight === 0) queueMicrotask(this.settleIdle);
  }

  /** Lets go of the event loop once nothing is in flight. Deferred by a microtask so code
   * that awaits a result and immediately sends the next request does not toggle it. */
  private readonly settleIdle = (): void => {
    if (this.inflight === 0 && this.busy) this.setBusy(false);
  };

  get idle(): boolean {
    return this.inflight === 0;
  }

  private setBusy(on: boolean): void {
    this.busy = on;
    const native = this.native?.deref();
    if (native) native.keepAlive(on);
    const owner = this.owner?.deref();
    if (owner !== undefined) {
      if (on) withWorkInFlight.add(owner);
      else withWorkInFlight.delete(owner);
    }
  }

  /** Called by the addon with `[id, status, payload, id, status, payload, ...]`. */
  readonly onComplete = (batch: unknown[]): void => {
    for (let i = 0; i < batch.length; i += 3) {
      try {
        this.deliver(batch, i);
      } catch (err) {
        // A user callback (a live query's subscriber) threw. Every other completion of the
        // batch must still be delivered; the error surfaces as an uncaught exception, as it
        // would from an EventEmitter listener, once the batch is through.
        rethrowLater(err);
      }
    }
  };

  private deliver(batch: unknown[], i: number): void {
    const id = batch[i] as number;
    const ok = batch[i + 1] === 0;
    const payload = batch[i + 2];
    const p = this.pending.get(id);
    if (p === undefined) {
      this.deliverToSubscriber(id, ok, payload);
      return;
    }
    this.pending.delete(id);
    if (--this.inflight === 0) queueMicrotask(this.settleIdle);
    if (!ok) {
      p.reject(errorFromNative(payload as NativeErrorDetail));
      return;
    }
    try {
      p.resolve(this.convert(p.kind, p.rowMode, payload));
    } catch (err) {
      // e.g. intMode 'number' meeting an integer beyond 2^53
      p.reject(err);
    }
  }

  private deliverToSubscriber(id: number, ok: boolean, payload: unknown): void {
    const s = this.subscribers.get(id);
    if (s === undefined) return; // unsubscribed while an emission was on its way
    if (ok) s.emit(payload as Buffer);
    else s.fail(errorFromNative(payload as NativeErrorDetail));
  }

  private convert(kind: Kind, rowMode: RowMode, payload: unknown): unknown {
    switch (kind) {
      case Kind.Rows:
        return decodeRows(payload as Buffer, rowMode, this.intMode);
      case Kind.FirstRow:
        return decodeRows(payload as Buffer, rowMode, this.intMode)[0];
      case Kind.Bytes:
        return payload;
      case Kind.Execute: {
        const [changes, lastId, rows] = payload as [number, number | bigint, Buffer | null];
        const result: ExecuteResult = {
          changes,
          lastInsertRowid: rowidFor(lastId, this.intMode),
          rows: rows === null ? [] : decodeRows(rows, rowMode, this.intMode),
        };
        return result;
      }
      case Kind.Batch:
        return { changes: payload as number };
      case Kind.Done:
        return undefined;
    }
  }
}

/** Reports an exception thrown by user code called from a completion, without stopping the
 * delivery of the others: it is thrown again from a microtask, so it reaches
 * process 'uncaughtException' like any error thrown by a callback. */
export function rethrowLater(err: unknown): void {
  queueMicrotask(() => {
    throw err;
  });
}

/** lastInsertRowid under intMode; in 'number' mode an unsafe rowid is an error that says the
 * statement itself already ran (it cannot be undone by the conversion failing). */
function rowidFor(value: number | bigint, intMode: IntMode): number | bigint {
  if (typeof value === 'bigint' && intMode === 'number') {
    throw new RangeError(
      `the statement ran and its changes stand, but its lastInsertRowid ${value} does not fit in a JS number ` +
        "(intMode is 'number'); use intMode 'auto' or 'bigint'",
    );
  }
  return convertInteger(value, intMode);
}
