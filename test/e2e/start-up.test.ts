// Cold start is a measured target (P2 in quality.md): the commands it times load no module they do
// not use: node:crypto costs ~3 ms of start-up on its own, and a top-level import of it in core (which
// every command loads) once went unnoticed. And they are loaded by require(), never by the ES module
// loader, which costs Node 20 ~7 ms of start-up for the same chunks (scripts/bundle.mjs).

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { BIN, tempDir } from '../helpers.js';

/** The node built-in modules a run of the CLI loaded (process.moduleLoadList at exit). */
function builtinsLoadedBy(args: string[], stateDir: string): string[] {
  const report = path.join(stateDir, 'loaded.json');
  const preload = path.join(stateDir, 'report-loaded.cjs');
  fs.writeFileSync(
    preload,
    `process.on('exit', () => require('node:fs').writeFileSync(${JSON.stringify(report)}, JSON.stringify(process.moduleLoadList)));\n`,
  );
  const run = spawnSync(process.execPath, ['--require', preload, BIN, ...args, '--state-dir', stateDir], { encoding: 'utf8', env: { ...process.env, NO_COLOR: '1' } });
  assert.equal(run.status, 0, run.stderr);
  const loaded = JSON.parse(fs.readFileSync(report, 'utf8')) as string[];
  return loaded.filter((entry) => entry.startsWith('NativeModule ')).map((entry) => entry.slice('NativeModule '.length));
}

for (const args of [
  ['route', 'resolve', '--channel', 'telegram', '--peer', 'direct:123', '--json'],
  ['sessions', '--json'],
]) {
  test(`\`switchboard ${args.slice(0, 2).join(' ')}\` starts without node:crypto`, () => {
    const builtins = builtinsLoadedBy(args, tempDir());
    assert.ok(builtins.includes('fs'), 'the report lists what was loaded');
    assert.ok(!builtins.includes('crypto'), `node:crypto was loaded: ${builtins.filter((name) => !name.startsWith('internal/')).join(', ')}`);
  });

  test(`\`switchboard ${args.slice(0, 2).join(' ')}\` loads its code without the ES module loader`, () => {
    const builtins = builtinsLoadedBy(args, tempDir());
    // node sets the loader up at every start; it translates and links modules only when one is imported.
    assert.ok(builtins.includes('internal/modules/esm/loader'), 'the report lists the loader node sets up');
    for (const part of ['internal/modules/esm/translators', 'internal/modules/esm/module_job']) assert.ok(!builtins.includes(part), `${part} was loaded`);
  });
}

test('every CommonJS chunk of the bundle is strict mode code, as the ES modules it is made from are', () => {
  // A CommonJS file is sloppy mode unless its first statement says otherwise; the unit tests run
  // dist/src as ES modules (always strict), so a sloppy bundle would run code they never ran.
  const bundle = path.join(path.dirname(BIN), '..', 'dist', 'bundle');
  const chunks = fs.readdirSync(bundle).filter((name) => name.endsWith('.js'));
  assert.ok(chunks.includes('main.js'), 'the bundle is built');
  for (const name of chunks) assert.match(fs.readFileSync(path.join(bundle, name), 'utf8'), /^"use strict";/, `${name} is strict mode`);
});
