// quietsqlite: queries run on native reader/writer threads; the large read is written as
// JSON by the reader (selectBytes), so the event loop only sends the bytes.
import { readFileSync } from 'node:fs';

export async function open(path) {
  const { Database } = await import('../../../dist/index.mjs');
  // Open options to compare (e.g. '{"readers":4}' or '{"inlineReads":true}'); defaults otherwise.
  const options = process.env.QUIETSQLITE_OPEN_OPTIONS ? JSON.parse(process.env.QUIETSQLITE_OPEN_OPTIONS) : undefined;
  const db = await Database.open(path, options);
  const pkg = JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8'));
  return {
    version: `quietsqlite ${pkg.version} (node ${process.version})${options ? ` opened with ${JSON.stringify(options)}` : ''}`,
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
