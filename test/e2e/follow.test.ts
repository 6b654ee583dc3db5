// `sessions transcript --follow` behaves like `tail -F`: it keeps following the key into its next
// instance after a reset (with a notice on stderr) until interrupted, and leaks no listener per
// poll (which Node reports as MaxListenersExceededWarning after a couple of seconds).

import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { test } from 'node:test';
import { runCli, tempDir } from '../helpers.js';
import { startFollower } from '../fixtures/follower.js';

const line = (text: string): string => JSON.stringify({ channel: 'telegram', peer: { kind: 'direct', id: 'alice' }, text });

test('--follow follows the key into its new instance after a reset, until SIGINT', async () => {
  const stateDir = tempDir();
  assert.equal((await runCli(['ingest', '--state-dir', stateDir], { input: `${line('first')}\n` })).code, 0);
  const follower = startFollower(['sessions', 'transcript', 'agent:main:main', '--follow', '--state-dir', stateDir]);
  const { until } = follower;
  let code: number | null = null;
  try {
    await until('the first message is printed', () => follower.out().includes('first'));
    assert.equal((await runCli(['ingest', '--state-dir', stateDir], { input: `${line('second')}\n` })).code, 0);
    await until('a message appended later is printed', () => follower.out().includes('second'));
    assert.equal((await runCli(['sessions', 'reset', 'agent:main:main', '--state-dir', stateDir])).code, 0);
    await until('the reset is announced', () => /now session/.test(follower.err()));
    assert.equal((await runCli(['ingest', '--state-dir', stateDir], { input: `${line('third, in the new instance')}\n` })).code, 0);
    await until('the new instance is followed', () => follower.out().includes('third, in the new instance'));
    await sleep(2_500); // long enough for a per-poll listener leak to be reported
  } finally {
    code = await follower.stop();
  }
  assert.equal(code, 0);
  assert.doesNotMatch(follower.err(), /MaxListenersExceededWarning/);
});
