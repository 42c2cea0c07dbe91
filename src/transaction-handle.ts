// An explicit transaction: begin now, commit or roll back later, from any code that holds the
// handle. Query builders (Kysely's startTransaction, its driver interface) need this shape; a
// callback body cannot express it. The handle is owned by the database's transaction
// machinery: close() rolls it back, close({ force }) interrupts and rolls it back, its signal
// rolls it back, so nothing waits on a handle that nobody will end.

import { transactionEndedError } from './errors';
import type { ExecuteResult } from './requests';
import type { Row, SqlValue } from './rows';
import type { ArrayRowMode, CallOptions, ExecuteOptions, ObjectRowMode, Params, QueryOptions } from './options';
import { SavepointOp, type Transaction } from './transaction';

/** What a handle needs from its database (implemented in Database.begin). */
export interface HandleHost {
  /** Commits (true) or rolls back (false) on the writer and releases it. Called once. */
  finish(commit: boolean): Promise<void>;
  savepoint(op: SavepointOp, depth: number): Promise<void>;
}

type State = 'active' | 'committed' | 'rolledBack';

function checkName(name: unknown): asserts name is string {
  if (typeof name !== 'string' || name.length === 0) throw new TypeError('a savepoint name must be a non-empty string');
}

/** Returned by `db.begin()`. Holds the writer from BEGIN until commit(), rollback() or close(). */
export class TransactionHandle {
  readonly #tx: Transaction;
  readonly #host: HandleHost;
  #state: State = 'active';
  /** Why the database ended the transaction (close, abort), reported by later calls. */
  #reason: unknown;
  /** Open savepoints, innermost last; savepoint i is the writer's savepoint of depth i + 1. */
  readonly #savepoints: string[] = [];

  /** @internal */
  constructor(tx: Transaction, host: HandleHost) {
    this.#tx = tx;
    this.#host = host;
  }

  /** True until commit(), rollback(), or the database ended the transaction. */
  get active(): boolean {
    return this.#state === 'active';
  }

  #ended(): Promise<never> {
    return Promise.reject(this.#reason ?? transactionEndedError());
  }

  select<T = SqlValue[]>(sql: string, params: Params | undefined, options: QueryOptions & ArrayRowMode): Promise<T[]>;
  select<T = Row>(sql: string, params?: Params, options?: QueryOptions & ObjectRowMode): Promise<T[]>;
  select<T = Row | SqlValue[]>(sql: string, params?: Params, options?: QueryOptions): Promise<T[]>;
  select<T>(sql: string, params?: unknown, options?: QueryOptions): Promise<T[]> {
    return this.active ? this.#tx.select<T>(sql, params as Params, options) : this.#ended();
  }

  selectOne<T = SqlValue[]>(sql: string, params: Params | undefined, options: QueryOptions & ArrayRowMode): Promise<T | undefined>;
  selectOne<T = Row>(sql: string, params?: Params, options?: QueryOptions & ObjectRowMode): Promise<T | undefined>;
  selectOne<T = Row | SqlValue[]>(sql: string, params?: Params, options?: QueryOptions): Promise<T | undefined>;
  selectOne<T>(sql: string, params?: unknown, options?: QueryOptions): Promise<T | undefined> {
    return this.active ? this.#tx.selectOne<T>(sql, params as Params, options) : this.#ended();
  }

  selectBytes(sql: string, params?: Params, options?: CallOptions): Promise<Buffer> {
    return this.active ? this.#tx.selectBytes(sql, params, options) : this.#ended();
  }

  execute<T = SqlValue[]>(sql: string, params: Params | undefined, options: ExecuteOptions & ArrayRowMode): Promise<ExecuteResult & { rows: T[] }>;
  execute<T = Row>(sql: string, params?: Params, options?: ExecuteOptions & ObjectRowMode): Promise<ExecuteResult & { rows: T[] }>;
  execute<T = Row | SqlValue[]>(sql: string, params?: Params, options?: ExecuteOptions): Promise<ExecuteResult & { rows: T[] }>;
  execute<T>(sql: string, params?: unknown, options?: ExecuteOptions): Promise<ExecuteResult & { rows: T[] }> {
    return this.active ? this.#tx.execute<T>(sql, params as Params, options) : this.#ended();
  }

  executeBatch(sql: string, paramSets: readonly Params[], options?: CallOptions): Promise<{ changes: number }> {
    return this.active ? this.#tx.executeBatch(sql, paramSets, options) : this.#ended();
  }

  /** Opens a savepoint named `name` (a label kept here: it never reaches SQL text). */
  savepoint(name: string): Promise<void> {
    try {
      checkName(name);
    } catch (err) {
      return Promise.reject(err);
    }
    if (!this.active) return this.#ended();
    this.#savepoints.push(name);
    const depth = this.#savepoints.length;
    return this.#host.savepoint(SavepointOp.Begin, depth).catch((err: unknown) => {
      // Not opened: forget it (and anything opened after it, which the writer refused too).
      if (this.#savepoints.length >= depth) this.#savepoints.length = depth - 1;
      throw err;
    });
  }

  /** Undoes everything since savepoint `name` (the newest of that name); the savepoint stays
   * open, savepoints opened after it are gone. */
  async rollbackTo(name: string): Promise<void> {
    if (!this.active) return this.#ended();
    const depth = this.#find(name);
    this.#savepoints.length = depth;
    // One request: as two (roll back and release, then open again), a request sent
    // meanwhile landed outside the savepoint, and a later rollbackTo() did not undo it.
    await this.#host.savepoint(SavepointOp.RollbackToKeep, depth);
  }

  /** Keeps the work since savepoint `name` in the transaction and closes that savepoint and
   * every savepoint opened after it. */
  async release(name: string): Promise<void> {
    if (!this.active) return this.#ended();
    const depth = this.#find(name);
    this.#savepoints.length = depth - 1;
    await this.#host.savepoint(SavepointOp.Release, depth);
  }

  #find(name: string): number {
    checkName(name);
    const i = this.#savepoints.lastIndexOf(name);
    if (i < 0) throw new RangeError(`no open savepoint is named '${name}'`);
    return i + 1;
  }

  /** Commits and releases the writer. Rejects if the transaction has already ended. A
   * request sent on the handle and still in flight runs first; if one fails, the
   * transaction rolls back instead and commit() rejects with its error. When the COMMIT
   * itself fails, the writer has rolled back: rollback() then resolves at once. */
  commit(): Promise<void> {
    if (!this.active) return this.#ended();
    this.#tx.callerEnded();
    this.#end('committed');
    const failed = (err: unknown): never => {
      this.#state = 'rolledBack';
      throw err;
    };
    const left = this.#tx.leftInFlight();
    if (left === undefined) return this.#host.finish(true).catch(failed);
    return left.then(() => {
      try {
        this.#tx.throwIfLeftFailed();
      } catch (err) {
        this.#state = 'rolledBack';
        return this.#host.finish(false).then(() => failed(err), () => failed(err));
      }
      return this.#host.finish(true).catch(failed);
    });
  }

  /** Rolls back and releases the writer. Resolves at once if the transaction was already
   * rolled back (by an earlier call, close(), or its signal). */
  rollback(): Promise<void> {
    if (this.#state === 'rolledBack') return Promise.resolve();
    if (this.#state === 'committed') return Promise.reject(transactionEndedError());
    this.#end('rolledBack');
    return this.#host.finish(false);
  }

  #end(state: State): void {
    this.#state = state;
    this.#savepoints.length = 0;
    this.#tx.end();
  }

  /** @internal The database ends the transaction (close, signal): rolled back, and later
   * calls reject with `reason`. Resolves once the writer is released. */
  abandon(reason: unknown): Promise<void> {
    if (!this.active) return Promise.resolve();
    this.#reason = reason;
    this.#end('rolledBack');
    // The rollback can only fail when the connection is already gone, which the next request reports.
    return this.#host.finish(false).catch(() => {});
  }
}
