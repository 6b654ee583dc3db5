// The launcher starts the bundle's chunks from V8 code caches (bin/load-bundle.cjs). A cache must
// only ever stand for the file it was made from: V8 itself checks little more than the source's
// length, so a chunk edited after its cache was made would otherwise run its old code.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { REPO_ROOT, tempDir } from '../helpers.js';

const LOADER = path.join(REPO_ROOT, 'bin', 'load-bundle.cjs');

interface Loaded {
  answer: string;
  stats: { fromCache: number; compiled: number; rejected: number };
}

/** Loads `dir`'s main.js in a fresh node through the launcher's loader; what it exported and how its chunks were compiled. */
function load(dir: string, mode: 'read' | 'write' = 'read', alsoCached: string[] = []): Loaded {
  const script = `const { exports, stats } = require(${JSON.stringify(LOADER)}).loadBundle(${JSON.stringify(dir)}, ${JSON.stringify(mode)}, ${JSON.stringify(alsoCached)}); process.stdout.write(JSON.stringify({ answer: exports.answer(), stats }));`;
  const run = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8' });
  assert.equal(run.status, 0, run.stderr);
  return JSON.parse(run.stdout) as Loaded;
}

/** A two-chunk bundle: main.js re-exports what part.js says. */
function makeBundle(): string {
  const dir = tempDir();
  fs.writeFileSync(path.join(dir, 'package.json'), '{ "type": "commonjs" }\n');
  fs.writeFileSync(path.join(dir, 'main.js'), 'const part = require("./part.js"); exports.answer = () => `main+${part.word()}`;\n');
  fs.writeFileSync(path.join(dir, 'part.js'), 'exports.word = () => "old";\n');
  return dir;
}

test('chunks start from the caches a write run made, and give the same answers', () => {
  const dir = makeBundle();
  assert.deepEqual(load(dir), { answer: 'main+old', stats: { fromCache: 0, compiled: 2, rejected: 0 } });
  assert.deepEqual(load(dir, 'write').stats, { fromCache: 0, compiled: 2, rejected: 0 });
  assert.ok(fs.existsSync(path.join(dir, 'part.js.cache')), 'the write run saved a cache per chunk');
  assert.deepEqual(load(dir), { answer: 'main+old', stats: { fromCache: 2, compiled: 0, rejected: 0 } });
});

test('files of the other cached folders (the validators, .cjs) start from caches too; files elsewhere never', () => {
  const dir = makeBundle();
  const side = tempDir();
  const elsewhere = tempDir();
  fs.writeFileSync(path.join(side, 'check.cjs'), 'exports.ok = () => "checked";\n');
  fs.writeFileSync(path.join(elsewhere, 'other.cjs'), 'exports.ok = () => "other";\n');
  fs.writeFileSync(path.join(dir, 'main.js'), `const a = require(${JSON.stringify(path.join(side, 'check.cjs'))}); const b = require(${JSON.stringify(path.join(elsewhere, 'other.cjs'))}); exports.answer = () => a.ok() + b.ok();\n`);
  load(dir, 'write', [side]);
  assert.ok(fs.existsSync(path.join(side, 'check.cjs.cache')));
  assert.ok(!fs.existsSync(path.join(elsewhere, 'other.cjs.cache')), 'a file outside the cached folders is loaded the usual way');
  assert.deepEqual(load(dir, 'read', [side]), { answer: 'checkedother', stats: { fromCache: 2, compiled: 0, rejected: 0 } });
});

test('a chunk edited after its cache was made runs its new code (same length, new mtime)', () => {
  const dir = makeBundle();
  load(dir, 'write');
  const part = path.join(dir, 'part.js');
  // Same length on purpose: V8's own check of a cache compares the source's length only.
  fs.writeFileSync(part, 'exports.word = () => "new";\n');
  const later = new Date(fs.statSync(part).mtimeMs + 5_000);
  fs.utimesSync(part, later, later);
  assert.deepEqual(load(dir), { answer: 'main+new', stats: { fromCache: 1, compiled: 1, rejected: 0 } });
});

test('a damaged cache is not used: cut short, or data V8 refuses behind a right header', () => {
  const dir = makeBundle();
  load(dir, 'write');
  fs.writeFileSync(path.join(dir, 'main.js.cache'), 'short');
  const partCache = path.join(dir, 'part.js.cache');
  const header = fs.readFileSync(partCache).subarray(0, 16);
  fs.writeFileSync(partCache, Buffer.concat([header, Buffer.alloc(256, 0x5a)]));
  assert.deepEqual(load(dir), { answer: 'main+old', stats: { fromCache: 0, compiled: 1, rejected: 1 } });
});

test('the built bundle has caches this node accepts for the chunks a command loads', () => {
  const script = `const { stats } = require(${JSON.stringify(LOADER)}).loadBundle(${JSON.stringify(path.join(REPO_ROOT, 'dist', 'bundle'))}); process.stdout.write(JSON.stringify(stats));`;
  const run = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8' });
  assert.equal(run.status, 0, run.stderr);
  const stats = JSON.parse(run.stdout) as Loaded['stats'];
  assert.ok(stats.fromCache > 0, `no chunk came from a cache: ${run.stdout}`);
  assert.equal(stats.rejected, 0, `V8 refused caches the build made: ${run.stdout}`);
});

test('a chunk that starts with "use strict" runs in strict mode, from source and from its cache', () => {
  const dir = makeBundle();
  // The bundle's chunks start with the directive (ES modules are strict); the loader's wrapper must keep it a directive.
  fs.writeFileSync(path.join(dir, 'part.js'), '"use strict";\nexports.word = function () { return this === undefined ? "strict" : "sloppy"; };\n');
  fs.writeFileSync(path.join(dir, 'main.js'), '"use strict";\nconst { word } = require("./part.js"); exports.answer = () => `main+${word()}`;\n');
  assert.equal(load(dir, 'write').answer, 'main+strict');
  assert.deepEqual(load(dir), { answer: 'main+strict', stats: { fromCache: 2, compiled: 0, rejected: 0 } });
});
