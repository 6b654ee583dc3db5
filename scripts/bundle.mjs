// Build step: bundles the compiled CLI into dist/bundle/ so `switchboard` starts by loading a
// few files instead of dozens of ES modules (cold start is a measured target, P2 in quality.md).
// Rarely used parts (json5, chalk, …) stay in separate chunks loaded on demand.

import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
// Chunk names are content hashes: without this, every build would leave the previous ones behind.
fs.rmSync(path.join(root, 'dist', 'bundle'), { recursive: true, force: true });
await build({
  entryPoints: [path.join(root, 'dist', 'src', 'cli', 'main.js')],
  outdir: path.join(root, 'dist', 'bundle'),
  bundle: true,
  splitting: true,
  format: 'esm',
  platform: 'node',
  target: 'node20',
  logLevel: 'warning',
  // Bytes are start-up time (each is decoded and parsed on every run): drop whitespace and
  // simplify syntax, but keep identifiers, so stack traces still name their functions.
  minifyWhitespace: true,
  minifySyntax: true,
  // `switchboard top` loads ink and react from node_modules when it starts: bundling them would
  // add a large chunk (and yoga's WebAssembly) for one interactive command.
  external: ['ink', 'react', 'react/*'],
  // Bundled CommonJS dependencies use require() and __filename; give the ESM bundle both.
  banner: {
    js: [
      "import { createRequire as __sbCreateRequire } from 'node:module';",
      "import { fileURLToPath as __sbFileURLToPath } from 'node:url';",
      'const require = __sbCreateRequire(import.meta.url);',
      'const __filename = __sbFileURLToPath(import.meta.url);',
      "const __dirname = __filename.slice(0, __filename.lastIndexOf('/'));",
    ].join(' '),
  },
});
