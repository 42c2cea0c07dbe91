// Soak: mixed readers, writers, transactions and 100 live queries whose subscribers come
// and go, for `seconds`. Checks: every promise the API returned settles, memory stays bounded
// (sampled; the curve is reported), no live query reports an error, and once writes stop
// and emissions quiesce every live query's last rows equal a fresh select.
import { isDeepStrictEqual } from 'node:util';
import { join } from 'node:path';
import { getHeapStatistics } from 'node:v8';
import { Database, collectGarbage, describeError, mainIf, removeDir, resources, sleep, tempDir, withDeadline } from './common.mjs';

/** A soak operation that takes longer than this is a hang: reported, and the run goes on. */
let HANG_MS = 20_000;

const QUERIES = 100;

/**
 * One point of the memory curve, taken after a full collection: RSS, the JS heap still
 * live, the memory outside V8's heap (RSS minus the pages V8's heap occupies), and threads.
 */
async function memorySample() {
  await collectGarbage(1);
  const r = resources();
  const h = getHeapStatistics();
  const mb = (bytes) => Math.round(bytes / 104857.6) / 10;
  return { rssMb: r.rssMb, heapLiveMb: mb(h.used_heap_size), outsideHeapMb: Math.round((r.rssMb - mb(h.total_physical_size)) * 10) / 10, threads: r.threads };
}
const GROUPS = 50;

export async function run({ seconds = 10, rssLimitMb = 512, hangMs = 20_000 } = {}, progress = () => {}) {
  HANG_MS = hangMs;
  const dir = await tempDir();
  const failures = [];
  const fail = (m) => failures.length < 100 && failures.push(m);
  const pending = new Set();
  let tracked = 0;
  const track = (p) => {
    tracked++;
    pending.add(p);
    p.then(
      () => pending.delete(p),
      () => pending.delete(p),
    );
    return p;
  };
  const counts = { reads: 0, writes: 0, batches: 0, transactions: 0, rolledBack: 0, emissions: 0, subscribes: 0, unsubscribes: 0 };
  const curve = [];
  let db;
  let thrown = 0;
  const onUncaught = (err) => {
    if (err?.fromCallback) thrown++;
    else fail(`uncaught exception: ${describeError(err)}`);
  };
  process.on('uncaughtException', onUncaught);
  try {
    db = await Database.open(join(dir, 'soak.db'), { busyTimeout: 10_000 });
    await db.execute('CREATE TABLE items(id INTEGER PRIMARY KEY, grp INTEGER NOT NULL, val TEXT NOT NULL); CREATE INDEX items_grp ON items(grp)');
    await db.executeBatch('INSERT INTO items(grp, val) VALUES (?, ?)', Array.from({ length: 2000 }, (_, i) => [i % GROUPS, `v${i}`]));

    // 100 live queries: two shapes over 50 groups (so identical queries also share groups).
    const sqlOf = (q) =>
      q % 2 === 0
        ? ['SELECT id, val FROM items WHERE grp = ? ORDER BY id', [q % GROUPS]]
        : ['SELECT grp, count(*) AS n, max(id) AS top FROM items WHERE grp = ? GROUP BY grp', [(q * 7) % GROUPS]];
    const slots = Array.from({ length: QUERIES }, (_, q) => ({ q, sub: undefined, last: undefined, got: 0 }));

    const subscribe = (slot) => {
      const [sql, params] = sqlOf(slot.q);
      counts.subscribes++;
      slot.last = undefined;
      if (slot.q % 3 === 0) {
        // Async iterator consumer.
        const it = db.stream(sql, params)[Symbol.asyncIterator]();
        let stopped = false;
        if (slot.q % 9 === 0) {
          // Two next() calls without awaiting the first: both must settle (with rows, or
          // done when the iterator is returned).
          track(it.next()).then(
            (r) => {
              if (!r.done && !stopped && slot.last === undefined) slot.last = r.value;
            },
            () => {},
          );
        }
        (async () => {
          for (;;) {
            const r = await track(it.next());
            if (r.done || stopped) break;
            slot.last = r.value;
            slot.got++;
            counts.emissions++;
          }
        })().catch((err) => fail(`live query ${slot.q} (iterator) failed: ${describeError(err)}`));
        slot.sub = () => {
          stopped = true;
          return track(it.return());
        };
      } else {
        const off = db.stream(sql, params).subscribe(
          (rows) => {
            slot.last = rows;
            slot.got++;
            counts.emissions++;
            // Some callbacks throw: that must not cost any other completion its settling.
            if (slot.q % 10 === 1 && slot.got % 5 === 0) throw Object.assign(new Error('callback throws on purpose'), { fromCallback: true });
          },
          (err) => fail(`live query ${slot.q} (callback) reported: ${describeError(err)}`),
        );
        slot.sub = () => off();
      }
    };
    const unsubscribe = (slot) => {
      counts.unsubscribes++;
      const s = slot.sub;
      slot.sub = undefined;
      slot.last = undefined;
      return s();
    };
    for (const s of slots) subscribe(s);

    let running = true;
    let rng = 42;
    const rand = (n) => ((rng = (Math.imul(rng, 1103515245) + 12345) >>> 0) % n);
    const loops = [];
    const loop = (fn) =>
      loops.push(
        (async () => {
          while (running) {
            try {
              await withDeadline(fn(), HANG_MS, `a ${fn.name} step`);
            } catch (err) {
              if (err?.hang) {
                fail(`${fn.name}: ${err.message}; this loop stops`);
                return;
              }
              if (!err?.expected) {
                fail(`${fn.name}: ${describeError(err)}`);
                // A step that fails at once would otherwise retry on microtasks alone: the
                // event loop (and the timer that ends the run) would never turn again, and a
                // defect that fails every step would show as a hang instead of its error.
                await sleep(1);
              }
            }
          }
        })(),
      );
    loop(async function writer() {
      const g = rand(GROUPS);
      const op = rand(3);
      if (op === 0) await track(db.execute('INSERT INTO items(grp, val) VALUES (?, ?)', [g, `w${rand(1e6)}`]));
      else if (op === 1) await track(db.execute('UPDATE items SET val = ? WHERE id = (SELECT id FROM items WHERE grp = ? ORDER BY random() LIMIT 1)', [`u${rand(1e6)}`, g]));
      else await track(db.execute('DELETE FROM items WHERE id = (SELECT min(id) FROM items WHERE grp = ?)', [g]));
      counts.writes++;
      await sleep(rand(5));
    });
    loop(async function batcher() {
      await track(db.executeBatch('INSERT INTO items(grp, val) VALUES (?, ?)', Array.from({ length: 1 + rand(50) }, () => [rand(GROUPS), `b${rand(1e6)}`])));
      await track(db.execute('DELETE FROM items WHERE id IN (SELECT id FROM items ORDER BY random() LIMIT 20)'));
      counts.batches++;
      await sleep(5 + rand(20));
    });
    loop(async function transactions() {
      const fails = rand(4) === 0;
      const p = track(
        db.transaction(async (tx) => {
          const g = rand(GROUPS);
          await tx.execute('INSERT INTO items(grp, val) VALUES (?, ?)', [g, 'tx']);
          await tx.select('SELECT count(*) FROM items WHERE grp = ?', [g]);
          await tx.transaction((sp) => sp.execute('UPDATE items SET val = ? WHERE grp = ? AND val = ?', ['sp', g, 'tx']));
          if (fails) throw Object.assign(new Error('rolled back on purpose'), { expected: true });
        }),
      );
      await p.then(() => counts.transactions++, (err) => {
        if (!err?.expected) throw err;
        counts.rolledBack++;
      });
      await sleep(rand(10));
    });
    for (let r = 0; r < 2; r++) {
      loop(async function reader() {
        await track(db.select('SELECT grp, count(*) AS n FROM items GROUP BY grp'));
        await track(db.selectOne('SELECT * FROM items WHERE id = ?', [rand(5000)]));
        await track(db.selectBytes('SELECT * FROM items WHERE grp = ?', [rand(GROUPS)]));
        counts.reads += 3;
      });
    }
    loop(async function churn() {
      const slot = slots[rand(QUERIES)];
      if (slot.sub) await unsubscribe(slot);
      else subscribe(slot);
      await sleep(rand(40));
    });

    const started = performance.now();
    const sampleMs = Math.max(1000, (seconds * 1000) / 30);
    while (performance.now() - started < seconds * 1000) {
      await sleep(Math.min(sampleMs, seconds * 1000 - (performance.now() - started)));
      curve.push({ s: Math.round((performance.now() - started) / 100) / 10, ...(await memorySample()), pending: pending.size });
      const c = curve.at(-1);
      progress(`soak: ${c.s}s rss ${c.rssMb} MB (live JS heap ${c.heapLiveMb}, outside the JS heap ${c.outsideHeapMb}), ${pending.size} pending, ${JSON.stringify(counts)}`);
    }
    running = false;
    await Promise.all(loops);

    // Every query subscribed at the end; then wait for emissions to stop.
    for (const s of slots) if (!s.sub) subscribe(s);
    let quiet = 0;
    let seen = -1;
    const until = performance.now() + 30_000;
    while (quiet < 3 && performance.now() < until) {
      await sleep(250);
      const now = counts.emissions;
      const allFirst = slots.every((s) => s.last !== undefined);
      quiet = now === seen && allFirst ? quiet + 1 : 0;
      seen = now;
    }
    let mismatched = 0;
    for (const s of slots) {
      const [sql, params] = sqlOf(s.q);
      const fresh = await withDeadline(track(db.select(sql, params)), HANG_MS, 'a final select').catch((err) => {
        fail(describeError(err));
        return [];
      });
      if (!isDeepStrictEqual(s.last, fresh)) {
        mismatched++;
        fail(`live query ${s.q}: last emission (${s.last === undefined ? 'none' : `${s.last.length} rows`}) differs from a fresh select (${fresh.length} rows)`);
      }
    }
    for (const s of slots) {
      await withDeadline(Promise.resolve(unsubscribe(s)), HANG_MS, 'an unsubscribe').catch((err) => fail(describeError(err)));
    }

    // Every promise handed out settles (give in-flight work a moment to finish).
    const settleUntil = performance.now() + 10_000;
    while (pending.size > 0 && performance.now() < settleUntil) await sleep(50);
    if (pending.size > 0) fail(`${pending.size} of ${tracked} promises never settled`);
    const groups = db[Symbol.for('quietsqlite.liveStats')]?.().groups;
    if (groups !== undefined && groups !== 0) fail(`${groups} live-query groups remain after every subscriber left`);
    await withDeadline(db.close(), HANG_MS, 'close()').catch((err) => fail(describeError(err)));
    db = undefined;
    curve.push({ s: 'end', ...(await memorySample()), pending: pending.size });
    const peak = Math.max(...curve.map((c) => c.rssMb));
    if (peak > rssLimitMb) fail(`RSS reached ${peak} MB (limit ${rssLimitMb} MB)`);
    // Bounded, not just under a cap: the second half must not climb far above the first.
    // RSS itself is no measure of that: V8 grows its young generation for a while under this
    // allocation rate (Node 24 to about 150 MB of committed heap, Node 20 to about 45), which
    // is sizing, not a leak. So the rule applies to what a leak would grow: the JS heap still
    // live after a full collection, and the memory outside V8's heap (SQLite's page caches,
    // native buffers, threads), which rises a little while the table and the caches grow.
    // A steady leak of about 10 MB/s fails a 10 s run (checked by injecting one of 30 MB/s,
    // as a retained JS array and as Buffers: both failed); the 600 s run of `npm run stress`
    // catches about 0.2 MB/s.
    const body = curve.filter((c) => typeof c.s === 'number');
    if (body.length >= 6) {
      const half = Math.floor(body.length / 2);
      for (const [key, what] of [['heapLiveMb', 'the live JS heap'], ['outsideHeapMb', 'the memory outside the JS heap']]) {
        const firstMax = Math.max(...body.slice(0, half).map((c) => c[key]));
        const lastMax = Math.max(...body.slice(half).map((c) => c[key]));
        if (lastMax > firstMax * 1.25 + 16) fail(`${what} kept growing: ${firstMax} MB in the first half, ${lastMax} MB in the second`);
      }
    }
    return { failures, figures: { seconds, queries: QUERIES, callbackThrows: thrown, promises: tracked, unsettled: pending.size, mismatched, counts, rssPeakMb: peak, curve } };
  } finally {
    process.off('uncaughtException', onUncaught);
    if (db) await withDeadline(db.close(), HANG_MS, 'close()').catch(() => {});
    await removeDir(dir);
  }
}

mainIf(import.meta, run);
