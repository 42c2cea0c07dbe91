// The public Database: validates and orchestrates; the addon does the work.

import { rmSync } from 'node:fs';
import { closedError, fromNativeThrow } from './errors';
import { binding, type NativeDatabase } from './native';
import {
  checkKey,
  checkKeys,
  checkParams,
  checkPath,
  checkSql,
  checkExtensionPath,
  resolveCallOptions,
  resolveOpenOptions,
  type CallOptions,
  type CallSettings,
  type Cipher,
  type KeyBytes,
  type OpenOptions,
  type QueryOptions,
} from './options';
import { packParamSets } from './params';
import { Kind, Requests, type ExecuteResult, type Stop } from './requests';
import type { IntMode, Row } from './rows';
import {
  currentTransaction,
  NO_SIGNALS,
  raceBody,
  runInContext,
  Transaction,
  transactionOptions,
  type SavepointOp,
  type Executor,
  type TransactionHost,
  type TransactionMode,
  type TransactionOptions,
} from './transaction';
import { LiveQuery, type LiveHost, type StreamOptions } from './stream';
import { Functions, type AggregateOptions, type FunctionOptions } from './functions';

/** Entry points only an addon built with the `test-hooks` feature has (`npm test`). */
interface TestHooks {
  liveStats(): number[];
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

/** Files behind open `:memory:` databases: removed at exit even if close() never ran. */
const temporaryFiles = new Set<string>();
let exitHookInstalled = false;

function removeAtExit(file: string): void {
  temporaryFiles.add(file);
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.once('exit', () => {
    for (const f of temporaryFiles) {
      for (const suffix of ['', '-wal', '-shm']) rmSync(f + suffix, { force: true });
    }
  });
}

export interface CloseOptions {
  /** Roll back a running transaction instead of waiting for its body to finish, interrupt
   * running statements, and reject queued requests instead of running them. */
  force?: boolean;
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
const FORMATS = [Kind.Rows, Kind.FirstRow, Kind.Bytes] as const;

function rejected<T>(err: unknown): Promise<T> {
  return Promise.reject(err);
}

export class Database implements Executor, TransactionHost {
  readonly #native: NativeDatabase;
  readonly #requests: Requests;
  readonly #path: string;
  /** The default `timeoutMs` of every query (0: none). */
  readonly #timeoutMs: number;
  /** The cipher of the database's encryption (or of a later rekey on a plaintext one). */
  readonly #cipher: Cipher;
  readonly #readonly: boolean;
  /** User-defined functions (made at the first registration). */
  #functions: Functions | undefined;
  #closing: Promise<void> | undefined;
  #forceClosing = false;
  #nextTx = 1;
  /** What live queries need from this database. */
  readonly #liveHost: LiveHost;
  /** The transaction holding the writer, with the means to cancel it (forced close). */
  #running: { tx: Transaction; cancel: (reason: unknown) => void; settled: Promise<void> } | undefined;

  private constructor(
    path: string,
    native: NativeDatabase,
    requests: Requests,
    timeoutMs: number,
    cipher: Cipher,
    readonly: boolean,
  ) {
    this.#path = path;
    this.#readonly = readonly;
    this.#cipher = cipher;
    this.#timeoutMs = timeoutMs;
    this.#native = native;
    this.#requests = requests;
    requests.attach(native, this);
    this.#liveHost = { native, requests, isOpen: () => this.#closing === undefined };
  }

  /**
   * Opens (creating if needed) the database at `path` (`:memory:` for an in-memory database
   * shared by all of its connections). Connections open on native threads.
   */
  static async open(path: string, options?: OpenOptions): Promise<Database> {
    checkPath(path);
    const o = resolveOpenOptions(options);
    const requests = new Requests(o.intMode);
    const openId = requests.id();
    let native: NativeDatabase | undefined;
    await requests.start<void>(Kind.Done, 'object', (id) => {
      try {
        native = new binding.NativeDatabase(
          path,
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
      // Until the Database object exists, the requests object itself is what stays pinned.
      requests.attach(native, requests);
    }, openId).catch((err: unknown) => {
      // A failed open leaves no threads behind; release the completion channel.
      native?.dispose();
      throw err;
    });
    const temporary = native!.temporaryPath();
    if (temporary != null) removeAtExit(temporary);
    return new Database(path, native!, requests, o.timeoutMs, o.cipher, o.readonly);
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

  #read(sql: string, params: unknown, options: unknown, format: 0 | 1 | 2): Promise<unknown> {
    const tx = currentTransaction(this);
    if (tx !== undefined) {
      if (format === 0) return tx.select(sql, params, options as QueryOptions);
      if (format === 1) return tx.selectOne(sql, params, options as QueryOptions);
      return tx.selectBytes(sql, params, options as CallOptions);
    }
    try {
      if (this.#closing) throw closedError();
      checkSql(sql);
      checkParams(params);
      const o = resolveCallOptions(options, format !== 2, this.#timeoutMs);
      const stop = stopOf(o, NO_SIGNALS);
      return this.#requests.start(
        FORMATS[format],
        o.rowMode,
        (id, cancellable) => {
          try {
            this.#native.read(id, sql, params, format, cancellable);
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
  select<T = Row>(sql: string, params?: unknown, options?: QueryOptions): Promise<T[]> {
    return this.#read(sql, params, options, 0) as Promise<T[]>;
  }

  /** Like select(), but resolves with the first row only (or undefined). */
  selectOne<T = Row>(sql: string, params?: unknown, options?: QueryOptions): Promise<T | undefined> {
    return this.#read(sql, params, options, 1) as Promise<T | undefined>;
  }

  /** Resolves with the result as UTF-8 JSON (an array of objects), built natively. */
  selectBytes(sql: string, params?: unknown, options?: CallOptions): Promise<Buffer> {
    return this.#read(sql, params, options, 2) as Promise<Buffer>;
  }

  // ---- writes ----

  /** Runs one statement (or, without parameters, several) on the writer thread. */
  execute<T = Row>(sql: string, params?: unknown, options?: CallOptions): Promise<ExecuteResult & { rows: T[] }> {
    const tx = currentTransaction(this);
    if (tx !== undefined) return tx.execute<T>(sql, params, options);
    if (this.#closing) return rejected(closedError());
    return this.writerExecute(0, sql, params, options, NO_SIGNALS) as Promise<ExecuteResult & { rows: T[] }>;
  }

  /** Prepares `sql` once and runs it for every parameter set, in one transaction. */
  executeBatch(sql: string, paramSets: unknown[], options?: CallOptions): Promise<{ changes: number }> {
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
      return this.#write<void>(Kind.Done, 'object', (id) => this.#native.rekey(id, k?.bytes ?? null, k?.raw ?? false, this.#cipher));
    } catch (err) {
      return rejected(err);
    } finally {
      if (key?.owned === true) key.bytes.fill(0);
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
  function(name: string, fn: (...args: never[]) => unknown, options?: FunctionOptions): this {
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
      if (this.#readonly) {
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

  #write<T>(kind: Kind, rowMode: 'object' | 'array', send: (id: number, cancellable: boolean) => void, stop?: Stop): Promise<T> {
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
    );
  }

  /** @internal `txSignals`: the signals of the transactions the call runs in. */
  writerRead(
    tx: number,
    sql: string,
    params: unknown,
    options: unknown,
    format: 0 | 1 | 2,
    txSignals: readonly AbortSignal[],
  ): Promise<unknown> {
    try {
      checkSql(sql);
      checkParams(params);
      const o = resolveCallOptions(options, format !== 2, this.#timeoutMs);
      return this.#write(
        FORMATS[format],
        o.rowMode,
        (id, c) => this.#native.writerRead(id, tx, sql, params, format, c),
        stopOf(o, txSignals),
      );
    } catch (err) {
      return rejected(err);
    }
  }

  /** @internal */
  writerExecute(tx: number, sql: string, params: unknown, options: unknown, txSignals: readonly AbortSignal[]): Promise<ExecuteResult> {
    try {
      checkSql(sql);
      checkParams(params);
      const o = resolveCallOptions(options, false, this.#timeoutMs);
      return this.#write(Kind.Execute, 'object', (id, c) => this.#native.execute(id, tx, sql, params, c), stopOf(o, txSignals));
    } catch (err) {
      return rejected(err);
    }
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
  ): Promise<{ changes: number }> {
    try {
      checkSql(sql);
      if (!Array.isArray(paramSets)) throw new TypeError('paramSets must be an array of arrays or objects');
      const stop = stopOf(resolveCallOptions(options, false, this.#timeoutMs), txSignals);
      // see docs/experiments/005-batch-params.md
      const p = packParamSets(paramSets);
      if (p === undefined) {
        return this.#write(Kind.Batch, 'object', (id, c) => this.#native.executeBatch(id, tx, sql, paramSets, c), stop);
      }
      return this.#write(
        Kind.Batch,
        'object',
        (id, c) => this.#native.executeBatchPacked(id, tx, sql, p.setLens, p.tags, p.nums, p.bigs, p.text, p.blobs, c),
        stop,
      );
    } catch (err) {
      return rejected(err);
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
    signal?.throwIfAborted();

    const txId = this.#nextTx;
    this.#nextTx = txId >= 0x7fffffff ? 1 : txId + 1;
    const begun = this.#write<void>(Kind.Done, 'object', (id) => this.#native.begin(id, txId, MODES[mode]));
    if (signal === undefined) {
      await begun;
    } else {
      try {
        await raceBody(() => begun, signal);
      } catch (err) {
        if (signal.aborted && err === signal.reason) {
          // Aborted while waiting for the writer: the caller hears now; the BEGIN still
          // runs when its turn comes and is rolled back at once. A failure of either can
          // only mean the connection is gone, which the next request reports.
          begun.then(
            () => this.#write<void>(Kind.Done, 'object', (id) => this.#native.rollback(id, txId)).catch(() => {}),
            () => {},
          );
        }
        throw err;
      }
    }
    const tx = new Transaction(this, txId, 0, undefined, signal === undefined ? NO_SIGNALS : [signal]);
    let cancel!: (reason: unknown) => void;
    const cancelled = new Promise<never>((_, reject) => (cancel = reject));
    cancelled.catch(() => {});
    let settle!: () => void;
    const settled = new Promise<void>((resolve) => (settle = resolve));
    this.#running = { tx, cancel, settled };
    try {
      signal?.throwIfAborted();
      // A forced close may have begun while this transaction waited for the writer.
      if (this.#forceClosing) throw closedError('the database was closed with force before this transaction began');
      const result = await raceBody(() => runInContext(this, tx, () => body(tx)), signal, cancelled);
      // Nested bodies the body started but did not await are part of this transaction.
      await raceBody(() => tx.drained(), signal, cancelled);
      tx.end();
      await this.#write<void>(Kind.Done, 'object', (id) => this.#native.commit(id, txId));
      return result;
    } catch (err) {
      if (tx.active) {
        tx.end();
        // The body's error is what the caller must see; a rollback can only fail here when
        // the connection is already gone, which the next request reports.
        await this.#write<void>(Kind.Done, 'object', (id) => this.#native.rollback(id, txId)).catch(() => {});
      }
      throw err;
    } finally {
      if (this.#running?.tx === tx) this.#running = undefined;
      settle();
    }
  }

  // ---- live queries ----

  /**
   * A live query: its first emission is the current result, then new rows whenever a
   * committed write changes them. Nothing runs until it is read or subscribed.
   */
  stream<T = Row>(sql: string, params?: unknown, options?: StreamOptions): LiveQuery<T> {
    checkSql(sql);
    checkParams(params);
    if (this.#closing) throw closedError();
    return new LiveQuery<T>(this.#liveHost, sql, params, options);
  }

  // ---- closing ----

  /**
   * Stops taking requests, lets queued work finish (and waits for a running transaction
   * unless `force`), ends every live query, then closes every connection. Idempotent.
   */
  close(options?: CloseOptions): Promise<void> {
    try {
      if (options !== undefined) checkKeys('close', options, ['force']);
    } catch (err) {
      return rejected(err);
    }
    if (this.#closing) {
      // A forced close may follow a plain one that waits behind a statement that never ends.
      if (options?.force === true) void this.#forceClose();
      return this.#closing;
    }
    const force = options?.force === true;
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
    this.#closing = (async () => {
      this.#requests.endSubscriptions();
      const closed = this.#requests.start<void>(Kind.Done, 'object', (id) => this.#native.close(id));
      if (force) await this.#forceClose();
      await closed;
      const temporary = this.#native.temporaryPath();
      if (temporary != null) temporaryFiles.delete(temporary);
      this.#native.dispose();
    })();
    return this.#closing;
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
      await running.settled;
    }
  }

  /** @internal test hook: `{ groups, reruns }` of the native live-query registry. */
  [Symbol.for('quietsqlite.liveStats')](): { groups: number; reruns: number } {
    const [groups, reruns] = testHooks(this.#native).liveStats();
    return { groups: groups!, reruns: reruns! };
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
