// Promises made per interactive transaction (the T13 body), per empty transaction and per
// awaited autocommit execute, counted with an async_hooks init hook after a warm-up.
// Under Node 20 each promise made inside a body runs AsyncLocalStorage's hooks. Experiment 058.
//   node bench/experiments/tx-promises.mjs <package root>
import { createRequire } from 'node:module';
import { createHook } from 'node:async_hooks';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

const require = createRequire(import.meta.url);
const { Database } = require(resolve(process.argv[2] ?? '.') + '/dist/index.js');
const dir = mkdtempSync(join(tmpdir(), 'qs-txprom-'));
const db = await Database.open(join(dir, 'p.db'));
await db.execute('CREATE TABLE writes(id INTEGER PRIMARY KEY, name TEXT, price REAL)');
const insert = 'INSERT INTO writes(name, price) VALUES (?, ?)';
const body = async (tx) => {
  const r = await tx.execute(insert, ['t', 600]);
  const row = await tx.selectOne('SELECT * FROM writes WHERE id = ?', [r.lastInsertRowid]);
  if (row.price > 500) await tx.execute('DELETE FROM writes WHERE id = ?', [row.id]);
};
const empty = async () => {};
for (let i = 0; i < 100; i++) await db.transaction(body);
let made = 0;
const hook = createHook({
  init(_id, type) {
    if (type === 'PROMISE') made++;
  },
}).enable();
const per = async (n, fn) => {
  made = 0;
  for (let i = 0; i < n; i++) await fn();
  return (made / n).toFixed(1);
};
const interactive = await per(1000, () => db.transaction(body));
const bare = await per(1000, () => db.transaction(empty));
const execute = await per(1000, () => db.execute(insert, ['x', 1]));
hook.disable();
console.log(`promises per interactive transaction ${interactive}, per empty transaction ${bare}, per awaited execute ${execute}`);
await db.close();
rmSync(dir, { recursive: true, force: true });
