// THIRD_PARTY_NOTICES.md: the licenses of the code compiled into the addon, which both packages
// ship (MIT, BSL-1.0, Zlib and Apache-2.0 all ask that their text travel with the binary).
//   node scripts/notices.mjs          writes THIRD_PARTY_NOTICES.md
//   node scripts/notices.mjs --check  exits 1 when the file is not what would be written
// The crates are those `cargo metadata` resolves for quietsqlite-node on every target of
// package.json's napi.targets: normal dependencies, minus proc-macro crates and what only they
// use (they run in the compiler and leave nothing in the binary), plus the build-dependencies
// whose C sources are compiled in (VENDORED_C below).
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const outFile = join(root, 'THIRD_PARTY_NOTICES.md');

/**
 * Build-dependencies whose sources the addon compiles, and the license files of the C code a
 * crate vendors (paths inside the crate). A crate in neither list contributes its own license
 * files only.
 */
const VENDORED_C = {
  // The SQLite3 Multiple Ciphers amalgamation (crates/sqlite/build.rs compiles it).
  'sqlite3mc-src': ['sqlite3mc/LICENSE'],
  // mimalloc 2 (experiment 048), compiled by libmimalloc-sys's build script.
  'libmimalloc-sys': ['c_src/mimalloc/v2/LICENSE'],
};

/**
 * Crates published without a license file: the text comes from their repository's LICENSE,
 * kept in scripts/licenses/ (both crates come from github.com/napi-rs/napi-rs).
 */
const TEXT_FROM_REPOSITORY = {
  napi: 'napi-rs.LICENSE',
  'napi-sys': 'napi-rs.LICENSE',
};

/** Of a crate's "A OR B" choices, the license these notices take: the first of these offered. */
const PREFERRED = ['MIT', 'BSL-1.0', 'Zlib', 'Apache-2.0'];

/** The license file names a crate's own texts are found under, by the license they carry. */
const FILES_FOR = {
  MIT: [/^LICEN[CS]E[-_]MIT(\.(md|txt))?$/i],
  'Apache-2.0': [/^LICEN[CS]E[-_]APACHE(\.(md|txt))?$/i],
  'BSL-1.0': [/^LICEN[CS]E[-_]BOOST(\.(md|txt))?$/i, /^LICEN[CS]E[-_]BSL(\.(md|txt))?$/i],
  Zlib: [/^LICEN[CS]E[-_]ZLIB(\.(md|txt))?$/i],
};
const PLAIN_LICENSE = /^(LICEN[CS]E|COPYING)(\.(md|txt))?$/i;

function cargoMetadata() {
  const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
  const args = ['metadata', '--format-version', '1', '--locked'];
  for (const t of pkg.napi.targets) args.push('--filter-platform', t);
  const r = spawnSync('cargo', args, { cwd: root, encoding: 'utf8', maxBuffer: 256 << 20 });
  if (r.status !== 0) throw new Error(`cargo ${args.join(' ')} failed: ${r.stderr}`);
  return JSON.parse(r.stdout);
}

/** The packages linked into quietsqlite-node, by id. */
function linkedPackages(meta) {
  const byId = new Map(meta.packages.map((p) => [p.id, p]));
  const nodes = new Map(meta.resolve.nodes.map((n) => [n.id, n]));
  const isProcMacro = (p) => p.targets.some((t) => t.kind.includes('proc-macro'));
  const start = meta.packages.find((p) => p.name === 'quietsqlite-node');
  if (!start) throw new Error('cargo metadata has no quietsqlite-node');
  const seen = new Set();
  const queue = [start.id];
  while (queue.length > 0) {
    const id = queue.pop();
    if (seen.has(id)) continue;
    seen.add(id);
    for (const dep of nodes.get(id).deps) {
      const p = byId.get(dep.pkg);
      const normal = dep.dep_kinds.some((k) => k.kind === null);
      const compiledIn = dep.dep_kinds.some((k) => k.kind === 'build') && p.name in VENDORED_C;
      if ((normal && !isProcMacro(p)) || compiledIn) queue.push(dep.pkg);
    }
  }
  return [...seen].map((id) => byId.get(id)).filter((p) => p.source !== null);
}

/** The license this document takes for an SPDX expression, or the whole expression for AND. */
function chosenLicense(expr) {
  if (/\bAND\b/.test(expr) || /[()]/.test(expr)) return expr;
  const offered = expr.split(/\s+OR\s+|\//).map((s) => s.trim());
  return PREFERRED.find((l) => offered.includes(l)) ?? offered[0];
}

/** The license texts for a crate: [relative path, text] pairs. Throws when none is found. */
function licenseTexts(p) {
  const dir = dirname(p.manifest_path);
  const names = readdirSync(dir);
  const chosen = chosenLicense(p.license ?? '');
  let files = (FILES_FOR[chosen] ?? []).flatMap((re) => names.filter((n) => re.test(n)));
  if (files.length === 0) files = names.filter((n) => PLAIN_LICENSE.test(n));
  const paths = [...files, ...(VENDORED_C[p.name] ?? [])].map((f) => [f, join(dir, f)]);
  if (paths.length === 0 && p.name in TEXT_FROM_REPOSITORY) {
    const f = TEXT_FROM_REPOSITORY[p.name];
    paths.push([`LICENSE (from ${p.repository})`, join(root, 'scripts', 'licenses', f)]);
  }
  if (paths.length === 0) throw new Error(`${p.name} ${p.version}: no license file for ${chosen} in ${dir}`);
  return paths.map(([f, path]) => {
    if (!existsSync(path)) throw new Error(`${p.name} ${p.version}: ${f} is missing`);
    return [f, readFileSync(path, 'utf8').replace(/\r\n/g, '\n').trimEnd()];
  });
}

export function notices() {
  const packages = linkedPackages(cargoMetadata()).sort((a, b) => a.name.localeCompare(b.name) || a.version.localeCompare(b.version));
  const parts = [
    '# Third-party notices',
    '',
    'The native addon (`quietsqlite.<platform>.node`) is compiled from quietsqlite\'s own code (see',
    'LICENSE) and from the crates below, on every platform the packages are built for; a crate',
    'used on one platform only is listed as well. Where a crate offers a choice of licenses, it is',
    'used here under the one named. SQLite itself is in the public domain; it reaches the addon',
    'inside the SQLite3 Multiple Ciphers amalgamation (sqlite3mc-src).',
    '',
    'This file is generated by `node scripts/notices.mjs` from `cargo metadata`; a test fails when',
    'it is out of date.',
    '',
  ];
  const missing = [];
  for (const p of packages) {
    let texts;
    try {
      texts = licenseTexts(p);
    } catch (e) {
      missing.push(e.message);
      continue;
    }
    parts.push(`## ${p.name} ${p.version}`, '');
    parts.push(`License: ${chosenLicense(p.license ?? '')}${p.repository ? `. Source: ${p.repository}` : ''}`, '');
    for (const [file, text] of texts) {
      parts.push(`${file}:`, '', '```text', text, '```', '');
    }
  }
  if (missing.length > 0) throw new Error(`license texts not found:\n${missing.join('\n')}`);
  return parts.join('\n');
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const text = notices();
  if (process.argv.includes('--check')) {
    const current = existsSync(outFile) ? readFileSync(outFile, 'utf8') : '';
    if (current !== text) {
      console.error('THIRD_PARTY_NOTICES.md is out of date: run node scripts/notices.mjs');
      process.exit(1);
    }
    console.log('THIRD_PARTY_NOTICES.md is up to date');
  } else {
    writeFileSync(outFile, text);
    console.log(`wrote ${outFile}`);
  }
}
