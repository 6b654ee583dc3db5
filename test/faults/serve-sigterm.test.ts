// Issue 10: "On SIGTERM, every request whose message was stored is answered with its real result."
// A real `serve`, several real socket clients pipelining `ingest` requests with unique messageIds,
// SIGTERM in the middle of the load. Whatever a client was told must match the transcripts: an
// answered result is recorded exactly once, an UNAVAILABLE (or unanswered) request not at all — so
// doing what clients are told (resend those to a restarted server) ends with 0 missing, 0 doubled.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import { connectClient, type SwitchboardClient } from '../../src/server/index.js';
import { tempDir } from '../helpers.js';
import { startServe, stopAllServers } from '../serve-process.js';

const CLIENTS = 4;
const MESSAGES_PER_REQUEST = 20;
/** Requests a client keeps unanswered at once (pipelining). */
const PIPELINE_DEPTH = 12;
/** SIGTERM is sent once this many requests have been answered (all clients together). */
const ANSWERED_BEFORE_SIGTERM = 40;
const PEERS = 6;

after(() => stopAllServers());

interface Message {
  channel: string;
  peer: string;
  text: string;
  messageId: string;
}

type Outcome = { kind: 'result'; recorded: string[]; refused: string[] } | { kind: 'failed'; code: string; ids: string[] };

function messagesOf(client: number, request: number): Message[] {
  return Array.from({ length: MESSAGES_PER_REQUEST }, (_, i) => ({
    channel: 'telegram',
    peer: `direct:${(client * 7 + request + i) % PEERS}`,
    text: `client ${client} request ${request} message ${i}`,
    messageId: `c${client}-r${request}-m${i}`,
  }));
}

/** Sends ingest requests back to back (PIPELINE_DEPTH unanswered at a time) until the connection ends. */
async function loadClient(client: SwitchboardClient, index: number, outcomes: Outcome[], onAnswer: () => void): Promise<void> {
  let open = true;
  void client.closed.then(() => (open = false));
  const outstanding = new Set<Promise<void>>();
  for (let request = 0; open; request++) {
    const messages = messagesOf(index, request);
    const ids = messages.map((m) => m.messageId);
    const answer = client.request<{ events: any[] }>('ingest', { messages }).then(
      ({ events }) => {
        assert.equal(events.length, ids.length);
        const recorded: string[] = [];
        const refused: string[] = [];
        events.forEach((event, i) => {
          if (event.type === 'result' && event.persisted === true) recorded.push(ids[i]!);
          else refused.push(ids[i]!);
        });
        outcomes.push({ kind: 'result', recorded, refused });
        onAnswer();
      },
      (err: { code?: string }) => {
        outcomes.push({ kind: 'failed', code: err.code ?? 'unknown', ids });
      },
    );
    const tracked: Promise<void> = answer.finally(() => outstanding.delete(tracked));
    outstanding.add(tracked);
    if (outstanding.size >= PIPELINE_DEPTH) await Promise.race(outstanding);
  }
  await Promise.all(outstanding);
}

/** messageId → how many user records carry it, over every transcript of the default agent. */
function recordCounts(state: string): Map<string, number> {
  const counts = new Map<string, number>();
  const dir = path.join(state, 'agents', 'main', 'sessions');
  for (const name of fs.readdirSync(dir)) {
    if (!name.includes('.jsonl')) continue;
    for (const line of fs.readFileSync(path.join(dir, name), 'utf8').split('\n')) {
      if (line === '') continue;
      let record: any;
      try {
        record = JSON.parse(line);
      } catch {
        continue; // a torn line is not a record
      }
      const id = record?.type === 'message' && record.message?.role === 'user' ? record.message.messageId : undefined;
      if (typeof id === 'string') counts.set(id, (counts.get(id) ?? 0) + 1);
    }
  }
  return counts;
}

describe('SIGTERM under pipelined ingest load', { timeout: 60_000 }, () => {
  // --grace 0: the grace period is over at once, while batches are being stored; the default
  // grace: everything read is answered normally. Both must keep their word.
  for (const grace of ['0', '10000']) {
    test(`--grace ${grace}: no UNAVAILABLE for a stored message; resending what clients are told leaves 0 missing, 0 doubled`, async (t) => {
      const state = tempDir('sb-sigterm-');
      const server = await startServe(state, ['--grace', grace]);
      const outcomes: Outcome[] = [];
      let answered = 0;
      let signalled = false;
      const clients = await Promise.all(Array.from({ length: CLIENTS }, () => connectClient(server.socketPath)));
      const onAnswer = (): void => {
        if (++answered >= ANSWERED_BEFORE_SIGTERM && !signalled) {
          signalled = true;
          server.signal('SIGTERM');
        }
      };
      await Promise.all(clients.map((client, i) => loadClient(client, i, outcomes, onAnswer)));
      assert.ok(signalled, 'SIGTERM was sent while the clients were loading the server');
      assert.deepEqual(await server.exited, { code: 0, signal: null });

      const counts = recordCounts(state);
      const resend: string[] = [];
      const problems: string[] = [];
      let recorded = 0;
      const failures = new Map<string, number>();
      for (const outcome of outcomes) {
        if (outcome.kind === 'result') {
          recorded += outcome.recorded.length;
          for (const id of outcome.recorded) if (counts.get(id) !== 1) problems.push(`${id}: answered with a result, recorded ${counts.get(id) ?? 0} time(s)`);
          for (const id of outcome.refused) if (counts.has(id)) problems.push(`${id}: answered with an error event, yet recorded`);
          resend.push(...outcome.refused);
        } else {
          failures.set(outcome.code, (failures.get(outcome.code) ?? 0) + 1);
          for (const id of outcome.ids) if (counts.has(id)) problems.push(`${id}: answered ${outcome.code} (or not at all), yet recorded ${counts.get(id)} time(s)`);
          resend.push(...outcome.ids);
        }
      }
      t.diagnostic(`${recorded} messages answered as recorded; ${resend.length} to resend; failed requests by code: ${JSON.stringify(Object.fromEntries(failures))}`);
      assert.ok(recorded > 0);
      assert.deepEqual(problems.slice(0, 10), [], `${problems.length} message(s) whose answer does not match the store`);

      // Do what clients are told: send everything not acknowledged again, to a restarted server.
      const restarted = await startServe(state);
      const client = await connectClient(restarted.socketPath);
      const byId = new Map<string, Message>();
      for (const id of resend) {
        const [, c, r] = /^c(\d+)-r(\d+)-m\d+$/.exec(id)!.map(Number) as [number, number, number];
        for (const message of messagesOf(c, r)) if (message.messageId === id) byId.set(id, message);
      }
      const messages = [...byId.values()];
      for (let i = 0; i < messages.length; i += 500) {
        const { events } = await client.request<{ events: any[] }>('ingest', { messages: messages.slice(i, i + 500) });
        assert.ok(events.every((event) => event.type === 'result' && event.persisted === true));
      }
      await client.close();
      await restarted.stop();

      const final = recordCounts(state);
      const sent = new Set<string>();
      for (const outcome of outcomes) for (const id of outcome.kind === 'result' ? [...outcome.recorded, ...outcome.refused] : outcome.ids) sent.add(id);
      const missing = [...sent].filter((id) => !final.has(id));
      const doubled = [...final].filter(([, n]) => n > 1).map(([id]) => id);
      assert.deepEqual({ missing: missing.length, doubled: doubled.length }, { missing: 0, doubled: 0 }, `missing ${missing.slice(0, 5)}; doubled ${doubled.slice(0, 5)}`);
      assert.equal(final.size, sent.size);
    });
  }
});
