// The database files open in this process, and which copy of quietsqlite opened each. Two
// copies (two installs in one node_modules tree, `npm link`) carry two copies of SQLite, and
// SQLite keeps the POSIX locks of a file in its own memory: opened from both on one file,
// neither sees the other's locks, commits are lost, and one's close can delete the WAL the
// other still writes (docs/reliability.md). The list lives on `process`, which every copy of
// this code in the thread shares; a copy is the addon file it loaded (one file loaded twice
// is one library).

import { statSync } from 'node:fs';
import { addonFile, binding } from './native';
import { SqliteError } from './errors';

interface Holder {
  /** The copy (`THIS_COPY` of the copy that opened it) and the addon file it loaded. */
  addon: string;
  addonFile: string;
  count: number;
}

const KEY = Symbol.for('quietsqlite.openFiles');

function openFiles(): Map<string, Holder> {
  const host = process as unknown as Record<symbol, Map<string, Holder> | undefined>;
  return (host[KEY] ??= new Map());
}

/** This copy: the device and inode of its addon file (a hard link to it, or a path through a
 * symbolic link, is the same library), or its path where there are none. */
const THIS_COPY = ((): string => {
  try {
    const { dev, ino } = statSync(addonFile, { bigint: true });
    return ino === 0n ? addonFile : `${dev}:${ino}`;
  } catch {
    return addonFile;
  }
})();

/**
 * Counts the file `path` names as open by this copy, under every key that names it (its
 * directory and name, and the file's own identity once it exists); returns what uncounts it
 * (once), or undefined for `:memory:`. Throws when another copy holds any of those keys:
 * before anything of this copy touches the file, also one that does not exist yet (two
 * copies creating one file at once). Only `close()` uncounts: a Database collected without
 * it keeps its files counted for the life of the process, since its connections close on
 * their threads some time after the collection, and another copy opening the file before
 * they have could have its WAL deleted under it.
 */
export function claimFile(path: string): (() => void) | undefined {
  const keys = binding.databaseFileIdentities(path);
  if (keys.length === 0) return undefined;
  const files = openFiles();
  for (const key of keys) {
    const holder = files.get(key);
    if (holder !== undefined && holder.count > 0 && holder.addon !== THIS_COPY) {
      throw new SqliteError(
        `another copy of quietsqlite in this process has this database file open (its addon is ${holder.addonFile}); ` +
          'two copies of SQLite in one process lose commits on one file: let one copy open it (docs/reliability.md)',
        'SQLITE_MISUSE',
        21,
      );
    }
  }
  for (const key of keys) {
    const holder = files.get(key);
    if (holder === undefined || holder.count === 0) files.set(key, { addon: THIS_COPY, addonFile, count: 1 });
    else holder.count++;
  }
  let claimed = true;
  return () => {
    if (!claimed) return;
    claimed = false;
    for (const key of keys) {
      const h = files.get(key);
      if (h !== undefined && --h.count === 0) files.delete(key);
    }
  };
}
