// Writes an ES module entry (.mjs) beside each CommonJS entry of the build: `import` and
// `require` share one module instance (one native addon, one class identity). The adapter
// entries load their peer (kysely, drizzle-orm), which the build has as a dev dependency.
import { writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
for (const entry of ['index', 'kysely/index', 'drizzle/index', 'drizzle/migrator']) {
  const base = entry.slice(entry.lastIndexOf('/') + 1);
  const names = Object.keys(require(`../dist/${entry}.js`)).filter((n) => n !== 'default' && n !== '__esModule');
  const lines = [
    `import cjs from './${base}.js';`,
    `export const { ${names.join(', ')} } = cjs;`,
    'export default cjs;',
    '',
  ];
  writeFileSync(new URL(`../dist/${entry}.mjs`, import.meta.url), lines.join('\n'));
}
