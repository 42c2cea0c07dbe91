// The database files open in this process, and which copy of quietsqlite opened each. Two
// copies (two installs in one node_modules tree, `npm link`) carry two copies of SQLite, and
// SQLite keeps the POSIX locks of a file in its own memory: opened from both on one file,
// neither sees the other's locks, commits are lost, and one's close can delete the WAL the
// other still writes (docs/reliability.md). The list lives on `process`, which every copy of
// this code in the thread shares; a copy is the addon file it loaded (one file loaded twice
// is one library).

import { addonFile, binding } from './native';
import { SqliteError } from './errors';

interface Holder {
  addon: string;
  count: number;
}

const KEY = Symbol.for('quietsqlite.openFiles');

function openFiles(): Map<string, Holder> {
  const host = process as unknown as Record<symbol, Map<string, Holder> | undefined>;
  return (host[KEY] ??= new Map());
}

/**
 * Counts the file `path` names as open by this copy; returns what uncounts it (once), or
 * undefined for a database with no file yet (`:memory:`, a file `open` will create). Throws
 * when another copy has the file open: before anything of this copy touches it.
 */
export function claimFile(path: string): (() => void) | undefined {
  const identity = binding.databaseFileIdentity(path);
  if (identity === null) return undefined;
  const files = openFiles();
  const holder = files.get(identity);
  if (holder !== undefined && holder.count > 0 && holder.addon !== addonFile) {
    throw new SqliteError(
      `another copy of quietsqlite in this process has this database file open (its addon is ${holder.addon}); ` +
        'two copies of SQLite in one process lose commits on one file: let one copy open it (docs/reliability.md)',
      'SQLITE_MISUSE',
      21,
    );
  }
  if (holder === undefined || holder.count === 0) files.set(identity, { addon: addonFile, count: 1 });
  else holder.count++;
  let claimed = true;
  return () => {
    if (!claimed) return;
    claimed = false;
    const h = files.get(identity);
    if (h !== undefined && --h.count === 0) files.delete(identity);
  };
}
