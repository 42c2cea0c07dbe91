// Compiled (never run) by test/adapters/40-types.test.mjs: how a TypeScript user writes
// against the adapters.
import { Database } from 'quietsqlite';
import { Kysely, type Generated } from 'kysely';
import { QuietsqliteDialect } from 'quietsqlite/kysely';
import { drizzle } from 'quietsqlite/drizzle';
import { migrate } from 'quietsqlite/drizzle/migrator';
import { eq } from 'drizzle-orm';
import { integer, sqliteTable, text } from 'drizzle-orm/sqlite-core';

interface DB {
  person: { id: Generated<number>; first_name: string; age: number | null };
}

export async function kysely(db: Database): Promise<void> {
  const k = new Kysely<DB>({ dialect: new QuietsqliteDialect({ database: db, transactionMode: 'deferred' }) });
  const rows = await k.selectFrom('person').select(['id', 'first_name']).execute();
  const first: string | undefined = rows[0]?.first_name;
  void first;
  // @ts-expect-error: no such column
  await k.selectFrom('person').select('nope').execute();
  // @ts-expect-error: transactionMode is one of three words
  new QuietsqliteDialect({ database: db, transactionMode: 'sometimes' });
  const trx = await k.startTransaction().execute();
  await trx.insertInto('person').values({ first_name: 'a', age: null }).execute();
  await trx.commit().execute();
  new QuietsqliteDialect({ database: () => Database.open(':memory:') });
}

const users = sqliteTable('users', { id: integer('id').primaryKey(), name: text('name').notNull() });

export async function drizzleUsage(db: Database): Promise<void> {
  const orm = drizzle(db, { schema: { users } });
  const found = await orm.select().from(users).where(eq(users.id, 1));
  const name: string | undefined = found[0]?.name;
  void name;
  const viaQuery = await orm.query.users.findFirst({ where: eq(users.id, 1) });
  const id: number | undefined = viaQuery?.id;
  void id;
  const result = await orm.insert(users).values({ id: 1, name: 'x' });
  const changes: number = result.changes;
  void changes;
  const client: Database = orm.$client;
  void client;
  // @ts-expect-error: name is a string column
  await orm.insert(users).values({ id: 2, name: 3 });
  await orm.transaction(async (tx) => {
    await tx.insert(users).values({ id: 3, name: 'y' });
    await tx.transaction(async (tx2) => tx2.delete(users));
  });
  const [a, b] = await orm.batch([orm.select().from(users), orm.insert(users).values({ id: 4, name: 'z' }).returning({ id: users.id })]);
  const firstName: string | undefined = a[0]?.name;
  const newId: number | undefined = b[0]?.id;
  void firstName;
  void newId;
  await migrate(orm, { migrationsFolder: './drizzle' });
  await orm.transaction((tx) => migrate(tx, { migrationsFolder: './drizzle' }));
}
