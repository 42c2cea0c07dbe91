// The live demo: a shared todo list whose list and counters are live queries (`db.stream`),
// pushed to every open page over Server-Sent Events. Open it in two tabs, change something
// in one, and the other updates. The page also shows what the live queries cost: runs,
// re-runs whose result was unchanged (skipped by hash, nothing sent), emissions.
//
//   npm run demo                      # http://localhost:3000
//   npm run demo -- --port 8080       # or PORT=8080 npm run demo; --port 0 picks a free port
//   npm run demo -- --db todos.db     # keep the data in a file (default: a private :memory: db)
import { readFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Database } from '../../dist/index.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const MAX_TITLE = 200;
const MAX_BODY = 4096;

/** The live queries every page shows. One LiveQuery each, shared by all pages. */
export const QUERIES = {
  todos: 'SELECT id, title, done FROM todos ORDER BY id',
  open: 'SELECT count(*) AS n FROM todos WHERE done = 0',
  done: 'SELECT count(*) AS n FROM todos WHERE done = 1',
};

const STATIC = {
  '/': ['index.html', 'text/html; charset=utf-8'],
  '/app.js': ['app.js', 'text/javascript; charset=utf-8'],
  '/style.css': ['style.css', 'text/css; charset=utf-8'],
};

/** The live-query registry's own counters, from `db.diagnostics()`. */
async function registryStats(db) {
  const { liveQueries: q } = await db.diagnostics();
  return { source: 'db.diagnostics()', groups: q.groups, runs: q.reruns, skippedByHash: q.skippedByHash };
}

/** Starts the demo; resolves with { url, port, close() }. */
export async function startDemo({ port = 3000, host = '127.0.0.1', db: dbPath = ':memory:' } = {}) {
  const db = await Database.open(dbPath);
  await db.execute(`CREATE TABLE IF NOT EXISTS todos(
    id INTEGER PRIMARY KEY, title TEXT NOT NULL, done INTEGER NOT NULL DEFAULT 0)`);
  const { rows } = await db.execute('SELECT count(*) AS n FROM todos');
  if (rows[0].n === 0) {
    await db.executeBatch('INSERT INTO todos(title, done) VALUES (?, ?)', [
      ['Open this page in a second tab', 0], ['Add a todo in one tab, watch the other', 0], ['Read docs/live-queries.md', 1],
    ]);
  }

  const clients = new Set();
  const broadcast = (event, data) => {
    const frame = `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;
    for (const res of clients) res.write(frame);
  };

  // One live query per panel; every emission goes to every page.
  const live = {};
  const counts = { writes: 0 };
  const emissions = Object.fromEntries(Object.keys(QUERIES).map((k) => [k, 0]));
  const stops = [];
  for (const [name, sql] of Object.entries(QUERIES)) {
    live[name] = db.stream(sql);
    stops.push(live[name].subscribe(
      (rows) => {
        emissions[name]++;
        broadcast('rows', { query: name, rows });
      },
      (err) => broadcast('failure', { query: name, message: err.message }),
    ));
  }

  let lastStats = '';
  const statsNow = async () => {
    return {
      pages: clients.size,
      writes: counts.writes,
      emissions: { ...emissions },
      registry: await registryStats(db),
      queries: QUERIES,
    };
  };
  // Runs finish on reader threads after the write that caused them: poll the counters and
  // push them when they moved.
  let polling = false;
  const poll = setInterval(async () => {
    if (polling || clients.size === 0) return;
    polling = true;
    try {
      const s = await statsNow();
      const text = JSON.stringify(s);
      if (text !== lastStats) {
        lastStats = text;
        broadcast('stats', s);
      }
    } catch {
      // the database is closing
    } finally {
      polling = false;
    }
  }, 250);

  const write = async (sql, params) => {
    const r = await db.execute(sql, params);
    counts.writes++;
    return r;
  };

  const server = createServer(async (req, res) => {
    const reply = (status, body) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    };
    try {
      const url = new URL(req.url, 'http://localhost');
      const path = url.pathname;
      if (req.method === 'GET' && STATIC[path]) {
        const [file, type] = STATIC[path];
        res.writeHead(200, { 'content-type': type, 'cache-control': 'no-store' });
        return res.end(await readFile(join(here, 'public', file)));
      }
      if (req.method === 'GET' && path === '/events') {
        res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-store', connection: 'keep-alive' });
        clients.add(res);
        req.on('close', () => clients.delete(res));
        // A new page starts from the current rows, then follows the emissions.
        for (const [name, q] of Object.entries(live)) {
          if (q.current !== undefined) res.write(`event: rows\ndata: ${JSON.stringify({ query: name, rows: q.current })}\n\n`);
        }
        lastStats = ''; // the new page needs the counters too
        return;
      }
      if (req.method === 'POST' && path === '/api/todos') {
        const body = await readJson(req);
        const title = typeof body?.title === 'string' ? body.title.trim() : '';
        if (title.length === 0 || title.length > MAX_TITLE) return reply(400, { error: `title: 1 to ${MAX_TITLE} characters` });
        const r = await write('INSERT INTO todos(title) VALUES (?)', [title]);
        return reply(201, { id: Number(r.lastInsertRowid) });
      }
      const m = /^\/api\/todos\/(\d{1,15})(\/toggle)?$/.exec(path);
      if (m && req.method === 'POST' && m[2]) {
        const r = await write('UPDATE todos SET done = 1 - done WHERE id = ?', [Number(m[1])]);
        return reply(r.changes ? 200 : 404, { changes: r.changes });
      }
      if (m && req.method === 'DELETE' && !m[2]) {
        const r = await write('DELETE FROM todos WHERE id = ?', [Number(m[1])]);
        return reply(r.changes ? 200 : 404, { changes: r.changes });
      }
      if (req.method === 'POST' && path === '/api/clear-done') {
        const r = await write('DELETE FROM todos WHERE done = 1');
        return reply(200, { changes: r.changes });
      }
      reply(404, { error: 'not found' });
    } catch (err) {
      if (res.headersSent) return res.destroy();
      reply(err.status ?? 500, { error: err.status ? err.message : 'internal error' });
      if (!err.status) console.error(err);
    }
  });
  // A heartbeat keeps idle event streams open through proxies.
  const heartbeat = setInterval(() => {
    for (const res of clients) res.write(': keep-alive\n\n');
  }, 15_000);

  try {
    await new Promise((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, resolve);
    });
  } catch (err) {
    clearInterval(poll);
    clearInterval(heartbeat);
    for (const stop of stops) stop();
    await db.close();
    if (err.code === 'EADDRINUSE') throw new Error(`port ${port} is in use: choose another with --port or PORT (0 picks a free one)`);
    throw err;
  }
  const actual = server.address().port;
  let closing;
  return {
    port: actual,
    url: `http://${host === '127.0.0.1' || host === '::1' ? 'localhost' : host}:${actual}/`,
    close: () =>
      (closing ??= (async () => {
        clearInterval(poll);
        clearInterval(heartbeat);
        for (const res of clients) res.end();
        clients.clear();
        server.closeAllConnections();
        await new Promise((resolve) => server.close(resolve));
        for (const stop of stops) stop();
        await db.close();
      })()),
  };
}

function readJson(req) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    let size = 0;
    req.on('data', (c) => {
      size += c.length;
      if (size > MAX_BODY) {
        reject(Object.assign(new Error('body too large'), { status: 413 }));
        req.destroy();
      } else chunks.push(c);
    });
    req.on('end', () => {
      try {
        resolve(JSON.parse(Buffer.concat(chunks).toString('utf8')));
      } catch {
        reject(Object.assign(new Error('body must be JSON'), { status: 400 }));
      }
    });
    req.on('error', reject);
  });
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { values } = parseArgs({
    options: {
      port: { type: 'string', default: process.env.PORT ?? '3000' },
      host: { type: 'string', default: '127.0.0.1' },
      db: { type: 'string', default: ':memory:' },
    },
  });
  const port = Number(values.port);
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    console.error(`--port (or PORT) must be an integer from 0 to 65535, got ${JSON.stringify(values.port)}`);
    process.exit(2);
  }
  let demo;
  try {
    demo = await startDemo({ port, host: values.host, db: values.db });
  } catch (err) {
    console.error(`demo: ${err.message}`);
    process.exit(1);
  }
  console.log(`quietsqlite demo: ${demo.url}  (open it in two tabs; Ctrl+C stops)`);
  const stop = () => demo.close().then(() => process.exit(0));
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}
