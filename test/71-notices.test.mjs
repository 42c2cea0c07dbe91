// The third-party notices that both packages ship (THIRD_PARTY_NOTICES.md) name every crate
// compiled into the addon with its license text: the file must be exactly what
// scripts/notices.mjs writes from `cargo metadata` for this Cargo.lock.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { notices } from '../scripts/notices.mjs';

const file = readFileSync(new URL('../THIRD_PARTY_NOTICES.md', import.meta.url), 'utf8');

test('THIRD_PARTY_NOTICES.md is up to date with Cargo.lock (node scripts/notices.mjs writes it)', () => {
  assert.equal(file, notices());
});

test('the notices carry the C code compiled into the addon and the crates it calls through', () => {
  for (const heading of ['## sqlite3mc-src ', '## libmimalloc-sys ', '## rusqlite ', '## napi ', '## napi-sys ']) {
    assert.ok(file.includes(`\n${heading}`), `${heading.trim()} is listed`);
  }
  assert.match(file, /Copyright \(c\) [0-9-]+ Ulrich Telle/, 'the SQLite3 Multiple Ciphers license text');
  assert.match(file, /Copyright \(c\) [0-9-]+ Microsoft Corporation, Daan Leijen/, "mimalloc's license text");
  // Compile-time crates (proc macros and what only they use) leave nothing in the binary.
  for (const heading of ['## napi-derive ', '## syn ', '## cc ']) {
    assert.ok(!file.includes(`\n${heading}`), `${heading.trim()} is not listed`);
  }
});
