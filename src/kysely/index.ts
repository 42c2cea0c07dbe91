// quietsqlite/kysely: a Kysely dialect over a quietsqlite Database. Kysely compiles; this
// driver only chooses where each compiled query runs: SELECTs on the readers, everything else
// on the writer, and everything inside a transaction on that transaction.

import {
  SelectQueryNode,
  SqliteAdapter,
  SqliteIntrospector,
  SqliteQueryCompiler,
  type CompiledQuery,
  type DatabaseConnection,
  type DatabaseIntrospector,
  type Dialect,
  type DialectAdapter,
  type Driver,
  type Kysely,
  type QueryCompiler,
  type QueryResult,
  type TransactionSettings,
} from 'kysely';
import type { Database, TransactionHandle, TransactionMode } from 'quietsqlite';

export interface QuietsqliteDialectConfig {
  /** An open database, or a function that opens one (called once, on Kysely's first query). */
  database: Database | (() => Promise<Database>);
  /** BEGIN mode of Kysely's transactions; default 'immediate' (as `db.transaction()`). */
  transactionMode?: TransactionMode | undefined;
  /** Close the database when Kysely is destroyed (`kysely.destroy()`); default true, as
   * Kysely's own SQLite dialect does. */
  closeOnDestroy?: boolean | undefined;
}

const CONFIG_KEYS = ['database', 'transactionMode', 'closeOnDestroy'];

/** `new Kysely({ dialect: new QuietsqliteDialect({ database: db }) })` */
export class QuietsqliteDialect implements Dialect {
  readonly #config: QuietsqliteDialectConfig;

  constructor(config: QuietsqliteDialectConfig) {
    if (config === null || typeof config !== 'object') throw new TypeError('QuietsqliteDialect takes { database }');
    for (const key of Object.keys(config)) {
      if (!CONFIG_KEYS.includes(key)) {
        throw new TypeError(`unknown QuietsqliteDialect option '${key}'; known options: ${CONFIG_KEYS.join(', ')}`);
      }
    }
    if (config.database === null || (typeof config.database !== 'object' && typeof config.database !== 'function')) {
      throw new TypeError('QuietsqliteDialect needs `database`: a quietsqlite Database or a function returning one');
    }
    if (config.closeOnDestroy !== undefined && typeof config.closeOnDestroy !== 'boolean') {
      throw new TypeError('closeOnDestroy must be a boolean');
    }
    const mode = config.transactionMode;
    if (mode !== undefined && mode !== 'immediate' && mode !== 'deferred' && mode !== 'exclusive') {
      throw new TypeError("transactionMode must be 'immediate', 'deferred' or 'exclusive'");
    }
    this.#config = { ...config };
  }

  createDriver(): Driver {
    return new QuietsqliteDriver(this.#config);
  }

  createQueryCompiler(): QueryCompiler {
    return new SqliteQueryCompiler();
  }

  createAdapter(): DialectAdapter {
    return new QuietsqliteAdapter();
  }

  createIntrospector(db: Kysely<any>): DatabaseIntrospector {
    return new SqliteIntrospector(db);
  }
}

/**
 * Kysely's SQLite adapter, with transactional DDL. Kysely's own SQLite dialect has one
 * connection and serializes whole migrations on its mutex; quietsqlite's connections are
 * concurrent, so migrations serialize the SQLite way instead: each run is one transaction
 * (BEGIN IMMEDIATE waits its turn on the writer) that reads the migration table and applies
 * what is missing. A failing migration then leaves nothing of its run behind.
 */
export class QuietsqliteAdapter extends SqliteAdapter {
  /** Settles when the migration run holding the lock releases it. */
  #migrationTurn: Promise<void> = Promise.resolve();
  #releaseMigration: (() => void) | undefined;

  override get supportsTransactionalDdl(): boolean {
    return true;
  }

  /** Runs of one Kysely instance take turns. With `disableTransactions: true` (a table
   * rebuild under `PRAGMA foreign_keys = OFF` needs it) no transaction serializes them, and
   * parallel runs each applied a migration before the others' rows told them it was done. */
  override async acquireMigrationLock(): Promise<void> {
    const previous = this.#migrationTurn;
    let release!: () => void;
    this.#migrationTurn = new Promise((resolve) => (release = resolve));
    await previous;
    this.#releaseMigration = release;
  }

  override async releaseMigrationLock(): Promise<void> {
    const release = this.#releaseMigration;
    this.#releaseMigration = undefined;
    release?.();
  }
}

/** Exported for tests and for users composing their own dialect. */
export class QuietsqliteDriver implements Driver {
  readonly #config: QuietsqliteDialectConfig;
  #db: Database | undefined;

  constructor(config: QuietsqliteDialectConfig) {
    this.#config = config;
  }

  async init(): Promise<void> {
    const d = this.#config.database;
    const db: unknown = typeof d === 'function' ? await d() : d;
    // Checked by what the driver calls: a factory that resolved to something else failed
    // later, inside the driver ("on.select is not a function").
    const calls = ['select', 'execute', 'begin', 'close'] as const;
    if (db === null || typeof db !== 'object' || calls.some((m) => typeof (db as Record<string, unknown>)[m] !== 'function')) {
      throw new TypeError('QuietsqliteDialect: `database` must be, or resolve to, a quietsqlite Database');
    }
    this.#db = db as Database;
  }

  /** Connections are cheap views of the one database: reads run in parallel on the readers,
   * writes queue on the writer, so no connection mutex is needed (unlike a single handle). */
  async acquireConnection(): Promise<DatabaseConnection> {
    if (this.#db === undefined) throw new Error('the Kysely driver was destroyed');
    return new QuietsqliteConnection(this.#db);
  }

  async beginTransaction(connection: DatabaseConnection, settings: TransactionSettings): Promise<void> {
    // SQLite has one isolation level (serializable) and no read-only transactions.
    if (settings.isolationLevel !== undefined && settings.isolationLevel !== 'serializable') {
      throw new RangeError(`SQLite transactions are serializable; isolation level '${settings.isolationLevel}' is not available`);
    }
    if (settings.accessMode === 'read only') {
      throw new RangeError("SQLite has no read-only transactions; use accessMode 'read write' or none");
    }
    await conn(connection).begin(this.#config.transactionMode ?? 'immediate');
  }

  async commitTransaction(connection: DatabaseConnection): Promise<void> {
    await conn(connection).end(true);
  }

  async rollbackTransaction(connection: DatabaseConnection): Promise<void> {
    await conn(connection).end(false);
  }

  async savepoint(connection: DatabaseConnection, name: string): Promise<void> {
    await conn(connection).handle('savepoint').savepoint(name);
  }

  async rollbackToSavepoint(connection: DatabaseConnection, name: string): Promise<void> {
    await conn(connection).handle('rollbackToSavepoint').rollbackTo(name);
  }

  async releaseSavepoint(connection: DatabaseConnection, name: string): Promise<void> {
    await conn(connection).handle('releaseSavepoint').release(name);
  }

  async releaseConnection(connection: DatabaseConnection): Promise<void> {
    // Kysely ends its transactions before releasing; a connection released mid-transaction
    // (a failed commit, a user error) must not keep the writer.
    await conn(connection).end(false);
  }

  async destroy(): Promise<void> {
    const db = this.#db;
    this.#db = undefined;
    if (db !== undefined && this.#config.closeOnDestroy !== false) await db.close();
  }
}

function conn(c: DatabaseConnection): QuietsqliteConnection {
  if (!(c instanceof QuietsqliteConnection)) throw new TypeError('not a quietsqlite Kysely connection');
  return c;
}

/** A query for the readers: a SELECT built by Kysely. SQLite allows no data-changing
 * statements inside a SELECT (not even in its WITH clauses), so the kind is enough. Raw SQL
 * (`sql\`...\``) is opaque and goes to the writer, which runs anything. */
function isRead(query: CompiledQuery): boolean {
  return SelectQueryNode.is(query.query);
}

class QuietsqliteConnection implements DatabaseConnection {
  readonly #db: Database;
  #tx: TransactionHandle | undefined;
  /** `end()` committing or rolling back `#tx`. */
  #ending: Promise<void> | undefined;

  constructor(db: Database) {
    this.#db = db;
  }

  async begin(mode: TransactionMode): Promise<void> {
    if (this.#tx?.active === true) throw new RangeError('this connection is already in a transaction');
    this.#tx = await this.#db.begin({ mode });
  }

  handle(what: string): TransactionHandle {
    if (this.#tx === undefined) throw new RangeError(`${what} needs a transaction`);
    return this.#tx;
  }

  async end(commit: boolean): Promise<void> {
    // One end at a time: a second (a release while a commit runs) waits for the first, and
    // then ends what is left.
    while (this.#ending !== undefined) await this.#ending.catch(() => {});
    const tx = this.#tx;
    if (tx === undefined) return;
    // Until COMMIT or ROLLBACK has run, queries of the transaction's code still go to the
    // handle, which refuses them: Kysely marks the transaction ended only once this
    // resolves, and a query that came in the round trip would otherwise run on the database
    // and commit on its own. After a COMMIT that failed, Kysely's transaction is still open
    // (neither committed nor rolled back) until it calls for the rollback: the handle, rolled
    // back already, stays until then.
    const ending = commit ? tx.commit() : tx.rollback();
    this.#ending = ending;
    try {
      await ending;
      this.#tx = undefined;
    } catch (err) {
      if (!commit) this.#tx = undefined;
      throw err;
    } finally {
      this.#ending = undefined;
    }
  }

  async executeQuery<R>(compiled: CompiledQuery): Promise<QueryResult<R>> {
    const { sql, parameters } = compiled;
    const on = this.#tx ?? this.#db;
    if (isRead(compiled)) return { rows: await on.select<R>(sql, parameters) };
    const r = await on.execute<R>(sql, parameters);
    // A statement that gave rows (RETURNING, a raw SELECT or PRAGMA) reports just its rows, as
    // Kysely's own SQLite dialect does; one without rows reports what it changed.
    if (r.rows.length > 0) return { rows: r.rows };
    return { rows: r.rows, numAffectedRows: BigInt(r.changes), insertId: BigInt(r.lastInsertRowid) };
  }

  /** Streams a SELECT in chunks of `chunkSize` rows through `db.iterate` (one reader held
   * while the stream is open; leaving the loop early releases it). Kysely's `chunkSize` only
   * groups the rows handed out: the iterator's own chunks (its default size) carry them, so
   * any chunkSize Kysely accepts works. Inside a transaction the
   * rows come from the writer (they must see the transaction's writes), read in one piece. */
  async *streamQuery<R>(compiled: CompiledQuery, chunkSize = 100): AsyncIterableIterator<QueryResult<R>> {
    if (!isRead(compiled)) throw new TypeError('streamQuery() streams SELECT queries only');
    if (!Number.isSafeInteger(chunkSize) || chunkSize < 1) throw new RangeError('chunkSize must be a positive integer');
    const { sql, parameters } = compiled;
    const rows: AsyncIterable<R> | R[] =
      this.#tx !== undefined ? await this.#tx.select<R>(sql, parameters) : iterateOrSelect<R>(this.#db, sql, parameters);
    let chunk: R[] = [];
    try {
      for await (const row of rows) {
        chunk.push(row);
        if (chunk.length >= chunkSize) {
          yield { rows: chunk };
          chunk = [];
        }
      }
    } catch (err) {
      // The rows read before a failure go out before it, as the iterator hands them out.
      if (chunk.length > 0) yield { rows: chunk };
      throw err;
    }
    if (chunk.length > 0) yield { rows: chunk };
  }
}

/**
 * The rows of a read through `db.iterate`, or through `db.select` when the iterator is
 * refused a reader: iterators hold at most `readers - 1` readers, and Kysely's own SQLite
 * dialect runs any number of streams at once (nested loops, `Promise.all`). The refusal is
 * a RangeError from the first `next()`; so is every other error of the statement's text or
 * parameters, which `select` then meets again, and iterate()'s own refusal inside a
 * transaction body. A read can run twice: it changes nothing.
 */
async function* iterateOrSelect<R>(db: Database, sql: string, parameters: readonly unknown[]): AsyncGenerator<R> {
  let rows: AsyncIterator<R>;
  let step: IteratorResult<R>;
  try {
    // Inside a transaction body of `db` (the outer Kysely instance used there), iterate()
    // itself throws its RangeError (a reader would not see the transaction's writes):
    // `select` is routed to the transaction.
    rows = db.iterate<R>(sql, parameters)[Symbol.asyncIterator]();
    step = await rows.next();
  } catch (err) {
    if (!(err instanceof RangeError)) throw err;
    yield* await db.select<R>(sql, parameters);
    return;
  }
  try {
    for (; step.done !== true; step = await rows.next()) yield step.value;
  } finally {
    if (step.done !== true) await rows.return?.();
  }
}
