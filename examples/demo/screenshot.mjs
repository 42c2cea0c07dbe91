// `npm run demo:screenshot`: starts the demo, makes two changes from a second page, and
// saves a screenshot of the first page (default docs/images/demo.png; --out FILE).
import { mkdirSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { chromium } from 'playwright-core';
import { findChromium, launchOptions } from './chromium.mjs';
import { startDemo } from './server.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const { values } = parseArgs({ options: { out: { type: 'string', default: join(root, 'docs', 'images', 'demo.png') } } });

const executablePath = findChromium();
if (!executablePath) {
  console.error('no Chromium found: install it (Debian: apt-get install -y chromium) or set CHROMIUM_PATH');
  process.exit(1);
}
const demo = await startDemo({ port: 0 });
let browser;
try {
  browser = await chromium.launch(launchOptions(executablePath));
  const context = await browser.newContext({ viewport: { width: 1100, height: 640 }, deviceScaleFactor: 1 });
  const [shown, other] = [await context.newPage(), await context.newPage()];
  for (const p of [shown, other]) {
    await p.goto(demo.url);
    await p.locator('#todos li').nth(2).waitFor();
  }
  // Changes made in the other page, seen in the one photographed.
  await other.fill('#title', 'Added from the other tab');
  await other.press('#title', 'Enter');
  await other.locator('#todos li', { hasText: 'Open this page' }).locator('input[type=checkbox]').check();
  await shown.locator('#todos li.done', { hasText: 'Open this page' }).waitFor();
  await shown.locator('#stat-writes', { hasText: /^2$/ }).waitFor();
  await shown.waitForTimeout(600); // the counters are pushed every 250 ms when they move
  mkdirSync(dirname(values.out), { recursive: true });
  await shown.screenshot({ path: values.out, fullPage: true });
  console.log(`wrote ${relative(process.cwd(), values.out)}`);
} finally {
  await browser?.close();
  await demo.close();
}
