// Queue accounting (quality.md 20: every message ends delivered, queued, dropped, expired or
// duplicate), debounce under continuous input (23), and the global lanes across processes.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, describe, test } from 'node:test';
import {
  LiveIngest,
  allTranscripts,
  assertStoreValid,
  dm,
  eventsOf,
  ingestAll,
  killLiveIngests,
  queueEnv,
  queueRunner,
  readStore,
} from '../fixtures/queue-lib.js';

after(killLiveIngests);

/** A small seeded PRNG (mulberry32): the stream is random but the same on every run. */
function prng(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Every runId a transcript shows as consumed: user records, collect batches, heartbeat records. */
function deliveredRunIds(records: any[]): string[] {
  const ids: string[] = [];
  for (const record of records) {
    if (record.type === 'message' && record.message.role === 'user') {
      if (Array.isArray(record.message.collected)) ids.push(...record.message.collected.map((c: { runId: string }) => c.runId));
      else ids.push(record.message.runId);
    } else if (record.type === 'custom' && (record.customType === 'heartbeat' || record.customType === 'system')) {
      ids.push(record.data.runId);
    }
  }
  return ids;
}

describe('case 20: accounting', () => {
  for (const [seed, drop] of [[20261130, 'old'], [7, 'summarize'], [99, 'new']] as const) {
    test(`a random stream over several sessions and modes (seed ${seed}, drop ${drop}): inputs = delivered + queued + dropped + expired + duplicates`, async (t) => {
      const env = queueEnv({
        session: { dmScope: 'per-peer' },
        agents: { defaults: { runner: { command: 'builtin:slow-echo', delayMs: 15, toolCalls: 1 } } },
        messages: { queue: { debounceMs: 10, cap: 4, drop } },
      });
      const random = prng(seed);
      const peers = ['p1', 'p2', 'p3', 'p4'];
      const modes = ['steer', 'followup', 'collect', 'interrupt'];
      const sentIds = new Map<string, string[]>();
      const messages: Record<string, unknown>[] = [];
      for (let n = 1; n <= 60; n++) {
        const peer = peers[Math.floor(random() * peers.length)];
        const r = random();
        const runId = `m${n}`;
        const earlier = sentIds.get(peer) ?? [];
        if (r < 0.08) {
          messages.push({ channel: 'telegram', peer: `direct:${peer}`, kind: 'heartbeat', runId });
        } else if (r < 0.13) {
          messages.push(dm(peer, `/new again ${n}`, { runId, messageId: `id${n}` }));
        } else if (r < 0.22 && earlier.length > 0) {
          messages.push(dm(peer, `copy ${n}`, { runId, messageId: earlier[Math.floor(random() * earlier.length)] }));
        } else {
          messages.push(dm(peer, `text ${n}`, { runId, messageId: `id${n}`, queue: { mode: modes[Math.floor(random() * modes.length)] } }));
        }
        const id = messages[messages.length - 1].messageId as string | undefined;
        if (id !== undefined) sentIds.set(peer, [...earlier, id]);
      }

      // Ten chunks, each sent once the previous one is acknowledged: runs of earlier chunks
      // are in flight, so messages meet idle, busy, draining and rotating sessions.
      const live = new LiveIngest(env);
      for (let chunk = 0; chunk < 10; chunk++) {
        live.send(...messages.slice(chunk * 6, chunk * 6 + 6));
        await live.result(chunk * 6 + 6);
      }
      await live.finish();
      const events = live.events;
      const results = eventsOf(events, 'result');
      assert.equal(results.length, messages.length);
      assert.deepEqual(eventsOf(events, 'error'), []);

      const outcome = new Map<string, string[]>();
      const note = (runId: string, what: string) => outcome.set(runId, [...(outcome.get(runId) ?? []), what]);
      for (const result of results) if (result.disposition === 'duplicate') note(result.runId, 'duplicate');
      // A summary turn of dropped messages can itself expire or be cancelled; its messages were
      // reported dropped already, so it is no outcome of an input.
      for (const event of eventsOf(events, 'dropped')) if (event.kind !== 'overflow') note(event.runId, 'dropped');
      for (const event of eventsOf(events, 'expired')) if (event.kind !== 'overflow') note(event.runId, 'expired');
      for (const { records } of allTranscripts(env)) for (const runId of deliveredRunIds(records)) note(runId, 'delivered');
      const store = readStore(env);
      for (const entry of Object.values(store) as any[]) for (const item of entry.queue ?? []) note(item.runId, 'queued');

      const inputs = messages.map((m) => m.runId as string);
      const counts: Record<string, number> = { delivered: 0, queued: 0, dropped: 0, expired: 0, duplicate: 0 };
      for (const runId of inputs) {
        const ends = outcome.get(runId) ?? [];
        assert.equal(ends.length, 1, `message ${runId} ended ${ends.length === 0 ? 'nowhere' : ends.join(' and ')} (seed ${seed})`);
        counts[ends[0]] += 1;
      }
      for (const runId of outcome.keys()) assert.ok(inputs.includes(runId), `an outcome for ${runId}, which was never sent`);
      assert.equal(Object.values(counts).reduce((a, b) => a + b, 0), inputs.length);
      t.diagnostic(`outcomes: ${JSON.stringify(counts)}`);
      assert.equal(counts.queued, 0, 'ingest waits until every queue it owns is drained');
      assert.ok(counts.duplicate > 0 && counts.delivered > 0, `the stream exercises several outcomes: ${JSON.stringify(counts)}`);
      // A dropped-at-admission result always comes with its dropped event.
      for (const result of results.filter((r) => r.disposition === 'dropped')) assert.deepEqual(outcome.get(result.runId), ['dropped']);
      assertStoreValid(env);
    });
  }
});

describe('case 23: debounce under continuous input', () => {
  test('a collect turn still fires by debounceMaxWaitMs although the sender never pauses for the quiet window', async () => {
    const env = queueEnv({
      session: { dmScope: 'per-peer' },
      agents: { defaults: { runner: { command: 'builtin:slow-echo', delayMs: 20, toolCalls: 1 } } },
      messages: { queue: { mode: 'collect', debounceMs: 600, debounceMaxWaitMs: 1500, cap: 1000 } },
    });
    const live = new LiveIngest(env);
    let collectTurn: any;
    void live.waitFor((e) => e.type === 'run_started' && e.messages > 1, 'a collect turn').then(
      (event) => (collectTurn = event),
      () => undefined,
    );
    const limit = 100;
    let sent = 0;
    // One message every 100 ms: a sixth of the quiet window, so the window alone never closes.
    while (collectTurn === undefined && sent < limit) {
      sent += 1;
      live.send(dm('alice', `msg ${sent}`, { runId: `c${sent}` }));
      await sleep(100);
    }
    assert.ok(collectTurn !== undefined, `no collect turn while ${limit} messages arrived without a pause:\n${live.events.filter((e) => e.type !== 'result').map((e) => JSON.stringify(e)).join('\n')}\n${live.stderr}`);
    assert.ok(sent < limit);
    await live.finish();
    // Nothing was lost on the way: every message is in a turn.
    const delivered = allTranscripts(env).flatMap(({ records }) => deliveredRunIds(records));
    assert.deepEqual(delivered.sort(), Array.from({ length: sent }, (_, i) => `c${i + 1}`).sort(), `state: ${env.state}`);
  });
});

describe('lanes', () => {
  function assertNoOverlap(log: string, expectedRuns: number): string[] {
    const lines = fs.readFileSync(log, 'utf8').trim().split('\n');
    assert.equal(lines.length, expectedRuns * 2, lines.join('\n'));
    const runs: string[] = [];
    for (let i = 0; i < lines.length; i += 2) {
      const [startWord, startId] = lines[i].split(' ');
      const [endWord, endId] = lines[i + 1].split(' ');
      assert.deepEqual([startWord, endWord, endId], ['start', 'end', startId], `runs overlap:\n${lines.join('\n')}`);
      runs.push(startId);
    }
    return runs;
  }

  test('maxConcurrent: 1 holds across two concurrent ingest processes', async () => {
    const env = queueEnv({ session: { dmScope: 'per-peer' }, agents: { defaults: { runner: queueRunner('log', { steering: false }), maxConcurrent: 1 } } });
    const [first, second] = await Promise.all([
      ingestAll(env, [dm('a1', 'x', { runId: 'a1' }), dm('a2', 'x', { runId: 'a2' }), dm('a3', 'x', { runId: 'a3' })]),
      ingestAll(env, [dm('b1', 'y', { runId: 'b1' }), dm('b2', 'y', { runId: 'b2' }), dm('b3', 'y', { runId: 'b3' })]),
    ]);
    assert.equal(first.code, 0, first.stderr);
    assert.equal(second.code, 0, second.stderr);
    assert.deepEqual(eventsOf(first.events, 'result').map((e) => e.disposition), ['started', 'started', 'started']);
    const runs = assertNoOverlap(env.log, 6);
    assert.deepEqual([...runs].sort(), ['a1', 'a2', 'a3', 'b1', 'b2', 'b3']);
    assert.equal(eventsOf(first.events, 'reply').length + eventsOf(second.events, 'reply').length, 6);
  });

  test('cron runs use their own lane (cron.maxConcurrent)', async () => {
    const env = queueEnv({ agents: { defaults: { runner: queueRunner('log', { steering: false }) } }, cron: { maxConcurrent: 1 } });
    const cron = (job: string) => ({ channel: 'cron', cron: { jobId: job }, text: `run ${job}`, runId: job });
    const r = await ingestAll(env, [cron('j1'), cron('j2'), cron('j3')]);
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(eventsOf(r.events, 'run_started').map((e) => e.lane), ['cron', 'cron', 'cron']);
    assert.deepEqual(assertNoOverlap(env.log, 3).sort(), ['j1', 'j2', 'j3']);
  });
});
