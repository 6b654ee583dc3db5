// session.reset.beforeReset end to end, through the real binary and a real runner process: before
// any reset (/new, an idle or daily rotation found by ingest, `sessions reset`, `maintain`) the agent
// gets one turn on the old instance, recorded in the old transcript; a runner that fails or hangs
// is reported and the reset happens anyway.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { REPO_ROOT, jsonLines, runCli, tempDir } from '../helpers.js';

const RUNNER = path.join(REPO_ROOT, 'dist', 'test', 'fixtures', 'before-reset-runner.js');
const KEY = 'agent:main:main';

interface Setup {
  stateDir: string;
  log: string;
  sessionsDir: string;
}

function setup(mode: 'save' | 'fail' | 'hang', reset: Record<string, unknown> = {}, beforeReset: unknown = { timeoutSeconds: 30 }): Setup {
  const stateDir = tempDir();
  const log = path.join(stateDir, 'runs.log');
  const config = {
    agents: { defaults: { runner: { command: [process.execPath, RUNNER], env: { BEFORE_RESET_LOG: log, BEFORE_RESET_MODE: mode } } } },
    session: { reset: { ...reset, beforeReset } },
  };
  fs.writeFileSync(path.join(stateDir, 'switchboard.json5'), JSON.stringify(config));
  return { stateDir, log, sessionsDir: path.join(stateDir, 'agents', 'main', 'sessions') };
}

const dm = (text: string): string => `${JSON.stringify({ channel: 'telegram', peer: { kind: 'direct', id: 'alice' }, text })}\n`;

function records(file: string): any[] {
  return fs
    .readFileSync(file, 'utf8')
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => JSON.parse(line));
}

/** The archived transcript of an instance (rotated away as `.reset.<ts>`). */
function archived(s: Setup, sessionId: string): any[] {
  const name = fs.readdirSync(s.sessionsDir).find((file) => file.startsWith(`${sessionId}.jsonl.reset.`));
  assert.ok(name, `the old instance ${sessionId} was archived`);
  return records(path.join(s.sessionsDir, name));
}

function logLines(s: Setup): string[] {
  return fs.readFileSync(s.log, 'utf8').trim().split('\n');
}

async function ingest(s: Setup, text: string, now?: string): Promise<any[]> {
  const result = await runCli(['ingest', '--state-dir', s.stateDir, ...(now ? ['--now', now] : [])], { input: dm(text) });
  assert.equal(result.code, 0, result.stderr);
  return jsonLines(result.stdout);
}

test('/new: the agent saves on the old instance first, then the conversation starts afresh', async () => {
  const s = setup('save');
  const [first] = await ingest(s, 'remember: the door code is 4711');
  const oldId = first.sessionId as string;
  const events = await ingest(s, '/new what now?');
  const result = events.find((e) => e.type === 'result');
  assert.deepEqual(result.reset, { reason: 'command', previousSessionId: oldId });
  const newId = result.sessionId as string;
  assert.notEqual(newId, oldId);
  const started = events.filter((e) => e.type === 'run_started');
  assert.deepEqual(started.map((e) => [e.sessionId, e.beforeReset === true]), [[oldId, true], [newId, false]], 'the turn before the reset runs first, on the old instance');
  // The user is not sent what the agent said while saving; the new conversation's reply is.
  assert.deepEqual(events.filter((e) => e.type === 'reply').map((e) => [e.sessionId, e.text]), [[newId, 'echo: what now?']]);
  assert.deepEqual(logLines(s), [`run ${oldId} remember: the door code is 4711`, `before-reset ${oldId} command`, `run ${newId} what now?`]);

  const old = archived(s, oldId);
  const marker = old.findIndex((r) => r.type === 'custom' && r.customType === 'before_reset');
  assert.ok(marker > 0, 'the turn is recorded in the old transcript');
  assert.equal(old[marker].data.reason, 'command');
  assert.deepEqual(
    old.slice(marker + 1).map((r) => [r.message.role, r.message.content[0].text, r.message.delivered ?? null]),
    [
      ['assistant', `noted what matters in ${oldId}`, null],
      ['assistant', 'saved', false],
    ],
  );
  const fresh = records(path.join(s.sessionsDir, `${newId}.jsonl`));
  assert.equal(fresh.some((r) => r.type === 'custom' && r.customType === 'before_reset'), false, 'nothing of the turn lands in the new instance');
  assert.deepEqual(fresh.filter((r) => r.type === 'reset_notice').map((r) => [r.reason, r.previousSessionId]), [['command', oldId]]);
});

test('an idle reset found by ingest gives the turn first; a hanging runner is stopped by its timeout and the reset still happens', async () => {
  const s = setup('hang', { mode: 'idle', idleMinutes: 5 }, { timeoutSeconds: 1 });
  const [first] = await ingest(s, 'hello', '2026-03-01T10:00:00Z');
  const oldId = first.sessionId as string;
  const events = await ingest(s, 'back again', '2026-03-01T11:00:00Z');
  const result = events.find((e) => e.type === 'result');
  assert.deepEqual(result.reset, { reason: 'idle', previousSessionId: oldId });
  const newId = result.sessionId as string;
  const failed = events.filter((e) => e.type === 'run_failed');
  assert.equal(failed.length, 1, JSON.stringify(events));
  assert.deepEqual([failed[0].sessionId, failed[0].status], [oldId, 'timeout'], 'the hanging turn is reported, not silent');
  assert.deepEqual(events.filter((e) => e.type === 'reply').map((e) => [e.sessionId, e.text]), [[newId, 'echo: back again']], 'the message runs in the new instance');
  assert.deepEqual(logLines(s), [`run ${oldId} hello`, `before-reset ${oldId} idle`, `run ${newId} back again`]);
  const old = archived(s, oldId);
  assert.deepEqual(
    old.filter((r) => r.type === 'custom').map((r) => [r.customType, r.data.status ?? null]),
    [
      ['before_reset', null],
      ['run_failed', 'timeout'],
    ],
    'the turn and its timeout are recorded in the old transcript',
  );
  const store = JSON.parse(fs.readFileSync(path.join(s.sessionsDir, 'sessions.json'), 'utf8'));
  assert.equal(store[KEY].sessionId, newId);
  assert.equal(store[KEY].activeRun, undefined);
  assert.equal(store[KEY].pendingReset, undefined);
});

test('a daily reset found by ingest gives the turn on the old instance', async () => {
  const s = setup('save', { mode: 'daily', atHour: 4, timezone: 'UTC' });
  const [first] = await ingest(s, 'evening', '2026-03-01T22:00:00Z');
  const oldId = first.sessionId as string;
  const events = await ingest(s, 'morning', '2026-03-02T08:00:00Z');
  const result = events.find((e) => e.type === 'result');
  assert.deepEqual(result.reset, { reason: 'daily', previousSessionId: oldId });
  assert.deepEqual(logLines(s), [`run ${oldId} evening`, `before-reset ${oldId} daily`, `run ${result.sessionId} morning`]);
});

test('sessions reset: the turn runs before the rotation; a failing runner is reported and the reset happens anyway', async () => {
  const saving = setup('save');
  const [first] = await ingest(saving, 'hi');
  const done = await runCli(['sessions', 'reset', KEY, '--json', '--state-dir', saving.stateDir]);
  assert.equal(done.code, 0, done.stderr);
  const outcome = JSON.parse(done.stdout);
  assert.equal(outcome.previousSessionId, first.sessionId);
  assert.equal(outcome.beforeReset.status, 'done');
  assert.ok(archived(saving, first.sessionId).some((r) => r.customType === 'before_reset' && r.data.runId === outcome.beforeReset.runId));
  assert.deepEqual(logLines(saving), [`run ${first.sessionId} hi`, `before-reset ${first.sessionId} command`]);

  const failing = setup('fail');
  const [other] = await ingest(failing, 'hi');
  const reset = await runCli(['sessions', 'reset', KEY, '--state-dir', failing.stateDir]);
  assert.equal(reset.code, 0, reset.stderr);
  assert.match(reset.stdout, /turn before reset failed: .*\(reset anyway\)/);
  const failedEvents = jsonLines(reset.stderr).filter((e) => e.type === 'run_failed');
  assert.equal(failedEvents.length, 1, reset.stderr);
  const old = archived(failing, other.sessionId);
  assert.ok(old.some((r) => r.type === 'custom' && r.customType === 'run_failed'), 'the failure is recorded in the old transcript');
  const store = JSON.parse(fs.readFileSync(path.join(failing.sessionsDir, 'sessions.json'), 'utf8'));
  assert.notEqual(store[KEY].sessionId, other.sessionId, 'rotated despite the failure');
  assert.equal(store[KEY].activeRun, undefined);
});

test('maintain gives a due session its turn before the reset', async () => {
  const s = setup('save', { mode: 'idle', idleMinutes: 5 });
  const [first] = await ingest(s, 'hello', '2026-03-01T10:00:00Z');
  const run = await runCli(['maintain', '--json', '--state-dir', s.stateDir, '--now', '2026-03-01T12:00:00Z']);
  assert.equal(run.code, 0, run.stderr);
  const report = JSON.parse(run.stdout);
  assert.equal(report.resets.reset.length, 1, run.stdout);
  assert.equal(report.resets.reset[0].beforeReset.status, 'done');
  assert.deepEqual(logLines(s), [`run ${first.sessionId} hello`, `before-reset ${first.sessionId} idle`]);
});

test('config: a beforeReset outside session.reset, or of the wrong shape, is refused by config validate', async () => {
  for (const [session, pathShown] of [
    [{ resetByType: { direct: { beforeReset: true } } }, 'session.resetByType.direct.beforeReset'],
    [{ reset: { beforeReset: { timeoutSeconds: -1 } } }, 'session.reset.beforeReset.timeoutSeconds'],
    [{ reset: { beforeReset: 'yes' } }, 'session.reset.beforeReset'],
  ] as const) {
    const stateDir = tempDir();
    fs.writeFileSync(path.join(stateDir, 'switchboard.json5'), JSON.stringify({ session }));
    const result = await runCli(['config', 'validate', '--state-dir', stateDir]);
    assert.equal(result.code, 78, `${JSON.stringify(session)}: ${result.stdout}${result.stderr}`);
    assert.ok(result.stderr.includes(pathShown), result.stderr);
  }
});
