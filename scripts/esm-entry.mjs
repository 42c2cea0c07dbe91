// Writes dist/index.mjs: an ES module entry over the CommonJS build, so `import` and
// `require` share one module instance (one native addon, one class identity).
import { writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const names = Object.keys(require('../dist/index.js')).filter((n) => n !== 'default' && n !== '__esModule');
const lines = [
  "import cjs from './index.js';",
  `export const { ${names.join(', ')} } = cjs;`,
  'export default cjs;',
  '',
];
writeFileSync(new URL('../dist/index.mjs', import.meta.url), lines.join('\n'));

// The adapters' ES build (tsconfig.adapters-esm.json) is plain .js under dist/esm: mark it as
// ES modules.
writeFileSync(new URL('../dist/esm/package.json', import.meta.url), '{ "type": "module" }\n');
