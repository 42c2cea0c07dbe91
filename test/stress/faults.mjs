// Faults: disk full, corrupt and foreign files, a file deleted or truncated while open,
// read-only files, and a lock held by another process. Every case checks: failures are
// typed, no crash (this runs in its own process), nothing committed is lost, and the
// database is usable afterwards where the file still exists.
import { spawn } from 'node:child_process';
import { chmodSync, openSync, closeSync, writeSync, readFileSync, statSync, truncateSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Database, SqliteError, describeError, mainIf, removeDir, root, tempDir, typedError, withDeadline } from './common.mjs';

const DEADLINE = 60_000;

/** Runs `fn`; returns { ok, value } or { ok: false, error }, with a deadline (a hang). */
async function attempt(fn) {
  try {
    return { ok: true, value: await withDeadline(Promise.resolve().then(fn), DEADLINE, 'the call') };
  } catch (error) {
    return { ok: false, error };
  }
}

/** A code that names the problem: SQLITE_IOERR_DELETE, not SQLITE_IOERR_7. */
const namedCode = (code) => typeof code === 'string' && /^SQLITE_[A-Z_]+$/.test(code) && !/_\d+$/.test(code);

class Case {
  constructor(name) {
    this.name = name;
    this.failures = [];
    this.notes = [];
  }
  check(cond, message) {
    if (!cond) this.failures.push(`${this.name}: ${message}`);
    return cond;
  }
  /** A failure must be typed; a SqliteError must carry a named code matching `codes`. */
  typed(r, what, codes) {
    if (r.ok) return true;
    if (!this.check(typedError(r.error), `${what}: untyped ${describeError(r.error)}`)) return false;
    if (r.error?.hang) return this.check(false, `${what}: ${r.error.message}`);
    if (r.error instanceof SqliteError) {
      this.check(namedCode(r.error.code), `${what}: code ${r.error.code} does not name the problem`);
      if (codes) this.check(codes.test(r.error.code), `${what}: code ${r.error.code}, expected ${codes}`);
    }
    return true;
  }
  expectError(r, what, codes) {
    if (!this.check(!r.ok, `${what}: succeeded, expected an error matching ${codes}`)) return;
    this.typed(r, what, codes);
  }
  expectOk(r, what) {
    this.check(r.ok, `${what}: ${r.ok ? '' : describeError(r.error)}`);
    return r.ok ? r.value : undefined;
  }
}

async function makeDb(dir, name = 'f.db', rows = 200, options) {
  const file = join(dir, name);
  const db = await Database.open(file, options);
  await db.execute('CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT, pad BLOB)');
  await db.executeBatch('INSERT INTO t(v, pad) VALUES (?, ?)', Array.from({ length: rows }, (_, i) => [`row ${i}`, Buffer.alloc(500, i)]));
  return { file, db };
}

async function diskFull(dir) {
  const c = new Case('disk full');
  const { file, db } = await makeDb(dir, 'full.db', 50);
  await db.close();
  const small = await Database.open(file, { pragmas: { max_page_count: 60 } });
  let committed = 50;
  let full;
  for (let i = 0; i < 100 && !full; i++) {
    const r = await attempt(() => small.executeBatch('INSERT INTO t(v, pad) VALUES (?, ?)', Array.from({ length: 20 }, () => ['fill', Buffer.alloc(800, 7)])));
    if (r.ok) committed += 20;
    else full = r;
  }
  if (c.check(full !== undefined, 'never reached SQLITE_FULL')) c.typed(full, 'the batch that filled the file', /^SQLITE_FULL$/);
  const tx = await attempt(() =>
    small.transaction(async (t) => {
      await t.execute("INSERT INTO t(v) VALUES ('in tx')");
      await t.executeBatch('INSERT INTO t(v, pad) VALUES (?, ?)', Array.from({ length: 50 }, () => ['fill', Buffer.alloc(800, 8)]));
    }),
  );
  c.expectError(tx, 'a transaction that fills the file', /^SQLITE_FULL$/);
  const count = await attempt(() => small.selectOne('SELECT count(*) AS n FROM t'));
  c.check(count.ok && count.value.n === committed, `rows after SQLITE_FULL: ${count.value?.n}, expected ${committed} (nothing lost, nothing partial)`);
  c.expectOk(await attempt(() => small.execute("DELETE FROM t WHERE v = 'fill'")), 'delete after SQLITE_FULL');
  c.expectOk(await attempt(() => small.execute("INSERT INTO t(v, pad) VALUES ('after', zeroblob(800))")), 'insert after deleting');
  const integrity = await attempt(() => small.execute('PRAGMA integrity_check').then((r) => r.rows[0]));
  c.check(integrity.ok && integrity.value.integrity_check === 'ok', 'integrity after SQLITE_FULL');
  c.expectOk(await attempt(() => small.close()), 'close');
  c.notes.push(`SQLITE_FULL after ${committed} rows with max_page_count 60`);
  return c;
}

/** Opens `file` and runs a few reads and a write; every failure must be typed. */
async function probe(c, file, expectCodes) {
  const opened = await attempt(() => Database.open(file, { readers: 2 }));
  if (!opened.ok) {
    c.typed(opened, 'open', expectCodes);
    return `open failed: ${opened.error.code ?? opened.error.name}`;
  }
  const db = opened.value;
  const results = [];
  for (const [what, fn] of [
    ['select', () => db.select('SELECT * FROM t')],
    ['count', () => db.select('SELECT count(*), sum(length(pad)) FROM t')],
    ['integrity_check', () => db.execute('PRAGMA integrity_check')],
    ['schema', () => db.select('SELECT * FROM sqlite_schema')],
    ['write', () => db.execute("INSERT INTO t(v) VALUES ('x')")],
    ['selectBytes', () => db.selectBytes('SELECT * FROM t')],
  ]) {
    const r = await attempt(fn);
    c.typed(r, what);
    results.push(`${what}: ${r.ok ? 'ok' : r.error.code ?? r.error.name}`);
  }
  c.expectOk(await attempt(() => db.close()), 'close');
  return results.join(', ');
}

async function corrupt(dir) {
  const c = new Case('corrupt file');
  const { file, db } = await makeDb(dir, 'corrupt.db', 400);
  await db.close();
  const size = statSync(file).size;
  // Garbage over every page but the first (the header still says "SQLite format 3").
  const fd = openSync(file, 'r+');
  let seed = 12345;
  const junk = Buffer.alloc(4096);
  for (let off = 4096; off < size; off += 4096) {
    for (let i = 0; i < junk.length; i++) junk[i] = (seed = (seed * 1103515245 + 12345) >>> 0) >>> 24;
    writeSync(fd, junk, 0, Math.min(4096, size - off), off);
  }
  closeSync(fd);
  c.notes.push(`pages overwritten: ${await probe(c, file, /^SQLITE_(CORRUPT|NOTADB)/)}`);
  const c2 = new Case('corrupt header');
  const { file: f2, db: db2 } = await makeDb(dir, 'header.db', 50);
  await db2.close();
  const fd2 = openSync(f2, 'r+');
  writeSync(fd2, Buffer.alloc(100, 0x5a), 0, 100, 0);
  closeSync(fd2);
  c2.notes.push(await probe(c2, f2, /^SQLITE_(CORRUPT|NOTADB)/));
  return [c, c2];
}

async function foreign(dir) {
  const cases = [];
  const png = Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    Buffer.from('0000000d49484452000000010000000108060000001f15c4890000000d4944415478da63f8cfc0f01f0005000200a5d9c2d30000000049454e44ae426082', 'hex'),
  ]);
  for (const [name, bytes] of [
    ['a PNG file', png],
    ['a text file', Buffer.from('name,value\nalpha,1\nbeta,2\n'.repeat(300))],
    ['a file of zeros beyond the header', Buffer.concat([Buffer.from('SQLite format 3\0'), Buffer.alloc(8192)])],
  ]) {
    const c = new Case(`foreign file: ${name}`);
    const file = join(dir, `foreign-${cases.length}.db`);
    writeFileSync(file, bytes);
    c.notes.push(await probe(c, file, /^SQLITE_(NOTADB|CORRUPT)/));
    c.check(readFileSync(file).equals(bytes) || name.includes('zeros'), 'the foreign file was modified');
    cases.push(c);
  }
  return cases;
}

async function deletedWhileOpen(dir) {
  const c = new Case('file deleted while open');
  const { file, db } = await makeDb(dir, 'deleted.db', 100);
  for (const suffix of ['', '-wal', '-shm']) {
    try {
      unlinkSync(file + suffix);
    } catch {}
  }
  const outcomes = [];
  for (const [what, fn] of [
    ['read', () => db.select('SELECT count(*) AS n FROM t')],
    ['write', () => db.execute("INSERT INTO t(v) VALUES ('after delete')")],
    ['batch', () => db.executeBatch('INSERT INTO t(v) VALUES (?)', [['a'], ['b']])],
    ['transaction', () => db.transaction((tx) => tx.execute("INSERT INTO t(v) VALUES ('tx')"))],
  ]) {
    const r = await attempt(fn);
    c.typed(r, what);
    outcomes.push(`${what}: ${r.ok ? 'ok' : r.error.code ?? r.error.name}`);
  }
  c.expectOk(await attempt(() => db.close()), 'close');
  c.notes.push(outcomes.join(', '));
  return c;
}

async function truncatedWhileOpen(dir) {
  const c = new Case('file truncated while open');
  const { file, db } = await makeDb(dir, 'truncated.db', 300);
  await db.execute('PRAGMA wal_checkpoint(TRUNCATE)');
  truncateSync(file, 4096 * 2);
  const outcomes = [];
  for (const [what, fn] of [
    ['read', () => db.select('SELECT * FROM t')],
    ['write', () => db.execute("INSERT INTO t(v, pad) VALUES ('after truncate', zeroblob(3000))")],
    ['integrity_check', () => db.execute('PRAGMA integrity_check')],
  ]) {
    const r = await attempt(fn);
    c.typed(r, what);
    outcomes.push(`${what}: ${r.ok ? 'ok' : r.error.code ?? r.error.name}`);
  }
  c.expectOk(await attempt(() => db.close()), 'close');
  outcomes.push(`reopen: ${await probe(c, file)}`);
  c.notes.push(outcomes.join(', '));
  return c;
}

async function readOnly(dir) {
  const c = new Case('read-only');
  const { file, db } = await makeDb(dir, 'ro.db', 20);
  await db.close();
  const ro = await Database.open(file, { readonly: true });
  for (const [what, fn] of [
    ['execute', () => ro.execute("INSERT INTO t(v) VALUES ('no')")],
    ['executeBatch', () => ro.executeBatch('INSERT INTO t(v) VALUES (?)', [['no']])],
    ['transaction', () => ro.transaction((tx) => tx.execute("INSERT INTO t(v) VALUES ('no')"))],
  ]) {
    c.expectError(await attempt(fn), `${what} on a readonly database`, /^SQLITE_READONLY/);
  }
  const n = await attempt(() => ro.selectOne('SELECT count(*) AS n FROM t'));
  c.check(n.ok && n.value.n === 20, 'reads work on a readonly database and nothing was written');
  c.expectOk(await attempt(() => ro.close()), 'close');
  // File permissions: root ignores them, so chmod 0444 only proves something for other users.
  chmodSync(file, 0o444);
  const isRoot = typeof process.getuid === 'function' && process.getuid() === 0;
  const rw = await attempt(() => Database.open(file));
  if (rw.ok) {
    const w = await attempt(() => rw.value.execute("INSERT INTO t(v) VALUES ('chmod')"));
    if (isRoot) c.notes.push(`chmod 0444 not testable as root: the write ${w.ok ? 'succeeded' : `failed (${w.error.code})`}`);
    else c.expectError(w, 'a write to a 0444 file', /^SQLITE_(READONLY|CANTOPEN|PERM)/);
    await rw.value.close();
  } else {
    c.typed(rw, 'opening a 0444 file read-write', /^SQLITE_(READONLY|CANTOPEN|PERM)/);
    c.notes.push(`opening a 0444 file: ${rw.error.code ?? rw.error.name}`);
  }
  chmodSync(file, 0o644);
  return c;
}

/** Another process holds BEGIN EXCLUSIVE until told to commit. */
async function busy(dir) {
  const c = new Case('busy from another process');
  const { file, db } = await makeDb(dir, 'busy.db', 10, { busyTimeout: 300 });
  const holder = spawn(
    process.execPath,
    [
      '--input-type=module',
      '-e',
      `import { Database } from ${JSON.stringify(join(root, 'dist/index.mjs'))};
       const db = await Database.open(process.argv[1]);
       let release; const released = new Promise((r) => (release = r));
       process.stdin.once('data', () => release());
       await db.transaction(async (tx) => {
         await tx.execute("INSERT INTO t(v) VALUES ('holder')");
         process.stdout.write('HELD\\n');
         await released;
       }, { mode: 'exclusive' });
       await db.close();
       process.stdout.write('RELEASED\\n');`,
      file,
    ],
    { stdio: ['pipe', 'pipe', 'inherit'] },
  );
  const lines = [];
  const seen = (l) =>
    new Promise((resolve) => {
      const check = () => (lines.includes(l) ? resolve(true) : setTimeout(check, 10));
      check();
    });
  holder.stdout.setEncoding('utf8').on('data', (d) => lines.push(...d.split('\n')));
  const exited = new Promise((r) => holder.on('close', r));
  const held = await withDeadline(seen('HELD'), 30_000, 'the holder').catch(() => false);
  if (c.check(held === true, 'the other process did not take the lock')) {
    const w = await attempt(() => db.execute("INSERT INTO t(v) VALUES ('mine')"));
    c.expectError(w, 'a write while another process holds the lock', /^SQLITE_BUSY/);
    const r = await attempt(() => db.selectOne('SELECT count(*) AS n FROM t'));
    c.check(r.ok && r.value.n === 10, 'reads go on under the other process lock (WAL)');
    holder.stdin.write('go\n');
    await withDeadline(seen('RELEASED'), 30_000, 'the holder release').catch(() => c.check(false, 'the holder did not release'));
    c.expectOk(await attempt(() => db.execute("INSERT INTO t(v) VALUES ('mine')")), 'the write after the release');
    const n = await attempt(() => db.selectOne("SELECT count(*) AS n FROM t WHERE v IN ('holder', 'mine')"));
    c.check(n.ok && n.value.n === 2, `both writes stored after the release (got ${n.value?.n})`);
  }
  holder.kill();
  await exited;
  c.expectOk(await attempt(() => db.close()), 'close');
  return c;
}

export async function run(_params, progress = () => {}) {
  const dir = await tempDir();
  const failures = [];
  const notes = {};
  try {
    for (const fn of [diskFull, corrupt, foreign, deletedWhileOpen, truncatedWhileOpen, readOnly, busy]) {
      let cases;
      try {
        cases = [await fn(dir)].flat();
      } catch (err) {
        failures.push(`${fn.name}: the case itself failed: ${describeError(err)}`);
        continue;
      }
      for (const c of cases) {
        failures.push(...c.failures);
        notes[c.name] = c.notes.join('; ');
        progress(`faults: ${c.name}: ${c.failures.length === 0 ? 'ok' : `${c.failures.length} failures`}`);
      }
    }
  } finally {
    await removeDir(dir);
  }
  return { failures, figures: { cases: Object.keys(notes).length, notes } };
}

mainIf(import.meta, run);
