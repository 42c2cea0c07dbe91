// The HTTP JSON service under load: written once over a tiny driver interface, so each driver
// answers the same requests with the same code around it.
//
// Driver (drivers/<name>.mjs exports `open(path)` resolving to):
//   getItem(id)       -> row | undefined            (may return a promise)
//   listJson(limit)   -> string | Buffer of JSON     (may return a promise)
//   insertItem(item)  -> new id                      (may return a promise)
//   close()
//
// Run alone: node bench/server/server.mjs --driver quietsqlite --db items.db [--port 0]
// It prints one JSON line {"port", "version"} once listening, and exits when stdin ends
// (so a benchmark that dies never leaves a server behind) or on SIGTERM/SIGINT.
import { createServer } from 'node:http';
import { parseArgs } from 'node:util';
import { fileURLToPath } from 'node:url';

export const DRIVERS = ['better-sqlite3', 'node:sqlite', 'quietsqlite'];
export const MAX_LIMIT = 100_000;
const MAX_BODY = 64 * 1024;

export async function openDriver(name, path) {
  const file = name === 'node:sqlite' ? 'node-sqlite' : name;
  if (!DRIVERS.includes(name)) throw new Error(`unknown driver ${name}; one of ${DRIVERS.join(', ')}`);
  const mod = await import(`./drivers/${file}.mjs`);
  return mod.open(path);
}

function send(res, status, body) {
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

function readBody(req) {
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
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

function parseItem(text) {
  let v;
  try {
    v = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (v === null || typeof v !== 'object') return undefined;
  const { name, category = 'misc', price = 0, qty = 0, note = '' } = v;
  if (typeof name !== 'string' || typeof category !== 'string' || typeof note !== 'string') return undefined;
  if (typeof price !== 'number' || !Number.isFinite(price) || !Number.isInteger(qty)) return undefined;
  return { name, category, price, qty, note };
}

/** The request handler over one driver. */
export function handler(driver) {
  return async (req, res) => {
    try {
      const url = new URL(req.url, 'http://localhost');
      const m = /^\/items\/(\d{1,15})$/.exec(url.pathname);
      if (req.method === 'GET' && m) {
        const row = await driver.getItem(Number(m[1]));
        return row === undefined ? send(res, 404, '{"error":"not found"}') : send(res, 200, JSON.stringify(row));
      }
      if (url.pathname === '/items') {
        if (req.method === 'GET') {
          const raw = url.searchParams.get('limit') ?? '100';
          const limit = Number(raw);
          if (!Number.isInteger(limit) || limit < 1 || limit > MAX_LIMIT) {
            return send(res, 400, JSON.stringify({ error: `limit must be an integer from 1 to ${MAX_LIMIT}` }));
          }
          return send(res, 200, await driver.listJson(limit));
        }
        if (req.method === 'POST') {
          const item = parseItem(await readBody(req));
          if (item === undefined) return send(res, 400, '{"error":"expected {name, category?, price?, qty?, note?}"}');
          const id = await driver.insertItem(item);
          return send(res, 201, JSON.stringify({ id }));
        }
      }
      send(res, 404, '{"error":"no such route"}');
    } catch (err) {
      if (!res.headersSent) send(res, err.status ?? 500, JSON.stringify({ error: err.status ? err.message : 'internal error' }));
      else res.destroy();
      if (!err.status) console.error(err);
    }
  };
}

async function main() {
  const { values } = parseArgs({
    options: { driver: { type: 'string' }, db: { type: 'string' }, port: { type: 'string', default: '0' } },
  });
  if (!values.driver || !values.db) throw new Error('usage: server.mjs --driver NAME --db PATH [--port N]');
  const driver = await openDriver(values.driver, values.db);
  const server = createServer(handler(driver));
  server.keepAliveTimeout = 60_000;
  await new Promise((resolve) => server.listen(Number(values.port), '127.0.0.1', resolve));
  let stopping = false;
  const stop = async () => {
    if (stopping) return;
    stopping = true;
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
    await driver.close();
    process.exit(0);
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  process.stdin.on('end', stop);
  process.stdin.resume();
  console.log(JSON.stringify({ port: server.address().port, version: driver.version }));
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  main().catch((err) => {
    console.error(err);
    process.exit(1);
  });
}
