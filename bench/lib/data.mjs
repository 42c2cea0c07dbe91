// Deterministic data: every peer gets the same schema, rows and per-sample parameters.
// Nothing here touches a database; the seeder and the cases call these generators.

/** mulberry32: tiny, fast, good enough for benchmark data; same stream on every Node. */
export function prng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** FNV-1a, to derive independent sub-seeds from names ("items", "point-seq:12", ...). */
export function hashString(s) {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

export function subRandom(seed, name) {
  return prng(hashString(`${seed}:${name}`));
}

export const randInt = (rnd, lo, hi) => lo + Math.floor(rnd() * (hi - lo + 1));

export const ITEMS_ROWS = 100_000;
export const CATEGORIES = 200; // ~500 rows per category (suite 6)
export const LIVE_ROWS = 20_000;
export const LIVE_CATEGORIES = 1_000; // 20 rows per category (live suite streams)
export const SHAPE_ROWS = 5_000;

const WORDS = (
  'amber basalt cedar delta ember fjord granite harbor indigo juniper kelp lantern meadow ' +
  'nimbus orchid pebble quartz ridge saffron tundra umber velvet willow xenon yarrow zephyr ' +
  'anchor beacon canyon dune estuary falcon glacier heron island jasper kestrel lagoon ' +
  'marble nectar opal prairie quill raven sierra thistle upland vortex walnut yonder'
).split(' ');

function words(rnd, minLen, maxLen) {
  const target = randInt(rnd, minLen, maxLen);
  let s = '';
  while (s.length < target) s += (s ? ' ' : '') + WORDS[Math.floor(rnd() * WORDS.length)];
  return s.slice(0, target);
}

export const category = (k) => `cat-${String(k).padStart(3, '0')}`;
export const liveCategory = (k) => `live-${k}`;

/** One `items`-shaped row (without id) as positional params. */
export function itemRow(rnd, i, cat = category(Math.floor(rnd() * CATEGORIES))) {
  return [
    `${words(rnd, 8, 16)} #${i}`,
    words(rnd, 80, 100), // description ~90 chars
    Math.round(rnd() * 100_000) / 100,
    cat,
    1_700_000_000 + Math.floor(rnd() * 31_536_000),
  ];
}

export const ITEM_COLS = ['id', 'name', 'description', 'price', 'category', 'created_at'];
export const ITEMS_DDL = (t) =>
  `CREATE TABLE ${t} (id INTEGER PRIMARY KEY, name TEXT NOT NULL, description TEXT NOT NULL, ` +
  `price REAL NOT NULL, category TEXT NOT NULL, created_at INTEGER NOT NULL);` +
  `CREATE INDEX ${t}_category ON ${t}(category);`;
export const INSERT_ITEM = (t) =>
  `INSERT INTO ${t} (name, description, price, category, created_at) VALUES (?, ?, ?, ?, ?)`;

// Schema shapes for suite 4. Each is { table, cols: [[name, type]], gen(rnd, i) -> values }.
const WIDE_COLS = Array.from({ length: 19 }, (_, j) => [`c${String(j + 1).padStart(2, '0')}`, ['TEXT', 'INTEGER', 'REAL'][j % 3]]);
export const SHAPES = {
  narrow: { table: 'shape_narrow', cols: [['v', 'INTEGER']], gen: (rnd) => [randInt(rnd, 0, 1e9)] },
  wide: {
    table: 'shape_wide',
    cols: WIDE_COLS,
    gen: (rnd) => WIDE_COLS.map(([, t]) => (t === 'TEXT' ? words(rnd, 6, 14) : t === 'INTEGER' ? randInt(rnd, 0, 1e6) : Math.round(rnd() * 1e6) / 100)),
  },
  text: {
    table: 'shape_text',
    cols: [['title', 'TEXT'], ['body', 'TEXT'], ['tags', 'TEXT']],
    gen: (rnd) => [words(rnd, 30, 50), words(rnd, 900, 1100), words(rnd, 40, 80)],
  },
  numeric: {
    table: 'shape_numeric',
    cols: [['a', 'INTEGER'], ['b', 'INTEGER'], ['c', 'INTEGER'], ['d', 'REAL'], ['e', 'REAL'], ['f', 'REAL']],
    gen: (rnd) => [randInt(rnd, 0, 1e9), randInt(rnd, -1e6, 1e6), randInt(rnd, 0, 255), rnd() * 1e3, rnd() - 0.5, Math.round(rnd() * 1e5) / 100],
  },
  nulls: {
    table: 'shape_nulls',
    cols: [['a', 'TEXT'], ['b', 'INTEGER'], ['c', 'REAL'], ['d', 'TEXT'], ['e', 'INTEGER'], ['f', 'REAL']],
    gen: (rnd) => {
      const v = [words(rnd, 10, 30), randInt(rnd, 0, 1e6), rnd() * 100, words(rnd, 5, 15), randInt(rnd, 0, 1e3), rnd()];
      return v.map((x) => (rnd() < 0.5 ? null : x)); // 50% NULL
    },
  },
};
export const shapeCols = (shape) => ['id', ...SHAPES[shape].cols.map(([c]) => c)];

/** DDL for the whole benchmark database. WAL is persistent in the file header. */
export function schemaSql() {
  let sql = ITEMS_DDL('items') + ITEMS_DDL('writes') + ITEMS_DDL('live');
  for (const s of Object.values(SHAPES)) {
    sql += `CREATE TABLE ${s.table} (id INTEGER PRIMARY KEY, ${s.cols.map(([c, t]) => `${c} ${t}`).join(', ')});`;
  }
  return sql;
}

/**
 * Every table's rows in insertion order, as { table, sql, rows() } where rows() yields param
 * arrays. The seeder inserts them in one transaction per table.
 */
export function seedPlan(seed) {
  const plan = [];
  plan.push({
    table: 'items',
    sql: INSERT_ITEM('items'),
    count: ITEMS_ROWS,
    *rows() {
      const rnd = subRandom(seed, 'items');
      for (let i = 1; i <= ITEMS_ROWS; i++) yield itemRow(rnd, i);
    },
  });
  plan.push({
    table: 'live',
    sql: INSERT_ITEM('live'),
    count: LIVE_ROWS,
    *rows() {
      const rnd = subRandom(seed, 'live');
      for (let i = 1; i <= LIVE_ROWS; i++) yield itemRow(rnd, i, liveCategory(i % LIVE_CATEGORIES));
    },
  });
  for (const [name, s] of Object.entries(SHAPES)) {
    plan.push({
      table: s.table,
      sql: `INSERT INTO ${s.table} (${s.cols.map(([c]) => c).join(', ')}) VALUES (${s.cols.map(() => '?').join(', ')})`,
      count: SHAPE_ROWS,
      *rows() {
        const rnd = subRandom(seed, `shape:${name}`);
        for (let i = 1; i <= SHAPE_ROWS; i++) yield s.gen(rnd, i);
      },
    });
  }
  return plan;
}

/**
 * A function that reads every field of every row through plain property access, the way
 * application code does (`row.name`), and returns a number so the work cannot be skipped.
 * Generated per column list so the access sites are monomorphic for hidden-class rows.
 */
export function makeToucher(cols) {
  const body = cols
    .map((c) => `v = r[${JSON.stringify(c)}]; n += typeof v === 'string' ? v.length : v === null ? 0 : 1;`)
    .join('\n');
  // eslint-disable-next-line no-new-func
  return new Function('rows', `let n = 0, v; for (let i = 0; i < rows.length; i++) { const r = rows[i];\n${body}\n} return n;`);
}

/** Same for a single row (undefined counts as 0). */
export function makeRowToucher(cols) {
  const body = cols
    .map((c) => `v = r[${JSON.stringify(c)}]; n += typeof v === 'string' ? v.length : v === null ? 0 : 1;`)
    .join('\n');
  // eslint-disable-next-line no-new-func
  return new Function('r', `if (r === undefined) return 0; let n = 0, v;\n${body}\nreturn n;`);
}
