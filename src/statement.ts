// Prepared statements. The SQL crosses into the addon once (`prepareStatement`, which
// returns an id); every call after sends that id, and the JS layer does not check the text
// again. Each connection keeps the compiled statement in its own statement cache, and
// SQLite re-prepares it after a schema change. Calls go through the same Database entry
// points as SQL text, so routing (readers, writer, the enclosing transaction), options and
// cancellation are the ones of db.*; only the text is replaced by the id.

import { statementClosedError } from './errors';
import type { ArrayRowMode, CallOptions, ExecuteOptions, ObjectRowMode, Params, QueryOptions } from './options';
import type { Description, ExecuteResult } from './requests';
import type { Row, SqlValue } from './rows';
import type { LiveQuery, StreamOptions } from './stream';
import type { IterateOptions, RowIterator } from './iterate';

/** A result column of a statement: its name and declared type (null for an expression). */
export interface StatementColumn {
  name: string;
  type: string | null;
}

/** What a Statement needs from its database; `sql` is text or a Statement of it. */
export interface StatementHost {
  select(sql: unknown, params?: unknown, options?: QueryOptions): Promise<unknown[]>;
  selectOne(sql: unknown, params?: unknown, options?: QueryOptions): Promise<unknown>;
  selectBytes(sql: unknown, params?: Params, options?: CallOptions): Promise<Buffer>;
  execute(sql: unknown, params?: unknown, options?: ExecuteOptions): Promise<ExecuteResult>;
  executeBatch(sql: unknown, paramSets: readonly Params[], options?: CallOptions): Promise<{ changes: number }>;
  stream(sql: string, params?: Params, options?: StreamOptions): LiveQuery<unknown>;
  iterate(sql: string, params?: unknown, options?: IterateOptions): RowIterator<unknown>;
  /** Prepares (never runs) the statement where a call of this kind would run. */
  describeStatement(stmt: Statement, onWriter: boolean): Promise<Description>;
  releaseStatement(id: number): void;
}

const enum Op {
  Select,
  SelectOne,
  SelectBytes,
  Execute,
  Batch,
}

/** Statements nobody references any more free their native side (the registered SQL). */
const collected = new FinalizationRegistry<{ host: WeakRef<StatementHost>; id: number }>(({ host, id }) => {
  host.deref()?.releaseStatement(id);
});

/** The native id of `stmt` for `host` (throws if it is closed or of another database). Set
 * in the class's static block: the id stays a private field, out of the public types. */
export let statementId: (stmt: Statement, host: StatementHost) => number;

/** Set by `newStatement` for the one construction it makes. */
let constructing = false;

/** @internal How the database makes a statement (the constructor refuses anyone else). */
export function newStatement(host: StatementHost, sql: string, id: number): Statement {
  constructing = true;
  try {
    return new Statement(host, sql, id);
  } finally {
    constructing = false;
  }
}

/**
 * A prepared statement (`db.prepare(sql)`): call it many times; each call behaves exactly as
 * the same method of the database given the statement's SQL.
 */
export class Statement {
  readonly #host: StatementHost;
  readonly #sql: string;
  /** 0 once closed. */
  #id: number;
  #readonly: boolean | undefined;
  /** The first call sends a description request along (how `readonly` becomes known). */
  #described = false;

  static {
    statementId = (stmt, host) => {
      if (stmt.#id === 0) throw statementClosedError();
      if (stmt.#host !== host) throw new TypeError('this statement was prepared by another database');
      return stmt.#id;
    };
  }

  /** @internal Use `db.prepare(sql)`. */
  constructor(host: StatementHost, sql: string, id: number) {
    // The class is exported (for instanceof): one made by hand had an unchecked id, sent as
    // SQL text, and its collection threw from the finalizer and ended the process.
    if (!constructing) throw new TypeError('Statement cannot be constructed directly; use db.prepare(sql)');
    constructing = false;
    this.#host = host;
    this.#sql = sql;
    this.#id = id;
    collected.register(this, { host: new WeakRef(host), id }, this);
  }

  /** The statement's SQL text. */
  get sql(): string {
    return this.#sql;
  }

  /** True if the statement only reads, false if it may write; undefined until the first
   * call or `columns()` has prepared it (nothing is prepared by `db.prepare`). */
  get readonly(): boolean | undefined {
    return this.#readonly;
  }

  /** False once `close()` was called. */
  get isOpen(): boolean {
    return this.#id !== 0;
  }

  /** On the first call: prepares the statement where the call runs, alongside it (sent
   * first, so a statement that changes the schema is described before it runs), so that
   * `readonly` is known when the call settles. Its failure is the call's own (the same
   * text, prepared in the same place), so only the call reports it. Later calls skip this
   * without allocating anything. */
  #first(op: Op, params: unknown, options: unknown): Promise<unknown> {
    const onWriter = op === Op.Execute || op === Op.Batch;
    let described: Promise<void> | undefined;
    if (this.#id !== 0) {
      this.#described = true;
      described = this.#host.describeStatement(this, onWriter).then(
        (d) => {
          this.#readonly = d.readonly;
        },
        () => {
          this.#described = false;
        },
      );
    }
    const result = this.#call(op, params, options);
    return described === undefined ? result : Promise.all([result, described]).then(([r]) => r);
  }

  #call(op: Op, params: unknown, options: unknown): Promise<unknown> {
    const h = this.#host;
    switch (op) {
      case Op.Select:
        return h.select(this, params, options as QueryOptions);
      case Op.SelectOne:
        return h.selectOne(this, params, options as QueryOptions);
      case Op.SelectBytes:
        return h.selectBytes(this, params as Params, options as CallOptions);
      case Op.Execute:
        return h.execute(this, params, options as CallOptions);
      case Op.Batch:
        return h.executeBatch(this, params as readonly Params[], options as CallOptions);
    }
  }

  /** Like `db.select(sql, params, options)`. */
  select<T = SqlValue[]>(params: Params | undefined, options: QueryOptions & ArrayRowMode): Promise<T[]>;
  select<T = Row>(params?: Params, options?: QueryOptions & ObjectRowMode): Promise<T[]>;
  select<T = Row | SqlValue[]>(params?: Params, options?: QueryOptions): Promise<T[]>;
  select<T>(params?: unknown, options?: QueryOptions): Promise<T[]> {
    if (!this.#described) return this.#first(Op.Select, params, options) as Promise<T[]>;
    return this.#host.select(this, params, options) as Promise<T[]>;
  }

  /** Like `db.selectOne(sql, params, options)`. */
  selectOne<T = SqlValue[]>(params: Params | undefined, options: QueryOptions & ArrayRowMode): Promise<T | undefined>;
  selectOne<T = Row>(params?: Params, options?: QueryOptions & ObjectRowMode): Promise<T | undefined>;
  selectOne<T = Row | SqlValue[]>(params?: Params, options?: QueryOptions): Promise<T | undefined>;
  selectOne<T>(params?: unknown, options?: QueryOptions): Promise<T | undefined> {
    if (!this.#described) return this.#first(Op.SelectOne, params, options) as Promise<T | undefined>;
    return this.#host.selectOne(this, params, options) as Promise<T | undefined>;
  }

  /** Like `db.selectBytes(sql, params, options)`. */
  selectBytes(params?: Params, options?: CallOptions): Promise<Buffer> {
    if (!this.#described) return this.#first(Op.SelectBytes, params, options) as Promise<Buffer>;
    return this.#host.selectBytes(this, params, options);
  }

  /** Like `db.execute(sql, params, options)`. */
  execute<T = SqlValue[]>(params: Params | undefined, options: ExecuteOptions & ArrayRowMode): Promise<ExecuteResult & { rows: T[] }>;
  execute<T = Row>(params?: Params, options?: ExecuteOptions & ObjectRowMode): Promise<ExecuteResult & { rows: T[] }>;
  execute<T = Row | SqlValue[]>(params?: Params, options?: ExecuteOptions): Promise<ExecuteResult & { rows: T[] }>;
  execute<T>(params?: unknown, options?: ExecuteOptions): Promise<ExecuteResult & { rows: T[] }> {
    if (!this.#described) return this.#first(Op.Execute, params, options) as Promise<ExecuteResult & { rows: T[] }>;
    return this.#host.execute(this, params, options) as Promise<ExecuteResult & { rows: T[] }>;
  }

  /** Like `db.executeBatch(sql, paramSets, options)`. */
  executeBatch(paramSets: readonly Params[], options?: CallOptions): Promise<{ changes: number }> {
    if (!this.#described) return this.#first(Op.Batch, paramSets, options) as Promise<{ changes: number }>;
    return this.#host.executeBatch(this, paramSets, options);
  }

  /** Like `db.iterate(sql, params, options)`: the rows in chunks, holding one reader. */
  iterate<T = SqlValue[]>(params: Params | undefined, options: IterateOptions & ArrayRowMode): RowIterator<T>;
  iterate<T = Row>(params?: Params, options?: IterateOptions & ObjectRowMode): RowIterator<T>;
  iterate<T = Row | SqlValue[]>(params?: Params, options?: IterateOptions): RowIterator<T>;
  iterate<T>(params?: unknown, options?: IterateOptions): RowIterator<T> {
    if (this.#id === 0) throw statementClosedError();
    return this.#host.iterate(this.#sql, params, options) as RowIterator<T>;
  }

  /** Like `db.stream(sql, params, options)`. The live query is independent of the statement
   * once made: closing the statement does not end it. */
  stream<T = Row>(params?: Params, options?: StreamOptions): LiveQuery<T> {
    if (this.#id === 0) throw statementClosedError();
    return this.#host.stream(this.#sql, params, options) as LiveQuery<T>;
  }

  /** The result columns as prepared now (after a schema change, the new ones), and whether
   * the statement only reads. Prepares without running; outside a transaction on a reader
   * (the committed schema), inside one on its connection. */
  async columns(): Promise<StatementColumn[]> {
    if (this.#id === 0) throw statementClosedError();
    const d = await this.#host.describeStatement(this, false);
    this.#readonly = d.readonly;
    this.#described = true;
    return d.columns;
  }

  /** Frees the statement. Calls already made still complete; later ones reject with
   * ERR_QUIETSQLITE_STATEMENT_CLOSED. Idempotent. */
  close(): void {
    const id = this.#id;
    if (id === 0) return;
    this.#id = 0;
    collected.unregister(this);
    this.#host.releaseStatement(id);
  }

  /** `using stmt = db.prepare(sql)` closes it at the end of the scope. */
  [Symbol.dispose](): void {
    this.close();
  }
}
