// A file doctor cannot read for want of permission is an I/O failure (74), as it is for every other
// command — not a damaged store (65). Found by a store hunt: `doctor` reported `check-failed …
// EACCES` and exited 65, pointing the user at `--repair`, which cannot fix a permission.
// Runs as the invoking user when that is not root (root reads mode-000 files), else as `nobody`
// through setpriv when it is there.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { BIN, runCli, tempDir } from '../helpers.js';

const asRoot = process.getuid?.() === 0;
const setpriv = asRoot ? spawnSync('setpriv', ['--version']).status === 0 : false;
const skip = asRoot && !setpriv ? 'root reads mode-000 files and setpriv is not here to drop it' : false;

test('doctor on a store with an unreadable transcript exits 74 (IO), naming the file', { skip }, async () => {
  const state = tempDir('sb-doctor-io-');
  const sent = await runCli(['send', 'hi', '--channel', 'telegram', '--peer', 'direct:1', '--state-dir', state, '--json']);
  assert.equal(sent.code, 0, sent.stderr);
  const dir = path.join(state, 'agents', 'main', 'sessions');
  const transcript = path.join(dir, fs.readdirSync(dir).find((name) => name.endsWith('.jsonl'))!);
  // The folders and sessions.json readable by the user doctor runs as; the transcript by nobody.
  for (const folder of [state, path.join(state, 'agents'), path.join(state, 'agents', 'main'), dir]) fs.chmodSync(folder, 0o755);
  fs.chmodSync(path.join(dir, 'sessions.json'), 0o644);
  fs.chmodSync(transcript, 0o000);
  const args = [BIN, 'doctor', '--json', '--state-dir', state];
  const r = asRoot
    ? spawnSync('setpriv', ['--reuid', '65534', '--regid', '65534', '--clear-groups', process.execPath, ...args], { encoding: 'utf8', env: { ...process.env, HOME: state } })
    : spawnSync(process.execPath, args, { encoding: 'utf8' });
  assert.equal(r.status, 74, `${r.stdout}${r.stderr}`);
  const problems = JSON.parse(r.stdout).stores[0].problems;
  assert.ok(problems.some((p: { kind: string; file: string; error?: { code: string } }) => p.kind === 'check-failed' && p.file === transcript && p.error?.code === 'IO'), r.stdout);
});
