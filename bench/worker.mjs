// One peer per child process. The coordinator (run.mjs) sends one request at a time over IPC
// and waits for the answer, so nothing else runs in this process while a sample is timed.
//
//   node bench/worker.mjs <peer>
//   -> { id, cmd: 'hello' | 'open' | 'seed' | 'prepare' | 'sample' | 'teardown' | 'close', ... }
//   <- { id, ok: true, ... } | { id, na: reason } | { id, error: message }
import { NotAvailable } from './lib/common.mjs';
import { KINDS, sink } from './lib/cases.mjs';
import { schemaSql, seedPlan, subRandom } from './lib/data.mjs';
import { caseById } from './lib/suites.mjs';

const PEER_MODULES = {
  'better-sqlite3': './peers/better-sqlite3.mjs',
  'node:sqlite': './peers/node-sqlite.mjs',
  sqlite3: './peers/sqlite3.mjs',
  quietsqlite: './peers/quietsqlite.mjs',
};

const peerName = process.argv[2];
let peer;
let conn;
let counter = 0;
const cases = new Map();

const handlers = {
  async hello() {
    peer = await import(PEER_MODULES[peerName]);
    const info = await peer.load();
    return { ...info, node: process.version, sync: peer.sync };
  },

  async open({ path, options }) {
    conn = await peer.open(path, options);
    return conn.info;
  },

  // Builds the benchmark database with this peer (the coordinator picks a synchronous one).
  async seed({ path, seed }) {
    const db = await peer.open(path);
    await db.exec(schemaSql());
    for (const t of seedPlan(seed)) await db.insertBatch(db.prepare(t.sql), [...t.rows()]);
    await db.exec('ANALYZE');
    await db.exec('PRAGMA wal_checkpoint(TRUNCATE)');
    await db.close();
    return {};
  },

  async prepare({ caseId, seed, quick }) {
    const def = caseById(caseId);
    const kind = KINDS[def.kind];
    const ctx = {
      conn,
      peer: { name: peerName, sync: peer.sync },
      params: def.params,
      quick,
      rnd: (index) => subRandom(seed, `${caseId}:${index}`),
      // Unique values for live-query writes, so every write really changes its row. Every
      // peer's worker runs the same sequence, so the values match across peers too.
      fresh: () => 1_000_000 + ++counter + 0.5,
      get counter() {
        return counter;
      },
    };
    await kind.prepare(ctx);
    cases.set(caseId, { kind, ctx });
    return {};
  },

  async sample({ caseId, index }) {
    const c = cases.get(caseId);
    if (!c) throw new Error(`case ${caseId} not prepared`);
    return await c.kind.sample(c.ctx, index);
  },

  async teardown({ caseId }) {
    const c = cases.get(caseId);
    cases.delete(caseId);
    if (c?.kind.teardown) await c.kind.teardown(c.ctx);
    return {};
  },

  async close() {
    if (conn) await conn.close();
    conn = undefined;
    return { sink: sink % 1000 };
  },
};

process.on('message', async (msg) => {
  let reply;
  try {
    const h = handlers[msg.cmd];
    if (!h) throw new Error(`unknown command ${msg.cmd}`);
    reply = { id: msg.id, ok: true, ...(await h(msg)) };
  } catch (err) {
    reply = err instanceof NotAvailable || err?.name === 'NotAvailable'
      ? { id: msg.id, na: err.message }
      : { id: msg.id, error: err?.stack || String(err) };
  }
  process.send(reply);
  if (msg.cmd === 'close') process.disconnect();
});

process.on('disconnect', () => process.exit(0));
process.on('unhandledRejection', (err) => {
  process.send?.({ id: -1, error: `unhandled rejection: ${err?.stack || err}` });
});
