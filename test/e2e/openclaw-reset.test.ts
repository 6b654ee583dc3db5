// Store fidelity with OpenClaw-written entries, through the real binary:
// * every switchboard reset (`sessions reset`, `/new` through ingest, a due reset by `maintain`,
//   and the drain's deferred rotation after the turn before a reset) starts an instance without
//   OpenClaw's per-conversation state — the claude-cli conversation, systemSent, abortedLastRun —
//   as OpenClaw's own reset does; otherwise OpenClaw resumes the old CLI conversation;
// * a session id with capitals (`openclaw agent --session-id Work-Run1`) is a usable session.
// The entries are shaped exactly as OpenClaw 2026.7.1 writes them (absolute sessionFile, its
// origin, route and header without sessionKey); OpenClaw itself is not needed.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import { OPENCLAW_SESSION_ID, OPENCLAW_SESSION_KEY, openClawEntry } from '../fixtures/openclaw-entry.js';
import { REPO_ROOT, jsonLines, runCli, tempDir } from '../helpers.js';

const KEY = OPENCLAW_SESSION_KEY;
const OLD = OPENCLAW_SESSION_ID;
const T0 = Date.parse('2026-12-03T10:00:00Z');
const RUNNER = path.join(REPO_ROOT, 'dist', 'test', 'fixtures', 'before-reset-runner.js');

function sessionsDir(state: string): string {
  return path.join(state, 'agents', 'main', 'sessions');
}

/** OpenClaw's transcript: header without sessionKey/agentId, then a user and an assistant message. */
function writeOpenClawTranscript(file: string, sessionId: string): void {
  const at = new Date(T0).toISOString();
  const lines = [
    { type: 'session', version: 3, id: sessionId, timestamp: at, cwd: '/home/oc' },
    { type: 'message', id: 'a1b2c3d4', parentId: null, timestamp: at, message: { role: 'user', content: [{ type: 'text', text: 'remember the code word: tangerine' }], timestamp: T0 } },
    { type: 'message', id: 'b2c3d4e5', parentId: 'a1b2c3d4', timestamp: at, message: { role: 'assistant', content: [{ type: 'text', text: 'ok, tangerine' }], timestamp: T0, provider: 'anthropic', model: 'claude-sonnet-4-5' } },
  ];
  fs.writeFileSync(file, lines.map((l) => `${JSON.stringify(l)}\n`).join(''), { mode: 0o600 });
}

/** A Telegram DM session OpenClaw ran on the claude-cli backend (recordSessionMetaFromInbound, updateLastRoute, setCliSessionBinding). */
function openClawState(config: Record<string, unknown>): string {
  const state = tempDir('sb-oc-reset-');
  const dir = sessionsDir(state);
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  fs.writeFileSync(path.join(state, 'switchboard.json5'), JSON.stringify(config));
  const file = path.join(dir, `${OLD}.jsonl`);
  writeOpenClawTranscript(file, OLD);
  const entry = {
    ...openClawEntry({ updatedAt: T0, sessionStartedAt: T0 }, file),
    thinkingLevel: 'low',
    status: 'done',
    startedAt: T0 - 5000,
    endedAt: T0,
    runtimeMs: 5000,
  };
  fs.writeFileSync(path.join(dir, 'sessions.json'), `${JSON.stringify({ [KEY]: entry }, null, 2)}\n`, { mode: 0o600 });
  return state;
}

function entryOf(state: string): Record<string, unknown> {
  return JSON.parse(fs.readFileSync(path.join(sessionsDir(state), 'sessions.json'), 'utf8'))[KEY];
}

/** What OpenClaw's reset gives a new instance, and what every switchboard reset must give it too. */
function assertFreshInstance(entry: Record<string, unknown>): void {
  assert.notEqual(entry.sessionId, OLD, 'a new instance');
  for (const field of ['cliSessionBindings', 'cliSessionIds', 'claudeCliSessionId']) assert.equal(entry[field], undefined, `${field}: OpenClaw would resume the old claude-cli conversation`);
  assert.equal(entry.systemSent, false, 'systemSent: OpenClaw would skip the new instance\'s system intro');
  assert.equal(entry.abortedLastRun, false);
  assert.equal(entry.compactionCount, 0);
  for (const field of ['status', 'startedAt', 'endedAt', 'runtimeMs', 'model', 'modelProvider', 'contextTokens']) assert.equal(entry[field], undefined, `${field} was the old instance's`);
  // The old counts are not carried: the new instance has used nothing yet, as OpenClaw's reset writes it.
  assert.deepEqual([entry.inputTokens, entry.outputTokens, entry.totalTokens, entry.totalTokensFresh, entry.totalTokensVersion], [0, 0, 0, true, 1]);
  assert.equal(entry.thinkingLevel, 'low', 'a setting OpenClaw keeps on reset');
  assert.deepEqual(entry.deliveryContext, { channel: 'telegram', to: 'telegram:111', accountId: 'default' });
  assert.equal((entry.origin as Record<string, unknown>).label, 'Alice');
  assert.equal(entry.lastTo, 'telegram:111');
}

const dm = (text: string): string => `${JSON.stringify({ channel: 'telegram', peer: { kind: 'direct', id: '111' }, sender: { name: 'Alice' }, text })}\n`;

describe('a switchboard reset of an entry OpenClaw wrote starts a fresh OpenClaw conversation', () => {
  test('sessions reset', async () => {
    const state = openClawState({ session: { dmScope: 'per-channel-peer' } });
    const r = await runCli(['sessions', 'reset', KEY, '--yes', '--json', '--state-dir', state]);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(jsonLines(r.stdout)[0].previousSessionId, OLD);
    assertFreshInstance(entryOf(state));
  });

  test('/new through ingest', async () => {
    const state = openClawState({ session: { dmScope: 'per-channel-peer' } });
    const r = await runCli(['ingest', '--state-dir', state], { input: dm('/new') });
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(jsonLines(r.stdout).find((e) => e.type === 'result').reset, { reason: 'command', previousSessionId: OLD });
    assertFreshInstance(entryOf(state));
  });

  test('a due daily reset applied by maintain', async () => {
    const state = openClawState({ session: { dmScope: 'per-channel-peer', reset: { mode: 'daily', atHour: 4, timezone: 'UTC' } } });
    const r = await runCli(['maintain', '--json', '--state-dir', state, '--now', '2026-12-04T05:00:00Z']);
    assert.equal(r.code, 0, r.stderr);
    assertFreshInstance(entryOf(state));
  });

  test('the drain\'s rotation after the turn before the reset', async () => {
    const state = openClawState({
      agents: { defaults: { runner: { command: [process.execPath, RUNNER], env: { BEFORE_RESET_LOG: path.join(tempDir(), 'runs.log'), BEFORE_RESET_MODE: 'save' } } } },
      session: { dmScope: 'per-channel-peer', reset: { beforeReset: { timeoutSeconds: 30 } } },
    });
    const r = await runCli(['ingest', '--state-dir', state], { input: dm('/new') });
    assert.equal(r.code, 0, r.stderr);
    const started = jsonLines(r.stdout).filter((e) => e.type === 'run_started');
    assert.equal(started[0]?.beforeReset, true, 'the rotation was deferred to the drain');
    assertFreshInstance(entryOf(state));
  });
});

describe('a rotation that waits for the turn before the reset', () => {
  test('leaves the old instance\'s OpenClaw fields in the entry until the new instance starts', async () => {
    const snapshot = path.join(tempDir(), 'sessions-during-turn.json');
    const state = openClawState({
      agents: {
        defaults: {
          runner: {
            command: [process.execPath, RUNNER],
            env: { BEFORE_RESET_LOG: path.join(tempDir(), 'runs.log'), BEFORE_RESET_MODE: 'save', BEFORE_RESET_SNAPSHOT: snapshot },
          },
        },
      },
      session: { dmScope: 'per-channel-peer', reset: { beforeReset: { timeoutSeconds: 30 } } },
    });
    // The runner learns the store's path from the config's env: the state dir is made above.
    const configFile = path.join(state, 'switchboard.json5');
    const config = JSON.parse(fs.readFileSync(configFile, 'utf8'));
    config.agents.defaults.runner.env.BEFORE_RESET_STORE = path.join(sessionsDir(state), 'sessions.json');
    fs.writeFileSync(configFile, JSON.stringify(config));
    const before = entryOf(state);
    const r = await runCli(['ingest', '--state-dir', state], { input: dm('/new') });
    assert.equal(r.code, 0, r.stderr);
    assert.equal(jsonLines(r.stdout).filter((e) => e.type === 'run_started')[0]?.beforeReset, true, 'the rotation was deferred to the drain');
    // While the turn ran, the rotation was pending and the instance still the old one: OpenClaw
    // running this session meanwhile must find its conversation state as it left it.
    const during = JSON.parse(fs.readFileSync(snapshot, 'utf8'))[KEY];
    assert.equal(during.sessionId, OLD);
    assert.equal(during.pendingReset?.previousSessionId, OLD, 'the rotation was waiting');
    for (const field of ['cliSessionBindings', 'cliSessionIds', 'claudeCliSessionId', 'systemSent', 'abortedLastRun', 'compactionCount', 'inputTokens', 'outputTokens', 'totalTokens', 'model', 'modelProvider', 'status', 'startedAt', 'endedAt', 'runtimeMs', 'sessionFile', 'sessionStartedAt']) {
      assert.deepEqual(during[field], before[field], `${field} is the old instance's until the rotation`);
    }
    // Once the rotation is applied, the new instance starts without them.
    assertFreshInstance(entryOf(state));
  });
});

describe('a session id with capitals, as `openclaw agent --session-id Work-Run1` keeps it', () => {
  const KEY_X = 'agent:main:explicit:work-run1';
  const ID = 'Work-Run1';

  function explicitState(): string {
    const state = tempDir('sb-oc-ids-');
    const dir = sessionsDir(state);
    fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
    const file = path.join(dir, `${ID}.jsonl`);
    writeOpenClawTranscript(file, ID);
    fs.writeFileSync(path.join(dir, 'sessions.json'), `${JSON.stringify({ [KEY_X]: { sessionId: ID, updatedAt: T0, sessionStartedAt: T0, sessionFile: file } }, null, 2)}\n`, { mode: 0o600 });
    return state;
  }

  test('doctor finds nothing, the listing has it usable, show and ingest use it, and a reset mints a lower-case uuid', async () => {
    const state = explicitState();
    const doctor = await runCli(['doctor', '--json', '--state-dir', state]);
    assert.equal(doctor.code, 0, doctor.stdout + doctor.stderr);
    const listing = jsonLines((await runCli(['sessions', '--json', '--state-dir', state])).stdout)[0];
    const row = listing.sessions.find((s: { key: string }) => s.key === KEY_X);
    assert.equal(row.sessionId, ID);
    assert.equal(row.problem, undefined);
    assert.ok(!(row.flags ?? []).includes('unusable'), JSON.stringify(row));
    const show = await runCli(['sessions', 'show', KEY_X, '--json', '--state-dir', state]);
    assert.equal(show.code, 0, show.stderr);
    assert.equal(jsonLines(show.stdout)[0].entry.sessionId, ID);
    const ingest = await runCli(['ingest', '--state-dir', state], { input: `${JSON.stringify({ channel: 'webchat', sessionKey: KEY_X, text: 'more' })}\n` });
    assert.equal(ingest.code, 0, ingest.stdout + ingest.stderr);
    assert.equal(jsonLines(ingest.stdout).find((e) => e.type === 'result').sessionId, ID);
    const records = jsonLines(fs.readFileSync(path.join(sessionsDir(state), `${ID}.jsonl`), 'utf8'));
    assert.equal(records.at(-1).message.content[0].text, 'more', 'appended to OpenClaw\'s transcript');
    // A message pinned to the instance by its id is accepted as written.
    const pinned = await runCli(['ingest', '--state-dir', state], { input: `${JSON.stringify({ channel: 'webchat', sessionKey: KEY_X, sessionId: ID, text: 'pinned' })}\n` });
    assert.equal(pinned.code, 0, pinned.stdout + pinned.stderr);
    assert.equal(jsonLines(pinned.stdout).find((e) => e.type === 'result').sessionId, ID);
    const reset = await runCli(['sessions', 'reset', KEY_X, '--yes', '--json', '--state-dir', state]);
    assert.equal(reset.code, 0, reset.stderr);
    assert.match(jsonLines(reset.stdout)[0].sessionId, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    const after = await runCli(['doctor', '--json', '--state-dir', state]);
    assert.equal(after.code, 0, after.stdout + after.stderr);
  });

  test('ids that are not safe file names stay refused', async () => {
    for (const bad of ['../x', 'a/b', '.hidden', '-lead', 'a b', 'a:b', 'x'.repeat(129)]) {
      const state = explicitState();
      const file = path.join(sessionsDir(state), 'sessions.json');
      const store = JSON.parse(fs.readFileSync(file, 'utf8'));
      store[KEY_X].sessionId = bad;
      delete store[KEY_X].sessionFile;
      fs.writeFileSync(file, JSON.stringify(store));
      const show = await runCli(['sessions', 'show', KEY_X, '--json', '--state-dir', state]);
      assert.equal(show.code, 65, `${bad}: ${show.stderr}`);
    }
  });
});
