// The other direction of issue 12: a store switchboard writes (runs, replies, mirrors, commands,
// a reset, a Telegram topic) is accepted by a reader that reads it the way OpenClaw does, and
// OpenClaw would replay only the conversation, never switchboard's record-only messages.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { readAsOpenClaw } from '../fixtures/openclaw-reader.js';
import { runCli, tempDir, writeJson } from '../helpers.js';

test('a switchboard-written store reads cleanly as OpenClaw reads it', async () => {
  const stateDir = tempDir();
  const config = writeJson(path.join(stateDir, 'config.json'), { agents: { defaults: { runner: { command: 'builtin:echo' } } } });
  const dm = (text: string) => JSON.stringify({ channel: 'telegram', peer: { kind: 'direct', id: '111' }, sender: { id: '111', name: 'Alice' }, text });
  const lines = [
    dm('hello'),
    dm('/queue collect'),
    dm('/new'),
    dm('after the reset'),
    JSON.stringify({ channel: 'telegram', peer: { kind: 'group', id: '-100888' }, threadId: '42', sender: { id: '7', name: 'Bob' }, text: 'in a topic' }),
    JSON.stringify({ channel: 'slack', peer: { kind: 'direct', id: 'U07DAN' }, text: 'from slack' }),
  ];
  for (const line of lines) {
    // One line at a time, each waiting for its run, so every session has its replies.
    const result = await runCli(['ingest', '--config', config, '--state-dir', stateDir], { input: `${line}\n` });
    assert.equal(result.code, 0, result.stderr);
  }
  const view = readAsOpenClaw(path.join(stateDir, 'agents', 'main', 'sessions'));
  assert.deepEqual(view.problems, []);
  const main = view.context.get('agent:main:main')!;
  assert.ok(main.includes('user: after the reset'), main.join(' | '));
  assert.ok(main.some((text) => text.startsWith('assistant: ')), 'the runner replies are replayed');
  assert.ok(!main.some((text) => text.includes('Queue settings')), 'command replies are record-only');
  const replies = main.filter((text) => text.startsWith('assistant: '));
  assert.equal(new Set(replies).size, replies.length, `each reply is replayed once, its delivery mirror never: ${replies.join(' | ')}`);
  const topic = view.context.get('agent:main:telegram:group:-100888:topic:42');
  assert.ok(topic?.includes('user: in a topic'), JSON.stringify([...view.context.keys()]));
  // OpenClaw's Telegram code addresses a forum topic as telegram:<chatId>:topic:<threadId>.
  const store = JSON.parse(fs.readFileSync(path.join(stateDir, 'agents', 'main', 'sessions', 'sessions.json'), 'utf8'));
  const topicEntry = store['agent:main:telegram:group:-100888:topic:42'];
  assert.deepEqual([topicEntry.deliveryContext.to, topicEntry.lastTo, topicEntry.deliveryContext.threadId], ['telegram:-100888:topic:42', 'telegram:-100888:topic:42', '42']);
});
