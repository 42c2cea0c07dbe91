// quietsqlite: reactive SQLite for Node.js that never runs a query on the JavaScript thread.
export { Database, type CloseOptions } from './database';
export { SqliteError, ErrorCodes } from './errors';
export { Transaction, type TransactionMode, type TransactionOptions, type Executor } from './transaction';
export type { OpenOptions, QueryOptions, CallOptions, PragmaValue, Cipher } from './options';
export type { ExecuteResult } from './requests';
export type { Row, SqlValue, IntMode, RowMode } from './rows';
export { LiveQuery, type StreamOptions } from './stream';
export type { FunctionOptions, AggregateOptions } from './functions';
