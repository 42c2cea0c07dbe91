// The writer process of the replication tests: `node writer.mjs <db> <durationMs> <checkpoints>`.
// Commits numbered transactions as fast as it can and prints each number once its commit
// resolved. Every transaction keeps invariants a restore is checked against: log holds
// 1..n without a gap, totals = (n, n(n+1)/2), items holds 20 rows per tenth transaction.
// Transaction 40 changes the schema (a column and an index).
import { Database } from '../../dist/index.mjs';

const [path, durationMs, checkpoints] = process.argv.slice(2);
const db = await Database.open(path, { checkpoints });
// One transaction: a restore taken between separate commits would find `log` without its
// `totals` row.
await db.transaction(async (tx) => {
  await tx.execute('CREATE TABLE IF NOT EXISTS log (seq INTEGER PRIMARY KEY, payload BLOB NOT NULL)');
  await tx.execute('CREATE TABLE IF NOT EXISTS totals (id INTEGER PRIMARY KEY CHECK (id = 1), n INTEGER, sum INTEGER)');
  await tx.execute('INSERT OR IGNORE INTO totals VALUES (1, 0, 0)');
  await tx.execute('CREATE TABLE IF NOT EXISTS items (tx INTEGER, k INTEGER, PRIMARY KEY (tx, k))');
});
const start = ((await db.selectOne('SELECT n FROM totals')).n ?? 0) + 1;
const until = Date.now() + Number(durationMs);
const payload = Buffer.alloc(3000, 7);
for (let i = start; Date.now() < until; i++) {
  await db.transaction(async (tx) => {
    if (i === 40) {
      // Schema changes reach the replica like any other page. In transaction 40 itself, so
      // a restore has the new column exactly when it has transaction 40.
      await tx.execute('ALTER TABLE log ADD COLUMN note TEXT');
      await tx.execute('CREATE INDEX log_note ON log (note)');
    }
    await tx.execute(i >= 40 ? 'INSERT INTO log (seq, payload, note) VALUES (?, ?, ?)' : 'INSERT INTO log (seq, payload) VALUES (?, ?)',
      i >= 40 ? [i, payload, `n${i % 97}`] : [i, payload]);
    await tx.execute('UPDATE totals SET n = n + 1, sum = sum + ?', [i]);
    if (i % 10 === 0) {
      await tx.executeBatch('INSERT INTO items (tx, k) VALUES (?, ?)', Array.from({ length: 20 }, (_, k) => [i, k]));
    }
  });
  process.stdout.write(`${i}\n`);
}
await db.close();
