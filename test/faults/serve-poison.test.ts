// Issue 10, item 3 through `serve`: one bad line must never sink its batch. A real server, several
// real socket clients sending `ingest` requests at the same time (so the server stores their
// messages together in shared batches), one of them hostile: it mixes poison into its requests —
// a threadId holding a lone surrogate (the JSON escape "\ud800"), a threadId of 300 characters, a
// field nested 5 000 levels deep — and sends lines that are not JSON at all. Every good message of
// every client is stored exactly once and answered with a result; each poison line gets an error
// for itself only, in its place.

import assert from 'node:assert/strict';
import net from 'node:net';
import path from 'node:path';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { after, test } from 'node:test';
import { connectClient, type SwitchboardClient } from '../../src/server/index.js';
import { recordedCounts } from '../fixtures/crash-lib.js';
import { tempDir } from '../helpers.js';
import { startServe, stopAllServers } from '../serve-process.js';

const GOOD_CLIENTS = 3;
const REQUESTS_PER_CLIENT = 15;
const MESSAGES_PER_REQUEST = 4;
const PIPELINE_DEPTH = 6;
const HOSTILE_REQUESTS = 15;
/** Every client writes to the same few sessions, so poison and good lines share session and batch. */
const PEERS = 4;

after(() => stopAllServers());

function goodMessage(id: string, n: number): string {
  return JSON.stringify({ channel: 'telegram', peer: `group:g${n % PEERS}`, text: `message ${id}`, messageId: id });
}

type PoisonKind = 'lone-surrogate' | 'long-thread' | 'deep';
const POISON_KINDS: PoisonKind[] = ['lone-surrogate', 'long-thread', 'deep'];

/** The raw JSON text of a poison message (raw: JSON.stringify could not write the escape as sent). */
function poisonMessage(kind: PoisonKind, id: string, n: number): string {
  const head = `"channel":"telegram","peer":"group:g${n % PEERS}","text":"poison ${id}","messageId":"${id}"`;
  if (kind === 'lone-surrogate') return `{${head},"threadId":"\\ud800"}`;
  if (kind === 'long-thread') return `{${head},"threadId":"${'t'.repeat(300)}"}`;
  let deep = '"bottom"';
  for (let level = 0; level < 5000; level++) deep = `{"a":${deep}}`;
  return `{${head},"extra":${deep}}`;
}

/** A well-behaved client: pipelined ingest requests of good messages; returns the ids answered as recorded. */
async function goodClient(client: SwitchboardClient, index: number, problems: string[]): Promise<string[]> {
  const recorded: string[] = [];
  const outstanding = new Set<Promise<void>>();
  for (let r = 0; r < REQUESTS_PER_CLIENT; r++) {
    const ids = Array.from({ length: MESSAGES_PER_REQUEST }, (_, i) => `good${index}-r${r}-m${i}`);
    const messages = ids.map((id, i) => JSON.parse(goodMessage(id, r + i)));
    const answer = client.request<{ events: any[] }>('ingest', { messages }).then(
      ({ events }) => {
        events.forEach((event, i) => {
          if (event.type === 'result' && event.persisted === true && event.disposition === 'recorded' && event.messageId === ids[i]) recorded.push(ids[i]!);
          else problems.push(`${ids[i]}: ${JSON.stringify(event)}`);
        });
      },
      (err: Error) => {
        problems.push(`good client ${index} request ${r} failed: ${err.message}`);
      },
    );
    const tracked: Promise<void> = answer.finally(() => outstanding.delete(tracked));
    outstanding.add(tracked);
    if (outstanding.size >= PIPELINE_DEPTH) await Promise.race(outstanding);
  }
  await Promise.all(outstanding);
  return recorded;
}

interface HostileLine {
  /** The request id (null: a line that is not JSON, answered with id null). */
  id: number | null;
  text: string;
  /** Per message of the request: its messageId, or the poison kind at that place. */
  messages: ({ good: string } | { poison: PoisonKind; id: string })[];
}

function hostileLines(): HostileLine[] {
  const lines: HostileLine[] = [];
  for (let r = 0; r < HOSTILE_REQUESTS; r++) {
    const kind = POISON_KINDS[r % POISON_KINDS.length]!;
    // The poison moves through the request: first, in the middle, last.
    const at = r % (MESSAGES_PER_REQUEST + 1);
    const messages: HostileLine['messages'] = [];
    for (let i = 0; i < MESSAGES_PER_REQUEST; i++) messages.push({ good: `hostile-r${r}-m${i}` });
    messages.splice(at, 0, { poison: kind, id: `poison-r${r}` });
    const texts = messages.map((m, i) => ('good' in m ? goodMessage(m.good, r + i) : poisonMessage(m.poison, m.id, r + i)));
    lines.push({ id: r + 1, text: `{"id":${r + 1},"op":"ingest","messages":[${texts.join(',')}]}`, messages });
    if (r % 3 === 1) lines.push({ id: null, text: `this is not json ${r} {`, messages: [] });
  }
  // A request of one poison message only, and one of a single good message after it.
  lines.push({ id: 1000, text: `{"id":1000,"op":"ingest","message":${poisonMessage('deep', 'poison-alone', 0)}}`, messages: [{ poison: 'deep', id: 'poison-alone' }] });
  lines.push({ id: 1001, text: `{"id":1001,"op":"ingest","message":${goodMessage('hostile-last', 1)}}`, messages: [{ good: 'hostile-last' }] });
  return lines;
}

/** The hostile client: raw lines on a raw socket (the client library would not send them), then every answer. */
async function hostileClient(socketPath: string, lines: HostileLine[]): Promise<any[]> {
  const socket = net.createConnection(socketPath);
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', () => resolve());
    socket.once('error', reject);
  });
  let received = '';
  socket.setEncoding('utf8');
  const answers = new Promise<any[]>((resolve, reject) => {
    socket.on('data', (chunk: string) => {
      received += chunk;
      const complete = received.split('\n').filter((l) => l !== '');
      if (received.endsWith('\n') && complete.length >= lines.length) {
        socket.end();
        resolve(complete.map((l) => JSON.parse(l)));
      }
    });
    socket.on('error', reject);
    socket.on('close', () => reject(new Error(`connection closed after ${received.split('\n').length - 1} answer(s) of ${lines.length}`)));
  });
  for (const line of lines) {
    socket.write(`${line.text}\n`);
    await nextTurn(); // interleave with the good clients' requests
  }
  return answers;
}

test('poison lines through serve fail alone: every good line of every client stored once and answered; each poison line gets its own error', { timeout: 60_000 }, async (t) => {
  const state = tempDir('sb-serve-poison-');
  const server = await startServe(state);
  const clients = await Promise.all(Array.from({ length: GOOD_CLIENTS }, () => connectClient(server.socketPath)));
  const lines = hostileLines();
  const problems: string[] = [];
  const [answers, ...goodRecorded] = await Promise.all([hostileClient(server.socketPath, lines), ...clients.map((client, i) => goodClient(client, i, problems))]);
  assert.deepEqual(problems, [], 'every good client message answered as recorded');

  // The hostile client's answers: in the order of its lines, each line answered for itself.
  assert.deepEqual(
    answers.map((a) => a.id),
    lines.map((l) => l.id),
    'one answer per line, in order',
  );
  const hostileRecorded: string[] = [];
  answers.forEach((answer, n) => {
    const line = lines[n]!;
    if (line.id === null) {
      assert.equal(answer.error?.code, 'BAD_INPUT', `a line that is not JSON: ${JSON.stringify(answer)}`);
      return;
    }
    assert.equal(answer.error, undefined, `request ${line.id} answered with a result, not an error`);
    const events = answer.result.events as any[];
    assert.equal(events.length, line.messages.length, `request ${line.id}: one event per message`);
    events.forEach((event, i) => {
      const message = line.messages[i]!;
      assert.equal(event.line, i + 1, `request ${line.id}: events in line order`);
      if ('good' in message) {
        assert.deepEqual([event.type, event.messageId, event.disposition, event.persisted], ['result', message.good, 'recorded', true], `request ${line.id} line ${i + 1}`);
        hostileRecorded.push(message.good);
      } else {
        assert.equal(event.type, 'error', `request ${line.id} line ${i + 1} (${message.poison}) is an error`);
        assert.equal(event.code, 'BAD_MESSAGE', `${message.poison}: ${JSON.stringify(event)}`);
        if (message.poison !== 'deep') assert.equal(event.path, 'threadId', `${message.poison}: ${JSON.stringify(event)}`);
      }
    });
  });

  // The store: every good message once, no poison.
  const status = await clients[0]!.request<{ messages: { batches: number; results: number; errors: number } }>('status');
  await Promise.all(clients.map((client) => client.close()));
  await server.stop();
  const good = [...goodRecorded.flat(), ...hostileRecorded];
  assert.equal(good.length, GOOD_CLIENTS * REQUESTS_PER_CLIENT * MESSAGES_PER_REQUEST + HOSTILE_REQUESTS * MESSAGES_PER_REQUEST + 1);
  const counts = recordedCounts(path.join(state, 'agents', 'main', 'sessions'));
  assert.deepEqual(good.filter((id) => counts.get(id) !== 1), [], 'every good message recorded exactly once');
  assert.deepEqual([...counts.keys()].filter((id) => id.startsWith('poison')), [], 'no poison recorded');
  assert.equal(counts.size, good.length, 'nothing else recorded');
  assert.equal(status.messages.errors, HOSTILE_REQUESTS + 1, 'one error event per poison message');
  t.diagnostic(`${good.length} good messages and ${HOSTILE_REQUESTS + 1} poison messages stored in ${status.messages.batches} batch(es)`);
});
