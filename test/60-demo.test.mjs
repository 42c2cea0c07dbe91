// The live demo (examples/demo) in headless Chromium: two pages on one server; a change made
// in one page appears in the other, pushed by live queries over Server-Sent Events. Skips,
// saying so, when no Chromium is installed (.ci/run installs Debian's `chromium`).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { createInterface } from 'node:readline';
import { Database } from '../dist/index.mjs';
import { findChromium, launchOptions } from '../examples/demo/chromium.mjs';
import { startDemo } from '../examples/demo/server.mjs';

const root = fileURLToPath(new URL('..', import.meta.url));

const chromiumPath = findChromium();
const noChromium = chromiumPath
  ? false
  : 'no Chromium found: install it (Debian: apt-get install -y chromium) or set CHROMIUM_PATH';


const WAIT = { timeout: 15_000 };

test('demo: a change in one page appears in the other, with the live queries\' statistics', { skip: noChromium, timeout: 120_000 }, async () => {
  const { chromium } = await import('playwright-core');
  const demo = await startDemo({ port: 0 });
  let browser;
  try {
    browser = await chromium.launch(launchOptions(chromiumPath));
    const context = await browser.newContext();
    const [a, b] = [await context.newPage(), await context.newPage()];
    const errors = [];
    for (const p of [a, b]) p.on('pageerror', (e) => errors.push(e.message));
    await Promise.all([a.goto(demo.url), b.goto(demo.url)]);
    for (const p of [a, b]) {
      await p.locator('#connection', { hasText: 'live' }).waitFor(WAIT);
      await p.locator('#todos li').nth(2).waitFor(WAIT); // the three seeded todos
    }
    assert.equal(await b.locator('#open-n').textContent(), '2');
    assert.equal(await b.locator('#done-n').textContent(), '1');

    // Added in A: appears in B, and B's open counter moves.
    await a.fill('#title', 'written in tab A');
    await a.press('#title', 'Enter');
    const inB = b.locator('#todos li', { hasText: 'written in tab A' });
    await inB.waitFor(WAIT);
    await b.locator('#open-n', { hasText: /^3$/ }).waitFor(WAIT);
    assert.equal(await b.locator('#done-n').textContent(), '1');

    // Ticked in B: done in A, both counters move there.
    await inB.locator('input[type=checkbox]').check();
    await a.locator('#todos li.done', { hasText: 'written in tab A' }).waitFor(WAIT);
    await a.locator('#done-n', { hasText: /^2$/ }).waitFor(WAIT);
    assert.equal(await a.locator('#open-n').textContent(), '2');

    // A title is shown as text, never as markup, in the other page.
    const markup = '<img src=x onerror="window.pwned=1"> & "quotes"';
    await a.fill('#title', markup);
    await a.press('#title', 'Enter');
    await b.locator('#todos li .title', { hasText: markup }).waitFor(WAIT);
    assert.equal(await b.locator('#todos img').count(), 0);
    assert.equal(await b.evaluate(() => window.pwned), undefined);

    // Deleted in B: gone from A.
    await b.locator('#todos li', { hasText: 'written in tab A' }).locator('button.delete').click();
    await a.locator('#todos li', { hasText: 'written in tab A' }).waitFor({ state: 'detached', ...WAIT });

    // The statistics: 4 writes, both pages; the inserts re-ran the done counter with an
    // unchanged result, which the registry skipped by hash.
    await a.locator('#stat-writes', { hasText: /^4$/ }).waitFor(WAIT);
    await a.locator('#stat-pages', { hasText: /^2$/ }).waitFor(WAIT);
    assert.match(await a.locator('#stat-emissions').textContent(), /^\d+$/);
    await a.locator('#stat-groups', { hasText: /^3$/ }).waitFor(WAIT);
    const runs = Number(await a.locator('#stat-runs').textContent());
    const emissions = Number(await a.locator('#stat-emissions').textContent());
    // 3 first runs, then at least one re-run per write (writes that commit while a run
    // is in progress share its next run, so the exact count depends on timing).
    assert.ok(runs >= 3 + 4, `runs: ${runs}`);
    await a.waitForFunction(() => Number(document.getElementById('stat-skipped').textContent) >= 1, null, WAIT);
    assert.ok(emissions < runs, `emissions ${emissions} < runs ${runs}`);
    assert.deepEqual(errors, []);
  } finally {
    await browser?.close();
    await demo.close();
  }
});

test('npm run demo: takes the port from PORT, prints the URL and serves the page', { timeout: 30_000 }, async () => {
  const child = spawn(process.execPath, ['examples/demo/server.mjs'], {
    cwd: root,
    env: { ...process.env, PORT: '0' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const exited = new Promise((resolve) => child.once('exit', resolve));
  try {
    const line = await new Promise((resolve, reject) => {
      createInterface({ input: child.stdout }).once('line', resolve);
      child.once('exit', (code) => reject(new Error(`demo exited (${code}) before printing its URL`)));
    });
    const url = /(http:\/\/localhost:\d+\/)/.exec(line)?.[1];
    assert.ok(url, line);
    const res = await fetch(url);
    assert.equal(res.status, 200);
    assert.match(await res.text(), /quietsqlite live demo/);
    const bad = await fetch(new URL('/api/todos', url), { method: 'POST', body: '{"title": ""}' });
    assert.equal(bad.status, 400);
  } finally {
    child.kill('SIGTERM');
    assert.equal(await exited, 0); // SIGTERM closes the database and exits cleanly
  }
});

test('demo: a bad port is refused with a message', async () => {
  const r = spawnSync(process.execPath, ['examples/demo/server.mjs', '--port', 'x'], { cwd: root, encoding: 'utf8', timeout: 20_000 });
  assert.equal(r.status, 2);
  assert.match(r.stderr, /--port \(or PORT\) must be an integer/);
});

test('demo: a port in use is refused with a message, and the process ends', { timeout: 30_000 }, async () => {
  const { createServer } = await import('node:http');
  const blocker = createServer();
  await new Promise((resolve) => blocker.listen(0, '127.0.0.1', resolve));
  try {
    const port = String(blocker.address().port);
    const r = spawnSync(process.execPath, ['examples/demo/server.mjs', '--port', port], { cwd: root, encoding: 'utf8', timeout: 20_000 });
    assert.equal(r.status, 1);
    assert.match(r.stderr, new RegExp(`port ${port} is in use`));
  } finally {
    blocker.close();
  }
});
