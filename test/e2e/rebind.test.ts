// The rebind check for inbound work pinned to an instance (`sessionId` on a message): if that
// instance is no longer current, the message never lands in the new conversation — it is reported
// `expired` (reason `rebind`) and recorded in the old instance's file when that still exists.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { jsonLines, runCli, tempDir } from '../helpers.js';

const message = (fields: Record<string, unknown>): string =>
  JSON.stringify({ channel: 'telegram', peer: { kind: 'direct', id: 'alice' }, ...fields });

function userMessageIds(file: string): string[] {
  return fs
    .readFileSync(file, 'utf8')
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => JSON.parse(line))
    .filter((record) => record.type === 'message' && record.message?.role === 'user')
    .map((record) => record.message.messageId);
}

test('a message pinned to a rotated-away instance goes to that instance, never to the new one', async () => {
  const stateDir = tempDir();
  const sessionsDir = path.join(stateDir, 'agents', 'main', 'sessions');
  const first = jsonLines((await runCli(['ingest', '--state-dir', stateDir], { input: `${message({ text: 'hi', messageId: 'm1' })}\n` })).stdout);
  const oldId = first[0].sessionId as string;
  const reset = await runCli(['sessions', 'reset', 'agent:main:main', '--json', '--state-dir', stateDir]);
  assert.equal(reset.code, 0, reset.stderr);
  const newId = JSON.parse(reset.stdout).sessionId as string;
  assert.notEqual(newId, oldId);

  const input = [
    message({ kind: 'system', text: 'approval granted', messageId: 'late', sessionId: oldId }),
    message({ text: 'for the current one', messageId: 'now', sessionId: newId }),
    message({ kind: 'system', text: 'from nowhere', messageId: 'lost', sessionId: 'no-such-instance' }),
  ].join('\n');
  const result = await runCli(['ingest', '--state-dir', stateDir], { input: `${input}\n` });
  assert.equal(result.code, 0, result.stderr);
  const events = jsonLines(result.stdout);
  const results = events.filter((e) => e.type === 'result');
  assert.deepEqual(results.map((e) => [e.messageId, e.sessionId, e.disposition]), [
    ['late', oldId, 'recorded'],
    ['now', newId, 'recorded'],
    ['lost', 'no-such-instance', 'dropped'],
  ]);
  const expired = events.filter((e) => e.type === 'expired');
  assert.equal(expired.length, 2, JSON.stringify(events));
  const archive = fs.readdirSync(sessionsDir).find((name) => name.startsWith(`${oldId}.jsonl.reset.`))!;
  assert.deepEqual(
    expired.map((e) => [e.messageId, e.reason, e.sessionId, e.currentSessionId, e.recordedIn]),
    [
      ['late', 'rebind', oldId, newId, archive],
      ['lost', 'rebind', 'no-such-instance', newId, null],
    ],
  );
  assert.deepEqual(userMessageIds(path.join(sessionsDir, `${newId}.jsonl`)), ['now'], 'the new conversation holds only its own message');
  const archived = fs.readFileSync(path.join(sessionsDir, archive), 'utf8');
  assert.match(archived, /approval granted/, 'the late notice is in the instance it belongs to');

  const bad = await runCli(['ingest', '--state-dir', stateDir], { input: `${message({ text: 'x', sessionId: '../escape' })}\n` });
  assert.equal(bad.code, 65);
  assert.equal(jsonLines(bad.stdout)[0].path, 'sessionId');
});
