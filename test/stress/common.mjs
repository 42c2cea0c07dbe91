// Shared by the reliability kinds (test/stress/*.mjs). Each kind is a module exporting
// `run(params, progress)` that returns `{ failures: string[], figures: {...} }`; it can also run
// as its own process (`node test/stress/<kind>.mjs '<json params>'`), which is how run.mjs and
// test/50-reliability.test.mjs start it: a crash or leak then stays in that process.
import { spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

export const here = fileURLToPath(new URL('.', import.meta.url));
export const root = fileURLToPath(new URL('../..', import.meta.url));
export const lib = await import('../../dist/index.mjs');
export const { Database, SqliteError } = lib;

/** The error kinds a failure may have: anything else is a defect. */
export function typedError(err) {
  if (err instanceof TypeError || err instanceof RangeError || err instanceof SqliteError) return true;
  if (typeof DOMException === 'function' && err instanceof DOMException) {
    return err.name === 'AbortError' || err.name === 'TimeoutError';
  }
  return err instanceof Error && typeof err.code === 'string' && err.code.startsWith('ERR_QUIETSQLITE_');
}

export function describeError(err) {
  if (err === null || typeof err !== 'object') return `non-error thrown: ${typeof err}`;
  return `${err.constructor?.name ?? 'object'}${err.code ? `(${err.code})` : ''}: ${String(err.message).slice(0, 160)}`;
}

export async function tempDir(prefix = 'quietsqlite-stress-') {
  return mkdtemp(join(tmpdir(), prefix));
}

export const removeDir = (dir) => rm(dir, { recursive: true, force: true });

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Settles with `promise`, or rejects with a marker error after `ms` (a hang). */
export function withDeadline(promise, ms, what) {
  let timer;
  const deadline = new Promise((_, reject) => {
    timer = setTimeout(() => reject(Object.assign(new Error(`${what} did not settle within ${ms} ms`), { hang: true })), ms);
  });
  return Promise.race([promise, deadline]).finally(() => clearTimeout(timer));
}

/** Threads, descriptors and resident memory of this process (Linux /proc). */
export function resources() {
  const count = (dir) => {
    try {
      return readdirSync(dir).length;
    } catch {
      return -1;
    }
  };
  let rssKb = Math.round(process.memoryUsage.rss() / 1024);
  try {
    rssKb = Number(/VmRSS:\s+(\d+)/.exec(readFileSync('/proc/self/status', 'utf8'))[1]);
  } catch {}
  return { threads: count('/proc/self/task'), fds: count('/proc/self/fd'), rssMb: Math.round(rssKb / 102.4) / 10 };
}

/** Forces a full garbage collection (V8's --expose-gc, switched on at runtime). */
export async function collectGarbage(times = 2) {
  const v8 = await import('node:v8');
  const vm = await import('node:vm');
  v8.setFlagsFromString('--expose-gc');
  const gc = vm.runInNewContext('gc');
  for (let i = 0; i < times; i++) {
    gc();
    await sleep(20);
  }
}

/**
 * Runs `node <kind>.mjs <params>` and collects its result. Lines `PROGRESS <text>` go to
 * `progress`; the last `RESULT <json>` line is the outcome. A child that dies by a signal or
 * exits non-zero without a result is reported as a crash (a failure).
 */
export function runKind(kind, params, { progress = () => {}, node = process.execPath, timeoutMs = 30 * 60_000 } = {}) {
  return new Promise((resolve) => {
    const child = spawn(node, [join(here, `${kind}.mjs`), JSON.stringify(params)], {
      cwd: root,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let result;
    let stderr = '';
    let buffered = '';
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', (chunk) => {
      buffered += chunk;
      let nl;
      while ((nl = buffered.indexOf('\n')) >= 0) {
        const line = buffered.slice(0, nl);
        buffered = buffered.slice(nl + 1);
        if (line.startsWith('RESULT ')) result = JSON.parse(line.slice(7));
        else if (line.startsWith('PROGRESS ')) progress(line.slice(9));
      }
    });
    child.stderr.setEncoding('utf8');
    child.stderr.on('data', (c) => {
      stderr = (stderr + c).slice(-4000);
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      if (result === undefined) {
        result = { failures: [], figures: {} };
        result.failures.push(`${kind}: the process ended by ${signal ?? `exit ${code}`} without a result; stderr: ${stderr.trim().slice(-600)}`);
      } else if (code !== 0 || signal) {
        result.failures.push(`${kind}: the process ended by ${signal ?? `exit ${code}`} after its result; stderr: ${stderr.trim().slice(-600)}`);
      }
      resolve(result);
    });
  });
}

/** The entry point of a kind run as its own process. */
export function mainIf(meta, run) {
  if (process.argv[1] === undefined || pathToFileURL(process.argv[1]).href !== meta.url) return;
  const params = JSON.parse(process.argv[2] ?? '{}');
  run(params, (text) => process.stdout.write(`PROGRESS ${text}\n`)).then(
    (result) => {
      process.stdout.write(`RESULT ${JSON.stringify(result)}\n`);
      // A kind leaves nothing running. If something still holds the process open (a
      // promise's keep-alive, a thread), say so and end with an exit code the caller reports.
      setTimeout(() => {
        process.stderr.write('the process stayed alive for 5 s after its result (something still holds it open)\n');
        process.exit(3);
      }, 5000).unref();
    },
    (err) => {
      process.stdout.write(`RESULT ${JSON.stringify({ failures: [`harness error: ${err?.stack ?? err}`], figures: {} })}\n`);
      process.exitCode = 1;
    },
  );
}
