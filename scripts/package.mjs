// `npm run package`: the publishable tarballs of the main package and of this machine's platform
// package, in .packages/. The binary is built with the `dist` Cargo profile (stripped, fat LTO)
// into .tmp/package/, never taken from native/: `npm test` builds native/ with the test hooks.
//   node scripts/package.mjs [--target <rust triple>] [--skip-build]
// --target cross-builds (CI); --skip-build reuses .tmp/package/ (CI builds, then packs).
import { spawnSync } from 'node:child_process';
import { copyFileSync, cpSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const out = join(root, '.packages');
const work = join(root, '.tmp', 'package');
const onWindows = process.platform === 'win32';

/** Names only the test-hooks build exports: a binary containing one must not be published. */
export const TEST_HOOK_NAMES = ['panicForTests', 'panicOnJsThread', 'liveStats'];

function run(cmd, args, opts = {}) {
  console.log(`> ${cmd} ${args.join(' ')}`);
  // npm is a .cmd script on Windows, which only a shell starts.
  const r = spawnSync(cmd, args, { cwd: root, stdio: 'inherit', shell: onWindows && cmd === 'npm', ...opts });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} failed (exit ${r.status ?? r.signal})`);
  return r;
}

function hostTriple() {
  const r = spawnSync('rustc', ['-vV'], { encoding: 'utf8' });
  const host = /^host: (\S+)$/m.exec(r.stdout ?? '')?.[1];
  if (!host) throw new Error(`could not read the host triple from rustc -vV: ${r.stderr}`);
  return host;
}

function argValue(name) {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
const binDir = join(work, 'native');

if (!process.argv.includes('--skip-build')) {
  rmSync(binDir, { recursive: true, force: true });
  const target = argValue('--target') ?? hostTriple();
  // --platform names the file after napi's platform directory (quietsqlite.linux-x64-gnu.node).
  run(process.execPath, [
    join(root, 'node_modules', '@napi-rs', 'cli', 'dist', 'cli.js'), 'build', '--profile', 'dist',
    '--target', target, '--platform', '--no-js', '--manifest-path', 'crates/node/Cargo.toml',
    '--package-json-path', 'package.json', '--output-dir', binDir, '--dts', 'binding.d.ts',
  ]);
}
const nodeFiles = readdirSync(binDir).filter((f) => f.endsWith('.node'));
if (nodeFiles.length !== 1) throw new Error(`expected one .node file in ${binDir}, found ${nodeFiles.join(', ') || 'none'}`);
const nodeFile = nodeFiles[0];
const platform = /^quietsqlite\.(.+)\.node$/.exec(nodeFile)[1];
const binary = readFileSync(join(binDir, nodeFile));
for (const name of TEST_HOOK_NAMES) {
  if (binary.includes(name)) throw new Error(`${nodeFile} contains the test hook ${name}: refusing to package it`);
}

mkdirSync(out, { recursive: true });
const stage = join(work, 'stage');
rmSync(stage, { recursive: true, force: true });

/** Packs a staged directory into .packages/ without running any lifecycle script. */
function pack(dir) {
  const r = run('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', out], { cwd: dir, stdio: ['ignore', 'pipe', 'inherit'] });
  const [info] = JSON.parse(r.stdout.toString());
  console.log(`${join('.packages', info.filename)}: ${info.size} bytes packed, ${info.unpackedSize} unpacked, ${info.entryCount} files`);
  return join(out, info.filename);
}

// The platform package: npm/<platform>/ (from `napi create-npm-dirs`) plus the binary.
const platformDir = join(root, 'npm', platform);
const platformPkg = JSON.parse(readFileSync(join(platformDir, 'package.json'), 'utf8'));
if (platformPkg.version !== pkg.version) {
  throw new Error(`npm/${platform}/package.json has version ${platformPkg.version}, the main package ${pkg.version}`);
}
if (pkg.optionalDependencies?.[platformPkg.name] !== pkg.version) {
  throw new Error(`package.json optionalDependencies must name ${platformPkg.name} at ${pkg.version}`);
}
const platformStage = join(stage, platform);
cpSync(platformDir, platformStage, { recursive: true });
copyFileSync(join(binDir, nodeFile), join(platformStage, nodeFile));
copyFileSync(join(root, 'LICENSE'), join(platformStage, 'LICENSE'));
// The binary carries the crates' and the C libraries' code: their licenses go with it.
copyFileSync(join(root, 'THIRD_PARTY_NOTICES.md'), join(platformStage, 'THIRD_PARTY_NOTICES.md'));
const platformTarball = pack(platformStage);

// The main package: the files package.json "files" selects (as npm would publish them from the
// root), with the binding's types from this build rather than native/'s test-hooks build.
run('npm', ['run', 'build:ts']);
const listing = spawnSync('npm', ['pack', '--dry-run', '--ignore-scripts', '--json'], { cwd: root, encoding: 'utf8', shell: onWindows });
if (listing.status !== 0) throw new Error(`npm pack --dry-run failed: ${listing.stderr}`);
const mainStage = join(stage, 'main');
for (const { path } of JSON.parse(listing.stdout)[0].files) {
  mkdirSync(dirname(join(mainStage, path)), { recursive: true });
  const from = path === 'native/binding.d.ts' ? join(binDir, 'binding.d.ts') : join(root, path);
  copyFileSync(from, join(mainStage, path));
}
if (!existsSync(join(mainStage, 'native', 'binding.d.ts'))) throw new Error('"files" must include native/binding.d.ts (dist/*.d.ts import it)');
// Scripts are for this repository (prepare builds from the Rust sources, which are not
// shipped); devDependencies mean nothing to a user. Neither goes into the published manifest.
const published = { ...pkg };
delete published.scripts;
delete published.devDependencies;
writeFileSync(join(mainStage, 'package.json'), JSON.stringify(published, null, 2) + '\n');
const mainTarball = pack(mainStage);

writeFileSync(join(out, 'packages.json'), JSON.stringify({ main: mainTarball, platform: platformTarball, triple: platform }, null, 2) + '\n');
