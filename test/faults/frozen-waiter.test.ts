// A process frozen (SIGSTOP) past staleMs while its run waits for a lane slot, with real processes
// and real signals. Its run has claimed the turn (activeRun, items claimed in the queue) and holds
// the session lock, which goes stale; another process judges the run dead and clears it, but
// leaves the queue to its owner, which is alive. Once the frozen one resumes (SIGCONT), the turn
// must run once, in it, and be reported once: no run_failed for messages no runner ever saw.
//
// The lane slot is held by a run of a third process (not frozen, so not judged dead), so which
// state the frozen run resumes in is set by the test: the slot still taken (it sees the takeover
// while it waits) or free again (it may get the slot before it sees the takeover). The turn is
// one that ingest started (the batch recorded its message) or one drained from the queue (the
// run records it itself, under the session lock, before it waits for the slot).

import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import { lockPathFor, readLockOwner } from '../../src/store/index.js';
import { LiveIngest, allTranscripts, assertStoreValid, dm, ingestAll, killLiveIngests, queueEnv, queueRunner, readStore, releaseHolds, sessionsDir, shape, transcriptOf } from '../fixtures/queue-lib.js';
import { runCli } from '../helpers.js';
import { waitUntil } from '../fixtures/store-child-process.js';

const BOB = 'agent:main:direct:bob';

after(() => {
  for (const pid of frozen) {
    try {
      process.kill(pid, 'SIGCONT');
    } catch {
      // gone already
    }
  }
  killLiveIngests();
});

/** Pids this file stopped: resumed in any case, so that a failed test leaves none behind. */
const frozen = new Set<number>();

/** Process state letter from /proc (T = stopped); null where there is no /proc. */
function procState(pid: number): string | null {
  try {
    const text = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return text.slice(text.lastIndexOf(')') + 2).split(' ')[0] ?? null;
  } catch {
    return null;
  }
}

async function freeze(pid: number): Promise<void> {
  frozen.add(pid);
  process.kill(pid, 'SIGSTOP');
  if (procState(pid) !== null) await waitUntil(() => procState(pid) === 'T', 10_000, 'the process to be stopped');
}

function thaw(pid: number): void {
  process.kill(pid, 'SIGCONT');
  frozen.delete(pid);
}

const CASES = [
  { how: 'started by ingest', slot: 'still taken', reset: false },
  { how: 'started by ingest', slot: 'free again', reset: false },
  { how: 'drained from the queue', slot: 'still taken', reset: false },
  // Found by a kill/freeze sweep (session 19): the message is recorded in the instance a reset
  // archived during the freeze; it was reported expired, as if it had never been recorded.
  { how: 'drained from the queue', slot: 'still taken', reset: true },
] as const;

describe('a process frozen past staleMs while its run waits for a lane slot', () => {
  for (const { how, slot, reset } of CASES) {
    const title = reset
      ? `${how}, the session reset during the freeze: its recorded message is reported failed (orphaned) once, never expired`
      : `${how}, resumed with the slot ${slot}: the turn runs once, in it, with no run_failed`;
    test(title, async () => {
      const env = queueEnv({
        session: { dmScope: 'per-peer', writeLock: { staleMs: 2_000 } },
        agents: { defaults: { maxConcurrent: 1, runner: queueRunner('hold') } },
      }, 'sb-frozen-waiter-');

      // C's run for alice holds the only slot until the release file exists.
      const holder = new LiveIngest(env);
      holder.send(dm('alice', 'holds the slot', { runId: 'a1', messageId: 'ma' }));
      await holder.waitFor((e) => e.type === 'run_started' && e.runId === 'a1', "alice's run");

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

      // Other processes look until one judges bob's run dead (its lock gone stale) and clears it.
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
      if (slot === 'free again') {
        releaseHolds(env);
        await holder.waitFor((e) => e.type === 'run_ended' && e.runId === 'a1', "alice's run to end");
        await holder.finish();
      }
      thaw(waiter.child.pid!);
      if (reset) {
        releaseHolds(env);
        await holder.finish();
      } else if (slot === 'still taken') {
        // Seen by the resumed process: its run ended (old behaviour) or the turn is claimed again.
        await waitUntil(() => waiter.events.some((e) => e.runId === 'b1' && e.type === 'run_ended') || readStore(env)[BOB].activeRun?.pid === waiter.child.pid, 30_000, 'the resumed process to act on the takeover');
        releaseHolds(env);
        await holder.finish();
      }
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
