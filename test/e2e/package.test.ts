// The package installs as a tool: `npm pack` ships everything the binary needs, and the binary
// installed from the tarball (outside the repository) runs `--version` and a small ingest.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { jsonLines, REPO_ROOT, tempDir } from '../helpers.js';

const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';

function run(command: string, args: string[], cwd: string, input?: string) {
  // No npm_* variables from an outer `npm test`: they would change how the inner npm behaves.
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) if (!key.startsWith('npm_') && !key.startsWith('SWITCHBOARD_')) env[key] = value;
  return spawnSync(command, args, { cwd, env: { ...env, NO_COLOR: '1' }, encoding: 'utf8', input, timeout: 120_000 });
}

/**
 * A lock file for a project that depends on the tarball, made from our own lock's runtime
 * entries: `npm ci` then installs exactly those versions from the npm cache by integrity, with no
 * registry metadata needed, so the test does not depend on the network once the cache holds
 * them (any `npm install` of this repository fills it).
 */
function consumerLock(tarball: string): object {
  const lock = JSON.parse(fs.readFileSync(path.join(REPO_ROOT, 'package-lock.json'), 'utf8'));
  const root = lock.packages[''];
  const packages: Record<string, unknown> = {
    '': { name: 'consumer', dependencies: { switchboard: `file:${tarball}` } },
    'node_modules/switchboard': { version: root.version, resolved: `file:${tarball}`, license: root.license, dependencies: root.dependencies, bin: root.bin, engines: root.engines },
  };
  for (const [key, value] of Object.entries(lock.packages as Record<string, { dev?: boolean }>)) {
    if (key !== '' && value.dev !== true) packages[key] = value;
  }
  return { name: 'consumer', lockfileVersion: 3, requires: true, packages };
}

test('every dependency with an install script is declared in allowScripts (no warnings on npm install)', () => {
  const pkg = JSON.parse(fs.readFileSync(path.join(REPO_ROOT, 'package.json'), 'utf8'));
  const lock = JSON.parse(fs.readFileSync(path.join(REPO_ROOT, 'package-lock.json'), 'utf8'));
  const withScripts = Object.entries(lock.packages as Record<string, { hasInstallScript?: boolean; version: string }>)
    .filter(([key, value]) => key !== '' && value.hasInstallScript === true)
    .map(([key, value]) => ({ name: key.slice(key.lastIndexOf('node_modules/') + 'node_modules/'.length), version: value.version }));
  const allowed = Object.keys(pkg.allowScripts ?? {});
  for (const dep of withScripts) {
    assert.ok(allowed.includes(dep.name) || allowed.includes(`${dep.name}@${dep.version}`), `${dep.name}@${dep.version} has an install script: declare it in package.json "allowScripts"`);
  }
});

test('npm pack ships a built CLI that installs and runs outside the repository', (t) => {
  const pkg = JSON.parse(fs.readFileSync(path.join(REPO_ROOT, 'package.json'), 'utf8'));
  // `prepack` builds before `npm pack` and `npm publish`, so the tarball always carries a fresh
  // build; the build is no `prepare`/`postinstall` script, which npm would offer to run (and warn
  // about) when the tarball is installed. This test packs with --ignore-scripts because
  // `npm test` has just built.
  assert.match(pkg.scripts.prepack, /npm run build/);
  for (const script of ['preinstall', 'install', 'postinstall', 'prepare']) assert.equal(pkg.scripts[script], undefined, `no ${script} script`);
  const dir = tempDir('sb-pack-');
  const packed = run(npm, ['pack', '--ignore-scripts', '--json', '--pack-destination', dir], REPO_ROOT);
  assert.equal(packed.status, 0, packed.stderr);
  const [info] = JSON.parse(packed.stdout);
  const files = (info.files as { path: string }[]).map((f) => f.path);
  for (const needed of ['bin/switchboard', 'bin/load-bundle.cjs', 'bin/package.json', 'dist/bundle/package.json', 'dist/bundle/main.js', 'dist/validators/sessions.cjs', 'store-format/config.schema.json', 'man/switchboard.1', 'examples/alice.ndjson']) {
    assert.ok(files.includes(needed), `${needed} is in the tarball`);
  }
  assert.ok(!files.some((f) => f.startsWith('src/') || f.startsWith('dist/test/')), 'no sources or compiled tests in the tarball');
  // Code caches match only the files they were made from, and npm gives packed files one mtime.
  assert.ok(!files.some((f) => f.endsWith('.cache')), 'no code caches in the tarball');

  const tarball = path.join(dir, info.filename as string);
  const app = path.join(dir, 'app');
  fs.mkdirSync(app);
  fs.writeFileSync(path.join(app, 'package.json'), JSON.stringify({ name: 'consumer', private: true, dependencies: { switchboard: `file:${tarball}` } }));
  fs.writeFileSync(path.join(app, 'package-lock.json'), JSON.stringify(consumerLock(tarball)));
  const quiet = ['--no-audit', '--no-fund', '--loglevel=error'];
  let installed = run(npm, ['ci', '--offline', ...quiet], app);
  if (installed.status !== 0 && /ENOTCACHED/.test(installed.stderr)) {
    t.diagnostic('dependencies not in the npm cache: installing them from the registry');
    installed = run(npm, ['ci', '--prefer-offline', ...quiet], app);
  }
  assert.equal(installed.status, 0, installed.stderr);
  assert.equal(installed.stderr, '', 'no warnings while installing');

  const bin = path.join(app, 'node_modules', '.bin', 'switchboard');
  const version = run(bin, ['--version'], app);
  assert.equal(version.status, 0, version.stderr);
  assert.equal(version.stdout.trim(), pkg.version);

  const packageDir = path.join(app, 'node_modules', 'switchboard');
  const state = path.join(dir, 'state');
  const ingest = run(bin, ['ingest', path.join(packageDir, 'examples', 'alice.ndjson'), '--config', path.join(packageDir, 'examples', 'switchboard.json5'), '--state-dir', state], app);
  assert.equal(ingest.status, 0, ingest.stderr);
  const events = jsonLines(ingest.stdout);
  assert.equal(events.length, 5);
  assert.ok(events.every((e) => e.type === 'result' && e.persisted === true));
  const listed = run(bin, ['sessions', '--all-agents', '--json', '--config', path.join(packageDir, 'examples', 'switchboard.json5'), '--state-dir', state], app);
  assert.equal(listed.status, 0, listed.stderr);
  assert.equal(JSON.parse(listed.stdout).count, 4);
});
