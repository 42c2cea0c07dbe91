// quietsqlite/kysely: Kysely over quietsqlite as its users use it. Covers what Kysely's own
// SQLite integration tests cover (queries of every kind, RETURNING, raw SQL, schema and
// introspection, callback and controlled transactions, savepoints, migrations, streaming,
// errors) plus where each query runs.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Kysely, Migrator, sql, CamelCasePlugin } from 'kysely';
import { SqliteError } from '../../dist/index.mjs';
import { QuietsqliteDialect } from 'quietsqlite/kysely';
import { exitIfStuck, isPending, scratch, within } from '../fixtures/tx-helpers.mjs';

const tmp = scratch('adapters-kysely');
exitIfStuck();

async function setup() {
  const db = await tmp.open();
  const k = new Kysely({ dialect: new QuietsqliteDialect({ database: db }) });
  await k.schema
    .createTable('person')
    .addColumn('id', 'integer', (c) => c.primaryKey().autoIncrement())
    .addColumn('first_name', 'text', (c) => c.notNull())
    .addColumn('age', 'integer')
    .execute();
  await k.schema
    .createTable('pet')
    .addColumn('id', 'integer', (c) => c.primaryKey())
    .addColumn('name', 'text', (c) => c.notNull().unique())
    .addColumn('owner_id', 'integer', (c) => c.references('person.id').onDelete('cascade'))
    .execute();
  await k.insertInto('person').values([
    { first_name: 'Jennifer', age: 40 },
    { first_name: 'Arnold', age: 60 },
    { first_name: 'Sylvester', age: 70 },
  ]).execute();
  await k.insertInto('pet').values([
    { id: 1, name: 'Catto', owner_id: 1 },
    { id: 2, name: 'Doggo', owner_id: 2 },
    { id: 3, name: 'Hammo', owner_id: 3 },
  ]).execute();
  return { db, k };
}

const names = (rows) => rows.map((r) => r.first_name);

test('the dialect is reachable from ESM and CommonJS and checks its options', async () => {
  const { createRequire } = await import('node:module');
  // `require` gets the CommonJS build, made with CommonJS Kysely.
  const req = createRequire(import.meta.url);
  const { QuietsqliteDialect: CjsDialect } = req('quietsqlite/kysely');
  const { Kysely: CjsKysely } = req('kysely');
  const cjsK = new CjsKysely({ dialect: new CjsDialect({ database: await tmp.open() }) });
  assert.deepEqual((await req('kysely').sql`SELECT 1 AS one`.execute(cjsK)).rows, [{ one: 1 }]);
  await cjsK.destroy();
  assert.throws(() => new QuietsqliteDialect({}), TypeError);
  assert.throws(() => new QuietsqliteDialect({ database: {}, nope: 1 }), /unknown QuietsqliteDialect option 'nope'/);
  assert.throws(() => new QuietsqliteDialect({ database: {}, transactionMode: 'later' }), TypeError);
  assert.throws(() => new QuietsqliteDialect({ database: {}, closeOnDestroy: 'no' }), /closeOnDestroy must be a boolean/);
  // A factory that resolves to something else: a TypeError that says so (it was the
  // driver's own "on.select is not a function").
  const wrong = new Kysely({ dialect: new QuietsqliteDialect({ database: async () => ({ path: 'x' }) }) });
  await assert.rejects(() => sql`SELECT 1`.execute(wrong), { name: 'TypeError', message: /must be, or resolve to, a quietsqlite Database/ });
});

test('select: where, order, limit, joins, aggregates, subqueries', async () => {
  const { k } = await setup();
  assert.deepEqual(names(await k.selectFrom('person').selectAll().orderBy('age', 'desc').limit(2).execute()), ['Sylvester', 'Arnold']);
  const joined = await k
    .selectFrom('person')
    .innerJoin('pet', 'pet.owner_id', 'person.id')
    .select(['person.first_name', 'pet.name as pet'])
    .where('pet.name', 'like', '%o')
    .orderBy('person.id')
    .execute();
  assert.deepEqual(joined, [
    { first_name: 'Jennifer', pet: 'Catto' },
    { first_name: 'Arnold', pet: 'Doggo' },
    { first_name: 'Sylvester', pet: 'Hammo' },
  ]);
  const { n, oldest } = await k.selectFrom('person').select((eb) => [eb.fn.countAll().as('n'), eb.fn.max('age').as('oldest')]).executeTakeFirstOrThrow();
  assert.deepEqual({ n, oldest }, { n: 3, oldest: 70 });
  const owners = await k
    .selectFrom('person')
    .select('first_name')
    .where('id', 'in', k.selectFrom('pet').select('owner_id').where('name', '=', 'Doggo'))
    .execute();
  assert.deepEqual(names(owners), ['Arnold']);
  assert.equal(await k.selectFrom('person').selectAll().where('id', '=', 99).executeTakeFirst(), undefined);
  const grouped = await k.selectFrom('person').select((eb) => ['age', eb.fn.count('id').as('c')]).groupBy('age').having('age', '>', 50).orderBy('age').execute();
  assert.deepEqual(grouped, [{ age: 60, c: 1 }, { age: 70, c: 1 }]);
});

test('insert, update, delete: affected rows, insert ids, RETURNING, upserts', async () => {
  const { k } = await setup();
  const ins = await k.insertInto('person').values({ first_name: 'Bruce', age: 50 }).executeTakeFirstOrThrow();
  assert.equal(ins.insertId, 4n);
  assert.equal(ins.numInsertedOrUpdatedRows, 1n);
  const returned = await k.insertInto('person').values({ first_name: 'Chuck', age: 80 }).returning(['id', 'first_name']).executeTakeFirstOrThrow();
  assert.deepEqual(returned, { id: 5, first_name: 'Chuck' });
  const up = await k.updateTable('person').set({ age: (eb) => eb('age', '+', 1) }).where('age', '>', 55).executeTakeFirstOrThrow();
  assert.equal(up.numUpdatedRows, 3n);
  const upRet = await k.updateTable('person').set({ first_name: 'Arnie' }).where('id', '=', 2).returningAll().execute();
  assert.deepEqual(upRet, [{ id: 2, first_name: 'Arnie', age: 61 }]);
  const conflict = await k
    .insertInto('pet')
    .values({ id: 9, name: 'Catto', owner_id: 2 })
    .onConflict((oc) => oc.column('name').doUpdateSet({ owner_id: (eb) => eb.ref('excluded.owner_id') }))
    .returning(['id', 'owner_id'])
    .execute();
  assert.deepEqual(conflict, [{ id: 1, owner_id: 2 }]);
  const ignored = await k.insertInto('pet').orIgnore().values({ id: 10, name: 'Doggo' }).executeTakeFirstOrThrow();
  assert.equal(ignored.numInsertedOrUpdatedRows, 0n);
  const del = await k.deleteFrom('person').where('first_name', 'in', ['Bruce', 'Chuck']).executeTakeFirstOrThrow();
  assert.equal(del.numDeletedRows, 2n);
  const delRet = await k.deleteFrom('pet').where('id', '=', 3).returning('name').execute();
  assert.deepEqual(delRet, [{ name: 'Hammo' }]);
  const replaced = await k.replaceInto('pet').values({ id: 2, name: 'Doggy', owner_id: 1 }).executeTakeFirstOrThrow();
  assert.equal(replaced.numInsertedOrUpdatedRows, 1n);
  assert.deepEqual(await k.selectFrom('pet').select('name').orderBy('id').execute(), [{ name: 'Catto' }, { name: 'Doggy' }]);
});

test('WITH ... INSERT and INSERT ... SELECT run on the writer', async () => {
  const { k } = await setup();
  await k
    .with('young', (db) => db.selectFrom('person').select(['first_name', 'age']).where('age', '<', 50))
    .insertInto('person')
    .columns(['first_name', 'age'])
    .expression((eb) => eb.selectFrom('young').select([sql`first_name || ' Jr.'`.as('first_name'), sql`age - 30`.as('age')]))
    .execute();
  const row = await k.selectFrom('person').selectAll().where('first_name', 'like', '% Jr.').executeTakeFirstOrThrow();
  assert.deepEqual(row, { id: 4, first_name: 'Jennifer Jr.', age: 10 });
  const withSelect = await k.with('old', (db) => db.selectFrom('person').select('first_name').where('age', '>', 65)).selectFrom('old').selectAll().execute();
  assert.deepEqual(names(withSelect), ['Sylvester']);
});

test('raw SQL: sql`` queries, pragmas and multi-row results', async () => {
  const { k } = await setup();
  const r = await sql`SELECT first_name FROM person WHERE age > ${50} ORDER BY id`.execute(k);
  assert.deepEqual(names(r.rows), ['Arnold', 'Sylvester']);
  const u = await sql`UPDATE person SET age = age WHERE age > ${0}`.execute(k);
  assert.equal(u.numAffectedRows, 3n);
  const pragma = await sql`PRAGMA foreign_keys`.execute(k);
  assert.equal(pragma.rows.length, 1);
  // Values cross as the Values table says: bigint, Buffer, null.
  const v = await sql`SELECT ${9007199254740993n} AS big, ${Buffer.from([1, 2])} AS blob, ${null} AS none`.execute(k);
  assert.deepEqual(v.rows, [{ big: 9007199254740993n, blob: Buffer.from([1, 2]), none: null }]);
});

test('schema builder and introspection', async () => {
  const { k } = await setup();
  await k.schema.createIndex('person_age').on('person').column('age').execute();
  await k.schema.alterTable('person').addColumn('nick', 'text').execute();
  await k.schema.createView('adults').as(k.selectFrom('person').selectAll().where('age', '>=', 18)).execute();
  const tables = await k.introspection.getTables();
  const person = tables.find((t) => t.name === 'person');
  assert.deepEqual(person.columns.map((c) => c.name), ['id', 'first_name', 'age', 'nick']);
  assert.equal(person.columns.find((c) => c.name === 'id').isAutoIncrementing, true);
  assert.ok(tables.some((t) => t.name === 'adults' && t.isView));
  await k.schema.dropView('adults').execute();
  await k.schema.dropTable('pet').execute();
  assert.deepEqual((await k.introspection.getTables()).map((t) => t.name).sort(), ['person']);
});

test('errors: SQLite errors reject with SqliteError and the connection goes on', async () => {
  const { k } = await setup();
  await assert.rejects(k.insertInto('pet').values({ id: 1, name: 'Again' }).execute(), (err) => {
    assert.ok(err instanceof SqliteError);
    assert.equal(err.code, 'SQLITE_CONSTRAINT_PRIMARYKEY');
    return true;
  });
  await assert.rejects(k.selectFrom('nope').selectAll().execute(), SqliteError);
  assert.equal((await k.selectFrom('pet').selectAll().execute()).length, 3);
});

test('reads go to the readers, writes to the writer', async () => {
  const { db, k } = await setup();
  const trx = await k.startTransaction().execute();
  await trx.insertInto('person').values({ first_name: 'Pending' }).execute();
  // A read outside the transaction runs on a reader: it neither waits nor sees the write.
  const outside = await within(k.selectFrom('person').select('first_name').execute(), 'a read outside');
  assert.equal(outside.length, 3);
  // The transaction's own reads run on the writer and see it.
  assert.equal((await trx.selectFrom('person').selectAll().execute()).length, 4);
  // A write outside the transaction waits for the writer.
  const write = k.insertInto('person').values({ first_name: 'Later' }).execute();
  assert.equal(await isPending(write), true);
  await trx.commit().execute();
  await within(write, 'the waiting write');
  assert.deepEqual(names(await k.selectFrom('person').select('first_name').where('id', '>', 3).orderBy('id').execute()), ['Pending', 'Later']);
  // A SELECT sent to a reader cannot write (a reader connection is read-only).
  await assert.rejects(db.select('INSERT INTO person(first_name) VALUES (1)'));
});

test('callback transactions commit, roll back on a throw, refuse other isolation levels', async () => {
  const { k } = await setup();
  const id = await k.transaction().execute(async (trx) => {
    const r = await trx.insertInto('person').values({ first_name: 'Tx' }).executeTakeFirstOrThrow();
    return r.insertId;
  });
  assert.equal(id, 4n);
  await assert.rejects(
    k.transaction().execute(async (trx) => {
      await trx.insertInto('person').values({ first_name: 'Gone' }).execute();
      throw new Error('boom');
    }),
    /boom/,
  );
  assert.deepEqual(names(await k.selectFrom('person').select('first_name').where('id', '>', 3).execute()), ['Tx']);
  await assert.rejects(k.transaction().setIsolationLevel('read committed').execute(async () => {}), RangeError);
  await k.transaction().setIsolationLevel('serializable').execute(async () => {});
  // The failed ones left the writer free.
  await within(k.deleteFrom('person').where('first_name', '=', 'Tx').execute(), 'a write after rollbacks');
});

test('controlled transactions: commit, rollback, savepoints', async () => {
  const { k } = await setup();
  const trx = await k.startTransaction().execute();
  await trx.insertInto('person').values({ first_name: 'Foo' }).execute();
  const afterFoo = await trx.savepoint('foo').execute();
  await afterFoo.insertInto('person').values({ first_name: 'Bar' }).execute();
  const afterBar = await afterFoo.savepoint('bar').execute();
  await afterBar.insertInto('person').values({ first_name: 'Baz' }).execute();
  const back = await afterBar.rollbackToSavepoint('foo').execute();
  await back.insertInto('person').values({ first_name: 'Qux' }).execute();
  const released = await back.releaseSavepoint('foo').execute();
  await released.commit().execute();
  assert.equal(trx.isCommitted, true);
  assert.deepEqual(names(await k.selectFrom('person').select('first_name').where('id', '>', 3).orderBy('id').execute()), ['Foo', 'Qux']);

  const trx2 = await k.startTransaction().execute();
  await trx2.deleteFrom('pet').execute();
  await trx2.rollback().execute();
  assert.equal(trx2.isRolledBack, true);
  assert.equal((await k.selectFrom('pet').selectAll().execute()).length, 3);
  await assert.rejects(trx2.selectFrom('pet').selectAll().execute(), /rolled back/);
});

test('destroy() rolls back an open controlled transaction and closes the database', async () => {
  const { db, k } = await setup();
  const trx = await k.startTransaction().execute();
  await trx.insertInto('person').values({ first_name: 'Never' }).execute();
  await within(k.destroy(), 'destroy with an open transaction');
  assert.equal(db.isOpen, false);
  const again = await (await import('../../dist/index.mjs')).Database.open(db.path);
  assert.equal((await again.select('SELECT * FROM person')).length, 3);
  await again.close();
});

test('many queries at once, from several Kysely instances on one database', async () => {
  const { db, k } = await setup();
  const k2 = new Kysely({ dialect: new QuietsqliteDialect({ database: db, closeOnDestroy: false }) });
  const work = [];
  for (let i = 0; i < 50; i++) {
    work.push(k.insertInto('person').values({ first_name: `p${i}`, age: i }).execute());
    work.push(k2.selectFrom('person').select((eb) => eb.fn.countAll().as('n')).executeTakeFirstOrThrow());
  }
  await Promise.all(work);
  const { n } = await k.selectFrom('person').select((eb) => eb.fn.countAll().as('n')).executeTakeFirstOrThrow();
  assert.equal(n, 53);
  await k2.destroy();
  assert.equal(db.isOpen, true, 'closeOnDestroy: false leaves the database open');
});

test('the database may be given as a function that opens it', async () => {
  const path = tmp.file();
  const { Database } = await import('../../dist/index.mjs');
  let opened;
  const k = new Kysely({ dialect: new QuietsqliteDialect({ database: async () => (opened = await Database.open(path)) }) });
  assert.deepEqual((await sql`SELECT 1 AS one`.execute(k)).rows, [{ one: 1 }]);
  await k.destroy();
  assert.equal(opened.isOpen, false);
});

test('migrations run through Kysely\'s Migrator', async () => {
  const db = await tmp.open();
  const k = new Kysely({ dialect: new QuietsqliteDialect({ database: db }) });
  const migrations = {
    '001_init': {
      up: (d) => d.schema.createTable('thing').addColumn('id', 'integer', (c) => c.primaryKey()).execute(),
      down: (d) => d.schema.dropTable('thing').execute(),
    },
    '002_name': {
      up: (d) => d.schema.alterTable('thing').addColumn('name', 'text').execute(),
      down: (d) => d.schema.alterTable('thing').dropColumn('name').execute(),
    },
  };
  const migrator = new Migrator({ db: k, provider: { getMigrations: async () => migrations } });
  const { error, results } = await migrator.migrateToLatest();
  assert.equal(error, undefined);
  assert.deepEqual(results.map((r) => [r.migrationName, r.status]), [['001_init', 'Success'], ['002_name', 'Success']]);
  await k.insertInto('thing').values({ id: 1, name: 'x' }).execute();
  const down = await migrator.migrateDown();
  assert.equal(down.error, undefined);
  assert.deepEqual((await k.introspection.getTables()).find((t) => t.name === 'thing').columns.map((c) => c.name), ['id']);
  await k.destroy();
});

test('migrations started in parallel apply each migration once', async () => {
  const db = await tmp.open();
  const k = new Kysely({ dialect: new QuietsqliteDialect({ database: db }) });
  const ran = [];
  const migrations = {
    m1: { up: async (d) => { ran.push('m1'); await d.schema.createTable('m1').addColumn('id', 'integer').execute(); } },
    m2: { up: async (d) => { ran.push('m2'); await d.schema.createTable('m2').addColumn('id', 'integer').execute(); } },
  };
  const migrator = new Migrator({ db: k, provider: { getMigrations: async () => migrations } });
  const runs = await Promise.all(Array.from({ length: 20 }, () => migrator.migrateToLatest()));
  assert.deepEqual(runs.map((r) => r.error), runs.map(() => undefined));
  assert.deepEqual(ran, ['m1', 'm2']);
  // A failing migration leaves nothing of its run behind (transactional DDL).
  const bad = new Migrator({
    db: k,
    provider: {
      getMigrations: async () => ({
        ...migrations,
        m3: { up: (d) => d.schema.createTable('m3').addColumn('id', 'integer').execute() },
        m4: { up: (d) => sql`INSERT INTO nope VALUES (1)`.execute(d) },
      }),
    },
  });
  const { error } = await bad.migrateToLatest();
  assert.ok(error instanceof SqliteError);
  assert.equal((await db.select("SELECT name FROM sqlite_master WHERE name = 'm3'")).length, 0);
  await k.destroy();
});

test('with disableTransactions, parallel runs of one Kysely instance still apply each migration once', async () => {
  // No transaction serialized them: 4 runs applied the seed 4 times (9 of 10 in a probe),
  // three then failing on the migration table's UNIQUE name.
  const db = await tmp.open();
  const k = new Kysely({ dialect: new QuietsqliteDialect({ database: db }) });
  await sql`CREATE TABLE settings (k TEXT)`.execute(k);
  const migrations = { '001_seed': { up: async (d) => { await d.insertInto('settings').values({ k: 'seed' }).execute(); } } };
  const runs = await Promise.all(
    Array.from({ length: 4 }, () => new Migrator({ db: k, provider: { getMigrations: async () => migrations }, disableTransactions: true }).migrateToLatest()),
  );
  assert.deepEqual(runs.map((r) => r.error), runs.map(() => undefined));
  assert.deepEqual(await db.select('SELECT count(*) AS n FROM settings'), [{ n: 1 }]);
  await k.destroy();
});

test('a stream whose read fails part-way yields every row the reader sent before the failure', async () => {
  const db = await tmp.open();
  const k = new Kysely({ dialect: new QuietsqliteDialect({ database: db }) });
  await db.execute('CREATE TABLE r (id INTEGER PRIMARY KEY)');
  await db.execute('WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < 1000) INSERT INTO r SELECT n FROM c');
  const failing = k
    .selectFrom('r')
    .select(['id', sql`json(CASE WHEN id = 600 THEN '{bad' ELSE '1' END)`.as('j')])
    .orderBy('id');
  const seen = [];
  const err = await (async () => {
    for await (const row of failing.stream(100)) {
      seen.push(row.id);
      await new Promise((resolve) => setTimeout(resolve, 1));
    }
  })().then(() => undefined, (e) => e);
  assert.ok(err instanceof SqliteError, String(err));
  // Rows 1-512 came in the reader's first two chunks of 256; the one of 513-768 failed.
  assert.deepEqual(seen, Array.from({ length: 512 }, (_, i) => i + 1));
  await k.destroy();
});

test('raw INSERT ... RETURNING reports its rows only, as Kysely\'s SQLite dialect does', async () => {
  const { k } = await setup();
  const r = await sql`INSERT INTO person (first_name) VALUES (${'Raw'}) RETURNING first_name`.execute(k);
  assert.deepEqual(r.rows, [{ first_name: 'Raw' }]);
  assert.equal(r.insertId, undefined);
  assert.equal(r.numAffectedRows, undefined);
  const plain = await sql`INSERT INTO person (first_name) VALUES (${'Plain'})`.execute(k);
  assert.equal(plain.insertId, 5n);
  assert.equal(plain.numAffectedRows, 1n);
});

test('plugins apply (CamelCasePlugin)', async () => {
  const { db } = await setup();
  const k = new Kysely({ dialect: new QuietsqliteDialect({ database: db }), plugins: [new CamelCasePlugin()] });
  const rows = await k.selectFrom('person').select(['firstName']).where('firstName', '=', 'Arnold').execute();
  assert.deepEqual(rows, [{ firstName: 'Arnold' }]);
});

test('stream() yields rows in chunks through db.iterate and releases the reader on break', async () => {
  const { db, k } = await setup();
  await k.insertInto('person').values(Array.from({ length: 200 }, (_, i) => ({ first_name: `s${i}`, age: i }))).execute();
  const seen = [];
  for await (const row of k.selectFrom('person').select('first_name').orderBy('id').stream(7)) seen.push(row.first_name);
  assert.equal(seen.length, 203);
  assert.deepEqual(seen.slice(0, 3), ['Jennifer', 'Arnold', 'Sylvester']);
  let n = 0;
  for await (const _ of k.selectFrom('person').selectAll().stream(10)) if (++n === 15) break;
  // The reader is free again: plenty of reads still run.
  await within(Promise.all(Array.from({ length: 8 }, () => db.select('SELECT count(*) FROM person'))), 'reads after a broken-off stream');
  await assert.rejects(async () => {
    for await (const _ of k.deleteFrom('person').stream()) break;
  }, TypeError);
  // Inside a transaction the stream sees the transaction's writes.
  await k.transaction().execute(async (trx) => {
    await trx.deleteFrom('person').where('id', '>', 3).execute();
    const inTx = [];
    for await (const row of trx.selectFrom('person').select('id').stream(2)) inTx.push(row.id);
    assert.deepEqual(inTx, [1, 2, 3]);
  });
});

test('streams open at once all run: those beyond what iterate() may hold read in one piece', async () => {
  // iterate() holds at most readers - 1 readers and refuses one more; Kysely's own SQLite
  // dialect runs any number of streams, so a stream refused a reader of its own reads its rows
  // through select() instead (nested loops, or Promise.all of several).
  const { db, k } = await setup();
  await k.insertInto('person').values(Array.from({ length: 300 }, (_, i) => ({ first_name: `s${i}`, age: i }))).execute();
  const drain = async () => {
    let n = 0;
    for await (const _ of k.selectFrom('person').selectAll().stream(50)) n++;
    return n;
  };
  assert.deepEqual(await within(Promise.all([drain(), drain(), drain(), drain()]), 'four streams at once'), [303, 303, 303, 303]);
  let pairs = 0;
  for await (const _ of k.selectFrom('person').select('id').where('id', '<=', 3).stream()) {
    for await (const _inner of k.selectFrom('person').select('id').where('id', '<=', 3).stream()) pairs++;
  }
  assert.equal(pairs, 9);
  // A query that fails still fails, with its own error.
  await assert.rejects(async () => {
    for await (const _ of k.selectFrom('nope').selectAll().stream()) break;
  }, /no such table: nope/);
  await within(Promise.all(Array.from({ length: 8 }, () => db.select('SELECT 1'))), 'reads after the streams');
});

test("a transaction's queries that were still coming when it rolled back commit nothing", async () => {
  // Kysely sees its transaction as rolled back only once the driver's rollback has resolved.
  // The driver let go of the transaction before sending ROLLBACK, and a query of the
  // transaction that came in that round trip ran on the database, outside any transaction,
  // and committed.
  const db = await tmp.open();
  const k = new Kysely({ dialect: new QuietsqliteDialect({ database: db, closeOnDestroy: false }) });
  await sql`CREATE TABLE t(round INTEGER, i INTEGER)`.execute(k);
  for (let round = 0; round < 80; round++) {
    let chain;
    const outcome = await k
      .transaction()
      .execute(async (trx) => {
        chain = (async () => {
          for (let i = 0; i < 50; i++) {
            await trx.insertInto('t').values({ round, i }).execute();
            await new Promise((r) => setImmediate(r));
          }
        })().catch(() => {});
        await new Promise((r) => setTimeout(r, 2));
        throw new Error('abandon this transaction');
      })
      .catch((err) => err.message);
    assert.equal(outcome, 'abandon this transaction');
    await chain;
  }
  assert.deepEqual(await db.select('SELECT * FROM t'), []);
  // The connection of a controlled transaction goes back to autocommit once it has ended.
  const trx = await k.startTransaction().execute();
  await trx.insertInto('t').values({ round: -1, i: 0 }).execute();
  await trx.rollback().execute();
  await k.connection().execute(async (c) => {
    await c.transaction().execute((t) => t.insertInto('t').values({ round: -2, i: 0 }).execute());
    await c.insertInto('t').values({ round: -3, i: 0 }).execute();
  });
  assert.deepEqual(await db.select('SELECT round FROM t ORDER BY round'), [{ round: -3 }, { round: -2 }]);
  await k.destroy();
  await db.close();
});

test('after a failed COMMIT the transaction refuses queries until rolled back, and ending twice waits', async () => {
  // A failed COMMIT leaves Kysely's controlled transaction open (neither committed nor rolled
  // back): its next query ran on the database, outside any transaction, and stayed.
  const db = await tmp.open();
  await db.execute('CREATE TABLE parent(id INTEGER PRIMARY KEY)');
  await db.execute('CREATE TABLE child(pid REFERENCES parent(id) DEFERRABLE INITIALLY DEFERRED)');
  await db.execute('CREATE TABLE log(v)');
  const k = new Kysely({ dialect: new QuietsqliteDialect({ database: db, closeOnDestroy: false }) });
  const trx = await k.startTransaction().execute();
  await trx.insertInto('child').values({ pid: 42 }).execute();
  await assert.rejects(trx.commit().execute(), /FOREIGN KEY constraint failed/);
  await assert.rejects(trx.insertInto('log').values({ v: 'after the failed commit' }).execute(), (err) => err.code === 'SQLITE_CONSTRAINT_FOREIGNKEY' || err.code === 'ERR_QUIETSQLITE_TRANSACTION_ENDED');
  await trx.rollback().execute();
  assert.deepEqual(await db.select('SELECT * FROM log'), []);
  assert.deepEqual(await db.select('SELECT * FROM child'), []);
  // The driver's end, called twice at once (a commit that fails, and a release): the second
  // waits for the first, then rolls back what is left.
  const { QuietsqliteDriver } = await import('quietsqlite/kysely');
  const driver = new QuietsqliteDriver({ database: db, closeOnDestroy: false });
  await driver.init();
  const c = await driver.acquireConnection();
  await driver.beginTransaction(c, {});
  await c.executeQuery({ sql: 'INSERT INTO child VALUES (42)', parameters: [], query: { kind: 'RawNode' } });
  const order = [];
  const commit = driver.commitTransaction(c).then(() => order.push('commit resolved'), () => order.push('commit rejected'));
  const release = driver.releaseConnection(c).then(() => order.push('release resolved'));
  await Promise.all([commit, release]);
  assert.deepEqual(order, ['commit rejected', 'release resolved']);
  await within(db.execute("INSERT INTO log VALUES ('the writer is free')"), 'a write after the release');
  await k.destroy();
  await db.close();
});

test("stream() on the outer Kysely inside a quietsqlite transaction body reads the transaction's rows", async () => {
  // db.iterate() refuses to run inside a body (a reader would not see its writes), and the
  // adapter fell back to select() only for a refusal from the first next(): the loop threw.
  const { db, k } = await setup();
  await db.transaction(async () => {
    await k.insertInto('person').values({ first_name: 'in the transaction', age: 1 }).execute();
    const names = [];
    for await (const row of k.selectFrom('person').select('first_name').orderBy('id').stream(2)) names.push(row.first_name);
    assert.equal(names.at(-1), 'in the transaction');
    assert.equal(names.length, 4);
  });
  await k.destroy();
});
