// quietsqlite: queries run on native reader/writer threads; the large read is written as
// JSON by the reader (selectBytes), so the event loop only sends the bytes.
import { readFileSync } from 'node:fs';

export async function open(path) {
  const { Database } = await import('../../../dist/index.mjs');
  const db = await Database.open(path);
  const pkg = JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8'));
  return {
    version: `quietsqlite ${pkg.version} (node ${process.version})`,
    getItem: (id) => db.selectOne('SELECT * FROM items WHERE id = ?', [id]),
    listJson: (limit) => db.selectBytes('SELECT * FROM items ORDER BY id LIMIT ?', [limit]),
    insertItem: async (it) =>
      Number(
        (await db.execute('INSERT INTO items(name, category, price, qty, note) VALUES (?, ?, ?, ?, ?)', [
          it.name, it.category, it.price, it.qty, it.note,
        ])).lastInsertRowid,
      ),
    close: () => db.close(),
  };
}
