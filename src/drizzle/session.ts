// Drizzle's async SQLite session over quietsqlite. Drizzle builds SQL and maps rows; this
// module decides where a query runs (reads on the readers, the rest on the writer, all of it
// on the transaction inside one) and in which row shape (objects, or arrays in column order
// when Drizzle maps selected fields itself).

import * as orm from 'drizzle-orm';
import { NoopCache, type Cache } from 'drizzle-orm/cache/core';
import type { WithCacheConfig } from 'drizzle-orm/cache/core/types';
import { entityKind, fillPlaceholders, NoopLogger, type Logger, type Query, type SQL, type RelationalSchemaConfig, type TablesRelationalConfig } from 'drizzle-orm';
import {
  SQLitePreparedQuery,
  SQLiteSession,
  SQLiteTransaction,
  type PreparedQueryConfig,
  type SelectedFieldsOrdered,
  type SQLiteAsyncDialect,
  type SQLiteExecuteMethod,
  type SQLiteTransactionConfig,
} from 'drizzle-orm/sqlite-core';
import type { BatchItem } from 'drizzle-orm/batch';
import type { Database, ExecuteResult, Transaction } from 'quietsqlite';

/** What a session runs its queries on: the database, or a transaction of it. */
export type Runner = Database | Transaction;

export interface SessionOptions {
  logger?: Logger;
  cache?: Cache;
}

type Metadata = { type: 'select' | 'update' | 'delete' | 'insert'; tables: string[] };
type ResultMapper = (rows: unknown[][], mapColumnValue?: (value: unknown) => unknown) => unknown;

/** Drizzle's row mapper: public at run time, left out of its published types. */
const mapResultRow = (orm as unknown as { mapResultRow: (fields: unknown, row: unknown[], joins: unknown) => unknown }).mapResultRow;

/** The rows of a statement run on the writer, as arrays in column order (repeated names kept). */
async function executeArrays(on: Runner, sql: string, params: unknown[]): Promise<unknown[][]> {
  const r = await on.execute(sql, params, { rowMode: 'array' });
  return r.rows as unknown[][];
}

export class QuietsqliteSession<
  TFullSchema extends Record<string, unknown>,
  TSchema extends TablesRelationalConfig,
> extends SQLiteSession<'async', ExecuteResult, TFullSchema, TSchema> {
  static override readonly [entityKind]: string = 'QuietsqliteSession';
  readonly #logger: Logger;
  readonly #cache: Cache;

  constructor(
    /** @internal */ readonly runner: Runner,
    readonly asyncDialect: SQLiteAsyncDialect,
    private readonly schema: RelationalSchemaConfig<TSchema> | undefined,
    private readonly options: SessionOptions,
    private readonly nestedIndex = 0,
  ) {
    super(asyncDialect);
    this.#logger = options.logger ?? new NoopLogger();
    this.#cache = options.cache ?? new NoopCache();
  }

  prepareQuery<T extends Omit<PreparedQueryConfig, 'run'>>(
    query: Query,
    fields: SelectedFieldsOrdered | undefined,
    executeMethod: SQLiteExecuteMethod,
    isResponseInArrayMode: boolean,
    customResultMapper?: ResultMapper,
    queryMetadata?: Metadata,
    cacheConfig?: WithCacheConfig,
  ): QuietsqlitePreparedQuery<T> {
    return new QuietsqlitePreparedQuery<T>(
      this.runner,
      query,
      this.#logger,
      this.#cache,
      queryMetadata,
      cacheConfig,
      fields,
      executeMethod,
      isResponseInArrayMode,
      customResultMapper,
    );
  }

  /** `db.$count()`: a SELECT, so it runs on a reader (Drizzle sends it as raw SQL). */
  override async count(query: SQL): Promise<number> {
    const { sql, params } = this.asyncDialect.sqlToQuery(query);
    this.#logger.logQuery(sql, params);
    const rows = await this.runner.select<unknown[]>(sql, params, { rowMode: 'array' });
    return Number(rows[0]?.[0] ?? 0);
  }

  /** Runs the queries in order inside one transaction (a savepoint inside another): all of
   * them or none. Inside the body, calls on the database route to that transaction, so each
   * query runs and maps its result exactly as it would on its own. */
  async batch<T extends BatchItem<'sqlite'>[] | readonly BatchItem<'sqlite'>[]>(queries: T): Promise<unknown[]> {
    return this.runner.transaction(async () => {
      const results: unknown[] = [];
      for (const q of queries) results.push(await q);
      return results;
    });
  }

  override async transaction<T>(
    body: (tx: QuietsqliteTransaction<TFullSchema, TSchema>) => Promise<T>,
    config?: SQLiteTransactionConfig,
  ): Promise<T> {
    const options = config?.behavior === undefined ? undefined : { mode: config.behavior };
    return this.runner.transaction(async (qtx) => {
      const session = new QuietsqliteSession<TFullSchema, TSchema>(qtx, this.asyncDialect, this.schema, this.options, this.nestedIndex + 1);
      const tx = new QuietsqliteTransaction<TFullSchema, TSchema>('async', this.asyncDialect, session, this.schema, this.nestedIndex);
      return body(tx);
    }, options);
  }
}

export class QuietsqliteTransaction<
  TFullSchema extends Record<string, unknown>,
  TSchema extends TablesRelationalConfig,
> extends SQLiteTransaction<'async', ExecuteResult, TFullSchema, TSchema> {
  static override readonly [entityKind]: string = 'QuietsqliteTransaction';

  /** A nested transaction: a savepoint, rolled back alone when its body throws (or calls
   * `tx.rollback()`). */
  override transaction<T>(body: (tx: QuietsqliteTransaction<TFullSchema, TSchema>) => Promise<T>): Promise<T> {
    const session = (this as unknown as { session: QuietsqliteSession<TFullSchema, TSchema> }).session;
    return session.transaction(body);
  }
}

export class QuietsqlitePreparedQuery<T extends Omit<PreparedQueryConfig, 'run'> = Omit<PreparedQueryConfig, 'run'>> extends SQLitePreparedQuery<{
  type: 'async';
  run: ExecuteResult;
  all: T['all'];
  get: T['get'];
  values: T['values'];
  execute: T['execute'];
}> {
  static override readonly [entityKind]: string = 'QuietsqlitePreparedQuery';
  /** Runs on the readers (outside a transaction): Drizzle's SELECTs and relational queries.
   * Raw SQL (`db.run/all/get/values(sql)`) is opaque and goes to the writer. */
  readonly #read: boolean;

  constructor(
    private readonly runner: Runner,
    query: Query,
    private readonly logger: Logger,
    cache: Cache,
    queryMetadata: Metadata | undefined,
    cacheConfig: WithCacheConfig | undefined,
    private readonly fields: SelectedFieldsOrdered | undefined,
    executeMethod: SQLiteExecuteMethod,
    private readonly arrayMode: boolean,
    private readonly customResultMapper: ResultMapper | undefined,
  ) {
    super('async', executeMethod, query, cache, queryMetadata, cacheConfig);
    this.#read = queryMetadata !== undefined ? queryMetadata.type === 'select' : customResultMapper !== undefined;
  }

  #params(placeholderValues: Record<string, unknown> | undefined): unknown[] {
    const params = fillPlaceholders(this.query.params, placeholderValues ?? {});
    this.logger.logQuery(this.query.sql, params);
    return params;
  }

  /** Drizzle's cache and error wrapping (DrizzleQueryError); internal in its typings. */
  #withCache<R>(params: unknown[], run: () => Promise<R>): Promise<R> {
    const self = this as unknown as { queryWithCache(sql: string, params: unknown[], run: () => Promise<R>): Promise<R> };
    return self.queryWithCache(this.query.sql, params, run).catch((err: unknown) => {
      throw withoutValues(err, this.query.sql);
    });
  }

  /** Whether Drizzle maps the rows itself (from arrays in column order). */
  get #mapped(): boolean {
    return this.fields !== undefined || this.customResultMapper !== undefined;
  }

  #objects(params: unknown[]): Promise<Record<string, unknown>[]> {
    const { sql } = this.query;
    if (this.#read) return this.runner.select<Record<string, unknown>>(sql, params);
    return this.runner.execute<Record<string, unknown>>(sql, params).then((r) => r.rows);
  }

  #arrays(params: unknown[]): Promise<unknown[][]> {
    const { sql } = this.query;
    if (this.#read) return this.runner.select<unknown[]>(sql, params, { rowMode: 'array' });
    return executeArrays(this.runner, sql, params);
  }

  async run(placeholderValues?: Record<string, unknown>): Promise<ExecuteResult> {
    const params = this.#params(placeholderValues);
    return this.#withCache(params, () => this.runner.execute(this.query.sql, params));
  }

  async all(placeholderValues?: Record<string, unknown>): Promise<T['all']> {
    const params = this.#params(placeholderValues);
    if (!this.#mapped) return this.#withCache(params, () => this.#objects(params));
    return this.mapAllResult(await this.#withCache(params, () => this.#arrays(params))) as T['all'];
  }

  async get(placeholderValues?: Record<string, unknown>): Promise<T['get']> {
    const params = this.#params(placeholderValues);
    if (!this.#mapped) return this.#withCache(params, () => this.#objects(params).then((rows) => rows[0]));
    return this.mapGetResult(await this.#withCache(params, () => this.#arrays(params))) as T['get'];
  }

  async values<V extends unknown[] = unknown[]>(placeholderValues?: Record<string, unknown>): Promise<V[]> {
    const params = this.#params(placeholderValues);
    return this.#withCache(params, () => this.#arrays(params)) as Promise<V[]>;
  }

  override mapAllResult(rows: unknown): unknown {
    const list = rows as unknown[][];
    if (this.customResultMapper !== undefined) return this.customResultMapper(list);
    if (this.fields === undefined) return list;
    const joins = (this as unknown as { joinsNotNullableMap?: unknown }).joinsNotNullableMap;
    return list.map((row) => mapResultRow(this.fields, row, joins));
  }

  override mapGetResult(rows: unknown): unknown {
    const list = rows as unknown[][];
    const row = list[0];
    if (row === undefined) return undefined;
    if (this.customResultMapper !== undefined) return this.customResultMapper(list);
    if (this.fields === undefined) return row;
    const joins = (this as unknown as { joinsNotNullableMap?: unknown }).joinsNotNullableMap;
    return mapResultRow(this.fields, row, joins);
  }

  /** @internal Drizzle asks whether rows arrive as arrays. */
  isResponseInArrayMode(): boolean {
    return this.arrayMode;
  }
}

/** Drizzle's DrizzleQueryError with the SQL alone in its message and stack: Drizzle lists the
 * parameter values there, and this library's messages never hold values (they stay in
 * `err.params`, for code that wants them). */
function withoutValues(err: unknown, sql: string): unknown {
  if (!(err instanceof orm.DrizzleQueryError)) return err;
  const listed = err.message;
  const message = `Failed query: ${sql}`;
  err.message = message;
  if (typeof err.stack === 'string') err.stack = err.stack.replace(listed, () => message);
  return err;
}
