// quietsqlite/drizzle: `drizzle(db, { schema })` gives Drizzle's async SQLite database over a
// quietsqlite Database.

import {
  createTableRelationsHelpers,
  DefaultLogger,
  entityKind,
  extractTablesRelationalConfig,
  type DrizzleConfig,
  type ExtractTablesWithRelations,
  type Logger,
  type RelationalSchemaConfig,
  type TablesRelationalConfig,
} from 'drizzle-orm';
import type { BatchItem, BatchResponse } from 'drizzle-orm/batch';
import { BaseSQLiteDatabase, SQLiteAsyncDialect } from 'drizzle-orm/sqlite-core';
import type { Database, ExecuteResult } from 'quietsqlite';
import { QuietsqliteSession } from './session.js';

export { QuietsqliteSession, QuietsqliteTransaction, QuietsqlitePreparedQuery } from './session.js';

export class QuietsqliteDrizzleDatabase<
  TSchema extends Record<string, unknown> = Record<string, never>,
> extends BaseSQLiteDatabase<'async', ExecuteResult, TSchema> {
  static override readonly [entityKind]: string = 'QuietsqliteDrizzleDatabase';
  /** The quietsqlite database underneath. */
  declare $client: Database;

  /** Runs the queries in one transaction, in order; resolves with each one's result. */
  async batch<U extends BatchItem<'sqlite'>, T extends Readonly<[U, ...U[]]>>(batch: T): Promise<BatchResponse<T>> {
    const session = (this as unknown as { session: QuietsqliteSession<TSchema, ExtractTablesWithRelations<TSchema>> }).session;
    return session.batch(batch) as Promise<BatchResponse<T>>;
  }
}

function isDatabase(value: unknown): value is Database {
  return (
    value !== null &&
    typeof value === 'object' &&
    typeof (value as Database).select === 'function' &&
    typeof (value as Database).execute === 'function' &&
    typeof (value as Database).transaction === 'function'
  );
}

/** `drizzle(db)` or `drizzle(db, { schema, logger, casing, cache })`. */
export function drizzle<TSchema extends Record<string, unknown> = Record<string, never>>(
  db: Database,
  config: DrizzleConfig<TSchema> = {},
): QuietsqliteDrizzleDatabase<TSchema> & { $client: Database } {
  if (!isDatabase(db)) throw new TypeError('drizzle() takes an open quietsqlite Database');
  const dialect = new SQLiteAsyncDialect({ casing: config.casing });
  let logger: Logger | undefined;
  if (config.logger === true) logger = new DefaultLogger();
  else if (config.logger !== false) logger = config.logger;

  let schema: RelationalSchemaConfig<TablesRelationalConfig> | undefined;
  if (config.schema !== undefined) {
    const tables = extractTablesRelationalConfig(config.schema, createTableRelationsHelpers);
    schema = { fullSchema: config.schema, schema: tables.tables, tableNamesMap: tables.tableNamesMap };
  }
  const session = new QuietsqliteSession(db, dialect, schema, { logger, cache: config.cache });
  const result = new QuietsqliteDrizzleDatabase('async', dialect, session as never, schema as never) as QuietsqliteDrizzleDatabase<TSchema>;
  result.$client = db;
  if (config.cache !== undefined) {
    // As Drizzle's own drivers wire it: writes invalidate the cache.
    (result as unknown as { $cache: unknown }).$cache = config.cache;
    (config.cache as unknown as { invalidate?: unknown }).invalidate = config.cache.onMutate.bind(config.cache);
  }
  return result;
}
