// Build step: bundles the compiled CLI into dist/bundle/ so `switchboard` starts by requiring a
// few CommonJS files instead of loading dozens of ES modules (cold start is a measured target, P2
// in quality.md).
// Rarely used parts (json5, chalk, …) stay in separate chunks loaded on demand.

import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { build, transform } from 'esbuild';

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
// One ES module build, shipped as CommonJS

/*
 * esbuild splits code into chunks only in ES module output, so the bundle is built as ES modules
 * and each chunk is then rewritten as a CommonJS file. Node 20's ES module loader costs ~7 ms of
 * every command's start (resolving, linking and evaluating a dozen chunks through its promise
 * machinery; measured: `route resolve --json` 1.44 → 1.31 × `node -e 0`), while require() of
 * the same code is synchronous and already set up when node starts. What the rewrite changes:
 * `import.meta.url` becomes the chunk's file URL, and `import("./chunk.js")` of a CommonJS chunk
 * becomes a require() of it (a promise all the same). A chunk that imports a package from
 * node_modules (ink and react, ES modules only, which require() cannot load in Node 20) stays an
 * ES module, named `.mjs`; it is only ever reached through import(), which CommonJS code may use.
 */
const bundleDir = path.join(root, 'dist', 'bundle');
// Chunk names are content hashes: without this, every build would leave the previous ones behind.
fs.rmSync(bundleDir, { recursive: true, force: true });
const built = await build({
  entryPoints: [path.join(root, 'dist', 'src', 'cli', 'main.js')],
  outdir: bundleDir,
  write: false,
  bundle: true,
  splitting: true,
  format: 'esm',
  platform: 'node',
  target: 'node20',
  logLevel: 'warning',
  // `switchboard top` loads ink and react from node_modules when it starts: bundling them would
  // add a large chunk (and yoga's WebAssembly) for one interactive command.
  external: ['ink', 'react', 'react/*'],
  plugins: [directImports],
});

// Bytes are start-up time (each is decoded and parsed on every run): drop whitespace and
// simplify syntax, but keep identifiers, so stack traces still name their functions.
const MINIFY = { minifyWhitespace: true, minifySyntax: true };
const PACKAGE_IMPORT = /^import\s[^;]*?\bfrom\s*"(?!\.|node:)[^"]+";/m;
const CHUNK_REFERENCE = /(\bimport\(|\bfrom\s*|\brequire\()(["'])\.\/([^"'\\]+)\2(\))?/g;

/*
 * import() in code that bin/load-bundle.cjs compiles with a code cache (vm.Script) would need a
 * loader callback, which is experimental in Node 20; the launcher lends its own import() instead.
 * Without the launcher (a chunk required some other way) the chunk's own import() is used.
 */
const IMPORT = "(globalThis[Symbol.for('switchboard.import')] ?? ((specifier) => import(specifier)))";
const OTHER_IMPORT = /\bimport\((?=["'](?!\.\/))/g;

const esModuleChunks = new Set(built.outputFiles.filter((chunk) => PACKAGE_IMPORT.test(chunk.text)).map((chunk) => path.basename(chunk.path)));
const mjsName = (name) => name.replace(/\.js$/, '.mjs');

/** Points references to ES module chunks at their `.mjs` names; import() of a CommonJS chunk from CommonJS becomes require(). */
function linkChunks(text, importerIsCommonJs, importer) {
  return text.replace(CHUNK_REFERENCE, (whole, opening, quote, name, closing = '') => {
    const target = esModuleChunks.has(name) ? mjsName(name) : name;
    if (opening === 'import(' && importerIsCommonJs) {
      if (!esModuleChunks.has(name)) return `Promise.resolve().then(() => require(${quote}./${target}${quote}))`;
      return `${IMPORT}(require("node:url").pathToFileURL(require("node:path").join(__dirname, ${quote}${target}${quote})).href)`;
    }
    if (opening === 'require(' && esModuleChunks.has(name)) throw new Error(`${importer}: require() of the ES module chunk ${name}`);
    return `${opening}${quote}./${target}${quote}${closing}`;
  });
}

fs.mkdirSync(bundleDir, { recursive: true });
// The package is "type": "module"; this folder's `.js` files are CommonJS.
fs.writeFileSync(path.join(bundleDir, 'package.json'), '{ "type": "commonjs" }\n');
for (const chunk of built.outputFiles) {
  const name = path.basename(chunk.path);
  if (esModuleChunks.has(name)) {
    if (/\b(__require|__filename|__dirname)\b/.test(chunk.text)) throw new Error(`${name}: an ES module chunk needs require() or __filename`);
    const minified = await transform(chunk.text, { format: 'esm', platform: 'node', target: 'node20', logLevel: 'warning', ...MINIFY });
    fs.writeFileSync(path.join(bundleDir, mjsName(name)), linkChunks(minified.code, false, name));
    continue;
  }
  const usesModuleUrl = chunk.text.includes('import.meta');
  const commonJs = await transform(chunk.text, {
    format: 'cjs',
    platform: 'node',
    target: 'node20',
    logLevel: 'warning',
    ...MINIFY,
    define: usesModuleUrl ? { 'import.meta.url': '__sbModuleUrl' } : {},
    // ES modules are strict mode, and the code was written and tested as such (the unit tests
    // import dist/src); a CommonJS file is not unless it says so. Without this, the shipped CLI
    // ran sloppy: a write to a frozen object or a getter-only property was silently dropped
    // instead of throwing, and `this` in a plain function call was the global object.
    banner: `"use strict";${usesModuleUrl ? "const __sbModuleUrl = require('node:url').pathToFileURL(__filename).href;" : ''}`,
  });
  const text = linkChunks(commonJs.code, true, name).replace(OTHER_IMPORT, `${IMPORT}(`);
  if (text.includes('import.meta')) throw new Error(`${name}: import.meta left in a CommonJS chunk`);
  if (/\bimport\(/.test(text.replaceAll(IMPORT, ''))) throw new Error(`${name}: an import() the launcher cannot serve (not a string literal)`);
  fs.writeFileSync(chunk.path, text);
}
