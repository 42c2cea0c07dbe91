// quietsqlite/drizzle/migrator: applies drizzle-kit's migration folder, all pending
// migrations in one transaction (a failing one leaves the database as it was).

import { readMigrationFiles, type MigrationConfig } from 'drizzle-orm/migrator';
import type { SQLiteAsyncDialect } from 'drizzle-orm/sqlite-core';
import type { QuietsqliteDrizzleDatabase } from './index.js';

export type { MigrationConfig };

export async function migrate<TSchema extends Record<string, unknown>>(
  db: QuietsqliteDrizzleDatabase<TSchema>,
  config: MigrationConfig,
): Promise<void> {
  const migrations = readMigrationFiles(config);
  // Drizzle's dialect and session are internal in its typings; its own drivers' migrators use them.
  const inner = db as unknown as { dialect: SQLiteAsyncDialect; session: Parameters<SQLiteAsyncDialect['migrate']>[1] };
  await inner.dialect.migrate(migrations, inner.session, config);
}
