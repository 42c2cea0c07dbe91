// SQLite's compile options (issue 13): each feature quietsqlite promises works through the
// public API, and `PRAGMA compile_options` reports every option of the one list the build
// reads (crates/sqlite/compile-options.txt), so a dependency update that drops one fails here.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { openMemory, openTemp } from './fixtures/helpers.mjs';

const LIST = new URL('../crates/sqlite/compile-options.txt', import.meta.url);

/** The list's sections, each as `PRAGMA compile_options` spells its entries. */
function listSections() {
  const sections = {};
  let section = null;
  for (const raw of readFileSync(LIST, 'utf8').split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    const header = /^\[(\w+)\]$/.exec(line);
    if (header) {
      section = sections[header[1]] ??= [];
      continue;
    }
    assert.ok(section, `${line} comes before any section`);
    section.push(line.replace(/^SQLITE_/, ''));
  }
  return sections;
}

test('PRAGMA compile_options reports every option of crates/sqlite/compile-options.txt', async (t) => {
  const db = await openMemory(t);
  const reported = (await db.select('PRAGMA compile_options')).map((r) => r.compile_options);
  const { options, defaults } = listSections();
  assert.ok(options.length >= 20, `the list has its options (${options.length})`);
  // SQLite prints some options defined as 1 without their value (DEFAULT_FOREIGN_KEYS) and
  // others with it (THREADSAFE=1), so NAME and NAME=1 count as the same; any other value
  // must match exactly.
  const norm = (opt) => opt.replace(/=1$/, '');
  const have = new Set(reported.map(norm));
  const missing = options.filter((opt) => !have.has(norm(opt)));
  assert.deepStrictEqual(missing, [], `promised but not compiled in; reported: ${reported.join(' ')}`);
  // Nothing else switched on, off or to another value (a dependency changing a default);
  // the defaults are recorded as Linux reports them.
  if (process.platform === 'linux') {
    const listed = new Set([...options, ...defaults].map(norm));
    const unlisted = reported.filter((opt) => !opt.startsWith('COMPILER=') && !listed.has(norm(opt)));
    assert.deepStrictEqual(unlisted, [], 'reported but in neither [options] nor [defaults]');
  }
});

test('DELETE ... ORDER BY ... LIMIT deletes only the first rows in that order', async (t) => {
  const db = await openMemory(t);
  await db.execute('CREATE TABLE q(id INTEGER PRIMARY KEY, at INTEGER)');
  await db.executeBatch('INSERT INTO q VALUES (?, ?)', [[1, 30], [2, 10], [3, 20], [4, 40]]);
  const r = await db.execute('DELETE FROM q ORDER BY at LIMIT 2');
  assert.equal(r.changes, 2);
  assert.deepStrictEqual(await db.select('SELECT id FROM q ORDER BY id'), [{ id: 1 }, { id: 4 }]);
  // LIMIT with OFFSET and without ORDER BY parse too.
  assert.equal((await db.execute('DELETE FROM q WHERE id > ? LIMIT 1 OFFSET 0', [0])).changes, 1);
});

test('UPDATE ... ORDER BY ... LIMIT updates only the first rows in that order', async (t) => {
  const db = await openMemory(t);
  await db.execute('CREATE TABLE q(id INTEGER PRIMARY KEY, at INTEGER, done INTEGER DEFAULT 0)');
  await db.executeBatch('INSERT INTO q(id, at) VALUES (?, ?)', [[1, 30], [2, 10], [3, 20], [4, 40]]);
  const r = await db.execute('UPDATE q SET done = 1 ORDER BY at DESC LIMIT ?', [2]);
  assert.equal(r.changes, 2);
  assert.deepStrictEqual(await db.select('SELECT id FROM q WHERE done ORDER BY id'), [{ id: 1 }, { id: 4 }]);
});

test('FTS4 MATCH with the parenthesis (enhanced query) syntax; FTS5 too', async (t) => {
  const db = await openMemory(t);
  await db.execute('CREATE VIRTUAL TABLE docs USING fts4(body)');
  await db.executeBatch('INSERT INTO docs(body) VALUES (?)', [
    ['quiet sqlite on threads'],
    ['loud sqlite on the main thread'],
    ['quiet library without sqlite'],
  ]);
  const rows = await db.select(
    "SELECT docid FROM docs WHERE docs MATCH '(quiet OR loud) AND threads' ORDER BY docid",
  );
  assert.deepStrictEqual(rows, [{ docid: 1 }]);
  const notRows = await db.select("SELECT docid FROM docs WHERE docs MATCH 'sqlite NOT loud' ORDER BY docid");
  assert.deepStrictEqual(notRows, [{ docid: 1 }, { docid: 3 }]);
  await db.execute('CREATE VIRTUAL TABLE d5 USING fts5(body)');
  await db.execute("INSERT INTO d5 VALUES ('quiet sqlite')");
  assert.deepStrictEqual(await db.select("SELECT body FROM d5 WHERE d5 MATCH 'qui*'"), [{ body: 'quiet sqlite' }]);
});

test('R*Tree range query', async (t) => {
  const db = await openMemory(t);
  await db.execute('CREATE VIRTUAL TABLE boxes USING rtree(id, minX, maxX, minY, maxY)');
  await db.executeBatch('INSERT INTO boxes VALUES (?, ?, ?, ?, ?)', [
    [1, 0, 10, 0, 10],
    [2, 5, 15, 5, 15],
    [3, 20, 30, 20, 30],
  ]);
  const rows = await db.select(
    'SELECT id FROM boxes WHERE maxX >= ? AND minX <= ? AND maxY >= ? AND minY <= ? ORDER BY id',
    [8, 12, 8, 12],
  );
  assert.deepStrictEqual(rows, [{ id: 1 }, { id: 2 }]);
});

test('Geopoly containment', async (t) => {
  const db = await openMemory(t);
  await db.execute('CREATE VIRTUAL TABLE shapes USING geopoly(name)');
  await db.executeBatch('INSERT INTO shapes(_shape, name) VALUES (?, ?)', [
    ['[[0,0],[10,0],[10,10],[0,10],[0,0]]', 'square'],
    ['[[20,20],[30,20],[25,30],[20,20]]', 'triangle'],
  ]);
  const rows = await db.select('SELECT name FROM shapes WHERE geopoly_contains_point(_shape, ?, ?)', [5, 5]);
  assert.deepStrictEqual(rows, [{ name: 'square' }]);
  const inside = await db.select(
    "SELECT name FROM shapes WHERE geopoly_within(_shape, '[[-1,-1],[11,-1],[11,11],[-1,11],[-1,-1]]')",
  );
  assert.deepStrictEqual(inside, [{ name: 'square' }]);
});

test('SELECT * FROM dbstat lists the pages of each table', async (t) => {
  const db = await openTemp(t);
  await db.execute('CREATE TABLE big(x)');
  await db.executeBatch('INSERT INTO big VALUES (?)', Array.from({ length: 200 }, (_, i) => ['x'.repeat(100) + i]));
  const rows = await db.select('SELECT * FROM dbstat');
  const big = rows.filter((r) => r.name === 'big');
  assert.ok(big.length > 1, `table big spans several pages (${big.length})`);
  for (const key of ['name', 'path', 'pageno', 'pagetype', 'ncell', 'payload', 'pgsize']) {
    assert.ok(key in big[0], `dbstat row has ${key}`);
  }
});

test('percentile, median and the math functions', async (t) => {
  const db = await openMemory(t);
  await db.execute('CREATE TABLE v(x REAL)');
  await db.executeBatch('INSERT INTO v VALUES (?)', [[1], [2], [3], [4], [5]]);
  const [row] = await db.select(
    'SELECT percentile(x, 25) AS p25, median(x) AS med, percentile_cont(x, 0.5) AS cont, sqrt(16) AS root FROM v',
  );
  assert.deepStrictEqual(row, { p25: 2, med: 3, cont: 3, root: 4 });
});

test('soundex', async (t) => {
  const db = await openMemory(t);
  const [row] = await db.select("SELECT soundex('Robert') AS a, soundex('Rupert') AS b, soundex('Tymczak') AS c");
  assert.deepStrictEqual(row, { a: 'R163', b: 'R163', c: 'T522' });
});
