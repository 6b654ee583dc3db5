// "Dropped (or expired) with a report" must survive a crash: a message another process admitted,
// acknowledged and queued, then pushed out of the queue by a newer message (the cap, an
// interrupt) or expired by a reset, leaves the durable queue in the same sessions.json write that
// admits the newer one. If the process that
// wrote it dies before it has printed the `dropped` event, the item is gone from the store and
// nobody was told — unless the drop is recorded as durably as the removal. Real processes: a run
// held by a file, an ingest whose stdout nobody reads (so it blocks right after its commit, before
// the events of its last line), SIGKILL.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { after, test } from 'node:test';
import { BIN } from '../helpers.js';
import { LiveIngest, WAIT_MS, allTranscripts, assertStoreValid, dm, eventsOf, ingestAll, killLiveIngests, queueCli, queueEnv, queueRunner, readStore, releaseHolds, runnerEnv, type QueueEnv } from '../fixtures/queue-lib.js';

after(killLiveIngests);

const KEY = 'agent:main:direct:alice';
const alice = (text: string, extra: Record<string, unknown> = {}) => dm('alice', text, extra);

/** Polls (one event-loop turn apart) until `done` holds; fails after WAIT_MS. */
async function until(done: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + WAIT_MS;
  while (!done()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/**
 * `ingest FILE` of `lines` with stdout left unread: once the pipe is full it blocks in the write
 * of its results, after its store write. Killed (SIGKILL) as soon as `committed` holds; returns
 * what it had printed.
 */
async function ingestKilledAfterCommit(env: QueueEnv, lines: Record<string, unknown>[], committed: () => boolean): Promise<any[]> {
  const file = path.join(env.state, 'batch.ndjson');
  fs.writeFileSync(file, lines.map((m) => JSON.stringify(m)).join('\n') + '\n');
  const childEnv: Record<string, string | undefined> = { ...process.env, NO_COLOR: '1', ...runnerEnv(env) };
  for (const key of Object.keys(childEnv)) if (key.startsWith('SWITCHBOARD_')) delete childEnv[key];
  const child = spawn(process.execPath, [BIN, 'ingest', file, '--state-dir', env.state, '--config', env.config], { env: childEnv, stdio: ['ignore', 'pipe', 'pipe'] });
  child.stdout.pause();
  child.stderr.resume();
  const closed = new Promise<void>((resolve) => child.on('close', () => resolve()));
  try {
    await until(committed, 'the batch to be written to sessions.json');
  } finally {
    child.kill('SIGKILL');
  }
  let out = '';
  child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString('utf8')));
  child.stdout.resume();
  await closed;
  return out
    .split('\n')
    .filter((raw) => raw.endsWith('}'))
    .map((raw) => JSON.parse(raw));
}

/** The runIds in the session's queue; null when sessions.json could not be read just now (the next poll reads it). */
function queuedRunIds(env: QueueEnv): string[] | null {
  try {
    return (readStore(env)[KEY]?.queue ?? []).map((item: any) => item.runId);
  } catch {
    return null;
  }
}

/** Durable reports of a drop: records in the session's transcripts that name the item. */
function dropRecords(env: QueueEnv, runId: string): any[] {
  return allTranscripts(env)
    .flatMap((t) => t.records)
    .filter((record) => record.type === 'custom' && record.customType === 'dropped' && record.data?.runId === runId);
}

function recordedRunIds(env: QueueEnv): string[] {
  return allTranscripts(env)
    .flatMap((t) => t.records)
    .filter((record) => record.type === 'message' && record.message?.role === 'user')
    .map((record) => record.message.runId);
}

for (const scenario of [
  { name: 'the cap (drop: old)', queue: { mode: 'followup', cap: 2, drop: 'old' }, newest: { queue: { mode: 'followup' } }, reason: 'cap', superseded: ['q1'], queuesNewest: true },
  { name: 'an interrupt', queue: { mode: 'followup' }, newest: { queue: { mode: 'interrupt' } }, reason: 'interrupt', superseded: ['q1', 'q2'], queuesNewest: true },
  // Found by a kill sweep (session 19): /stop took the waiting messages out with an event only.
  { name: 'a /stop', queue: { mode: 'followup' }, newest: {}, text: '/stop', reason: 'stopped', superseded: ['q1', 'q2'], queuesNewest: false },
]) {
  test(`an acknowledged queued message pushed out by ${scenario.name} is reported durably, even when the process that pushed it out dies before printing`, async () => {
    const env = queueEnv({ session: { dmScope: 'per-peer' }, agents: { defaults: { runner: queueRunner('hold') } }, messages: { queue: { debounceMs: 20, ...scenario.queue } } }, 'sb-dropcrash-');
    const live = new LiveIngest(env);
    live.send(alice('long run', { runId: 'long' }));
    await live.waitFor((e) => e.type === 'run_started', 'the long run');

    // Another process queues two messages behind the run and is told they are stored.
    const sender = await ingestAll(env, [alice('q1', { runId: 'q1' }), alice('q2', { runId: 'q2' })]);
    assert.equal(sender.code, 0, sender.stderr);
    assert.deepEqual(eventsOf(sender.events, 'result').map((e) => [e.runId, e.disposition, e.persisted]), [['q1', 'queued', true], ['q2', 'queued', true]]);

    // A third one writes a batch whose last line pushes them out; it dies before printing that.
    // More results than a socket pair buffers (each is some 300 bytes), all for an idle session.
    const filler = Array.from({ length: 5000 }, (_, i) => dm('bob', `note ${i}`, { kind: 'system' }));
    const printed = await ingestKilledAfterCommit(env, [...filler, alice(scenario.text ?? 'newest', { runId: 'newest', ...scenario.newest })], () => {
      const queued = queuedRunIds(env);
      // Only this batch takes them out (the long run is held): gone from a store that could be read.
      if (queued === null) return false;
      return (!scenario.queuesNewest || queued.includes('newest')) && scenario.superseded.every((id) => !queued.includes(id));
    });
    assert.ok(printed.length < filler.length, `the killed ingest was blocked on its output (it printed ${printed.length} events)`);
    assert.deepEqual(printed.filter((e) => e.type === 'dropped'), [], 'it died before it could report the drop');

    releaseHolds(env);
    await live.finish();
    const everyEvent = [...live.events, ...sender.events, ...printed];
    const recorded = recordedRunIds(env);
    for (const runId of scenario.superseded) {
      const reported = everyEvent.some((e) => (e.type === 'dropped' || e.type === 'expired') && e.runId === runId);
      const records = dropRecords(env, runId);
      assert.ok(recorded.includes(runId) || reported || records.length > 0, `${runId}: acknowledged, then neither recorded nor reported anywhere`);
      assert.equal(records.length, 1, `${runId}: one durable drop record`);
      assert.deepEqual([records[0].data.reason, records[0].data.requester], [scenario.reason, 'alice']);
      assert.ok(!recorded.includes(runId), `${runId}: dropped, so never run`);
    }
    if (scenario.queuesNewest) assert.ok(recorded.includes('newest'), 'the newest message ran');
    assertStoreValid(env);
  });
}

test('acknowledged queued messages that a reset expires are reported durably, even when the process that reset the session dies before printing', async () => {
  // Messages collected behind a run wait for their debounce once it has ended, with no run
  // active; a `/new` from another process then rotates the session at once, and what waited for
  // the old instance expires in that write.
  const env = queueEnv({ session: { dmScope: 'per-peer' }, agents: { defaults: { runner: queueRunner('log') } }, messages: { queue: { mode: 'collect', debounceMs: 4_000 } } }, 'sb-expirecrash-');
  const live = new LiveIngest(env);
  live.send(alice('q0', { runId: 'q0' }), alice('q1', { runId: 'q1' }), alice('q2', { runId: 'q2' }));
  const acks = [await live.result(1), await live.result(2), await live.result(3)];
  assert.deepEqual(acks.map((e) => [e.runId, e.disposition, e.persisted]), [['q0', 'started', true], ['q1', 'collected', true], ['q2', 'collected', true]]);
  await live.waitFor((e) => e.type === 'run_ended' && e.runId === 'q0', 'the first run');
  const before = readStore(env)[KEY].sessionId;

  const filler = Array.from({ length: 5000 }, (_, i) => dm('bob', `note ${i}`, { kind: 'system' }));
  const printed = await ingestKilledAfterCommit(env, [...filler, alice('/new', { runId: 'reset' })], () => {
    try {
      const entry = readStore(env)[KEY];
      return entry.sessionId !== before && !(entry.queue ?? []).some((item: any) => ['q1', 'q2'].includes(item.runId));
    } catch {
      return false;
    }
  });
  assert.ok(printed.length < filler.length, `the killed ingest was blocked on its output (it printed ${printed.length} events)`);
  assert.deepEqual(printed.filter((e) => e.type === 'expired'), [], 'it died before it could report the expiries');

  // Durable already: in the entry's outbox, and in the transcript once the session's next writer comes.
  const owed = (readStore(env)[KEY].outbox ?? []).flatMap((item: any) => item.records).filter((r: any) => r.customType === 'expired');
  assert.deepEqual(owed.map((r: any) => [r.data.runId, r.data.sessionId, r.data.reason]).sort(), [['q1', before, 'rebind'], ['q2', before, 'rebind']]);
  live.send(alice('after the reset', { runId: 'after' }));
  await live.waitFor((e) => e.type === 'run_ended' && e.runId === 'after', 'the next run');
  await live.finish();
  const expiredRecords = allTranscripts(env)
    .flatMap((t) => t.records)
    .filter((record) => record.type === 'custom' && record.customType === 'expired');
  assert.deepEqual(expiredRecords.map((r) => r.data.runId).sort(), ['q1', 'q2'], 'one durable expiry record each, in the transcript');
  const recorded = recordedRunIds(env);
  assert.ok(recorded.includes('q0') && !recorded.includes('q1') && !recorded.includes('q2'), 'expired, so never run');
  assert.deepEqual(readStore(env)[KEY].outbox ?? [], [], 'the outbox was emptied by the writer that appended it');
  assertStoreValid(env);
});

test('queue cancel and abort with nobody draining the session: each removed item is recorded in the same write that removes it, by name and with who did it', async () => {
  const env = queueEnv({ session: { dmScope: 'per-peer' }, agents: { defaults: { runner: queueRunner('log') } } });
  assert.equal((await ingestAll(env, [alice('first', { runId: 'r0' })])).code, 0);
  // --no-wait: admitted and queued, then the ingest exits; no process drains the session.
  const queued = await ingestAll(env, [alice('one', { runId: 'c1' }), alice('two', { runId: 'a1' }), alice('three', { runId: 'a2' })], ['--no-wait']);
  assert.equal(queued.code, 0, queued.stderr);
  const queuedIds = () => (readStore(env)[KEY].queue ?? []).map((item: any) => item.runId);
  assert.deepEqual(queuedIds(), ['c1', 'a1', 'a2']);
  assert.equal(readStore(env)[KEY].queueOwner, undefined, 'nobody drains it');

  assert.equal((await queueCli(env, ['queue', 'cancel', 'c1', '--reason', 'sent twice', '--yes', '--json'])).code, 0);
  assert.equal((await queueCli(env, ['queue', 'abort', '--session', KEY, '--yes', '--json'])).code, 0);
  assert.deepEqual(queuedIds(), []);
  // The write that took them out holds their reports (a cancel killed right after it, before it
  // printed anything, leaves them there): before, nothing anywhere named them.
  const owed = (readStore(env)[KEY].outbox ?? []).flatMap((item: any) => item.records);
  assert.deepEqual(owed.map((r: any) => [r.customType, r.data.runId, r.data.reason]), [['dropped', 'c1', 'cancelled'], ['dropped', 'a1', 'stopped'], ['dropped', 'a2', 'stopped']]);
  assert.equal(owed[0].data.cancelledBy.reason, 'sent twice');
  assert.ok(Number.isInteger(owed[0].data.cancelledBy.pid));

  // The session's next drain appends them to its transcript and empties the outbox.
  assert.equal((await ingestAll(env, [alice('later', { runId: 'r9' })])).code, 0);
  const dropped = allTranscripts(env).flatMap((t) => t.records).filter((r) => r.type === 'custom' && r.customType === 'dropped');
  assert.deepEqual(dropped.map((r) => r.data.runId), ['c1', 'a1', 'a2']);
  assert.deepEqual(readStore(env)[KEY].outbox ?? [], []);
  assertStoreValid(env);
});
