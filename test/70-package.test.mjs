// The published packages as a user gets them: `npm run package` (or its tarballs when they are
// newer than every input), both tarballs installed offline into a fresh project with no Rust
// toolchain on PATH, the driver used from ESM, CommonJS and type-checked TypeScript.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync, cpSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const onWindows = process.platform === 'win32';
const OVERRIDE = 'QUIETSQLITE_NATIVE_LIBRARY_PATH';
const TEST_HOOK_NAMES = ['panicForTests', 'panicOnJsThread', 'liveStats'];

/** This machine's napi platform name, worked out here independently of the loader. */
function expectedTriple() {
  if (process.platform === 'linux') {
    const libc = process.report.getReport().header.glibcVersionRuntime ? 'gnu' : 'musl';
    return `linux-${process.arch}-${libc}`;
  }
  return process.platform === 'win32' ? `win32-${process.arch}-msvc` : `${process.platform}-${process.arch}`;
}

/** PATH without any directory holding cargo or rustc, with this Node first. */
function pathWithoutRust() {
  const exe = (n) => (onWindows ? `${n}.exe` : n);
  const dirs = (process.env.PATH ?? '').split(delimiter).filter((d) => d && !existsSync(join(d, exe('cargo'))) && !existsSync(join(d, exe('rustc'))));
  return [dirname(process.execPath), ...dirs].join(delimiter);
}

function newestMtime(p) {
  if (!existsSync(p)) return 0;
  const s = statSync(p);
  if (!s.isDirectory()) return s.mtimeMs;
  return Math.max(s.mtimeMs, ...readdirSync(p).map((n) => newestMtime(join(p, n))));
}

/** The tarballs: reused when .packages/packages.json is newer than every input, else rebuilt. */
function tarballs() {
  const record = join(root, '.packages', 'packages.json');
  const inputs = ['src', 'crates', 'npm', 'docs', 'examples', 'Cargo.toml', 'Cargo.lock', 'package.json', 'README.md', 'LICENSE', 'THIRD_PARTY_NOTICES.md', 'scripts/package.mjs'];
  const fresh = existsSync(record) && statSync(record).mtimeMs > Math.max(...inputs.map((p) => newestMtime(join(root, p))));
  if (!fresh) {
    const r = spawnSync('npm', ['run', 'package'], { cwd: root, encoding: 'utf8', shell: onWindows });
    assert.equal(r.status, 0, `npm run package failed:\n${r.stdout}\n${r.stderr}`);
  }
  const info = JSON.parse(readFileSync(record, 'utf8'));
  assert.ok(existsSync(info.main) && existsSync(info.platform), 'both tarballs exist');
  return info;
}

/** The files of an installed package (npm unpacks the tarball as it is: these are its files). */
function installedFiles(name, dir = join(project, 'node_modules', name), prefix = '') {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? installedFiles(name, join(dir, e.name), `${prefix}${e.name}/`) : [`${prefix}${e.name}`],
  );
}

/** How many section headers of an ELF64 little-endian file have type `type` (2: SHT_SYMTAB). */
function elfSectionsOfType(elf, type) {
  assert.equal(elf.readUInt32BE(0), 0x7f454c46, 'an ELF file');
  const shoff = Number(elf.readBigUInt64LE(0x28));
  const size = elf.readUInt16LE(0x3a);
  const count = elf.readUInt16LE(0x3c);
  let n = 0;
  for (let i = 0; i < count; i++) if (elf.readUInt32LE(shoff + i * size + 4) === type) n++;
  return n;
}

let pkgs;
let project;
let env;

function runIn(cwd, cmd, args, extraEnv = {}) {
  return spawnSync(cmd, args, { cwd, encoding: 'utf8', env: { ...env, ...extraEnv }, shell: onWindows && cmd === 'npm' });
}

before(() => {
  pkgs = tarballs();
  project = mkdtempSync(join(tmpdir(), 'quietsqlite-consumer-'));
  env = { ...process.env };
  for (const k of Object.keys(env)) if (/^path$/i.test(k)) delete env[k]; // Windows spells it Path
  env.PATH = pathWithoutRust();
  delete env[OVERRIDE];
  delete env.npm_config_prefix; // npm run sets it for the repository; the consumer is its own project
  writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'consumer', version: '1.0.0', private: true }));
  const r = runIn(project, 'npm', ['install', '--offline', '--no-audit', '--no-fund', pkgs.main, pkgs.platform]);
  assert.equal(r.status, 0, `npm install failed:\n${r.stdout}\n${r.stderr}`);
});

after(() => {
  if (project) rmSync(project, { recursive: true, force: true });
});

test('the consumer has no Rust toolchain on PATH', () => {
  const r = spawnSync('cargo', ['--version'], { env, encoding: 'utf8' });
  assert.ok(r.error || r.status !== 0, 'cargo must not run with this PATH');
});

test('the main tarball holds dist, types, LICENSE, the notices, README and the docs it links to, and nothing else', () => {
  const files = installedFiles('quietsqlite');
  for (const f of ['package.json', 'LICENSE', 'THIRD_PARTY_NOTICES.md', 'README.md', 'dist/index.js', 'dist/index.mjs', 'dist/index.d.ts', 'native/binding.d.ts']) {
    assert.ok(files.includes(f), `${f} is packed`);
  }
  for (const f of files) {
    assert.match(
      f,
      /^(package\.json|LICENSE|THIRD_PARTY_NOTICES\.md|README\.md|dist\/[^/]+\.(js|mjs|d\.ts)|dist\/(kysely|drizzle)\/[^/]+\.(js|d\.ts)|dist\/esm\/package\.json|dist\/esm\/(kysely|drizzle)\/[^/]+\.(js|d\.ts)|native\/binding\.d\.ts|docs\/.+\.md|examples\/quickstart\.mjs)$/,
      `${f} does not belong in the package`,
    );
  }
  // Every relative link of the README resolves inside the package, except the benchmark
  // material and images, which stay in the repository (docs/decisions.md, "What the npm
  // package carries").
  const readme = readFileSync(join(root, 'README.md'), 'utf8');
  for (const [, target] of readme.matchAll(/\]\(([^)#\s]+)[^)]*\)/g)) {
    if (/^[a-z]+:/.test(target) || target.startsWith('bench/') || target.startsWith('docs/images/')) continue;
    const t = target.replace(/\/$/, '');
    assert.ok(files.some((f) => f === t || f.startsWith(`${t}/`)), `README links ${target}, which is packed`);
  }
  const manifest = JSON.parse(readFileSync(join(project, 'node_modules', 'quietsqlite', 'package.json'), 'utf8'));
  assert.equal(manifest.license, 'MIT');
  assert.equal(manifest.dependencies, undefined, 'no runtime dependencies');
  assert.equal(manifest.scripts, undefined, 'no install-time scripts');
});

test('the platform tarball holds the stripped binary without test hooks, with os/cpu/libc', () => {
  const triple = expectedTriple();
  assert.equal(pkgs.triple, triple);
  const node = `quietsqlite.${triple}.node`;
  assert.deepEqual(installedFiles(`quietsqlite-${triple}`).sort(), ['LICENSE', 'THIRD_PARTY_NOTICES.md', 'README.md', node, 'package.json'].sort());
  const dir = join(project, 'node_modules', `quietsqlite-${triple}`);
  const manifest = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'));
  assert.equal(manifest.main, node);
  assert.deepEqual(manifest.os, [process.platform]);
  assert.deepEqual(manifest.cpu, [process.arch]);
  if (process.platform === 'linux') assert.deepEqual(manifest.libc, [triple.split('-')[2] === 'gnu' ? 'glibc' : 'musl']);
  const main = JSON.parse(readFileSync(join(project, 'node_modules', 'quietsqlite', 'package.json'), 'utf8'));
  assert.equal(main.optionalDependencies[manifest.name], main.version, 'the main package names it at its own version');
  const binary = readFileSync(join(dir, node));
  for (const name of TEST_HOOK_NAMES) assert.ok(!binary.includes(name), `the binary has no test hook ${name}`);
  if (process.platform === 'linux') assert.equal(elfSectionsOfType(binary, 2), 0, 'the binary is stripped (no SHT_SYMTAB section)');
});

test('every platform directory in npm/ is an optional dependency at the same version, and only those', () => {
  const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
  const dirs = readdirSync(join(root, 'npm')).sort();
  assert.equal(dirs.length, pkg.napi.targets.length, 'one npm/ directory per napi target');
  const names = dirs.map((d) => JSON.parse(readFileSync(join(root, 'npm', d, 'package.json'), 'utf8')));
  for (const m of names) assert.equal(m.version, pkg.version, `${m.name} has the main package's version`);
  assert.deepEqual(Object.keys(pkg.optionalDependencies).sort(), names.map((m) => m.name).sort());
  for (const v of Object.values(pkg.optionalDependencies)) assert.equal(v, pkg.version);
});

test('ESM: import from the installed package', () => {
  writeFileSync(join(project, 'esm.mjs'), `
import { Database, SqliteError } from 'quietsqlite';
const db = await Database.open(':memory:');
await db.execute('CREATE TABLE t(a TEXT)');
await db.execute('INSERT INTO t VALUES (?)', ['from esm']);
const rows = await db.select('SELECT a FROM t');
let typed = false;
try { await db.select('SELECT nope FROM t'); } catch (e) { typed = e instanceof SqliteError; }
await db.close();
console.log(JSON.stringify({ rows, typed }));
`);
  const r = runIn(project, process.execPath, ['esm.mjs']);
  assert.equal(r.status, 0, r.stderr);
  assert.deepEqual(JSON.parse(r.stdout), { rows: [{ a: 'from esm' }], typed: true });
});

test('the Kysely and Drizzle adapters load from the installed package, as ESM and as CommonJS', () => {
  // The user installs the query builders; these are this repository's copies (no registry).
  for (const dep of ['kysely', 'drizzle-orm']) {
    cpSync(join(root, 'node_modules', dep), join(project, 'node_modules', dep), { recursive: true, dereference: true });
  }
  writeFileSync(join(project, 'adapters.mjs'), `
import { Database } from 'quietsqlite';
import { QuietsqliteDialect } from 'quietsqlite/kysely';
import { drizzle } from 'quietsqlite/drizzle';
import { Kysely } from 'kysely';
import { sql } from 'drizzle-orm';
const db = await Database.open(':memory:');
await db.execute('CREATE TABLE t(a TEXT)');
const k = new Kysely({ dialect: new QuietsqliteDialect({ database: db }) });
await k.insertInto('t').values({ a: 'kysely' }).execute();
const d = drizzle(db);
await d.run(sql\`INSERT INTO t VALUES ('drizzle')\`);
const rows = await k.selectFrom('t').select('a').orderBy('a').execute();
const all = await d.all(sql\`SELECT a FROM t ORDER BY a\`);
await db.close();
console.log(JSON.stringify({ rows, all }));
`);
  const r = runIn(project, process.execPath, ['adapters.mjs']);
  assert.equal(r.status, 0, r.stderr);
  const both = [{ a: 'drizzle' }, { a: 'kysely' }];
  assert.deepEqual(JSON.parse(r.stdout), { rows: both, all: both });
  writeFileSync(join(project, 'adapters.cjs'), `
const { QuietsqliteDialect } = require('quietsqlite/kysely');
const { drizzle } = require('quietsqlite/drizzle');
const { migrate } = require('quietsqlite/drizzle/migrator');
console.log(JSON.stringify([typeof QuietsqliteDialect, typeof drizzle, typeof migrate]));
`);
  const c = runIn(project, process.execPath, ['adapters.cjs']);
  assert.equal(c.status, 0, c.stderr);
  assert.deepEqual(JSON.parse(c.stdout), ['function', 'function', 'function']);
});

test("TypeScript: the adapters type-check from an ES module, and under the older node10 resolution, against the installed package's declarations", () => {
  // Runs after the test above, which put kysely and drizzle-orm in the project. An `import` of
  // an adapter must get its ES declarations (typed against kysely's ES declarations, as the
  // application's own `import 'kysely'` is), and those must find 'quietsqlite' from inside
  // node_modules: the @ts-expect-error fails if an option's type fell to `any`.
  writeFileSync(join(project, 'adapters-app.mts'), `
import { Database } from 'quietsqlite';
import { Kysely, type Generated } from 'kysely';
import { QuietsqliteDialect } from 'quietsqlite/kysely';
import { drizzle } from 'quietsqlite/drizzle';
import { integer, sqliteTable, text } from 'drizzle-orm/sqlite-core';

interface DB { person: { id: Generated<number>; name: string } }
const users = sqliteTable('users', { id: integer('id').primaryKey(), name: text('name').notNull() });

export async function main(db: Database): Promise<void> {
  const k = new Kysely<DB>({ dialect: new QuietsqliteDialect({ database: db }) });
  const rows = await k.selectFrom('person').select(['id', 'name']).execute();
  const id: number | undefined = rows[0]?.id;
  // @ts-expect-error transactionMode is one of three words
  new QuietsqliteDialect({ database: db, transactionMode: 'weird' });
  const orm = drizzle(db, { schema: { users } });
  const found = await orm.query.users.findFirst();
  const name: string | undefined = found?.name;
  void id, name;
}
`);
  writeFileSync(join(project, 'tsconfig.adapters.json'), JSON.stringify({
    compilerOptions: {
      target: 'ES2022', module: 'nodenext', moduleResolution: 'nodenext', strict: true, noEmit: true,
      skipLibCheck: true, types: ['node'], typeRoots: [join(root, 'node_modules', '@types')],
    },
    files: ['adapters-app.mts'],
  }));
  const tsc = runIn(project, process.execPath, [join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.adapters.json']);
  assert.equal(tsc.status, 0, `tsc failed:\n${tsc.stdout}\n${tsc.stderr}`);
  // The older resolution (`moduleResolution: node`, node10) reads no "exports": the subpaths'
  // declarations are found through "typesVersions".
  writeFileSync(join(project, 'adapters-node10.ts'), `
import { Database } from 'quietsqlite';
import { QuietsqliteDialect } from 'quietsqlite/kysely';
import { drizzle } from 'quietsqlite/drizzle';
import { migrate } from 'quietsqlite/drizzle/migrator';
export function main(db: Database): void {
  // @ts-expect-error transactionMode is one of three words
  new QuietsqliteDialect({ database: db, transactionMode: 'weird' });
  void drizzle(db), migrate;
}
`);
  writeFileSync(join(project, 'tsconfig.node10.json'), JSON.stringify({
    compilerOptions: {
      target: 'ES2022', module: 'commonjs', moduleResolution: 'node', strict: true, noEmit: true,
      skipLibCheck: true, types: ['node'], typeRoots: [join(root, 'node_modules', '@types')],
    },
    files: ['adapters-node10.ts'],
  }));
  const old = runIn(project, process.execPath, [join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.node10.json']);
  assert.equal(old.status, 0, `tsc (node10) failed:\n${old.stdout}\n${old.stderr}`);
});

test('CommonJS: require the installed package', () => {
  writeFileSync(join(project, 'cjs.cjs'), `
const { Database } = require('quietsqlite');
(async () => {
  const db = await Database.open(':memory:');
  const rows = await db.select('SELECT ? AS n', [41 + 1]);
  await db.close();
  console.log(JSON.stringify(rows));
})();
`);
  const r = runIn(project, process.execPath, ['cjs.cjs']);
  assert.equal(r.status, 0, r.stderr);
  assert.deepEqual(JSON.parse(r.stdout), [{ n: 42 }]);
});

test('TypeScript: type-checks against the installed types (tsc from this repository) and runs', () => {
  writeFileSync(join(project, 'app.ts'), `
import { Database, SqliteError, type Row } from 'quietsqlite';

async function main(): Promise<void> {
  const db: Database = await Database.open(':memory:');
  const rows: Row[] = await db.select('SELECT 1 AS one');
  // @ts-expect-error: the SQL must be a string (if the types were any, this line would fail tsc)
  await db.select(42).catch(() => undefined);
  const isError: boolean = new SqliteError('m', 'SQLITE_ERROR', 1) instanceof Error;
  await db.close();
  console.log(JSON.stringify({ rows, isError }));
}
void main();
`);
  writeFileSync(join(project, 'tsconfig.json'), JSON.stringify({
    compilerOptions: {
      target: 'ES2022', module: 'nodenext', moduleResolution: 'nodenext', strict: true, skipLibCheck: false,
      types: ['node'], typeRoots: [join(root, 'node_modules', '@types')], outDir: 'out',
    },
    files: ['app.ts'],
  }));
  const tsc = runIn(project, process.execPath, [join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.json']);
  assert.equal(tsc.status, 0, `tsc failed:\n${tsc.stdout}\n${tsc.stderr}`);
  const r = runIn(project, process.execPath, [join('out', 'app.js')]);
  assert.equal(r.status, 0, r.stderr);
  assert.deepEqual(JSON.parse(r.stdout), { rows: [{ one: 1 }], isError: true });
});

test('without its platform package the loader fails naming the platform and what to do; the override loads a binary', () => {
  const triple = expectedTriple();
  const bare = mkdtempSync(join(tmpdir(), 'quietsqlite-bare-'));
  try {
    mkdirSync(join(bare, 'node_modules'));
    cpSync(join(project, 'node_modules', 'quietsqlite'), join(bare, 'node_modules', 'quietsqlite'), { recursive: true });
    const load = "require('quietsqlite'); console.log('loaded')";
    const failed = runIn(bare, process.execPath, ['-e', load]);
    assert.notEqual(failed.status, 0);
    assert.match(failed.stderr, new RegExp(`no native addon for this platform, ${triple}`));
    assert.match(failed.stderr, new RegExp(`npm install quietsqlite-${triple}@`));
    assert.match(failed.stderr, /no Rust sources here/);
    assert.match(failed.stderr, new RegExp(OVERRIDE));

    const binary = join(project, 'node_modules', `quietsqlite-${triple}`, `quietsqlite.${triple}.node`);
    const overridden = runIn(bare, process.execPath, ['-e', load], { [OVERRIDE]: binary });
    assert.equal(overridden.status, 0, overridden.stderr);
    assert.equal(overridden.stdout.trim(), 'loaded');

    const missing = join(bare, 'nowhere', 'quietsqlite.node');
    const wrong = runIn(bare, process.execPath, ['-e', load], { [OVERRIDE]: missing });
    assert.notEqual(wrong.status, 0);
    assert.ok(wrong.stderr.includes(`could not load the native addon at ${missing}, named by ${OVERRIDE}`), wrong.stderr);
  } finally {
    rmSync(bare, { recursive: true, force: true });
  }
});

test("copied out of the package (as a bundler does), the loader says so and the override still loads", () => {
  // A CommonJS bundle sits in the application: the loader read the application's package.json
  // and spoke of its version; an ES module bundle has no __dirname, and failed with a
  // ReferenceError before it looked at the override.
  const triple = expectedTriple();
  const app = mkdtempSync(join(tmpdir(), 'quietsqlite-bundled-'));
  try {
    writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'my-app', version: '7.7.7' }));
    cpSync(join(project, 'node_modules', 'quietsqlite', 'dist'), join(app, 'out'), { recursive: true });
    const load = "require('./out/index.js'); console.log('loaded')";
    const failed = runIn(app, process.execPath, ['-e', load]);
    assert.notEqual(failed.status, 0);
    assert.match(failed.stderr, /outside the installed package \(a bundler copied it\?\)/);
    assert.match(failed.stderr, new RegExp(OVERRIDE));
    assert.ok(!failed.stderr.includes('7.7.7'), failed.stderr);
    const binary = join(project, 'node_modules', `quietsqlite-${triple}`, `quietsqlite.${triple}.node`);
    const overridden = runIn(app, process.execPath, ['-e', load], { [OVERRIDE]: binary });
    assert.equal(overridden.status, 0, overridden.stderr);
    // As an ES module with no __dirname (the CommonJS files read as ES modules would fail on
    // `require` first; the loader alone is what matters): evaluate native.js's body where
    // __dirname is undefined.
    const esm = runIn(app, process.execPath, ['-e', `
      const { readFileSync } = require('node:fs');
      const body = readFileSync('./out/native.js', 'utf8');
      const run = new Function('exports', 'require', 'module', '__filename', body);
      const m = { exports: {} };
      try { run(m.exports, require, m, undefined); console.log('loaded'); } catch (e) { console.log(e.constructor.name + ': ' + e.message); }
    `], { [OVERRIDE]: binary });
    assert.equal(esm.stdout.trim(), 'loaded', esm.stderr + esm.stdout);
  } finally {
    rmSync(app, { recursive: true, force: true });
  }
});

test('a process that loads no addons (--no-addons) is told so, not to rebuild', () => {
  const r = runIn(project, process.execPath, ['--no-addons', '-e', "require('quietsqlite')"]);
  assert.notEqual(r.status, 0);
  assert.match(r.stderr, /this process does not load native addons \(node --no-addons, or --permission without --allow-addons\)/);
  assert.ok(!r.stderr.includes('npm run build'), r.stderr);
});
