// `sessions transcript --follow` behaves like `tail -F`: it keeps following the key into its next
// instance after a reset (with a notice on stderr) until interrupted, and leaks no listener per
// poll (which Node reports as MaxListenersExceededWarning after a couple of seconds).

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import { test } from 'node:test';
import { BIN, runCli, tempDir } from '../helpers.js';

const line = (text: string): string => JSON.stringify({ channel: 'telegram', peer: { kind: 'direct', id: 'alice' }, text });

test('--follow follows the key into its new instance after a reset, until SIGINT', async () => {
  const stateDir = tempDir();
  assert.equal((await runCli(['ingest', '--state-dir', stateDir], { input: `${line('first')}\n` })).code, 0);
  const env: Record<string, string | undefined> = { ...process.env, NO_COLOR: '1' };
  for (const key of Object.keys(env)) if (key.startsWith('SWITCHBOARD_')) delete env[key];
  const child = spawn(process.execPath, [BIN, 'sessions', 'transcript', 'agent:main:main', '--follow', '--state-dir', stateDir], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (err += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
  const until = async (what: string, ok: () => boolean): Promise<void> => {
    for (let i = 0; i < 200 && !ok(); i++) await sleep(50);
    assert.ok(ok(), `${what}; stdout: ${out}; stderr: ${err}`);
  };
  try {
    await until('the first message is printed', () => out.includes('first'));
    assert.equal((await runCli(['ingest', '--state-dir', stateDir], { input: `${line('second')}\n` })).code, 0);
    await until('a message appended later is printed', () => out.includes('second'));
    assert.equal((await runCli(['sessions', 'reset', 'agent:main:main', '--state-dir', stateDir])).code, 0);
    await until('the reset is announced', () => /now session/.test(err));
    assert.equal((await runCli(['ingest', '--state-dir', stateDir], { input: `${line('third, in the new instance')}\n` })).code, 0);
    await until('the new instance is followed', () => out.includes('third, in the new instance'));
    await sleep(2_500); // long enough for a per-poll listener leak to be reported
  } finally {
    child.kill('SIGINT');
  }
  assert.equal(await exited, 0);
  assert.doesNotMatch(err, /MaxListenersExceededWarning/);
});
