// A session OpenClaw 2026.7.1 reset (test/fixtures/openclaw-reset-anchor/README.md) has no
// sessionStartedAt: switchboard's daily reset still applies to it, anchored at the first real
// interaction of the instance it then records (the instance began no later than that).

import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import { REPO_ROOT, jsonLines, runCli, tempDir } from '../helpers.js';

const FIXTURE = path.join(REPO_ROOT, 'test', 'fixtures', 'openclaw-reset-anchor', 'state');
const WRITTEN_AT = '/tmp/oc-reset-daily/state';
const KEY = 'agent:main:slack:direct:u07dan';
const OPENCLAWS_ID = '5114d8c3-88bb-4424-9b19-9ff6b494ae85';

function copyState(): string {
  const state = tempDir('sb-openclaw-anchor-');
  fs.cpSync(FIXTURE, state, { recursive: true });
  const file = path.join(state, 'agents', 'main', 'sessions', 'sessions.json');
  fs.writeFileSync(file, fs.readFileSync(file, 'utf8').split(`${WRITTEN_AT}/`).join(`${state}/`));
  return state;
}

async function send(state: string, at: string, messageId: string): Promise<Record<string, any>> {
  const line = JSON.stringify({ channel: 'slack', peer: { kind: 'direct', id: 'U07DAN' }, sender: { id: 'U07DAN', name: 'Dan' }, text: 'hi', messageId, timestamp: at });
  const result = await runCli(['ingest', '--state-dir', state, '--config', path.join(state, 'switchboard.json'), '--now', at], { input: `${line}\n` });
  assert.equal(result.code, 0, result.stdout + result.stderr);
  return jsonLines(result.stdout).find((event: Record<string, any>) => event.type === 'result');
}

describe('a session OpenClaw 2026.7.1 reset, under a daily reset', () => {
  test('is reset by the first message after a boundary that follows its first interaction', async () => {
    const state = copyState();
    const entry = JSON.parse(fs.readFileSync(path.join(state, 'agents', 'main', 'sessions', 'sessions.json'), 'utf8'))[KEY];
    assert.equal(entry.sessionStartedAt, undefined, 'the fixture has the entry as OpenClaw wrote it');
    assert.equal(entry.lastInteractionAt, undefined);
    const first = await send(state, '2026-12-05T10:00:00Z', 'a1');
    assert.equal(first.sessionId, OPENCLAWS_ID);
    assert.equal(first.reset, null, 'no time of this instance known to switchboard yet: not reset');
    const second = await send(state, '2026-12-05T11:00:00Z', 'a2');
    assert.equal(second.sessionId, OPENCLAWS_ID, 'same day: fresh');
    const third = await send(state, '2026-12-06T10:00:00Z', 'a3');
    assert.notEqual(third.sessionId, OPENCLAWS_ID, 'a day later the daily reset applies');
    assert.equal(third.reset?.reason, 'daily', JSON.stringify(third));
  });
});
