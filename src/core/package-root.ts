// Locates the installed switchboard package (for store-format/ schemas and the validators the
// build generates), whether running from dist/src/… modules or from the single-file bundle.

import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

let cached: string | undefined;

export function packageRoot(): string {
  if (cached) return cached;
  let dir = path.dirname(fileURLToPath(import.meta.url));
  for (;;) {
    if (fs.existsSync(path.join(dir, 'store-format')) && fs.existsSync(path.join(dir, 'package.json'))) return (cached = dir);
    const parent = path.dirname(dir);
    if (parent === dir) throw new Error('switchboard package root not found (store-format/ missing)');
    dir = parent;
  }
}
