// Prints the README's Performance tables from two full runs' JSON reports:
//   node bench/readme-table.mjs bench/results/<run 1>.json bench/results/<run 2>.json
import { readFileSync } from 'node:fs';
import { readmeTables } from './lib/readme-tables.mjs';

const files = process.argv.slice(2);
if (files.length !== 2) {
  console.error('usage: node bench/readme-table.mjs <run 1>.json <run 2>.json');
  process.exit(2);
}
console.log(readmeTables(files.map((f) => JSON.parse(readFileSync(f, 'utf8')))));
