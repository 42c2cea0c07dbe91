// quickstart: create a database, write, read, and watch a live query update itself.
// Run with `npm start` (after `npm install`).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Database } from '../dist/index.mjs';

const dir = mkdtempSync(join(tmpdir(), 'quietsqlite-quickstart-'));
const path = join(dir, 'todos.db');
const db = await Database.open(path);
console.log(`opened ${db.path}`);

await db.execute('CREATE TABLE todos(id INTEGER PRIMARY KEY, title TEXT NOT NULL, done INTEGER NOT NULL DEFAULT 0)');
console.log('created table todos');

const { changes } = await db.executeBatch('INSERT INTO todos(title) VALUES (?)', [['buy milk'], ['write docs'], ['ship it']]);
console.log(`inserted ${changes} todos in one transaction`);

// A live query: the first emission is the current result, then one per committed change.
const open = db.stream('SELECT id, title FROM todos WHERE done = 0 ORDER BY id');
const emissions = [];
const unsubscribe = open.subscribe((rows) => {
  emissions.push(rows.length);
  console.log(`live: ${rows.length} open todo(s): ${rows.map((r) => r.title).join(', ')}`);
});
await new Promise((resolve) => setTimeout(resolve, 50));

const { changes: done } = await db.execute('UPDATE todos SET done = 1 WHERE title = ?', ['buy milk']);
console.log(`marked ${done} todo done`);

await db.transaction(async (tx) => {
  await tx.execute('INSERT INTO todos(title) VALUES (?)', ['celebrate']);
  const [{ n }] = await tx.select('SELECT count(*) AS n FROM todos');
  console.log(`inside a transaction: ${n} todos (the live query has not seen it yet)`);
});
await new Promise((resolve) => setTimeout(resolve, 50));

const rows = await db.select('SELECT id, title, done FROM todos ORDER BY id');
console.log('all todos:');
console.table(rows);
console.log('as JSON built natively:', (await db.selectBytes('SELECT count(*) AS total FROM todos')).toString());

unsubscribe();
await db.close();
rmSync(dir, { recursive: true, force: true });
console.log(`live query emitted ${emissions.length} times; closed the database`);
