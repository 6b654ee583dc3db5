// A run that loses its session write lock (its own max-hold watchdog gives it up, or a waiter
// takes it over from a holder frozen past its max hold) must write nothing more through that lock — and its failure
// must still be recorded: "failed run: recorded, reported" (queue.md). The record goes through the
// session's outbox, written under the store lock, and is appended by the next holder.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { BIN, runCli } from '../helpers.js';
import { assertStoreValid, dm, eventsOf, ingestAll, queueEnv, readStore, sessionsDir, shape, transcriptOf } from '../fixtures/queue-lib.js';
import { cleanEnv } from '../serve-process.js';

const KEY = 'agent:main:direct:alice';

test('a run aborted by its own max-hold watchdog: reported, and its run_failed recorded once, after its last record', async () => {
  // Three tool calls of 700 ms: past the 1 s max hold in the second one.
  const env = queueEnv({
    session: { dmScope: 'per-peer', writeLock: { maxHoldMs: 1_000, staleMs: 60_000 } },
    agents: { defaults: { runner: { command: 'builtin:slow-echo', delayMs: 700, toolCalls: 3 } } },
  }, 'sb-lostlock-');
  const first = await ingestAll(env, [dm('alice', 'long one', { runId: 'long', messageId: 'm-long' })]);
  assert.equal(first.code, 0, first.stderr);
  const failed = eventsOf(first.events, 'run_failed');
  assert.deepEqual(failed.map((e) => [e.runId, e.status]), [['long', 'aborted']], JSON.stringify(first.events));

  // The next writer of the session (any message) appends what the run could not.
  const next = await ingestAll(env, [dm('alice', 'hello again', { runId: 'next', messageId: 'm-next', kind: 'system' })]);
  assert.equal(next.code, 0, next.stderr);
  const records = transcriptOf(env, KEY);
  const lines = shape(records);
  assert.equal(lines.filter((l) => l === 'custom:run_failed').length, 1, lines.join(' | '));
  const failure = records.find((r) => r.type === 'custom' && r.customType === 'run_failed');
  assert.deepEqual([failure.data.runId, failure.data.status], ['long', 'aborted']);
  assert.deepEqual(failure.data.messages.map((m: any) => m.runId), ['long']);
  // Nothing of the run after its failure: the old holder wrote no more once the lock was gone.
  const index = records.indexOf(failure);
  assert.deepEqual(records.slice(index + 1).filter((r) => r.runId === 'long' || r.message?.runId === 'long'), []);
  assert.equal(readStore(env)[KEY].outbox, undefined, 'the outbox is empty again');
  assertStoreValid(env);
});

test('a run frozen past its max hold whose session is reset meanwhile creates nothing under the archived name once it resumes', async () => {
  // About 2 s of run: it is frozen after its first step, and a reset takes its lock over once it
  // is past its max hold (a stopped holder is alive: a stale lock alone is waited for).
  const env = queueEnv({
    session: { dmScope: 'per-peer', writeLock: { staleMs: 1_000, maxHoldMs: 2_500, acquireTimeoutMs: 8_000 } },
    agents: { defaults: { runner: { command: 'builtin:slow-echo', delayMs: 500, toolCalls: 4, timeoutSeconds: 30 } } },
  }, 'sb-lostlock-');
  const seeded = await ingestAll(env, [dm('alice', 'hello', { messageId: 'm-0' })]);
  assert.equal(seeded.code, 0, seeded.stderr);
  const oldFile = path.join(sessionsDir(env), readStore(env)[KEY].sessionFile);

  const child = spawn(process.execPath, [BIN, 'ingest', '--state-dir', env.state, '--config', env.config], { env: cleanEnv(), stdio: ['pipe', 'pipe', 'pipe'] });
  let output = '';
  child.stdout.setEncoding('utf8');
  const started = new Promise<void>((resolve) => child.stdout.on('data', (chunk: string) => {
    output += chunk;
    if (output.includes('"type":"run_started"')) resolve();
  }));
  const exited = new Promise<void>((resolve) => child.on('close', () => resolve()));
  child.stdin.end(`${JSON.stringify(dm('alice', 'a long one', { messageId: 'm-1', runId: 'frozen' }))}\n`);
  await started;
  // Frozen between two steps of its runner, holding the session lock — not inside a registry
  // write (a stopped registry holder is waited for, never taken over: a case of its own).
  const storeLock = path.join(sessionsDir(env), 'sessions.json.lock');
  for (let attempt = 0; ; attempt++) {
    await new Promise((resolve) => setTimeout(resolve, 50));
    if (!fs.readFileSync(oldFile, 'utf8').includes('"type":"tool_call"')) continue;
    process.kill(child.pid!, 'SIGSTOP');
    if (!fs.existsSync(storeLock)) break;
    process.kill(child.pid!, 'SIGCONT');
    assert.ok(attempt < 100, 'the run left the registry lock at some point');
  }
  try {
    const reset = await runCli(['sessions', 'reset', KEY, '--json', '--state-dir', env.state, '--config', env.config], { timeoutMs: 30_000 });
    assert.equal(reset.code, 0, reset.stderr);
    assert.ok(!fs.existsSync(oldFile), 'the reset archived the old instance');
  } finally {
    process.kill(child.pid!, 'SIGCONT');
  }
  await exited;
  assert.ok(!fs.existsSync(oldFile), 'the resumed run made no file under the archived name');
  const doctor = await runCli(['doctor', '--json', '--state-dir', env.state, '--config', env.config]);
  assert.equal(doctor.code, 0, doctor.stdout);
  assertStoreValid(env);
});
