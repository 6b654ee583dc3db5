// What a writer SIGKILLed halfway through a registry replace, a lock release or a new transcript
// leaves in the store folder — a numbered temp of sessions.json, the .bak.tmp link, a lock
// tombstone, an empty transcript no entry names — is
// garbage that never held committed data. `maintain` (cron, or serve's schedule) removes it by
// doctor's own rule, so that `doctor` does not keep failing (exit 65) after a crash until someone
// runs --repair. Young leftovers may belong to a write in progress and stay.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { after, test } from 'node:test';
import { jsonLines, runCli, tempDir, writeJson } from '../helpers.js';

const roots: string[] = [];
after(() => {
  for (const dir of roots) fs.rmSync(dir, { recursive: true, force: true });
});

/**
 * A real process that begins the writes a killed writer interrupts — a numbered temp of
 * sessions.json with half a registry in it, a .bak.tmp, the tombstone a lock release renames its
 * lock to, a new session's transcript created and not yet written — and is SIGKILLed before it
 * finishes any of them. Returns its (now dead) pid.
 */
function killedHalfwayThrough(sessionsDir: string, transcript: string): number {
  const script = `
    const fs = require('node:fs'); const path = require('node:path');
    const dir = ${JSON.stringify(sessionsDir)};
    fs.writeFileSync(path.join(dir, 'sessions.json.3735928559'), '{"agent:main:direct:a": {"sessionId":');
    fs.linkSync(path.join(dir, 'sessions.json'), path.join(dir, 'sessions.json.bak.tmp'));
    const tombstone = ${JSON.stringify(transcript)} + '.lock-gone-' + process.pid + '-0a1b2c3d4e5f';
    fs.mkdirSync(tombstone);
    fs.writeFileSync(path.join(tombstone, 'owner.json'), JSON.stringify({ version: 1, pid: process.pid }));
    fs.closeSync(fs.openSync(path.join(dir, '0b1c2d3e-4f50-4a6b-8c7d-9e0f1a2b3c4d.jsonl'), 'wx'));
    process.kill(process.pid, 'SIGKILL');`;
  const child = spawnSync(process.execPath, ['-e', script]);
  assert.equal(child.signal, 'SIGKILL');
  return child.pid!;
}

function backdate(file: string, ageMs: number): void {
  const when = new Date(Date.now() - ageMs);
  fs.utimesSync(file, when, when);
}

test('maintain removes the leftovers of a killed writer (not young ones); doctor is clean afterwards', async () => {
  const state = tempDir('sb-leftovers-');
  roots.push(state);
  const config = writeJson(path.join(state, 'c.json'), { session: { dmScope: 'per-peer' } });
  const cli = (...args: string[]) => runCli([...args, '--state-dir', state, '--config', config]);
  const ingested = await runCli(['ingest', '--state-dir', state, '--config', config], {
    input: `${JSON.stringify({ channel: 'telegram', peer: 'direct:a', text: 'hi' })}\n${JSON.stringify({ channel: 'telegram', peer: 'direct:b', text: 'yo' })}\n`,
  });
  assert.equal(ingested.code, 0, ingested.stderr);
  const dir = path.join(state, 'agents', 'main', 'sessions');
  const registry = fs.readFileSync(path.join(dir, 'sessions.json'));
  const transcript = path.join(dir, `${jsonLines(ingested.stdout)[0].sessionId}.jsonl`);

  const pid = killedHalfwayThrough(dir, transcript);
  const temp = path.join(dir, 'sessions.json.3735928559');
  const bakTemp = path.join(dir, 'sessions.json.bak.tmp');
  const tombstone = `${transcript}.lock-gone-${pid}-0a1b2c3d4e5f`;
  // The cron job runs a while after the crash; a write still going on makes young temps only.
  const emptyTranscript = path.join(dir, '0b1c2d3e-4f50-4a6b-8c7d-9e0f1a2b3c4d.jsonl');
  backdate(temp, 120_000);
  backdate(bakTemp, 120_000);
  backdate(emptyTranscript, 120_000);
  const youngTemp = path.join(dir, 'sessions.json.42');
  fs.writeFileSync(youngTemp, '{');

  const kinds = (report: any) => report.stores.flatMap((s: any) => s.problems.map((p: any) => `${p.kind} ${path.basename(p.file)}`)).sort();
  const before = await cli('doctor', '--json');
  assert.equal(before.code, 65);
  assert.deepEqual(kinds(jsonLines(before.stdout)[0]), [`empty-transcript ${path.basename(emptyTranscript)}`, `lock-tombstone ${path.basename(tombstone)}`, 'temp-file sessions.json.3735928559', 'temp-file sessions.json.bak.tmp']);

  const planned = await cli('maintain', '--dry-run', '--json');
  assert.equal(planned.code, 0, planned.stderr);
  const wouldRemove = jsonLines(planned.stdout)[0].leftovers.removed.map((l: any) => `${l.kind} ${l.file}`).sort();
  assert.deepEqual(wouldRemove, [`empty-transcript ${emptyTranscript}`, `lock-tombstone ${tombstone}`, `temp-file ${bakTemp}`, `temp-file ${temp}`].sort());
  for (const file of [temp, bakTemp, tombstone, emptyTranscript]) assert.ok(fs.existsSync(file), `a dry run leaves ${path.basename(file)}`);

  const maintained = await cli('maintain', '--json');
  assert.equal(maintained.code, 0, maintained.stderr);
  assert.deepEqual(jsonLines(maintained.stdout)[0].leftovers.removed.map((l: any) => `${l.kind} ${l.file}`).sort(), wouldRemove);
  for (const file of [temp, bakTemp, tombstone, emptyTranscript]) assert.ok(!fs.existsSync(file), `${path.basename(file)} is removed`);
  assert.ok(fs.existsSync(youngTemp), 'a young temp may be a write in progress: left alone');
  assert.deepEqual(fs.readFileSync(path.join(dir, 'sessions.json')), registry, 'the registry is untouched');

  const afterwards = await cli('doctor', '--json');
  assert.equal(afterwards.code, 0, afterwards.stdout);
  assert.deepEqual(kinds(jsonLines(afterwards.stdout)[0]), []);
});
