// Where Chromium is, for the demo's test and screenshot: CHROMIUM_PATH, else the first of
// the usual names on PATH (Debian's package is `chromium`). undefined when there is none.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';

export function findChromium() {
  const given = process.env.CHROMIUM_PATH;
  if (given) return existsSync(given) ? given : undefined;
  for (const name of ['chromium', 'chromium-browser', 'google-chrome']) {
    const r = spawnSync('sh', ['-c', `command -v ${name}`], { encoding: 'utf8' });
    const path = r.stdout?.trim();
    if (r.status === 0 && path) return path;
  }
  return undefined;
}

/** Launch options: Chromium's sandbox refuses to run as root (CI containers). */
export function launchOptions(executablePath) {
  return { executablePath, args: process.getuid?.() === 0 ? ['--no-sandbox'] : [] };
}
