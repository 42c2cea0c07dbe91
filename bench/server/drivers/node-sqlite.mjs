// node:sqlite (DatabaseSync): Node's built-in synchronous driver (Node >= 22.13; run under 24).
export async function open(path) {
  const { DatabaseSync } = await import('node:sqlite');
  const db = new DatabaseSync(path);
  db.exec('PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;');
  const point = db.prepare('SELECT * FROM items WHERE id = ?');
  const list = db.prepare('SELECT * FROM items ORDER BY id LIMIT ?');
  const insert = db.prepare('INSERT INTO items(name, category, price, qty, note) VALUES (?, ?, ?, ?, ?)');
  return {
    version: `node:sqlite (node ${process.version})`,
    getItem: (id) => point.get(id),
    listJson: (limit) => JSON.stringify(list.all(limit)),
    insertItem: (it) => Number(insert.run(it.name, it.category, it.price, it.qty, it.note).lastInsertRowid),
    close: () => db.close(),
  };
}
