// The operating system refusing resources, with real limits on real processes (prlimit):
//
// * File-size limit (RLIMIT_FSIZE, `ulimit -f`). A write past it fails with EFBIG and the kernel
//   sends SIGXFSZ. Node ignores that signal, but signal-exit (loaded by proper-lockfile and
//   write-file-atomic) re-raised it when its handlers were the only ones: `ingest` died of SIGXFSZ
//   (exit 153) instead of reporting IO (74), and `serve` died with every client.
// * File-descriptor limit (RLIMIT_NOFILE). A client that subscribed (as `ingest --socket` does),
//   got an error and went away kept its socket open in `serve` until the next event was pushed to
//   it. While every batch failed nothing was pushed, so the sockets piled up to the fd limit and
//   the server could never accept a client again, even once the fault was gone.

import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { after, test } from 'node:test';
import { connectClient } from '../../src/server/index.js';
import { BIN, REPO_ROOT, jsonLines, runCli, tempDir } from '../helpers.js';
import { ServeProcess, cleanEnv, stopAllServers, trackServer } from '../serve-process.js';

after(() => stopAllServers());

const noPrlimit = process.platform !== 'linux' || spawnSync('prlimit', ['--version']).status !== 0 ? 'needs prlimit (util-linux) on Linux' : false;

const message = (peer: string, text: string, messageId: string): Record<string, unknown> => ({ channel: 'telegram', peer: `direct:${peer}`, text, messageId });

/** `switchboard <args>` under `prlimit <limit>`. */
function runLimited(limit: string, args: string[], input = ''): Promise<{ code: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn('prlimit', [limit, process.execPath, BIN, ...args], { env: cleanEnv(), cwd: REPO_ROOT, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    child.on('error', reject);
    child.on('close', (code, signal) => resolve({ code, signal, stdout, stderr }));
    child.stdin.end(input);
  });
}

function startLimitedServe(limit: string, state: string): ServeProcess {
  const child = spawn('prlimit', [limit, process.execPath, BIN, 'serve', '--state-dir', state], { env: cleanEnv(), cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  return trackServer(new ServeProcess(child, path.join(state, 'switchboard.sock')));
}

test('ingest past the file-size limit reports IO (74) for its lines instead of dying of SIGXFSZ; the store stays healthy', { skip: noPrlimit }, async () => {
  const state = tempDir('sb-fsize-ingest-');
  // 40 messages of 1 KB: the batch's journal alone is over the 16 KB limit.
  const input = Array.from({ length: 40 }, (_, i) => JSON.stringify(message(String(i % 4), 'x'.repeat(1000), `m${i}`))).join('\n') + '\n';
  const r = await runLimited('--fsize=16384', ['ingest', '--json', '--state-dir', state], input);
  assert.equal(r.signal, null, `killed by ${r.signal}; stderr: ${r.stderr}`);
  assert.equal(r.code, 74, r.stderr);
  const events = jsonLines(r.stdout);
  assert.equal(events.length, 40);
  for (const event of events) {
    assert.equal(event.type, 'error');
    assert.equal(event.code, 'IO');
    assert.match(event.message, /EFBIG/);
  }
  const doctor = await runCli(['doctor', '--json', '--state-dir', state]);
  assert.equal(doctor.code, 0, doctor.stdout + doctor.stderr);
  // Nothing was acknowledged, so all of it is sent again and recorded once.
  const again = await runCli(['ingest', '--json', '--state-dir', state], { input });
  assert.equal(again.code, 0, again.stderr);
  assert.deepEqual(jsonLines(again.stdout).map((e) => e.disposition), Array(40).fill('recorded'));
});

test('serve past the file-size limit answers the failed batch with IO and goes on serving', { skip: noPrlimit }, async () => {
  const state = tempDir('sb-fsize-serve-');
  const server = startLimitedServe('--fsize=16384', state);
  await server.waitForStderr(/listening on/);
  const client = await connectClient(server.socketPath);
  try {
    const big = await client.request<{ events: Record<string, unknown>[] }>('ingest', { message: message('1', 'x'.repeat(20_000), 'big') });
    assert.equal(big.events[0]!.type, 'error');
    assert.equal(big.events[0]!.code, 'IO');
    assert.match(String(big.events[0]!.message), /EFBIG/);
    const small = await client.request<{ events: Record<string, unknown>[] }>('ingest', { message: message('2', 'hello', 'small') });
    assert.equal(small.events[0]!.type, 'result', JSON.stringify(small.events));
    assert.equal(small.events[0]!.persisted, true);
  } finally {
    await client.close();
  }
  await server.stop();
  assert.deepEqual(await server.exited, { code: 0, signal: null }, server.stderr);
});

/** Connects, subscribes, sends one ingest, reads both answers, then goes away; the ingest's answer. */
function subscribeIngestAndLeave(socketPath: string, id: string): Promise<Record<string, unknown> | null> {
  return new Promise((resolve) => {
    const socket = net.createConnection(socketPath);
    let buffered = '';
    let answers = 0;
    let ingestAnswer: Record<string, unknown> | null = null;
    socket.setEncoding('utf8');
    socket.on('error', () => undefined);
    socket.on('close', () => resolve(ingestAnswer));
    socket.on('connect', () => {
      socket.write(`${JSON.stringify({ id: 1, op: 'subscribe' })}\n`);
      socket.write(`${JSON.stringify({ id: 2, op: 'ingest', message: message(id, 'hi', id) })}\n`);
      socket.end();
    });
    socket.on('data', (chunk: string) => {
      buffered += chunk;
      for (let nl = buffered.indexOf('\n'); nl >= 0; nl = buffered.indexOf('\n')) {
        const line = buffered.slice(0, nl);
        buffered = buffered.slice(nl + 1);
        if (line.trim() === '') continue;
        const parsed = JSON.parse(line) as Record<string, unknown>;
        if (parsed.id === 2) ingestAnswer = parsed;
        if (parsed.id === 1 || parsed.id === 2) answers++;
        if (answers === 2) socket.destroy();
      }
    });
  });
}

test('subscribers that got an error and left do not use up serve\'s file descriptors: once the fault is gone it serves again', { skip: noPrlimit }, async () => {
  const state = tempDir('sb-nofile-serve-');
  const sent = await runCli(['send', 'first', '--channel', 'telegram', '--peer', 'direct:0', '--state-dir', state, '--json']);
  assert.equal(sent.code, 0, sent.stderr);
  const storePath = path.join(state, 'agents', 'main', 'sessions', 'sessions.json');
  const good = fs.readFileSync(storePath);
  fs.writeFileSync(storePath, 'not json'); // every batch fails (STORE_CORRUPT) until it is put back
  const server = startLimitedServe('--nofile=64', state);
  await server.waitForStderr(/listening on/);
  // Far more failing clients than the server has descriptors, one after another.
  for (let i = 0; i < 80; i++) {
    const answer = await subscribeIngestAndLeave(server.socketPath, `c${i}`);
    if (answer === null) continue; // refused at the door (UNAVAILABLE) once descriptors ran out
    const event = (answer.result as { events: { code?: string }[] } | undefined)?.events[0];
    // The damaged store, or (descriptors short) IO: a stated error, never INTERNAL.
    assert.ok(['STORE_CORRUPT', 'IO'].includes(event?.code ?? (answer.error as { code?: string } | undefined)?.code ?? ''), JSON.stringify(answer));
  }
  fs.writeFileSync(storePath, good);
  // Gone clients are found within seconds; before, the server never accepted anyone again.
  const giveUpAt = Date.now() + 30_000;
  let last: unknown;
  for (;;) {
    const answer = await subscribeIngestAndLeave(server.socketPath, 'after');
    const events = (answer?.result as { events?: Record<string, unknown>[] } | undefined)?.events;
    if (events?.[0]?.persisted === true) break;
    last = answer;
    assert.ok(Date.now() < giveUpAt, `serve never answered again; last answer: ${JSON.stringify(last)}; stderr: ${server.stderr}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  await server.stop();
  assert.deepEqual(await server.exited, { code: 0, signal: null }, server.stderr);
});

test('sessions reset past the file-size limit: IO (74) whose hint points at doctor, which finishes what was written first', { skip: noPrlimit }, async () => {
  const state = tempDir('sb-fsize-reset-');
  // A store larger than the limit (so its replace fails), of sessions with short transcripts.
  const input = Array.from({ length: 40 }, (_, i) => JSON.stringify(message(`p${i}`, 'hi', `m${i}`))).join('\n') + '\n';
  const config = path.join(state, 'c.json');
  fs.mkdirSync(state, { recursive: true });
  fs.writeFileSync(config, JSON.stringify({ session: { dmScope: 'per-peer' } }));
  const seeded = await runCli(['ingest', '--json', '--state-dir', state, '--config', config], { input });
  assert.equal(seeded.code, 0, seeded.stderr);
  const storeBytes = fs.statSync(path.join(state, 'agents', 'main', 'sessions', 'sessions.json')).size;
  const r = await runLimited(`--fsize=${Math.floor(storeBytes / 2)}`, ['sessions', 'reset', 'agent:main:direct:p1', '--json', '--state-dir', state, '--config', config]);
  assert.equal(r.signal, null, r.stderr);
  assert.equal(r.code, 74, r.stderr);
  const error = JSON.parse(r.stderr.trim().split('\n').pop()!).error;
  assert.equal(error.code, 'IO');
  assert.match(error.message, /EFBIG/);
  // Its new instance's first record is down though the store was not written: the hint must not say "nothing changed".
  assert.match(error.hint, /doctor/);
  const repaired = await runCli(['doctor', '--repair', '--state-dir', state, '--config', config]);
  assert.equal(repaired.code, 0, repaired.stdout + repaired.stderr);
  const doctor = await runCli(['doctor', '--json', '--state-dir', state, '--config', config]);
  assert.equal(doctor.code, 0, doctor.stdout);
  assert.equal(JSON.parse(doctor.stdout).summary.problems, 0);
});
