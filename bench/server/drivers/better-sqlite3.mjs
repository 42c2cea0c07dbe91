// better-sqlite3: the fastest synchronous driver; every query runs on the event loop.
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);

export async function open(path) {
  const Database = require('better-sqlite3');
  const db = new Database(path);
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  const point = db.prepare('SELECT * FROM items WHERE id = ?');
  const list = db.prepare('SELECT * FROM items ORDER BY id LIMIT ?');
  const insert = db.prepare('INSERT INTO items(name, category, price, qty, note) VALUES (?, ?, ?, ?, ?)');
  return {
    version: `better-sqlite3 ${require('better-sqlite3/package.json').version}`,
    getItem: (id) => point.get(id),
    // A synchronous driver has no JSON path of its own: rows, then JSON.stringify.
    listJson: (limit) => JSON.stringify(list.all(limit)),
    insertItem: (it) => Number(insert.run(it.name, it.category, it.price, it.qty, it.note).lastInsertRowid),
    close: () => db.close(),
  };
}
