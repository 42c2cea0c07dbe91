// The Markdown docs render as written: every code block is closed where it should be, and
// every link to a heading of a doc finds that heading. (A ```js fence cannot close a block:
// three unclosed ones once turned three sections of api.md into code and broke their links.)
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync, existsSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));

function markdownFiles() {
  const files = ['README.md', 'bench/server/README.md'];
  const walk = (dir) => {
    for (const e of readdirSync(join(root, dir), { withFileTypes: true })) {
      if (e.isDirectory()) walk(join(dir, e.name));
      else if (e.name.endsWith('.md')) files.push(join(dir, e.name));
    }
  };
  walk('docs');
  return files.filter((f) => existsSync(join(root, f)));
}

/** Lines outside code blocks, and the fence errors met on the way. */
function scan(text) {
  const prose = [];
  const errors = [];
  let open = 0;
  text.split('\n').forEach((line, i) => {
    const fence = /^\s*```(.*)$/.exec(line);
    if (fence === null) {
      if (open === 0) prose.push(line);
      return;
    }
    if (open === 0) open = i + 1;
    else if (fence[1].trim() === '') open = 0;
    else errors.push(`line ${i + 1}: a \`\`\`${fence[1]} fence inside the block opened at line ${open}`);
  });
  if (open !== 0) errors.push(`the block opened at line ${open} is never closed`);
  return { prose, errors };
}

/** GitHub's anchors of a doc's headings (lower case, punctuation dropped, spaces to hyphens,
 * repeats numbered). */
function anchors(prose) {
  const seen = new Map();
  const out = new Set();
  for (const line of prose) {
    const h = /^#{1,6}\s+(.*)$/.exec(line);
    if (h === null) continue;
    const base = h[1].trim().toLowerCase().replace(/[^\p{L}\p{N}\s_-]/gu, '').replace(/\s/g, '-');
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n === 0 ? base : `${base}-${n}`);
  }
  return out;
}

const docs = new Map(markdownFiles().map((f) => [f, scan(readFileSync(join(root, f), 'utf8'))]));

test('every code block of the docs is closed by a bare fence', () => {
  const errors = [...docs].flatMap(([file, { errors }]) => errors.map((e) => `${file}: ${e}`));
  assert.deepEqual(errors, []);
});

test("every link to a doc's heading finds that heading", () => {
  const broken = [];
  for (const [file, { prose }] of docs) {
    for (const line of prose) {
      for (const m of line.matchAll(/\]\(([^)\s]*?)#([^)\s]+)\)/g)) {
        const target = m[1] === '' ? file : relative(root, join(root, dirname(file), m[1]));
        if (!target.endsWith('.md')) continue;
        const doc = docs.get(target);
        if (doc === undefined) {
          broken.push(`${file}: ${m[0]} (no such doc)`);
          continue;
        }
        if (!anchors(doc.prose).has(decodeURIComponent(m[2]))) broken.push(`${file}: ${m[0]}`);
      }
    }
  }
  assert.deepEqual(broken, []);
});
