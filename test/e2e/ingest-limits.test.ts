// Hostile sizes and shapes in ingest input (issue 10, item 7): a deeply nested line is BAD_MESSAGE
// for that line only — through `ingest`, `serve` and `ingest --socket` — and batches are bounded in
// bytes as well as lines, so a stream of large messages for one session is stored as several
// batches, every line recorded. Real processes, real sockets, the store checked on disk.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import { connectClient } from '../../src/server/index.js';
import { withLock } from '../../src/store/index.js';
import { BIN, REPO_ROOT, jsonLines, runCli, tempDir } from '../helpers.js';
import { ServeProcess, cleanEnv, startServe, stopAllServers, trackServer } from '../serve-process.js';

after(() => stopAllServers());

const DEPTH = 5_000;
/** A JSON value nested DEPTH levels, built as text: JSON.stringify itself overflows at this depth. */
const DEEP = `${'{"a":'.repeat(DEPTH)}1${'}'.repeat(DEPTH)}`;

function message(text: string, extra = ''): string {
  return `{"channel":"telegram","peer":"direct:1","text":${JSON.stringify(text)}${extra}}`;
}

/** Good lines around two deep ones: in an unknown field, and in `kind` (whose error message quotes the value). */
const DEEP_LINES = [message('first'), message('deep extra', `,"extra":${DEEP}`), message('deep kind', `,"kind":${DEEP}`), message('last')];

function sessionsDir(state: string): string {
  return path.join(state, 'agents', 'main', 'sessions');
}

/** messageId (or text) → user records, over every transcript of the default agent. */
function userRecords(state: string): any[] {
  const records: any[] = [];
  for (const name of fs.readdirSync(sessionsDir(state))) {
    if (!name.endsWith('.jsonl')) continue;
    for (const line of fs.readFileSync(path.join(sessionsDir(state), name), 'utf8').split('\n')) {
      if (line === '') continue;
      const record = JSON.parse(line);
      if (record.type === 'message' && record.message.role === 'user') records.push(record.message);
    }
  }
  return records;
}

function assertDeepLinesHandled(events: any[]): void {
  assert.deepEqual(
    events.map((e) => [e.type, e.line, e.code ?? e.disposition]),
    [
      ['result', 1, 'recorded'],
      ['error', 2, 'BAD_MESSAGE'],
      ['error', 3, 'BAD_MESSAGE'],
      ['result', 4, 'recorded'],
    ],
  );
  for (const event of events.filter((e) => e.type === 'error')) assert.match(event.message, new RegExp(`^line ${event.line}: .*deeper than 128 levels`));
}

/** One request line written as raw text (the client API would have to stringify the deep value), its answer. */
function rawRequest(socketPath: string, line: string): Promise<any> {
  return new Promise((resolve, reject) => {
    const socket = net.createConnection(socketPath);
    let buffer = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => {
      buffer += chunk;
      const nl = buffer.indexOf('\n');
      if (nl >= 0) {
        resolve(JSON.parse(buffer.slice(0, nl)));
        socket.destroy();
      }
    });
    socket.on('error', reject);
    socket.on('close', () => reject(new Error('closed before an answer')));
    socket.write(`${line}\n`);
  });
}

describe('deep nesting is a bad line, not an internal error', { timeout: 180_000 }, () => {
  test(`ingest FILE: lines nested ${DEPTH} levels are BAD_MESSAGE (exit 65), naming the line; the others are recorded`, async () => {
    const state = tempDir();
    const file = path.join(state, 'deep.ndjson');
    fs.writeFileSync(file, `${DEEP_LINES.join('\n')}\n`);
    const result = await runCli(['ingest', file, '--state-dir', state]);
    assert.equal(result.code, 65, result.stderr);
    assertDeepLinesHandled(jsonLines(result.stdout));
    assert.deepEqual(userRecords(state).map((m) => m.content[0].text), ['first', 'last']);
  });

  test('route resolve --batch: a deep input line is BAD_INPUT for that line (exit 65)', async () => {
    const input = `{"channel":"telegram","peer":{"kind":${DEEP},"id":"1"}}\n{"channel":"telegram","peer":"direct:1"}\n`;
    const result = await runCli(['route', 'resolve', '--batch', '--state-dir', tempDir()], { input });
    assert.equal(result.code, 65, result.stderr);
    const [bad, good] = jsonLines(result.stdout);
    assert.deepEqual([bad.error.code, bad.error.line], ['BAD_INPUT', 1]);
    assert.match(bad.error.message, /^line 1: .*deeper than 128 levels/);
    assert.equal(good.agentId, 'main');
  });

  test('serve: a deep message in an ingest request is an error event for that message only; ingest --socket the same', async () => {
    const state = tempDir();
    const server = await startServe(state);
    const answer = await rawRequest(server.socketPath, `{"id":1,"op":"ingest","messages":[${DEEP_LINES.join(',')}]}`);
    assert.equal(answer.id, 1);
    assertDeepLinesHandled(answer.result.events);
    // A deep route input is a bad request, not an internal error.
    const route = await rawRequest(server.socketPath, `{"id":2,"op":"route.resolve","input":{"channel":"telegram","peer":{"kind":${DEEP},"id":"1"}}}`);
    assert.deepEqual([route.id, route.error?.code], [2, 'BAD_INPUT']);

    const file = path.join(state, 'deep.ndjson');
    fs.writeFileSync(file, `${DEEP_LINES.join('\n')}\n`);
    const viaSocket = await runCli(['ingest', file, '--socket', '--no-wait', '--state-dir', state]);
    assert.equal(viaSocket.code, 65, viaSocket.stderr);
    assertDeepLinesHandled(jsonLines(viaSocket.stdout));
    await server.stop();
    assert.doesNotMatch(server.stderr, /internal error/);
    assert.deepEqual(userRecords(state).map((m) => m.content[0].text), ['first', 'last', 'first', 'last']);
  });
});

describe('batches are bounded in bytes', { timeout: 180_000 }, () => {
  const LINES = 40;
  /** Just under the 1 MiB per-line cap once wrapped in its message. */
  const TEXT_CHARS = 1_000_000;
  const SMALL_CAP = String(2 * 1024 * 1024);

  function bigMessage(i: number): string {
    return `{"channel":"telegram","peer":"direct:1","messageId":"big-${i}","text":"${String(i).padStart(4, '0')}${'x'.repeat(TEXT_CHARS - 4)}"}`;
  }

  function assertAllRecorded(state: string, ids: string[]): void {
    const records = userRecords(state);
    assert.deepEqual(
      records.map((m) => m.messageId),
      ids,
    );
    for (const m of records) assert.equal(m.content[0].text.length, TEXT_CHARS);
  }

  test(`ingest FILE: ${LINES} messages of ~1 MiB for one session become several batches, every line recorded; a line over the cap is BAD_MESSAGE for that line`, async () => {
    const state = tempDir();
    const file = path.join(state, 'big.ndjson');
    const lines: string[] = [];
    for (let i = 0; i < LINES; i++) lines.push(i === 17 ? message('x'.repeat(1024 * 1024)) : bigMessage(i));
    fs.writeFileSync(file, `${lines.join('\n')}\n`);
    const result = await runCli(['ingest', file, '--state-dir', state], { env: { SWITCHBOARD_MAX_BATCH_BYTES: SMALL_CAP } });
    assert.equal(result.code, 65, result.stderr);
    const events = jsonLines(result.stdout);
    assert.equal(events.length, LINES);
    const bad = events.filter((e) => e.type === 'error');
    assert.deepEqual(
      bad.map((e) => [e.line, e.code]),
      [[18, 'BAD_MESSAGE']],
    );
    assert.match(bad[0].message, /^line 18: line is \d+ bytes, over the 1048576-byte cap/);
    assertAllRecorded(
      state,
      Array.from({ length: LINES }, (_, i) => `big-${i}`).filter((id) => id !== 'big-17'),
    );
  });

  test('ingest: a bad SWITCHBOARD_MAX_BATCH_BYTES is a usage error', async () => {
    const state = tempDir();
    const result = await runCli(['ingest', '--state-dir', state], { input: `${message('hi')}\n`, env: { SWITCHBOARD_MAX_BATCH_BYTES: 'lots' } });
    assert.equal(result.code, 2, result.stderr);
    assert.match(result.stderr, /SWITCHBOARD_MAX_BATCH_BYTES/);
  });

  test(`serve: ${LINES} requests of ~1 MiB that pile up behind a held store lock are stored in byte-bounded batches, every line recorded`, async () => {
    const state = tempDir();
    const child = spawn(process.execPath, [BIN, 'serve', '--state-dir', state], {
      env: cleanEnv({ SWITCHBOARD_MAX_BATCH_BYTES: SMALL_CAP }),
      cwd: REPO_ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const server = trackServer(new ServeProcess(child, path.join(state, 'switchboard.sock')));
    await server.waitForStderr(/listening on/);

    // Hold the registry lock so that every request waits: the first in the engine, the rest queued.
    const storePath = path.join(sessionsDir(state), 'sessions.json');
    fs.mkdirSync(sessionsDir(state), { recursive: true, mode: 0o700 });
    let release!: () => void;
    let taken!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const held = new Promise<void>((resolve) => (taken = resolve));
    const lock = withLock(storePath, { busyCode: 'STORE_BUSY' }, async () => {
      taken();
      await gate;
    });
    await held;

    // One client per request: a client's requests are handled one after another, so only requests
    // of different clients can wait for the same batch.
    const clients = await Promise.all(Array.from({ length: LINES }, () => connectClient(server.socketPath)));
    const answers = Array.from({ length: LINES }, (_, i) =>
      clients[i]!.request<{ events: any[] }>('ingest', { message: JSON.parse(bigMessage(i)) }),
    );
    for (const answer of answers) answer.catch(() => undefined); // awaited below; a failed wait must not leave them unhandled
    const probe = await connectClient(server.socketPath);
    let status: any;
    try {
      // Every request is being handled (the probe's own status aside): in the blocked batch or waiting.
      for (let i = 0; i < 2_000; i++) {
        status = await probe.request<any>('status');
        if (status.requests.inFlight - 1 >= LINES) break;
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
    } finally {
      release();
      await lock;
    }
    assert.equal(status.requests.inFlight - 1, LINES, 'every request reached the server');
    const waiting = status.messages.queued;
    assert.ok(waiting >= LINES / 2, `requests piled up behind the lock (${waiting} waiting)`);
    const batchesBefore = status.messages.batches;

    const events = (await Promise.all(answers)).map(({ events }) => events[0]);
    assert.ok(events.every((e) => e.type === 'result' && e.persisted === true), JSON.stringify(events.find((e) => e.type !== 'result')));
    const batches = (await probe.request<any>('status')).messages.batches - batchesBefore;
    // ~1 MiB each under a 2 MiB cap: at most two per batch, however many were waiting.
    assert.ok(batches >= waiting / 2, `${batches} batch(es) for the ${waiting} messages of ~1 MiB that waited`);
    await probe.close();
    for (const client of clients) await client.close();
    await server.stop();
    assert.deepEqual(
      userRecords(state).map((m) => m.messageId).sort(),
      Array.from({ length: LINES }, (_, i) => `big-${i}`).sort(),
    );
  });
});
