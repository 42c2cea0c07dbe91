// Request bookkeeping between the Database and the addon: ids, pending promises, and the
// completion callback. The callback is held by the addon's threadsafe function (a GC root),
// so it must not reach the native object strongly, or a database nobody closes could never
// be collected; it holds a WeakRef, and the database is pinned only while work is in flight.

import { availableParallelism } from 'node:os';
import { afterThisTurn, startTimer, stopTimer, timeoutError } from './timers';
import { closedError, errorFromNative, lostResultError, type NativeErrorDetail } from './errors';
import { binding, type NativeDatabase } from './native';
import { signalState } from './signals';
import { convertInteger, decodeRows, decodeRowsIn, type IntMode, type RowMode } from './rows';
import { outsideTransactions } from './transaction';

export const enum Kind {
  Rows,
  FirstRow,
  Bytes,
  Execute,
  Batch,
  Done,
  Diagnostics,
  /** A backup: resolves with nothing; aborted while running, its outcome decides (as a write). */
  Backup,
  /** A prepared statement's description (`Statement.columns()`). */
  Describe,
}

interface Pending {
  resolve: (value: unknown) => void;
  reject: (reason: unknown) => void;
  kind: Kind;
  rowMode: RowMode;
  /** A cancellable request's timer, and what removes its abort listeners (see `watch`). */
  timer: NodeJS.Timeout | undefined;
  stopWatching: (() => void)[] | undefined;
  /** Set when a running write was aborted: its outcome decides (see `abort`). */
  abortReason: { reason: unknown } | undefined;
  /** The transaction that sent it, told when it settles. */
  tracker: RequestTracker | undefined;
}

/** A request's failure; `native` when the addon reported it (an aborted write's abort
 * reason then takes its place). */
interface Failure {
  native: boolean;
  reason: unknown;
}

/** A request's result kept for a later turn (`Requests.keepForLater`). */
interface Held {
  id: number;
  p: Pending;
  failure: Failure | undefined;
  value: unknown;
}

/** Counts the requests it sent until they settle, and hears of those that fail: a
 * transaction, which must not commit when a request its body left in flight failed
 * (`Transaction.leftInFlight`). */
export interface RequestTracker {
  requestSent(): void;
  requestSettled(failed: boolean, reason: unknown): void;
}

/**
 * The requests in flight, by id. Not a `Map`: with requests added and deleted all the time,
 * V8 replaces a Map's table every few dozen of them, and a replaced table that was in the
 * old generation keeps the entries it held (V8's OrderedHashTable). The young generation's
 * collections take those as live until a full collection: with 64 point queries in flight,
 * 150-220 bytes a query (requests, promises, rows) were promoted, and a fifth of the time
 * went to scavenges (docs/experiments/066). Here a slot is cleared when its request ends,
 * and arrays this table lets go of are cleared first.
 */
class PendingTable {
  /** Slot `id & (length - 1)` holds request `id`; `ids` says which id a slot holds. */
  #slots: (Pending | undefined)[] = new Array<Pending | undefined>(MIN_SLOTS).fill(undefined);
  #ids = new Int32Array(MIN_SLOTS);
  #size = 0;
  /** Fewer requests than this: half the slots. An eighth of them; lower after a shrink that
   * could not be made (two requests would have shared a slot), so it is not tried again at
   * every delete. */
  #shrinkBelow = 0;

  has(id: number): boolean {
    const i = id & (this.#slots.length - 1);
    return this.#slots[i] !== undefined && this.#ids[i] === id;
  }

  /** True when `id` may be used: its slot is empty. */
  free(id: number): boolean {
    return this.#slots[id & (this.#slots.length - 1)] === undefined;
  }

  get(id: number): Pending | undefined {
    const i = id & (this.#slots.length - 1);
    return this.#ids[i] === id ? this.#slots[i] : undefined;
  }

  set(id: number, p: Pending): void {
    if (this.has(id)) throw new Error(`request id ${id} is already in flight`);
    // Half full, or the slot taken (an id not checked with `free`): twice the slots.
    while (this.#size * 2 >= this.#slots.length || !this.free(id)) this.#resize(this.#slots.length * 2);
    const i = id & (this.#slots.length - 1);
    this.#slots[i] = p;
    this.#ids[i] = id;
    this.#size++;
  }

  delete(id: number): void {
    const i = id & (this.#slots.length - 1);
    if (this.#slots[i] === undefined || this.#ids[i] !== id) return;
    this.#slots[i] = undefined;
    this.#size--;
    // After a burst: back to fewer slots.
    if (this.#size < this.#shrinkBelow && !this.#resize(this.#slots.length / 2)) this.#shrinkBelow = this.#size >> 1;
  }

  /** Removes every request; returns them in id order. */
  takeAll(): Pending[] {
    const all: [number, Pending][] = [];
    this.#slots.forEach((p, i) => {
      if (p !== undefined) all.push([this.#ids[i]!, p]);
    });
    this.#slots.fill(undefined);
    this.#size = 0;
    return all.sort((a, b) => a[0] - b[0]).map(([, p]) => p);
  }

  /** Moves every request to `length` slots; growing doubles again until no two share a
   * slot, shrinking gives up (returns false) if two would. */
  #resize(length: number): boolean {
    const growing = length > this.#slots.length;
    for (;;) {
      const slots = new Array<Pending | undefined>(length).fill(undefined);
      const ids = new Int32Array(length);
      let placed = true;
      for (let i = 0; i < this.#slots.length && placed; i++) {
        const p = this.#slots[i];
        if (p === undefined) continue;
        const j = this.#ids[i]! & (length - 1);
        placed = slots[j] === undefined;
        slots[j] = p;
        ids[j] = this.#ids[i]!;
      }
      if (placed) {
        this.#slots.fill(undefined);
        this.#slots = slots;
        this.#ids = ids;
        this.#shrinkBelow = length > MIN_SLOTS ? length / 8 : 0;
        return true;
      }
      if (!growing) return false;
      length *= 2;
    }
  }
}

const MIN_SLOTS = 64;

/** What can cancel a request: abort signals (the call's own, its transactions') and a timeout. */
export interface Stop {
  signals: readonly AbortSignal[];
  /** Milliseconds; 0 for none. */
  timeoutMs: number;
}

/** What the addon's `cancel(id)` reports; mirrors `CancelOutcome` in crates/core/src/cancel.rs. */
const enum CancelOutcome {
  /** Finished (or unknown): its completion is on its way. */
  Finished = 0,
  /** Was queued: it never runs and no completion follows. */
  Dropped = 1,
  /** Is running: it is being interrupted; its completion follows. */
  Interrupting = 2,
}

interface SignalWatch {
  readonly callbacks: Set<() => void>;
  readonly listener: () => void;
}

/** One abort listener per signal however many requests it guards: one each would trip Node's
 * MaxListenersExceededWarning as soon as a signal is shared by more than 10 calls in flight. */
const signalWatches = new WeakMap<AbortSignal, SignalWatch>();

/** Calls `callback` when `signal` aborts; returns the function that stops that. */
function onAbort(signal: AbortSignal, callback: () => void): () => void {
  let w = signalWatches.get(signal);
  if (w === undefined) {
    const callbacks = new Set<() => void>();
    const listener = (): void => {
      signalWatches.delete(signal);
      for (const c of callbacks) c();
    };
    w = { callbacks, listener };
    signalWatches.set(signal, w);
    signalState.listen(signal, listener);
  }
  const watch = w;
  watch.callbacks.add(callback);
  return () => {
    if (!watch.callbacks.delete(callback) || watch.callbacks.size > 0) return;
    if (signalWatches.get(signal) === watch) signalWatches.delete(signal);
    signalState.unlisten(signal, watch.listener);
  };
}

/** Receives a subscription's completions: live-query emissions (a rows Buffer) or iterator
 * chunks (`[rows, done]`), and errors. */
export interface Subscriber {
  emit(payload: unknown): void;
  fail(err: Error): void;
  /** The database is closing. */
  end(): void;
  /** Not ended by close(): its owner removes it once its request settled (a backup's
   * progress, whose final report comes after a plain close() began). */
  outlivesClose?: boolean;
}

/** How long the JS thread polls for the completion of a request it has just sent, once the
 * microtasks queued after the send have run: taking a fast result this way costs less than
 * sleeping in the event loop and being woken for it (experiment 019). 0 on a single CPU,
 * where polling would only keep the thread that does the work from running. */
const POLL_MICROS = availableParallelism() > 1 ? 100 : 0;
/** Microtask hops after a send before polling: an awaiting caller's continuation has run by
 * then, so a request it sends next is in flight too. */
const POLL_HOPS = 3;
/** The wait of a poll that follows one that took results while more were in flight (a batch
 * sent at once): the rest of a batch comes every few microseconds, and a request that is
 * slow (a long query, a write waiting for a lock) costs such a poll no more than this, and
 * no backoff (experiment 046). */
const CHAIN_MICROS = 20;
/** Batches of results taken (by polling or from the event loop's call) before the event loop
 * must reach its check phase once: timers and I/O wait at most this many fast requests behind
 * an awaited loop. Node's own call does not bound this: a threadsafe call made while its
 * callback runs is dispatched at once, up to 1,000 times, without turning the loop. */
const TAKES_PER_TURN = 32;
/** Sends that skip polling after a poll that found nothing, doubling with each such poll up
 * to POLL_BACKOFF_MAX (a poll that takes a result starts over): a workload of slow requests
 * (large results, a busy writer) soon wastes almost no polls. */
const POLL_BACKOFF = 16;
const POLL_BACKOFF_MAX = 1024;

/** How a batch of completions arrives (its home: crates/node/src/batch.rs; test/44 checks
 * that both sides agree). The addon writes a table of the batch into the database's scratch
 * Buffer, and small results beside it, decoded before the next batch is taken; the other
 * payloads come in an array (experiment 042). */
export const BATCH = {
  SCRATCH_BYTES: 64 * 1024,
  TABLE_AT: 8,
  MAX_ENTRIES: 512,
  DATA_AT: 8 + 512 * 16,
  EXEC_HEADER_BYTES: 16,
  ENTRY_VALUE: 0,
  ENTRY_ERROR: 1,
  ENTRY_DONE: 2,
  ENTRY_ROWS: 3,
  ENTRY_EXEC: 4,
  ENTRY_LOST: 5,
} as const;
const { SCRATCH_BYTES, TABLE_AT, EXEC_HEADER_BYTES, ENTRY_VALUE, ENTRY_ERROR, ENTRY_DONE, ENTRY_ROWS, ENTRY_EXEC, ENTRY_LOST } =
  BATCH;

/** Databases with work in flight: pinned so their pending promises always settle. */
const withWorkInFlight = new Set<object>();

export interface ExecuteResult {
  changes: number;
  lastInsertRowid: number | bigint;
  rows: unknown[];
}

/** What preparing a statement tells (crates/core/src/statements.rs). */
export interface Description {
  readonly: boolean;
  columns: { name: string; type: string | null }[];
}

export class Requests {
  private readonly pending = new PendingTable();
  readonly subscribers = new Map<number, Subscriber>();
  private nextId = 1;
  private inflight = 0;
  /** The addon's reference keeping the event loop alive is held (see settleIdle). */
  private busy = false;
  /** A settleIdle is queued. */
  private settling = false;
  /** A poll chain is queued (see POLL_MICROS); `pollHops` microtasks are left before it polls. */
  private polling = false;
  private pollHops = 0;
  /** The queued poll follows one that took results (CHAIN_MICROS). */
  private chained = false;
  /** Batches taken since the event loop's check phase last ran (TAKES_PER_TURN); at the
   * limit an immediate is queued that resets it, and until it runs nothing is taken. */
  private takesThisTurn = 0;
  /** The event loop's call came while at the limit: its take waits for the immediate. */
  private wakeHeld = false;
  /** A send came while at the limit and did not poll: the immediate polls for it. */
  private refusedAtLimit = false;
  /** Sends left to skip polling after a poll found nothing, and how many the next miss
   * skips (POLL_BACKOFF). */
  private pollSkips = 0;
  private pollBackoff = POLL_BACKOFF;
  private native: WeakRef<NativeDatabase> | undefined;
  /** The native database's number for `binding.dbTakeCompletions`. */
  private handle = 0;
  /** Weak: this object is reachable from the addon's completion callback (a GC root), and a
   * strong reference to the Database from here kept every unclosed database alive. */
  private owner: WeakRef<object> | undefined;
  /** Where the addon writes completion batches (BATCH), made at the first take, and views
   * of it kept for decoding: as u32 words (the table) and float64s (results). */
  private scratch: Buffer | undefined;
  private words: Uint32Array | undefined;
  private floats: Float64Array | undefined;
  /** A batch is being delivered: its scratch must not be written again until it is through. */
  private delivering = false;
  /** A take was refused during a delivery: the delivering loop takes again once through. */
  private retake = false;
  /** The batch being delivered was taken by a poll, in a microtask. */
  private takenByPoll = false;
  /** Results of transactions' requests kept for a later turn of the event loop, in the
   * order they came: from a failure taken by a poll on (`keepForLater`). */
  private held: Held[] = [];

  /** Set once the database has closed and its threads are gone (`closed()`). */
  private ended = false;

  constructor(readonly intMode: IntMode) {}

  /**
   * The database has closed: every thread is done and the addon will complete nothing more.
   * A request still pending now reached the addon as it stopped (one sent inside a
   * transaction that a forced close had just ended, say) and would never settle, so it
   * rejects; later requests reject without being sent.
   */
  closed(): void {
    this.ended = true;
    const left = this.pending.takeAll();
    this.inflight = 0;
    for (const p of left) {
      unwatch(p);
      const err = closedError('the database was closed before this request could run');
      p.tracker?.requestSettled(true, err);
      p.reject(err);
    }
    if (this.busy) this.setBusy(false);
  }

  attach(native: NativeDatabase, owner: object): void {
    this.native = new WeakRef(native);
    this.handle = native.handle;
    const before = this.owner?.deref();
    this.owner = new WeakRef(owner);
    // The owner changes while work is in flight (the open's request pinned the native object;
    // the Database takes over): the pin moves with it, or the old owner would stay pinned
    // forever.
    if (this.busy && before !== undefined && before !== owner) {
      withWorkInFlight.delete(before);
      withWorkInFlight.add(owner);
    }
  }

  /** A fresh id for a request or subscription. */
  id(): number {
    let id = this.nextId;
    while (!this.pending.free(id) || this.subscribers.has(id)) id = id >= 0x7fffffff ? 1 : id + 1;
    this.nextId = id >= 0x7fffffff ? 1 : id + 1;
    return id;
  }

  /**
   * Registers a request; `send` hands it to the addon (`cancellable` when `stop` is given)
   * and may throw synchronously. With `stop`, an abort or the timeout rejects the request
   * with the reason and cancels it natively.
   */
  start<T>(
    kind: Kind,
    rowMode: RowMode,
    send: (id: number, cancellable: boolean) => void,
    id = this.id(),
    stop?: Stop,
    tracker?: RequestTracker,
  ): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      if (this.ended) {
        reject(closedError());
        return;
      }
      if (stop !== undefined) {
        // Aborted before it was sent: it is never sent (as Node's own APIs do).
        for (const s of stop.signals) {
          if (signalState.aborted(s)) {
            reject(signalState.reason(s));
            return;
          }
        }
      }
      // A timeout counts from the call: a large batch runs on the writer while it is sent.
      const sentAt = stop !== undefined && stop.timeoutMs > 0 ? performance.now() : 0;
      const p: Pending = {
        resolve: resolve as (v: unknown) => void,
        reject,
        kind,
        rowMode,
        timer: undefined,
        stopWatching: undefined,
        abortReason: undefined,
        tracker,
      };
      // Counted before it is sent, and uncounted if the send throws: an exception between a
      // send and its counting (the stack used up) left a request running that was counted in
      // part, and the count of requests in flight, which holds the process alive, wrong.
      this.pending.set(id, p);
      tracker?.requestSent();
      const first = this.inflight++ === 0;
      try {
        send(id, stop !== undefined);
      } catch (err) {
        this.pending.delete(id);
        tracker?.requestSettled(false, undefined);
        if (--this.inflight === 0) this.idleSoon();
        // A signal aborted while the request was sent (by a getter of its parameters) wins:
        // a send that stops for it throws, and the call rejects with the signal's reason.
        const aborted = stop?.signals.find(signalState.aborted);
        reject(aborted !== undefined ? signalState.reason(aborted) : err);
        return;
      }
      // After the send: a closed database's handle has no keep-alive to take, and its send
      // throws first. Nothing completes before this code is through (results come on this thread).
      if (first && !this.busy) this.setBusy(true);
      if (stop !== undefined) this.watch(id, p, stop, sentAt);
      if (!this.polling && POLL_MICROS > 0) this.pollSoon();
    });
  }

  /** Arms the signals and the timer (counting from `sentAt`) of a cancellable request. A
   * signal aborted while the request was sent (by a getter of its parameters) cancels it now:
   * its abort event has already fired. */
  private watch(id: number, p: Pending, stop: Stop, sentAt: number): void {
    const { signals, timeoutMs } = stop;
    // Kept on the request itself, not in a closure made for it: with such a closure, one
    // per request, finished requests with their promises and rows survived young-generation
    // collections (V8's pretenuring was involved; docs/experiments/067).
    if (signals.length > 0) p.stopWatching = signals.map((s) => onAbort(s, () => this.abort(id, p, signalState.reason(s))));
    if (timeoutMs > 0) p.timer = startTimer(() => this.abort(id, p, timeoutError()), Math.max(0, timeoutMs - (performance.now() - sentAt)));
    const aborted = signals.find(signalState.aborted);
    if (aborted !== undefined) this.abort(id, p, signalState.reason(aborted));
  }

  /**
   * A request was aborted (signal or timeout). A queued one never runs; it rejects now (a
   * transaction's on a later turn). A running read rejects then too (its result no longer
   * matters) and is interrupted natively. A running write is interrupted and its outcome
   * decides: if it finished first, its changes stand and it resolves; otherwise nothing of
   * it remains and it rejects with `reason`.
   */
  private abort(id: number, p: Pending, reason: unknown): void {
    if (this.pending.get(id) !== p || p.abortReason !== undefined) return;
    unwatch(p);
    const native = this.native?.deref();
    const outcome: CancelOutcome = native === undefined ? CancelOutcome.Finished : native.cancel(id);
    const write = p.kind === Kind.Execute || p.kind === Kind.Batch || p.kind === Kind.Backup;
    if (write && outcome !== CancelOutcome.Dropped) {
      p.abortReason = { reason };
      return;
    }
    // A transaction's request settles where a failure a poll took does (`keepForLater`): an
    // abort a microtask after the body returned came before the body's end was seen, and the
    // writes around the dropped one committed without it. A read whose result is already
    // held there gives its place to the abort.
    if (p.tracker !== undefined && afterThisTurn !== undefined) {
      p.abortReason = { reason };
      const aborted: Held = { id, p, failure: { native: false, reason }, value: undefined };
      const at = this.held.findIndex((h) => h.p === p);
      if (at >= 0) this.held[at] = aborted;
      else this.keepForLater(aborted);
      return;
    }
    this.pending.delete(id);
    if (--this.inflight === 0) this.idleSoon();
    p.tracker?.requestSettled(true, reason);
    p.reject(reason);
  }

  /** Ends every live query (the database is closing). */
  endSubscriptions(): void {
    for (const [id, s] of [...this.subscribers]) {
      if (s.outlivesClose === true) continue;
      this.subscribers.delete(id);
      s.end();
    }
  }

  /** Counts work the addon does without a request (a live query's first run) as in flight. */
  hold(): void {
    if (this.inflight++ === 0 && !this.busy) this.setBusy(true);
  }

  release(): void {
    // After closed() nothing is counted any more (it zeroed the count).
    if (this.ended) return;
    if (--this.inflight === 0) this.idleSoon();
  }

  /** Nothing is in flight: lets go of the event loop in the event loop's next check phase,
   * so code that awaits a result through any number of async layers and then sends the next
   * request keeps it held instead of paying two native calls per request (experiment 015),
   * and an awaited loop pays one immediate per turn of the event loop, not microtasks per
   * request (experiment 056). */
  private idleSoon(): void {
    if (this.settling) return;
    this.settling = true;
    if (afterThisTurn !== undefined) afterThisTurn(this.settleIdle);
    else nextMicrotask(this.settleIdle);
  }

  private readonly settleIdle = (): void => {
    this.settling = false;
    if (this.inflight === 0 && this.busy) this.setBusy(false);
  };

  /** A request was sent: poll for its result a few microtasks later, unless recent polls
   * found nothing or the event loop has not turned for a while. */
  private pollSoon(): void {
    if (this.pollSkips > 0) {
      this.pollSkips--;
      return;
    }
    if (this.takesThisTurn >= TAKES_PER_TURN) {
      this.refusedAtLimit = true;
      return;
    }
    this.polling = true;
    this.pollHops = POLL_HOPS;
    nextMicrotask(this.pollHop);
  }

  private readonly pollHop = (): void => {
    if (--this.pollHops > 0) {
      nextMicrotask(this.pollHop);
      return;
    }
    this.polling = false;
    const chained = this.chained;
    this.chained = false;
    if (this.inflight === 0) return;
    let took: boolean;
    this.takenByPoll = true;
    try {
      took = this.take(chained ? CHAIN_MICROS : POLL_MICROS);
    } catch {
      // Polling is only a faster way to take results: the event loop still delivers every
      // one, so a database whose poll fails (a bug) just stops polling.
      this.pollSkips = Infinity;
      return;
    } finally {
      this.takenByPoll = false;
    }
    if (!took) {
      // The rest of a batch is not coming fast: the event loop delivers it, and the requests
      // sent next still poll.
      if (chained) return;
      this.pollSkips = this.pollBackoff;
      this.pollBackoff = Math.min(this.pollBackoff * 2, POLL_BACKOFF_MAX);
      return;
    }
    this.pollBackoff = POLL_BACKOFF;
    this.tookOne();
    // More in flight (a batch sent at once, Promise.all): poll for the rest too, rather than
    // sleep and be woken for each few results that come.
    if (this.inflight > 0 && !this.polling) {
      this.pollSoon();
      this.chained = this.polling;
    }
  };

  get idle(): boolean {
    return this.inflight === 0;
  }

  private setBusy(on: boolean): void {
    // By handle, not through the native object: requests that come one at a time after idle
    // time make this call twice each (experiment 086). The owner pinned while busy keeps the
    // native object, and so its handle, alive until the hold is let go.
    binding.dbKeepAlive(this.handle, on);
    this.busy = on;
    const owner = this.owner?.deref();
    if (owner !== undefined) {
      if (on) withWorkInFlight.add(owner);
      else withWorkInFlight.delete(owner);
    }
  }

  /** Called by the addon from the event loop when completions are queued. */
  readonly onComplete = (): void => {
    if (this.held.length > 0) this.deliverHeld();
    if (afterThisTurn === undefined) this.takesThisTurn = 0;
    if (this.takesThisTurn >= TAKES_PER_TURN) {
      this.wakeHeld = true;
      return;
    }
    try {
      if (this.take(0)) this.tookOne();
    } catch (err) {
      rethrowLater(err);
    }
  };

  /** Counts an inline read toward TAKES_PER_TURN, as a take. An inline read's promise
   * resolves at once, so an awaited loop of them never let the event loop turn: timers and
   * I/O waited for the whole loop. True when the limit is reached: the read's answer must
   * then wait for the event loop's turn (`afterTurn`). Without Node's own immediate (a fake
   * clock took its place) inline reads are not counted, as only polls stop at the limit. */
  inlineMustWait(): boolean {
    if (afterThisTurn === undefined) return false;
    if (this.takesThisTurn >= TAKES_PER_TURN) return true;
    this.tookOne();
    return false;
  }

  /** `value`, once the event loop has turned (after `inlineMustWait` said so). */
  afterTurn<T>(value: T): Promise<T> {
    return new Promise((resolve) => afterThisTurn!(() => resolve(value)));
  }

  /** Counts a take toward TAKES_PER_TURN. Without Node's own immediate (a fake clock took
   * its place) the event loop's call resets the count instead, and only polls stop at the
   * limit. */
  private tookOne(): void {
    if (++this.takesThisTurn === TAKES_PER_TURN && afterThisTurn !== undefined) afterThisTurn(this.turned);
  }

  private readonly turned = (): void => {
    this.takesThisTurn = 0;
    const refused = this.refusedAtLimit;
    this.refusedAtLimit = false;
    if (this.wakeHeld) {
      this.wakeHeld = false;
      this.onComplete();
    } else if (refused && this.inflight > 0 && !this.polling) {
      // A request sent at the limit was not polled for: poll for it now, as its send would
      // have, rather than sleep in the event loop until its threadsafe call wakes the
      // thread (an awaited loop's request took 11-17 µs instead of 3-4, once every
      // TAKES_PER_TURN requests).
      this.polling = true;
      this.pollHops = 1;
      nextMicrotask(this.pollHop);
    }
  };

  /** Takes the completions that arrive within `maxMicros` and delivers them, batch after
   * batch while the addon has more; false when none came. */
  private take(maxMicros: number): boolean {
    const native = this.native?.deref();
    if (native === undefined) return false;
    // A batch taken while one is delivered would overwrite the scratch it is decoded from.
    // Nothing takes during a delivery today (takes come from the event loop and from
    // microtasks); were one to, the delivering loop takes again instead.
    if (this.delivering) {
      this.retake = true;
      return false;
    }
    if (this.scratch === undefined) this.useScratch(Buffer.allocUnsafeSlow(SCRATCH_BYTES));
    let answer = binding.dbTakeCompletions(this.handle, maxMicros, this.scratch!);
    if (answer === undefined) return false;
    for (;;) {
      const values = this.valuesOf(answer);
      const more = this.words![1] === 1;
      this.deliverAll(values);
      if (!more && !this.retake) return true;
      this.retake = false;
      answer = binding.dbTakeCompletions(this.handle, 0, this.scratch!);
      if (answer === undefined) return true;
    }
  }

  private useScratch(scratch: Buffer): void {
    this.words = new Uint32Array(scratch.buffer, scratch.byteOffset, SCRATCH_BYTES / 4);
    this.floats = new Float64Array(scratch.buffer, scratch.byteOffset, SCRATCH_BYTES / 8);
    this.scratch = scratch;
  }

  /** A take's values; when the addon found the scratch unusable (something detached its
   * memory), it wrote the batch into a new Buffer, which becomes the scratch. */
  private valuesOf(answer: unknown[] | null | { scratch: Buffer; values: unknown[] | null }): unknown[] | null {
    if (answer === null || Array.isArray(answer)) return answer;
    this.useScratch(answer.scratch);
    return answer.values;
  }

  /** Delivers the batch in the scratch; `values` holds the payloads it does not. */
  private deliverAll(values: unknown[] | null): void {
    const words = this.words!;
    const count = words[0]!;
    this.delivering = true;
    try {
      for (let k = 0, w = TABLE_AT / 4; k < count; k++, w += 4) {
        try {
          this.deliver(words[w]!, words[w + 1]!, words[w + 2]!, words[w + 3]!, values);
        } catch (err) {
          // User callbacks are guarded where they are called; what lands here is a failure
          // of our own (a native call that threw). Every other completion of the batch must
          // still be delivered; the error surfaces as an uncaught exception once it is through.
          rethrowLater(err);
        }
      }
    } finally {
      this.delivering = false;
    }
  }

  /** One entry of a batch: `a` and `b` as BATCH describes them for its `entry` kind. */
  private deliver(id: number, entry: number, a: number, b: number, values: unknown[] | null): void {
    const p = this.pending.get(id);
    if (p === undefined) {
      this.deliverToSubscriber(id, entry, a, values);
      return;
    }
    let failure: Failure | undefined;
    let value: unknown;
    if (entry === ENTRY_ERROR || entry === ENTRY_LOST) {
      const err = entry === ENTRY_LOST ? lostResultError() : errorFromNative(values![a] as NativeErrorDetail);
      failure = { native: true, reason: err };
    } else {
      try {
        if (entry === ENTRY_ROWS) {
          value = rowsAs(p.kind, decodeRowsIn(this.scratch!, this.floats, a, p.rowMode, this.intMode));
        } else if (entry === ENTRY_EXEC) {
          const f = this.floats!;
          const rows = b > EXEC_HEADER_BYTES ? returnedRows(() => decodeRowsIn(this.scratch!, f, a + EXEC_HEADER_BYTES, p.rowMode, this.intMode)) : [];
          value = this.executeResult(f[a / 8]!, f[a / 8 + 1]!, rows);
        } else {
          value = this.convert(p.kind, p.rowMode, entry === ENTRY_DONE ? undefined : values![a]);
        }
      } catch (err) {
        // e.g. intMode 'number' meeting an integer beyond 2^53
        failure = { native: false, reason: err };
      }
    }
    if (p.tracker !== undefined && afterThisTurn !== undefined && (this.held.length > 0 || (failure !== undefined && this.takenByPoll))) {
      this.keepForLater({ id, p, failure, value });
      return;
    }
    this.settle(id, p, failure, value);
  }

  /** Settles a request with its result: `value`, or `failure`. */
  private settle(id: number, p: Pending, failure: Failure | undefined, value: unknown): void {
    this.pending.delete(id);
    if (--this.inflight === 0) this.idleSoon();
    unwatch(p);
    if (failure === undefined) {
      p.tracker?.requestSettled(false, undefined);
      p.resolve(value);
      return;
    }
    // An aborted write that failed (interrupted, or failed anyway) left nothing behind.
    const reason = failure.native && p.abortReason !== undefined ? p.abortReason.reason : failure.reason;
    p.tracker?.requestSettled(true, reason);
    p.reject(reason);
  }

  /**
   * Keeps a result of a transaction's request for a later turn of the event loop: a failure
   * taken by a poll or made by an abort, and every result of a transaction's request after
   * it, so that they settle in the order the writer ran them. A body's end is seen when its
   * promise settles, and a failure that comes before is the body's to handle (docs/api.md,
   * "What the body leaves running"). A poll takes results a few microtasks after their
   * send, which can be before the promise of a body that fired writes and returned at once
   * has settled (it wraps another function's promise, say): such a body's failed write
   * counted as handled, and the rest committed. No body's promise waits for a later turn,
   * so a failure delivered there is seen at the same moment whatever the body's promises,
   * as one the event loop delivers always was. The requests stay pending meanwhile (they
   * keep the process alive, and an abort or a close settles them first). Only with Node's
   * own setImmediate: under a fake clock taken at load nothing is held (a poll's results
   * have no later delivery to wait for), and such a body is back to the race.
   */
  private keepForLater(result: Held): void {
    this.held.push(result);
    if (this.held.length === 1) afterThisTurn!(this.deliverHeld);
  }

  private readonly deliverHeld = (): void => {
    const held = this.held;
    if (held.length === 0) return;
    this.held = [];
    for (const { id, p, failure, value } of held) {
      if (this.pending.get(id) === p) this.settle(id, p, failure, value); // else settled meanwhile (aborted, closed)
    }
  };

  /** An entry for a live query or an iterator: emissions and chunks always come as values. */
  private deliverToSubscriber(id: number, entry: number, a: number, values: unknown[] | null): void {
    const s = this.subscribers.get(id);
    if (s === undefined) return; // unsubscribed while an emission was on its way
    if (entry === ENTRY_VALUE) s.emit(values![a]);
    else s.fail(entry === ENTRY_ERROR ? errorFromNative(values![a] as NativeErrorDetail) : lostResultError());
  }

  private executeResult(changes: number, lastId: number | bigint, rows: unknown[]): ExecuteResult {
    return { changes, lastInsertRowid: rowidFor(lastId, this.intMode), rows };
  }

  /** A completion's payload as the request's value (also the answer of an inline read). */
  convert(kind: Kind, rowMode: RowMode, payload: unknown): unknown {
    switch (kind) {
      case Kind.Rows:
      case Kind.FirstRow:
        return rowsAs(kind, decodeRows(payload as Buffer, rowMode, this.intMode));
      case Kind.Bytes:
        return payload;
      case Kind.Execute: {
        const [changes, lastId, rows] = payload as [number, number | bigint, Buffer | null];
        return this.executeResult(changes, lastId, rows === null ? [] : returnedRows(() => decodeRows(rows, rowMode, this.intMode)));
      }
      case Kind.Batch:
        return { changes: payload as number };
      case Kind.Done:
      case Kind.Backup:
        return undefined;
      case Kind.Diagnostics:
        return payload;
      case Kind.Describe: {
        const [readonly, names, types] = payload as [boolean, string[], (string | null)[]];
        const description: Description = { readonly, columns: names.map((name, i) => ({ name, type: types[i] ?? null })) };
        return description;
      }
    }
  }
}

/** Decoded rows as the value of a `kind` request (Rows or FirstRow): all, or the first. */
export function rowsAs(kind: Kind, rows: unknown[]): unknown {
  return kind === Kind.FirstRow ? rows[0] : rows;
}

/** Removes the abort listeners and the timer of a cancellable request. */
function unwatch(p: Pending): void {
  if (p.timer !== undefined) {
    stopTimer(p.timer);
    p.timer = undefined;
  }
  if (p.stopWatching !== undefined) {
    for (const stop of p.stopWatching) stop();
    p.stopWatching = undefined;
  }
}

/** A settled promise: `then` on it queues a microtask for a third of what `queueMicrotask`
 * costs, which makes an AsyncResource and a bound function every time (experiment 041).
 * Like `queueMicrotask`, the callback runs in the async context it was queued from. An
 * async function's promise and the `then` taken at load are the engine's own, whatever a
 * library later puts in the global `Promise` (one that scheduled `then` on a later turn of
 * the event loop would make the poll's hops useless). */
const SETTLED: Promise<void> = (async () => {})();
const settledThen = SETTLED.then;

/** Queues `hop` as a microtask. Only for our own callbacks that cannot throw: an exception
 * would surface as an unhandled rejection (`rethrowLater` keeps `queueMicrotask` for that). */
export function nextMicrotask(hop: () => void): void {
  void settledThen.call(SETTLED, hop);
}

/** Reports an exception thrown by user code called from a completion, without stopping the
 * delivery of the others: it is thrown again from a microtask, so it reaches
 * process 'uncaughtException' like any error thrown by a callback. Never from a transaction's
 * async context: in Node 24 the context of a microtask that throws stays current for the next
 * one, and a next one queued in no context (most code) would run inside the transaction. */
export function rethrowLater(err: unknown): void {
  outsideTransactions(() =>
    queueMicrotask(() => {
      throw err;
    }),
  );
}

/** How an error of a write's result begins: the write ran, or a caller might run it again. */
const RAN = 'the statement ran and its changes stand (unless a transaction it runs in is rolled back), but ';

/** The rows a write returned (RETURNING), decoded by `decode`; when they cannot be made
 * (intMode 'number' and an integer beyond 2^53), the error says that the write ran. */
function returnedRows(decode: () => unknown[]): unknown[] {
  try {
    return decode();
  } catch (err) {
    if (!(err instanceof Error)) throw err;
    throw new RangeError(`${RAN}the rows it returned could not be converted: ${err.message}`, { cause: err });
  }
}

/** lastInsertRowid under intMode; in 'number' mode an unsafe rowid is an error that says the
 * statement itself already ran (it cannot be undone by the conversion failing). */
function rowidFor(value: number | bigint, intMode: IntMode): number | bigint {
  if (typeof value === 'bigint' && intMode === 'number') {
    throw new RangeError(
      `${RAN}the rowid it inserted is beyond 2^53 and does not fit in a JS number as lastInsertRowid (intMode is 'number'); ` +
        "use intMode 'auto' or 'bigint'",
    );
  }
  return convertInteger(value, intMode);
}
