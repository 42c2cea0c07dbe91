#!/usr/bin/env node
// Refreshes the vendored UPDATE/DELETE ... LIMIT parser after a SQLite update.
//
//   node crates/sqlite/parser/update.mjs <udl-capable sqlite3.c> <amalgamation the build compiles>
//
// The first file is an amalgamation generated with -DSQLITE_ENABLE_UPDATE_DELETE_LIMIT (for
// example deps/sqlite3/sqlite3.c of the better-sqlite3 npm package of the same SQLite version,
// fetched with `npm pack better-sqlite3@<version>`); the second is the amalgamation of the
// sqlite3mc-src crate that build.rs compiles. The script copies the parser section of the first
// into parse-udl.c and records in replaces.txt the fingerprint of the section it replaces, so
// build.rs refuses to splice it into any other grammar. Both files use build.rs's rules
// (sectionBounds and fnv1a64 mirror section_bounds and fnv1a64 there).
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const BEGIN = Buffer.from('/************** Begin file parse.c ***');
const END = Buffer.from('/************** End of parse.c ***');

function sectionBounds(buf, what) {
  const start = buf.indexOf(BEGIN);
  const endMark = buf.indexOf(END);
  if (start < 0 || endMark < start) throw new Error(`${what}: no parse.c section`);
  if (buf.indexOf(BEGIN, start + 1) >= 0 || buf.indexOf(END, endMark + 1) >= 0) {
    throw new Error(`${what}: more than one parse.c section`);
  }
  const nl = buf.indexOf(0x0a, endMark);
  return [start, nl < 0 ? buf.length : nl + 1];
}

function fnv1a64(buf) {
  let h = 0xcbf29ce484222325n;
  for (const b of buf) h = BigInt.asUintN(64, (h ^ BigInt(b)) * 0x100000001b3n);
  return h.toString(16).padStart(16, '0');
}

const version = (buf) => /#define SQLITE_VERSION\s+"([^"]+)"/.exec(buf.toString('latin1'))?.[1];

const [udlPath, plainPath] = process.argv.slice(2);
if (!udlPath || !plainPath) {
  console.error('usage: node update.mjs <udl-capable sqlite3.c> <amalgamation build.rs compiles>');
  process.exit(2);
}
const udl = readFileSync(udlPath);
const plain = readFileSync(plainPath);
if (!udl.includes('#define SQLITE_UDL_CAPABLE_PARSER 1')) {
  throw new Error(`${udlPath} was not generated with SQLITE_ENABLE_UPDATE_DELETE_LIMIT`);
}
const [us, ue] = sectionBounds(udl, udlPath);
const [ps, pe] = sectionBounds(plain, plainPath);
const here = dirname(fileURLToPath(import.meta.url));
writeFileSync(join(here, 'parse-udl.c'), udl.subarray(us, ue));
writeFileSync(
  join(here, 'replaces.txt'),
  `${fnv1a64(plain.subarray(ps, pe))}\n` +
    `# FNV-1a 64 of the parse.c section (SQLite ${version(plain)}) that parse-udl.c ` +
    `(from SQLite ${version(udl)}) replaces; written by update.mjs.\n`,
);
console.log(`parse-udl.c: ${ue - us} bytes from SQLite ${version(udl)}; replaces SQLite ${version(plain)}'s parser`);
