// Litestream (continuous replication, test/replication/) for the tests: `node scripts/litestream.mjs`
// installs the pinned version with `go install` when it is missing; `findLitestream()` says where
// it is. Without Go, or when the build fails, it says why and exits 0: the replication tests
// then skip with that reason instead of failing the whole suite.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { homedir } from 'node:os';
import { fileURLToPath } from 'node:url';

export const LITESTREAM_VERSION = 'v0.5.18';
const MODULE = `github.com/benbjohnson/litestream/cmd/litestream@${LITESTREAM_VERSION}`;

/** The Go toolchain: on PATH, or where the official tarball installs it. */
function goBinary() {
  for (const go of ['go', '/usr/local/go/bin/go']) {
    const r = spawnSync(go, ['version'], { encoding: 'utf8' });
    if (r.status === 0) return go;
  }
  return null;
}

/** Where `go install` puts binaries: GOBIN, else GOPATH/bin (default ~/go/bin). */
function goBinDir(go) {
  if (go) {
    const r = spawnSync(go, ['env', 'GOBIN', 'GOPATH'], { encoding: 'utf8' });
    if (r.status === 0) {
      const [gobin, gopath] = r.stdout.split('\n');
      if (gobin) return gobin;
      if (gopath) return join(gopath.split(':')[0], 'bin');
    }
  }
  return join(homedir(), 'go', 'bin');
}

function versionOf(bin) {
  const r = spawnSync(bin, ['version'], { encoding: 'utf8' });
  return r.status === 0 ? r.stdout.trim() : null;
}

/** `{ path, version }` of a usable litestream, or `{ path: null, reason }`. $LITESTREAM wins. */
export function findLitestream() {
  const candidates = [];
  if (process.env.LITESTREAM) candidates.push(process.env.LITESTREAM);
  candidates.push(join(goBinDir(goBinary()), 'litestream'), 'litestream');
  for (const c of candidates) {
    if (c !== 'litestream' && !existsSync(c)) continue;
    const version = versionOf(c);
    if (version) return { path: c, version };
  }
  return { path: null, reason: `litestream not found (run \`node scripts/litestream.mjs\` to install ${LITESTREAM_VERSION} with Go)` };
}

export function installLitestream() {
  const found = findLitestream();
  if (found.path) return found;
  const go = goBinary();
  if (!go) return { path: null, reason: 'litestream is not installed and Go is not available to build it' };
  console.log(`installing litestream ${LITESTREAM_VERSION}: ${go} install ${MODULE} (about two minutes)`);
  const r = spawnSync(go, ['install', MODULE], { stdio: 'inherit' });
  if (r.status !== 0) return { path: null, reason: `go install ${MODULE} failed (exit ${r.status ?? r.signal})` };
  return findLitestream();
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const r = installLitestream();
  if (r.path) console.log(`litestream: ${r.path} (${r.version})`);
  else console.warn(`litestream unavailable, the replication tests will skip: ${r.reason}`);
}
