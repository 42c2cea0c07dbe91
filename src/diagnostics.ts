// db.diagnostics(): what the database is doing and how big it is. The counts come from
// atomics read when it is called; the file's numbers from a reader (queued like a read, so
// it never waits for the writer). See docs/api.md.

import type { Cipher } from './options';

export interface LiveQueryDiagnostics {
  /** Distinct live queries (identical sql + params share one). */
  groups: number;
  /** Subscribed streams (iterators and callbacks). */
  subscribers: number;
  /** Runs started since open: each live query's first run and every re-run. */
  reruns: number;
  /** Re-runs whose rows hashed the same as before, so nothing was sent. */
  skippedByHash: number;
}

export interface Diagnostics {
  /** The bundled SQLite's version, e.g. '3.54.0'. */
  sqliteVersion: string;
  /** The cipher when the database is encrypted, else null. The key never appears. */
  cipher: Cipher | null;
  /** Reader threads, as opened (`readers`), not counting the spare. */
  readers: number;
  /** Readers running something (a read, an open iterator, a live-query re-run), the spare included. */
  readersBusy: number;
  /** Reads (and live-query re-runs) waiting for a reader. */
  queuedReads: number;
  /** Requests waiting for the writer. */
  queuedWrites: number;
  /** A transaction holds the writer. */
  inTransaction: boolean;
  pageSize: number;
  pageCount: number;
  freelistCount: number;
  /** Size of the -wal file in bytes (0 when there is none). */
  walBytes: number;
  /** Page cache, prepared statements and schema of the reader connection that measured,
   * in bytes (each connection has its own: about `readers` + 2 times this in all: the readers, the spare and the writer). */
  cacheBytes: number;
  statementBytes: number;
  schemaBytes: number;
  /** Reads answered on the JavaScript thread (`inlineReads`), and reads that went over the
   * inline budget and ran on a reader (both 0 when `inlineReads` is off). */
  inlineReads: number;
  inlineFallbacks: number;
  liveQueries: LiveQueryDiagnostics;
}

/** The native part, before the JS layer adds what it knows itself. */
export type NativeDiagnostics = Omit<Diagnostics, 'cipher' | 'inTransaction'>;
