// Compiled (not run) by test/20-types.test.mjs with `tsc --noEmit --strict`: the public API's
// declarations must support ordinary strictly typed use, and reject obvious misuse.
import {
  Database,
  SqliteError,
  ErrorCodes,
  Transaction,
  type BackupOptions,
  type BackupProgress,
  Statement,
  type StatementColumn,
  TransactionHandle,
  type CallOptions,
  type Diagnostics,
  type ExecuteResult,
  type IterateOptions,
  RowIterator,
  type IntMode,
  type OpenOptions,
  type QueryOptions,
  type Row,
  type RowMode,
  type SqlValue,
} from 'quietsqlite';

interface User {
  id: number;
  name: string;
  avatar: Buffer | null;
}

export async function usage(): Promise<void> {
  const options: OpenOptions = {
    readers: 2,
    readonly: false,
    intMode: 'auto',
    busyTimeout: 1000,
    pragmas: { cache_size: -4000, foreign_keys: true, journal_size_limit: '1048576' },
  };
  const db: Database = await Database.open(':memory:', options);
  const path: string = db.path;
  const open: boolean = db.isOpen;
  const mode: IntMode = db.intMode;
  void path, open, mode;

  // Rows default to Row; a row type can be supplied.
  const rows: Row[] = await db.select('SELECT 1 AS a');
  const value: SqlValue | undefined = rows[0]?.['a'];
  void value;
  const users: User[] = await db.select<User>('SELECT id, name, avatar FROM users WHERE id > ?', [0]);
  const first: User | undefined = await db.selectOne<User>('SELECT * FROM users WHERE name = :name', { name: 'x' });
  if (first !== undefined) {
    const n: number = first.id;
    void n;
  }
  void users;

  const rowMode: RowMode = 'array';
  const q: QueryOptions = { rowMode };
  const arrays = await db.select<SqlValue[]>('SELECT 1, 2', [], q);
  const cell: SqlValue | undefined = arrays[0]?.[1];
  void cell;

  // Cancellation options on every query method, and a default timeout at open.
  const ac = new AbortController();
  const cancel: CallOptions = { signal: ac.signal, timeoutMs: 1000 };
  await Database.open(':memory:', { timeoutMs: null });
  await db.select('SELECT 1', [], { rowMode: 'array', signal: ac.signal, timeoutMs: Infinity });
  await db.selectOne('SELECT 1', [], cancel);
  await db.selectBytes('SELECT 1', [], cancel);
  await db.execute('DELETE FROM users', [], cancel);
  await db.executeBatch('DELETE FROM users WHERE id = ?', [[1]], { timeoutMs: 0 });
  await db.transaction((tx) => tx.execute('DELETE FROM users', [], cancel));

  const json: Buffer = await db.selectBytes('SELECT * FROM users');
  const parsed: unknown = JSON.parse(json.toString('utf8'));
  void parsed;

  const result: ExecuteResult & { rows: User[] } = await db.execute<User>(
    'INSERT INTO users(name) VALUES (?) RETURNING *',
    ['ann'],
  );
  const changes: number = result.changes;
  const rowid: number | bigint = result.lastInsertRowid;
  const returned: User[] = result.rows;
  void changes, rowid, returned;

  // rowMode 'array' gives arrays of values, on every method that returns rows.
  const arrayRows: unknown[][] = await db.select('SELECT 1, 1', [], { rowMode: 'array' });
  const arrayOne: unknown[] | undefined = await db.selectOne('SELECT 1', [], { rowMode: 'array', timeoutMs: 5 });
  const returning: SqlValue[][] = (await db.execute('INSERT INTO users(name) VALUES (?) RETURNING id, id', ['x'], { rowMode: 'array' })).rows;
  const objectsStill: Row[] = (await db.execute('DELETE FROM users RETURNING *', [], { rowMode: 'object' })).rows;
  void arrayRows, arrayOne, returning, objectsStill;

  // Streaming: an async iterator of rows, objects by default.
  const iterOptions: IterateOptions = { chunkSize: 100, signal: ac.signal, timeoutMs: 1000 };
  const it: RowIterator<User> = db.iterate<User>('SELECT * FROM users', [], iterOptions);
  for await (const user of it) {
    const name: string = user.name;
    void name;
  }
  for await (const arr of db.iterate('SELECT id, id FROM users', undefined, { rowMode: 'array' })) {
    const cellValue: SqlValue | undefined = arr[1];
    void cellValue;
  }
  await db.iterate('SELECT 1')[Symbol.asyncDispose]();

  const d: Diagnostics = await db.diagnostics();
  const busy: number = d.readersBusy;
  const inTx: boolean = d.inTransaction;
  const skipped: number = d.liveQueries.skippedByHash;
  void busy, inTx, skipped;
  const dispose: () => Promise<void> = () => db[Symbol.asyncDispose]();
  void dispose;

  const batch: { changes: number } = await db.executeBatch('INSERT INTO users(name) VALUES (?)', [['a'], ['b']]);
  void batch;

  const total: number = await db.transaction(async (tx: Transaction) => {
    await tx.execute('DELETE FROM users');
    const inner: string = await tx.transaction(async () => 'nested', { signal: AbortSignal.timeout(1000) });
    void inner;
    return 42;
  }, { mode: 'immediate' });
  void total;

  try {
    await db.execute('INSERT INTO users(id) VALUES (1)');
  } catch (err) {
    if (err instanceof SqliteError) {
      const code: string = err.code;
      const errno: number = err.errno;
      const sql: string | undefined = err.sql;
      const message: string = err.message;
      void code, errno, sql, message;
    }
  }
  const closed: 'ERR_QUIETSQLITE_CLOSED' = ErrorCodes.CLOSED;
  void closed;

  // Backup and serialization.
  const progress: BackupProgress[] = [];
  const backupOptions: BackupOptions = { pagesPerStep: 10, onProgress: (p) => progress.push(p), signal: AbortSignal.timeout(1000) };
  const backedUp: void = await db.backup('copy.db', backupOptions);
  const bytes: Buffer = await db.serialize();
  const copy: Database = await Database.deserialize(bytes, { readers: 1 });
  await Database.deserialize(new Uint8Array(bytes), { encryptionKey: 'k', cipher: 'sqlcipher' });
  void backedUp, copy;

  await db.close();
  await db.close({ force: true });

  // Misuse that the declarations must reject:
  // @ts-expect-error pagesPerStep is a number
  await db.backup('copy.db', { pagesPerStep: '10' });
  // @ts-expect-error progress reports { remaining, total }
  await db.backup('copy.db', { onProgress: (p: { done: number }) => p });
  // @ts-expect-error deserialize takes bytes
  await Database.deserialize('app.db');
  // @ts-expect-error intMode is a closed set of strings
  await Database.open(':memory:', { intMode: 'string' });
  // @ts-expect-error unknown open option
  await Database.open(':memory:', { reader: 2 });
  // @ts-expect-error sql must be a string
  await db.select(42);
  // @ts-expect-error rowMode is 'object' or 'array'
  await db.select('SELECT 1', [], { rowMode: 'map' });
  // @ts-expect-error timeoutMs is a number
  await db.select('SELECT 1', [], { timeoutMs: '5' });
  // @ts-expect-error executeBatch takes no rowMode
  await db.executeBatch('SELECT 1', [[]], { rowMode: 'array' });
  // @ts-expect-error rowMode 'array' rows have no named columns
  (await db.select('SELECT 1 AS a', [], { rowMode: 'array' }))[0]?.['a'];
  // @ts-expect-error chunkSize is a number
  db.iterate('SELECT 1', [], { chunkSize: '5' });
  // @ts-expect-error selectBytes resolves with a Buffer, not rows
  const notRows: Row[] = await db.selectBytes('SELECT 1');
  // @ts-expect-error the constructor is private: use Database.open
  new Database();
  // @ts-expect-error close() returns a promise of nothing
  const nothing: number = await db.close();
  void notRows, nothing;
}

async function preparedStatements(db: Database): Promise<void> {
  const stmt: Statement = db.prepare('SELECT id, name FROM users WHERE id = ?');
  const users: User[] = await stmt.select<User>([1]);
  const one: User | undefined = await stmt.selectOne<User>([1], { rowMode: 'object', timeoutMs: 100 });
  const json: Buffer = await stmt.selectBytes([1]);
  const r: ExecuteResult = await db.prepare('DELETE FROM users WHERE id = ?').execute([1]);
  const b: { changes: number } = await db.prepare('INSERT INTO users(name) VALUES (?)').executeBatch([['a'], ['b']]);
  const cols: StatementColumn[] = await stmt.columns();
  const ro: boolean | undefined = stmt.readonly;
  const sql: string = stmt.sql;
  stmt[Symbol.dispose]();
  stmt.close();
  // @ts-expect-error prepare takes SQL text
  db.prepare(42);
  // @ts-expect-error select's first argument is the parameters, not SQL
  await stmt.select('SELECT 1', [1]);
  // rowMode 'array' types rows as arrays here as on the database (api.md, class Statement).
  const arrays: SqlValue[][] = await stmt.select([1], { rowMode: 'array' });
  const arrayOne: SqlValue[] | undefined = await stmt.selectOne([1], { rowMode: 'array' });
  const returned: SqlValue[][] = (await db.prepare('INSERT INTO users(name) VALUES (?) RETURNING id, id').execute(['x'], { rowMode: 'array' })).rows;
  for await (const arr of stmt.iterate([1], { rowMode: 'array' })) {
    const first: SqlValue | undefined = arr[0];
    void first;
  }
  // @ts-expect-error rowMode 'array' rows have no named columns
  (await stmt.select([1], { rowMode: 'array' }))[0]?.['name'];
  void users, one, json, r, b, cols, ro, sql, arrays, arrayOne, returned;
}
void preparedStatements;

async function transactionHandles(db: Database): Promise<void> {
  const handle: TransactionHandle = await db.begin();
  const rows: SqlValue[][] = await handle.select('SELECT 1, 2', [], { rowMode: 'array' });
  const one: SqlValue[] | undefined = await handle.selectOne('SELECT 1', [], { rowMode: 'array' });
  const returned: SqlValue[][] = (await handle.execute('INSERT INTO users(name) VALUES (?) RETURNING id', ['x'], { rowMode: 'array' })).rows;
  const objects: Row[] = await handle.select('SELECT 1 AS a');
  // @ts-expect-error rowMode 'array' rows have no named columns
  (await handle.select('SELECT 1 AS a', [], { rowMode: 'array' }))[0]?.['a'];
  await handle.commit();
  void rows, one, returned, objects;
}
void transactionHandles;

// Types a strict TypeScript user met against the runtime (the seventh round of probes).
async function strictTypes(db: Database, maybeSignal: AbortSignal | undefined, maybeNumber: number | undefined, mode: RowMode): Promise<void> {
  // Under exactOptionalPropertyTypes an option may be given as undefined, as the runtime takes it.
  await db.select('SELECT 1', [], { signal: maybeSignal, timeoutMs: maybeNumber, rowMode: undefined });
  const reopened = await Database.open(':memory:', { readers: maybeNumber, intMode: undefined, inlineReads: undefined });
  await db.transaction(async () => 1, { signal: maybeSignal, mode: undefined });
  const backupOptions: BackupOptions = { signal: maybeSignal, onProgress: undefined, pagesPerStep: maybeNumber };
  // A rowMode known only at run time gives either kind of row.
  const either = await db.select('SELECT 1 AS a', [], { rowMode: mode });
  // @ts-expect-error the rows may be arrays
  const asObjects: Row[] = either;
  const objects: Row[] = await db.select('SELECT 1 AS a', [], { rowMode: 'object' });
  // Parameters are an array or an object, and a batch's sets may be read-only.
  // @ts-expect-error a lone value is not a parameter list
  await db.select('SELECT ?', 5);
  const sets: readonly (readonly number[])[] = [[1], [2]];
  await db.executeBatch('INSERT INTO users(id) VALUES (?)', sets);
  const user: User = { id: 1, name: 'a', avatar: null };
  await db.execute('INSERT INTO users(id, name, avatar) VALUES (:id, :name, :avatar)', user);
  // Functions: unannotated arguments are SQL values; annotated ones are the caller's word.
  db.function('slug', (s) => String(s).toLowerCase());
  db.function('len', (s: string) => s.length);
  // @ts-expect-error an argument is a SQL value, not a string, until annotated
  db.function('upper', (s) => s.toUpperCase());
  // @ts-expect-error functions are synchronous
  db.function('later', async () => 1);
  // @ts-expect-error a Date is no SQL value
  db.function('now', () => new Date());
  db.aggregate<number>('total', { start: 0, step: (acc, x) => acc + Number(x) });
  await reopened.close();
  void backupOptions, asObjects, objects;
}
void strictTypes;

// The final read's cases: optional arguments, a null-first accumulator, results, close.
function strictTypesFinal(db: Database, force: boolean | undefined): void {
  db.function('round_to', (x: number, digits?: number) => Number(x.toFixed(digits ?? 0)), { varargs: true });
  db.function('pad', (s: string, width: number = 8) => s.padStart(width));
  // @ts-expect-error without `start` the first accumulator is null: step must take it
  db.aggregate<number | null>('sum_or_null', { step: (acc: number, x: number) => acc + x });
  db.aggregate<number | null>('sum_or_null', { step: (acc, x: number) => (acc ?? 0) + x });
  // @ts-expect-error an aggregate's result is a SQL value
  db.aggregate<number>('when', { start: 0, step: (acc) => acc, result: () => new Date() });
  // @ts-expect-error a flat array is not a list of parameter sets
  void db.executeBatch('INSERT INTO users(id) VALUES (?)', [1, 2]);
  void db.close({ force });
}
void strictTypesFinal;
