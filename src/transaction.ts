// Interactive transactions. The writer thread does the holding (a transaction's BEGIN takes
// the write queue; other writers wait in FIFO order until its COMMIT/ROLLBACK); this module
// runs the body, routes calls made inside it (AsyncLocalStorage), and nests savepoints.

import { AsyncLocalStorage, AsyncResource } from 'node:async_hooks';
import { transactionEndedError } from './errors';
import { checkSql, ownOptions } from './options';
import { HeldCall, HeldParams } from './held-call';
import { checkSignal, signalState } from './signals';
import { Statement, statementId, type StatementHost } from './statement';
import type { ExecuteResult, RequestTracker } from './requests';
import type { Row, SqlValue } from './rows';
import type { ArrayRowMode, CallOptions, ExecuteOptions, ObjectRowMode, Params, QueryOptions } from './options';

export type TransactionMode = 'immediate' | 'deferred' | 'exclusive';

export interface TransactionOptions {
  /** How BEGIN takes its locks; default 'immediate' (no late SQLITE_BUSY on the first write). */
  mode?: TransactionMode | undefined;
  /** Aborting rolls the transaction back and rejects with the abort reason. */
  signal?: AbortSignal | undefined;
}

/** What a transaction body can do; `db` methods called inside the body route here too. */
export interface Executor {
  select<T = SqlValue[]>(sql: string, params: Params | undefined, options: QueryOptions & ArrayRowMode): Promise<T[]>;
  select<T = Row>(sql: string, params?: Params, options?: QueryOptions & ObjectRowMode): Promise<T[]>;
  select<T = Row | SqlValue[]>(sql: string, params?: Params, options?: QueryOptions): Promise<T[]>;
  selectOne<T = SqlValue[]>(sql: string, params: Params | undefined, options: QueryOptions & ArrayRowMode): Promise<T | undefined>;
  selectOne<T = Row>(sql: string, params?: Params, options?: QueryOptions & ObjectRowMode): Promise<T | undefined>;
  selectOne<T = Row | SqlValue[]>(sql: string, params?: Params, options?: QueryOptions): Promise<T | undefined>;
  selectBytes(sql: string, params?: Params, options?: CallOptions): Promise<Buffer>;
  execute<T = SqlValue[]>(sql: string, params: Params | undefined, options: ExecuteOptions & ArrayRowMode): Promise<ExecuteResult & { rows: T[] }>;
  execute<T = Row>(sql: string, params?: Params, options?: ExecuteOptions & ObjectRowMode): Promise<ExecuteResult & { rows: T[] }>;
  execute<T = Row | SqlValue[]>(sql: string, params?: Params, options?: ExecuteOptions): Promise<ExecuteResult & { rows: T[] }>;
  executeBatch(sql: string, paramSets: readonly Params[], options?: CallOptions): Promise<{ changes: number }>;
  transaction<R>(body: (tx: Transaction) => Promise<R> | R, options?: TransactionOptions): Promise<R>;
}

/** The operations a transaction needs from its database (implemented by Database). */
export interface TransactionHost {
  /** The `timeoutMs` open option (0: none): a held call's timeout starts when it is made. */
  readonly defaultTimeoutMs: number;
  /** `txSignals`: aborting any of them cancels the request (the transaction's signals);
   * `tracker`: the transaction, told when the request settles. */
  writerRead(
    tx: number,
    sql: string,
    params: unknown,
    options: unknown,
    format: 0 | 1 | 2 | 3,
    txSignals: readonly AbortSignal[],
    tracker: RequestTracker,
  ): Promise<unknown>;
  writerExecute(
    tx: number,
    sql: string,
    params: unknown,
    options: unknown,
    txSignals: readonly AbortSignal[],
    tracker: RequestTracker,
  ): Promise<ExecuteResult>;
  writerBatch(
    tx: number,
    sql: string,
    paramSets: unknown,
    options: unknown,
    txSignals: readonly AbortSignal[],
    tracker: RequestTracker,
  ): Promise<{ changes: number }>;
  /** A nested transaction's savepoint at `depth` (see `SavepointOp`). */
  writerSavepoint(tx: number, op: SavepointOp, depth: number): Promise<void>;
}

export const enum SavepointOp {
  Begin = 0,
  Release = 1,
  RollbackTo = 2,
  /** Rolls back to it and keeps it open (a handle's `rollbackTo()`). */
  RollbackToKeep = 3,
}

/** The innermost transaction of every database whose body encloses the current code. */
type Context = ReadonlyMap<TransactionHost, Transaction>;

let storage: AsyncLocalStorage<Context> | undefined;

/** No enclosing signals (shared, frozen). */
export const NO_SIGNALS: readonly AbortSignal[] = Object.freeze([]);

/** Created on first use: AsyncLocalStorage has a cost on every promise in Node 20, so
 * applications that never open a transaction do not pay it. */
function als(): AsyncLocalStorage<Context> {
  return (storage ??= new AsyncLocalStorage<Context>());
}

/**
 * The innermost transaction of `host` whose body encloses the current code, if any: ended
 * ones too. Code a body left running (timers, un-awaited promises, a body that went on after
 * its signal aborted) must reach the ended transaction and be refused there; escaping to
 * autocommit would commit writes of a transaction that was rolled back.
 */
export function currentTransaction(host: TransactionHost): Transaction | undefined {
  if (storage === undefined) return undefined;
  return storage.getStore()?.get(host);
}

/**
 * Runs `fn` with no transaction in its async context (other AsyncLocalStorage stores stay):
 * for callbacks that must never be part of a transaction, whatever context registered them.
 */
export function outsideTransactions<R>(fn: () => R): R {
  return storage === undefined || storage.getStore() === undefined ? fn() : storage.exit(fn);
}

/**
 * The async context a user callback registered now always runs in (live-query callbacks,
 * backup progress): this one, without any transaction. Whatever code later takes the event
 * from the addon (the event loop, or another caller's poll, perhaps a transaction body's),
 * the callback's `db` calls are never routed into a transaction it is not part of.
 */
export function callbackScope(type: string): AsyncResource {
  return outsideTransactions(() => new AsyncResource(type));
}

export function runInContext<R>(host: TransactionHost, tx: Transaction, body: () => R): R {
  const store = als();
  // Copy-on-enter: a body of database B inside a body of database A still routes A's calls.
  const next = new Map(store.getStore());
  next.set(host, tx);
  return store.run(next, body);
}

/**
 * A body's result as a promise made inside its context (call it there): a thenable that a
 * plain function returns has its `then()` called from a later job, in the context of the
 * promise that takes it up. Taken up outside the context, calls made from that `then()`
 * went to the database, not the transaction, and waited behind it forever. A promise (an
 * async body's) is returned as it is.
 */
export function promiseInContext<R>(result: R | Promise<R>): Promise<R> {
  return Promise.resolve(result);
}

export const TRANSACTION_OPTIONS = ['mode', 'signal'] as const;
const MODE_NAMES = ['immediate', 'deferred', 'exclusive'];

/** Validates transaction options; returns the mode and signal. */
export function transactionOptions(options: unknown): { mode: TransactionMode; signal: AbortSignal | undefined } {
  if (options === undefined) return { mode: 'immediate', signal: undefined };
  if (options === null || typeof options !== 'object') throw new TypeError('transaction options must be an object');
  const { mode = 'immediate', signal } = ownOptions<TransactionOptions>('transaction', options, TRANSACTION_OPTIONS);
  if (typeof mode !== 'string' || !MODE_NAMES.includes(mode)) {
    throw new TypeError("mode must be 'immediate', 'deferred' or 'exclusive'");
  }
  return { mode, signal: checkSignal(signal) };
}

/**
 * Runs a body and settles with it, or earlier with the abort reason of `signal` or a reason
 * given to the cancel function that `onCancel` receives (at once, before the body starts).
 * When another racer wins, the body's own outcome no longer matters to anyone, so its
 * rejection is deliberately dropped. One promise and one reaction per body, whatever races
 * it: every transaction pays this, and under Node 20 each promise made inside a body also
 * runs AsyncLocalStorage's hooks (docs/experiments/058-silent-begin.md).
 */
export function raceBody<R>(
  run: () => Promise<R> | R,
  signal: AbortSignal | undefined,
  onCancel?: (cancel: (reason: unknown) => void) => void,
): Promise<R> {
  if (signal === undefined && onCancel === undefined) {
    try {
      return Promise.resolve(run());
    } catch (err) {
      return Promise.reject(err);
    }
  }
  let resolve!: (value: R) => void;
  let reject!: (reason: unknown) => void;
  const outcome = new Promise<R>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  // An executor that could not run (no stack left to call it) left `outcome` rejected with
  // that RangeError, and nothing to settle it with: it is the outcome.
  if (reject === undefined) return outcome;
  let onAbort: (() => void) | undefined;
  let lost = false;
  const stopListening = (): void => {
    if (onAbort !== undefined) signalState.unlisten(signal!, onAbort);
    onAbort = undefined;
  };
  const lose = (reason: unknown): void => {
    lost = true;
    stopListening();
    reject(reason);
  };
  // The abort listener is in place before the body starts: a body that aborts its own
  // signal before its first await must lose, not commit. An abort dispatches synchronously,
  // so it wins over a body whose result has not been taken yet (that takes a microtask).
  if (signal !== undefined) {
    if (signalState.aborted(signal)) {
      lost = true;
      reject(signalState.reason(signal));
    } else {
      onAbort = () => lose(signalState.reason(signal));
      signalState.listen(signal, onAbort);
    }
  }
  onCancel?.(lose);
  // Lost before it started (a nested transaction's signal aborted while its SAVEPOINT was on
  // the writer): the body never runs, as a transaction's never does once aborted.
  if (lost) return outcome;
  let body: Promise<R>;
  try {
    body = Promise.resolve(run());
  } catch (err) {
    body = Promise.reject(err);
  }
  body.then(
    (value) => {
      stopListening();
      resolve(value);
    },
    lose,
  );
  return outcome;
}

/** The handle a transaction body receives. Valid only while its body runs. */
export class Transaction implements Executor, RequestTracker {
  #active = true;
  /** Nested bodies started and not yet ended (running or waiting for their turn). */
  #children = 0;
  /** A nested body was ever started on this handle (then calls look up where they come
   * from: `#descendantInContext`). */
  #nestedEver = false;
  /** Settles once every nested body started so far has ended and every call held for them
   * so far has been sent: nested bodies of one transaction run one after another (FIFO),
   * each inside its own savepoint, and a call held while one runs takes its place in the
   * same line, so that what the writer runs keeps the order of the calls. */
  #lane: Promise<void> = Promise.resolve();
  /** Calls of this level waiting for its nested bodies to end, not sent yet; what settles
   * when they have all been sent, and what settles it. */
  #waitingCalls = 0;
  #callsSent: Promise<void> | undefined;
  #onCallsSent: (() => void) | undefined;
  /** At the outermost level: how to end each phase of a nested transaction that a forced
   * close must end (`cancelNested`), and that close's reason once it came. */
  #nestedCancels: Set<(reason: unknown) => void> | undefined;
  #cancelled: { reason: unknown } | undefined;
  /** Requests sent at this level that have not settled (`RequestTracker`). */
  #unsettled = 0;
  /** `callerEnded()` was called: a request that fails from now on is one left in flight. */
  #callerEnded = false;
  /** The first request left in flight that failed, with its reason. */
  #leftFailure: { reason: unknown } | undefined;
  /** Settles when the last request left in flight settles (`leftInFlight`), and what
   * settles it. */
  #leftSettled: Promise<void> | undefined;
  #onLeftSettled: (() => void) | undefined;

  constructor(
    private readonly host: TransactionHost,
    /** The writer-side transaction id. */
    readonly id: number,
    /** 0 for the outermost level, 1 for a first savepoint, ... */
    readonly depth: number,
    /** @internal The transaction this one is nested in. */
    readonly parent?: Transaction,
    /** @internal The signals of this transaction and those enclosing it: aborting one interrupts the
     * statement running for it, so the rollback does not wait behind that statement. */
    readonly signals: readonly AbortSignal[] = NO_SIGNALS,
  ) {}

  /** False once the body has ended (committed, rolled back or aborted), or once any
   * transaction it is nested in has: a nested body left running after its parent ended
   * belongs to a savepoint that is gone, and anything it sent would land in whatever the
   * connection has open now. */
  get active(): boolean {
    for (let t: Transaction | undefined = this; t !== undefined; t = t.parent) if (!t.#active) return false;
    return true;
  }

  /** @internal The body has ended (or a transaction it is nested in has). */
  end(): void {
    this.#active = false;
    // The outermost transaction ended (committed, rolled back, or abandoned by a signal)
    // with nested transactions still waiting for bodies that have not settled: their
    // `transaction()` promises, and the calls held behind them, would wait forever. They
    // end with it; nothing of theirs can commit any more.
    if (this.parent === undefined && this.#nestedCancels !== undefined && this.#nestedCancels.size > 0) {
      this.cancelNested(transactionEndedError());
    }
  }

  /** @internal (RequestTracker) A request of this level was sent. */
  requestSent(): void {
    this.#unsettled++;
  }

  /** @internal (RequestTracker) A request of this level settled. */
  requestSettled(failed: boolean, reason: unknown): void {
    if (failed && this.#callerEnded && this.#leftFailure === undefined) this.#leftFailure = { reason };
    if (--this.#unsettled === 0 && this.#onLeftSettled !== undefined) {
      const settled = this.#onLeftSettled;
      this.#onLeftSettled = undefined;
      this.#leftSettled = undefined;
      settled();
    }
  }

  /** @internal The code that sends this level's requests has ended (its body returned, or `commit()`
   * was called on a handle): requests of this level that fail from now on are ones it left
   * in flight and can no longer see. */
  callerEnded(): void {
    this.#callerEnded = true;
  }

  /**
   * @internal Undefined when no request of this level is in flight; otherwise a promise that resolves
   * once all have settled. The writer runs them before the COMMIT (or RELEASE) that follows,
   * in order; but one that fails, or that its signal drops, was never seen by the body, so
   * committing would keep the requests around it and lose it: all or nothing must hold,
   * and `throwIfLeftFailed` then rolls back instead.
   */
  leftInFlight(): Promise<void> | undefined {
    if (this.#unsettled === 0) return undefined;
    return (this.#leftSettled ??= new Promise<void>((resolve) => (this.#onLeftSettled = resolve)));
  }

  /** @internal Throws the reason of the first request left in flight that failed, if one did. */
  throwIfLeftFailed(): void {
    if (this.#leftFailure !== undefined) throw this.#leftFailure.reason;
  }

  /** @internal No nested body of this transaction runs or waits now, and no call waits for one. */
  get drainedNow(): boolean {
    return this.#children === 0 && this.#waitingCalls === 0;
  }

  /** @internal Resolves once no nested body of this transaction runs or waits, and the calls that
   * waited for them have been sent (before COMMIT/RELEASE: a nested body the caller did not
   * await, and a call it made meanwhile, are still part of this transaction). */
  async drained(): Promise<void> {
    while (!this.drainedNow) {
      if (this.#children > 0) await this.#nestedEnded();
      else await (this.#callsSent ??= new Promise<void>((resolve) => (this.#onCallsSent = resolve)));
    }
  }

  /** Resolves once no nested body of this transaction runs or waits. */
  #nestedEnded(): Promise<void> {
    return this.#children === 0 ? Promise.resolve() : this.#lane.then(() => this.#nestedEnded());
  }

  /** A call that waited for the nested bodies is being sent. */
  #callWent(): void {
    if (--this.#waitingCalls === 0 && this.#onCallsSent !== undefined) {
      const sent = this.#onCallsSent;
      this.#onCallsSent = undefined;
      this.#callsSent = undefined;
      sent();
    }
  }

  #check(): void {
    if (!this.active) throw transactionEndedError();
  }

  /** The innermost transaction nested in this one whose body runs the current code, whether
   * it is still active or has ended; undefined outside of them. */
  #descendantInContext(): Transaction | undefined {
    if (!this.#nestedEver) return undefined;
    const current = currentTransaction(this.host);
    if (current === this) return undefined;
    // The current body is nested in this one when this one is among its ancestors.
    for (let p = current?.parent; p !== undefined; p = p.parent) if (p === this) return current;
    return undefined;
  }

  /**
   * Sends a request of this level. While a nested body runs, the savepoint it opened is the
   * connection's innermost: a request from this level would land inside it and be undone by
   * its rollback. Such requests wait for the nested bodies to end, unless they come from inside
   * one of them (then they belong there, as `db.*` calls from that body do). From a nested
   * body that has ended (a timer it left behind), they reject as that body's own calls do:
   * sent at this level, they would commit with this transaction although the nested one
   * rejected.
   */
  #send<T>(
    sql: string,
    what: HeldParams,
    params: unknown,
    options: unknown,
    withRowMode: boolean,
    send: (from: Transaction, sql: string, params: unknown, options: unknown) => Promise<T>,
  ): Promise<T> {
    if (!this.active) return Promise.reject(transactionEndedError());
    const inside = this.#descendantInContext();
    // Sent as the nested body's own, as `db.*` calls from there are: its signals cancel it,
    // it waits for that body's own nested bodies, and it counts among the requests the body
    // may leave in flight (counted here, a failure of it slipped past both).
    if (inside !== undefined) return inside.#send(sql, what, params, options, withRowMode, send);
    // Sent at once when nothing is ahead of it in this level's line: no nested body, and no
    // call held for one that has not been sent yet (it would overtake that call).
    if (this.#children === 0 && this.#waitingCalls === 0) return send(this, sql, params, options);
    // A prepared statement closed while this call waits must not fail it (calls made before
    // close() complete): it is checked now and goes by its text.
    let text = sql;
    let held: HeldCall;
    try {
      if ((sql as unknown) instanceof Statement) {
        statementId(sql as unknown as Statement, this.host as unknown as StatementHost);
        text = (sql as unknown as Statement).sql;
      }
      // What the call was given is taken now, as every other call takes it: the caller may
      // reuse its Buffer or array once the call returns (they stored the bytes changed after
      // the call), and its timeout runs from now, its signal is watched from now.
      held = new HeldCall(what, params, options, withRowMode, this.host.defaultTimeoutMs);
      checkSql(text);
    } catch (err) {
      return Promise.reject(err);
    }
    // Counted from now: it may be sent after the body ended, and a failure to send it then
    // (a parameter the binding refuses) is one the body never saw. The COMMIT (or RELEASE)
    // waits until it has been sent (`drained`).
    this.requestSent();
    this.#waitingCalls++;
    // Its place in the line: after the nested bodies and held calls before it (a call made
    // before a nested body was started is sent before that body's savepoint, and calls are
    // sent in the order they were made), before those that come later.
    const before = this.#lane;
    let gone!: () => void;
    // `gone` is called only once `before` has settled, so this one promise stands for both.
    this.#lane = new Promise<void>((resolve) => (gone = resolve));
    const call = new Promise<T>((resolve, reject) => {
      let over = false;
      held.watch((reason) => {
        if (over) return;
        over = true;
        held.release();
        reject(reason);
      });
      void before.then(() => {
        this.#callWent();
        gone();
        if (over) return; // cancelled while it waited: nothing is sent
        over = true;
        held.release();
        let sent: Promise<T>;
        try {
          sent = this.active ? send(this, text, held.params, held.optionsNow()) : Promise.reject(transactionEndedError());
        } catch (err) {
          sent = Promise.reject(err);
        }
        sent.then(resolve, reject);
      });
    });
    call.then(
      () => this.requestSettled(false, undefined),
      (err: unknown) => this.requestSettled(true, err),
    );
    return call;
  }

  select<T = SqlValue[]>(sql: string, params: Params | undefined, options: QueryOptions & ArrayRowMode): Promise<T[]>;
  select<T = Row>(sql: string, params?: Params, options?: QueryOptions & ObjectRowMode): Promise<T[]>;
  select<T = Row | SqlValue[]>(sql: string, params?: Params, options?: QueryOptions): Promise<T[]>;
  select<T>(sql: string, params?: unknown, options?: QueryOptions): Promise<T[]> {
    return this.#send(sql, HeldParams.One, params, options, true, (from, text, p, o) =>
      this.host.writerRead(from.id, text, p, o, 0, from.signals, from) as Promise<T[]>);
  }

  selectOne<T = SqlValue[]>(sql: string, params: Params | undefined, options: QueryOptions & ArrayRowMode): Promise<T | undefined>;
  selectOne<T = Row>(sql: string, params?: Params, options?: QueryOptions & ObjectRowMode): Promise<T | undefined>;
  selectOne<T = Row | SqlValue[]>(sql: string, params?: Params, options?: QueryOptions): Promise<T | undefined>;
  selectOne<T>(sql: string, params?: unknown, options?: QueryOptions): Promise<T | undefined> {
    return this.#send(sql, HeldParams.One, params, options, true, (from, text, p, o) =>
      this.host.writerRead(from.id, text, p, o, 1, from.signals, from) as Promise<T | undefined>);
  }

  selectBytes(sql: string, params?: Params, options?: CallOptions): Promise<Buffer> {
    return this.#send(sql, HeldParams.One, params, options, false, (from, text, p, o) =>
      this.host.writerRead(from.id, text, p, o, 2, from.signals, from) as Promise<Buffer>);
  }

  execute<T = SqlValue[]>(sql: string, params: Params | undefined, options: ExecuteOptions & ArrayRowMode): Promise<ExecuteResult & { rows: T[] }>;
  execute<T = Row>(sql: string, params?: Params, options?: ExecuteOptions & ObjectRowMode): Promise<ExecuteResult & { rows: T[] }>;
  execute<T = Row | SqlValue[]>(sql: string, params?: Params, options?: ExecuteOptions): Promise<ExecuteResult & { rows: T[] }>;
  execute<T>(sql: string, params?: unknown, options?: ExecuteOptions): Promise<ExecuteResult & { rows: T[] }> {
    return this.#send(sql, HeldParams.One, params, options, true, (from, text, p, o) =>
      this.host.writerExecute(from.id, text, p, o, from.signals, from) as Promise<ExecuteResult & { rows: T[] }>);
  }

  executeBatch(sql: string, paramSets: readonly Params[], options?: CallOptions): Promise<{ changes: number }> {
    return this.#send(sql, HeldParams.Sets, paramSets, options, false, (from, text, p, o) =>
      this.host.writerBatch(from.id, text, p, o, from.signals, from));
  }

  /** @internal Prepares (never runs) a prepared statement on this transaction's connection
   * (format 3: its description). */
  describe(sql: string): Promise<unknown> {
    return this.#send(sql, HeldParams.None, undefined, undefined, false, (from, text) =>
      this.host.writerRead(from.id, text, undefined, undefined, 3, from.signals, from));
  }

  /** A nested transaction: a savepoint inside this one. Nested bodies of one transaction
   * run one at a time, in the order they were started. */
  async transaction<R>(body: (tx: Transaction) => Promise<R> | R, options?: TransactionOptions): Promise<R> {
    this.#check();
    if (typeof body !== 'function') throw new TypeError('transaction() takes an async function');
    // `mode` is validated but has no effect on a savepoint: the outer BEGIN chose the locks.
    const { signal } = transactionOptions(options);
    signalState.throwIfAborted(signal);
    // Called on this handle from inside a nested body: waiting for our nested bodies would
    // wait for the caller itself; it belongs to the innermost body, as `db.transaction` does.
    // From an ended nested body, that body's own transaction() rejects.
    const inside = this.#descendantInContext();
    if (inside !== undefined) return inside.transaction(body, options);

    const before = this.#lane;
    let done!: () => void;
    const mine = new Promise<void>((resolve) => (done = resolve));
    this.#lane = Promise.all([before, mine]).then(() => {});
    this.#children++;
    this.#nestedEver = true;
    // A forced close ends every phase of this nested transaction as it ends the outermost
    // one's: a nested body that never settles no longer keeps its `transaction()`, and the
    // calls that wait for it, pending forever.
    const root = this.#root();
    const registered: ((reason: unknown) => void)[] = [];
    const onCancel = (cancel: (reason: unknown) => void): void => {
      if (root.#cancelled !== undefined) return cancel(root.#cancelled.reason);
      (root.#nestedCancels ??= new Set()).add(cancel);
      registered.push(cancel);
    };
    try {
      await raceBody(() => before, signal, onCancel);
      this.#check();
      const depth = this.depth + 1;
      await this.host.writerSavepoint(this.id, SavepointOp.Begin, depth);
      const signals = signal === undefined ? this.signals : [...this.signals, signal];
      const inner = new Transaction(this.host, this.id, depth, this, signals);
      try {
        const result = await raceBody(() => runInContext(this.host, inner, () => promiseInContext(body(inner))), signal, onCancel);
        inner.callerEnded();
        while (!inner.drainedNow) await raceBody(() => inner.drained(), signal, onCancel);
        inner.end();
        // Requests the body left in flight: one that failed undoes its savepoint.
        const left = inner.leftInFlight();
        if (left !== undefined) await raceBody(() => left, signal, onCancel);
        inner.throwIfLeftFailed();
        // Savepoints are named by depth: if this level ended while the body ran, its
        // savepoint was rolled back with it, and releasing "the one at this depth" would
        // release a later sibling's. The body's writes are gone: it must not look committed.
        if (!this.active) throw transactionEndedError();
        await this.host.writerSavepoint(this.id, SavepointOp.Release, depth);
        return result;
      } catch (err) {
        inner.end();
        if (this.active) {
          await this.host.writerSavepoint(this.id, SavepointOp.RollbackTo, depth).catch(() => {});
        }
        throw err;
      }
    } finally {
      for (const cancel of registered) root.#nestedCancels?.delete(cancel);
      this.#children--;
      done();
    }
  }

  #root(): Transaction {
    let t: Transaction = this;
    while (t.parent !== undefined) t = t.parent;
    return t;
  }

  /** @internal A forced close ends this (outermost) transaction: its nested transactions,
   * running or waiting, reject with `reason` too. */
  cancelNested(reason: unknown): void {
    this.#cancelled ??= { reason };
    // The first reason stands (a forced close's, then the end's).
    for (const cancel of [...(this.#nestedCancels ?? [])]) cancel(this.#cancelled.reason);
  }
}
