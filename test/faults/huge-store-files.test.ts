// Store files read whole that are larger than any store file can be (a sparse file made by
// truncate, a runaway writer): their text could never fit in a V8 string. A sessions.json over
// 2 GiB failed every command with an opaque IO error (ERR_OUT_OF_RANGE) and left doctor unable
// to check or repair it; now it is damaged like any garbage: STORE_CORRUPT, repairable.
// Sparse files: gigabytes of size, no disk space, nothing read.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { jsonLines, runCli, tempDir } from '../helpers.js';

const THREE_GIB = 3 * 1024 * 1024 * 1024;

test('a 3 GiB sessions.json is STORE_CORRUPT (exit 65) for every command, never read; doctor finds it repairable', async () => {
  const state = tempDir('sb-huge-');
  const flags = ['--state-dir', state];
  assert.equal((await runCli(['send', 'hello', '--channel', 'telegram', ...flags])).code, 0);
  const store = path.join(state, 'agents', 'main', 'sessions', 'sessions.json');
  fs.truncateSync(store, THREE_GIB);
  for (const args of [['sessions', '--json'], ['send', 'again', '--channel', 'telegram'], ['sessions', 'show', 'agent:main:main']]) {
    const r = await runCli([...args, ...flags]);
    assert.equal(r.code, 65, `${args.join(' ')}: ${r.stdout}${r.stderr}`);
    assert.match(r.stdout + r.stderr, /STORE_CORRUPT|is damaged/);
    if (args[0] !== 'send') assert.match(r.stderr, /doctor --repair/, 'the hint names the repair');
  }
  const sent = await runCli(['send', 'again', '--channel', 'telegram', '--json', ...flags]);
  assert.equal(jsonLines(sent.stdout)[0].code, 'STORE_CORRUPT');
  assert.equal(fs.statSync(store).size, THREE_GIB, 'left as it was');

  const check = await runCli(['doctor', '--json', ...flags]);
  assert.equal(check.code, 65, check.stderr);
  const problems = JSON.parse(check.stdout).stores[0].problems;
  assert.deepEqual(problems.map((p: { kind: string; repairable: boolean }) => [p.kind, p.repairable]), [['store-corrupt', true]]);
});

test('a 3 GiB lock owner record is no record of ours: locks and doctor answer without reading it', async () => {
  const state = tempDir('sb-huge-');
  const flags = ['--state-dir', state];
  assert.equal((await runCli(['send', 'hello', '--channel', 'telegram', ...flags])).code, 0);
  const lock = path.join(state, 'agents', 'main', 'sessions', 'sessions.json.lock');
  fs.mkdirSync(lock);
  fs.writeFileSync(path.join(lock, 'owner.json'), '');
  fs.truncateSync(path.join(lock, 'owner.json'), THREE_GIB);
  const listed = await runCli(['locks', '--json', ...flags]);
  assert.equal(listed.code, 0, listed.stderr);
  const check = await runCli(['doctor', '--json', ...flags]);
  assert.doesNotMatch(check.stdout + check.stderr, /INTERNAL|internal error|out of range/i);
  const problems = JSON.parse(check.stdout).stores[0].problems as { kind: string; message: string }[];
  assert.ok(problems.some((p) => /more than any store file holds/.test(p.message)), JSON.stringify(problems));
});
