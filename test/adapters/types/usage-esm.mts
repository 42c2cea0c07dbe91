// Compiled (never run) by test/adapters/40-types.test.mjs, as an ES module: an `import` of
// an adapter must be typed against kysely's and drizzle-orm's ES declarations, the ones the
// application's own `import 'kysely'` gets (their classes' private members make the
// CommonJS and ES declarations two different types).
import { Database } from 'quietsqlite';
import { Kysely, type Generated } from 'kysely';
import { QuietsqliteDialect } from 'quietsqlite/kysely';
import { drizzle } from 'quietsqlite/drizzle';
import { migrate } from 'quietsqlite/drizzle/migrator';
import { eq } from 'drizzle-orm';
import { integer, sqliteTable, text } from 'drizzle-orm/sqlite-core';

interface DB {
  person: { id: Generated<number>; first_name: string };
}

export async function kyselyFromEsm(db: Database): Promise<void> {
  const k = new Kysely<DB>({ dialect: new QuietsqliteDialect({ database: db }) });
  const rows = await k.selectFrom('person').select(['id', 'first_name']).execute();
  const id: number | undefined = rows[0]?.id;
  void id;
  await k.transaction().execute((trx) => trx.insertInto('person').values({ first_name: 'a' }).execute());
}

const users = sqliteTable('users', { id: integer('id').primaryKey(), name: text('name').notNull() });

export async function drizzleFromEsm(db: Database): Promise<void> {
  const orm = drizzle(db, { schema: { users } });
  const found = await orm.query.users.findFirst({ where: eq(users.id, 1) });
  const name: string | undefined = found?.name;
  void name;
  await orm.insert(users).values({ id: 1, name: 'x' });
  await migrate(orm, { migrationsFolder: './drizzle' });
}
