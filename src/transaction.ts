// Interactive transactions. The writer thread does the holding (a transaction's BEGIN takes
// the write queue; other writers wait in FIFO order until its COMMIT/ROLLBACK); this module
// runs the body, routes calls made inside it (AsyncLocalStorage), and nests savepoints.

import { AsyncLocalStorage } from 'node:async_hooks';
import { transactionEndedError } from './errors';
import type { ExecuteResult } from './requests';
import type { Row } from './rows';
import type { QueryOptions } from './options';

export type TransactionMode = 'immediate' | 'deferred' | 'exclusive';

export interface TransactionOptions {
  /** How BEGIN takes its locks; default 'immediate' (no late SQLITE_BUSY on the first write). */
  mode?: TransactionMode;
  /** Aborting rolls the transaction back and rejects with the abort reason. */
  signal?: AbortSignal;
}

/** What a transaction body can do; `db` methods called inside the body route here too. */
export interface Executor {
  select<T = Row>(sql: string, params?: unknown, options?: QueryOptions): Promise<T[]>;
  selectOne<T = Row>(sql: string, params?: unknown, options?: QueryOptions): Promise<T | undefined>;
  selectBytes(sql: string, params?: unknown): Promise<Buffer>;
  execute<T = Row>(sql: string, params?: unknown): Promise<ExecuteResult & { rows: T[] }>;
  executeBatch(sql: string, paramSets: unknown[]): Promise<{ changes: number }>;
  transaction<R>(body: (tx: Transaction) => Promise<R> | R, options?: TransactionOptions): Promise<R>;
}

/** The operations a transaction needs from its database (implemented by Database). */
export interface TransactionHost {
  writerRead(tx: number, sql: string, params: unknown, options: unknown, format: 0 | 1 | 2): Promise<unknown>;
  writerExecute(tx: number, sql: string, params: unknown): Promise<ExecuteResult>;
  writerBatch(tx: number, sql: string, paramSets: unknown): Promise<{ changes: number }>;
}

interface Context {
  host: TransactionHost;
  tx: Transaction;
}

let storage: AsyncLocalStorage<Context> | undefined;

/** Created on first use: AsyncLocalStorage has a cost on every promise in Node 20, so
 * applications that never open a transaction do not pay it. */
function als(): AsyncLocalStorage<Context> {
  return (storage ??= new AsyncLocalStorage<Context>());
}

/** The innermost live transaction of `host` in the current async context, if any. */
export function currentTransaction(host: TransactionHost): Transaction | undefined {
  if (storage === undefined) return undefined;
  const ctx = storage.getStore();
  if (ctx === undefined || ctx.host !== host || !ctx.tx.active) return undefined;
  return ctx.tx;
}

export function runInContext<R>(host: TransactionHost, tx: Transaction, body: () => R): R {
  return als().run({ host, tx }, body);
}

/** The handle a transaction body receives. Valid only while its body runs. */
export class Transaction implements Executor {
  #active = true;
  #savepoints = 0;

  constructor(
    private readonly host: TransactionHost,
    /** The writer-side transaction id. */
    readonly id: number,
    /** 0 for the outermost level, 1 for a first savepoint, ... */
    readonly depth: number,
  ) {}

  /** False once the body has ended (committed, rolled back or aborted). */
  get active(): boolean {
    return this.#active;
  }

  end(): void {
    this.#active = false;
  }

  #check(): void {
    if (!this.#active) throw transactionEndedError();
  }

  select<T = Row>(sql: string, params?: unknown, options?: QueryOptions): Promise<T[]> {
    try {
      this.#check();
    } catch (e) {
      return Promise.reject(e);
    }
    return this.host.writerRead(this.id, sql, params, options, 0) as Promise<T[]>;
  }

  selectOne<T = Row>(sql: string, params?: unknown, options?: QueryOptions): Promise<T | undefined> {
    try {
      this.#check();
    } catch (e) {
      return Promise.reject(e);
    }
    return this.host.writerRead(this.id, sql, params, options, 1) as Promise<T | undefined>;
  }

  selectBytes(sql: string, params?: unknown): Promise<Buffer> {
    try {
      this.#check();
    } catch (e) {
      return Promise.reject(e);
    }
    return this.host.writerRead(this.id, sql, params, undefined, 2) as Promise<Buffer>;
  }

  execute<T = Row>(sql: string, params?: unknown): Promise<ExecuteResult & { rows: T[] }> {
    try {
      this.#check();
    } catch (e) {
      return Promise.reject(e);
    }
    return this.host.writerExecute(this.id, sql, params) as Promise<ExecuteResult & { rows: T[] }>;
  }

  executeBatch(sql: string, paramSets: unknown[]): Promise<{ changes: number }> {
    try {
      this.#check();
    } catch (e) {
      return Promise.reject(e);
    }
    return this.host.writerBatch(this.id, sql, paramSets);
  }

  /** A nested transaction: a savepoint inside this one. */
  async transaction<R>(body: (tx: Transaction) => Promise<R> | R, options?: TransactionOptions): Promise<R> {
    this.#check();
    if (typeof body !== 'function') throw new TypeError('transaction() takes an async function');
    const signal = options?.signal;
    signal?.throwIfAborted();
    const name = `quietsqlite_sp_${this.depth + 1}_${++this.#savepoints}`;
    await this.host.writerExecute(this.id, `SAVEPOINT ${name}`, undefined);
    const inner = new Transaction(this.host, this.id, this.depth + 1);
    try {
      const result = await runInContext(this.host, inner, () => body(inner));
      inner.end();
      await this.host.writerExecute(this.id, `RELEASE ${name}`, undefined);
      return result;
    } catch (err) {
      inner.end();
      if (this.#active) {
        await this.host.writerExecute(this.id, `ROLLBACK TO ${name}`, undefined).catch(() => {});
        await this.host.writerExecute(this.id, `RELEASE ${name}`, undefined).catch(() => {});
      }
      throw err;
    }
  }
}
