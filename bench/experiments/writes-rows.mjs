// The bench's `writes` table and rows as the T14 probes use them: five parameters, about 110
// characters of text, the category index (tx-execute-latency.mjs, inproc-tx.mjs,
// checkpoint-stalls.mjs).
export const CREATE_WRITES =
  'CREATE TABLE writes (id INTEGER PRIMARY KEY, name TEXT NOT NULL, description TEXT NOT NULL, price REAL NOT NULL, category TEXT NOT NULL, created_at INTEGER NOT NULL); CREATE INDEX writes_category ON writes(category);';
export const INSERT_WRITES = 'INSERT INTO writes (name, description, price, category, created_at) VALUES (?, ?, ?, ?, ?)';

/** `n` rows of parameters for INSERT_WRITES, the same on every call. */
export function writesRows(n) {
  const words = ['alpha', 'beta', 'gamma', 'delta', 'omega', 'sigma', 'kappa', 'zeta'];
  let s = 7;
  const rnd = () => (s = (s * 48271) % 2147483647) / 2147483647;
  const text = (a, b) => {
    let t = '';
    const len = a + Math.floor(rnd() * (b - a));
    while (t.length < len) t += words[Math.floor(rnd() * 8)] + ' ';
    return t.slice(0, len);
  };
  return Array.from({ length: n }, (_, i) => [`${text(8, 16)} #${i}`, text(80, 100), Math.round(rnd() * 1e5) / 100, 'category ' + (i % 20), 1_700_000_000 + i]);
}
