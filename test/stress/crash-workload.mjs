// The process crash.mjs kills. It writes, until it is killed, units that must each be all or
// nothing: batches (K rows under one tag) and transactions (rows in several statements,
// a released savepoint, a rolled-back savepoint, sometimes a schema change), every row
// carrying k = the number of rows its unit writes under its tag. After each commit it prints
// `C <tag>`, so the parent knows what must survive.
//
//   node crash-workload.mjs <database file> <seed>
import { Database } from '../../dist/index.mjs';

const [file, seedText] = process.argv.slice(2);
let seed = Number(seedText) >>> 0 || 1;
const rand = (n) => {
  // xorshift32: reproducible per seed
  seed ^= seed << 13;
  seed >>>= 0;
  seed ^= seed >>> 17;
  seed ^= seed << 5;
  seed >>>= 0;
  return seed % n;
};
const db = await Database.open(file, { busyTimeout: 10_000 });
await db.execute(`
  CREATE TABLE IF NOT EXISTS rows(tag INTEGER NOT NULL, k INTEGER NOT NULL, phase TEXT NOT NULL, pad BLOB);
  CREATE INDEX IF NOT EXISTS rows_tag ON rows(tag);
  CREATE TABLE IF NOT EXISTS schema_log(tag INTEGER PRIMARY KEY, name TEXT NOT NULL)`);
const base = Number(process.pid) * 1_000_000;
let next = 0;
const pad = (n) => Buffer.alloc(n, next & 0xff);

async function batch() {
  const tag = base + ++next;
  const k = 1 + rand(300);
  await db.executeBatch(
    "INSERT INTO rows(tag, k, phase, pad) VALUES (?, ?, 'batch', ?)",
    Array.from({ length: k }, () => [tag, k, pad(rand(2000))]),
  );
  process.stdout.write(`C ${tag}\n`);
}

async function transaction() {
  const tag = base + ++next;
  const a = 1 + rand(50);
  const b = rand(20);
  const k = a + b + 1;
  const schema = rand(4) === 0;
  await db.transaction(async (tx) => {
    await tx.executeBatch(
      "INSERT INTO rows(tag, k, phase, pad) VALUES (?, ?, 'tx', ?)",
      Array.from({ length: a }, () => [tag, k, pad(rand(4000))]),
    );
    await tx.transaction(async (sp) => {
      for (let i = 0; i < b; i++) await sp.execute("INSERT INTO rows(tag, k, phase) VALUES (?, ?, 'savepoint')", [tag, k]);
    });
    await tx
      .transaction(async (sp) => {
        await sp.execute("INSERT INTO rows(tag, k, phase, pad) VALUES (?, ?, 'rolledback', ?)", [tag, k, pad(3000)]);
        throw new Error('roll this savepoint back');
      })
      .catch(() => {});
    if (schema) {
      const name = `sc_${tag}`;
      await tx.execute(`CREATE TABLE ${name}(x, y)`);
      await tx.execute(`CREATE INDEX ${name}_x ON ${name}(x)`);
      await tx.execute(`INSERT INTO ${name} VALUES (1, 2)`);
      await tx.execute('INSERT INTO schema_log(tag, name) VALUES (?, ?)', [tag, name]);
      // Drop an older schema unit, in the same transaction.
      const old = await tx.selectOne('SELECT tag, name FROM schema_log WHERE tag <> ? ORDER BY random() LIMIT 1', [tag]);
      if (old && rand(2) === 0) {
        await tx.execute(`DROP TABLE ${old.name}`);
        await tx.execute('DELETE FROM schema_log WHERE tag = ?', [old.tag]);
      }
    }
    await tx.execute("INSERT INTO rows(tag, k, phase) VALUES (?, ?, 'last')", [tag, k]);
  });
  process.stdout.write(`C ${tag}\n`);
}

process.stdout.write('READY\n');
const loop = async (fn) => {
  for (;;) await fn();
};
await Promise.all([loop(batch), loop(transaction), loop(() => (rand(2) ? batch() : transaction()))]);
