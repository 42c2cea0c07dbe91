// node:sqlite (DatabaseSync): Node's built-in synchronous driver. Needs Node >= 22.13 / 24,
// so the coordinator starts this peer's worker with the Node 24 binary.

let DatabaseSync;

export const name = 'node:sqlite';
export const sync = true;

export async function load() {
  ({ DatabaseSync } = await import('node:sqlite'));
  return { version: `node ${process.version}`, sqlite: process.versions.sqlite ?? new DatabaseSync(':memory:').prepare('SELECT sqlite_version() AS v').get().v };
}

export async function open(path) {
  const db = new DatabaseSync(path);
  db.exec('PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;');
  const prepare = (sql) => {
    const s = db.prepare(sql);
    return { sql, all: (p) => s.all(...p), get: (p) => s.get(...p), run: (p) => s.run(...p), iterate: (p) => s.iterate(...p) };
  };
  // BEGIN/COMMIT around reused statements is the idiomatic transaction here.
  const inTx = (fn) => {
    db.exec('BEGIN');
    try {
      const r = fn();
      db.exec('COMMIT');
      return r;
    } catch (err) {
      try { db.exec('ROLLBACK'); } catch {} // already rolled back by SQLite
      throw err;
    }
  };
  const tx = {
    run: (h, p) => h.run(p),
    get: (h, p) => h.get(p),
    batch: (h, rows) => {
      for (let i = 0; i < rows.length; i++) h.run(rows[i]);
    },
  };
  const pragma = (p) => Object.values(db.prepare(`PRAGMA ${p}`).get())[0];
  return {
    info: { pragmas: { journal_mode: pragma('journal_mode'), synchronous: pragma('synchronous') } },
    exec: (sql) => db.exec(sql),
    prepare,
    json: (h, p) => JSON.stringify(h.all(p)),
    insertBatch: (h, rows) => inTx(() => tx.batch(h, rows)),
    transaction: (fn) => inTx(() => fn(tx)),
    fn: (name, f) => db.function(name, f),
    close: () => db.close(),
  };
}
