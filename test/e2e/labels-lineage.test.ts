// Messages may carry a conversation's labels (group displayName/subject/space) and sub-agent
// lineage (parentSessionKey, spawnDepth); origin keeps the sender's raw id beside its name. All
// stored in OpenClaw's field names and shown by `sessions show` (issue 13, item 11).

import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { jsonLines, runCli, tempDir } from '../helpers.js';

const ndjson = (...lines: unknown[]): string => `${lines.map((l) => JSON.stringify(l)).join('\n')}\n`;

async function show(stateDir: string, key: string): Promise<{ entry: Record<string, any>; text: string }> {
  const json = await runCli(['sessions', 'show', key, '--json', '--state-dir', stateDir]);
  assert.equal(json.code, 0, json.stderr);
  const text = await runCli(['sessions', 'show', key, '--state-dir', stateDir]);
  return { entry: JSON.parse(json.stdout).entry, text: text.stdout };
}

test('group labels follow the latest message, origin keeps the raw sender id, lineage is stored and shown', async () => {
  const stateDir = tempDir();
  const group = { channel: 'telegram', peer: 'group:-100777', sender: { id: '111', name: 'Alice' } };
  const result = await runCli(['ingest', '--state-dir', stateDir], {
    input: ndjson(
      { ...group, text: 'hi all', group: { displayName: 'Book club', subject: 'Dune', space: 'Friends' } },
      { ...group, sender: { id: '333', name: 'Carol' }, text: 'renamed', group: { subject: 'Dune Messiah' } },
      { channel: 'slack', peer: 'direct:U222', sender: { id: 'U222', name: 'Bob' }, text: 'hello' },
      { channel: 'telegram', sessionKey: 'agent:main:subagent:task-1', parentSessionKey: 'agent:main:main', spawnDepth: 1, text: 'summarise the thread' },
    ),
  });
  assert.equal(result.code, 0, result.stderr);
  assert.deepEqual(jsonLines(result.stdout).map((e) => e.type), ['result', 'result', 'result', 'result']);

  const g = await show(stateDir, 'agent:main:telegram:group:-100777');
  assert.equal(g.entry.displayName, 'Book club');
  assert.equal(g.entry.subject, 'Dune Messiah', 'the latest subject wins');
  assert.equal(g.entry.space, 'Friends');
  assert.equal(g.entry.origin.sender, 'Alice', 'origin is the first message');
  assert.equal(g.entry.origin.senderId, '111');
  assert.match(g.text, /labels\s+displayName "Book club", subject "Dune Messiah", space "Friends"/);
  assert.match(g.text, /first sender\s+Alice \(id 111\)/);

  const dm = await show(stateDir, 'agent:main:main');
  assert.equal(dm.entry.displayName, 'Bob');
  assert.equal(dm.entry.origin.sender, 'Bob');
  assert.equal(dm.entry.origin.senderId, 'U222');

  const sub = await show(stateDir, 'agent:main:subagent:task-1');
  assert.equal(sub.entry.parentSessionKey, 'agent:main:main');
  assert.equal(sub.entry.spawnDepth, 1);
  assert.match(sub.text, /spawned by\s+agent:main:main \(depth 1\)/);

  // Everything written still matches store-format's schemas: doctor finds nothing.
  const doctor = await runCli(['doctor', '--json', '--state-dir', stateDir]);
  assert.equal(doctor.code, 0, doctor.stdout);
});

test('bad labels or lineage are BAD_MESSAGE for their line only', async () => {
  const stateDir = tempDir();
  const result = await runCli(['ingest', '--state-dir', stateDir], {
    input: ndjson(
      { channel: 'telegram', sessionKey: 'agent:main:subagent:x', spawnDepth: -1, text: 'a' },
      { channel: 'telegram', sessionKey: 'agent:main:subagent:x', parentSessionKey: 'main', text: 'b' },
      { channel: 'telegram', peer: 'group:1', group: 'Book club', text: 'c' },
      { channel: 'telegram', sessionKey: 'agent:main:subagent:x', spawnDepth: 2, text: 'd' },
    ),
  });
  assert.equal(result.code, 65);
  const events = jsonLines(result.stdout);
  assert.deepEqual(events.map((e) => [e.type, e.line, e.code ?? null]), [
    ['error', 1, 'BAD_MESSAGE'],
    ['error', 2, 'BAD_MESSAGE'],
    ['error', 3, 'BAD_MESSAGE'],
    ['result', 4, null],
  ]);
  assert.match(events[0].message, /spawnDepth/);
  assert.match(events[1].message, /parentSessionKey/);
});

test('an entry as OpenClaw writes it (spawnedBy, fields switchboard does not know) stays as it is and shows its lineage', async () => {
  const stateDir = tempDir();
  const dir = path.join(stateDir, 'agents', 'main', 'sessions');
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  const key = 'agent:main:subagent:oc-1';
  fs.writeFileSync(
    path.join(dir, 'sessions.json'),
    JSON.stringify({ [key]: { sessionId: 'oc-1-session', updatedAt: 1, spawnedBy: 'agent:main:main', spawnDepth: 2, label: 'research', groupChannel: '#x', thinkingLevel: 'high' } }, null, 2),
    { mode: 0o600 },
  );
  const result = await runCli(['ingest', '--state-dir', stateDir], { input: ndjson({ channel: 'telegram', sessionKey: key, text: 'go on', group: { subject: 'Research' } }) });
  assert.equal(result.code, 0, result.stderr);
  const { entry, text } = await show(stateDir, key);
  assert.equal(entry.spawnedBy, 'agent:main:main');
  assert.equal(entry.label, 'research');
  assert.equal(entry.thinkingLevel, 'high');
  assert.equal(entry.subject, 'Research');
  assert.match(text, /spawned by\s+agent:main:main \(depth 2\)/);
});
