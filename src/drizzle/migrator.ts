// quietsqlite/drizzle/migrator: applies drizzle-kit's migration folder, all pending
// migrations in one transaction (a failing one leaves the database as it was). The
// transaction holds the write lock from before Drizzle reads which migrations have run, so
// runs started together (in this process or another) apply each migration once.

import { readMigrationFiles, type MigrationConfig } from 'drizzle-orm/migrator';
import type { SQLiteAsyncDialect } from 'drizzle-orm/sqlite-core';
import type { QuietsqliteDrizzleDatabase } from './index.js';

export type { MigrationConfig };

export async function migrate<TSchema extends Record<string, unknown>>(
  db: QuietsqliteDrizzleDatabase<TSchema>,
  config: MigrationConfig,
): Promise<void> {
  const migrations = readMigrationFiles(config);
  // Drizzle's dialect and session are internal in its typings; its own drivers' migrators use
  // them. Its migrate() reads the last migration applied before it opens its transaction: run
  // alone, two runs at once both saw every migration as pending, and both applied them.
  type Inner = { dialect: SQLiteAsyncDialect; session: Parameters<SQLiteAsyncDialect['migrate']>[1] };
  await db.transaction(
    async (tx) => {
      const inner = tx as unknown as Inner;
      await inner.dialect.migrate(migrations, inner.session, config);
    },
    { behavior: 'immediate' },
  );
}
