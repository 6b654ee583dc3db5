// A process frozen (SIGSTOP) past its session lock's max hold while its run waits for a lane slot,
// with real processes and real signals. Its run has claimed the turn (activeRun, items claimed in
// the queue) and holds the session lock, which is stale and then over-held; another process judges
// the run dead and clears it, but leaves the queue to its owner, which is alive. Once the frozen
// one resumes (SIGCONT), the turn must run once, in it, and be reported once: no run_failed for
// messages no runner ever saw. (Frozen for less than the max hold, it is alive and waited for,
// however stale its lock looks: nobody clears anything, and it simply goes on.)
//
// The lane slot is held by this test process (alive and never frozen, with a long max hold of its
// own: a run of a third process would lose it to the short max hold the frozen run is given), so
// which state the frozen run resumes in is set by the test: the slot still taken (it sees the
// takeover while it waits) or free again (it may get the slot before it sees the takeover). The
// turn is one that ingest started (the batch recorded its message) or one drained from the queue
// (the run records it itself, under the session lock, before it waits for the slot).

import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import { laneDir } from '../../src/engine/lanes.js';
import { lockPathFor, readLockOwner, withLock } from '../../src/store/index.js';
import { freeze, thaw, thawAll } from '../fixtures/freeze.js';
import { LiveIngest, allTranscripts, assertStoreValid, dm, ingestAll, killLiveIngests, queueEnv, queueRunner, readStore, releaseHolds, sessionsDir, shape, transcriptOf, type QueueEnv } from '../fixtures/queue-lib.js';
import { runCli } from '../helpers.js';
import { waitUntil } from '../fixtures/store-child-process.js';

const BOB = 'agent:main:direct:bob';

after(() => {
  thawAll();
  killLiveIngests();
});

/** The lane's only slot, held by this process until release() (resolves once it is let go). */
async function holdTheSlot(env: QueueEnv): Promise<{ release: () => Promise<void> }> {
  let letGo!: () => void;
  const released = new Promise<void>((resolve) => (letGo = resolve));
  let held!: () => void;
  const holding = new Promise<void>((resolve) => (held = resolve));
  const done = withLock(path.join(laneDir(env.state, 'main'), 'slot-0'), { acquireTimeoutMs: 0, maxHoldMs: 600_000, owner: { runId: 'the-test' } }, async () => {
    held();
    await released;
  });
  await Promise.race([holding, done]);
  return {
    release: async () => {
      letGo();
      await done;
    },
  };
}

const CASES = [
  { how: 'started by ingest', slot: 'still taken', reset: false },
  { how: 'started by ingest', slot: 'free again', reset: false },
  { how: 'drained from the queue', slot: 'still taken', reset: false },
  // Found by a kill/freeze sweep (session 19): the message is recorded in the instance a reset
  // archived during the freeze; it was reported expired, as if it had never been recorded.
  { how: 'drained from the queue', slot: 'still taken', reset: true },
] as const;

describe('a process frozen past its max hold while its run waits for a lane slot', () => {
  for (const { how, slot: state, reset } of CASES) {
    const title = reset
      ? `${how}, the session reset during the freeze: its recorded message is reported failed (orphaned) once, never expired`
      : `${how}, resumed with the slot ${state}: the turn runs once, in it, with no run_failed`;
    test(title, async () => {
      const env = queueEnv({
        session: { dmScope: 'per-peer', writeLock: { staleMs: 2_000, maxHoldMs: 3_000 } },
        agents: { defaults: { maxConcurrent: 1, runner: queueRunner('hold') } },
      }, 'sb-frozen-waiter-');
      const slot = await holdTheSlot(env);

      // A's run for bob claims its turn, takes bob's session lock and waits for the slot: a turn
      // ingest starts for the message it admits, or one A's drain claims from the queue (left
      // there by an `ingest --no-wait`, taken over by A as an ownerless queue when it starts).
      const message = dm('bob', 'waits for the slot', { runId: 'b1', messageId: 'mb' });
      if (how === 'drained from the queue') {
        const left = await ingestAll(env, [message], ['--no-wait']);
        assert.deepEqual(left.events.map((e) => e.disposition), ['queued'], left.stderr);
      }
      const waiter = new LiveIngest(env);
      if (how === 'started by ingest') {
        waiter.send(message);
        assert.equal((await waiter.result(1)).disposition, 'started');
      }
      const bobFile = path.join(sessionsDir(env), readStore(env)[BOB].sessionFile);
      const bobLock = lockPathFor(bobFile);
      await waitUntil(async () => (await readLockOwner(bobLock))?.runId === 'b1', 10_000, "bob's run to hold its session lock");
      // The drain's run records the message after its look at the entry, then waits for the slot.
      // (A run ingest started has no such mark: it may be frozen right at that look instead, which
      // must come to the same.)
      if (how === 'drained from the queue') {
        const recorded = (): boolean => fs.existsSync(bobFile) && shape(transcriptOf(env, BOB)).includes('user:waits for the slot');
        await waitUntil(recorded, 10_000, "bob's record");
      }
      await freeze(waiter.child.pid!);

      // Other processes look until one judges bob's run dead (its lock past its max hold) and clears it.
      const others: any[] = [];
      for (let attempt = 0; readStore(env)[BOB].activeRun !== undefined; attempt++) {
        assert.ok(attempt < 100, 'some ingest judged the frozen run dead');
        const other = await ingestAll(env, []);
        assert.equal(other.code, 0, other.stderr);
        others.push(...other.events);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      const cleared = readStore(env)[BOB];
      assert.deepEqual(cleared.queue?.map((item: any) => item.claimedBy), ['b1'], 'the claim is left queued for its owner');
      assert.equal(cleared.queueOwner?.pid, waiter.child.pid, 'and the queue to the frozen (live) owner');

      if (reset) {
        const r = await runCli(['sessions', 'reset', BOB, '-y', '--state-dir', env.state, '--config', env.config]);
        assert.equal(r.code, 0, r.stderr);
      }
      if (state === 'free again') await slot.release();
      thaw(waiter.child.pid!);
      if (reset) {
        await slot.release();
      } else if (state === 'still taken') {
        // Seen by the resumed process: its run ended (old behaviour) or the turn is claimed again.
        await waitUntil(() => waiter.events.some((e) => e.runId === 'b1' && e.type === 'run_ended') || readStore(env)[BOB].activeRun?.pid === waiter.child.pid, 30_000, 'the resumed process to act on the takeover');
        await slot.release();
      }
      releaseHolds(env); // the turn's own runner ends at once
      await waiter.finish();

      if (reset) {
        const everything = allTranscripts(env).flatMap((t) => t.records);
        const naming = (customType: string) => everything.filter((record) => record.type === 'custom' && record.customType === customType && (record.data?.runId === 'b1' || record.data?.messages?.some((m: any) => m.runId === 'b1')));
        assert.equal(everything.filter((record) => record.message?.role === 'user' && record.message.runId === 'b1').length, 1, 'recorded once');
        assert.deepEqual(naming('expired'), [], 'never reported expired');
        assert.deepEqual(naming('run_failed').map((record) => record.data.reason), ['orphaned']);
        assertStoreValid(env);
        return;
      }
      const ofBob = (events: any[]) => events.filter((e) => e.runId === 'b1' && e.type !== 'result').map((e) => `${e.type}${e.status ? `:${e.status}` : ''}`);
      assert.deepEqual(ofBob(others), [], 'the process that judged the run dead reported nothing of it');
      assert.deepEqual(ofBob(waiter.events), ['run_started', 'reply', 'run_ended:done'], `one run, one report:\n${waiter.events.map((e) => JSON.stringify(e)).join('\n')}`);
      // Recorded once (the takeover found the record on disk), answered once, no run_failed.
      const records = transcriptOf(env, BOB);
      const labels = shape(records).map((label) => label.replace(/:[^]*$/, ''));
      assert.deepEqual(labels, ['user', 'tool_call', 'tool_result', 'assistant', 'mirror'], shape(records).join(' | '));
      assert.equal(records.find((record) => record.message?.role === 'user').message.runId, 'b1');
      const entry = readStore(env)[BOB];
      for (const field of ['activeRun', 'queue', 'queueOwner', 'outbox']) assert.equal(entry[field], undefined, `${field} is cleared: ${JSON.stringify(entry[field])}`);
      assertStoreValid(env);
    });
  }
});
