// Live queries on the JS side. The native registry does the deciding (dependencies, hashes,
// throttling); this module turns emissions into rows and hands them to consumers, and
// tells the native side when it may send the next one (so a consumer that is not reading
// costs nothing and then receives the latest rows, never a backlog).

import type { AsyncResource } from 'node:async_hooks';
import { closedError, fromNativeThrow } from './errors';
import type { NativeDatabase } from './native';
import { ownOptions } from './options';
import { checkSignal, signalState } from './signals';
import { rethrowLater, type Requests, type Subscriber } from './requests';
import { afterThisTurn, startTimer } from './timers';
import { decodeRows, type Row } from './rows';
import { callbackScope } from './transaction';

export interface StreamOptions {
  /** Aborting ends the stream and frees it. */
  signal?: AbortSignal | undefined;
  /** Longest a burst of writes may hold back an emission, in ms; default 100. */
  maxDelayMs?: number | undefined;
}

/** What a LiveQuery needs from its database. */
export interface LiveHost {
  native: NativeDatabase;
  requests: Requests;
  isOpen(): boolean;
}

interface Waiter<T> {
  resolve: (r: IteratorResult<T[]>) => void;
  reject: (e: unknown) => void;
}

interface IteratorState<T> {
  /** Counted as a consumer (between its first next() and return(), end or an error). */
  attached: boolean;
  /** Pending next() calls, oldest first: each takes one emission. */
  waiters: Waiter<T>[];
  /** The newest rows this iterator has not returned yet. */
  buffered: T[] | undefined;
  /** An error to report on the next call to next(). */
  failure: unknown;
}

/** A subscribe() call: its callbacks, and the async context they always run in: that of the
 * call, without any transaction. Rows reach the JS side through whatever code takes them
 * from the addon: the event loop, or a request that polled for its own result, which may be
 * another caller's (a transaction body's, whose `db` calls are routed to it). */
type Listener<T> = {
  onRows: (rows: T[]) => void;
  onError: ((err: Error) => void) | undefined;
  scope: AsyncResource;
  /** It has been handed an emission: a joining listener's queued first rows are then older. */
  got: boolean;
  /** Its unsubscribe function was called (also after the stream ended and forgot it). */
  off: boolean;
};

/** Tells a listener of an ended stream so, on a later turn of the event loop: an onError
 * that subscribes again in reply (a retry) would otherwise be told again at once, forever,
 * without the event loop ever turning. */
function tellEnded<T>(listener: Listener<T>): void {
  const onError = listener.onError;
  if (onError === undefined) return;
  const later = afterThisTurn ?? ((callback: () => void) => startTimer(callback, 0));
  later(() => {
    if (!listener.off) notify(listener.scope, onError, closedError('this live query has ended'));
  });
}

/** Calls a subscriber's callback in its own async context; an exception it throws is
 * reported there too, and keeps no other subscriber from its rows. */
function notify<A>(scope: AsyncResource, callback: (arg: A) => void, arg: A): void {
  scope.runInAsyncScope(callGuarded, undefined, callback, arg);
}

/** What a failure does to a subscriber that gave no onError: it is not lost, it becomes an
 * uncaught exception, as an 'error' event without a listener does. */
function unhandledFailure(err: Error): void {
  throw err;
}

function callGuarded<A>(callback: (arg: A) => void, arg: A): void {
  try {
    callback(arg);
  } catch (err) {
    rethrowLater(err);
  }
}

/** Callback subscriptions keep their stream alive until they unsubscribe, and iterators
 * while a next() waits. */
const pinned = new Set<LiveQuery<unknown>>();

/** A stream nobody references any more (an abandoned iterator) is unsubscribed natively. */
const collected = new FinalizationRegistry<{ host: LiveHost; id: number; holds: { n: number } }>(
  ({ host, id, holds }) => {
    host.requests.subscribers.delete(id);
    host.native.unsubscribe(id);
    // Keep-alives taken by next() calls that can no longer be answered.
    for (; holds.n > 0; holds.n--) host.requests.release();
  },
);

/** A stream's abort listener holds it weakly: a long-lived signal (a server's shutdown
 * signal) kept every stream made with it, and its last rows, alive until it aborted. A
 * stream collected before then takes its listener off the signal. */
const abortListeners = new FinalizationRegistry<{ signal: AbortSignal; listener: () => void }>(({ signal, listener }) =>
  signalState.unlisten(signal, listener),
);

/** A live query: `for await (const rows of live)`, or `live.subscribe(onRows, onError)`. */
export class LiveQuery<T = Row> implements AsyncIterable<T[]> {
  readonly #host: LiveHost;
  readonly #sql: string;
  readonly #params: unknown;
  readonly #maxDelayMs: number;
  readonly #signal: AbortSignal | undefined;
  #current: T[] | undefined;
  #subscription: number | undefined;
  /** The first result is being computed: that is in-flight work (keeps the process alive). */
  #awaitingFirst = false;
  /** Keep-alives held for pending next() calls (shared with the finalizer). */
  readonly #holds = { n: 0 };
  /** The native side delivered rows we have not acknowledged: it sends nothing more until
   * we do, and meanwhile keeps only its newest result for us. */
  #unacked = false;
  #ended = false;
  /** next() calls waiting for rows, over every iterator. */
  #waiting = 0;
  readonly #listeners = new Set<Listener<T>>();
  readonly #iterators = new Set<IteratorState<T>>();
  /** Ends this stream when its signal aborts; reaches it weakly (see `abortListeners`). */
  readonly #onAbort: () => void;

  /** @internal use db.stream() */
  constructor(host: LiveHost, sql: string, params: unknown, options: StreamOptions | undefined) {
    const o = options === undefined ? {} : ownOptions<StreamOptions>('stream', options, ['signal', 'maxDelayMs']);
    const maxDelayMs = o.maxDelayMs === undefined ? 100 : o.maxDelayMs;
    if (typeof maxDelayMs !== 'number') throw new TypeError('maxDelayMs must be a number');
    if (!Number.isInteger(maxDelayMs) || maxDelayMs < 0 || maxDelayMs > 0x7fffffff) {
      throw new RangeError('maxDelayMs must be a non-negative integer');
    }
    const signal = checkSignal(o.signal);
    this.#host = host;
    this.#sql = sql;
    this.#params = params;
    this.#maxDelayMs = maxDelayMs;
    this.#signal = signal;
    if (signal !== undefined && signalState.aborted(signal)) this.#ended = true;
    const ref = new WeakRef(this as LiveQuery<unknown>);
    this.#onAbort = () => ref.deref()?.end();
    if (signal !== undefined && !this.#ended) {
      signalState.listen(signal, this.#onAbort);
      abortListeners.register(this, { signal, listener: this.#onAbort }, this);
    }
  }

  /** The rows of the last emission, or undefined before the first. */
  get current(): T[] | undefined {
    return this.#current;
  }

  /** True once the stream was ended (abort, close of its database, or a failing first run). */
  get ended(): boolean {
    return this.#ended || this.#endingWithFailure || !this.#host.isOpen();
  }

  /** A failing first run is being reported: the stream ends once its callbacks return, and
   * reads as ended to them. */
  #endingWithFailure = false;

  /** The subscription is running and has delivered its first result, and no failure since. */
  get #live(): boolean {
    return this.#subscription !== undefined && !this.#awaitingFirst && this.#current !== undefined && !this.#failing;
  }

  /** The last run failed: `#current` is older than that failure. */
  #failing = false;

  /** Calls `onRows` with every emission until the returned function is called. */
  subscribe(onRows: (rows: T[]) => void, onError?: (err: Error) => void): () => void {
    if (typeof onRows !== 'function') throw new TypeError('subscribe() takes a callback');
    if (onError !== undefined && typeof onError !== 'function') throw new TypeError('onError must be a function');
    const listener: Listener<T> = { onRows, onError, scope: callbackScope('quietsqlite.LiveQuery'), got: false, off: false };
    if (!this.#host.isOpen()) this.end();
    if (this.#ended) {
      tellEnded(listener);
      return () => {
        listener.off = true;
      };
    }
    const joining = this.#live;
    this.#listeners.add(listener);
    pinned.add(this as LiveQuery<unknown>);
    this.#start();
    if (this.#ended) {
      tellEnded(listener);
      return () => {
        listener.off = true;
      };
    }
    // Callbacks take every emission: if an iterator left the last one unacknowledged (it
    // paused, or its loop ended with an error), ask for the next one now, or this callback
    // would wait for that iterator.
    this.#acknowledge();
    if (joining) {
      // A late subscriber's first emission is the current result too.
      const rows = this.#current!;
      queueMicrotask(() => {
        // An emission delivered meanwhile (the rest of the batch this subscribe() was called
        // from) is newer than these rows: handing them over now would go back in time.
        if (!this.#listeners.has(listener) || listener.got) return;
        listener.got = true;
        notify(listener.scope, onRows, rows);
      });
    }
    return () => {
      listener.off = true;
      if (!this.#listeners.delete(listener)) return;
      this.#unpinIfIdle();
      this.#stopIfUnused();
    };
  }

  [Symbol.asyncIterator](): AsyncIterator<T[]> {
    const state: IteratorState<T> = { attached: false, waiters: [], buffered: undefined, failure: undefined };
    return {
      next: () => {
        if (!this.#host.isOpen()) this.end();
        if (state.failure !== undefined) {
          const f = state.failure;
          state.failure = undefined;
          return Promise.reject(f);
        }
        if (state.buffered !== undefined) {
          // Rows that arrived while this consumer was busy; the next call asks for more.
          const rows = state.buffered;
          state.buffered = undefined;
          return Promise.resolve({ done: false, value: rows });
        }
        if (this.#ended) return Promise.resolve({ done: true, value: undefined });
        if (!state.attached) {
          state.attached = true;
          const joining = this.#live;
          this.#iterators.add(state);
          this.#start();
          if (this.#ended) return Promise.resolve({ done: true, value: undefined });
          if (joining) return Promise.resolve({ done: false, value: this.#current! });
        }
        // Someone awaits the next rows: that keeps the process alive, as a read would, and
        // this stream reachable. A suspended for-await loop is reachable only through the
        // resolver kept here (`(async () => { for await (...) render(rows) })()` is the
        // usual way to follow a query): collected, the loop stopped for good, although the
        // next write, or an abort, or close(), would have resumed it.
        this.#host.requests.hold();
        this.#holds.n++;
        this.#waiting++;
        pinned.add(this as LiveQuery<unknown>);
        const promise = new Promise<IteratorResult<T[]>>((resolve, reject) => {
          const settle = (): void => {
            this.#holds.n--;
            this.#host.requests.release();
            this.#waiting--;
            this.#unpinIfIdle();
          };
          state.waiters.push({
            resolve: (r) => {
              settle();
              resolve(r);
            },
            reject: (e) => {
              settle();
              reject(e);
            },
          });
        });
        // Pull: only now may the native side send the next (newest) rows.
        this.#acknowledge();
        return promise;
      },
      return: () => {
        this.#detach(state);
        for (const w of state.waiters.splice(0)) w.resolve({ done: true, value: undefined });
        return Promise.resolve({ done: true, value: undefined });
      },
    };
  }

  /** Pinned while a callback is subscribed, or a next() waits. */
  #unpinIfIdle(): void {
    if (this.#listeners.size === 0 && this.#waiting === 0) {
      pinned.delete(this as LiveQuery<unknown>);
    }
  }

  #detach(state: IteratorState<T>): void {
    if (!state.attached) return;
    state.attached = false;
    this.#iterators.delete(state);
    this.#stopIfUnused();
  }

  /** Ends the stream: iterators finish, callbacks stop, native resources are freed. */
  end(): void {
    if (this.#ended) return;
    this.#ended = true;
    if (this.#signal !== undefined) signalState.unlisten(this.#signal, this.#onAbort);
    abortListeners.unregister(this);
    this.#unsubscribe();
    pinned.delete(this as LiveQuery<unknown>);
    this.#listeners.clear();
    for (const it of this.#iterators) {
      for (const w of it.waiters.splice(0)) w.resolve({ done: true, value: undefined });
    }
    this.#iterators.clear();
  }

  #start(): void {
    if (this.#subscription !== undefined || this.#ended) return;
    const host = this.#host;
    if (!host.isOpen()) {
      queueMicrotask(() => this.#fail(closedError(), true));
      return;
    }
    const id = host.requests.id();
    host.requests.subscribers.set(id, LiveQuery.#subscriberFor(new WeakRef(this as LiveQuery<unknown>)));
    try {
      host.native.subscribe(id, this.#sql, this.#params, this.#maxDelayMs);
    } catch (err) {
      host.requests.subscribers.delete(id);
      const e = fromNativeThrow(err);
      queueMicrotask(() => this.#fail(e, true));
      return;
    }
    if (this.#ended) {
      // Ended by JavaScript the conversion ran (a parameter getter that closed the database
      // or ended the stream): nothing will ever be delivered to this subscription.
      host.requests.subscribers.delete(id);
      try {
        host.native.unsubscribe(id);
      } catch {
        // the database is gone: nothing to unsubscribe from
      }
      return;
    }
    this.#subscription = id;
    this.#awaitingFirst = true;
    host.requests.hold();
    this.#holds.n++;
    collected.register(this, { host, id, holds: this.#holds }, this);
  }

  #firstArrived(): void {
    if (!this.#awaitingFirst) return;
    this.#awaitingFirst = false;
    this.#holds.n--;
    this.#host.requests.release();
  }

  /** Made in a static method so the closures capture the weak reference and nothing else
   * (closures created in one scope share its context: one that used `this` would pin the
   * stream for all of them). */
  static #subscriberFor(ref: WeakRef<LiveQuery<unknown>>): Subscriber {
    return {
      emit: (buf) => {
        const live = ref.deref();
        if (live !== undefined) live.#emit(buf as Buffer);
      },
      fail: (err) => {
        const live = ref.deref();
        if (live !== undefined) live.#fail(err, false);
      },
      end: () => ref.deref()?.end(),
    };
  }

  #unsubscribe(): void {
    this.#firstArrived();
    const id = this.#subscription;
    if (id === undefined) return;
    this.#subscription = undefined;
    this.#unacked = false;
    collected.unregister(this);
    this.#host.requests.subscribers.delete(id);
    this.#host.native.unsubscribe(id);
  }

  #stopIfUnused(): void {
    if (this.#listeners.size === 0 && this.#iterators.size === 0) this.#unsubscribe();
  }

  #acknowledge(): void {
    if (!this.#unacked || this.#subscription === undefined) return;
    this.#unacked = false;
    this.#host.native.acknowledge(this.#subscription);
  }

  #emit(buf: Buffer): void {
    const first = this.#awaitingFirst;
    this.#firstArrived();
    this.#unacked = true;
    let rows: T[];
    try {
      rows = decodeRows(buf, 'object', this.#host.requests.intMode) as T[];
    } catch (err) {
      // Rows this side cannot give (intMode 'number' and an integer beyond 2^53): a failing
      // run, after which the next emission is asked for as after any other (#fail).
      this.#fail(err as Error, first);
      return;
    }
    this.#current = rows;
    this.#failing = false;
    // Taken before any callback runs: an iterator whose first next() a callback makes has
    // been handed these rows as the current ones already.
    const iterators = [...this.#iterators];
    // One throwing callback must not keep the rows from the others or stop the stream. A
    // listener removed by an earlier one's callback (or by end()) is not called.
    for (const l of [...this.#listeners]) {
      if (!this.#listeners.has(l)) continue;
      l.got = true;
      notify(l.scope, l.onRows, rows);
    }
    let moreWanted = false;
    for (const it of iterators) {
      if (!this.#iterators.has(it)) continue;
      const w = it.waiters.shift();
      if (w !== undefined) w.resolve({ done: false, value: rows });
      else it.buffered = rows;
      if (it.waiters.length > 0) moreWanted = true;
    }
    // Callbacks take every emission: ask for the next one now. Iterators ask when they
    // call next() again, so a busy consumer then gets the newest rows, not a backlog; one
    // with further next() calls pending asks now.
    if (this.#listeners.size > 0 || moreWanted) this.#acknowledge();
  }

  /** A failing run: the first one ends the stream; later ones are reported and it goes on. */
  #fail(err: Error, fatal: boolean): void {
    // The first run of this subscription (also after a restart, when `current` still holds
    // an older subscription's rows) ends the stream.
    const ending = fatal || this.#awaitingFirst || this.#current === undefined;
    if (ending) this.#endingWithFailure = true;
    this.#firstArrived();
    this.#failing = true;
    // The native side sends nothing more until asked, as after rows.
    this.#unacked = true;
    const told = [...this.#listeners];
    for (const l of told) {
      if (!this.#listeners.has(l)) continue;
      // A joining listener's queued first rows are older than this failure.
      l.got = true;
      notify(l.scope, l.onError ?? unhandledFailure, err);
    }
    for (const it of [...this.#iterators]) {
      // Rows buffered before the failure are older than it: the error is what is current.
      it.buffered = undefined;
      if (it.waiters.length > 0) {
        // The consumer stays subscribed: a next() after the error waits for the next run
        // (a write), instead of subscribing again, which ran the failing query again at
        // once, and again for every retry (a loop that re-ran it a thousand times in 200 ms,
        // each failure reaching every other consumer of the query).
        for (const w of it.waiters.splice(0)) w.reject(err);
      } else {
        it.failure = err;
      }
    }
    if (ending) {
      // Iterators keep a failure they have not seen yet and report it from their next next().
      for (const it of this.#iterators) it.attached = false;
      // Listeners added by the callbacks above (a retry from onError) joined a stream that
      // ends now: they are told so, as subscribe() on an ended stream tells them.
      const joined = [...this.#listeners].filter((l) => !told.includes(l));
      this.end();
      for (const l of joined) tellEnded(l);
      return;
    }
    // Callbacks take every emission: ask for the next one now. Iterators ask with their next
    // next(), so one whose loop ended with this error costs no further runs.
    if (this.#listeners.size > 0) this.#acknowledge();
  }
}
