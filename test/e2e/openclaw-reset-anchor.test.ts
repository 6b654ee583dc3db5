// A session OpenClaw 2026.7.1 reset (test/fixtures/openclaw-reset-anchor/README.md) has no
// sessionStartedAt: switchboard's daily reset measures it from its transcript header's time, as
// OpenClaw does (2026.7.1 and 2026.9.6, resolveSessionLifecycleTimestamps), and without a usable
// header from the first real interaction it records (the instance began no later than that).

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

function show(state: string, at: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return runCli(['sessions', 'show', KEY, '--json', '--state-dir', state, '--config', path.join(state, 'switchboard.json'), '--now', at]);
}

describe('a session OpenClaw 2026.7.1 reset, under a daily reset', () => {
  // The new instance's transcript header says 2026-12-03T19:06:33.708Z; the entry has no start.
  test('is measured from its transcript header, as OpenClaw measures it: fresh until the next boundary, then reset', async () => {
    const state = copyState();
    const entry = JSON.parse(fs.readFileSync(path.join(state, 'agents', 'main', 'sessions', 'sessions.json'), 'utf8'))[KEY];
    assert.equal(entry.sessionStartedAt, undefined, 'the fixture has the entry as OpenClaw wrote it');
    assert.equal(entry.lastInteractionAt, undefined);
    const before = await show(state, '2026-12-04T03:59:59.999Z');
    assert.equal(before.code, 0, before.stderr);
    assert.deepEqual(JSON.parse(before.stdout).freshness, { fresh: true, nextResetAt: Date.parse('2026-12-04T04:00:00Z') });
    const after = await show(state, '2026-12-05T10:00:00Z');
    assert.deepEqual(JSON.parse(after.stdout).freshness, { fresh: false, staleReason: 'daily' });
    const plan = await runCli(['maintain', '--dry-run', '--json', '--state-dir', state, '--config', path.join(state, 'switchboard.json'), '--now', '2026-12-05T10:00:00Z']);
    assert.equal(plan.code, 0, plan.stderr);
    assert.deepEqual(JSON.parse(plan.stdout).resets.reset.map((r: { sessionKey: string; reason: string }) => [r.sessionKey, r.reason]), [[KEY, 'daily']]);

    const same = await send(state, '2026-12-03T20:00:00Z', 'a0');
    assert.equal(same.sessionId, OPENCLAWS_ID, 'the day OpenClaw reset it: fresh');
    assert.equal(same.reset, null);
    const first = await send(state, '2026-12-05T10:00:00Z', 'a1');
    assert.notEqual(first.sessionId, OPENCLAWS_ID, 'past the boundary after the header: reset by the first message');
    assert.equal(first.reset?.reason, 'daily', JSON.stringify(first));
    const second = await send(state, '2026-12-05T11:00:00Z', 'a2');
    assert.equal(second.sessionId, first.sessionId, 'the new instance has its own start: same day, fresh');
  });

  test('maintain applies the due reset of such an entry', async () => {
    const state = copyState();
    const result = await runCli(['maintain', '--json', '--state-dir', state, '--config', path.join(state, 'switchboard.json'), '--now', '2026-12-05T10:00:00Z']);
    assert.equal(result.code, 0, result.stderr);
    const [done] = JSON.parse(result.stdout).resets.reset;
    assert.equal(done.previousSessionId, OPENCLAWS_ID);
    const entry = JSON.parse(fs.readFileSync(path.join(state, 'agents', 'main', 'sessions', 'sessions.json'), 'utf8'))[KEY];
    assert.equal(entry.sessionId, done.sessionId);
    assert.notEqual(entry.sessionId, OPENCLAWS_ID);
  });

  test('without a header of its own instance, the daily check is anchored at the first interaction', async () => {
    const state = copyState();
    const dir = path.join(state, 'agents', 'main', 'sessions');
    // A header naming another sessionId says nothing about this instance's start.
    const file = path.join(dir, `${OPENCLAWS_ID}.jsonl`);
    const lines = fs.readFileSync(file, 'utf8').split('\n');
    lines[0] = JSON.stringify({ ...JSON.parse(lines[0]!), id: 'another-instance' });
    fs.writeFileSync(file, lines.join('\n'));
    const first = await send(state, '2026-12-05T10:00:00Z', 'a1');
    assert.equal(first.sessionId, OPENCLAWS_ID);
    assert.equal(first.reset, null, 'no time of this instance known yet: not reset');
    const next = await send(state, '2026-12-06T10:00:00Z', 'a3');
    assert.equal(next.reset?.reason, 'daily', JSON.stringify(next));
  });
});
