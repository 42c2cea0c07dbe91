// quietsqlite/drizzle: Drizzle's async SQLite database over quietsqlite, as its users use it.
// Covers what Drizzle's common SQLite suite covers (CRUD, RETURNING, joins, subqueries and
// CTEs, prepared statements and placeholders, raw SQL through run/all/get/values, upserts,
// set operations, $count, column modes, transactions and savepoints, relational queries,
// batch, the migrator) plus where each query runs.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { and, asc, eq, gt, inArray, relations, sql, TransactionRollbackError, DrizzleQueryError } from 'drizzle-orm';
import { alias, blob, integer, primaryKey, sqliteTable, sqliteView, text, union, except } from 'drizzle-orm/sqlite-core';
import { SqliteError } from '../../dist/index.mjs';
import { drizzle } from 'quietsqlite/drizzle';
import { migrate } from 'quietsqlite/drizzle/migrator';
import { exitIfStuck, isPending, scratch, within } from '../fixtures/tx-helpers.mjs';

const tmp = scratch('adapters-drizzle');
exitIfStuck();

const users = sqliteTable('users', {
  id: integer('id').primaryKey({ autoIncrement: true }),
  name: text('name').notNull(),
  verified: integer('verified', { mode: 'boolean' }).notNull().default(false),
  json: text('json', { mode: 'json' }).$type(),
  createdAt: integer('created_at', { mode: 'timestamp' }).notNull().default(sql`(unixepoch())`),
  city: integer('city_id'),
});
const cities = sqliteTable('cities', { id: integer('id').primaryKey(), name: text('name').notNull() });
const posts = sqliteTable('posts', {
  id: integer('id').primaryKey(),
  authorId: integer('author_id').notNull(),
  title: text('title').notNull(),
});
const kv = sqliteTable('kv', { k: text('k').notNull(), n: integer('n').notNull(), v: text('v') }, (t) => [primaryKey({ columns: [t.k, t.n] })]);
const blobs = sqliteTable('blobs', {
  id: integer('id').primaryKey(),
  buf: blob('buf', { mode: 'buffer' }),
  big: blob('big', { mode: 'bigint' }),
  js: blob('js', { mode: 'json' }),
});
const usersRelations = relations(users, ({ many, one }) => ({ posts: many(posts), home: one(cities, { fields: [users.city], references: [cities.id] }) }));
const postsRelations = relations(posts, ({ one }) => ({ author: one(users, { fields: [posts.authorId], references: [users.id] }) }));
const schema = { users, cities, posts, kv, blobs, usersRelations, postsRelations };

const DDL = `
  CREATE TABLE users (id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL, verified INTEGER NOT NULL DEFAULT 0,
    json TEXT, created_at INTEGER NOT NULL DEFAULT (unixepoch()), city_id INTEGER);
  CREATE TABLE cities (id INTEGER PRIMARY KEY, name TEXT NOT NULL);
  CREATE TABLE posts (id INTEGER PRIMARY KEY, author_id INTEGER NOT NULL, title TEXT NOT NULL);
  CREATE TABLE kv (k TEXT NOT NULL, n INTEGER NOT NULL, v TEXT, PRIMARY KEY (k, n));
  CREATE TABLE blobs (id INTEGER PRIMARY KEY, buf BLOB, big BLOB, js BLOB);
`;

async function setup() {
  const qdb = await tmp.open();
  await qdb.execute(DDL);
  const db = drizzle(qdb, { schema });
  return { qdb, db };
}

test('drizzle() is reachable from ESM and CommonJS and checks its argument', async () => {
  const { createRequire } = await import('node:module');
  // `require` gets the CommonJS build, which loads Drizzle's CommonJS build: its error
  // classes are the ones a CommonJS application catches.
  const req = createRequire(import.meta.url);
  const cjsOrm = req('drizzle-orm');
  const cjsDb = req('quietsqlite/drizzle').drizzle(await tmp.open());
  assert.equal(typeof req('quietsqlite/drizzle/migrator').migrate, 'function');
  await assert.rejects(cjsDb.transaction(async (tx) => tx.rollback()), cjsOrm.TransactionRollbackError);
  assert.deepEqual(await cjsDb.get(cjsOrm.sql`SELECT 2 AS two`), { two: 2 });
  assert.throws(() => drizzle({}), TypeError);
  const { qdb, db } = await setup();
  assert.equal(db.$client, qdb);
});

test('insert, select all and partial, where, order, limit and offset', async () => {
  const { db } = await setup();
  await db.insert(users).values([{ name: 'John' }, { name: 'Jane', verified: true, json: { tags: ['a'] } }, { name: 'Jack' }]);
  const all = await db.select().from(users).orderBy(asc(users.id));
  assert.equal(all.length, 3);
  assert.equal(all[1].verified, true);
  assert.deepEqual(all[1].json, { tags: ['a'] });
  assert.ok(all[0].createdAt instanceof Date);
  assert.deepEqual(await db.select({ id: users.id, name: users.name }).from(users).where(gt(users.id, 1)).limit(1).offset(1), [{ id: 3, name: 'Jack' }]);
  assert.deepEqual(await db.select({ n: sql`count(*)` }).from(users), [{ n: 3 }]);
  assert.deepEqual(await db.select({ name: users.name }).from(users).where(inArray(users.id, [])), []);
  assert.deepEqual(await db.selectDistinct({ v: users.verified }).from(users).orderBy(users.verified), [{ v: false }, { v: true }]);
  assert.equal(await db.$count(users), 3);
  assert.equal(await db.$count(users, eq(users.verified, true)), 1);
  assert.equal(await db.select().from(users).where(eq(users.id, 42)).get(), undefined);
  assert.deepEqual(await db.select({ name: users.name }).from(users).limit(0), []);
});

test('returning(): insert, update and delete give back rows', async () => {
  const { db } = await setup();
  const inserted = await db.insert(users).values({ name: 'John', json: [1, 2] }).returning({ id: users.id, name: users.name, json: users.json });
  assert.deepEqual(inserted, [{ id: 1, name: 'John', json: [1, 2] }]);
  const many = await db.insert(users).values([{ name: 'A' }, { name: 'B' }]).returning({ id: users.id });
  assert.deepEqual(many, [{ id: 2 }, { id: 3 }]);
  const updated = await db.update(users).set({ verified: true }).where(eq(users.name, 'A')).returning();
  assert.equal(updated.length, 1);
  assert.equal(updated[0].verified, true);
  const deleted = await db.delete(users).where(eq(users.id, 3)).returning({ name: users.name });
  assert.deepEqual(deleted, [{ name: 'B' }]);
  const one = await db.insert(users).values({ name: 'Solo' }).returning({ id: users.id }).get();
  assert.deepEqual(one, { id: 4 });
});

test('run() reports changes and the last rowid', async () => {
  const { db } = await setup();
  const r = await db.insert(users).values([{ name: 'A' }, { name: 'B' }]);
  assert.equal(r.changes, 2);
  assert.equal(r.lastInsertRowid, 2);
  const u = await db.update(users).set({ name: 'X' });
  assert.equal(u.changes, 2);
});

test('joins with aliases, subqueries, CTEs and set operations', async () => {
  const { db } = await setup();
  await db.insert(cities).values([{ id: 1, name: 'Paris' }, { id: 2, name: 'London' }]);
  await db.insert(users).values([{ name: 'John', city: 1 }, { name: 'Jane', city: 2 }, { name: 'Nomad' }]);
  const joined = await db
    .select({ user: users.name, city: cities.name })
    .from(users)
    .leftJoin(cities, eq(users.city, cities.id))
    .orderBy(users.id);
  assert.deepEqual(joined, [{ user: 'John', city: 'Paris' }, { user: 'Jane', city: 'London' }, { user: 'Nomad', city: null }]);
  // Whole-table selection of a left join: the missing side is null, as an object.
  const nested = await db.select().from(users).leftJoin(cities, eq(users.city, cities.id)).where(eq(users.name, 'Nomad'));
  assert.equal(nested[0].cities, null);
  assert.equal(nested[0].users.name, 'Nomad');
  // Two tables with the same column names, through an alias: rows are arrays underneath.
  const u2 = alias(users, 'u2');
  const pairs = await db.select({ a: users.id, b: u2.id }).from(users).innerJoin(u2, eq(u2.city, users.city)).where(eq(users.id, 1));
  assert.deepEqual(pairs, [{ a: 1, b: 1 }]);
  const sq = db.select({ id: users.id, name: users.name }).from(users).where(gt(users.id, 1)).as('sq');
  assert.deepEqual(await db.select({ name: sq.name }).from(sq).orderBy(sq.id), [{ name: 'Jane' }, { name: 'Nomad' }]);
  const parisians = db.$with('parisians').as(db.select({ name: users.name }).from(users).where(eq(users.city, 1)));
  assert.deepEqual(await db.with(parisians).select().from(parisians), [{ name: 'John' }]);
  const un = await union(db.select({ name: users.name }).from(users).where(eq(users.id, 1)), db.select({ name: cities.name }).from(cities)).orderBy(sql`name`);
  assert.deepEqual(un.map((r) => r.name), ['John', 'London', 'Paris']);
  const ex = await except(db.select({ id: users.id }).from(users), db.select({ id: cities.id }).from(cities));
  assert.deepEqual(ex, [{ id: 3 }]);
});

test('with ... update / insert / delete run on the writer', async () => {
  const { db } = await setup();
  await db.insert(users).values([{ name: 'A' }, { name: 'B' }]);
  const target = db.$with('target').as(db.select({ id: users.id }).from(users).where(eq(users.name, 'A')));
  const upd = await db.with(target).update(users).set({ verified: true }).where(inArray(users.id, sql`(select id from ${target})`)).returning({ id: users.id });
  assert.deepEqual(upd, [{ id: 1 }]);
  const src = db.$with('src').as(db.select({ name: sql`'C'`.as('name') }).from(users).limit(1));
  await db.with(src).insert(users).values({ name: sql`(select name from ${src})` });
  const del = await db.with(target).delete(users).where(inArray(users.id, sql`(select id from ${target})`)).returning({ name: users.name });
  assert.deepEqual(del, [{ name: 'A' }]);
  assert.deepEqual((await db.select({ name: users.name }).from(users).orderBy(users.id)).map((r) => r.name), ['B', 'C']);
});

test('upserts: onConflictDoNothing / onConflictDoUpdate, composite keys', async () => {
  const { db } = await setup();
  await db.insert(kv).values({ k: 'a', n: 1, v: 'first' });
  await db.insert(kv).values({ k: 'a', n: 1, v: 'ignored' }).onConflictDoNothing();
  assert.equal((await db.select().from(kv).get()).v, 'first');
  await db.insert(kv).values({ k: 'a', n: 1, v: 'second' }).onConflictDoUpdate({ target: [kv.k, kv.n], set: { v: 'second' } });
  assert.equal((await db.select().from(kv).get()).v, 'second');
  await assert.rejects(db.insert(kv).values({ k: 'a', n: 1, v: 'hunter2-secret' }), (err) => {
    // Drizzle wraps a failed query; the cause is quietsqlite's SqliteError. Drizzle's message
    // lists the parameter values: here it keeps the SQL only, and the stack too.
    assert.ok(err instanceof DrizzleQueryError);
    assert.ok(err.cause instanceof SqliteError);
    assert.match(err.cause.code, /^SQLITE_CONSTRAINT/);
    assert.match(err.message, /^Failed query: insert into "kv"/);
    assert.ok(!err.message.includes('hunter2-secret') && !err.stack.includes('hunter2-secret'), err.message);
    assert.deepEqual(err.params, ['a', 1, 'hunter2-secret']);
    return true;
  });
});

test('prepared statements with placeholders, reused', async () => {
  const { db } = await setup();
  const ins = db.insert(users).values({ name: sql.placeholder('name') }).prepare();
  for (const name of ['a', 'b', 'c']) await ins.execute({ name });
  const byId = db.select({ name: users.name }).from(users).where(eq(users.id, sql.placeholder('id'))).prepare();
  assert.deepEqual(await byId.execute({ id: 2 }), [{ name: 'b' }]);
  assert.deepEqual(await byId.get({ id: 3 }), { name: 'c' });
  const page = db.select({ id: users.id }).from(users).orderBy(users.id).limit(sql.placeholder('l')).offset(sql.placeholder('o')).prepare();
  assert.deepEqual(await page.all({ l: 1, o: 1 }), [{ id: 2 }]);
});

test('raw SQL through run / all / get / values (values and get give arrays and objects)', async () => {
  const { db } = await setup();
  await db.run(sql`INSERT INTO ${users} (name) VALUES (${'raw'})`);
  assert.deepEqual(await db.all(sql`SELECT id, name FROM ${users}`), [{ id: 1, name: 'raw' }]);
  assert.deepEqual(await db.get(sql`SELECT name FROM ${users} WHERE id = ${1}`), { name: 'raw' });
  assert.deepEqual(await db.values(sql`SELECT id, name FROM ${users}`), [[1, 'raw']]);
  const inserted = await db.get(sql`INSERT INTO ${users} (name) VALUES ('via get') RETURNING name`);
  assert.deepEqual(inserted, { name: 'via get' });
  assert.deepEqual(await db.select({ name: users.name }).from(users).where(eq(users.id, 2)).values(), [['via get']]);
  assert.deepEqual(await db.select({ x: sql`1`, y: sql`2` }).from(users).limit(1).values(), [[1, 2]]);
});

test('values() keeps columns that share a name (array rows)', async () => {
  const { db } = await setup();
  await db.insert(users).values({ name: 'n' });
  assert.deepEqual(await db.values(sql`UPDATE ${users} SET name = 'm' RETURNING id, name, id`), [[1, 'm', 1]]);
  assert.deepEqual(await db.values(sql`SELECT 1 AS a, 2 AS a`), [[1, 2]]);
});

test('column modes round-trip: blobs as Buffer, bigint and JSON; booleans; timestamps', async () => {
  const { db } = await setup();
  const big = 2n ** 62n + 5n;
  await db.insert(blobs).values({ id: 1, buf: Buffer.from([0, 255]), big, js: { a: [1, null] } });
  const row = await db.select().from(blobs).get();
  assert.deepEqual(row, { id: 1, buf: Buffer.from([0, 255]), big, js: { a: [1, null] } });
  const when = new Date('2024-01-02T03:04:05Z');
  await db.insert(users).values({ name: 't', createdAt: when, verified: true });
  const u = await db.select({ c: users.createdAt, v: users.verified }).from(users).get();
  assert.deepEqual(u, { c: when, v: true });
});

test('views and update ... from / insert ... select', async () => {
  const { qdb, db } = await setup();
  const verifiedUsers = sqliteView('verified_users').as((qb) => qb.select({ id: users.id, name: users.name }).from(users).where(eq(users.verified, true)));
  await qdb.execute("CREATE VIEW verified_users AS SELECT id, name FROM users WHERE verified = 1");
  await db.insert(users).values([{ name: 'a', verified: true }, { name: 'b' }]);
  assert.deepEqual(await db.select().from(verifiedUsers), [{ id: 1, name: 'a' }]);
  await db.insert(cities).values({ id: 1, name: 'Rome' });
  await db.update(users).set({ name: cities.name }).from(cities).where(and(eq(cities.id, 1), eq(users.id, 2)));
  assert.equal((await db.select().from(users).where(eq(users.id, 2)).get()).name, 'Rome');
  await db.insert(cities).select(db.select({ id: sql`${users.id} + 10`.as('id'), name: users.name }).from(users));
  assert.equal(await db.$count(cities), 3);
});

test('transactions: commit, tx.rollback(), throw, nested savepoints', async () => {
  const { db } = await setup();
  const result = await db.transaction(async (tx) => {
    await tx.insert(users).values({ name: 'kept' });
    return tx.select({ n: sql`count(*)` }).from(users).get();
  });
  assert.deepEqual(result, { n: 1 });
  await assert.rejects(
    db.transaction(async (tx) => {
      await tx.insert(users).values({ name: 'dropped' });
      tx.rollback();
    }),
    TransactionRollbackError,
  );
  await assert.rejects(db.transaction(async (tx) => {
    await tx.insert(users).values({ name: 'dropped too' });
    throw new Error('boom');
  }), /boom/);
  await db.transaction(async (tx) => {
    await tx.insert(users).values({ name: 'outer' });
    await tx.transaction(async (tx2) => {
      await tx2.insert(users).values({ name: 'inner kept' });
    });
    await assert.rejects(
      tx.transaction(async (tx2) => {
        await tx2.insert(users).values({ name: 'inner dropped' });
        tx2.rollback();
      }),
      TransactionRollbackError,
    );
    await tx.transaction(async (tx2) => {
      await tx2.transaction(async (tx3) => {
        await tx3.update(users).set({ verified: true }).where(eq(users.name, 'outer'));
      });
    });
  }, { behavior: 'deferred' });
  const rows = await db.select({ name: users.name, v: users.verified }).from(users).orderBy(users.id);
  assert.deepEqual(rows, [{ name: 'kept', v: false }, { name: 'outer', v: true }, { name: 'inner kept', v: false }]);
});

test('reads go to the readers, writes to the writer; db inside a transaction body routes to it', async () => {
  const { qdb, db } = await setup();
  let release;
  const gate = new Promise((r) => (release = r));
  const tx = db.transaction(async (t) => {
    await t.insert(users).values({ name: 'pending' });
    // The outer drizzle db, used inside the body, lands in the transaction too.
    assert.equal(await db.$count(users), 1);
    await gate;
  });
  await new Promise((r) => setTimeout(r, 20));
  // Outside: a read runs on a reader (does not wait, does not see it); a write waits.
  assert.equal(await within(db.$count(users), 'a read outside'), 0);
  const write = db.insert(users).values({ name: 'after' });
  const writing = write.execute();
  assert.equal(await isPending(writing), true);
  release();
  await tx;
  await within(writing, 'the queued write');
  assert.equal(await db.$count(users), 2);
  await assert.rejects(qdb.select('DELETE FROM users'));
});

test('relational queries: findMany with nested relations, findFirst, columns and where', async () => {
  const { db } = await setup();
  await db.insert(cities).values({ id: 1, name: 'Oslo' });
  await db.insert(users).values([{ name: 'Ann', city: 1 }, { name: 'Bob' }]);
  await db.insert(posts).values([{ id: 1, authorId: 1, title: 'p1' }, { id: 2, authorId: 1, title: 'p2' }, { id: 3, authorId: 2, title: 'p3' }]);
  const found = await db.query.users.findMany({
    columns: { id: true, name: true },
    with: { posts: { columns: { title: true }, orderBy: (p, { asc: a }) => [a(p.id)] }, home: true },
    orderBy: (u, { asc: a }) => [a(u.id)],
  });
  assert.deepEqual(found, [
    { id: 1, name: 'Ann', posts: [{ title: 'p1' }, { title: 'p2' }], home: { id: 1, name: 'Oslo' } },
    { id: 2, name: 'Bob', posts: [{ title: 'p3' }], home: null },
  ]);
  const first = await db.query.posts.findFirst({ where: eq(posts.id, 3), with: { author: { columns: { name: true } } } });
  assert.deepEqual(first, { id: 3, authorId: 2, title: 'p3', author: { name: 'Bob' } });
  assert.equal(await db.query.posts.findFirst({ where: eq(posts.id, 99) }), undefined);
  const inTx = await db.transaction(async (tx) => {
    await tx.insert(posts).values({ id: 4, authorId: 2, title: 'p4' });
    return tx.query.users.findFirst({ where: eq(users.id, 2), with: { posts: true } });
  });
  assert.equal(inTx.posts.length, 2);
});

test('batch(): all or nothing, each result as its query would give it', async () => {
  const { db } = await setup();
  const [ins, ret, sel, raw, rel] = await db.batch([
    db.insert(users).values({ name: 'b1' }),
    db.insert(users).values({ name: 'b2' }).returning({ id: users.id }),
    db.select({ name: users.name }).from(users).orderBy(users.id),
    db.values(sql`SELECT count(*) FROM ${users}`),
    db.query.users.findFirst({ columns: { name: true }, where: eq(users.id, 2) }),
  ]);
  assert.equal(ins.changes, 1);
  assert.deepEqual(ret, [{ id: 2 }]);
  assert.deepEqual(sel, [{ name: 'b1' }, { name: 'b2' }]);
  assert.deepEqual(raw, [[2]]);
  assert.deepEqual(rel, { name: 'b2' });
  await assert.rejects(db.batch([db.insert(users).values({ name: 'b3' }), db.run(sql`INSERT INTO nope VALUES (1)`)]));
  assert.equal(await db.$count(users), 2, 'a failed batch leaves nothing behind');
});

test('migrate(): applies a migrations folder once, in one transaction', async () => {
  const qdb = await tmp.open();
  const db = drizzle(qdb);
  const folder = join(tmp.dir, 'migrations');
  mkdirSync(join(folder, 'meta'), { recursive: true });
  writeFileSync(join(folder, '0000_init.sql'), 'CREATE TABLE a (id INTEGER PRIMARY KEY);\n--> statement-breakpoint\nCREATE TABLE b (id INTEGER PRIMARY KEY);\n');
  writeFileSync(join(folder, '0001_more.sql'), 'ALTER TABLE a ADD COLUMN name TEXT;\n');
  const journal = (entries) => writeFileSync(join(folder, 'meta', '_journal.json'), JSON.stringify({ version: '7', dialect: 'sqlite', entries }));
  journal([
    { idx: 0, version: '6', when: 1700000000000, tag: '0000_init', breakpoints: true },
    { idx: 1, version: '6', when: 1700000001000, tag: '0001_more', breakpoints: true },
  ]);
  await migrate(db, { migrationsFolder: folder });
  await migrate(db, { migrationsFolder: folder }); // nothing pending: no error, nothing twice
  const applied = await qdb.select('SELECT hash, created_at FROM __drizzle_migrations ORDER BY created_at');
  assert.equal(applied.length, 2);
  assert.deepEqual((await qdb.select('PRAGMA table_info(a)')).map((c) => c.name), ['id', 'name']);
  // A failing migration leaves nothing of itself behind.
  writeFileSync(join(folder, '0002_bad.sql'), 'CREATE TABLE c (id INTEGER);\n--> statement-breakpoint\nINSERT INTO nope VALUES (1);\n');
  journal([
    { idx: 0, version: '6', when: 1700000000000, tag: '0000_init', breakpoints: true },
    { idx: 1, version: '6', when: 1700000001000, tag: '0001_more', breakpoints: true },
    { idx: 2, version: '6', when: 1700000002000, tag: '0002_bad', breakpoints: true },
  ]);
  await assert.rejects(migrate(db, { migrationsFolder: folder }));
  assert.equal((await qdb.select("SELECT name FROM sqlite_master WHERE name = 'c'")).length, 0);
  assert.equal((await qdb.select('SELECT * FROM __drizzle_migrations')).length, 2);
});

test('migrate(): runs started together apply each migration once', async () => {
  // Drizzle reads the last migration applied before it opens its transaction: two runs at
  // once both found every migration pending and applied them twice (a seed row twice).
  const file = tmp.file();
  const qdb = await tmp.open(file);
  const other = await tmp.open(file); // another connection to the file, as another process
  const folder = join(tmp.dir, 'migrations-together');
  mkdirSync(join(folder, 'meta'), { recursive: true });
  writeFileSync(join(folder, '0000_init.sql'), 'CREATE TABLE IF NOT EXISTS users (id INTEGER PRIMARY KEY, name TEXT NOT NULL);\n');
  writeFileSync(join(folder, '0001_seed.sql'), "INSERT INTO users (name) VALUES ('admin');\n");
  writeFileSync(join(folder, 'meta', '_journal.json'), JSON.stringify({ version: '7', dialect: 'sqlite', entries: [
    { idx: 0, version: '6', when: 1700000000000, tag: '0000_init', breakpoints: true },
    { idx: 1, version: '6', when: 1700000001000, tag: '0001_seed', breakpoints: true },
  ] }));
  const config = { migrationsFolder: folder };
  await Promise.all([migrate(drizzle(qdb), config), migrate(drizzle(qdb), config), migrate(drizzle(other), config)]);
  assert.deepEqual(await qdb.select('SELECT name FROM users'), [{ name: 'admin' }]);
  assert.deepEqual(await qdb.selectOne('SELECT count(*) AS n FROM __drizzle_migrations'), { n: 2 });
});

test("migrate(): drizzle-kit's table rebuilds keep the rows of ON DELETE CASCADE children; foreign keys are checked and back on after", async () => {
  // drizzle-kit rebuilds a table with PRAGMA foreign_keys=OFF, DROP TABLE, RENAME. The pragma
  // does nothing inside the migration's transaction, and quietsqlite turns foreign keys on:
  // the DROP deleted every child row through the cascade, silently.
  const qdb = await tmp.open();
  const db = drizzle(qdb);
  const folder = join(tmp.dir, 'migrations-rebuild');
  const write = (entries) => {
    rmSync(folder, { recursive: true, force: true });
    mkdirSync(join(folder, 'meta'), { recursive: true });
    for (const [tag, text] of entries) writeFileSync(join(folder, `${tag}.sql`), text);
    writeFileSync(join(folder, 'meta', '_journal.json'), JSON.stringify({ version: '7', dialect: 'sqlite', entries: entries.map(([tag], idx) => ({ idx, version: '6', when: 1700000000000 + idx * 1000, tag, breakpoints: true })) }));
  };
  const init = ['0000_init', [
    'CREATE TABLE parent (id INTEGER PRIMARY KEY, name TEXT);',
    'CREATE TABLE child (id INTEGER PRIMARY KEY, pid INTEGER REFERENCES parent(id) ON DELETE CASCADE);',
    "INSERT INTO parent VALUES (1, 'p');",
    'INSERT INTO child VALUES (10, 1);',
  ].join('\n--> statement-breakpoint\n')];
  const rebuild = (tag, select) => [tag, [
    'PRAGMA foreign_keys=OFF;',
    "CREATE TABLE `__new_parent` (id INTEGER PRIMARY KEY, name TEXT NOT NULL DEFAULT '');",
    `INSERT INTO \`__new_parent\`("id", "name") ${select};`,
    'DROP TABLE `parent`;',
    'ALTER TABLE `__new_parent` RENAME TO `parent`;',
    'PRAGMA foreign_keys=ON;',
  ].join('--> statement-breakpoint\n')];
  write([init, rebuild('0001_rebuild', 'SELECT "id", "name" FROM `parent`')]);
  await migrate(db, { migrationsFolder: folder });
  assert.deepEqual(await qdb.select('SELECT * FROM child'), [{ id: 10, pid: 1 }]);
  assert.deepEqual(await qdb.execute('PRAGMA foreign_keys'), { changes: 0, lastInsertRowid: 0, rows: [{ foreign_keys: 1 }] });
  // A rebuild that loses a parent a child refers to fails, and leaves nothing of itself.
  write([init, rebuild('0001_rebuild', 'SELECT "id", "name" FROM `parent`'), rebuild('0002_lossy', 'SELECT "id" + 1, "name" FROM `parent`')]);
  await assert.rejects(migrate(db, { migrationsFolder: folder }), /foreign key/i);
  assert.deepEqual(await qdb.select('SELECT id FROM parent'), [{ id: 1 }]);
  assert.equal((await qdb.select('SELECT * FROM __drizzle_migrations')).length, 2);
  // Foreign keys are back on for the application's writes, also those sent while it ran.
  write([init, rebuild('0001_rebuild', 'SELECT "id", "name" FROM `parent`'), rebuild('0002_again', 'SELECT "id", "name" FROM `parent`')]);
  const running = migrate(db, { migrationsFolder: folder });
  const orphan = assert.rejects(qdb.execute('INSERT INTO child VALUES (11, 99)'), (err) => err.code === 'SQLITE_CONSTRAINT_FOREIGNKEY');
  await running;
  await orphan;
  // The writer runs what is sent together in order (test/31, "writers wait behind it in FIFO
  // order"): off, the transaction, on. A run with nothing pending leaves them on.
  await migrate(db, { migrationsFolder: folder });
  assert.deepEqual((await qdb.execute('PRAGMA foreign_keys')).rows, [{ foreign_keys: 1 }]);
  assert.deepEqual(await qdb.select('SELECT * FROM child'), [{ id: 10, pid: 1 }]);

  // A custom migration (drizzle-kit writes a comment at its top) and a file without
  // breakpoints are rebuilds too.
  const keep = 'SELECT "id", "name" FROM `parent`';
  const applied = [init, rebuild('0001_rebuild', keep), rebuild('0002_again', keep)];
  const custom = ['0003_custom', '-- Custom SQL migration file, put your code below! --\n' + rebuild('x', keep)[1]];
  const oneChunk = ['0004_one_chunk', rebuild('x', keep)[1].replaceAll('--> statement-breakpoint\n', '\n')];
  write([...applied, custom, oneChunk]);
  await migrate(db, { migrationsFolder: folder });
  assert.deepEqual(await qdb.select('SELECT * FROM child'), [{ id: 10, pid: 1 }]);

  // A row that lost its parent before (written with foreign keys off) blocks neither a run
  // with nothing pending nor a later rebuild: only rows the migrations leave count.
  await qdb.execute('PRAGMA foreign_keys = OFF');
  await qdb.execute('INSERT INTO child VALUES (13, 77)');
  await qdb.execute('PRAGMA foreign_keys = ON');
  await migrate(db, { migrationsFolder: folder });
  write([...applied, custom, oneChunk, rebuild('0005_later', keep)]);
  await migrate(db, { migrationsFolder: folder });
  assert.deepEqual(await qdb.select('SELECT * FROM child ORDER BY id'), [{ id: 10, pid: 1 }, { id: 13, pid: 77 }]);

  // Inside a transaction foreign keys cannot go off: a pending rebuild is refused there.
  write([...applied, custom, oneChunk, rebuild('0005_later', keep), rebuild('0006_in_tx', keep)]);
  await assert.rejects(db.transaction((tx) => migrate(tx, { migrationsFolder: folder })), /outside any transaction/);
  await assert.rejects(qdb.transaction(() => migrate(db, { migrationsFolder: folder })), /outside any transaction/);
  assert.deepEqual(await qdb.select('SELECT id FROM child ORDER BY id'), [{ id: 10 }, { id: 13 }]);
  await migrate(db, { migrationsFolder: folder });
  assert.deepEqual(await qdb.select('SELECT id FROM child ORDER BY id'), [{ id: 10 }, { id: 13 }]);
});

test('migrate() given a Drizzle transaction runs inside it, and is undone with it', async () => {
  const qdb = await tmp.open();
  const db = drizzle(qdb);
  const folder = join(tmp.dir, 'migrations-in-tx');
  mkdirSync(join(folder, 'meta'), { recursive: true });
  writeFileSync(join(folder, '0000_a.sql'), 'CREATE TABLE a (x);\n');
  writeFileSync(join(folder, 'meta', '_journal.json'), JSON.stringify({ version: '7', dialect: 'sqlite', entries: [{ idx: 0, version: '6', when: 1700000000000, tag: '0000_a', breakpoints: true }] }));
  await assert.rejects(
    db.transaction(async (tx) => {
      await migrate(tx, { migrationsFolder: folder });
      assert.equal((await tx.all(sql`SELECT name FROM sqlite_master WHERE name = 'a'`)).length, 1);
      throw new Error('undo');
    }),
    /undo/,
  );
  assert.deepEqual(await qdb.select("SELECT name FROM sqlite_master WHERE type = 'table'"), []);
  await db.transaction((tx) => migrate(tx, { migrationsFolder: folder }));
  assert.equal((await qdb.select('SELECT * FROM __drizzle_migrations')).length, 1);
});
