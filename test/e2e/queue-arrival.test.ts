// A queued message's quiet window (collect debounce, maxWait) counts from when its line arrived,
// not from when the writer got the store lock to plan it: a batch that waits behind another
// writer must not make every collect turn late by that wait.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import path from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { LiveIngest, dm, killLiveIngests, queueEnv, readStore, sessionsDir } from '../fixtures/queue-lib.js';

after(killLiveIngests);

const HOLDER = fileURLToPath(new URL('../fixtures/lock-holder-child.js', import.meta.url));

test('a message queued while the store lock is held elsewhere keeps its arrival time (wallAt) for the quiet window', async () => {
  const env = queueEnv({
    session: { dmScope: 'per-peer' },
    agents: { defaults: { runner: { command: 'builtin:slow-echo', delayMs: 5_000, toolCalls: 1 } } },
    // A long quiet window keeps the second message waiting where the test can read it.
    messages: { queue: { mode: 'collect', debounceMs: 60_000 } },
  });
  const ingest = new LiveIngest(env);
  ingest.send(dm('alice', 'start a long run'));
  await ingest.result(1);

  // Another process holds sessions.json's lock: the next line is read at once but planned only
  // once the lock is free.
  const holder = spawn(process.execPath, [HOLDER, JSON.stringify({ target: path.join(sessionsDir(env), 'sessions.json'), behaviour: 'hold' })], { stdio: ['pipe', 'pipe', 'inherit'] });
  await new Promise<void>((resolve, reject) => {
    holder.stdout.on('data', (d: Buffer) => d.toString().includes('held') && resolve());
    holder.on('exit', (code) => reject(new Error(`lock holder exited ${code}`)));
  });
  const sentAt = Date.now();
  ingest.send(dm('alice', 'wait for me', { messageId: 'late-one' }));
  await new Promise((resolve) => setTimeout(resolve, 400));
  const releasedAt = Date.now();
  holder.stdin.write('release\n');

  const result = await ingest.result(2);
  assert.equal(result.disposition, 'collected', JSON.stringify(result));
  const item = (readStore(env)['agent:main:direct:alice'].queue as { messageId?: string; wallAt: number }[]).find((q) => q.messageId === 'late-one');
  assert.ok(item, 'the message is in the durable queue');
  assert.ok(item.wallAt >= sentAt, `wallAt ${item.wallAt} is not before the line was sent (${sentAt})`);
  // Planned only after the lock was released, yet its window starts when it arrived.
  assert.ok(item.wallAt < releasedAt, `wallAt ${item.wallAt} is the arrival time, not the planning time (lock released at ${releasedAt})`);
  ingest.child.kill('SIGKILL');
  await ingest.exited;
});
