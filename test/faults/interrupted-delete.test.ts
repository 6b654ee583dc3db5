// A `sessions delete` that dies between archiving the transcript (renamed to `.deleted.<ts>`)
// and removing the entry from sessions.json leaves the entry naming a file that is gone. The
// deletion never completed, so the next writer puts the archive back and goes on with the
// session's history. Before, the next message started an empty file under the same name: the
// runner saw no history, `sessions history` listed the instance twice, and doctor then saw
// nothing wrong. Real processes: a `sessions delete` SIGKILLed the moment its archive appears
// (the rounds where it got further are counted, not failed), then the real CLI.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { BIN, jsonLines, runCli, tempDir, writeJson } from '../helpers.js';
import { cleanEnv } from '../serve-process.js';

const KEY = 'agent:main:direct:alice';
const say = (text: string, messageId: string) => JSON.stringify({ channel: 'telegram', peer: 'direct:alice', text, messageId });

/** Runs `sessions delete` and SIGKILLs it once a `.deleted.` archive shows up; true when the entry was still there then. */
async function deleteKilledAfterArchive(state: string, config: string, dir: string): Promise<boolean> {
  const child = spawn(process.execPath, [BIN, 'sessions', 'delete', KEY, '--yes', '--state-dir', state, '--config', config], { env: cleanEnv(), stdio: 'ignore' });
  const closed = new Promise<void>((resolve) => child.on('close', () => resolve()));
  let interrupted = false;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) break;
    if (fs.readdirSync(dir).some((name) => name.includes('.jsonl.deleted.'))) {
      child.kill('SIGKILL');
      await closed;
      interrupted = Object.hasOwn(JSON.parse(fs.readFileSync(path.join(dir, 'sessions.json'), 'utf8')), KEY);
      break;
    }
    await new Promise((resolve) => setImmediate(resolve));
  }
  await closed;
  return interrupted;
}

test('a sessions delete killed after archiving, before removing the entry: the next message puts the transcript back and keeps its history', async () => {
  let interruptedRounds = 0;
  for (let round = 0; round < 6 && interruptedRounds < 2; round++) {
    const state = tempDir('sb-delete-kill-');
    const config = writeJson(path.join(state, 'c.json'), { session: { dmScope: 'per-peer' } });
    const dir = path.join(state, 'agents', 'main', 'sessions');
    const ingest = (lines: string[]) => runCli(['ingest', '--state-dir', state, '--config', config], { input: `${lines.join('\n')}\n` });
    assert.equal((await ingest([say('one', 'a1'), say('two', 'a2')])).code, 0);
    if (!(await deleteKilledAfterArchive(state, config, dir))) {
      // The kill came after the entry was removed: that deletion completed, nothing to see here.
      continue;
    }
    interruptedRounds++;
    const entry = JSON.parse(fs.readFileSync(path.join(dir, 'sessions.json'), 'utf8'))[KEY];
    assert.equal(fs.existsSync(path.join(dir, entry.sessionFile)), false, 'the transcript was archived');

    const next = await ingest([say('three', 'a3'), say('one', 'a1')]);
    assert.equal(next.code, 0, next.stderr);
    assert.deepEqual(jsonLines(next.stdout).map((e) => e.disposition), ['recorded', 'duplicate']);
    const names = fs.readdirSync(dir);
    assert.deepEqual(names.filter((name) => name.includes('.deleted.')), [], 'the archive was put back');
    const texts = jsonLines(fs.readFileSync(path.join(dir, entry.sessionFile), 'utf8')).filter((r) => r.type === 'message').map((r) => r.message.content[0].text);
    assert.deepEqual(texts, ['one', 'two', 'three'], 'the history goes on in the same file');
    const history = await runCli(['sessions', 'history', KEY, '--json', '--state-dir', state, '--config', config]);
    assert.deepEqual(JSON.parse(history.stdout).instances.map((i: any) => i.sessionId), [entry.sessionId], 'one instance, listed once');
  }
  assert.ok(interruptedRounds > 0, 'at least one delete was killed between its archive and its store write');
});

/**
 * The state an interrupted delete leaves (entry kept, transcript archived as `.deleted.<ts>`) on
 * a session with work left: a message queued with --no-wait (then, with `cancelFirst`, cancelled,
 * which leaves only its `dropped` report in the entry's outbox). The next process that finds the
 * queue orphaned takes it up: here an ingest for another session, which itself never appends to
 * this one, so the first writer is the run (or, for the report, the drain). Before, that writer
 * started an empty file under the same name.
 */
async function firstWriterAfterInterruptedDelete(cancelFirst: boolean): Promise<string[]> {
  const state = tempDir('sb-delete-run-');
  const config = writeJson(path.join(state, 'c.json'), { agents: { defaults: { runner: { command: 'builtin:echo' } } }, session: { dmScope: 'per-peer' } });
  const dir = path.join(state, 'agents', 'main', 'sessions');
  const ingest = (lines: string[], extra: string[] = []) => runCli(['ingest', '--state-dir', state, '--config', config, ...extra], { input: `${lines.join('\n')}\n` });
  assert.equal((await ingest([say('one', 'a1')])).code, 0);
  const queued = await ingest([say('two', 'a2')], ['--no-wait']);
  assert.equal(queued.code, 0, queued.stderr);
  if (cancelFirst) {
    const listed = JSON.parse((await runCli(['queue', '--json', '--state-dir', state, '--config', config])).stdout);
    const cancel = await runCli(['queue', 'cancel', listed.items[0].runId, '--state-dir', state, '--config', config]);
    assert.equal(cancel.code, 0, cancel.stderr);
  }
  const entry = JSON.parse(fs.readFileSync(path.join(dir, 'sessions.json'), 'utf8'))[KEY];
  fs.renameSync(path.join(dir, entry.sessionFile), path.join(dir, `${entry.sessionFile}.deleted.${new Date().toISOString().replace(/:/g, '-')}`));

  const other = await ingest([JSON.stringify({ channel: 'telegram', peer: 'direct:bob', text: 'hi', messageId: 'b1' })]);
  assert.equal(other.code, 0, other.stderr);
  assert.deepEqual(fs.readdirSync(dir).filter((name) => name.includes('.deleted.')), [], 'the archive was put back');
  return jsonLines(fs.readFileSync(path.join(dir, entry.sessionFile), 'utf8')).map((r) =>
    r.type === 'message' ? `${r.message.role}: ${r.message.content[0].text}` : `${r.type}${r.customType ? ` ${r.customType}` : ''}`,
  );
}

test('a run that is the first to write after an interrupted delete puts the transcript back too', async () => {
  const said = await firstWriterAfterInterruptedDelete(false);
  assert.deepEqual(said.filter((line) => line.startsWith('user')), ['user: one', 'user: two'], 'the queued message went to the same file, after its history');
  assert.ok(said.indexOf('assistant: echo: two') > said.indexOf('user: two'), `and its answer after it: ${said.join(' | ')}`);
});

test('so does a drain whose first write is a cancelled message\'s report', async () => {
  const said = await firstWriterAfterInterruptedDelete(true);
  assert.deepEqual(said.filter((line) => line.startsWith('user')), ['user: one'], said.join(' | '));
  assert.ok(said.includes('custom dropped'), `the report of the cancelled message follows its history: ${said.join(' | ')}`);
});
