// Options of backup(): validated here; the copy itself runs natively (crates/core/src/backup.rs).

import { ownOptions } from './options';
import { checkSignal } from './signals';

/** How far a backup is: pages left to copy and pages in all. */
export interface BackupProgress {
  remaining: number;
  total: number;
}

export interface BackupOptions {
  /** Pages copied per step, a positive integer; default 100. Between steps the backup looks
   * for cancellation and may report progress. */
  pagesPerStep?: number | undefined;
  /** Called on the JavaScript thread as the copy goes on: at most every 50 ms, and once at
   * the end with `remaining: 0`. An exception it throws stops the backup, which rejects
   * with it. */
  onProgress?: ((progress: BackupProgress) => void) | undefined;
  /** Stops the backup: it rejects with the signal's reason and nothing is left at
   * `destPath` (an existing file there stays as it was). */
  signal?: AbortSignal | undefined;
}

export interface ResolvedBackupOptions {
  pagesPerStep: number;
  onProgress: ((progress: BackupProgress) => void) | undefined;
  signal: AbortSignal | undefined;
}

export const DEFAULT_PAGES_PER_STEP = 100;

export function checkDestination(destPath: unknown): asserts destPath is string {
  if (typeof destPath !== 'string' || destPath.length === 0) {
    throw new TypeError('backup() takes the destination path, a non-empty string');
  }
  if (destPath.includes('\0')) throw new TypeError('the backup destination path contains a NUL character');
  if (destPath === ':memory:' || destPath.startsWith('file:')) {
    throw new TypeError("the backup destination must be a file path (not ':memory:' or a file: URI)");
  }
}

export function resolveBackupOptions(options: unknown): ResolvedBackupOptions {
  if (options === undefined) return { pagesPerStep: DEFAULT_PAGES_PER_STEP, onProgress: undefined, signal: undefined };
  if (options === null || typeof options !== 'object') throw new TypeError('backup options must be an object');
  const o = ownOptions<BackupOptions>('backup', options, ['pagesPerStep', 'onProgress', 'signal']);
  let pagesPerStep = DEFAULT_PAGES_PER_STEP;
  if (o.pagesPerStep !== undefined) {
    if (typeof o.pagesPerStep !== 'number') throw new TypeError('pagesPerStep must be a number');
    if (!Number.isInteger(o.pagesPerStep) || o.pagesPerStep < 1 || o.pagesPerStep > 0x7fffffff) {
      throw new RangeError('pagesPerStep must be between 1 and 2147483647');
    }
    pagesPerStep = o.pagesPerStep;
  }
  if (o.onProgress !== undefined && typeof o.onProgress !== 'function') {
    throw new TypeError('onProgress must be a function');
  }
  return { pagesPerStep, onProgress: o.onProgress, signal: checkSignal(o.signal) };
}
