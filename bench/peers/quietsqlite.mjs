// quietsqlite: this project. Imported from the built package (dist/). Until the build exists
// the peer reports itself unavailable; `transaction` and `stream` are detected at run time,
// so suites using them show "n/a" until the API lands and just work afterwards.
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { NotAvailable } from '../lib/common.mjs';

const entry = fileURLToPath(new URL('../../dist/index.mjs', import.meta.url));
const pkgJson = fileURLToPath(new URL('../../package.json', import.meta.url));
let Database;

export const name = 'quietsqlite';
export const sync = false;

export async function load() {
  if (!existsSync(entry)) throw new NotAvailable('not built (dist/index.mjs missing: run `npm run build`)');
  const mod = await import(pathToFileURL(entry).href);
  Database = mod.Database ?? mod.default?.Database ?? mod.default;
  if (typeof Database?.open !== 'function') throw new NotAvailable('dist/index.mjs has no Database.open');
  return { version: JSON.parse(readFileSync(pkgJson, 'utf8')).version, sqlite: await sqliteVersion() };
}

async function sqliteVersion() {
  try {
    const db = await Database.open(':memory:');
    const v = (await db.selectOne('SELECT sqlite_version() AS v'))?.v;
    await db.close();
    return v ?? '?';
  } catch {
    return '?';
  }
}

// Empty parameter lists are sent as "no parameters" (the API's optional argument).
const P = (p) => (p && p.length ? p : undefined);

export async function open(path, options = {}) {
  // Same pragmas as every peer, on every connection (writer and readers). WAL is also
  // persistent in the seeded file.
  const openOptions = { pragmas: { journal_mode: 'WAL', synchronous: 'NORMAL' } };
  if (options.readers) openOptions.readers = options.readers;
  if (options.encryptionKey) openOptions.encryptionKey = options.encryptionKey;
  if (options.inlineReads) openOptions.inlineReads = options.inlineReads;
  const db = await Database.open(path, openOptions);
  // Read back on the writer (select() refuses PRAGMA journal_mode as not read-only).
  const pragma = async (p) => {
    try {
      const row = (await db.execute(`PRAGMA ${p}`)).rows?.[0];
      return row ? Object.values(row)[0] : '?';
    } catch {
      return '?';
    }
  };
  const prepare = (sql) => ({
    sql,
    all: (p) => db.select(sql, P(p)),
    get: (p) => db.selectOne(sql, P(p)),
    run: (p) => db.execute(sql, P(p)),
    iterate: (p) => db.iterate(sql, P(p)),
  });
  const wrapTx = (t) => ({
    run: (h, p) => t.execute(h.sql, P(p)),
    get: (h, p) => t.selectOne(h.sql, P(p)),
    batch: (h, rows) => {
      if (typeof t.executeBatch !== 'function') throw new NotAvailable('tx.executeBatch not implemented yet');
      return t.executeBatch(h.sql, rows);
    },
  });
  return {
    info: { pragmas: { journal_mode: await pragma('journal_mode'), synchronous: await pragma('synchronous') } },
    exec: (sql) => db.execute(sql), // without parameters execute() runs a whole script
    prepare,
    lanes: (sql, n) => Array.from({ length: n }, () => prepare(sql)),
    statement(sql) {
      if (typeof db.prepare !== 'function') throw new NotAvailable('db.prepare not implemented yet');
      const s = db.prepare(sql);
      return { sql, all: (p) => s.select(P(p)), get: (p) => s.selectOne(P(p)), run: (p) => s.execute(P(p)) };
    },
    json: (h, p) => db.selectBytes(h.sql, P(p)),
    insertBatch: (h, rows) => db.executeBatch(h.sql, rows),
    transaction(fn) {
      if (typeof db.transaction !== 'function') throw new NotAvailable('db.transaction not implemented yet');
      return db.transaction((t) => fn(wrapTx(t)));
    },
    stream(sql, params, onRows, onError) {
      if (typeof db.stream !== 'function') throw new NotAvailable('db.stream not implemented yet');
      const live = db.stream(sql, P(params));
      const unsub = live.subscribe(onRows, onError);
      return () => {
        if (typeof unsub === 'function') unsub();
        else if (typeof unsub?.unsubscribe === 'function') unsub.unsubscribe();
        else live.close?.();
      };
    },
    // A new database beside this one (the encryption suite compares two of them).
    sibling: (suffix, extra = {}) => open(`${path}${suffix}`, { ...options, ...extra }),
    // The same database opened again with other options (suite 1's inline-read cases).
    reopen: (extra) => open(path, { ...options, ...extra }),
    fn: (name, f) => db.function(name, f),
    close: () => db.close(),
  };
}
