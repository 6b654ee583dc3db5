// A socket peer that accepts connections and never answers — something else listening at the
// path, or a `serve` stopped with SIGSTOP — must not hang `send --socket` / `ingest --socket` for
// ever: they give up with UNAVAILABLE (69). A live server that is merely slow to answer (its batch
// waits for the registry lock another process holds) is waited for, and its real answer printed.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { after, test } from 'node:test';
import { jsonLines, runCli, tempDir } from '../helpers.js';
import { startServe, stopAllServers } from '../serve-process.js';
import { startChild, type ChildRun } from '../fixtures/store-child-process.js';

const children: ChildRun[] = [];
after(async () => {
  for (const run of children) run.child.kill('SIGKILL');
  await stopAllServers();
});

/** Well above the client's give-up time (a few seconds), well below the test runner's patience. */
const CLI_TIMEOUT_MS = 30_000;

function sendArgs(socket: string, messageId: string): string[] {
  return ['send', 'hello', '--channel', 'telegram', '--peer', 'direct:7', '--message-id', messageId, '--socket', socket, '--json'];
}

test('a peer that accepts but never answers: send --socket and ingest --socket exit 69 instead of hanging', async () => {
  const dir = tempDir('sb-silent-');
  const socketPath = path.join(dir, 'silent.sock');
  const accepted: net.Socket[] = [];
  const silent = net.createServer((socket) => {
    accepted.push(socket);
    socket.resume(); // reads everything, answers nothing
  });
  await new Promise<void>((resolve) => silent.listen(socketPath, resolve));
  try {
    const sent = await runCli(sendArgs(socketPath, 's-1'), { timeoutMs: CLI_TIMEOUT_MS });
    assert.equal(sent.signal, null, 'send gave up by itself (not killed by the test timeout)');
    assert.equal(sent.code, 69, sent.stderr);
    assert.match(sent.stderr, /did not answer/);

    const input = path.join(dir, 'in.ndjson');
    fs.writeFileSync(input, `${JSON.stringify({ channel: 'telegram', peer: 'direct:7', text: 'hi', messageId: 'i-1' })}\n`);
    const ingested = await runCli(['ingest', input, '--socket', socketPath], { timeoutMs: CLI_TIMEOUT_MS });
    assert.equal(ingested.signal, null, 'ingest gave up by itself');
    assert.equal(ingested.code, 69, ingested.stderr);
    assert.match(ingested.stderr, /did not answer/);
    assert.ok(accepted.length >= 2, 'both clients did connect');
  } finally {
    for (const socket of accepted) socket.destroy();
    silent.close();
  }
});

test('a serve frozen with SIGSTOP: send --socket exits 69; once resumed, the resend is answered as a duplicate of what the server stored', async () => {
  const state = tempDir('sb-silent-');
  const server = await startServe(state);
  const pid = server.child.pid!;
  process.kill(pid, 'SIGSTOP');
  let resumed = false;
  try {
    const sent = await runCli(['--state-dir', state, ...sendArgs(server.socketPath, 'f-1')], { timeoutMs: CLI_TIMEOUT_MS });
    assert.equal(sent.signal, null, 'send gave up by itself');
    assert.equal(sent.code, 69, sent.stderr);
    assert.match(sent.stderr, /did not answer/);
    assert.match(sent.stderr, /resending is safe/);
    process.kill(pid, 'SIGCONT');
    resumed = true;

    // The request was in the server's socket buffer: once resumed it may store it; either way a
    // resend gets one real answer, and the message is on record exactly once.
    const again = await runCli(['--state-dir', state, ...sendArgs(server.socketPath, 'f-1')], { timeoutMs: CLI_TIMEOUT_MS });
    assert.equal(again.code, 0, again.stderr);
    const result = jsonLines(again.stdout).find((event) => event.type === 'result');
    assert.ok(result, again.stdout);
    assert.ok(['recorded', 'duplicate'].includes(result.disposition), result.disposition);
    const shown = await runCli(['--state-dir', state, 'sessions', 'transcript', result.sessionKey, '--raw']);
    const copies = shown.stdout.split('\n').filter((line) => line.includes('"messageId":"f-1"') && line.includes('"role":"user"'));
    assert.equal(copies.length, 1, shown.stdout);
  } finally {
    if (!resumed) process.kill(pid, 'SIGCONT');
  }
});

test('a live server whose answer is slow (the registry lock is held elsewhere) is waited for, not abandoned', async () => {
  const state = tempDir('sb-silent-');
  const server = await startServe(state);
  const sessionsDir = path.join(state, 'agents', 'main', 'sessions');
  fs.mkdirSync(sessionsDir, { recursive: true });
  const holder = startChild('lock-holder-child.js', [JSON.stringify({ target: path.join(sessionsDir, 'sessions.json'), behaviour: 'hold' })]);
  children.push(holder);
  await holder.waitForLine((line) => line.startsWith('held '), 10_000, 'the child to hold the registry lock');

  const sending = runCli(['--state-dir', state, ...sendArgs(server.socketPath, 'w-1')], { timeoutMs: CLI_TIMEOUT_MS });
  // Longer than the client's silence threshold plus its status probe: a silent peer would have
  // been given up on by now.
  await new Promise((resolve) => setTimeout(resolve, 9_000));
  holder.send('release');
  await holder.waitForLine((line) => line === 'done', 10_000, 'the child to let go');
  const sent = await sending;
  assert.equal(sent.code, 0, sent.stderr);
  const result = jsonLines(sent.stdout).find((event) => event.type === 'result');
  assert.equal(result?.disposition, 'recorded', sent.stdout);
  assert.equal(result?.persisted, true);
});
