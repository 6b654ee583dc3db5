// When a session instance rotates, checked end to end against the rules OpenClaw's own code
// applies (2026.9.6 and 2026.7.1, read from their npm packages and run against switchboard in a
// throwaway harness): `/reset soft` keeps the session, `/new:` is a trigger, an empty
// resetTriggers list keeps the defaults, a key naming a group gets the group policy, the legacy
// session.idleMinutes is an idle policy, and a stored time in the future or before 1970 is
// ignored rather than switching a check off or expiring a session; a TZ that Intl cannot name
// (empty, unknown, a POSIX rule) is the host clock Date reads, as OpenClaw's daily reset uses it.
// Every clock is `--now`.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import { jsonLines, runCli, tempDir, writeJson } from '../helpers.js';

const DM = { channel: 'telegram', peer: { kind: 'direct', id: 'bob' }, sender: { id: 'bob', name: 'Bob' } };
const DM_KEY = 'agent:main:main';

function setup(session: Record<string, unknown>): { state: string; config: string } {
  const state = tempDir('sb-reset-rules-');
  const config = writeJson(path.join(state, 'switchboard.json'), { session });
  return { state, config };
}

async function send(where: { state: string; config: string }, message: Record<string, unknown>, now: string) {
  const result = await runCli(['ingest', '--state-dir', where.state, '--config', where.config, '--now', now], { input: `${JSON.stringify(message)}\n` });
  assert.equal(result.code, 0, result.stdout + result.stderr);
  const [event] = jsonLines(result.stdout);
  assert.equal(event.type, 'result', result.stdout);
  return event;
}

function storeOf(state: string): Record<string, any> {
  return JSON.parse(fs.readFileSync(path.join(state, 'agents', 'main', 'sessions', 'sessions.json'), 'utf8'));
}

describe('reset triggers as OpenClaw reads them', () => {
  test('/reset soft keeps the session and records the text; /reset softly is a reset', async () => {
    const where = setup({});
    const first = await send(where, { ...DM, text: 'hello' }, '2026-03-01T10:00:00Z');
    for (const text of ['/reset soft', '/RESET Soft remember the plan', '/reset: soft']) {
      const soft = await send(where, { ...DM, text }, '2026-03-01T10:01:00Z');
      assert.equal(soft.reset, null, text);
      assert.equal(soft.sessionId, first.sessionId, text);
    }
    const transcript = fs.readFileSync(path.join(where.state, 'agents', 'main', 'sessions', storeOf(where.state)[DM_KEY].sessionFile), 'utf8');
    assert.ok(transcript.includes('/RESET Soft remember the plan'), 'a soft reset is an ordinary message');
    const hard = await send(where, { ...DM, text: '/reset softly' }, '2026-03-01T10:02:00Z');
    assert.equal(hard.reset?.reason, 'command');
    assert.notEqual(hard.sessionId, first.sessionId);
  });

  test('a colon after the trigger is the same command: /new: text rotates and passes the text on', async () => {
    const where = setup({});
    const first = await send(where, { ...DM, text: 'hello' }, '2026-03-01T10:00:00Z');
    const colon = await send(where, { ...DM, text: '/new: what shall we plan today?' }, '2026-03-01T10:01:00Z');
    assert.equal(colon.reset?.reason, 'command');
    assert.notEqual(colon.sessionId, first.sessionId);
    const entry = storeOf(where.state)[DM_KEY];
    const lines = jsonLines(fs.readFileSync(path.join(where.state, 'agents', 'main', 'sessions', entry.sessionFile), 'utf8'));
    const texts = lines.filter((line) => line.message?.role === 'user').map((line) => line.message.content[0].text);
    assert.deepEqual(texts, ['what shall we plan today?']);
    assert.ok(!JSON.stringify(lines).includes('/new:'), 'the trigger word is never recorded');
  });

  test('an empty resetTriggers list keeps /new and /reset', async () => {
    const where = setup({ resetTriggers: [] });
    const first = await send(where, { ...DM, text: 'hello' }, '2026-03-01T10:00:00Z');
    const reset = await send(where, { ...DM, text: '/new' }, '2026-03-01T10:01:00Z');
    assert.equal(reset.reset?.reason, 'command');
    assert.notEqual(reset.sessionId, first.sessionId);
  });
});

describe('which policy and which times', () => {
  test('a message with an explicit group key gets resetByType.group (ingest and sessions show)', async () => {
    const where = setup({ resetByType: { group: { mode: 'idle', idleMinutes: 1 } } });
    const message = { channel: 'telegram', sessionKey: 'agent:main:telegram:group:-100', text: 'hi' };
    const first = await send(where, message, '2026-03-01T10:00:00Z');
    const show = await runCli(['sessions', 'show', 'agent:main:telegram:group:-100', '--json', '--state-dir', where.state, '--config', where.config, '--now', '2026-03-01T10:05:00Z']);
    assert.equal(show.code, 0, show.stderr);
    assert.deepEqual(JSON.parse(show.stdout).freshness, { fresh: false, staleReason: 'idle' });
    const later = await send(where, message, '2026-03-01T10:05:00Z');
    assert.equal(later.reset?.reason, 'idle');
    assert.notEqual(later.sessionId, first.sessionId);
  });

  test('the legacy session.idleMinutes is an idle policy, exact at its edge', async () => {
    const where = setup({ idleMinutes: 30 });
    const first = await send(where, { ...DM, text: 'hello' }, '2026-03-01T10:00:00Z');
    const atEdge = await send(where, { ...DM, text: 'still here' }, '2026-03-01T10:30:00Z');
    assert.equal(atEdge.reset, null, 'exactly idleMinutes later is still fresh');
    assert.equal(atEdge.sessionId, first.sessionId);
    const after = await send(where, { ...DM, text: 'back' }, '2026-03-01T11:00:00.001Z');
    assert.equal(after.reset?.reason, 'idle');
    const validate = await runCli(['config', 'validate', '--config', where.config]);
    assert.equal(validate.code, 0, validate.stderr);
    assert.ok(!/not used by switchboard/.test(validate.stdout + validate.stderr), validate.stdout + validate.stderr);
  });

  test('a lastInteractionAt in the future is ignored: idle is measured from the start', async () => {
    const where = setup({ reset: { mode: 'idle', idleMinutes: 60 } });
    const first = await send(where, { ...DM, text: 'hello' }, '2026-03-01T10:00:00Z');
    const file = path.join(where.state, 'agents', 'main', 'sessions', 'sessions.json');
    const store = storeOf(where.state);
    store[DM_KEY].lastInteractionAt = Date.parse('2026-04-01T00:00:00Z'); // a clock that was ahead
    fs.writeFileSync(file, JSON.stringify(store));
    const later = await send(where, { ...DM, text: 'back' }, '2026-03-01T12:00:00Z');
    assert.equal(later.reset?.reason, 'idle');
    assert.notEqual(later.sessionId, first.sessionId);
  });

  test('a time before 1970 in the entry never expires it', async () => {
    const where = setup({ reset: { mode: 'daily', idleMinutes: 60 } });
    const first = await send(where, { ...DM, text: 'hello' }, '2026-03-01T10:00:00Z');
    const file = path.join(where.state, 'agents', 'main', 'sessions', 'sessions.json');
    const store = storeOf(where.state);
    store[DM_KEY].lastInteractionAt = -5;
    fs.writeFileSync(file, JSON.stringify(store));
    const later = await send(where, { ...DM, text: 'back' }, '2026-03-01T10:10:00Z');
    assert.equal(later.reset, null, JSON.stringify(later));
    assert.equal(later.sessionId, first.sessionId);
  });
});

describe('the host zone from TZ', () => {
  // A daily reset at 04:00 local; the session began at 10:00Z on 1 March.
  async function dailyNext(tz: string): Promise<{ code: number | null; freshness?: { fresh: boolean; nextResetAt?: number }; stderr: string }> {
    const where = setup({ reset: { mode: 'daily', atHour: 4 } });
    await send(where, { ...DM, text: 'hello' }, '2026-03-01T10:00:00Z');
    const show = await runCli(['sessions', 'show', DM_KEY, '--json', '--state-dir', where.state, '--config', where.config, '--now', '2026-03-01T12:00:00Z'], { env: { TZ: tz } });
    return { code: show.code, freshness: show.code === 0 ? JSON.parse(show.stdout).freshness : undefined, stderr: show.stderr };
  }

  test('a POSIX TZ without a zone name counts its hours as Date does (JST-9 is Tokyo, UTC+3 is three hours behind)', async () => {
    const tokyo = await dailyNext('JST-9');
    assert.equal(tokyo.code, 0, tokyo.stderr);
    assert.equal(tokyo.freshness?.nextResetAt, Date.parse('2026-03-01T19:00:00Z'), '04:00 at UTC+9');
    const behind = await dailyNext('UTC+3');
    assert.equal(behind.freshness?.nextResetAt, Date.parse('2026-03-02T07:00:00Z'), '04:00 at UTC-3');
  });

  test('an empty or unknown TZ is UTC, as for Date, not an internal error', async () => {
    for (const tz of ['', 'Not/AZone']) {
      const result = await dailyNext(tz);
      assert.equal(result.code, 0, `TZ=${JSON.stringify(tz)}: ${result.stderr}`);
      assert.equal(result.freshness?.nextResetAt, Date.parse('2026-03-02T04:00:00Z'), `TZ=${JSON.stringify(tz)}`);
    }
  });
});
