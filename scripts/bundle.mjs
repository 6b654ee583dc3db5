// Build step: bundles the compiled CLI into dist/bundle/ so `switchboard` starts by loading a
// few files instead of dozens of ES modules (cold start is a measured target, P2 in quality.md).
// Rarely used parts (json5, chalk, …) stay in separate chunks loaded on demand.

import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
await build({
  entryPoints: [path.join(root, 'dist', 'src', 'cli', 'main.js')],
  outdir: path.join(root, 'dist', 'bundle'),
  bundle: true,
  splitting: true,
  format: 'esm',
  platform: 'node',
  target: 'node20',
  logLevel: 'warning',
  // Bundled CommonJS dependencies call require(); give the ESM bundle one.
  banner: { js: "import { createRequire as __switchboardRequire } from 'node:module'; const require = __switchboardRequire(import.meta.url);" },
});
