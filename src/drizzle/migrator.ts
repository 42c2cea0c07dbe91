// quietsqlite/drizzle/migrator: applies drizzle-kit's migration folder, all pending
// migrations in one transaction (a failing one leaves the database as it was). The
// transaction holds the write lock from before Drizzle reads which migrations have run, so
// runs started together (in this process or another) apply each migration once.

import { readMigrationFiles, type MigrationConfig } from 'drizzle-orm/migrator';
import type { SQLiteAsyncDialect } from 'drizzle-orm/sqlite-core';
import { sql, type SQL, type TablesRelationalConfig } from 'drizzle-orm';
import type { QuietsqliteDrizzleDatabase } from './index.js';
import type { QuietsqliteTransaction } from './session.js';

export type { MigrationConfig };

/** How drizzle-kit opens a table rebuild (CREATE the new table, copy, DROP the old, RENAME),
 * anywhere in a statement chunk once its comments are gone (a custom migration starts with
 * one; a file without breakpoints is one chunk). */
const FOREIGN_KEYS_OFF = /(^|;)\s*PRAGMA\s+foreign_keys\s*=\s*['"]?(off|0|false|no)['"]?\s*(;|$)/im;
const COMMENTS = /--[^\n]*|\/\*[\s\S]*?\*\//g;

type Migration = ReturnType<typeof readMigrationFiles>[number];
type Rows = (sql: string) => Promise<Record<string, unknown>[]>;

const turnsForeignKeysOff = (m: Migration): boolean => m.sql.some((chunk) => FOREIGN_KEYS_OFF.test(chunk.replace(COMMENTS, ' ')));

/** Whether a migration Drizzle will apply (one newer than the last applied, as Drizzle
 * decides) turns foreign keys off. */
async function pendingRebuild(migrations: Migration[], config: MigrationConfig, rows: Rows): Promise<boolean> {
  const rebuilds = migrations.filter(turnsForeignKeysOff);
  if (rebuilds.length === 0) return false;
  const table = (typeof config === 'string' ? undefined : config.migrationsTable) ?? '__drizzle_migrations';
  let last: number | undefined;
  try {
    const found = await rows(`SELECT created_at FROM "${table.replaceAll('"', '""')}" ORDER BY created_at DESC LIMIT 1`);
    last = found.length === 0 ? undefined : Number(found[0]!['created_at']);
  } catch (err) {
    // No table yet: nothing applied. Any other failure is the caller's to hear.
    if (!/no such table/.test(`${String(err)} ${String((err as { cause?: unknown } | undefined)?.cause)}`)) throw err;
    last = undefined;
  }
  return rebuilds.some((m) => last === undefined || last < m.folderMillis);
}

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
  const inner = db as unknown as {
    dialect: SQLiteAsyncDialect;
    session: Parameters<SQLiteAsyncDialect['migrate']>[1];
    all(query: SQL): Promise<Record<string, unknown>[]>;
  };
  if (!('$client' in db)) {
    // A transaction of the caller's: it holds the write lock already, and foreign keys
    // cannot be turned off inside it (docs/api.md): a rebuild is refused, not run with them on.
    if (await pendingRebuild(migrations, config, (text) => inner.all(sql.raw(text)))) throw insideTransaction();
    await inner.dialect.migrate(migrations, inner.session, config);
    return;
  }
  const client = db.$client;
  // A table rebuild drops a table other tables refer to. Its `PRAGMA foreign_keys=OFF` does
  // nothing inside a transaction, and quietsqlite turns foreign keys on: the DROP deleted the
  // rows of every ON DELETE CASCADE child. So, when a pending migration asks for it, foreign
  // keys go off on the writer for the transaction, as SQLite's procedure for such changes
  // does (https://sqlite.org/lang_altertable.html#otheralter): off, then the transaction,
  // which checks them before it commits, then on. The three are sent together, so the writer
  // runs them back to back: writes the application sends meanwhile queue behind them.
  const rebuild = await pendingRebuild(migrations, config, (text) => client.select(text));
  const foreignKeys = rebuild ? Number((await client.execute('PRAGMA foreign_keys')).rows[0]?.['foreign_keys'] ?? 0) : 0;
  if (foreignKeys !== 1) {
    await client.transaction(() => inner.dialect.migrate(migrations, inner.session, config), { mode: 'immediate' });
    return;
  }
  const off = client.execute('PRAGMA foreign_keys = OFF');
  const migrated = client.transaction(async () => {
    // Still on: this runs inside a transaction of the caller's, where the PRAGMA is ignored.
    if (Number((await client.select('PRAGMA foreign_keys'))[0]?.['foreign_keys']) !== 0) throw insideTransaction();
    const before = await violations(client);
    await inner.dialect.migrate(migrations, inner.session, config);
    const added = [...(await violations(client))].filter(([key]) => !before.has(key));
    if (added.length > 0) {
      const [, first] = added[0]!;
      throw new Error(
        `migrate(): the migrations leave ${added.length} row(s) whose foreign key finds no parent ` +
          `(the first in table ${JSON.stringify(first['table'])}, referring to ${JSON.stringify(first['parent'])}); nothing was applied`,
      );
    }
  }, { mode: 'immediate' });
  const on = client.execute('PRAGMA foreign_keys = ON');
  const [offDone, migratedDone, onDone] = await Promise.allSettled([off, migrated, on]);
  for (const outcome of [offDone, migratedDone, onDone]) if (outcome.status === 'rejected') throw outcome.reason;
}

/** The rows whose foreign key finds no parent, by table, rowid and key: rows that had none
 * before the migrations are not theirs to answer for. */
async function violations(client: QuietsqliteDrizzleDatabase['$client']): Promise<Map<string, Record<string, unknown>>> {
  const rows = await client.select('PRAGMA foreign_key_check');
  return new Map(rows.map((r) => [JSON.stringify([r['table'], r['rowid'], r['parent'], r['fkid']]), r]));
}

function insideTransaction(): Error {
  return new Error(
    'migrate(): a pending migration rebuilds a table with foreign keys off, which SQLite ignores inside a ' +
      'transaction (rows of ON DELETE CASCADE children would be deleted): call migrate() outside any transaction',
  );
}
