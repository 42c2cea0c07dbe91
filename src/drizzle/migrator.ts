// quietsqlite/drizzle/migrator: applies drizzle-kit's migration folder, all pending
// migrations in one transaction (a failing one leaves the database as it was). The
// transaction holds the write lock from before Drizzle reads which migrations have run, so
// runs started together (in this process or another) apply each migration once.

import { readMigrationFiles, type MigrationConfig } from 'drizzle-orm/migrator';
import type { SQLiteAsyncDialect } from 'drizzle-orm/sqlite-core';
import type { TablesRelationalConfig } from 'drizzle-orm';
import type { QuietsqliteDrizzleDatabase } from './index.js';
import type { QuietsqliteTransaction } from './session.js';

export type { MigrationConfig };

/** How drizzle-kit opens a table rebuild (CREATE the new table, copy, DROP the old, RENAME). */
const FOREIGN_KEYS_OFF = /^\s*PRAGMA\s+foreign_keys\s*=\s*(OFF|0|false|no)\s*;?\s*$/i;

/** Applies the pending migrations of `config.migrationsFolder`. Given a Drizzle transaction,
 * they run inside it (a savepoint), and are undone with it. */
export async function migrate<TSchema extends Record<string, unknown>>(
  db: QuietsqliteDrizzleDatabase<TSchema> | QuietsqliteTransaction<TSchema, TablesRelationalConfig>,
  config: MigrationConfig,
): Promise<void> {
  const migrations = readMigrationFiles(config);
  // Drizzle's dialect and session are internal in its typings; its own drivers' migrators use
  // them. Its migrate() reads the last migration applied before it opens its transaction: run
  // alone, two runs at once both saw every migration as pending, and both applied them. Here
  // it runs inside a transaction of quietsqlite's, which takes the write lock first; Drizzle's
  // queries, made in its body, are routed into it (its own transaction becomes a savepoint).
  const inner = db as unknown as { dialect: SQLiteAsyncDialect; session: Parameters<SQLiteAsyncDialect['migrate']>[1] };
  if (!('$client' in db)) {
    // A transaction of the caller's: it holds the write lock already, and foreign keys
    // cannot be turned off inside it (docs/api.md).
    await inner.dialect.migrate(migrations, inner.session, config);
    return;
  }
  const client = db.$client;
  const apply = (checkForeignKeys: boolean) => async (): Promise<void> => {
    await inner.dialect.migrate(migrations, inner.session, config);
    if (checkForeignKeys) await refuseForeignKeyViolations(client);
  };
  // A table rebuild drops a table other tables refer to. Its `PRAGMA foreign_keys=OFF` does
  // nothing inside a transaction, and quietsqlite turns foreign keys on: the DROP deleted the
  // rows of every ON DELETE CASCADE child. So, when a migration asks for it, foreign keys go
  // off on the writer for the transaction, as SQLite's procedure for such changes does
  // (https://sqlite.org/lang_altertable.html#otheralter): off, then the transaction, which
  // checks them before it commits, then on. The three are sent together, so the writer runs
  // them back to back: writes the application sends meanwhile queue behind them.
  const rebuilds = migrations.some((m) => m.sql.some((statement) => FOREIGN_KEYS_OFF.test(statement)));
  const foreignKeys = rebuilds ? Number((await client.execute('PRAGMA foreign_keys')).rows[0]?.['foreign_keys'] ?? 0) : 0;
  if (foreignKeys !== 1) {
    await client.transaction(apply(false), { mode: 'immediate' });
    return;
  }
  const off = client.execute('PRAGMA foreign_keys = OFF');
  const migrated = client.transaction(apply(true), { mode: 'immediate' });
  const on = client.execute('PRAGMA foreign_keys = ON');
  const [offDone, migratedDone, onDone] = await Promise.allSettled([off, migrated, on]);
  for (const outcome of [offDone, migratedDone, onDone]) if (outcome.status === 'rejected') throw outcome.reason;
}

/** Rejects when the migration left a row whose parent is gone (it rolls back). */
async function refuseForeignKeyViolations(client: QuietsqliteDrizzleDatabase['$client']): Promise<void> {
  const violations = await client.select<{ table: string; parent: string }>('PRAGMA foreign_key_check');
  if (violations.length === 0) return;
  const first = violations[0]!;
  throw new Error(
    `migrate(): the migrations leave ${violations.length} row(s) whose foreign key finds no parent ` +
      `(the first in table ${JSON.stringify(first.table)}, referring to ${JSON.stringify(first.parent)}); nothing was applied`,
  );
}
