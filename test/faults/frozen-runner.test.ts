// A process frozen (SIGSTOP) *after* its run's runner started, with real processes and real
// signals. Its turn's messages have left the queue (the runner has them) and it holds the session
// write lock and a lane slot, which go stale while it is stopped; other processes ingest for the
// same session, or want the only slot of the lane, meanwhile; then it is resumed (SIGCONT). Every
// message must end with exactly one report across every process's stream, agreeing with the
// transcripts, and nothing may run twice (nor two runs share a lane of one).
//
// The holder is alive (a frozen process is), so it is waited for, not judged dead by its lock's
// staleness: the run is its own process's to end and report. Only past the lock's max hold may
// another process take the session over; then that process's report is the one, and the resumed
// holder, fenced, reports and writes nothing more of the run.
//
// The runner is the external `hold` fixture (queue-runner.ts): it runs on while switchboard is
// stopped, and ends once the test creates the release file.

import assert from 'node:assert/strict';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import { laneDir } from '../../src/engine/lanes.js';
import { listLocks, lockPathFor, type LockInfo } from '../../src/store/index.js';
import { freeze, thaw, thawAll } from '../fixtures/freeze.js';
import { LiveIngest, allTranscripts, assertStoreValid, dm, killLiveIngests, queueEnv, queueRunner, readStore, releaseHolds, sessionsDir, shape, transcriptOf, type QueueEnv } from '../fixtures/queue-lib.js';
import { waitUntil } from '../fixtures/store-child-process.js';

const BOB = 'agent:main:direct:bob';
const STALE_MS = 2_000;

after(() => {
  thawAll();
  killLiveIngests();
});

interface Stream {
  name: string;
  events: any[];
}

/**
 * Every report of how message `runId` ended, across the streams: a run_failed naming it, the
 * `done` end of the run that carried it, a drop, an expiry, a duplicate answer.
 */
function outcomes(streams: Stream[], runId: string): string[] {
  const found: string[] = [];
  for (const { name, events } of streams) {
    for (const e of events) {
      if (e.type === 'run_failed' && e.messages?.some((m: any) => m.runId === runId)) found.push(`${name}:run_failed:${e.reason}`);
      else if (e.type === 'run_ended' && e.runId === runId && e.status === 'done') found.push(`${name}:done`);
      else if ((e.type === 'dropped' || e.type === 'expired') && e.runId === runId) found.push(`${name}:${e.type}`);
      else if (e.type === 'result' && e.runId === runId && e.disposition === 'duplicate') found.push(`${name}:duplicate`);
    }
  }
  return found;
}

function runStarts(streams: Stream[], runId: string): string[] {
  return streams.flatMap(({ name, events }) => events.filter((e) => e.type === 'run_started' && e.runId === runId).map(() => name));
}

/** What the transcripts (archives included) hold of message `runId`. */
function recorded(env: QueueEnv, runId: string): { users: number; replies: number; failures: string[] } {
  const records = allTranscripts(env).flatMap((t) => t.records);
  return {
    users: records.filter((r) => r.type === 'message' && r.message?.role === 'user' && r.message.runId === runId).length,
    replies: records.filter((r) => r.type === 'message' && r.message?.role === 'assistant' && r.message.runId === runId && r.message.reply === true).length,
    failures: records
      .filter((r) => r.type === 'custom' && r.customType === 'run_failed' && r.data?.messages?.some((m: any) => m.runId === runId))
      .map((r) => r.data.reason),
  };
}

/** One report per message, nothing run twice, and the transcripts saying the same as the reports. */
function assertOneOutcomeEach(env: QueueEnv, streams: Stream[], expected: Record<string, string>): void {
  const dump = streams.map(({ name, events }) => `${name}:\n${events.map((e) => `  ${JSON.stringify(e)}`).join('\n')}`).join('\n');
  for (const [runId, outcome] of Object.entries(expected)) {
    assert.deepEqual(outcomes(streams, runId), [outcome], `message ${runId}: exactly one report\n${dump}`);
    assert.ok(runStarts(streams, runId).length <= 1, `message ${runId}: run at most once\n${dump}`);
    const kept = recorded(env, runId);
    assert.equal(kept.users, 1, `message ${runId}: recorded once`);
    if (outcome.endsWith(':done')) {
      assert.deepEqual(kept.failures, [], `message ${runId}: no run_failed record beside its reply`);
      assert.equal(kept.replies, 1, `message ${runId}: its reply recorded once`);
    } else {
      assert.deepEqual(kept.failures, [outcome.split(':').pop()], `message ${runId}: its failure recorded once`);
      assert.equal(kept.replies, 0, `message ${runId}: no reply recorded beside its failure`);
    }
  }
}

/** A's run for bob: started by its ingest, runner up (the message has left the queue), then A frozen. */
async function frozenRun(env: QueueEnv): Promise<{ frozen: LiveIngest; bobLock: string }> {
  const frozen = new LiveIngest(env);
  frozen.send(dm('bob', 'first', { runId: 'b1', messageId: 'mb1' }));
  await frozen.waitFor((e) => e.type === 'run_started' && e.runId === 'b1', "bob's run to start its runner");
  const bobLock = lockPathFor(path.join(sessionsDir(env), readStore(env)[BOB].sessionFile));
  // Stopped holding the session lock, not inside a registry write: a stopped registry holder is
  // waited for by every writer, never taken over (frozen-holder.test.ts), a case of its own.
  const storeLock = path.join(sessionsDir(env), 'sessions.json.lock');
  const pid = frozen.child.pid!;
  for (let attempt = 0; ; attempt++) {
    await freeze(pid);
    if ((await lockAt(storeLock))?.owner?.pid !== pid) break;
    thaw(pid);
    assert.ok(attempt < 200, 'A left the registry lock at some point');
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  return { frozen, bobLock };
}

/** The lock at lockPath as `switchboard locks` judges it (null: not held). */
async function lockAt(lockPath: string): Promise<LockInfo | null> {
  return (await listLocks(path.dirname(lockPath), { staleMs: STALE_MS })).find((info) => info.lockPath === lockPath) ?? null;
}

describe('a process frozen after its run started its runner', () => {
  test('frozen holding the only lane slot: another run waits for the slot (saying for whom), and the run that completed meanwhile is reported done', async () => {
    const env = queueEnv({
      session: { dmScope: 'per-peer', writeLock: { staleMs: STALE_MS } },
      agents: { defaults: { maxConcurrent: 1, runner: queueRunner('hold') } },
    }, 'sb-frozen-runner-');
    const { frozen } = await frozenRun(env);
    const slotLock = lockPathFor(path.join(laneDir(env.state, 'main'), 'slot-0'));
    await waitUntil(async () => (await lockAt(slotLock))?.stale === true, 10_000, "the frozen run's lane slot to look stale");

    // C's run for alice comes for the slot only now, so its very first try sees the slot stale.
    const other = new LiveIngest(env);
    other.send(dm('alice', 'wants the slot', { runId: 'a1', messageId: 'ma1' }));
    const waitsFor = 'waits for a slot of lane main';
    await waitUntil(() => other.stderr.includes(waitsFor) || other.events.some((e) => e.type === 'run_started'), 10_000, "alice's run to try the slot");
    assert.deepEqual(other.events.filter((e) => e.type === 'run_started').map((e) => e.runId), [], 'no second run in a lane of one while the slot holder is stopped');
    assert.match(other.stderr, new RegExp(`run a1 \\(agent:main:direct:alice\\) ${waitsFor}: slot 0 is held by pid ${frozen.child.pid} .*run b1.*not refreshed for`), 'and it says who it waits for');

    // A's runner finishes while A is stopped; A, resumed, finds everything it held still its own.
    releaseHolds(env);
    thaw(frozen.child.pid!);
    await frozen.finish();
    await other.finish();

    const streams = [{ name: 'A', events: frozen.events }, { name: 'C', events: other.events }];
    assertOneOutcomeEach(env, streams, { b1: 'A:done', a1: 'C:done' });
    assertStoreValid(env);
  });

  test('frozen past staleMs and resumed within its max hold: the other process waits (queues), the run ends in its own process, reported once', async () => {
    const env = queueEnv({
      session: { dmScope: 'per-peer', writeLock: { staleMs: STALE_MS } },
      agents: { defaults: { runner: queueRunner('hold') } },
    }, 'sb-frozen-runner-');
    const { frozen, bobLock } = await frozenRun(env);
    await waitUntil(async () => (await lockAt(bobLock))?.stale === true, 10_000, "the frozen run's lock to look stale");

    // B's message for bob comes while A is stopped and its lock looks abandoned (a followup: a
    // steer into the stopped run would only be taken at the run's next boundary).
    const other = new LiveIngest(env);
    other.send(dm('bob', 'second', { runId: 'b2', messageId: 'mb2', queue: { mode: 'followup' } }));
    const admitted = await other.result(1);

    thaw(frozen.child.pid!);
    releaseHolds(env);
    await other.finish();
    await frozen.finish();

    const streams = [{ name: 'A', events: frozen.events }, { name: 'B', events: other.events }];
    // b2 waits in the queue behind the live run, and A, whose queue it is, runs it next.
    assertOneOutcomeEach(env, streams, { b1: 'A:done', b2: 'A:done' });
    assert.equal(admitted.disposition, 'queued', 'the session was busy with A\'s live run');
    const entry = readStore(env)[BOB];
    for (const field of ['activeRun', 'queue', 'queueOwner', 'outbox']) assert.equal(entry[field], undefined, `${field} is cleared: ${JSON.stringify(entry[field])}`);
    assertStoreValid(env);
  });

  test('frozen past its max hold: the other process takes the session over and reports the run; the resumed one is fenced and reports nothing more', async () => {
    const env = queueEnv({
      session: { dmScope: 'per-peer', writeLock: { staleMs: STALE_MS, maxHoldMs: STALE_MS + 2_000 } },
      agents: { defaults: { runner: queueRunner('hold') } },
    }, 'sb-frozen-runner-');
    const { frozen, bobLock } = await frozenRun(env);
    await waitUntil(async () => (await lockAt(bobLock))?.overHeld === true, 10_000, "the frozen run's lock to pass its max hold");

    // B's message finds the session held past its max hold: B ends A's run (and its runner) and runs its own.
    const other = new LiveIngest(env);
    other.send(dm('bob', 'second', { runId: 'b2', messageId: 'mb2' }));
    await other.waitFor((e) => e.type === 'run_started' && e.runId === 'b2', "B's run of its own message");
    releaseHolds(env);
    await other.waitFor((e) => e.type === 'run_ended' && e.runId === 'b2', "B's run to end");

    thaw(frozen.child.pid!);
    await frozen.finish();
    await other.finish();

    const streams = [{ name: 'A', events: frozen.events }, { name: 'B', events: other.events }];
    assertOneOutcomeEach(env, streams, { b1: 'B:run_failed:orphaned', b2: 'B:done' });
    assert.deepEqual(frozen.events.filter((e) => e.runId === 'b1').map((e) => e.type), ['result', 'run_started'], 'A, fenced, reports nothing more of its run');
    // Nor writes: after B's report of the run, nothing of it is in the transcript.
    const records = transcriptOf(env, BOB);
    const reported = records.findIndex((r) => r.type === 'custom' && r.customType === 'run_failed');
    assert.deepEqual(records.slice(reported + 1).filter((r) => r.runId === 'b1' || r.message?.runId === 'b1'), [], shape(records).join(' | '));
    const entry = readStore(env)[BOB];
    for (const field of ['activeRun', 'queue', 'queueOwner', 'outbox']) assert.equal(entry[field], undefined, `${field} is cleared: ${JSON.stringify(entry[field])}`);
    assertStoreValid(env);
  });
});
