// Issue 10's crash matrix for `serve`: a real server SIGKILLed while several real socket clients
// pipeline `ingest` requests with unique messageIds — at random moments, right after sessions.json
// is replaced and right after a transcript grows (the two moments a write order can get wrong).
// The server is restarted on the same state dir and every client resends everything that was not
// answered with a result, as clients are told to. Whatever was acknowledged must be in the
// transcripts at once after each kill; at the end every message is recorded exactly once.

import assert from 'node:assert/strict';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, test } from 'node:test';
import { connectClient } from '../../src/server/index.js';
import { SOAK_FACTOR, killWhen, recordedCounts, storeIdentity, transcriptBytes, type KillPlan } from '../fixtures/crash-lib.js';
import { jsonLines, runCli, tempDir, writeJson } from '../helpers.js';
import { startServe, stopAllServers, type ServeProcess } from '../serve-process.js';

const CLIENTS = 4;
const MESSAGES_PER_CLIENT = 40;
const MESSAGES_PER_REQUEST = 3;
/** Requests a client keeps unanswered at once. */
const PIPELINE_DEPTH = 4;
const PEERS = 6;
/** Rounds killed on purpose; the rounds after them are let finish until everything is acked. */
const KILLED_ROUNDS = 9 * SOAK_FACTOR;
const MAX_ROUNDS = KILLED_ROUNDS + 11;

/** doctor findings a SIGKILL may leave behind by design (switchboard-doctor(1)). */
const DEBRIS = ['stale-lock', 'lock-tombstone', 'temp-file', 'empty-transcript'];

after(() => stopAllServers());

interface Message {
  id: string;
  body: { channel: string; peer: string; text: string; messageId: string };
}

function messagesOf(client: number): Message[] {
  return Array.from({ length: MESSAGES_PER_CLIENT }, (_, i) => {
    const id = `c${client}-m${i}`;
    return { id, body: { channel: 'telegram', peer: `group:room-${(client + i) % PEERS}`, text: `message ${id}`, messageId: id } };
  });
}

const alive = (server: ServeProcess): boolean => server.child.exitCode === null && server.child.signalCode === null;

interface Tally {
  /** Error events (a message answered, but not stored): sent again in a later round. */
  errorEvents: number;
  /** Requests that failed as a whole (the connection dropped: SIGKILL). */
  failedRequests: number;
}

/**
 * One client's part of a round: connect, send `pending` in small pipelined requests until done or
 * the connection drops. Every message answered with a persisted result goes into `acked`.
 */
async function clientRound(socketPath: string, pending: Message[], acked: Set<string>, tally: Tally): Promise<void> {
  let client;
  try {
    client = await connectClient(socketPath);
  } catch {
    return; // killed before this client got in: everything is resent next round
  }
  let open = true;
  void client.closed.then(() => (open = false));
  const outstanding = new Set<Promise<void>>();
  for (let i = 0; i < pending.length && open; i += MESSAGES_PER_REQUEST) {
    const chunk = pending.slice(i, i + MESSAGES_PER_REQUEST);
    const answer = client.request<{ events: any[] }>('ingest', { messages: chunk.map((m) => m.body) }).then(
      ({ events }) => {
        assert.equal(events.length, chunk.length, 'one event per message');
        events.forEach((event, j) => {
          if (event.type === 'result' && event.persisted === true) {
            assert.equal(event.messageId, chunk[j]!.id);
            acked.add(chunk[j]!.id);
          } else tally.errorEvents++;
        });
      },
      () => {
        tally.failedRequests++;
      },
    );
    const tracked: Promise<void> = answer.finally(() => outstanding.delete(tracked));
    outstanding.add(tracked);
    if (outstanding.size >= PIPELINE_DEPTH) await Promise.race(outstanding);
    await sleep(1); // spread the load so that kills land between every step
  }
  await Promise.all(outstanding);
  await client.close();
}

test('SIGKILL loop of serve under several pipelining clients, resending what was not answered: 0 acked missing, 0 doubled', { timeout: 120_000 }, async (t) => {
  const state = tempDir('sb-serve-crash-');
  const sessionsDir = path.join(state, 'agents', 'main', 'sessions');
  // A SIGKILLed server leaves its session write locks behind; they are taken over once stale
  // (proper-lockfile's floor: 2 s) instead of the default 10 s, to keep the loop short.
  const config = writeJson(path.join(state, 'config.json'), { session: { writeLock: { staleMs: 2_000 } } });
  const perClient = Array.from({ length: CLIENTS }, (_, c) => messagesOf(c));
  const all = perClient.flat();
  const acked = new Set<string>();
  const tally: Tally = { errorEvents: 0, failedRequests: 0 };
  const plans: KillPlan[] = [{ at: 'store-replaced' }, { at: 'transcript-grew' }, { at: 'time', ms: 0 }];
  let kills = 0;
  let round = 0;
  for (; round < MAX_ROUNDS && acked.size < all.length; round++) {
    const template = round < KILLED_ROUNDS ? plans[round % plans.length]! : null;
    const plan: KillPlan = template?.at === 'time' ? { at: 'time', ms: 20 + Math.floor(Math.random() * 150) } : template;
    const server = await startServe(state, ['--config', config]);
    let watcher: Promise<void> = Promise.resolve();
    let timer: NodeJS.Timeout | undefined;
    if (plan?.at === 'store-replaced') {
      const before = storeIdentity(sessionsDir);
      watcher = killWhen(() => alive(server), () => server.signal('SIGKILL'), () => storeIdentity(sessionsDir) !== before);
    } else if (plan?.at === 'transcript-grew') {
      const before = transcriptBytes(sessionsDir);
      watcher = killWhen(() => alive(server), () => server.signal('SIGKILL'), () => transcriptBytes(sessionsDir) > before);
    } else if (plan?.at === 'time') {
      timer = setTimeout(() => server.signal('SIGKILL'), plan.ms);
    }
    await Promise.all(perClient.map((messages) => clientRound(server.socketPath, messages.filter((m) => !acked.has(m.id)), acked, tally)));
    clearTimeout(timer);
    if (alive(server)) await server.stop(); // the plan's moment never came (or no kill this round)
    await watcher;
    const exit = await server.exited;
    if (exit.signal === 'SIGKILL') kills++;

    // Whatever the kill hit, everything acknowledged so far is on disk right now.
    const counts = recordedCounts(sessionsDir);
    const missing = [...acked].filter((id) => (counts.get(id) ?? 0) === 0);
    assert.deepEqual(missing, [], `round ${round} (${JSON.stringify(plan)}): acknowledged but not recorded`);
  }
  t.diagnostic(`${round} rounds, ${kills} SIGKILLs, ${tally.failedRequests} requests cut by a kill, ${tally.errorEvents} error events`);
  // Most rounds that had a kill planned saw it (the loop ends early once everything is acknowledged).
  assert.ok(kills >= Math.min(round, KILLED_ROUNDS) / 2, `the server was killed in most planned rounds (${kills} of ${Math.min(round, KILLED_ROUNDS)})`);
  assert.equal(acked.size, all.length, 'every message was acknowledged in the end');

  const counts = recordedCounts(sessionsDir);
  const doubled = [...counts].filter(([, n]) => n > 1).map(([id]) => id);
  assert.deepEqual(doubled, [], 'no message recorded twice');
  const notOnce = all.filter((m) => counts.get(m.id) !== 1).map((m) => m.id);
  assert.deepEqual(notOnce, [], 'every message recorded exactly once');
  assert.equal(counts.size, all.length, 'nothing recorded that was not sent');
  // The store is consistent afterwards. What a kill may leave is debris doctor names and repairs
  // (a dead writer's lock or the tombstone of its release, a temp file, an empty transcript created
  // just before the kill) — nothing else: no orphaned records, no pending journal, no torn lines.
  const doctor = await runCli(['doctor', '--json', '--state-dir', state, '--config', config]);
  const problems = (jsonLines(doctor.stdout)[0].stores as { problems: { kind: string; repairable: boolean }[] }[]).flatMap((s) => s.problems);
  t.diagnostic(`doctor after the loop: ${JSON.stringify(problems.map((p) => p.kind))}`);
  assert.deepEqual(
    problems.filter((p) => !DEBRIS.includes(p.kind) || !p.repairable),
    [],
    'no problem but the debris of a kill',
  );
  const repair = await runCli(['doctor', '--repair', '--json', '--state-dir', state, '--config', config]);
  assert.equal(repair.code, 0, repair.stdout + repair.stderr);
  const recheck = await runCli(['doctor', '--json', '--state-dir', state, '--config', config]);
  assert.equal(recheck.code, 0, recheck.stdout + recheck.stderr);
  assert.deepEqual(recordedCounts(sessionsDir), counts, 'the repair changed no record');
});
