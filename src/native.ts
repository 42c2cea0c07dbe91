// Loads the compiled addon. The order, and why: docs/guides/packaging.md.
//   1. QUIETSQLITE_NATIVE_LIBRARY_PATH, when set (and then nothing else);
//   2. a local build, native/quietsqlite.node (a source checkout after `npm run build`);
//   3. the platform package (quietsqlite-<platform>-<arch>[-<libc>], an optional dependency);
//   4. in a source checkout with a Rust toolchain: builds native/ from source, then loads it.
// Otherwise it throws an Error naming the platform and what to do.
import type * as Generated from '../native/binding';
import type { NativeDatabase as NativeDatabaseClass, NativeOpenOptions } from '../native/binding';
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';

export type { NativeOpenOptions };
export type NativeDatabase = NativeDatabaseClass;

interface Binding {
  NativeDatabase: typeof NativeDatabaseClass;
  MAX_PARAMETERS: number;
  MAX_VALUE_BYTES: number;
  READ_PARKED_PARAMS: number;
  DEFAULT_CHUNK_ROWS: number;
  MAX_CHUNK_ROWS: number;
  MAX_INLINE_BUDGET_US: number;
  REKEY_DONE: string;
  FUNCTION_OP_SCALAR: number;
  FUNCTION_OP_STEP: number;
  FUNCTION_OP_INVERSE: number;
  FUNCTION_OP_VALUE: number;
  FUNCTION_OP_FINAL: number;
  // The calls made per request, by the database's `handle` (crates/node/src/handles.rs).
  // Looked up on `binding` at every call, so that tests can watch them.
  // dbRead, dbWriterRead, dbExecute, dbTakeCompletions and dbKeepAlive are plain Node-API
  // callbacks, not napi-rs functions, so the generated declarations do not list them
  // (crates/node/src/request_calls.rs). `packedText`, when given, says `params` is the
  // packed layout (src/params.ts, packParams).
  dbRead: (
    handle: number,
    id: number,
    sql: string | number,
    params: unknown,
    format: number,
    cancellable?: boolean,
    packedText?: string,
  ) => void;
  dbReadInline: typeof Generated.dbReadInline;
  removeScratchFiles: typeof Generated.removeScratchFiles;
  databaseFileIdentities: typeof Generated.databaseFileIdentities;
  dbWriterRead: (
    handle: number,
    id: number,
    tx: number,
    sql: string | number,
    params: unknown,
    format: number,
    cancellable?: boolean,
    packedText?: string,
  ) => void;
  dbExecute: (
    handle: number,
    id: number,
    tx: number,
    sql: string | number,
    params: unknown,
    cancellable?: boolean,
    packedText?: string,
  ) => void;
  dbBegin: typeof Generated.dbBegin;
  dbCommit: typeof Generated.dbCommit;
  dbRollback: typeof Generated.dbRollback;
  dbTakeCompletions: (
    handle: number,
    maxMicros: number,
    scratch: Buffer,
  ) => unknown[] | null | undefined | { scratch: Buffer; values: unknown[] | null };
  /** Holds the event loop open while the database has work in flight (`on`), or lets it go. */
  dbKeepAlive: (handle: number, on: boolean) => void;
}

/** The environment variable naming a binary to load instead of any other. */
export const OVERRIDE_VARIABLE = 'QUIETSQLITE_NATIVE_LIBRARY_PATH';

/** The package's directory. Not known when this file was bundled into an ES module (which has
 * no `__dirname`); in a CommonJS bundle it is the bundle's parent, not the package. */
const root: string | undefined = typeof __dirname === 'string' ? join(__dirname, '..') : undefined;

interface Manifest {
  name?: string;
  version: string;
  optionalDependencies?: Record<string, string>;
}

/** quietsqlite's package.json, or undefined when the files around this one are not the
 * package's (a bundler copied this code into an application). */
function ownManifest(): Manifest | undefined {
  if (root === undefined) return undefined;
  try {
    const manifest = require(join(root, 'package.json')) as Manifest;
    return manifest.name === 'quietsqlite' ? manifest : undefined;
  } catch {
    return undefined;
  }
}

/** musl or glibc: musl's ldd is a script naming musl; glibc's runtime shows in the report. */
function linuxLibc(): 'gnu' | 'musl' {
  try {
    if (readFileSync('/usr/bin/ldd', 'utf8').includes('musl')) return 'musl';
  } catch {
    // No readable ldd (minimal images): ask Node which C library it runs on.
  }
  const header = (process.report?.getReport() as { header?: { glibcVersionRuntime?: string } } | undefined)?.header;
  return header?.glibcVersionRuntime ? 'gnu' : 'musl';
}

/** This process's platform in napi-rs's naming, e.g. linux-x64-gnu, darwin-arm64, win32-x64-msvc. */
export function platformTriple(): string {
  const { platform, arch } = process;
  if (platform === 'linux') return `${platform}-${arch}-${linuxLibc()}`;
  if (platform === 'win32') return `${platform}-${arch}-msvc`;
  return `${platform}-${arch}`;
}

/** Node refused to load any addon (`--no-addons`, or `--permission` without `--allow-addons`):
 * no other binary or build would fare better. */
function addonsDisabled(err: unknown): Error | undefined {
  if ((err as NodeJS.ErrnoException)?.code !== 'ERR_DLOPEN_DISABLED') return undefined;
  return new Error(
    'quietsqlite: this process does not load native addons (node --no-addons, or --permission without --allow-addons), ' +
      'and quietsqlite is one. See docs/api.md, "Loading the native addon".',
    { cause: err },
  );
}

function describe(err: unknown): string {
  return err instanceof Error ? err.message.split('\n')[0] : String(err);
}

function notFound(err: unknown, request: string): boolean {
  const e = err as NodeJS.ErrnoException;
  return e?.code === 'MODULE_NOT_FOUND' && e.message.includes(`'${request}'`);
}

/** In a source checkout (the Rust sources beside dist/) with cargo on PATH: builds native/ the
 * way `npm run build:native` does. Returns why it did not, or null when it built. */
function buildFromSource(root: string): string | null {
  if (!existsSync(join(root, 'Cargo.toml')) || !existsSync(join(root, 'crates', 'node'))) {
    return 'no Rust sources here (the npm package does not carry them)';
  }
  const cargo = spawnSync('cargo', ['--version'], { encoding: 'utf8' });
  if (cargo.status !== 0) return 'no Rust toolchain (cargo) on PATH';
  let cli: string;
  try {
    const manifest = require.resolve('@napi-rs/cli/package.json', { paths: [root] });
    cli = join(manifest, '..', (require(manifest) as { bin: { napi: string } }).bin.napi);
  } catch {
    return '@napi-rs/cli is not installed (run `npm install` in the checkout)';
  }
  process.stderr.write(`quietsqlite: building the native addon from source in ${root} (once; a few minutes)\n`);
  const args = [cli, 'build', '--release', '--manifest-path', 'crates/node/Cargo.toml',
    '--package-json-path', 'package.json', '--output-dir', 'native', '--dts', 'binding.d.ts'];
  const r = spawnSync(process.execPath, args, { cwd: root, stdio: ['ignore', 2, 2] });
  return r.status === 0 ? null : `building from source failed (exit ${r.status ?? r.signal})`;
}

function load(): Binding {
  const override = process.env[OVERRIDE_VARIABLE];
  if (override) {
    // An explicit choice: never fall back to another binary behind the user's back.
    const path = resolve(override);
    try {
      return loaded(path);
    } catch (err) {
      throw addonsDisabled(err) ?? new Error(`quietsqlite: could not load the native addon at ${path}, named by ${OVERRIDE_VARIABLE} (${describe(err)}).`, { cause: err });
    }
  }

  const manifest = ownManifest();
  if (root === undefined || manifest === undefined) {
    throw new Error(
      `quietsqlite: its native addon is not where the package keeps it: this code runs from ${typeof __filename === 'string' ? __filename : 'an ES module bundle'}, ` +
        'outside the installed package (a bundler copied it?). Leave quietsqlite out of the bundle (esbuild --external:quietsqlite, ' +
        `webpack externals), or set ${OVERRIDE_VARIABLE} to the quietsqlite.node file. See docs/guides/packaging.md.`,
    );
  }
  const local = join(root, 'native', 'quietsqlite.node');
  if (existsSync(local)) {
    try {
      return loaded(local);
    } catch (err) {
      throw addonsDisabled(err) ?? new Error(`quietsqlite: could not load the local build at ${local} (${describe(err)}). Run \`npm run build\` to build it again.`, { cause: err });
    }
  }

  // The platform packages are the main package's optional dependencies: one list, package.json.
  const triple = platformTriple();
  const pkg = `quietsqlite-${triple}`;
  const published = manifest.optionalDependencies?.[pkg] !== undefined;
  const tried: string[] = [];
  if (published) {
    try {
      return loaded(require.resolve(pkg));
    } catch (err) {
      const disabled = addonsDisabled(err);
      if (disabled !== undefined) throw disabled;
      tried.push(notFound(err, pkg) ? `the package ${pkg} is not installed` : `the package ${pkg} did not load (${describe(err)})`);
    }
  } else {
    tried.push(`no prebuilt package is published for ${triple}`);
  }

  const why = buildFromSource(root);
  if (why === null && existsSync(local)) return loaded(local);
  tried.push(why ?? `the build did not write ${local}`);

  const version = manifest.version;
  throw new Error(
    `quietsqlite: no native addon for this platform, ${triple} (${tried.join('; ')}). ` +
      (published
        ? `Install it with \`npm install ${pkg}@${version}\` (or reinstall without --omit=optional / --no-optional), or build from source: `
        : 'Build it from source: ') +
      `clone the quietsqlite repository at v${version}, run \`npm install\` there (needs Rust 1.88+ and a C compiler), ` +
      `then set ${OVERRIDE_VARIABLE} to its native/quietsqlite.node. See docs/guides/packaging.md.`,
  );
}

/** The file the addon was loaded from: which copy of it (and of SQLite) this module uses. */
export let addonFile = '';

function loaded(file: string): Binding {
  const addon = require(file) as Binding;
  addonFile = file;
  return addon;
}

export const binding: Binding = load();
