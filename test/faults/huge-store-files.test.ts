// Store files read whole that are larger than any store file can be (a sparse file made by
// truncate, a runaway writer): their text could never fit in a V8 string. A sessions.json over
// 2 GiB failed every command with an opaque IO error (ERR_OUT_OF_RANGE) and left doctor unable
// to check or repair it; now it is damaged like any garbage: STORE_CORRUPT, repairable.
// Sparse files: gigabytes of size, no disk space, nothing read.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { BIN, jsonLines, runCli, tempDir } from '../helpers.js';

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

/** Whether node starts under a 2 GB address-space limit here (`ulimit -v`), so a test may run under it. */
function limitedNodeRuns(): boolean {
  return spawnSync('bash', ['-c', `ulimit -v ${2 * 1024 * 1024} && "${process.execPath}" -e 0`]).status === 0;
}
const noLimit = limitedNodeRuns() ? undefined : 'skipped: ulimit -v is not available here';

test(`doctor reads a transcript line of 3 GiB in bounded memory, under a 2 GB address-space limit${noLimit ? ` (${noLimit})` : ''}`, { skip: noLimit ?? false }, async () => {
  // It held such a line whole and then a joined copy of it: twice its size (6 GB here), and
  // under a limit V8 aborted with a fatal allocation error and a native stack trace.
  const state = tempDir('sb-huge-');
  const sent = await runCli(['send', 'hello', '--channel', 'telegram', '--json', '--state-dir', state]);
  const transcript = path.join(state, 'agents', 'main', 'sessions', `${jsonLines(sent.stdout)[0].sessionId}.jsonl`);
  fs.truncateSync(transcript, THREE_GIB); // one line of NULs after the records
  const r = spawnSync('bash', ['-c', `ulimit -v ${2 * 1024 * 1024} && exec "${process.execPath}" "$0" doctor --json --state-dir "$1"`, BIN, state], { encoding: 'utf8', timeout: 120_000 });
  assert.equal(r.status, 65, r.stderr);
  const problems = JSON.parse(r.stdout).stores[0].problems as { kind: string; message: string }[];
  assert.deepEqual(problems.map((p) => p.kind), ['invalid-entries']);
  assert.match(problems[0]!.message, /too long to check/);
});

test('doctor --repair copies a line too long to parse as it is, piece by piece, and drops only the damage around it', async () => {
  const state = tempDir('sb-huge-');
  const sent = await runCli(['send', 'hello', '--channel', 'telegram', '--json', '--state-dir', state]);
  const transcript = path.join(state, 'agents', 'main', 'sessions', `${jsonLines(sent.stdout)[0].sessionId}.jsonl`);
  const records = fs.readFileSync(transcript);
  fs.appendFileSync(transcript, 'garbage\n');
  const longStart = fs.statSync(transcript).size;
  const longLength = 256 * 1024 * 1024 + 4096; // just over what doctor parses: NULs, sparse
  fs.truncateSync(transcript, longStart + longLength);
  const after = '{"type":"custom","id":"after","parentId":null}\n';
  fs.appendFileSync(transcript, `\n${after}{"type":"cut`);

  const r = await runCli(['doctor', '--repair', '--json', '--state-dir', state], { timeoutMs: 120_000 });
  assert.equal(r.code, 65, r.stderr); // the long line stays, unverifiable
  const repaired = fs.readFileSync(transcript);
  assert.equal(repaired.length, records.length + longLength + 1 + after.length, 'records, the long line and the record after it; no garbage, no torn tail');
  assert.ok(repaired.subarray(0, records.length).equals(records));
  const long = repaired.subarray(records.length, records.length + longLength);
  assert.ok(long.every((byte) => byte === 0), 'the long line byte for byte');
  assert.equal(repaired.subarray(records.length + longLength).toString('utf8'), `\n${after}`);
});
