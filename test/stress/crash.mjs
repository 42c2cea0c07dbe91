// Crash safety: SIGKILL a writing child (crash-workload.mjs) at random moments, then check
// the file: integrity_check ok, every unit all or nothing, nothing reported committed lost,
// and the schema consistent with the log written in the same transactions.
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { Database, here, mainIf, removeDir, sleep, tempDir } from './common.mjs';

function startWorkload(file, seed, node) {
  const child = spawn(node, [join(here, 'crash-workload.mjs'), file, String(seed)], { stdio: ['ignore', 'pipe', 'pipe'] });
  const committed = [];
  let ready;
  const readyP = new Promise((r) => (ready = r));
  let buf = '';
  let stderr = '';
  child.stdout.setEncoding('utf8');
  child.stdout.on('data', (d) => {
    buf += d;
    let nl;
    while ((nl = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + 1);
      if (line === 'READY') ready();
      else if (line.startsWith('C ')) committed.push(Number(line.slice(2)));
    }
  });
  child.stderr.on('data', (d) => (stderr = (stderr + d).slice(-2000)));
  const exited = new Promise((r) => child.on('close', (code, signal) => r({ code, signal })));
  return { child, committed, readyP, exited, stderr: () => stderr };
}

/** Checks the file after a kill; returns failure messages and what was found. */
export async function verify(file, mustHave) {
  const failures = [];
  const db = await Database.open(file, { readers: 1 });
  try {
    const [{ integrity_check: integrity }] = (await db.execute('PRAGMA integrity_check')).rows;
    if (integrity !== 'ok') failures.push(`integrity_check: ${integrity}`);
    const partial = await db.select(
      'SELECT tag, count(*) AS n, min(k) AS k FROM rows GROUP BY tag HAVING n <> min(k) OR min(k) <> max(k) LIMIT 5',
    );
    for (const p of partial) failures.push(`unit ${p.tag} is partial: ${p.n} of ${p.k} rows`);
    const [{ n: rolledBack }] = await db.select("SELECT count(*) AS n FROM rows WHERE phase = 'rolledback'");
    if (rolledBack !== 0) failures.push(`${rolledBack} rows of rolled-back savepoints are stored`);
    const tables = new Set((await db.select("SELECT name FROM sqlite_schema WHERE type = 'table' AND name LIKE 'sc\\_%' ESCAPE '\\'")).map((r) => r.name));
    const logged = new Set((await db.select('SELECT name FROM schema_log')).map((r) => r.name));
    for (const t of tables) if (!logged.has(t)) failures.push(`table ${t} exists without its log row`);
    for (const t of logged) if (!tables.has(t)) failures.push(`log row for ${t} without its table`);
    const present = new Set((await db.select('SELECT DISTINCT tag FROM rows')).map((r) => r.tag));
    const lost = mustHave.filter((t) => !present.has(t));
    if (lost.length > 0) failures.push(`${lost.length} committed units lost (e.g. ${lost[0]})`);
    const [{ units }] = await db.select('SELECT count(DISTINCT tag) AS units FROM rows');
    return { failures, units };
  } finally {
    await db.close();
  }
}

export async function run({ kills = 3, seed = 1, node = process.execPath, minMs = 20, maxMs = 600 } = {}, progress = () => {}) {
  const dir = await tempDir();
  const file = join(dir, 'crash.db');
  const failures = [];
  const committed = [];
  let killed = 0;
  let units = 0;
  let rng = seed >>> 0 || 1;
  const rand = () => ((rng = (Math.imul(rng, 1103515245) + 12345) >>> 0) / 2 ** 32);
  try {
    for (let i = 0; i < kills; i++) {
      const w = startWorkload(file, seed * 1000 + i, node);
      const started = await Promise.race([w.readyP.then(() => true), w.exited.then(() => false)]);
      if (!started) {
        failures.push(`kill ${i}: the workload ended before it was ready: ${w.stderr().slice(-400)}`);
        continue;
      }
      await sleep(minMs + rand() * (maxMs - minMs));
      w.child.kill('SIGKILL');
      const { signal, code } = await w.exited;
      if (signal !== 'SIGKILL') failures.push(`kill ${i}: the workload ended by itself (${signal ?? code}): ${w.stderr().slice(-400)}`);
      killed++;
      committed.push(...w.committed);
      const v = await verify(file, committed);
      units = v.units;
      for (const f of v.failures) failures.push(`after kill ${i}: ${f}`);
      progress(`crash: ${killed}/${kills} kills, ${committed.length} units committed by the children, ${units} units on disk, ${failures.length} failures`);
    }
  } finally {
    await removeDir(dir);
  }
  return { failures, figures: { kills: killed, unitsCommitted: committed.length, unitsOnDisk: units } };
}

mainIf(import.meta, run);
