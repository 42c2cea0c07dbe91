// Worker side: how each kind of case runs against a peer adapter (see bench/peers/*.mjs).
// Every case has prepare(ctx) (untimed setup, may throw NotAvailable), sample(ctx, index)
// returning { metrics, series? }, and optional teardown(ctx).
//
// Fairness rules applied throughout:
//  - parameters of sample `index` come from subRandom(seed, `${case}:${index}`), so every
//    peer runs exactly the same queries in the same round;
//  - all parameter arrays and rows to insert are built before the clock starts;
//  - synchronous peers run plain loops (no await per call): that is their idiomatic speed;
//  - main-thread time is performance.eventLoopUtilization() active time over the batch.
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import { NotAvailable, sleep, tick } from './common.mjs';
import {
  CATEGORIES, INSERT_ITEM, ITEMS_DDL, ITEMS_ROWS, ITEM_COLS, LIVE_CATEGORIES, LIVE_ROWS, SHAPES, SHAPE_ROWS,
  category, itemRow, liveCategory, makeRowToucher, makeToucher, randInt, shapeCols, subRandom,
} from './data.mjs';

const now = () => performance.now();
const ELD_RESOLUTION_MS = 1;
const LIVE_TIMEOUT_MS = 30_000;

// Results are folded into this so no engine can prove the work unused.
export let sink = 0;
const touchItems = makeToucher(ITEM_COLS);
const touchItem = makeRowToucher(ITEM_COLS);

/** Time a batch: wall ms and main-thread (event-loop active) ms. */
async function measure(fn) {
  const e0 = performance.eventLoopUtilization();
  const t0 = now();
  await fn();
  const t1 = now();
  const active = performance.eventLoopUtilization(e0).active;
  return { wall: t1 - t0, active };
}

/** Times `count` calls of `call(i)`, handing each result to `use`: a plain loop for
 * synchronous peers (no await, so no microtask per call), an awaited loop for the others. */
function measureLoop(sync, count, call, use) {
  return sync
    ? measure(() => {
        for (let i = 0; i < count; i++) use(call(i));
      })
    : measure(async () => {
        for (let i = 0; i < count; i++) use(await call(i));
      });
}

/** Run `total` jobs with `inflight` lanes, each lane awaiting its own handle. */
async function lanes(handles, total, job) {
  let next = 0;
  await Promise.all(
    handles.map(async (h) => {
      for (let i = next++; i < total; i = next++) await job(h, i);
    }),
  );
}

const SELECT_RANGE = 'SELECT * FROM items WHERE id > ? ORDER BY id LIMIT ?';
const startsFor = (rnd, count, rows, tableRows = ITEMS_ROWS) =>
  Array.from({ length: count }, () => [randInt(rnd, 0, tableRows - rows), rows]);

function requireAsync(ctx) {
  if (ctx.peer.sync) throw new NotAvailable('synchronous driver: one query at a time');
}

export const KINDS = {
  // Suite 12: a scalar user-defined function called once per row.
  udf: {
    prepare(ctx) {
      if (typeof ctx.conn.fn !== 'function') throw new NotAvailable('no user-defined functions');
      ctx.conn.fn('add1', (x) => x + 1);
      const expr = ctx.params.call ? 'add1(id)' : 'id + 1';
      ctx.h = ctx.conn.prepare(`SELECT ${expr} AS v FROM items WHERE id <= ${ctx.params.rows}`);
    },
    async sample(ctx) {
      const h = ctx.h;
      const m = await measureLoop(ctx.peer.sync, 1, () => h.all([]), (r) => (sink += r.length));
      return { metrics: { wall: m.wall, main: m.active } };
    },
  },

  // Suite 1: point query by primary key.
  point: {
    async prepare(ctx) {
      const { inflight, statement, inline } = ctx.params;
      const sql = 'SELECT * FROM items WHERE id = ?';
      // `inline`: quietsqlite opened again with `inlineReads: true` (experiment 022).
      let conn = ctx.conn;
      if (inline) {
        if (typeof ctx.conn.reopen !== 'function') throw new NotAvailable('no inlineReads');
        conn = ctx.inlineConn = await ctx.conn.reopen({ inlineReads: true });
      }
      // `statement`: quietsqlite through db.prepare() (the other peers always prepare).
      const prepare = statement && conn.statement ? conn.statement : conn.prepare;
      if (inflight > 1) {
        requireAsync(ctx);
        ctx.handles = statement ? Array.from({ length: inflight }, () => prepare(sql)) : conn.lanes(sql, inflight);
      } else ctx.h = prepare(sql);
    },
    teardown: (ctx) => ctx.inlineConn?.close(),
    async sample(ctx, index) {
      const { batch, inflight } = ctx.params;
      const rnd = ctx.rnd(index);
      const params = Array.from({ length: batch }, () => [randInt(rnd, 1, ITEMS_ROWS)]);
      let m;
      if (ctx.peer.sync) {
        const h = ctx.h;
        m = await measure(() => {
          for (let i = 0; i < batch; i++) sink += touchItem(h.get(params[i]));
        });
      } else if (inflight === 1) {
        const h = ctx.h;
        m = await measure(async () => {
          for (let i = 0; i < batch; i++) sink += touchItem(await h.get(params[i]));
        });
      } else {
        m = await measure(() => lanes(ctx.handles, batch, async (h, i) => (sink += touchItem(await h.get(params[i])))));
      }
      return { metrics: { qps: batch / (m.wall / 1000), wall: m.wall / batch, main: m.active / batch } };
    },
  },

  // Suite 2: N rows; a receive-only batch, then a batch that reads every field.
  select: {
    prepare(ctx) {
      ctx.h = ctx.conn.prepare(SELECT_RANGE);
    },
    async sample(ctx, index) {
      const { rows, batch } = ctx.params;
      const rnd = ctx.rnd(index);
      const plainParams = startsFor(rnd, batch, rows);
      const touchParams = startsFor(rnd, batch, rows);
      const h = ctx.h;
      const sync = ctx.peer.sync;
      const runPlain = () => measureLoop(sync, batch, (i) => h.all(plainParams[i]), (r) => (sink += r.length));
      const runTouch = () => measureLoop(sync, batch, (i) => h.all(touchParams[i]), (r) => (sink += touchItems(r)));
      // Alternate which batch goes first so leftover garbage from the previous sample is
      // collected during either one equally often.
      let plain, touched;
      if (index % 2 === 0) {
        plain = await runPlain();
        touched = await runTouch();
      } else {
        touched = await runTouch();
        plain = await runPlain();
      }
      return { metrics: { wall: plain.wall / batch, main: plain.active / batch, mainTouch: touched.active / batch } };
    },
  },

  // Suite 3: rows to JSON text (peers: JSON.stringify; quietsqlite: selectBytes).
  json: {
    prepare(ctx) {
      ctx.h = ctx.conn.prepare(SELECT_RANGE);
    },
    async sample(ctx, index) {
      const { rows, batch } = ctx.params;
      const params = startsFor(ctx.rnd(index), batch, rows);
      const { h, conn } = ctx;
      const m = await measureLoop(ctx.peer.sync, batch, (i) => conn.json(h, params[i]), (j) => (sink += j.length));
      return { metrics: { wall: m.wall / batch, main: m.active / batch } };
    },
  },

  // Suite 4: 1k rows from differently shaped tables, every field read.
  shape: {
    prepare(ctx) {
      const { shape } = ctx.params;
      ctx.h = ctx.conn.prepare(`SELECT * FROM ${SHAPES[shape].table} WHERE id > ? ORDER BY id LIMIT ?`);
      ctx.touch = makeToucher(shapeCols(shape));
    },
    async sample(ctx, index) {
      const { rows, batch } = ctx.params;
      const params = startsFor(ctx.rnd(index), batch, rows, SHAPE_ROWS);
      const { h, touch } = ctx;
      const m = await measureLoop(ctx.peer.sync, batch, (i) => h.all(params[i]), (r) => (sink += touch(r)));
      return { metrics: { wall: m.wall / batch, mainTouch: m.active / batch } };
    },
  },

  // Suite 5: 1k-row selects with k in flight.
  concurrent: {
    prepare(ctx) {
      const { inflight } = ctx.params;
      if (inflight > 1) requireAsync(ctx);
      ctx.handles = ctx.peer.sync ? [ctx.conn.prepare(SELECT_RANGE)] : ctx.conn.lanes(SELECT_RANGE, inflight);
    },
    async sample(ctx, index) {
      const { rows, total } = ctx.params;
      const params = startsFor(ctx.rnd(index), total, rows);
      let m;
      if (ctx.peer.sync) {
        const h = ctx.handles[0];
        m = await measure(() => {
          for (let i = 0; i < total; i++) sink += touchItems(h.all(params[i]));
        });
      } else {
        m = await measure(() => lanes(ctx.handles, total, async (h, i) => (sink += touchItems(await h.all(params[i])))));
      }
      return { metrics: { qps: total / (m.wall / 1000), main: m.active / total } };
    },
  },

  // Suite 6: 100 indexed-category queries (~500 rows each), sequential.
  params: {
    prepare(ctx) {
      ctx.h = ctx.conn.prepare('SELECT * FROM items WHERE category = ?');
    },
    async sample(ctx, index) {
      const { queries } = ctx.params;
      const rnd = ctx.rnd(index);
      const params = Array.from({ length: queries }, () => [category(Math.floor(rnd() * CATEGORIES))]);
      const h = ctx.h;
      const m = await measureLoop(ctx.peer.sync, queries, (i) => h.all(params[i]), (r) => (sink += touchItems(r)));
      return { metrics: { wall: m.wall / queries, mainTouch: m.active / queries } };
    },
  },

  // Suite 7: writes into `writes` (emptied after every sample, untimed).
  singleInserts: {
    prepare(ctx) {
      ctx.h = ctx.conn.prepare(INSERT_ITEM('writes'));
    },
    async sample(ctx, index) {
      const { count } = ctx.params;
      const rnd = ctx.rnd(index);
      const rows = Array.from({ length: count }, (_, i) => itemRow(rnd, i));
      const h = ctx.h;
      const m = await measureLoop(ctx.peer.sync, count, (i) => h.run(rows[i]), () => {});
      await resetWrites(ctx);
      return { metrics: { wall: m.wall / count, main: m.active / count } };
    },
  },

  batch: {
    prepare(ctx) {
      ctx.h = ctx.conn.prepare(INSERT_ITEM('writes'));
      const rnd = ctx.rnd('rows');
      ctx.rows = Array.from({ length: ctx.params.rows }, (_, i) => itemRow(rnd, i));
    },
    async sample(ctx) {
      const { conn, h, rows } = ctx;
      const m = await measure(() => conn.insertBatch(h, rows));
      await resetWrites(ctx);
      return { metrics: { rowsps: rows.length / (m.wall / 1000), wall: m.wall, main: m.active } };
    },
    teardown: (ctx) => resetWrites(ctx),
  },

  // Insert, read it back, delete it when price > 500; one transaction each.
  txInteractive: {
    async prepare(ctx) {
      const { conn } = ctx;
      ctx.ins = conn.prepare(INSERT_ITEM('writes'));
      ctx.sel = conn.prepare('SELECT * FROM writes WHERE id = ?');
      ctx.del = conn.prepare('DELETE FROM writes WHERE id = ?');
      const { ins, sel, del } = ctx;
      let row;
      ctx.fn = ctx.peer.sync
        ? (tx) => {
            const r = tx.run(ins, row);
            const back = tx.get(sel, [r.lastInsertRowid]);
            if (back.price > 500) tx.run(del, [back.id]);
          }
        : async (tx) => {
            const r = await tx.run(ins, row);
            const back = await tx.get(sel, [r.lastInsertRowid]);
            if (back.price > 500) await tx.run(del, [back.id]);
          };
      ctx.setRow = (r) => (row = r);
      // Probe once so a missing `transaction` shows as n/a, not as a failed sample.
      ctx.setRow(itemRow(ctx.rnd('probe'), 0));
      await conn.transaction(ctx.fn);
      await resetWrites(ctx);
    },
    async sample(ctx, index) {
      const { count } = ctx.params;
      const rnd = ctx.rnd(index);
      const rows = Array.from({ length: count }, (_, i) => itemRow(rnd, i));
      const { conn, fn, setRow } = ctx;
      const m = ctx.peer.sync
        ? await measure(() => {
            for (let i = 0; i < count; i++) {
              setRow(rows[i]);
              conn.transaction(fn);
            }
          })
        : await measure(async () => {
            for (let i = 0; i < count; i++) {
              setRow(rows[i]);
              await conn.transaction(fn);
            }
          });
      await resetWrites(ctx);
      return { metrics: { wall: m.wall / count, main: m.active / count } };
    },
  },

  // 1k rows inside an explicit transaction: one batch call, or one awaited call per row.
  txRows: {
    async prepare(ctx) {
      const { conn } = ctx;
      ctx.h = conn.prepare(INSERT_ITEM('writes'));
      const rnd = ctx.rnd('rows');
      ctx.rows = Array.from({ length: ctx.params.rows }, (_, i) => itemRow(rnd, i));
      const { h, rows } = ctx;
      if (ctx.params.mode === 'batch') ctx.fn = (tx) => tx.batch(h, rows);
      else if (ctx.peer.sync)
        ctx.fn = (tx) => {
          for (let i = 0; i < rows.length; i++) tx.run(h, rows[i]);
        };
      else
        ctx.fn = async (tx) => {
          for (let i = 0; i < rows.length; i++) await tx.run(h, rows[i]);
        };
      await conn.transaction((tx) => tx.batch(h, rows.slice(0, 1))); // probe: n/a if missing
      await resetWrites(ctx);
    },
    async sample(ctx) {
      const { conn, fn } = ctx;
      const m = await measure(() => conn.transaction(fn));
      await resetWrites(ctx);
      return { metrics: { wall: m.wall, main: m.active } };
    },
  },

  // Suite 8: event-loop delay, idle or under back-to-back 10k-row selects.
  eld: {
    prepare(ctx) {
      ctx.h = ctx.conn.prepare(SELECT_RANGE);
    },
    async sample(ctx, index) {
      const { seconds, load, rows } = ctx.params;
      const rnd = ctx.rnd(index);
      const params = load ? startsFor(rnd, 2000, rows) : [];
      const overall = monitorEventLoopDelay({ resolution: ELD_RESOLUTION_MS });
      const windowed = monitorEventLoopDelay({ resolution: ELD_RESOLUTION_MS });
      const timeline = [];
      const t0 = now();
      overall.enable();
      windowed.enable();
      // The worst delay of each 50 ms window, for the dashboard's "delay over time" chart.
      // Windows without a single recorded interval (the loop was blocked throughout) are
      // skipped rather than drawn as zero; their delay shows up in the next window.
      const timer = setInterval(() => {
        if (windowed.count > 0) timeline.push([Math.round(now() - t0), Math.max(0, windowed.max / 1e6 - ELD_RESOLUTION_MS)]);
        windowed.reset();
      }, 50);
      const end = t0 + seconds * 1000;
      let queries = 0;
      if (!load) await sleep(seconds * 1000);
      else if (ctx.peer.sync) {
        // A synchronous driver blocks the loop for a whole query; yield between queries so
        // timers can run at all (this is the best such an app can do).
        const h = ctx.h;
        while (now() < end) {
          sink += touchItems(h.all(params[queries++ % params.length]));
          await tick();
        }
      } else {
        const h = ctx.h;
        while (now() < end) sink += touchItems(await h.all(params[queries++ % params.length]));
      }
      const elapsed = now() - t0;
      clearInterval(timer);
      overall.disable();
      windowed.disable();
      const ms = (v) => Math.max(0, v / 1e6 - ELD_RESOLUTION_MS);
      const metrics = { p50: ms(overall.percentile(50)), p99: ms(overall.percentile(99)), max: ms(overall.max) };
      if (load) metrics.qps = queries / (elapsed / 1000);
      return { metrics, series: { timeline } };
    },
  },

  // Suite 9: live queries.
  liveFirst: {
    prepare(ctx) {
      requireAsync(ctx);
      probeStream(ctx);
    },
    async sample(ctx, index) {
      const { rows } = ctx.params;
      const start = randInt(ctx.rnd(index), 0, LIVE_ROWS - rows);
      let unsub;
      const m = await measure(
        () =>
          new Promise((resolve, reject) => {
            unsub = ctx.conn.stream('SELECT * FROM live WHERE id > ? ORDER BY id LIMIT ?', [start, rows], (r) => {
              sink += r.length;
              resolve();
            }, reject);
          }),
      );
      unsub();
      return { metrics: { latency: m.wall, main: m.active } };
    },
  },

  liveLatency: {
    async prepare(ctx) {
      requireAsync(ctx);
      const cat = 7;
      ctx.ids = Array.from({ length: LIVE_ROWS / LIVE_CATEGORIES }, (_, k) => cat + k * LIVE_CATEGORIES);
      ctx.upd = ctx.conn.prepare('UPDATE live SET price = ? WHERE id = ?');
      ctx.watch = new Watch(ctx.conn, 'SELECT id, name, price FROM live WHERE category = ? ORDER BY id', [liveCategory(cat)]);
      await ctx.watch.ready();
    },
    async sample(ctx, index) {
      const rnd = ctx.rnd(index);
      const id = ctx.ids[randInt(rnd, 0, ctx.ids.length - 1)];
      const price = ctx.fresh();
      let write;
      const m = await measure(() => {
        const seen = ctx.watch.until((rows) => rows.some((r) => r.id === id && r.price === price));
        write = ctx.upd.run([price, id]);
        return seen;
      });
      await write;
      return { metrics: { latency: m.wall, main: m.active } };
    },
    teardown: (ctx) => ctx.watch?.close(),
  },

  // 10 streams over 1k-row ranges; 200 writes to other rows of the same table must not make
  // them emit. Reports the main-thread time of the writes with the streams open minus the
  // same writes with no streams (paired within the sample; order alternates by round).
  liveUnchanged: {
    prepare: prepareLiveUpdates,
    async sample(ctx, index) {
      const { streams, rows, writes } = ctx.params;
      const rnd = ctx.rnd(index);
      const watched = streams * rows; // ids 1..watched are watched; writes go above that
      const mkWrites = () => Array.from({ length: writes }, () => [ctx.fresh(), `w${ctx.counter}`, randInt(rnd, watched + 1, LIVE_ROWS)]);
      const run = async (list) => {
        const m = await measure(async () => {
          for (const p of list) await ctx.upd.run(p);
          await settleLive(ctx.conn);
        });
        return m.active;
      };
      const withStreams = async () => {
        const ws = Array.from({ length: streams }, (_, s) => new Watch(ctx.conn, 'SELECT * FROM live WHERE id BETWEEN ? AND ? ORDER BY id', [s * rows + 1, (s + 1) * rows]));
        await Promise.all(ws.map((w) => w.ready()));
        const active = await run(mkWrites());
        const wrong = ws.reduce((a, w) => a + w.emits, 0);
        ws.forEach((w) => w.close());
        return { active, wrong };
      };
      let a, b;
      if (index % 2 === 0) {
        a = await withStreams();
        b = await run(mkWrites());
      } else {
        b = await run(mkWrites());
        a = await withStreams();
      }
      return { metrics: { extraMain: a.active - b, wrongEmits: a.wrong } };
    },
  },

  // 100 category streams (20 rows each); 200 updates, each changing exactly one stream.
  liveFanout: {
    prepare(ctx) {
      requireAsync(ctx);
      probeStream(ctx);
      ctx.upd = ctx.conn.prepare('UPDATE live SET price = ? WHERE id = ?');
    },
    async sample(ctx, index) {
      const { streams, writes } = ctx.params;
      const rnd = ctx.rnd(index);
      const ws = Array.from({ length: streams }, (_, c) => new Watch(ctx.conn, 'SELECT id, name, price FROM live WHERE category = ? ORDER BY id', [liveCategory(c)]));
      await Promise.all(ws.map((w) => w.ready()));
      const plan = Array.from({ length: writes }, () => {
        const c = randInt(rnd, 0, streams - 1);
        const k = randInt(rnd, c === 0 ? 1 : 0, LIVE_ROWS / LIVE_CATEGORIES - (c === 0 ? 0 : 1));
        return { c, id: c + k * LIVE_CATEGORIES, price: ctx.fresh() };
      });
      const written = new Set(plan.map((p) => p.c));
      const m = await measure(async () => {
        const last = new Map();
        for (const p of plan) {
          last.set(p.c, p);
          await ctx.upd.run([p.price, p.id]);
        }
        // Settled when every written stream has emitted its latest value.
        await Promise.all([...last.values()].map((p) => ws[p.c].until((rows) => rows.some((r) => r.id === p.id && r.price === p.price))));
      });
      await settleLive(ctx.conn);
      const emits = ws.reduce((a, w) => a + w.emits, 0);
      const wrong = ws.reduce((a, w, c) => a + (written.has(c) ? 0 : w.emits), 0);
      ws.forEach((w) => w.close());
      return { metrics: { wall: m.wall, main: m.active, emits, wrongEmits: wrong } };
    },
  },

  // 50 `WHERE id = ?` streams; 200 updates with fresh values, exactly 3 on watched ids.
  liveKeyed: {
    prepare: prepareLiveUpdates,
    async sample(ctx, index) {
      const { streams, writes, hits } = ctx.params;
      const rnd = ctx.rnd(index);
      const watched = new Set();
      while (watched.size < streams) watched.add(randInt(rnd, 1, LIVE_ROWS));
      const ids = [...watched];
      const ws = ids.map((id) => new Watch(ctx.conn, 'SELECT * FROM live WHERE id = ?', [id]));
      await Promise.all(ws.map((w) => w.ready()));
      const hitPos = new Set();
      while (hitPos.size < hits) hitPos.add(randInt(rnd, 0, writes - 1));
      const hitIdx = [];
      const plan = Array.from({ length: writes }, (_, i) => {
        let id;
        if (hitPos.has(i)) {
          let s;
          do s = randInt(rnd, 0, streams - 1);
          while (hitIdx.includes(s));
          hitIdx.push(s);
          id = ids[s];
        } else {
          do id = randInt(rnd, 1, LIVE_ROWS);
          while (watched.has(id));
        }
        return [ctx.fresh(), `k${ctx.counter}`, id];
      });
      const m = await measure(async () => {
        for (const p of plan) await ctx.upd.run(p);
        await Promise.all(hitIdx.map((s) => {
          const p = plan.find((q) => q[2] === ids[s]);
          return ws[s].until((rows) => rows.length === 1 && rows[0].price === p[0]);
        }));
      });
      await settleLive(ctx.conn); // lets any spurious emission arrive before counting
      const emits = ws.reduce((a, w) => a + w.emits, 0);
      const wrong = ws.reduce((a, w, s) => a + (hitIdx.includes(s) ? Math.max(0, w.emits - 1) : w.emits), 0);
      ws.forEach((w) => w.close());
      return { metrics: { wall: m.wall, main: m.active, emits, wrongEmits: wrong } };
    },
  },

  // Suite 10: RSS while reading 10k rows, a block of reads per round.
  memReads: {
    prepare(ctx) {
      ctx.h = ctx.conn.prepare(SELECT_RANGE);
    },
    async sample(ctx, index) {
      const { rows, perBlock } = ctx.params;
      const params = startsFor(ctx.rnd(index), perBlock, rows);
      const rss = [];
      for (let i = 0; i < perBlock; i++) {
        sink += touchItems(await ctx.h.all(params[i]));
        rss.push(process.memoryUsage.rss() / 2 ** 20);
      }
      return { metrics: {}, series: { rss } };
    },
  },

  // All rows through iterate(): wall and main-thread time per pass, and the peak RSS seen
  // (sampled every 1,000 rows). Synchronous peers iterate synchronously; quietsqlite with
  // for await over its chunks.
  iterate: {
    prepare(ctx) {
      ctx.h = ctx.conn.prepare('SELECT * FROM items WHERE id > ? ORDER BY id LIMIT ?');
    },
    async sample(ctx) {
      const { rows } = ctx.params;
      let peak = process.memoryUsage.rss();
      let n = 0;
      const use = (r) => {
        sink += touchItem(r);
        if (++n % 1000 === 0) peak = Math.max(peak, process.memoryUsage.rss());
      };
      const m = ctx.peer.sync
        ? await measure(() => {
            for (const r of ctx.h.iterate([0, rows])) use(r);
          })
        : await measure(async () => {
            for await (const r of ctx.h.iterate([0, rows])) use(r);
          });
      if (n !== rows) throw new Error(`iterate gave ${n} rows, expected ${rows}`);
      return { metrics: { wall: m.wall, main: m.active, rssPeak: peak / 2 ** 20 } };
    },
  },

  // RSS while 100 streams see writes, a block of writes per round.
  memStreams: {
    async prepare(ctx) {
      requireAsync(ctx);
      const { streams } = ctx.params;
      ctx.upd = ctx.conn.prepare('UPDATE live SET price = ? WHERE id = ?');
      ctx.ws = Array.from({ length: streams }, (_, c) => new Watch(ctx.conn, 'SELECT id, name, price FROM live WHERE category = ? ORDER BY id', [liveCategory(100 + c)]));
      await Promise.all(ctx.ws.map((w) => w.ready()));
    },
    async sample(ctx, index) {
      const { streams, perBlock } = ctx.params;
      const rnd = ctx.rnd(index);
      const rss = [];
      for (let i = 0; i < perBlock; i++) {
        const c = randInt(rnd, 0, streams - 1);
        const id = 100 + c + randInt(rnd, 0, LIVE_ROWS / LIVE_CATEGORIES - 1) * LIVE_CATEGORIES;
        const price = ctx.fresh();
        await ctx.upd.run([price, id]);
        await ctx.ws[c].until((r) => r.some((x) => x.id === id && x.price === price));
        if ((i + 1) % 10 === 0) rss.push(process.memoryUsage.rss() / 2 ** 20);
      }
      return { metrics: {}, series: { rss } };
    },
    teardown: (ctx) => ctx.ws?.forEach((w) => w.close()),
  },

  // Suite 11: the same read or write on a plain and an encrypted database (quietsqlite only);
  // the ratio of the two wall times is taken within each sample, so drift hits both alike.
  encryption: {
    async prepare(ctx) {
      if (typeof ctx.conn.sibling !== 'function') throw new NotAvailable('no encryption');
      const { rows } = ctx.params;
      ctx.dbs = {
        plain: await ctx.conn.sibling(`-${ctx.params.op}-plain`),
        encrypted: await ctx.conn.sibling(`-${ctx.params.op}-encrypted`, { encryptionKey: 'benchmark passphrase' }),
      };
      const rnd = ctx.rnd('rows');
      const seed = Array.from({ length: 10000 }, (_, i) => itemRow(rnd, i));
      ctx.rows = Array.from({ length: rows }, (_, i) => itemRow(rnd, i));
      for (const db of Object.values(ctx.dbs)) {
        await db.exec(`DROP TABLE IF EXISTS items; DROP TABLE IF EXISTS writes; ${ITEMS_DDL('items')} ${ITEMS_DDL('writes')}`);
        await db.insertBatch(db.prepare(INSERT_ITEM('items')), seed);
        await db.exec('PRAGMA wal_checkpoint(TRUNCATE)');
        db.read = db.prepare('SELECT * FROM items WHERE id > ? ORDER BY id LIMIT ?');
        db.write = db.prepare(INSERT_ITEM('writes'));
      }
    },
    async sample(ctx, index) {
      const { op, rows } = ctx.params;
      const once = async (db) => {
        const m = op === 'read'
          ? await measure(async () => (sink += touchItems(await db.read.all([0, rows]))))
          : await measure(() => db.insertBatch(db.write, ctx.rows));
        if (op === 'write') await db.exec('DELETE FROM writes');
        return m.wall;
      };
      const order = index % 2 === 0 ? ['plain', 'encrypted'] : ['encrypted', 'plain'];
      const wall = {};
      for (const k of order) wall[k] = await once(ctx.dbs[k]);
      return { metrics: { overhead: wall.encrypted / wall.plain, plainWall: wall.plain, encWall: wall.encrypted } };
    },
    async teardown(ctx) {
      for (const db of Object.values(ctx.dbs ?? {})) await db.close();
    },
  },
};

/**
 * Empty `writes` after a sample (untimed). No manual checkpoint: after one, the next commit
 * must restart the WAL and fsync its header, a cost that a real app pays once per WAL cycle,
 * not once per transaction. SQLite's own auto-checkpoints land where they would in an app.
 */
async function resetWrites(ctx) {
  await ctx.conn.exec('DELETE FROM writes');
}

/** Throws NotAvailable when the peer has no live queries (checked without subscribing). */
function probeStream(ctx) {
  if (typeof ctx.conn.stream !== 'function') throw new NotAvailable('no live queries');
  const unsub = ctx.conn.stream('SELECT 1 AS one', [], () => {}, () => {});
  unsub();
}

/** Shared by the live cases that update rows of `live`: needs an async peer with streams. */
function prepareLiveUpdates(ctx) {
  requireAsync(ctx);
  probeStream(ctx);
  ctx.upd = ctx.conn.prepare('UPDATE live SET price = ?, name = ? WHERE id = ?');
}

/**
 * Give asynchronously delivered invalidations time to run, then wait for idle. The pause
 * outlasts quietsqlite's default emission throttle (maxDelayMs 100) so deferred re-checks
 * land inside the measured window; idle waiting adds no main-thread time.
 */
const SETTLE_MS = 250;
async function settleLive(conn) {
  await sleep(20);
  if (conn.liveIdle) await conn.liveIdle();
  await sleep(SETTLE_MS);
}

/** One subscription: counts emissions after the first and lets callers await a condition. */
class Watch {
  constructor(conn, sql, params) {
    this.rows = undefined;
    this.emits = -1; // the first emission is the initial result, not a change
    this.waiters = [];
    this.error = null;
    this.unsub = conn.stream(sql, params, (rows) => this.onRows(rows), (err) => this.onError(err));
  }
  onRows(rows) {
    this.rows = rows;
    this.emits++;
    this.waiters = this.waiters.filter((w) => {
      if (!w.pred(rows)) return true;
      clearTimeout(w.timer);
      w.resolve();
      return false;
    });
  }
  onError(err) {
    this.error = err;
    for (const w of this.waiters) {
      clearTimeout(w.timer);
      w.reject(err);
    }
    this.waiters = [];
  }
  /** Resolves when the latest emitted rows satisfy pred (possibly already). */
  until(pred) {
    if (this.error) return Promise.reject(this.error);
    if (this.rows && pred(this.rows)) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const w = { pred, resolve, reject };
      w.timer = setTimeout(() => {
        this.waiters = this.waiters.filter((x) => x !== w);
        reject(new Error(`live query did not emit the expected rows within ${LIVE_TIMEOUT_MS / 1000} s`));
      }, LIVE_TIMEOUT_MS);
      this.waiters.push(w);
    });
  }
  ready() {
    return this.until(() => true);
  }
  close() {
    this.unsub();
  }
}
