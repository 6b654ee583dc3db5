// Build step: bundles the compiled CLI into dist/bundle/ so `switchboard` starts by loading a
// few files instead of dozens of ES modules (cold start is a measured target, P2 in quality.md).
// Rarely used parts (json5, chalk, …) stay in separate chunks loaded on demand.

import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const srcRoot = path.join(root, 'dist', 'src');

// ---------------------------------------------------------------------------------------------
// Imports through a layer's index.js, pointed at the defining module

/*
 * Each layer's index.js re-exports its modules: the one public face of a layer (architecture.md).
 * But esbuild splits code by whole files and follows every re-export of an index it reaches: one
 * `import { listSessions } from '../engine/index.js'` put the whole engine (runs, runners, queue,
 * doctor: 300 KB) in the chunks of `sessions`. So while bundling, each named import from an index
 * (and each `export { … } from` one) is pointed at the module that defines the name. The source
 * keeps importing from the index; `import()` of an index (which needs all of it) and names this
 * cannot trace stay as they are.
 *
 * Only for the layers a command may load in part. core, config and routing are loaded whole by
 * every command (the routing table needs them): split by importer, their files would land in a
 * dozen small chunks, and each file a command loads costs start-up time of its own.
 */
const SPLIT_LAYERS = ['engine', 'policy', 'runner', 'server', 'store'].map((layer) => path.join(srcRoot, layer) + path.sep);

const RE_EXPORT = /^export \{([^}]*)\} from '(\.[^']+)';$/gm;
const STAR_EXPORT = /^export \* from '(\.[^']+)';$/gm;
const LOCAL_EXPORT = /^export (?:async )?(?:function\*?|class|const|let|var) ([\w$]+)/gm;
const LOCAL_EXPORT_LIST = /^export \{([^}]*)\};$/gm;
const NAMED_IMPORT_OR_RE_EXPORT = /^(import|export) \{([^}]*)\} from '(\.[^']+)';$/gm;

/** `a`, `a as b`, … of an import or export list as [name there, name here] pairs. */
function specifiers(list) {
  return list
    .split(',')
    .map((part) => part.trim())
    .filter((part) => part !== '')
    .map((part) => {
      const [there, here = there] = part.split(/\s+as\s+/);
      return [there, here];
    });
}

const moduleInfos = new Map();

/** A compiled module's own exports, its `export { … } from` and its `export * from` targets. */
function moduleInfo(file) {
  let info = moduleInfos.get(file);
  if (info !== undefined) return info;
  const text = fs.readFileSync(file, 'utf8');
  const dir = path.dirname(file);
  info = { local: new Set(), reExports: new Map(), stars: [] };
  for (const [, name] of text.matchAll(LOCAL_EXPORT)) info.local.add(name);
  for (const [, list] of text.matchAll(LOCAL_EXPORT_LIST)) for (const [, here] of specifiers(list)) info.local.add(here);
  for (const [, list, from] of text.matchAll(RE_EXPORT)) for (const [there, here] of specifiers(list)) info.reExports.set(here, { file: path.resolve(dir, from), name: there });
  for (const [, from] of text.matchAll(STAR_EXPORT)) info.stars.push(path.resolve(dir, from));
  moduleInfos.set(file, info);
  return info;
}

/** The module that defines what `file` exports as `name`, and its name there; null if untraceable. */
function definitionOf(file, name, visited = new Set()) {
  if (visited.has(file)) return null;
  visited.add(file);
  const info = moduleInfo(file);
  if (info.local.has(name)) return { file, name };
  const reExport = info.reExports.get(name);
  if (reExport !== undefined) return definitionOf(reExport.file, reExport.name, visited);
  for (const star of info.stars) {
    const found = definitionOf(star, name, visited);
    if (found !== null) return found;
  }
  return null;
}

function rewriteIndexImports(text, file) {
  const dir = path.dirname(file);
  return text.replace(NAMED_IMPORT_OR_RE_EXPORT, (statement, keyword, list, from) => {
    const target = path.resolve(dir, from);
    if (!SPLIT_LAYERS.some((layer) => target.startsWith(layer))) return statement;
    const info = moduleInfo(target);
    if (info.reExports.size === 0 && info.stars.length === 0) return statement;
    const byModule = new Map();
    for (const [there, here] of specifiers(list)) {
      const definition = definitionOf(target, there);
      if (definition === null) return statement;
      const names = byModule.get(definition.file) ?? [];
      names.push(definition.name === here ? here : `${definition.name} as ${here}`);
      byModule.set(definition.file, names);
    }
    return [...byModule]
      .map(([module, names]) => {
        const relative = path.relative(dir, module).split(path.sep).join('/');
        return `${keyword} { ${names.join(', ')} } from '${relative.startsWith('.') ? relative : `./${relative}`}';`;
      })
      .join(' ');
  });
}

const directImports = {
  name: 'direct-imports',
  setup(bundler) {
    bundler.onLoad({ filter: /\.js$/ }, (args) => {
      if (!args.path.startsWith(srcRoot + path.sep)) return undefined;
      return { contents: rewriteIndexImports(fs.readFileSync(args.path, 'utf8'), args.path), loader: 'js' };
    });
  },
};

// ---------------------------------------------------------------------------------------------
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
  plugins: [directImports],
  // Bundled CommonJS dependencies use require() and __filename; give the ESM bundle both. Every
  // chunk is in the same folder, so one require() serves them all: createRequire() walks the
  // folder's parents each time, which cost ~0.15 ms per chunk a command loads.
  banner: {
    js: [
      "import { createRequire as __sbCreateRequire } from 'node:module';",
      "import { fileURLToPath as __sbFileURLToPath } from 'node:url';",
      "const require = (globalThis[Symbol.for('switchboard.bundle.require')] ??= __sbCreateRequire(import.meta.url));",
      'const __filename = __sbFileURLToPath(import.meta.url);',
      "const __dirname = __filename.slice(0, __filename.lastIndexOf('/'));",
    ].join(' '),
  },
});
