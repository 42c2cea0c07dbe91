// quietsqlite: reactive SQLite for Node.js that never runs a query on the JavaScript thread.
export { Database, type CloseOptions } from './database';
export { SqliteError, ErrorCodes } from './errors';
export { Transaction, type TransactionMode, type TransactionOptions, type Executor } from './transaction';
export type { OpenOptions, QueryOptions, CallOptions, ExecuteOptions, ArrayRowMode, ObjectRowMode, Params, PragmaValue, Cipher } from './options';
export { RowIterator, type IterateOptions } from './iterate';
export type { Diagnostics, LiveQueryDiagnostics } from './diagnostics';
export type { ExecuteResult } from './requests';
export type { BackupOptions, BackupProgress } from './backup';
export type { Row, SqlValue, IntMode, RowMode } from './rows';
export { LiveQuery, type StreamOptions } from './stream';
export { TransactionHandle } from './transaction-handle';
export { Statement, type StatementColumn } from './statement';
export type { FunctionOptions, AggregateOptions, FunctionResult, ScalarFunction, AggregateStep } from './functions';
