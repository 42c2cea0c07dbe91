// Error classes and the mapping from native error descriptions to them.

/** An error reported by SQLite. */
export class SqliteError extends Error {
  /** The extended result code name, e.g. `SQLITE_CONSTRAINT_UNIQUE`. */
  readonly code: string;
  /** The extended result code number, e.g. 2067. */
  readonly errno: number;
  /** The SQL text that failed, when there is one. */
  readonly sql: string | undefined;

  constructor(message: string, code: string, errno: number, sql?: string) {
    super(message);
    this.code = code;
    this.errno = errno;
    this.sql = sql;
  }

  override get name(): string {
    return 'SqliteError';
  }
}

/** Codes of errors quietsqlite raises itself (not SQLite). */
export const ErrorCodes = {
  /** The database is closed (or closing) and takes no more requests. */
  CLOSED: 'ERR_QUIETSQLITE_CLOSED',
  /** A transaction handle was used after its body ended. */
  TRANSACTION_ENDED: 'ERR_QUIETSQLITE_TRANSACTION_ENDED',
  /** A prepared statement was used after its close(). */
  STATEMENT_CLOSED: 'ERR_QUIETSQLITE_STATEMENT_CLOSED',
  /** A bug in quietsqlite (a native panic caught at the boundary). */
  INTERNAL: 'ERR_QUIETSQLITE_INTERNAL',
} as const;

function coded(message: string, code: string): Error {
  const e = new Error(message) as Error & { code: string };
  e.code = code;
  return e;
}

export function closedError(message = 'the database is closed'): Error {
  return coded(message, ErrorCodes.CLOSED);
}

export function statementClosedError(): Error {
  return coded('this prepared statement is closed; prepare it again with db.prepare()', ErrorCodes.STATEMENT_CLOSED);
}

export function transactionEndedError(): Error {
  return coded(
    'this transaction has already ended (committed or rolled back); neither its handle nor code its body left running can run anything any more',
    ErrorCodes.TRANSACTION_ENDED,
  );
}

/** Errors thrown by user-defined functions, kept until the statement that called the
 * function fails with them (the native side carries only a token). Bounded: a token never
 * claimed (the failure was overtaken by another) does not keep its error forever. */
const thrown = new Map<number, unknown>();
const MAX_KEPT = 256;
/** Errors already claimed, kept for a few more claims: a live query's failure reaches each
 * stream of its group with the same token, and every one of them gets the value thrown.
 * The group's deliveries come one after another, so a handful is enough. */
const claimed = new Map<number, unknown>();
const MAX_CLAIMED = 16;
let nextToken = 1;

/** Keeps `err` for `claimThrown`; returns its token. */
export function keepThrown(err: unknown): number {
  const token = nextToken;
  nextToken = nextToken >= 0x7fffffff ? 1 : nextToken + 1;
  // A token comes round again only after 2^31 throws: what is still kept under it is stale.
  claimed.delete(token);
  thrown.set(token, err);
  if (thrown.size > MAX_KEPT) thrown.delete(thrown.keys().next().value as number);
  return token;
}

/** The error a function threw (exactly that value), or a SqliteError with its message when
 * it is no longer kept. */
export function claimThrown(token: number, message: string): unknown {
  if (thrown.has(token)) {
    const err = thrown.get(token);
    thrown.delete(token);
    claimed.set(token, err);
    if (claimed.size > MAX_CLAIMED) claimed.delete(claimed.keys().next().value as number);
    return err;
  }
  if (claimed.has(token)) return claimed.get(token);
  return new SqliteError(message, 'SQLITE_ERROR', 1);
}

/** `[kind, message, code, errno, sql]` as the binding describes an error. */
export type NativeErrorDetail = [number, string, string | null, number | null, string | null];

export function errorFromNative(d: NativeErrorDetail): Error {
  const [kind, message, code, errno, sql] = d;
  switch (kind) {
    case 1:
      return new SqliteError(message, code ?? 'SQLITE_ERROR', errno ?? 1, sql ?? undefined);
    case 2:
      return new RangeError(message);
    case 3:
      return new TypeError(message);
    case 4:
      return closedError(message);
    case 5:
      return transactionEndedError();
    case 7:
      return claimThrown(errno ?? -1, message) as Error;
    default:
      return coded(message, ErrorCodes.INTERNAL);
  }
}

/** A request whose outcome the addon could not make into a JavaScript value (memory ran out). */
export function lostResultError(): Error {
  return coded('quietsqlite could not hand this result to JavaScript (memory ran out?)', ErrorCodes.INTERNAL);
}

/** A synchronous throw from the binding: either a TypeError/RangeError from parameter
 * conversion (passed through) or a core error carrying its description. */
export function fromNativeThrow(err: unknown): Error {
  const detail = (err as { quietsqlite?: NativeErrorDetail } | null)?.quietsqlite;
  if (detail) return errorFromNative(detail);
  return err instanceof Error ? err : new Error(String(err));
}
