// Issue 10 item 2, "queued, then lost": real `switchboard ingest` processes with real runners, the
// process draining the durable queue SIGKILLed at random moments and taken over by the next one;
// runner processes SIGKILLed mid-run. At the end every acknowledged message is recorded in a
// transcript exactly once (found by its runId) or reported by name (dropped/expired), never
// silently lost and never doubled, and every run that failed names every message it carried.

import assert from 'node:assert/strict';
import { randomInt, randomUUID } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import {
  FIXTURES,
  LiveIngest,
  allTranscripts,
  assertStoreValid,
  dm,
  ingestAll,
  killLiveIngests,
  eventsOf,
  queueCli,
  queueEnv,
  readStore,
  sessionsDir,
  transcriptOf,
  type QueueEnv,
} from '../fixtures/queue-lib.js';
import { SOAK_FACTOR } from '../fixtures/crash-lib.js';

after(killLiveIngests);

const ROUNDS = 6 * SOAK_FACTOR;
const PER_PEER = 3;
/** One session per peer; each drains in its own mode (the message's `queue.mode` field). */
const PEERS: [string, string][] = [
  ['ann', 'collect'],
  ['bob', 'collect'],
  ['cid', 'followup'],
  ['dee', 'steer'],
];

interface Tally {
  /** runId → how many user records carry it (a collect record carries several). */
  recorded: Map<string, number>;
  /** runId of a run → the runIds of the messages its user record(s) carry. */
  carried: Map<string, string[]>;
  /** run_failed records in the transcripts: runId → the runIds they name. */
  failedRecords: { runId: string; messages: string[] | undefined }[];
}

function tally(env: QueueEnv): Tally {
  const recorded = new Map<string, number>();
  const carried = new Map<string, string[]>();
  const failedRecords: Tally['failedRecords'] = [];
  const count = (runId: string): void => void recorded.set(runId, (recorded.get(runId) ?? 0) + 1);
  for (const { records } of allTranscripts(env)) {
    for (const record of records) {
      if (record.type === 'message' && record.message?.role === 'user') {
        const message = record.message;
        const ids: string[] = Array.isArray(message.collected) ? message.collected.map((item: any) => item.runId) : [message.runId];
        for (const id of ids) count(id);
        carried.set(message.runId, [...(carried.get(message.runId) ?? []), ...ids]);
      } else if (record.type === 'steer') {
        // Steered into run `record.runId`: it carried them too (their own records are counted above).
        carried.set(record.runId, [...(carried.get(record.runId) ?? []), ...record.items.map((item: any) => item.runId)]);
      } else if (record.type === 'custom' && record.customType === 'run_failed') {
        const data = record.data ?? {};
        failedRecords.push({ runId: data.runId, messages: Array.isArray(data.messages) ? data.messages.map((m: any) => m.runId) : undefined });
      }
    }
  }
  return { recorded, carried, failedRecords };
}

function ackedRunIds(events: any[]): string[] {
  return events.filter((e) => e.type === 'result' && e.persisted === true && e.disposition !== 'duplicate').map((e) => e.runId);
}

/**
 * The accounting every scenario ends with: acknowledged messages recorded exactly once or
 * reported dropped/expired (a run_failed alone does not count: the message's text would be gone),
 * nothing recorded twice, and each failed run named every message its user record carried.
 */
function assertAccounted(env: QueueEnv, events: any[], acked: string[]): Tally {
  const t = tally(env);
  const reported = new Set(events.filter((e) => e.type === 'dropped' || e.type === 'expired').map((e) => e.runId));
  const lost = acked.filter((id) => (t.recorded.get(id) ?? 0) === 0 && !reported.has(id));
  const onlyFailed = lost.filter((id) => events.some((e) => e.type === 'run_failed' && e.runId === id));
  assert.deepEqual(lost, [], `${lost.length} of ${acked.length} acknowledged messages left no record (${onlyFailed.length} of them only a run_failed line)`);
  const doubled = [...t.recorded].filter(([, n]) => n > 1).map(([id]) => id);
  assert.deepEqual(doubled, [], `${doubled.length} messages recorded more than once`);

  const failures = [
    ...events.filter((e) => e.type === 'run_failed').map((e) => ({ runId: e.runId as string, messages: Array.isArray(e.messages) ? e.messages.map((m: any) => m.runId) : undefined, from: 'event' })),
    ...t.failedRecords.map((r) => ({ ...r, from: 'record' })),
  ];
  for (const failure of failures) {
    const carried = t.carried.get(failure.runId);
    if (carried === undefined) continue; // a run that never recorded its message is re-run, not failed
    // It may name more: what a dead run held for steering is named whether or not it got it.
    const unnamed = carried.filter((id) => !(failure.messages ?? []).includes(id));
    assert.deepEqual(unnamed, [], `run_failed (${failure.from}) of run ${failure.runId} must name every message it carried: ${JSON.stringify(failure.messages)}`);
  }
  const store = readStore(env);
  for (const [key, entry] of Object.entries(store)) {
    assert.equal(entry.activeRun, undefined, `${key}: no run left active`);
    assert.equal(entry.queue, undefined, `${key}: nothing left queued: ${JSON.stringify(entry.queue)}`);
    assert.equal(entry.outbox, undefined, `${key}: nothing left in the outbox`);
  }
  assertStoreValid(env);
  return t;
}

describe('queued messages survive SIGKILL of the process that drains them', () => {
  test(`${ROUNDS} rounds: each ingest is killed at a random moment of its drains, the next takes over`, async () => {
    const env = queueEnv({
      session: { dmScope: 'per-peer', writeLock: { staleMs: 2000 } },
      agents: { defaults: { runner: { command: 'builtin:slow-echo', delayMs: 15, toolCalls: 2 } } },
      messages: { queue: { debounceMs: 5, cap: 200 } },
    }, 'sb-qcrash-');
    const events: any[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      const live = new LiveIngest(env);
      const batch = PEERS.flatMap(([peer, mode]) =>
        Array.from({ length: PER_PEER }, (_, i) => dm(peer, `round ${round} ${peer} #${i}`, { runId: `r${round}-${peer}-${i}`, messageId: `m${round}-${peer}-${i}`, queue: { mode } })),
      );
      live.send(...batch);
      await live.result(batch.length);
      // Somewhere in the drains that follow: claims, records, runs, releases.
      await new Promise((resolve) => setTimeout(resolve, randomInt(0, 250)));
      live.child.kill('SIGKILL');
      await live.exited;
      events.push(...live.events);
    }
    const last = await ingestAll(env, []);
    assert.equal(last.code, 0, last.stderr);
    events.push(...last.events);
    const acked = ackedRunIds(events);
    assert.equal(acked.length, ROUNDS * PEERS.length * PER_PEER, 'every line was acknowledged before its process was killed');
    assertAccounted(env, events, acked);
  });
});

describe('runner processes killed mid-run', () => {
  test('every message a killed run carried is recorded once and named by its run_failed', async () => {
    const env = queueEnv({
      session: { dmScope: 'per-peer' },
      agents: { defaults: { runner: { command: [process.execPath, path.join(FIXTURES, 'runner-killable.js'), 'run'], steering: false } } },
      messages: { queue: { debounceMs: 5, cap: 200 } },
    }, 'sb-qcrash-runner-');
    fs.writeFileSync(env.log, '');
    const live = new LiveIngest(env);
    const killed = new Set<string>();
    let seen = 0;
    let watching = true;
    // Kills the first run of each session at once and others at random moments of their work;
    // only processes that are still our runner (the pid is checked against its command line).
    const watcher = (async () => {
      const firstOf = new Set<string>();
      while (watching) {
        const lines = fs.readFileSync(env.log, 'utf8').split('\n').filter(Boolean);
        for (const entry of lines.slice(seen)) {
          const [pid, runId] = entry.split(' ');
          const peer = runId.split('-')[1];
          const first = !firstOf.has(peer);
          firstOf.add(peer);
          if (!first && randomInt(0, 2) === 0) continue;
          setTimeout(() => {
            try {
              if (!fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('runner-killable')) return;
              process.kill(Number(pid), 'SIGKILL');
              killed.add(runId);
            } catch {
              // already gone: it finished first
            }
          }, first ? 0 : randomInt(0, 150));
        }
        seen = lines.length;
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
    })();
    const batch = (wave: number) =>
      PEERS.slice(0, 3).flatMap(([peer, mode]) =>
        Array.from({ length: PER_PEER }, (_, i) => dm(peer, `wave ${wave} ${peer} #${i}`, { runId: `w${wave}-${peer}-${i}`, messageId: `n${wave}-${peer}-${i}`, queue: { mode } })),
      );
    try {
      const first = batch(0);
      live.send(...first);
      await live.result(first.length);
      await live.waitFor((e) => e.type === 'run_failed', 'a killed run');
      live.send(...batch(1));
      await live.finish();
    } finally {
      watching = false;
      await watcher;
    }
    assert.ok(killed.size > 0, 'some runner was killed mid-run');
    const acked = ackedRunIds(live.events);
    assert.equal(acked.length, 2 * 3 * PER_PEER);
    const failed = live.events.filter((e) => e.type === 'run_failed');
    assert.ok(failed.length > 0);
    assertAccounted(env, live.events, acked);
  });
});

describe('a claim left by a process that died between claiming and removing', () => {
  const KEY = 'agent:main:direct:eve';
  const eve = (text: string, extra: Record<string, unknown>) => dm('eve', text, { queue: { mode: 'collect' }, ...extra });

  const base = { session: { dmScope: 'per-peer', writeLock: { staleMs: 2000 } }, messages: { queue: { debounceMs: 5 } } };

  /**
   * Sends `messages` to a live ingest whose runner never ends, SIGKILLs it during the first run,
   * and lets `edit` put into the entry (and transcript) what that process was about to leave
   * there; the runner of the next process is quick.
   */
  async function diedDuringFirstRun(messages: Record<string, unknown>[], edit: (entry: any) => void): Promise<QueueEnv> {
    const env = queueEnv({ ...base, agents: { defaults: { runner: { command: 'builtin:slow-echo', delayMs: 600_000 } } } }, 'sb-qclaim-');
    const live = new LiveIngest(env);
    live.send(...messages);
    await live.result(messages.length);
    await live.waitFor((e) => e.type === 'run_started', 'the first run');
    live.child.kill('SIGKILL');
    await live.exited;
    const storePath = path.join(sessionsDir(env), 'sessions.json');
    const store = JSON.parse(fs.readFileSync(storePath, 'utf8'));
    edit(store[KEY]);
    fs.writeFileSync(storePath, JSON.stringify(store, null, 2));
    fs.writeFileSync(env.config, JSON.stringify({ ...base, agents: { defaults: { runner: { command: 'builtin:slow-echo', delayMs: 5 } } } }));
    return env;
  }

  /** Appends a user record to the entry's transcript, as the dead process had. */
  function recordUser(env: QueueEnv, entry: any, message: Record<string, unknown>): void {
    const last = transcriptOf(env, KEY).at(-1);
    const record = { type: 'message', id: randomUUID(), parentId: last.id ?? null, timestamp: new Date().toISOString(), message: { role: 'user', timestamp: Date.now(), channel: 'telegram', ...message } };
    fs.appendFileSync(path.join(sessionsDir(env), entry.sessionFile), `${JSON.stringify(record)}\n`);
  }

  /**
   * A session whose process died right after claiming the collect turn [a, b] (the state a drain
   * leaves between its claim and its removal): the runner never finished, the process is gone.
   * With `recorded`, the claim's user record made it to disk before the death.
   */
  async function diedHoldingClaim(recorded: boolean): Promise<QueueEnv> {
    const env = await diedDuringFirstRun([eve('first', { runId: 'first' }), eve('a', { runId: 'a', messageId: 'ma' }), eve('b', { runId: 'b', messageId: 'mb' })], (entry) => {
      // What the drain of that process would have written after the first run: the claim.
      assert.deepEqual(entry.queue.map((item: any) => item.runId), ['a', 'b']);
      entry.queue = entry.queue.map((item: any) => ({ ...item, claimedBy: 'a' }));
      entry.activeRun = { ...entry.activeRun, runId: 'a', messages: [{ runId: 'a', messageId: 'ma' }, { runId: 'b', messageId: 'mb' }] };
    });
    if (recorded) {
      // As a drain writes it: each collected item with the time it was queued (what tells it from
      // another message given the same runId).
      const entry = readStore(env)[KEY];
      const collected = entry.queue.map((item: any) => ({ runId: item.runId, messageId: item.messageId, requester: item.requester, enqueuedAt: item.enqueuedAt }));
      recordUser(env, entry, { content: [{ type: 'text', text: 'collected a, b' }], runId: 'a', collected });
    }
    return env;
  }

  // A claim leaves the queue only right before its runner starts, so a claim left behind never
  // reached one: recorded or not, the turn runs — once, and its record is not written again.
  test('recorded before the death: the claimed turn runs (it never reached a runner), not recorded again', async () => {
    const env = await diedHoldingClaim(true);
    const next = await ingestAll(env, []);
    assert.equal(next.code, 0, next.stderr);
    assert.deepEqual(eventsOf(next.events, 'run_failed'), []);
    assert.deepEqual(eventsOf(next.events, 'run_started').map((e) => [e.runId, e.messages]), [['a', 2]]);
    assert.equal(eventsOf(next.events, 'reply').length, 1);
    assert.equal(tally(env).recorded.get('a'), 1, 'recorded once, never again');
    assertAccounted(env, next.events, ['a', 'b']);
  });

  test('not recorded: the claimed turn runs once, as it was', async () => {
    const env = await diedHoldingClaim(false);
    const next = await ingestAll(env, []);
    assert.equal(next.code, 0, next.stderr);
    assert.deepEqual(eventsOf(next.events, 'run_failed'), []);
    assert.deepEqual(eventsOf(next.events, 'run_started').map((e) => [e.runId, e.messages]), [['a', 2]]);
    assertAccounted(env, next.events, ['a', 'b']);
    assert.equal(tally(env).recorded.get('a'), 1);
  });

  // The next thing to happen to the session is a reset (/new, `sessions reset`) or an interrupt,
  // which takes what waits under the old instance out of the queue. Before, a recorded turn was
  // then reported `expired` (the message was recorded and handed to the dead run; nothing said so).
  for (const next of ['/new', 'interrupt', 'sessions reset'] as const) {
    test(`recorded before the death, then ${next}: still the dead run's (run_failed naming a and b), never expired or dropped`, async () => {
      const env = await diedHoldingClaim(true);
      const events: any[] = [];
      if (next === 'sessions reset') {
        const reset = await queueCli(env, ['sessions', 'reset', KEY, '--yes', '--json']);
        assert.equal(reset.code, 0, reset.stderr);
        assert.deepEqual(reset.json.expired ?? [], []);
      } else {
        const r = await ingestAll(env, [next === '/new' ? eve('/new', { runId: 'reset' }) : dm('eve', 'instead', { runId: 'now', queue: { mode: 'interrupt' } })]);
        assert.equal(r.code, 0, r.stderr);
        events.push(...r.events);
        assert.deepEqual(events.filter((e) => e.type === 'expired' || e.type === 'dropped').map((e) => e.runId), []);
        assert.deepEqual(eventsOf(events, 'run_failed').map((e) => [e.runId, e.reason, e.messages.map((m: any) => m.runId)]), [['a', 'orphaned', ['a', 'b']]]);
      }
      const drained = await ingestAll(env, []);
      assert.equal(drained.code, 0, drained.stderr);
      const records = allTranscripts(env).flatMap((t) => t.records).filter((r) => r.type === 'custom');
      assert.deepEqual(records.filter((r) => r.customType === 'expired' || r.customType === 'dropped').map((r) => r.data.runId), []);
      assert.deepEqual(records.filter((r) => r.customType === 'run_failed').map((r) => [r.data.runId, r.data.messages.map((m: any) => m.runId)]), [['a', ['a', 'b']]], 'one durable run_failed naming both');
      assert.equal(tally(env).recorded.get('a'), 1, 'recorded once, never again');
    });
  }

  test('steered into a run that then died, and recorded, then an interrupt: named once, by the dead run (run_failed), never dropped too', async () => {
    // The state a steer leaves when its process dies after recording: b leased by the run, its record down.
    const env = await diedDuringFirstRun([eve('first', { runId: 'first' }), dm('eve', 'b', { runId: 'b', messageId: 'mb', queue: { mode: 'followup' } })], (entry) => {
      entry.queue = entry.queue.map((item: any) => ({ ...item, state: 'parked', leasedBy: 'first' }));
    });
    const parked = readStore(env)[KEY];
    recordUser(env, parked, { content: [{ type: 'text', text: 'b' }], runId: 'b', messageId: 'mb', queued: { mode: 'followup', enqueuedAt: parked.queue[0].enqueuedAt } });

    const r = await ingestAll(env, [dm('eve', 'instead', { runId: 'now', queue: { mode: 'interrupt' } })]);
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(r.events.filter((e) => e.type === 'dropped' || e.type === 'expired').map((e) => e.runId), [], 'b was not dropped: it reached the dead run');
    const failed = eventsOf(r.events, 'run_failed');
    assert.deepEqual(failed.map((e) => [e.runId, e.messages.map((m: any) => m.runId)]), [['first', ['first', 'b']]]);
    const custom = allTranscripts(env).flatMap((t) => t.records).filter((rec) => rec.type === 'custom');
    assert.deepEqual(custom.filter((rec) => rec.customType === 'dropped').map((rec) => rec.data.runId), []);
    assert.equal(tally(env).recorded.get('b'), 1);
  });
});

test('a run waiting for a lane slot is listed as an active run, not also as a queued item; cancel says it is the active run, /stop reports it once', async () => {
  const env = queueEnv({ session: { dmScope: 'per-peer' }, agents: { defaults: { maxConcurrent: 1, runner: { command: 'builtin:slow-echo', delayMs: 600_000 } } } }, 'sb-qlane-');
  const live = new LiveIngest(env);
  try {
    live.send(dm('alice', 'first', { runId: 'a1' }), dm('bob', 'waits for the slot', { runId: 'b1' }), dm('carol', 'waits too', { runId: 'c1' }));
    await live.result(3);
    await live.waitFor((e) => e.type === 'run_started', 'the run that has the slot');
    const listed = await queueCli(env, ['queue', '--json']);
    assert.deepEqual(listed.json.items.map((item: any) => item.runId), [], 'nothing waits in a queue: every message has its run');
    assert.deepEqual(listed.json.active.map((run: any) => run.runId).sort(), ['a1', 'b1', 'c1']);
    const waiting = eventsOf(live.events, 'run_started')[0].runId === 'b1' ? 'c1' : 'b1';
    const cancel = await queueCli(env, ['queue', 'cancel', waiting, '--json']);
    assert.equal(cancel.code, 66, 'the active run, not a queued item (as once its runner runs)');
    const shown = await queueCli(env, ['queue', 'show', waiting, '--json']);
    assert.equal(shown.code, 0, shown.stderr);
    assert.equal(shown.json.item, undefined);
    assert.equal(shown.json.active.runId, waiting, 'shown as the active run it is');
    // /stop: the waiting run is stopped and reported once, its message not also dropped as queued.
    live.send(dm(waiting === 'b1' ? 'bob' : 'carol', '/stop', { runId: 'stop' }));
    const failed = await live.waitFor((e) => e.type === 'run_failed' && e.runId === waiting, 'the stopped run');
    assert.deepEqual(failed.messages.map((m: any) => m.runId), [waiting]);
    assert.deepEqual(live.events.filter((e) => e.type === 'dropped').map((e) => e.runId), []);
  } finally {
    live.child.kill('SIGKILL');
    await live.exited;
  }
});

// A run waits for a lane slot (agents.defaults.maxConcurrent) after its message was recorded. A
// process killed then had handed that message to no runner: after the restart it runs, once.
describe('a run that waited for a lane slot when its process died', () => {
  const base = { session: { dmScope: 'per-peer', writeLock: { staleMs: 2000 } } };

  for (const how of ['started by ingest', 'drained from the queue'] as const) {
    test(`${how}: runs after the restart (recorded once, never reported as abandoned); the run that had its runner is reported`, async () => {
      const env = queueEnv({ ...base, agents: { defaults: { maxConcurrent: 1, runner: { command: 'builtin:slow-echo', delayMs: 600_000 } } } }, 'sb-qlane-');
      // Drained from the queue: collect mode queues bob's messages, and the drain's turns wait for the slot.
      const messages =
        how === 'started by ingest'
          ? [dm('alice', 'first', { runId: 'a1', messageId: 'ma' }), dm('bob', 'waits for the slot', { runId: 'b1', messageId: 'mb' })]
          : [dm('alice', 'first', { runId: 'a1', messageId: 'ma' }), dm('bob', 'busy?', { runId: 'b0', messageId: 'mb0', queue: { mode: 'collect', debounceMs: 1 } }), dm('bob', 'waits for the slot', { runId: 'b1', messageId: 'mb', queue: { mode: 'collect', debounceMs: 1 } })];
      const live = new LiveIngest(env);
      live.send(...messages);
      await live.result(messages.length);
      await live.waitFor((e) => e.type === 'run_started' && e.runId === 'a1', "alice's run");
      // bob's turn has its records down and waits for alice's slot.
      for (let i = 0; i < 200 && !transcriptOf(env, 'agent:main:direct:bob').some((r) => r.message?.role === 'user'); i++) await new Promise((resolve) => setTimeout(resolve, 20));
      await new Promise((resolve) => setTimeout(resolve, 200));
      live.child.kill('SIGKILL');
      await live.exited;
      fs.writeFileSync(env.config, JSON.stringify({ ...base, agents: { defaults: { maxConcurrent: 1, runner: { command: 'builtin:slow-echo', delayMs: 5 } } } }));

      const next = await ingestAll(env, []);
      assert.equal(next.code, 0, next.stderr);
      const failed = eventsOf(next.events, 'run_failed');
      assert.deepEqual(failed.map((e) => [e.runId, e.reason]), [['a1', 'orphaned']], 'alice had her runner: reported, not run again');
      const bobIds = messages.map((m) => m.runId as string).filter((id) => id.startsWith('b'));
      const bobRuns = eventsOf(next.events, 'run_started').filter((e) => e.sessionKey === 'agent:main:direct:bob');
      assert.deepEqual(bobRuns.map((e) => e.runId), bobIds, 'each of bob\'s turns ran once');
      assert.equal(eventsOf(next.events, 'reply').filter((e) => e.sessionKey === 'agent:main:direct:bob').length, bobIds.length, 'and was answered');
      const counts = tally(env).recorded;
      for (const id of [...bobIds, 'a1']) assert.equal(counts.get(id), 1, `${id}: recorded once, not again by the restart`);
      assertStoreValid(env);
    });
  }
});

test('a /stop in the batch that started the run it stops is recorded once (the outbox leaves the entry once appended, whether or not the run then starts)', async () => {
  for (const maxConcurrent of [1, 4]) {
    const env = queueEnv({ session: { dmScope: 'per-peer' }, agents: { defaults: { maxConcurrent, runner: { command: 'builtin:slow-echo', delayMs: 1_500 } } } }, 'sb-qstop-');
    // With one slot, alice's run holds it and bob's waits for it when his /stop comes.
    const r = await ingestAll(env, [dm('alice', 'holds the slot', { runId: 'm1' }), dm('bob', 'starts a run', { runId: 'm2' }), dm('bob', '/stop', { runId: 'm3' })]);
    assert.equal(r.code, 0, r.stderr);
    const records = transcriptOf(env, 'agent:main:direct:bob');
    const ofStop = records.filter((record) => record.message?.runId === 'm3');
    // The command, its answer and the answer's delivery mirror: once each.
    assert.deepEqual(ofStop.map((record) => record.message.role), ['user', 'assistant', 'assistant'], `maxConcurrent ${maxConcurrent}: ${JSON.stringify(ofStop)}`);
    assert.equal(tally(env).recorded.get('m2'), 1);
    assertStoreValid(env);
  }
});
