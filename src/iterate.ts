// db.iterate(): a large result in chunks, with backpressure. A native reader holds the
// statement (one read transaction, so one snapshot) and steps chunk k+1 only when this side
// starts handing out chunk k: at most one chunk waits here ahead of the consumer, so memory
// stays bounded whatever the size of the result (crates/core/src/iterate.rs).

import { closedError, fromNativeThrow } from './errors';
import { binding, type NativeDatabase } from './native';
import { checkTimeout, ownOptions, type QueryOptions } from './options';
import { checkSignal, signalState } from './signals';
import type { Requests, Subscriber } from './requests';
import { startTimer, stopTimer, timeoutError } from './timers';
import { decodeRows, type RowMode } from './rows';

export interface IterateOptions extends QueryOptions {
  /** Rows per chunk (1 to 65536); default 256. A chunk also ends at about 1 MiB of data. */
  chunkSize?: number | undefined;
}

/** What an iterator needs from its database. */
export interface IterateHost {
  native: NativeDatabase;
  requests: Requests;
  isOpen(): boolean;
}

interface IterateSettings {
  rowMode: RowMode;
  chunkSize: number;
  signal: AbortSignal | undefined;
  timeoutMs: number;
}

const ITERATE_KEYS = ['rowMode', 'chunkSize', 'signal', 'timeoutMs'] as const;
const DEFAULT_CHUNK_ROWS: number = binding.DEFAULT_CHUNK_ROWS;
const MAX_CHUNK_ROWS: number = binding.MAX_CHUNK_ROWS;

/** Checks iterate()'s options; `defaultTimeoutMs`: the database's default (0 for none). */
export function resolveIterateOptions(options: unknown, defaultTimeoutMs: number): IterateSettings {
  if (options === undefined) {
    return { rowMode: 'object', chunkSize: DEFAULT_CHUNK_ROWS, signal: undefined, timeoutMs: defaultTimeoutMs };
  }
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw new TypeError('iterate options must be an object (not an array)');
  }
  const o = ownOptions<IterateOptions>('iterate', options, ITERATE_KEYS);
  const rowMode = o.rowMode === undefined ? 'object' : o.rowMode;
  if (rowMode !== 'object' && rowMode !== 'array') throw new TypeError("rowMode must be 'object' or 'array'");
  const chunkSize = o.chunkSize === undefined ? DEFAULT_CHUNK_ROWS : o.chunkSize;
  if (chunkSize === null) throw new TypeError('chunkSize must be a number of rows');
  if (!Number.isInteger(chunkSize) || chunkSize < 1 || chunkSize > MAX_CHUNK_ROWS) {
    throw new RangeError(`chunkSize must be an integer from 1 to ${MAX_CHUNK_ROWS}`);
  }
  const signal = checkSignal(o.signal);
  const timeoutMs = o.timeoutMs === undefined ? defaultTimeoutMs : checkTimeout(o.timeoutMs);
  return { rowMode, chunkSize, signal, timeoutMs };
}

interface Waiter<T> {
  resolve: (r: IteratorResult<T>) => void;
  reject: (e: unknown) => void;
}

const NEW = 0;
const OPEN = 1;
const FINISHED = 2;

/** How to stop watching an iterator's signal and timeout, while they are watched. */
interface Watching {
  unwatch: (() => void) | undefined;
}

/** Iterators with a next() waiting for rows: kept from collection until it settles. */
const waiting = new Set<RowIterator<unknown>>();

/** An iterator nobody references any more (never finished, no next() waiting) releases its
 * reader. */
const collected = new FinalizationRegistry<{ host: IterateHost; id: number; holds: { n: number }; watching: Watching }>(
  ({ host, id, holds, watching }) => {
    // Its signal's listener and its timer hold no reference to it, but stay until removed.
    watching.unwatch?.();
    host.requests.subscribers.delete(id);
    try {
      host.native.iterateEnd(id);
    } catch {
      // The database is gone: so is the reader.
    }
    for (; holds.n > 0; holds.n--) host.requests.release();
  },
);

function done<T>(): IteratorResult<T> {
  return { done: true, value: undefined };
}

/** The rows of a query, in chunks: `for await (const row of db.iterate(sql))`. */
export class RowIterator<T> implements AsyncIterableIterator<T> {
  readonly #host: IterateHost;
  readonly #sql: string;
  readonly #params: unknown;
  readonly #o: IterateSettings;
  #status = NEW;
  #id = 0;
  /** The chunk being handed out, and the position in it. */
  #chunk: T[] = [];
  #at = 0;
  /** The next chunk, arrived while the consumer was still on `#chunk`. */
  #ahead: T[] | undefined;
  /** The native side sent its last chunk (it holds nothing any more). */
  #nativeDone = false;
  /** An error to report from the next call to next(). */
  #failure: { error: unknown } | undefined;
  readonly #waiters: Waiter<T>[] = [];
  /** Keep-alives held for pending next() calls (shared with the finalizer). */
  readonly #holds = { n: 0 };
  /** Shared with `collected`, which may have to stop the watching itself. */
  readonly #watching: Watching = { unwatch: undefined };

  /** @internal use db.iterate() */
  constructor(host: IterateHost, sql: string, params: unknown, settings: IterateSettings) {
    this.#host = host;
    this.#sql = sql;
    this.#params = params;
    this.#o = settings;
  }

  [Symbol.asyncIterator](): this {
    return this;
  }

  next(): Promise<IteratorResult<T>> {
    if (this.#at < this.#chunk.length) return Promise.resolve({ done: false, value: this.#chunk[this.#at++]! });
    if (this.#failure !== undefined) {
      // Rows that came before a failure of the query go out before it (see `#fail`).
      if (this.#ahead !== undefined) {
        this.#take(this.#ahead);
        if (this.#at < this.#chunk.length) return Promise.resolve({ done: false, value: this.#chunk[this.#at++]! });
      }
      const f = this.#failure.error;
      this.#failure = undefined;
      this.#finish();
      return Promise.reject(f);
    }
    if (this.#status === FINISHED) return Promise.resolve(done());
    if (this.#ahead !== undefined) {
      this.#take(this.#ahead);
      if (this.#at < this.#chunk.length) return Promise.resolve({ done: false, value: this.#chunk[this.#at++]! });
    }
    if (this.#nativeDone) {
      this.#finish();
      return Promise.resolve(done());
    }
    if (this.#status === NEW) {
      try {
        this.#start();
      } catch (err) {
        this.#finish();
        return Promise.reject(err);
      }
    }
    // Someone awaits rows: that keeps the process alive, as a read would, and this iterator
    // reachable. A suspended for-await loop is reachable only through the resolver kept
    // here: collected, the loop never resumed, and a top-level await of it ended the
    // process with the rows still coming.
    this.#host.requests.hold();
    this.#holds.n++;
    waiting.add(this as RowIterator<unknown>);
    return new Promise<IteratorResult<T>>((resolve, reject) => {
      const settle = (): void => {
        if (--this.#holds.n === 0) waiting.delete(this as RowIterator<unknown>);
        this.#host.requests.release();
      };
      this.#waiters.push({
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
  }

  /** Ends the iteration (a `break` calls it): the native reader is released at once. */
  return(): Promise<IteratorResult<T>> {
    this.#finish();
    return Promise.resolve(done());
  }

  /** `await using it = db.iterate(...)`: ends the iteration like return(). */
  async [Symbol.asyncDispose](): Promise<void> {
    this.#finish();
  }

  /** @internal test hook: rows the native reader stepped so far (-1: not open natively).
   * Needs the addon built with test hooks. */
  [Symbol.for('quietsqlite.iterateStepped')](): number {
    const native = this.#host.native as unknown as { iterateStepped?(id: number): number };
    if (native.iterateStepped === undefined) throw new Error('this addon was built without test hooks');
    return this.#status === OPEN ? native.iterateStepped(this.#id) : -1;
  }

  #start(): void {
    const host = this.#host;
    if (!host.isOpen()) throw closedError();
    signalState.throwIfAborted(this.#o.signal);
    const id = host.requests.id();
    host.requests.subscribers.set(id, RowIterator.#subscriberFor(new WeakRef(this as RowIterator<unknown>)));
    try {
      host.native.iterate(id, this.#sql, this.#params, this.#o.chunkSize);
    } catch (err) {
      host.requests.subscribers.delete(id);
      throw fromNativeThrow(err);
    }
    this.#id = id;
    this.#status = OPEN;
    collected.register(this, { host, id, holds: this.#holds, watching: this.#watching }, this);
    this.#watch();
  }

  /** Arms the signal and the timeout: either ends the iteration with its reason. */
  #watch(): void {
    const { signal, timeoutMs } = this.#o;
    if (signal === undefined && timeoutMs === 0) return;
    const ref = new WeakRef(this as RowIterator<unknown>);
    const onAbort = (): void => RowIterator.#failRef(ref, signalState.reason(signal!));
    if (signal !== undefined) signalState.listen(signal, onAbort);
    let timer: NodeJS.Timeout | undefined;
    if (timeoutMs > 0) {
      timer = startTimer(() => RowIterator.#failRef(ref, timeoutError()), timeoutMs);
      // An iterator nobody reads must not keep the process alive; a pending next() does.
      timer.unref();
    }
    this.#watching.unwatch = () => {
      if (signal !== undefined) signalState.unlisten(signal, onAbort);
      if (timer !== undefined) stopTimer(timer);
    };
  }

  static #failRef(ref: WeakRef<RowIterator<unknown>>, error: unknown, afterRows = false): void {
    const it = ref.deref();
    if (it !== undefined) it.#fail(error, afterRows);
  }

  /** Made static so the closures capture the weak reference only (see stream.ts). */
  static #subscriberFor(ref: WeakRef<RowIterator<unknown>>): Subscriber {
    return {
      emit: (payload) => {
        const it = ref.deref();
        if (it !== undefined) it.#arrived(payload as [Buffer, boolean]);
      },
      fail: (err) => RowIterator.#failRef(ref, err, true),
      end: () => RowIterator.#failRef(ref, closedError('the database was closed while this iterator was open')),
    };
  }

  /** `rows` becomes the chunk handed out; the native side may step the next one now. */
  #take(rows: T[]): void {
    this.#chunk = rows;
    this.#at = 0;
    this.#ahead = undefined;
    if (!this.#nativeDone) this.#host.native.iterateNext(this.#id);
  }

  #arrived([buf, last]: [Buffer, boolean]): void {
    if (this.#status !== OPEN) return;
    let rows: T[];
    try {
      rows = decodeRows(buf, this.#o.rowMode, this.#host.requests.intMode) as T[];
    } catch (err) {
      this.#fail(err, true);
      return;
    }
    if (last) {
      // The native side has let go of the reader; nothing more comes for this id.
      this.#nativeDone = true;
      this.#host.requests.subscribers.delete(this.#id);
    }
    if (this.#waiters.length === 0) {
      this.#ahead = rows;
      return;
    }
    this.#take(rows);
    while (this.#waiters.length > 0 && this.#at < this.#chunk.length) {
      this.#waiters.shift()!.resolve({ done: false, value: this.#chunk[this.#at++]! });
    }
    if (this.#waiters.length > 0 && this.#nativeDone) this.#finish();
  }

  /** Ends the iteration with `error`: a waiting next() rejects with it, or the next one will.
   * `afterRows`: the query itself failed (a later chunk's SQL error, or its values), and
   * the rows received before it are handed out first, as a synchronous driver's iterator
   * gives every row before the failing one. A loop that awaited between rows lost the rest
   * of its chunk when the next one failed meanwhile. An abort, a timeout or close() ends the
   * iteration at once. (A waiting next() means no row is held.) */
  #fail(error: unknown, afterRows = false): void {
    if (this.#status === FINISHED || this.#failure !== undefined) return;
    this.#release();
    if (!afterRows) {
      this.#chunk = [];
      this.#at = 0;
      this.#ahead = undefined;
    }
    const first = this.#waiters.shift();
    if (first === undefined) {
      this.#failure = { error };
      return;
    }
    first.reject(error);
    this.#finish();
  }

  /** Lets go of everything native: the reader (unless already released), the subscription,
   * the signal, the timer. */
  #release(): void {
    this.#watching.unwatch?.();
    this.#watching.unwatch = undefined;
    if (this.#status !== OPEN) return;
    collected.unregister(this);
    this.#host.requests.subscribers.delete(this.#id);
    if (!this.#nativeDone) {
      this.#nativeDone = true;
      try {
        this.#host.native.iterateEnd(this.#id);
      } catch {
        // Only a database already gone throws here: its readers are gone too.
      }
    }
  }

  #finish(): void {
    this.#release();
    this.#status = FINISHED;
    this.#chunk = [];
    this.#at = 0;
    this.#ahead = undefined;
    this.#failure = undefined;
    for (const w of this.#waiters.splice(0)) w.resolve(done());
  }
}
