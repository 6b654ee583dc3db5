// `npm run bench`: runs every benchmark and writes bench/results.md.

import fs from 'node:fs';
import path from 'node:path';
import { ROOT, writeReport } from './lib.mjs';

const only = process.argv.slice(2);
const suites = fs
  .readdirSync(path.join(ROOT, 'bench'))
  .filter((name) => name.endsWith('.mjs') && !['lib.mjs', 'run.mjs'].includes(name))
  .filter((name) => only.length === 0 || only.includes(name.replace(/\.mjs$/, '')));
for (const name of suites) {
  const mod = await import(path.join(ROOT, 'bench', name));
  for (const [exported, fn] of Object.entries(mod)) {
    if (exported.startsWith('bench') && typeof fn === 'function') await fn();
  }
}
writeReport();
