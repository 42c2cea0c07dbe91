// What is measured: suites, their cases and metrics. Plain data shared by the coordinator
// (scheduling, reporting) and the workers (which look up a case's params by id).
// Times are always milliseconds (per operation unless the label says otherwise).

export const PEERS = ['better-sqlite3', 'node:sqlite', 'sqlite3', 'quietsqlite'];
export const BASELINE = 'better-sqlite3';
export const SYNC_PEERS = new Set(['better-sqlite3', 'node:sqlite']);

// unit: how to format; better: which direction is good; noRatio: a ratio would mean nothing
// (a difference that can be zero or negative). Counts get no ratio either.
export const METRICS = {
  qps: { label: 'throughput', unit: 'op/s', better: 'higher' },
  rowsps: { label: 'throughput', unit: 'rows/s', better: 'higher' },
  wall: { label: 'wall', unit: 'ms', better: 'lower' },
  main: { label: 'main-thread', unit: 'ms', better: 'lower' },
  mainTouch: { label: 'main-thread incl. touching every field', unit: 'ms', better: 'lower' },
  p50: { label: 'event-loop delay p50', unit: 'ms', better: 'lower' },
  p99: { label: 'event-loop delay p99', unit: 'ms', better: 'lower' },
  max: { label: 'event-loop delay max', unit: 'ms', better: 'lower' },
  latency: { label: 'latency', unit: 'ms', better: 'lower' },
  extraMain: { label: 'main-thread beyond the writes', unit: 'ms', better: 'lower' },
  emits: { label: 'emissions', unit: 'count', better: 'lower' },
  wrongEmits: { label: 'wrong emissions', unit: 'count', better: 'lower' },
  rssPeak: { label: 'peak RSS', unit: 'MB', better: 'lower' },
  rssGrowth: { label: 'RSS growth over the last half', unit: 'MB', better: 'lower', noRatio: true },
  overhead: { label: 'encrypted / plain', unit: 'x', better: 'lower', noRatio: true },
  plainWall: { label: 'plain wall', unit: 'ms', better: 'lower', noRatio: true },
  encWall: { label: 'encrypted wall', unit: 'ms', better: 'lower', noRatio: true },
};

const it = (full, quick) => [full, quick];

/**
 * Case fields:
 *  id, label, kind (worker implementation), params, metrics (primary first),
 *  iters/warm: [full, quick], only: 'async' | [peers] (others get n/a),
 *  baseline: peer the ratios are computed against (default better-sqlite3),
 *  series: the case also returns a time series for the dashboard,
 *  isolate: run in fresh worker processes (memory: RSS must not inherit other cases' heap),
 *  quickSkip: peers not run under --quick (the naive live baseline's 100k re-runs in
 *  mem-streams alone would take ~20 s of the 3-minute budget; its RSS is not a target).
 *  Reported as "skipped", not "n/a".
 */
export const SUITES = [
  {
    id: 'point',
    n: 1,
    title: 'Point query by primary key',
    about: '`SELECT * FROM items WHERE id = ?` with random ids. Sequential awaits, and 64 queries in flight for asynchronous peers (sqlite3 gets one prepared statement per slot); then quietsqlite again through `db.prepare()` instead of SQL text, and opened with `inlineReads: true` (reads run on the JavaScript thread under a 50 µs budget).',
    cases: [
      { id: 'point-seq', label: 'sequential', kind: 'point', params: { inflight: 1, batch: 2000 }, metrics: ['qps', 'wall', 'main'], iters: it(40, 8), warm: it(5, 2) },
      { id: 'point-64', label: '64 in flight', kind: 'point', params: { inflight: 64, batch: 5000 }, metrics: ['qps', 'main'], only: 'async', iters: it(40, 8), warm: it(5, 2) },
      // Experiment 014: quietsqlite through a prepared statement (db.prepare) instead of SQL text.
      { id: 'point-stmt-seq', label: 'sequential, quietsqlite via db.prepare()', kind: 'point', params: { inflight: 1, batch: 2000, statement: true }, metrics: ['qps', 'wall', 'main'], only: ['better-sqlite3', 'quietsqlite'], iters: it(40, 8), warm: it(5, 2) },
      { id: 'point-stmt-64', label: '64 in flight, quietsqlite via db.prepare()', kind: 'point', params: { inflight: 64, batch: 5000, statement: true }, metrics: ['qps', 'main'], only: ['quietsqlite'], iters: it(40, 8), warm: it(5, 2) },
      // Experiment 022: quietsqlite opened with `inlineReads: true` (bounded inline reads).
      { id: 'point-inline-seq', label: 'sequential, quietsqlite with inlineReads', kind: 'point', params: { inflight: 1, batch: 2000, inline: true }, metrics: ['qps', 'wall', 'main'], only: ['quietsqlite'], iters: it(40, 8), warm: it(5, 2) },
      { id: 'point-inline-64', label: '64 in flight, quietsqlite with inlineReads', kind: 'point', params: { inflight: 64, batch: 5000, inline: true }, metrics: ['qps', 'main'], only: ['quietsqlite'], iters: it(40, 8), warm: it(5, 2) },
    ],
  },
  {
    id: 'select',
    n: 2,
    title: 'Select N rows',
    about: '`SELECT * FROM items WHERE id > ? ORDER BY id LIMIT N` from a random start. Wall and main-thread time to receive the rows, and main-thread time when every field of every row is also read.',
    cases: [10, 100, 1000, 10000, 20000].map((n) => ({
      id: `select-${label(n)}`,
      label: `${n.toLocaleString('en-US')} rows`,
      kind: 'select',
      params: { rows: n, batch: n <= 10 ? 200 : n <= 100 ? 100 : n <= 1000 ? 10 : n <= 10000 ? 2 : 1 },
      metrics: ['wall', 'main', 'mainTouch'],
      iters: it(n >= 10000 ? 30 : 40, n >= 10000 ? 4 : 6),
      warm: it(3, 1),
    })),
  },
  {
    id: 'json',
    n: 3,
    title: 'JSON response',
    about: 'Rows to a JSON text ready to send: peers run `JSON.stringify(rows)`, quietsqlite returns UTF-8 JSON from `selectBytes`.',
    cases: [1000, 10000].map((n) => ({
      id: `json-${label(n)}`,
      label: `${n.toLocaleString('en-US')} rows`,
      kind: 'json',
      params: { rows: n, batch: n <= 1000 ? 5 : 1 },
      metrics: ['wall', 'main'],
      iters: it(30, 5),
      warm: it(3, 1),
    })),
  },
  {
    id: 'shapes',
    n: 4,
    title: 'Schema shapes (1k rows)',
    about: '1,000-row selects over tables of different shapes: narrow (2 columns), wide (20 columns), text-heavy (~1 KB per row), numeric, and 50% NULL. Main-thread time includes reading every field.',
    cases: ['narrow', 'wide', 'text', 'numeric', 'nulls'].map((shape) => ({
      id: `shape-${shape}`,
      label: shape === 'text' ? 'text-heavy' : shape === 'nulls' ? '50% NULL' : shape,
      kind: 'shape',
      params: { shape, rows: 1000, batch: 10 },
      metrics: ['wall', 'mainTouch'],
      iters: it(30, 4),
      warm: it(3, 1),
    })),
  },
  {
    id: 'concurrent',
    n: 5,
    title: 'Concurrent reads',
    about: '16 selects of 1,000 rows (every field read) with 1, 2, 4 or 8 in flight. Synchronous peers can only run one at a time, so only their "1 in flight" is measured.',
    cases: [1, 2, 4, 8].map((k) => ({
      id: `concurrent-${k}`,
      label: `${k} in flight`,
      kind: 'concurrent',
      params: { inflight: k, rows: 1000, total: 16 },
      metrics: ['qps', 'main'],
      only: k === 1 ? undefined : 'async',
      iters: it(30, 5),
      warm: it(3, 1),
    })),
  },
  {
    id: 'params',
    n: 6,
    title: 'Parameterized queries',
    about: '100 queries `SELECT * FROM items WHERE category = ?` (indexed, ~500 rows each) with different categories, awaited one after another; every field read. Times are per query.',
    cases: [{ id: 'params-100', label: '100 x ~500 rows', kind: 'params', params: { queries: 100 }, metrics: ['wall', 'mainTouch'], iters: it(30, 2), warm: it(2, 1) }],
  },
  {
    id: 'writes',
    n: 7,
    title: 'Writes',
    about: 'Inserts into a table shaped like `items` (emptied between samples, untimed). Batches run in one transaction with the peer\'s idiomatic API (better-sqlite3 `transaction()`, node:sqlite BEGIN/COMMIT around a reused statement, sqlite3 queued `run`s, quietsqlite `executeBatch`). Interactive transaction: insert, read back, delete when price > 500; quietsqlite uses `db.transaction`.',
    cases: [
      { id: 'insert-100', label: '100 single inserts (autocommit)', kind: 'singleInserts', params: { count: 100 }, metrics: ['wall', 'main'], iters: it(30, 5), warm: it(2, 1) },
      ...[100, 1000, 10000, 100000].map((n) => ({
        id: `batch-${label(n)}`,
        label: `batch ${n.toLocaleString('en-US')} rows`,
        kind: 'batch',
        params: { rows: n },
        metrics: ['rowsps', 'wall', 'main'],
        iters: n >= 100000 ? it(10, 1) : n >= 10000 ? it(20, 3) : it(30, 5),
        warm: n >= 100000 ? it(1, 0) : it(2, 1),
      })),
      { id: 'tx-interactive', label: 'interactive transaction', kind: 'txInteractive', params: { count: 50 }, metrics: ['wall', 'main'], iters: it(30, 5), warm: it(2, 1) },
      { id: 'tx-batch-1k', label: 'transaction: executeBatch 1k rows', kind: 'txRows', params: { rows: 1000, mode: 'batch' }, metrics: ['wall', 'main'], iters: it(30, 5), warm: it(2, 1) },
      { id: 'tx-loop-1k', label: 'transaction: execute loop 1k rows', kind: 'txRows', params: { rows: 1000, mode: 'loop' }, metrics: ['wall', 'main'], iters: it(30, 5), warm: it(2, 1) },
    ],
  },
  {
    id: 'eld',
    n: 8,
    title: 'Event-loop delay',
    about: '`monitorEventLoopDelay` (1 ms resolution; shown as delay beyond that interval) while 10,000-row selects run back to back (every field read) for 3 s, and while idle for 1 s. The dashboard plots the worst delay in each 50 ms window.',
    cases: [
      { id: 'eld-idle', label: 'idle', kind: 'eld', params: { seconds: 1, load: false }, metrics: ['p50', 'p99', 'max'], iters: it(3, 1), warm: it(0, 0) },
      { id: 'eld-10k', label: '10k-row selects back to back', kind: 'eld', params: { seconds: 3, load: true, rows: 10000 }, metrics: ['p99', 'p50', 'max', 'qps'], iters: it(3, 1), warm: it(0, 0), series: 'eld' },
    ],
  },
  {
    id: 'live',
    n: 9,
    title: 'Live queries',
    about: 'quietsqlite `db.stream()` against a naive baseline on sqlite3: every watcher re-runs its query on every `change` event and emits only when its rows differ. Ratios here are to that naive baseline. Synchronous peers have no change notification (n/a).',
    baseline: 'sqlite3',
    cases: [
      { id: 'live-first', label: 'first emission (1k rows)', kind: 'liveFirst', params: { rows: 1000 }, metrics: ['latency', 'main'], only: 'async', iters: it(30, 6), warm: it(3, 1) },
      { id: 'live-latency', label: 'invalidation latency (write issued to callback)', kind: 'liveLatency', params: {}, metrics: ['latency', 'main'], only: 'async', iters: it(50, 10), warm: it(5, 2) },
      { id: 'live-unchanged', label: 'unchanged fan-out: 10 streams x 1k rows, 200 writes elsewhere', kind: 'liveUnchanged', params: { streams: 10, rows: 1000, writes: 200 }, metrics: ['extraMain', 'wrongEmits'], only: 'async', iters: it(10, 1), warm: it(1, 0) },
      { id: 'live-fanout', label: '100 streams x 200 writes', kind: 'liveFanout', params: { streams: 100, writes: 200 }, metrics: ['wall', 'main', 'emits', 'wrongEmits'], only: 'async', iters: it(10, 1), warm: it(1, 0) },
      { id: 'live-keyed', label: 'keyed: 50 id streams, 200 updates, 3 hits', kind: 'liveKeyed', params: { streams: 50, writes: 200, hits: 3 }, metrics: ['wall', 'main', 'emits', 'wrongEmits'], only: 'async', iters: it(20, 3), warm: it(1, 1) },
    ],
  },
  {
    id: 'memory',
    n: 10,
    title: 'Memory',
    about: 'Resident set size (RSS) of the peer\'s process, sampled while reading 10,000 rows (every field read) 100 times, while iterating over all 100,000 rows with `iterate()` (every field read; wall and main-thread time per pass, peak RSS sampled every 1,000 rows), and while 100 live streams see 1,000 writes. Each round is a block of 10 reads / 100 writes; "growth" compares the peak of the second half with the peak of the first.',
    cases: [
      { id: 'mem-reads', label: '100 x 10k-row reads', kind: 'memReads', params: { rows: 10000, perBlock: 10 }, metrics: ['rssPeak', 'rssGrowth'], iters: it(10, 10), warm: it(0, 0), series: 'rss', finalize: 'rss', isolate: true },
      { id: 'mem-iterate', label: 'iterate 100k rows', kind: 'iterate', params: { rows: 100_000 }, metrics: ['wall', 'main', 'rssPeak'], only: ['better-sqlite3', 'node:sqlite', 'quietsqlite'], iters: it(5, 2), warm: it(1, 0), isolate: true },
      { id: 'mem-streams', label: '100 streams, 1,000 writes', kind: 'memStreams', params: { streams: 100, perBlock: 100 }, metrics: ['rssPeak', 'rssGrowth'], only: 'async', quickSkip: ['sqlite3'], iters: it(10, 10), warm: it(0, 0), series: 'rss', finalize: 'rss', isolate: true },
    ],
  },
  {
    id: 'encryption',
    n: 11,
    title: 'Encryption overhead',
    about: 'quietsqlite only: the same work on a plain database and on one encrypted with `encryptionKey` (default cipher chacha20), each a fresh 10,000-row copy of `items` beside the suite\'s file; the primary metric is the ratio encrypted / plain wall time within each sample (plain and encrypted alternate which goes first). Reads: one 10,000-row select (every field read). Writes: an `executeBatch` of 1,000 rows (deleted after each sample, untimed). Pages already in a connection\'s page cache are kept decrypted, so a repeated read pays decryption only for the pages it loads from the file.',
    cases: [
      { id: 'enc-read-10k', label: 'select 10k rows', kind: 'encryption', params: { op: 'read', rows: 10000 }, metrics: ['overhead', 'plainWall', 'encWall'], only: ['quietsqlite'], iters: it(30, 4), warm: it(2, 1) },
      { id: 'enc-write-1k', label: 'batch 1k rows', kind: 'encryption', params: { op: 'write', rows: 1000 }, metrics: ['overhead', 'plainWall', 'encWall'], only: ['quietsqlite'], iters: it(30, 4), warm: it(2, 1) },
    ],
  },
  {
    id: 'udf',
    n: 12,
    title: 'User-defined function',
    about: 'A scalar JavaScript function `add1(x)` called once per row: `SELECT add1(id) AS v FROM items WHERE id <= 10000` (10,000 calls). better-sqlite3 and node:sqlite call it on the event loop in the statement; quietsqlite calls it on the event loop while the native thread waits (one thread hop per call). sqlite3 has no user-defined functions (n/a). Times are per query of 10,000 calls; the baseline runs `SELECT id + 1` over the same rows, so the difference divided by 10,000 is the cost of one call.',
    cases: [
      { id: 'udf-10k', label: 'scalar UDF over 10k rows', kind: 'udf', params: { rows: 10000, call: true }, metrics: ['wall', 'main'], iters: it(30, 4), warm: it(2, 1) },
      { id: 'udf-none-10k', label: 'same rows without the UDF (baseline)', kind: 'udf', params: { rows: 10000, call: false }, metrics: ['wall', 'main'], iters: it(30, 4), warm: it(2, 1) },
    ],
  },
];

function label(n) {
  return n >= 1000 ? `${n / 1000}k` : String(n);
}

export const ALL_CASES = SUITES.flatMap((s) => s.cases.map((c) => ({ ...c, suite: s.id })));
export const caseById = (id) => ALL_CASES.find((c) => c.id === id);
export const suiteOf = (caseId) => SUITES.find((s) => s.cases.some((c) => c.id === caseId));

/** Whether a peer takes part in a case (false means "n/a" in the report). */
export function peerApplies(caseDef, peer) {
  if (!caseDef.only) return true;
  if (caseDef.only === 'async') return !SYNC_PEERS.has(peer);
  return caseDef.only.includes(peer);
}

/** Select suites by a list of ids or numbers ("1,select,9"); all when empty. */
export function selectSuites(list) {
  if (!list || list.length === 0) return SUITES;
  const wanted = new Set(list.map(String));
  const picked = SUITES.filter((s) => wanted.has(s.id) || wanted.has(String(s.n)));
  const unknown = [...wanted].filter((w) => !SUITES.some((s) => s.id === w || String(s.n) === w));
  if (unknown.length) throw new Error(`unknown suite(s): ${unknown.join(', ')} (known: ${SUITES.map((s) => `${s.n}/${s.id}`).join(', ')})`);
  return picked;
}
