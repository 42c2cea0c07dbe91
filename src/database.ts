// The public Database: validates and orchestrates; the addon does the work.

import { constants as bufferConstants } from 'node:buffer';
import { isMainThread } from 'node:worker_threads';
import { checkDestination, resolveBackupOptions, type BackupOptions } from './backup';
import { closedError, fromNativeThrow, transactionEndedError } from './errors';
import { binding, type NativeDatabase, type NativeOpenOptions } from './native';
import {
  checkKey,
  ownOptions,
  checkParams,
  checkParamSets,
  checkPath,
  checkSql,
  checkExtensionPath,
  resolveCallOptions,
  resolveOpenOptions,
  takeParamSets,
  type CallOptions,
  type ArrayRowMode,
  type ObjectRowMode,
  type Params,
  type CallSettings,
  type Cipher,
  type ExecuteOptions,
  type KeyBytes,
  type OpenOptions,
  type QueryOptions,
} from './options';
import { PACKED_LAYOUT, bindable, packParamSets, packParams, paramsAsOfNow } from './params';
import { signalState } from './signals';
import { timeoutError } from './timers';
import { Kind, nextMicrotask, Requests, rowsAs, type Description, type ExecuteResult, type RequestTracker, type Stop } from './requests';
import { decodeRowsIn, type IntMode, type Row, type SqlValue } from './rows';
import { resolveIterateOptions, RowIterator, type IterateHost, type IterateOptions } from './iterate';
import {
  callbackScope,
  currentTransaction,
  NO_SIGNALS,
  raceBody,
  runInContext,
  promiseInContext,
  Transaction,
  transactionOptions,
  type SavepointOp,
  type Executor,
  type TransactionHost,
  type TransactionMode,
  type TransactionOptions,
} from './transaction';
import { LiveQuery, type LiveHost, type StreamOptions } from './stream';
import type { Diagnostics, NativeDiagnostics } from './diagnostics';
import { TransactionHandle } from './transaction-handle';
import { newStatement, Statement, statementId, type StatementHost } from './statement';
import { SqlTexts } from './sql-texts';
import { Functions, type AggregateOptions, type FunctionOptions, type ScalarFunction } from './functions';
import { claimFile } from './open-files';

/** Entry points only an addon built with the `test-hooks` feature has (`npm test`). */
interface TestHooks {
  liveStats(): number[];
  resultPoolStats(): number[];
  statementCount(): number;
  panicForTests(id: number): void;
  panicOnJsThread(place: number): void;
}

function testHooks(native: NativeDatabase): TestHooks {
  const hooks = native as unknown as Partial<TestHooks>;
  if (typeof hooks.panicForTests !== 'function') {
    throw new Error('this addon was built without test hooks; `npm run build:test` builds them');
  }
  return hooks as TestHooks;
}

let exitHookInstalled = false;

/**
 * The files the addon makes for its own use (behind `:memory:` and deserialized databases, a
 * backup's copy) are deleted when the process exits, even in the middle of an operation or
 * without close(). The addon lists them; only the main thread's exit ends the process (a
 * Worker's databases close with the Worker).
 */
function removeScratchFilesAtExit(): void {
  if (exitHookInstalled || !isMainThread) return;
  exitHookInstalled = true;
  process.once('exit', () => binding.removeScratchFiles());
}

export interface CloseOptions {
  /** Roll back a running transaction instead of waiting for its body to finish, interrupt
   * running statements, and reject queued requests instead of running them. */
  force?: boolean | undefined;
}


/** What can cancel a call: its own signal and timeout, and the signals of the transactions
 * it runs in; undefined when nothing can (the common case costs nothing more). */
function stopOf(o: CallSettings, txSignals: readonly AbortSignal[]): Stop | undefined {
  if (o.signal === undefined) {
    if (o.timeoutMs === 0 && txSignals.length === 0) return undefined;
    return { signals: txSignals, timeoutMs: o.timeoutMs };
  }
  return { signals: txSignals.length === 0 ? [o.signal] : [...txSignals, o.signal], timeoutMs: o.timeoutMs };
}

const MODES: Record<TransactionMode, number> = { deferred: 0, immediate: 1, exclusive: 2 };
const FORMATS = [Kind.Rows, Kind.FirstRow, Kind.Bytes, Kind.Describe] as const;

/** Inline results up to this size reuse one Buffer per database instead of a new one each
 * (docs/experiments/022-inline-reads.md); larger ones arrive in a Buffer of their own. */
const INLINE_SCRATCH_BYTES = 16 * 1024;
/** Added to a read's format: the addon binds the parameters its inline attempt converted. */
const READ_PARKED_PARAMS: number = binding.READ_PARKED_PARAMS;
const REKEY_DONE: string = binding.REKEY_DONE;
/** A batch of more sets than this crosses in parts, the first this size, each next one twice
 * the last, up to BATCH_PART_MAX (docs/experiments/060-batch-in-parts.md): the writer starts
 * soon, and a part's own cost stays small beside its rows'. */
const BATCH_FIRST_PART = 64;
const BATCH_PART_MAX = 4096;
function rejected<T>(err: unknown): Promise<T> {
  return Promise.reject(err);
}

export class Database implements Executor, TransactionHost, StatementHost {
  readonly #native: NativeDatabase;
  /** `#native`'s number for the calls made per request (`binding.db*`). */
  readonly #handle: number;
  readonly #requests: Requests;
  readonly #path: string;
  /** Uncounts the file as open by this copy of quietsqlite (src/open-files.ts). */
  readonly #releaseFile: (() => void) | undefined;
  /** The default `timeoutMs` of every query (0: none). */
  readonly #timeoutMs: number;
  /** The cipher of the database's encryption (or of a later rekey on a plaintext one). */
  readonly #cipher: Cipher;
  /** The file is encrypted now (open with a key, or rekeyed since). */
  #encrypted: boolean;
  /** What iterators need from this database. */
  readonly #iterateHost: IterateHost;
  /** Opened with `readonly: true`: there is no writer connection. */
  readonly #readonlyDb: boolean;
  /** User-defined functions (made at the first registration). */
  #functions: Functions | undefined;
  /** Opened with `inlineReads` (the addon keeps the budget). */
  /** `inlineReads`' budget in microseconds; 0 when reads never run inline. */
  readonly #inlineBudgetUs: number;
  /** A rekey() is under way: no inline read until it settled (the file changes key). */
  #inlineHeld = 0;
  /** Where inline reads write small results (made at the first one; decoded before reuse). */
  #inlineScratch: Buffer | undefined;
  /** `#inlineScratch` as float64s, for decoding without a view per result. */
  #inlineView: Float64Array | undefined;
  /** No inline read was tried yet in this synchronous run (reset by a microtask). */
  #inlineTurn = true;
  readonly #nextInlineTurn = (): void => {
    this.#inlineTurn = true;
  };
  #closing: Promise<void> | undefined;
  #forceClosing = false;
  #nextTx = 1;
  /** BEGINs sent whose callers wait for them (`#beginOnWriter`). */
  #begins = 0;
  /** A batch's parts are being sent (`#sendBatchInParts`). */
  #sendingBatch = false;
  /** What live queries need from this database. */
  readonly #liveHost: LiveHost;
  /** The SQL texts sent by number (`#sqlRef`). */
  readonly #texts = new SqlTexts((sql) => this.#native.prepareStatement(sql));
  /** The transaction holding the writer, with the means to cancel it (forced close). */
  #running:
    | { tx: Transaction; cancel: (reason: unknown) => void; settled: () => Promise<void>; handle?: TransactionHandle }
    | undefined;

  private constructor(
    path: string,
    native: NativeDatabase,
    requests: Requests,
    timeoutMs: number,
    cipher: Cipher,
    encrypted: boolean,
    readonlyDb: boolean,
    inlineBudgetUs: number,
    releaseFile: (() => void) | undefined,
  ) {
    this.#releaseFile = releaseFile;
    this.#path = path;
    this.#inlineBudgetUs = inlineBudgetUs;
    this.#readonlyDb = readonlyDb;
    this.#cipher = cipher;
    this.#encrypted = encrypted;
    this.#timeoutMs = timeoutMs;
    this.#native = native;
    this.#handle = native.handle;
    this.#requests = requests;
    requests.attach(native, this);
    this.#liveHost = { native, requests, isOpen: () => this.#closing === undefined };
    this.#iterateHost = this.#liveHost;
  }

  /**
   * Opens (creating if needed) the database at `path` (`:memory:` for an in-memory database
   * shared by all of its connections). Connections open on native threads.
   */
  static async open(path: string, options?: OpenOptions): Promise<Database> {
    checkPath(path);
    return Database.#start(
      path,
      options,
      (nativeOptions, onComplete, id) => new binding.NativeDatabase(path, nativeOptions, onComplete, id),
      true,
    );
  }

  /**
   * Opens a copy of a database serialized by `serialize()`: a new, private database (as
   * `:memory:` is) whose readers and writer work as usual; its file is deleted on close.
   * `options` are open()'s (an encrypted copy needs its `encryptionKey` and `cipher`).
   * Bytes that are not a database reject with SqliteError SQLITE_NOTADB.
   */
  static async deserialize(bytes: Uint8Array, options?: OpenOptions): Promise<Database> {
    if (!(bytes instanceof Uint8Array)) throw new TypeError('deserialize() takes the bytes of a database (a Buffer or Uint8Array)');
    const buf = Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    return Database.#start(
      ':memory:',
      options,
      (nativeOptions, onComplete, id) => binding.NativeDatabase.deserialize(buf, nativeOptions, onComplete, id),
      false,
    );
  }

  static async #start(
    path: string,
    options: OpenOptions | undefined,
    create: (o: NativeOpenOptions, onComplete: () => void, id: number) => NativeDatabase,
    namesFile: boolean,
  ): Promise<Database> {
    const o = resolveOpenOptions(options);
    // Before anything opens the file: refused when another copy of quietsqlite has it open
    // (or is creating it).
    const claims: (() => void)[] = [];
    const releaseClaims = (): void => {
      for (const release of claims.splice(0)) release();
    };
    const claim = namesFile ? claimFile(path) : undefined;
    if (claim !== undefined) claims.push(claim);
    removeScratchFilesAtExit();
    const requests = new Requests(o.intMode);
    const openId = requests.id();
    let native: NativeDatabase | undefined;
    await requests.start<void>(Kind.Done, 'object', (id) => {
      try {
        native = create(
          {
            readers: o.readers,
            readonly: o.readonly,
            busyTimeout: o.busyTimeout,
            pragmas: o.pragmas,
            externalCheckpoints: o.externalCheckpoints,
            encryptionKey: o.encryption?.bytes,
            rawKey: o.encryption?.raw,
            cipher: o.encryption === undefined ? undefined : o.cipher,
            extensions: o.extensions,
            inlineBudgetUs: o.inlineBudgetUs,
          },
          requests.onComplete,
          id,
        );
      } catch (err) {
        throw fromNativeThrow(err);
      } finally {
        // The native side copied the key; the copy of a passphrase made here goes.
        if (o.encryption?.owned === true) o.encryption.bytes.fill(0);
      }
      // Until the Database object exists, the native object is what stays pinned while work
      // is in flight (the requests object is reachable through its completion callback). So
      // after a failed open, letting go of the event loop still finds it by its handle.
      requests.attach(native, native);
    }, openId).catch((err: unknown) => {
      // A failed open leaves no threads behind; release the completion channel.
      native?.dispose();
      releaseClaims();
      throw err;
    });
    // Claimed again now that the file exists: under its own identity too, which other names
    // of it (hard links) share.
    if (namesFile) {
      try {
        const more = claimFile(path);
        if (more !== undefined) claims.push(more);
      } catch (err) {
        await Database.#closeUnclaimed(native!, requests);
        releaseClaims();
        throw err;
      }
    }
    const releaseFile = claims.length === 0 ? undefined : releaseClaims;
    return new Database(
      path,
      native!,
      requests,
      o.timeoutMs,
      o.cipher,
      o.encryption !== undefined,
      o.readonly,
      o.inlineBudgetUs ?? 0,
      releaseFile,
    );
  }

  /** Closes a database that was opened and must not be used. */
  static async #closeUnclaimed(native: NativeDatabase, requests: Requests): Promise<void> {
    await requests.start<void>(Kind.Done, 'object', (id) => native.close(id)).catch(() => {});
    requests.closed();
    native.dispose();
  }

  /** The path the database was opened with. */
  get path(): string {
    return this.#path;
  }

  /** True until close() is called. */
  get isOpen(): boolean {
    return this.#closing === undefined;
  }

  get intMode(): IntMode {
    return this.#requests.intMode;
  }

  // ---- reads ----

  /** What the addon takes as `sql`: the number of a prepared statement of this database or
   * of a text sent before (`#texts`), each checked once, or the checked text. Taken right
   * before the native call, after every getter of the call's options and parameters that
   * runs here: a getter may close a statement, and a number let go of is given to the next
   * statement or text registered. The addon looks the number up before it reads any
   * parameter itself. */
  #sqlRef(sql: unknown): string | number {
    if (typeof sql === 'string') {
      const number = this.#texts.numberOf(sql);
      if (number !== undefined) return number;
      checkSql(sql);
      return this.#texts.noteText(sql);
    }
    if (sql instanceof Statement) return statementId(sql, this);
    checkSql(sql);
    return sql;
  }

  /** The promise of an inline read's answer: resolved at once, except for the read that
   * meets the limit of results taken before the event loop must turn (TAKES_PER_TURN in
   * requests.ts), whose caller resumes after the turn. */
  #answeredInline(value: unknown): Promise<unknown> {
    return this.#requests.inlineMustWait() ? this.#requests.afterTurn(value) : Promise.resolve(value);
  }

  #read(sql: string, params: unknown, options: unknown, format: 0 | 1 | 2 | 3): Promise<unknown> {
    const tx = currentTransaction(this);
    if (tx !== undefined) {
      if (format === 0) return tx.select(sql, params as Params, options as QueryOptions);
      if (format === 1) return tx.selectOne(sql, params as Params, options as QueryOptions);
      if (format === 2) return tx.selectBytes(sql, params as Params, options as CallOptions);
      return tx.describe(sql);
    }
    try {
      if (this.#closing) throw closedError();
      checkParams(params);
      params = bindable(params);
      const o = resolveCallOptions(options, format !== 2, this.#timeoutMs);
      let stop = stopOf(o, NO_SIGNALS);
      // A timeout shorter than the budget could not be kept inline: no timer fires while
      // this thread runs the statement.
      const inline =
        this.#inlineBudgetUs > 0 &&
        format !== 3 &&
        this.#inlineHeld === 0 &&
        this.#inlineTurn &&
        this.#requests.idle &&
        (o.timeoutMs === 0 || o.timeoutMs * 1000 >= this.#inlineBudgetUs) &&
        !stop?.signals.some(signalState.aborted);
      // The text's reference once taken (a text's number is never given to another while
      // the database is open): taking it again would count a one-off text as seen twice.
      let textRef: string | number | undefined;
      // The inline attempt declined after converting the parameters: the addon keeps them
      // for the reader, and the caller's getters do not run twice.
      let parked = false;
      if (inline) {
        // Bounded inline read (docs/experiments/022-inline-reads.md): null when it was not
        // eligible, went over budget or failed; then a reader runs it as usual. Only the
        // first read of a synchronous run, and only while no request is in flight: reads
        // issued together (Promise.all, concurrent handlers) run in parallel on the readers
        // instead of one after another on this thread.
        this.#inlineTurn = false;
        nextMicrotask(this.#nextInlineTurn);
        const began = o.timeoutMs === 0 ? 0 : performance.now();
        let out: unknown;
        const scratch = (this.#inlineScratch ??= Buffer.allocUnsafeSlow(INLINE_SCRATCH_BYTES));
        try {
          // The SQL's number is taken after the caller's code (option getters) has run, and
          // the addon looks it up before it reads the parameters, whose getters may close a
          // statement and let its number go to another text.
          const ref = this.#sqlRef(sql);
          if (typeof sql === 'string') textRef = ref;
          out = binding.dbReadInline(this.#handle, ref, params, format, scratch);
        } catch (err) {
          throw fromNativeThrow(err);
        }
        if (typeof out === 'number') {
          // A length: the rows were written to `scratch`, decoded (copied out) right here,
          // through a view of it kept for the next time.
          const view = (this.#inlineView ??= new Float64Array(scratch.buffer, scratch.byteOffset, INLINE_SCRATCH_BYTES / 8));
          const rows = decodeRowsIn(scratch, view, 0, o.rowMode, this.#requests.intMode);
          return this.#answeredInline(rowsAs(FORMATS[format], rows));
        }
        if (out === true) parked = true;
        else if (out !== null) return this.#answeredInline(this.#requests.convert(FORMATS[format], o.rowMode, out));
        if (began !== 0) {
          // The time the attempt took (up to the budget) counts toward the call's timeout.
          const left = o.timeoutMs - (performance.now() - began);
          if (left <= 0) throw timeoutError();
          stop = { signals: stop!.signals, timeoutMs: left };
        }
      }
      return this.#requests.start(
        FORMATS[format],
        o.rowMode,
        (id, cancellable) => {
          try {
            // A statement's number is looked at again: the inline attempt ran getters.
            if (parked) {
              binding.dbRead(this.#handle, id, textRef ?? this.#sqlRef(sql), undefined, format | READ_PARKED_PARAMS, cancellable);
              return;
            }
            const packed = packParams(params);
            const ref = textRef ?? this.#sqlRef(sql);
            if (typeof packed === 'string') binding.dbRead(this.#handle, id, ref, PACKED_LAYOUT, format, cancellable, packed);
            else binding.dbRead(this.#handle, id, ref, packed ?? params, format, cancellable);
          } catch (err) {
            throw fromNativeThrow(err);
          }
        },
        undefined,
        stop,
      );
    } catch (err) {
      return rejected(err);
    }
  }

  /** Runs a read-only query on a reader thread; resolves with every row. */
  select<T = SqlValue[]>(sql: string, params: Params | undefined, options: QueryOptions & ArrayRowMode): Promise<T[]>;
  select<T = Row>(sql: string, params?: Params, options?: QueryOptions & ObjectRowMode): Promise<T[]>;
  select<T = Row | SqlValue[]>(sql: string, params?: Params, options?: QueryOptions): Promise<T[]>;
  select<T>(sql: string, params?: unknown, options?: QueryOptions): Promise<T[]> {
    return this.#read(sql, params, options, 0) as Promise<T[]>;
  }

  /** Like select(), but resolves with the first row only (or undefined). */
  selectOne<T = SqlValue[]>(sql: string, params: Params | undefined, options: QueryOptions & ArrayRowMode): Promise<T | undefined>;
  selectOne<T = Row>(sql: string, params?: Params, options?: QueryOptions & ObjectRowMode): Promise<T | undefined>;
  selectOne<T = Row | SqlValue[]>(sql: string, params?: Params, options?: QueryOptions): Promise<T | undefined>;
  selectOne<T>(sql: string, params?: unknown, options?: QueryOptions): Promise<T | undefined> {
    return this.#read(sql, params, options, 1) as Promise<T | undefined>;
  }

  /** Resolves with the result as UTF-8 JSON (an array of objects), built natively. */
  selectBytes(sql: string, params?: Params, options?: CallOptions): Promise<Buffer> {
    return this.#read(sql, params, options, 2) as Promise<Buffer>;
  }

  /**
   * The rows of a read-only query, in chunks: `for await (const row of db.iterate(sql))`.
   * While open, the iterator holds one reader (one snapshot); it steps the next chunk only
   * when the previous one is being consumed. `break`, return(), an exception in the loop,
   * the signal, the timeout and close() release the reader. Statement objects reuse this.
   */
  iterate<T = SqlValue[]>(sql: string, params: Params | undefined, options: IterateOptions & ArrayRowMode): RowIterator<T>;
  iterate<T = Row>(sql: string, params?: Params, options?: IterateOptions & ObjectRowMode): RowIterator<T>;
  iterate<T = Row | SqlValue[]>(sql: string, params?: Params, options?: IterateOptions): RowIterator<T>;
  iterate<T>(sql: string, params?: unknown, options?: IterateOptions): RowIterator<T> {
    checkSql(sql);
    checkParams(params);
    const o = resolveIterateOptions(options, this.#timeoutMs);
    if (this.#closing) throw closedError();
    if (currentTransaction(this) !== undefined) {
      throw new RangeError(
        "iterate() runs on a reader and would not see this transaction's writes; inside a transaction " +
          'body use tx.select(), or iterate after the transaction',
      );
    }
    return new RowIterator<T>(this.#iterateHost, sql, paramsAsOfNow(params), o);
  }

  /**
   * What the database is doing and how big it is (see Diagnostics). The counts are taken
   * now; the file's numbers are measured by a reader (it waits for a free reader, never for
   * the writer).
   */
  diagnostics(): Promise<Diagnostics> {
    if (this.#closing) return rejected(closedError());
    const inTransaction = this.#running !== undefined;
    const cipher = this.#encrypted ? this.#cipher : null;
    return this.#requests
      .start<NativeDiagnostics>(Kind.Diagnostics, 'object', (id) => {
        try {
          this.#native.diagnostics(id);
        } catch (err) {
          throw fromNativeThrow(err);
        }
      })
      .then((d) => ({
        sqliteVersion: d.sqliteVersion,
        cipher,
        readers: d.readers,
        readersBusy: d.readersBusy,
        queuedReads: d.queuedReads,
        queuedWrites: d.queuedWrites,
        inTransaction,
        pageSize: d.pageSize,
        pageCount: d.pageCount,
        freelistCount: d.freelistCount,
        walBytes: d.walBytes,
        cacheBytes: d.cacheBytes,
        statementBytes: d.statementBytes,
        schemaBytes: d.schemaBytes,
        inlineReads: d.inlineReads,
        inlineFallbacks: d.inlineFallbacks,
        liveQueries: d.liveQueries,
      }));
  }

  // ---- writes ----

  /** Runs one statement (or, without parameters, several) on the writer thread. */
  execute<T = SqlValue[]>(sql: string, params: Params | undefined, options: ExecuteOptions & ArrayRowMode): Promise<ExecuteResult & { rows: T[] }>;
  execute<T = Row>(sql: string, params?: Params, options?: ExecuteOptions & ObjectRowMode): Promise<ExecuteResult & { rows: T[] }>;
  execute<T = Row | SqlValue[]>(sql: string, params?: Params, options?: ExecuteOptions): Promise<ExecuteResult & { rows: T[] }>;
  execute<T>(sql: string, params?: unknown, options?: ExecuteOptions): Promise<ExecuteResult & { rows: T[] }> {
    const tx = currentTransaction(this);
    if (tx !== undefined) return tx.execute<T>(sql, params as Params, options);
    if (this.#closing) return rejected(closedError());
    return this.writerExecute(0, sql, params, options, NO_SIGNALS) as Promise<ExecuteResult & { rows: T[] }>;
  }

  /** Prepares `sql` once and runs it for every parameter set, in one transaction. */
  executeBatch(sql: string, paramSets: readonly Params[], options?: CallOptions): Promise<{ changes: number }> {
    const tx = currentTransaction(this);
    if (tx !== undefined) return tx.executeBatch(sql, paramSets, options);
    if (this.#closing) return rejected(closedError());
    return this.writerBatch(0, sql, paramSets, options, NO_SIGNALS);
  }

  /**
   * Changes the encryption key: a passphrase or a Buffer of raw key bytes encrypts (or
   * re-encrypts) the database with the open cipher; `null` decrypts it. Runs on the writer
   * after the work queued before it; the readers reopen with the new key.
   */
  rekey(newKey: string | Buffer | null): Promise<void> {
    let key: KeyBytes | undefined;
    try {
      if (this.#closing) throw closedError();
      if (currentTransaction(this) !== undefined) {
        throw new RangeError('rekey() inside a transaction body would wait for that transaction forever; call it after');
      }
      if (arguments.length === 0 || newKey === undefined) {
        throw new TypeError('rekey() takes the new key (a string or a Buffer), or null to decrypt');
      }
      key = newKey === null ? undefined : checkKey('the new key', newKey);
      const k = key;
      // The addon closes the inline connection; none reopens before the rekey settled.
      this.#inlineHeld++;
      let sent: Promise<void>;
      try {
        sent = this.#write<void>(Kind.Done, 'object', (id) => this.#native.rekey(id, k?.bytes ?? null, k?.raw ?? false, this.#cipher));
      } catch (err) {
        this.#inlineHeld--;
        throw err;
      }
      return sent
        .then(
          () => {
            this.#encrypted = k !== undefined;
          },
          (err: unknown) => {
            // Rejected, but the file has the new key (a reader could not reopen, ...).
            if (err instanceof Error && err.message.startsWith(REKEY_DONE)) this.#encrypted = k !== undefined;
            throw err;
          },
        )
        .finally(() => {
          this.#inlineHeld--;
        });
    } catch (err) {
      return rejected(err);
    } finally {
      if (key?.owned === true) key.bytes.fill(0);
    }
  }

  // ---- backup and serialization ----

  /**
   * Copies the database to `destPath` on a reader thread, as one consistent snapshot while
   * writes go on (SQLite's backup API inside one read transaction). The copy is written
   * beside `destPath` and renamed over it when complete; an encrypted database's copy is
   * encrypted with the same key and cipher.
   */
  backup(destPath: string, options?: BackupOptions): Promise<void> {
    try {
      if (this.#closing) throw closedError();
      checkDestination(destPath);
      const o = resolveBackupOptions(options);
      // An exception thrown by onProgress stops the backup through this controller.
      const internal = new AbortController();
      const signals = o.signal === undefined ? [internal.signal] : [o.signal, internal.signal];
      const onProgress = o.onProgress;
      const progressId = onProgress === undefined ? undefined : this.#requests.id();
      // The first exception of onProgress; the final report comes after the copy finished,
      // when aborting no longer stops anything, so the outcome carries it instead.
      let thrown: { err: unknown } | undefined;
      if (progressId !== undefined && onProgress !== undefined) {
        // onProgress runs in the async context of this call, without any transaction.
        const scope = callbackScope('quietsqlite.backup');
        this.#requests.subscribers.set(progressId, {
          emit: (payload) => {
            if (internal.signal.aborted) return;
            const [remaining, total] = payload as unknown as [number, number];
            const stop = (err: unknown): void => {
              thrown ??= { err };
              internal.abort(err);
            };
            try {
              const result: unknown = scope.runInAsyncScope(onProgress, undefined, { remaining, total });
              // An async onProgress that rejects stops the backup as a throw does (its
              // rejection went unhandled and ended the process); once the backup is done,
              // a late one is handled and changes nothing.
              if (result !== null && typeof result === 'object' && typeof (result as PromiseLike<unknown>).then === 'function') {
                (result as PromiseLike<unknown>).then(undefined, stop);
              }
            } catch (err) {
              stop(err);
            }
          },
          fail: () => {},
          end: () => {},
          // A plain close() lets the backup finish: its last report still comes.
          outlivesClose: true,
        });
      }
      const done = this.#requests.start<void>(
        Kind.Backup,
        'object',
        (id, cancellable) => {
          try {
            this.#native.backup(id, destPath, o.pagesPerStep, progressId, cancellable);
          } catch (err) {
            throw fromNativeThrow(err);
          }
        },
        undefined,
        { signals, timeoutMs: 0 },
      );
      if (progressId === undefined) return done;
      const forget = (): void => {
        this.#requests.subscribers.delete(progressId);
      };
      return done.finally(forget).then(() => {
        if (thrown !== undefined) throw thrown.err;
      });
    } catch (err) {
      return rejected(err);
    }
  }

  /**
   * The main database as bytes (a consistent snapshot), copied on a reader thread. The
   * bytes are the file as it would be on disk: an encrypted database's are encrypted with
   * its key and cipher (never plaintext); `Database.deserialize(bytes, { encryptionKey,
   * cipher })` opens them.
   */
  serialize(): Promise<Buffer> {
    try {
      if (this.#closing) throw closedError();
      return this.#requests.start<Buffer>(Kind.Bytes, 'object', (id) => {
        try {
          this.#native.serialize(id, bufferConstants.MAX_LENGTH, false);
        } catch (err) {
          throw fromNativeThrow(err);
        }
      });
    } catch (err) {
      return rejected(err);
    }
  }

  // ---- user-defined functions and extensions ----

  #functionsOf(): Functions {
    if (this.#closing) throw closedError();
    return (this.#functions ??= new Functions(this.#native, this.#requests.intMode));
  }

  /**
   * Registers a scalar SQL function on every connection (open ones before their next
   * query). `fn` runs on this thread, synchronously, while the native thread waits for it.
   */
  function(name: string, fn: ScalarFunction, options?: FunctionOptions): this {
    const f = this.#functionsOf();
    try {
      f.defineScalar(name, fn, options);
    } catch (err) {
      throw fromNativeThrow(err);
    }
    return this;
  }

  /** Registers an aggregate SQL function (a window function when `inverse` is given). */
  aggregate<A = unknown>(name: string, options: AggregateOptions<A>): this {
    const f = this.#functionsOf();
    try {
      f.defineAggregate(name, options as AggregateOptions);
    } catch (err) {
      throw fromNativeThrow(err);
    }
    return this;
  }

  /**
   * Loads a SQLite extension on the writer (rejecting with a SqliteError that names the
   * file if it fails), then on every reader and on connections opened later.
   */
  loadExtension(path: string, entryPoint?: string): Promise<void> {
    try {
      if (this.#closing) throw closedError();
      const p = checkExtensionPath(path, 'loadExtension(): the path');
      if (entryPoint !== undefined && (typeof entryPoint !== 'string' || entryPoint.length === 0)) {
        throw new TypeError('loadExtension(): the entry point must be a non-empty string');
      }
      if (this.#readonlyDb) {
        throw new TypeError(
          'loadExtension() needs the writer, which a read-only database has not; give `extensions` to open() instead',
        );
      }
      if (currentTransaction(this) !== undefined) {
        throw new RangeError('loadExtension() inside a transaction body would wait for that transaction forever; call it after');
      }
      return this.#write<void>(Kind.Done, 'object', (id) => this.#native.loadExtension(id, p, entryPoint));
    } catch (err) {
      return rejected(err);
    }
  }

  // ---- the writer, used directly and by Transaction ----

  #write<T>(
    kind: Kind,
    rowMode: 'object' | 'array',
    send: (id: number, cancellable: boolean) => void,
    stop?: Stop,
    tracker?: RequestTracker,
  ): Promise<T> {
    return this.#requests.start<T>(
      kind,
      rowMode,
      (id, cancellable) => {
        try {
          send(id, cancellable);
        } catch (err) {
          throw fromNativeThrow(err);
        }
      },
      undefined,
      stop,
      tracker,
    );
  }

  /** @internal `txSignals`: the signals of the transactions the call runs in; `tracker`:
   * the transaction that sends it. */
  writerRead(
    tx: number,
    sql: string,
    params: unknown,
    options: unknown,
    format: 0 | 1 | 2 | 3,
    txSignals: readonly AbortSignal[],
    tracker?: RequestTracker,
  ): Promise<unknown> {
    try {
      checkParams(params);
      params = bindable(params);
      const o = resolveCallOptions(options, format !== 2, this.#timeoutMs);
      return this.#write(
        FORMATS[format],
        o.rowMode,
        (id, c) => {
          const packed = packParams(params);
          const ref = this.#sqlRef(sql);
          if (typeof packed === 'string') binding.dbWriterRead(this.#handle, id, tx, ref, PACKED_LAYOUT, format, c, packed);
          else binding.dbWriterRead(this.#handle, id, tx, ref, packed ?? params, format, c);
        },
        stopOf(o, txSignals),
        tracker,
      );
    } catch (err) {
      return rejected(err);
    }
  }

  /** @internal */
  writerExecute(
    tx: number,
    sql: string,
    params: unknown,
    options: unknown,
    txSignals: readonly AbortSignal[],
    tracker?: RequestTracker,
  ): Promise<ExecuteResult> {
    try {
      checkParams(params);
      params = bindable(params);
      const o = resolveCallOptions(options, true, this.#timeoutMs);
      return this.#write(
        Kind.Execute,
        o.rowMode,
        (id, c) => {
          const packed = packParams(params);
          const ref = this.#sqlRef(sql);
          if (typeof packed === 'string') binding.dbExecute(this.#handle, id, tx, ref, PACKED_LAYOUT, c, packed);
          else binding.dbExecute(this.#handle, id, tx, ref, packed ?? params, c);
        },
        stopOf(o, txSignals),
        tracker,
      );
    } catch (err) {
      return rejected(err);
    }
  }

  /** @internal (TransactionHost) */
  get defaultTimeoutMs(): number {
    return this.#timeoutMs;
  }

  /** @internal */
  writerSavepoint(tx: number, op: SavepointOp, depth: number): Promise<void> {
    return this.#write<void>(Kind.Done, 'object', (id) => this.#native.savepoint(id, tx, op, depth));
  }

  /** @internal */
  writerBatch(
    tx: number,
    sql: string,
    paramSets: unknown,
    options: unknown,
    txSignals: readonly AbortSignal[],
    tracker?: RequestTracker,
  ): Promise<{ changes: number }> {
    try {
      checkParamSets(paramSets);
      const stop = stopOf(resolveCallOptions(options, false, this.#timeoutMs), txSignals);
      // Every set is read once, here, before anything is sent: a getter that inserts into
      // `paramSets` while a part is prepared shifts no set into a later part, and one that
      // answers a plain object and then a Map is not asked twice.
      const sets = takeParamSets(paramSets);
      // One batch at a time is sent in parts: one started from a getter read while another's
      // part is prepared goes whole.
      if (sets.length > BATCH_FIRST_PART && !this.#sendingBatch) {
        return this.#write(Kind.Batch, 'object', (id, c) => this.#sendBatchInParts(id, tx, sql, sets, c, stop), stop, tracker);
      }
      // see docs/experiments/005-batch-params.md
      const p = packParamSets(sets);
      if (p === undefined) {
        // Some set is an object: the addon reads the sets.
        return this.#write(Kind.Batch, 'object', (id, c) => this.#native.executeBatch(id, tx, this.#sqlRef(sql), sets, c), stop, tracker);
      }
      try {
        return this.#write(
          Kind.Batch,
          'object',
          (id, c) =>
            this.#native.executeBatchPacked(id, tx, this.#sqlRef(sql), p.setLens, p.tags, p.nums, p.bigs, p.text, p.blobs, c),
          stop,
          tracker,
        );
      } finally {
        // Sent (and copied by the addon) or refused: #write sends at once, or never.
        p.release();
      }
    } catch (err) {
      return rejected(err);
    }
  }

  /**
   * A large batch crosses in parts, all sent now, one after another: the writer runs the
   * first while the next ones are prepared (docs/experiments/060-batch-in-parts.md). It is
   * still one request: one transaction or savepoint, one completion. A value that cannot be
   * bound throws here; the parts already sent are then rolled back, and nothing is committed.
   */
  #sendBatchInParts(
    id: number,
    tx: number,
    sql: string,
    sets: readonly unknown[],
    cancellable: boolean,
    stop: Stop | undefined,
  ): void {
    const native = this.#native;
    // Taken by `takeParamSets`: read once, before anything is sent.
    const n = sets.length;
    // A getter may abort a signal while the parts are sent: the sending stops, the batch is
    // abandoned (it never commits), and the request rejects with the signal's reason
    // (Requests.start).
    const aborted = (): boolean => stop !== undefined && stop.signals.some(signalState.aborted);
    let to = BATCH_FIRST_PART;
    this.#sendingBatch = true;
    let complete = false;
    let opened = false;
    try {
      const first = packParamSets(sets, 0, to);
      try {
        const ref = this.#sqlRef(sql);
        if (first === undefined) native.executeBatch(id, tx, ref, sets, cancellable, to);
        else native.executeBatchPacked(id, tx, ref, first.setLens, first.tags, first.nums, first.bigs, first.text, first.blobs, cancellable, true);
      } finally {
        first?.release();
      }
      opened = true;
      for (let size = BATCH_FIRST_PART * 2; to < n && !aborted(); size = Math.min(size * 2, BATCH_PART_MAX)) {
        const from = to;
        to = Math.min(n, from + size);
        const p = packParamSets(sets, from, to);
        if (p === undefined) {
          native.batchPart(sets, from, to);
          continue;
        }
        try {
          native.batchPartPacked(p.setLens, p.tags, p.nums, p.bigs, p.text, p.blobs);
        } finally {
          p.release();
        }
      }
      if (aborted()) throw new Error('aborted while sent');
      complete = true;
    } finally {
      this.#sendingBatch = false;
      if (opened) native.endBatch(complete);
    }
  }

  // ---- transactions ----

  /**
   * Runs `body` inside a transaction that holds the write queue from BEGIN to COMMIT.
   * Inside the body, calls on `db` route to the transaction; nested calls are savepoints.
   */
  async transaction<R>(body: (tx: Transaction) => Promise<R> | R, options?: TransactionOptions): Promise<R> {
    const outer = currentTransaction(this);
    if (outer !== undefined) return outer.transaction(body, options);
    if (this.#closing) throw closedError();
    if (typeof body !== 'function') throw new TypeError('transaction() takes an async function');
    const { mode, signal } = transactionOptions(options);
    signalState.throwIfAborted(signal);

    // Alone, and with nothing that could want to stop it while BEGIN waits its turn, the body
    // starts at once: its requests queue behind the BEGIN on the writer, which tells a failed
    // BEGIN as their error (docs/experiments/058-silent-begin.md).
    const silent = signal === undefined && this.#running === undefined && this.#begins === 0;
    // Everything that ends the transaction is made before BEGIN is sent: an exception in
    // between (the stack used up, memory) left BEGIN on the writer with nothing to end it,
    // and the writer held for good.
    const txId = this.#newTxId();
    const tx = new Transaction(this, txId, 0, undefined, signal === undefined ? NO_SIGNALS : [signal]);
    // A forced close cancels whichever phase runs (the body, then the wait for its nested
    // bodies), and every later one.
    let cancelled: { reason: unknown } | undefined;
    let cancelPhase: ((reason: unknown) => void) | undefined;
    const cancel = (reason: unknown): void => {
      cancelled ??= { reason };
      cancelPhase?.(reason);
      tx.cancelNested(reason);
    };
    const onCancel = (c: (reason: unknown) => void): void => {
      cancelPhase = c;
      if (cancelled !== undefined) c(cancelled.reason);
    };
    // Made only when a forced close waits for it.
    let ended = false;
    let settledPromise: Promise<void> | undefined;
    let settle: (() => void) | undefined;
    const settled = (): Promise<void> =>
      ended ? Promise.resolve() : (settledPromise ??= new Promise<void>((resolve) => (settle = resolve)));
    const running = { tx, cancel, settled };
    // BEGIN was sent; COMMIT was sent: from then on the writer ends the transaction either way.
    let begun = false;
    let committing = false;
    try {
      if (silent) this.#beginSilently(txId, mode);
      else await this.#beginOnWriter(txId, mode, signal);
      begun = true;
      this.#running = running;
      signalState.throwIfAborted(signal);
      // A forced close may have begun while this transaction waited for the writer.
      if (this.#forceClosing) throw closedError('the database was closed with force before this transaction began');
      const result = await raceBody(() => runInContext(this, tx, () => promiseInContext(body(tx))), signal, onCancel);
      tx.callerEnded();
      // Nested bodies the body started but did not await are part of this transaction.
      // Until none is left: code that ran as the wait ended (a continuation of a nested
      // body) may have started more, which belongs to the transaction as well. Ended right
      // after the last check, nothing can join between the two.
      while (!tx.drainedNow) await raceBody(() => tx.drained(), signal, onCancel);
      tx.end();
      // So are requests it left in flight; one that failed makes it roll back.
      const left = tx.leftInFlight();
      if (left !== undefined) await raceBody(() => left, signal, onCancel);
      tx.throwIfLeftFailed();
      committing = true;
      await this.#write<void>(Kind.Done, 'object', (id) => binding.dbCommit(this.#handle, id, txId));
      return result;
    } catch (err) {
      if (begun && !committing) {
        // On a stack of its own: the error may be that this one was used up.
        await undefined;
        tx.end();
        // The body's error is what the caller must see; a rollback can only fail here when
        // the connection is already gone, which the next request reports.
        await this.#write<void>(Kind.Done, 'object', (id) => binding.dbRollback(this.#handle, id, txId)).catch(() => {});
      }
      throw err;
    } finally {
      if (this.#running?.tx === tx) this.#running = undefined;
      ended = true;
      settle?.();
    }
  }

  /**
   * Begins a transaction and returns its handle: calls on the handle run in it until
   * `commit()` or `rollback()`. For code that cannot wrap its work in a body (query builders'
   * drivers); prefer `transaction(body)`. The transaction holds the writer until it ends:
   * writes on `db` wait for it. `close()` rolls it back; aborting `signal` rolls it back.
   */
  async begin(options?: TransactionOptions): Promise<TransactionHandle> {
    if (this.#closing) throw closedError();
    const current = currentTransaction(this);
    if (current !== undefined) {
      // Code a body left behind (a timer) runs in its context after it ended: like every
      // other call from there, begin() is refused, or its writes would commit on their own.
      if (!current.active) throw transactionEndedError();
      throw new RangeError('begin() inside a transaction body would wait for that transaction forever; use tx.transaction() (a savepoint)');
    }
    const { mode, signal } = transactionOptions(options);
    signalState.throwIfAborted(signal);
    // Made before BEGIN is sent, as in transaction().
    const txId = this.#newTxId();
    const tx = new Transaction(this, txId, 0, undefined, signal === undefined ? NO_SIGNALS : [signal]);
    let settle!: () => void;
    const settled = new Promise<void>((resolve) => (settle = resolve));
    const onAbort = (): void => void handle.abandon(signalState.reason(signal!));
    const handle = new TransactionHandle(tx, {
      finish: (commit) => {
        if (signal !== undefined) signalState.unlisten(signal, onAbort);
        const sent = this.#write<void>(Kind.Done, 'object', (id) =>
          commit ? binding.dbCommit(this.#handle, id, txId) : binding.dbRollback(this.#handle, id, txId),
        );
        return sent.finally(() => {
          if (this.#running?.tx === tx) this.#running = undefined;
          settle();
        });
      },
      savepoint: (op, depth) => this.writerSavepoint(txId, op, depth),
    });
    const running = { tx, cancel: (reason: unknown) => void handle.abandon(reason), settled: () => settled, handle };
    await this.#beginOnWriter(txId, mode, signal);
    this.#running = running;
    // The database may have started closing, or the signal fired, while BEGIN waited.
    if (this.#closing) {
      const err = closedError('the database was closed before this transaction began');
      await handle.abandon(err);
      throw err;
    }
    if (signal !== undefined) {
      if (signalState.aborted(signal)) {
        const reason = signalState.reason(signal);
        await handle.abandon(reason);
        throw reason;
      }
      signalState.listen(signal, onAbort);
    }
    return handle;
  }

  #newTxId(): number {
    const txId = this.#nextTx;
    this.#nextTx = txId >= 0x7fffffff ? 1 : txId + 1;
    return txId;
  }

  /** Sends a BEGIN of transaction `txId` that nobody waits for. */
  #beginSilently(txId: number, mode: TransactionMode): void {
    try {
      binding.dbBegin(this.#handle, 0, txId, MODES[mode], true);
    } catch (err) {
      throw fromNativeThrow(err);
    }
  }

  /** Sends BEGIN of transaction `txId` and waits for the writer. */
  async #beginOnWriter(txId: number, mode: TransactionMode, signal: AbortSignal | undefined): Promise<void> {
    this.#begins++;
    try {
      await this.#beginAndWait(txId, mode, signal);
    } finally {
      this.#begins--;
    }
  }

  async #beginAndWait(txId: number, mode: TransactionMode, signal: AbortSignal | undefined): Promise<void> {
    const begun = this.#write<void>(Kind.Done, 'object', (id) => binding.dbBegin(this.#handle, id, txId, MODES[mode], false));
    if (signal === undefined) {
      await begun;
    } else {
      try {
        await raceBody(() => begun, signal);
      } catch (err) {
        if (signalState.aborted(signal) && err === signalState.reason(signal)) {
          // Aborted while waiting for the writer: the caller hears now; the BEGIN still
          // runs when its turn comes and is rolled back at once. A failure of either can
          // only mean the connection is gone, which the next request reports.
          begun.then(
            () => this.#write<void>(Kind.Done, 'object', (id) => binding.dbRollback(this.#handle, id, txId)).catch(() => {}),
            () => {},
          );
        }
        throw err;
      }
    }
  }

  // ---- live queries ----

  /**
   * A live query: its first emission is the current result, then new rows whenever a
   * committed write changes them. Nothing runs until it is read or subscribed.
   */
  stream<T = Row>(sql: string, params?: Params, options?: StreamOptions): LiveQuery<T> {
    checkSql(sql);
    checkParams(params);
    if (this.#closing) throw closedError();
    // Read now and kept: a live query binds them at every start, the first one later than
    // this call (changing them afterwards changes nothing, as for every other method).
    return new LiveQuery<T>(this.#liveHost, sql, paramsAsOfNow(params), options);
  }

  // ---- prepared statements ----

  /**
   * A prepared statement: `sql` is sent to the addon once; each call of the statement then
   * behaves as the same method of the database given `sql`. Nothing is prepared or checked
   * against the schema until the first call (whose error is the one `sql` would give).
   */
  prepare(sql: string): Statement {
    checkSql(sql);
    if (this.#closing) throw closedError();
    let id: number;
    try {
      id = this.#native.prepareStatement(sql);
    } catch (err) {
      throw fromNativeThrow(err);
    }
    return newStatement(this, sql, id);
  }

  /** @internal Prepares (never runs) `stmt` where its calls run: inside a transaction body on
   * the transaction's connection, otherwise on the writer queue or on a reader. */
  describeStatement(stmt: Statement, onWriter: boolean): Promise<Description> {
    // A Statement goes wherever SQL text goes; `#sqlRef` turns it into its id at the end.
    const tx = currentTransaction(this);
    if (tx !== undefined) return tx.describe(stmt as unknown as string) as Promise<Description>;
    if (this.#closing) return rejected(closedError());
    if (onWriter && !this.#readonlyDb) {
      return this.writerRead(0, stmt as unknown as string, undefined, undefined, 3, NO_SIGNALS) as Promise<Description>;
    }
    return this.#read(stmt as unknown as string, undefined, undefined, 3) as Promise<Description>;
  }

  /** @internal A statement was closed or collected. */
  releaseStatement(id: number): void {
    this.#native.releaseStatement(id);
  }

  // ---- closing ----

  /**
   * Stops taking requests, lets queued work finish (and waits for a running transaction
   * unless `force`), ends every live query, then closes every connection. Idempotent.
   */
  close(options?: CloseOptions): Promise<void> {
    let force = false;
    try {
      if (options !== undefined) {
        const o = ownOptions<CloseOptions>('close', options, ['force']);
        if (o.force !== undefined && typeof o.force !== 'boolean') throw new TypeError('force must be a boolean');
        force = o.force === true;
      }
    } catch (err) {
      return rejected(err);
    }
    // Looked at before a close already under way is returned: that close waits for the
    // running transaction too.
    if (!force && this.#running !== undefined && currentTransaction(this)?.active === true) {
      // close() waits for the running transaction, whose body would be waiting for close():
      // neither could ever end.
      return rejected(
        new RangeError(
          'close() inside a transaction body would wait for that body forever; close after the ' +
            'transaction, or use close({ force: true }) to roll it back',
        ),
      );
    }
    if (this.#closing) {
      // A forced close may follow a plain one that waits behind a statement that never ends.
      if (force) void this.#forceClose();
      return this.#closing;
    }
    this.#closing = (async () => {
      this.#requests.endSubscriptions();
      const closed = this.#requests.start<void>(Kind.Done, 'object', (id) => this.#native.close(id));
      // An explicit transaction has no body that will end it: closing rolls it back.
      const handle = this.#running?.handle;
      if (!force && handle !== undefined) {
        await handle.abandon(closedError('the database was closed: its open transaction (begin()) was rolled back'));
      }
      if (force) await this.#forceClose();
      try {
        await closed;
      } finally {
        // Every connection is closed: another copy of quietsqlite may open the file now.
        this.#releaseFile?.();
      }
      this.#requests.closed();
      this.#texts.clear();
      this.#native.dispose();
      // No connection is left to call them: a closed database kept for its path or
      // `isOpen` no longer keeps its functions, and what they captured, alive.
      this.#functions = undefined;
    })();
    return this.#closing;
  }

  /** `await using db = await Database.open(...)`: closes the database (as close()). */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  /** Interrupts running statements, fails queued requests, and rolls back the running
   * transaction (which rejects and rolls itself back); resolves once it has settled. */
  async #forceClose(): Promise<void> {
    if (this.#forceClosing) return;
    this.#forceClosing = true;
    this.#native.stopAll();
    const running = this.#running;
    if (running !== undefined) {
      running.cancel(closedError('the database was closed with force: the transaction was rolled back'));
      await running.settled();
    }
  }

  /** @internal test hook: `{ groups, reruns }` of the native live-query registry. */
  [Symbol.for('quietsqlite.liveStats')](): { groups: number; reruns: number } {
    const [groups, reruns] = testHooks(this.#native).liveStats();
    return { groups: groups!, reruns: reruns! };
  }

  /** @internal test hook: the process's pool of collected results' buffers. */
  [Symbol.for('quietsqlite.resultPool')](): { kept: number; bytes: number; reusedBySize: number; reusedLargest: number } {
    const [kept, bytes, reusedBySize, reusedLargest] = testHooks(this.#native).resultPoolStats();
    return { kept: kept!, bytes: bytes!, reusedBySize: reusedBySize!, reusedLargest: reusedLargest! };
  }

  /** @internal test hook: how many prepared statements the addon holds. */
  [Symbol.for('quietsqlite.statementCount')](): number {
    return testHooks(this.#native).statementCount();
  }

  /** @internal test hook: a native reader panics; the promise must reject, not crash. */
  [Symbol.for('quietsqlite.panicForTests')](): Promise<void> {
    const hooks = testHooks(this.#native);
    return this.#requests.start<void>(Kind.Done, 'object', (id) => {
      try {
        hooks.panicForTests(id);
      } catch (err) {
        throw fromNativeThrow(err);
      }
    });
  }

  /** @internal test hook: a panic on the JS thread, in an exported method (0) or in the
   * conversion of the next completion (1). */
  [Symbol.for('quietsqlite.panicOnJsThread')](place: 0 | 1): void {
    testHooks(this.#native).panicOnJsThread(place);
  }
}
