// Loads the bundled CLI (dist/bundle/, CommonJS chunks) with V8 code caches: compiling the chunks a
// command loads was its largest single start-up cost (~5 ms of `sessions --json`, measured with a
// CPU profile), and V8 can skip it with the code it made for the same source before.
//
// `npm run build` makes the caches (scripts/code-cache.mjs runs a few commands with
// SWITCHBOARD_CODE_CACHE=write, and each chunk's code, with what those runs compiled, is saved
// as `<chunk>.js.cache`). A cache is used only for the very file it was made from: it starts
// with the chunk's size and mtime, and V8 refuses one made by another V8 version or with other
// flags (then the chunk is compiled from source, as without a cache). A chunk edited by hand
// gets a new mtime; the check is not a content hash because hashing the source would cost more
// than the compile it saves. Files outside the bundle folder load the usual way.

'use strict';

const fs = require('node:fs');
const Module = require('node:module');
const path = require('node:path');
const vm = require('node:vm');

/** Bytes before V8's data in a cache file: the chunk's mtime (ms) and size, two doubles. */
const HEADER_BYTES = 16;

/**
 * Requires `<bundleDir>/main.js` with the code caches of the files in `bundleDir` and in the
 * folders `alsoCached` (the schema validators the build compiles, `.cjs` files of ~100 KB that
 * cost a write ~2 ms each to compile). `mode` `write` (build only) also saves, at exit, every
 * such file's code as compiled by then. Returns the entry module's exports and counts of what
 * was compiled how (the tests read them).
 */
function loadBundle(bundleDir, mode = 'read', alsoCached = []) {
  const prefixes = [bundleDir, ...alsoCached].map((dir) => path.resolve(dir) + path.sep);
  const stats = { fromCache: 0, compiled: 0, rejected: 0 };
  const made = [];
  // Node loads `.js` and, having no handler of its own for it, `.cjs` through this one.
  const plain = Module._extensions['.js'];
  Module._extensions['.js'] = function loadChunk(module, filename) {
    if (!prefixes.some((prefix) => filename.startsWith(prefix))) return plain.call(this, module, filename);
    const source = fs.readFileSync(filename, 'utf8');
    const identity = fileIdentity(filename);
    const cachedData = readCache(filename, identity);
    // The same wrapper Node gives a CommonJS module, compiled where V8 can take a code cache.
    const script = new vm.Script(`(function (exports, require, module, __filename, __dirname) {${source}\n})`, { filename, cachedData });
    if (cachedData === undefined) stats.compiled++;
    else if (script.cachedDataRejected) stats.rejected++;
    else stats.fromCache++;
    if (mode === 'write') made.push({ filename, identity, script });
    const require = (id) => module.require(id);
    script.runInThisContext().call(module.exports, module.exports, require, module, filename, path.dirname(filename));
  };
  // import() from code compiled by vm.Script needs a loader callback (experimental in Node 20); the
  // chunks' few import() calls (ink and react's ES module chunks, node:readline) come through here.
  globalThis[Symbol.for('switchboard.import')] = (specifier) => import(specifier);
  if (mode === 'write') process.on('exit', () => made.forEach(writeCache));
  return { exports: require(path.join(bundleDir, 'main.js')), stats };
}

function fileIdentity(filename) {
  const stat = fs.statSync(filename);
  return [stat.mtimeMs, stat.size];
}

/** The V8 data of the chunk's cache, or undefined when there is none or it was made from another file. */
function readCache(filename, [mtimeMs, size]) {
  let bytes;
  try {
    bytes = fs.readFileSync(`${filename}.cache`);
  } catch {
    return undefined;
  }
  if (bytes.length <= HEADER_BYTES || bytes.readDoubleLE(0) !== mtimeMs || bytes.readDoubleLE(8) !== size) return undefined;
  return bytes.subarray(HEADER_BYTES);
}

function writeCache({ filename, identity, script }) {
  const header = Buffer.alloc(HEADER_BYTES);
  header.writeDoubleLE(identity[0], 0);
  header.writeDoubleLE(identity[1], 8);
  fs.writeFileSync(`${filename}.cache`, Buffer.concat([header, script.createCachedData()]));
}

module.exports = { loadBundle };
