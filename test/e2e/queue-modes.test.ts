// Queue modes end to end with real `switchboard ingest` processes and builtin:slow-echo (or the
// queue-runner fixture): the events, and the exact order of each transcript.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import { after, describe, test } from 'node:test';
import {
  LiveIngest,
  WAIT_MS,
  assertStoreValid,
  dm,
  eventsOf,
  ingestAll,
  killLiveIngests,
  queueEnv,
  queueRunner,
  readStore,
  releaseHolds,
  shape,
  transcriptOf,
} from '../fixtures/queue-lib.js';
import { jsonLines, runCli } from '../helpers.js';
import { waitUntil } from '../fixtures/store-child-process.js';

function slowEcho(runner: Record<string, unknown> = {}, queue: Record<string, unknown> = {}, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    session: { dmScope: 'per-peer' },
    agents: { defaults: { runner: { command: 'builtin:slow-echo', delayMs: 100, toolCalls: 2, ...runner } } },
    messages: { queue: { debounceMs: 20, ...queue } },
    ...extra,
  };
}

after(killLiveIngests);

const KEY = 'agent:main:direct:alice';
const alice = (text: string, extra: Record<string, unknown> = {}) => dm('alice', text, extra);

describe('steer', () => {
  test('a message for a busy session is injected at the next boundary: tool_call → tool_result → steer → next assistant', async () => {
    const env = queueEnv(slowEcho());
    const r = await ingestAll(env, [alice('first'), alice('second')]);
    assert.equal(r.code, 0, r.stderr);
    const results = eventsOf(r.events, 'result');
    assert.deepEqual(results.map((e) => e.disposition), ['started', 'steered']);
    assert.equal(results[1].sessionId, results[0].sessionId);
    assert.equal(eventsOf(r.events, 'run_started').length, 1, 'one run took both messages');
    const replies = eventsOf(r.events, 'reply');
    assert.deepEqual(replies.map((e) => [e.runId, e.text, e.delivered]), [[results[0].runId, 'slow-echo: first\nsecond', true]]);
    assert.deepEqual(replies[0].policy, { decision: 'allow', rule: null });
    assert.deepEqual(replies[0].deliveryContext, { channel: 'telegram', to: 'telegram:alice', accountId: 'default' });
    const records = transcriptOf(env, KEY);
    assert.deepEqual(shape(records), [
      'user:first',
      'tool_call',
      'tool_result',
      'steer',
      'user:second',
      'tool_call',
      'tool_result',
      'assistant:slow-echo: first\nsecond',
      'mirror:slow-echo: first\nsecond',
    ]);
    const steer = records[4];
    assert.equal(steer.runId, results[0].runId);
    assert.deepEqual(steer.items, [{ runId: results[1].runId, messageId: null }]);
    assert.equal(records[5].message.runId, results[1].runId);
    assert.equal(records[2].toolCallId, records[3].toolCallId);
    assert.equal(readQueueLeft(env), 0);
    assertStoreValid(env);
  });

  test('steering reaches a run of another process (polled), at a boundary of that run', async () => {
    const env = queueEnv({ session: { dmScope: 'per-peer' }, agents: { defaults: { runner: queueRunner('gate') } }, messages: { queue: { debounceMs: 20 } } });
    const live = new LiveIngest(env);
    live.send(alice('first'));
    const started = await live.waitFor((e) => e.type === 'run_started', 'the first run');
    const other = await ingestAll(env, [alice('from elsewhere')]);
    assert.equal(other.code, 0, other.stderr);
    assert.deepEqual(eventsOf(other.events, 'result').map((e) => e.disposition), ['steered']);
    assert.deepEqual(eventsOf(other.events, 'run_started'), [], 'the other process starts no run');
    const reply = await live.waitFor((e) => e.type === 'reply', 'the reply');
    assert.equal(reply.runId, started.runId);
    assert.equal(reply.text, 'gate: first\nfrom elsewhere');
    await live.finish();
    assert.deepEqual(shape(transcriptOf(env, KEY)), [
      'user:first',
      'tool_call',
      'tool_result',
      'steer',
      'user:from elsewhere',
      'assistant:gate: first\nfrom elsewhere',
      'mirror:gate: first\nfrom elsewhere',
    ]);
    assertStoreValid(env);
  });

  test('steering from the same process reaches a run already in progress', async () => {
    const env = queueEnv({ session: { dmScope: 'per-peer' }, agents: { defaults: { runner: queueRunner('gate') } } });
    const live = new LiveIngest(env);
    live.send(alice('first'));
    await live.waitFor((e) => e.type === 'run_started', 'the run');
    live.send(alice('second'));
    assert.equal((await live.result(2)).disposition, 'steered');
    const reply = await live.waitFor((e) => e.type === 'reply', 'the reply');
    assert.equal(reply.text, 'gate: first\nsecond');
    await live.finish();
    assert.deepEqual(shape(transcriptOf(env, KEY)).slice(3, 5), ['steer', 'user:second']);
  });

  test('a runner that announced steering but closed its stdin does not get a message steered into it: the message runs as a followup', async () => {
    const env = queueEnv({ session: { dmScope: 'per-peer' }, agents: { defaults: { runner: queueRunner('deaf') } } });
    const boundaries = () => (fs.existsSync(env.log) ? fs.readFileSync(env.log, 'utf8').split('\n').length - 1 : 0);
    const live = new LiveIngest(env);
    live.send(alice('first'));
    const started = await live.waitFor((e) => e.type === 'run_started', 'the run');
    live.send(alice('second'));
    assert.equal((await live.result(2)).disposition, 'steered');
    // Once the run holds the parked message, a few boundaries pass: each one is where it would be
    // injected, and the line written to the runner's closed stdin fails.
    await waitUntil(() => (readStore(env)[KEY]?.queue ?? []).some((item: any) => item.leasedBy === started.runId), WAIT_MS, 'the run leases the message');
    const seen = boundaries();
    await waitUntil(() => boundaries() >= seen + 3, WAIT_MS, 'three more boundaries');
    releaseHolds(env);
    const replies = [await live.waitFor((e) => e.type === 'reply', 'the first reply'), await live.waitFor((e) => e.type === 'reply' && e.runId !== started.runId, 'the followup reply')];
    assert.deepEqual(replies.map((reply) => reply.text), ['deaf: first', 'deaf: second']);
    await live.finish();
    assert.deepEqual(shape(transcriptOf(env, KEY)), ['user:first', 'assistant:deaf: first', 'mirror:deaf: first', 'user:second', 'assistant:deaf: second', 'mirror:deaf: second']);
    assertStoreValid(env);
  });

  test('a runner that cannot steer (steering: false) gets steer messages as followups, one turn each, in order, and they are reported queued', async () => {
    const env = queueEnv(slowEcho({ steering: false, toolCalls: 1 }));
    const r = await ingestAll(env, [alice('one'), alice('two'), alice('three')]);
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(eventsOf(r.events, 'result').map((e) => e.disposition), ['started', 'queued', 'queued'], 'never "steered": nothing was injected');
    assert.deepEqual(eventsOf(r.events, 'reply').map((e) => e.text), ['slow-echo: one', 'slow-echo: two', 'slow-echo: three']);
    assert.deepEqual(shape(transcriptOf(env, KEY)), [
      'user:one', 'tool_call', 'tool_result', 'assistant:slow-echo: one', 'mirror:slow-echo: one',
      'user:two', 'tool_call', 'tool_result', 'assistant:slow-echo: two', 'mirror:slow-echo: two',
      'user:three', 'tool_call', 'tool_result', 'assistant:slow-echo: three', 'mirror:slow-echo: three',
    ]);
  });

  test('a run that ends before any boundary leaves the parked message to a followup turn', async () => {
    const env = queueEnv(slowEcho({ toolCalls: 0 }));
    const r = await ingestAll(env, [alice('one'), alice('two')]);
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(eventsOf(r.events, 'result').map((e) => e.disposition), ['started', 'steered']);
    assert.deepEqual(eventsOf(r.events, 'reply').map((e) => e.text), ['slow-echo: one', 'slow-echo: two']);
    assert.deepEqual(shape(transcriptOf(env, KEY)), ['user:one', 'assistant:slow-echo: one', 'mirror:slow-echo: one', 'user:two', 'assistant:slow-echo: two', 'mirror:slow-echo: two']);
  });
});

function readQueueLeft(env: ReturnType<typeof queueEnv>): number {
  const store = readStore(env) as Record<string, { queue?: unknown[]; activeRun?: unknown }>;
  return Object.values(store).reduce((n, entry) => n + (entry.queue?.length ?? 0) + (entry.activeRun ? 1 : 0), 0);
}

describe('followup', () => {
  test('held messages run after the active run, each as its own turn, FIFO', async () => {
    const env = queueEnv(slowEcho({ toolCalls: 1 }, { mode: 'followup' }));
    const r = await ingestAll(env, [alice('a'), alice('b'), alice('c')]);
    assert.equal(r.code, 0, r.stderr);
    const results = eventsOf(r.events, 'result');
    assert.deepEqual(results.map((e) => e.disposition), ['started', 'queued', 'queued']);
    assert.deepEqual(eventsOf(r.events, 'run_started').map((e) => e.runId), results.map((e) => e.runId));
    assert.deepEqual(eventsOf(r.events, 'reply').map((e) => [e.runId, e.text]), results.map((e, i) => [e.runId, `slow-echo: ${'abc'[i]}`]));
    assert.deepEqual(shape(transcriptOf(env, KEY)), [
      'user:a', 'tool_call', 'tool_result', 'assistant:slow-echo: a', 'mirror:slow-echo: a',
      'user:b', 'tool_call', 'tool_result', 'assistant:slow-echo: b', 'mirror:slow-echo: b',
      'user:c', 'tool_call', 'tool_result', 'assistant:slow-echo: c', 'mirror:slow-echo: c',
    ]);
    assertStoreValid(env);
  });
});

describe('a message\'s own queue settings', () => {
  test('cap and drop in the message field apply to that message (they were accepted and ignored); a bad cap is BAD_MESSAGE', async () => {
    const env = queueEnv(slowEcho({ toolCalls: 1 }, { mode: 'followup' }));
    const r = await ingestAll(env, [alice('a'), alice('b'), alice('c'), alice('d', { queue: { cap: 1, drop: 'new' } }), alice('e', { queue: { cap: 0 } })]);
    assert.equal(r.code, 65, r.stderr);
    const results = eventsOf(r.events, 'result');
    assert.deepEqual(results.map((e) => e.disposition), ['started', 'queued', 'queued', 'dropped']);
    assert.deepEqual(eventsOf(r.events, 'dropped').map((e) => [e.runId, e.reason]), [[results[3].runId, 'cap']]);
    const errors = eventsOf(r.events, 'error');
    assert.deepEqual(errors.map((e) => [e.line, e.code, e.path]), [[5, 'BAD_MESSAGE', 'queue.cap']]);
  });
});

describe('collect', () => {
  test('held messages run as ONE turn with the queue.md prompt; mixed senders carry no single sender', async () => {
    const env = queueEnv(slowEcho({ toolCalls: 1 }, { mode: 'collect' }));
    const from = (id: string, name: string, text: string) => ({ channel: 'telegram', peer: 'group:book-club', sender: { id, name }, text });
    const r = await ingestAll(env, [from('a', 'Alice', 'start'), from('a', 'Alice', 'one'), from('b', 'Bob', 'two'), from('a', 'Alice', 'three')]);
    assert.equal(r.code, 0, r.stderr);
    const results = eventsOf(r.events, 'result');
    assert.deepEqual(results.map((e) => e.disposition), ['started', 'collected', 'collected', 'collected']);
    const prompt = ['[Queued messages while agent was busy]', '---', 'Queued #1 (from Alice)', 'one', '---', 'Queued #2 (from Bob)', 'two', '---', 'Queued #3 (from Alice)', 'three'].join('\n');
    assert.deepEqual(eventsOf(r.events, 'reply').map((e) => e.text), ['slow-echo: start', `slow-echo: ${prompt}`]);
    const runs = eventsOf(r.events, 'run_started');
    assert.deepEqual(runs.map((e) => e.messages), [1, 3]);
    const records = transcriptOf(env, results[0].sessionKey);
    assert.deepEqual(shape(records), [
      'user:start', 'tool_call', 'tool_result', 'assistant:slow-echo: start', 'mirror:slow-echo: start',
      `user:${prompt}`, 'tool_call', 'tool_result', `assistant:slow-echo: ${prompt}`, `mirror:slow-echo: ${prompt}`,
    ]);
    const collected = records[6].message;
    assert.equal(collected.sender, undefined, 'no single sender identity');
    assert.deepEqual(collected.collected.map((c: { runId: string }) => c.runId), results.slice(1).map((e) => e.runId));
    assertStoreValid(env);
  });

  test('one turn per delivery route: messages that reply to different peers are collected apart', async () => {
    const env = queueEnv(slowEcho({ toolCalls: 0 }, { mode: 'collect' }, { session: { dmScope: 'main' } }));
    const from = (id: string, text: string) => ({ channel: 'telegram', peer: `direct:${id}`, sender: { id, name: id }, text });
    const r = await ingestAll(env, [from('a', 'start'), from('a', 'one'), from('b', 'two'), from('a', 'three')]);
    assert.equal(r.code, 0, r.stderr);
    const header = '[Queued messages while agent was busy]';
    assert.deepEqual(eventsOf(r.events, 'reply').map((e) => [e.text, e.deliveryContext.to]), [
      ['slow-echo: start', 'telegram:a'],
      [`slow-echo: ${header}\n---\nQueued #1 (from a)\none\n---\nQueued #2 (from a)\nthree`, 'telegram:a'],
      [`slow-echo: ${header}\n---\nQueued #1 (from b)\ntwo`, 'telegram:b'],
    ]);
  });

  test('a batch from one sender keeps that sender', async () => {
    const env = queueEnv(slowEcho({ toolCalls: 1 }, { mode: 'collect' }));
    const r = await ingestAll(env, [alice('start'), alice('one'), alice('two')]);
    assert.equal(r.code, 0, r.stderr);
    const records = transcriptOf(env, KEY);
    const turn = records.find((record) => record.type === 'message' && record.message.collected);
    assert.deepEqual(turn.message.sender, { id: 'alice', name: 'ALICE' });
  });
});

describe('interrupt', () => {
  test('aborts the active run; the newest message runs after it', async () => {
    const env = queueEnv(slowEcho({ toolCalls: 1 }));
    const r = await ingestAll(env, [alice('long job'), alice('never mind', { queue: { mode: 'interrupt' } })]);
    assert.equal(r.code, 0, r.stderr);
    const results = eventsOf(r.events, 'result');
    assert.deepEqual(results.map((e) => e.disposition), ['started', 'interrupted']);
    const failed = eventsOf(r.events, 'run_failed');
    assert.deepEqual(failed.map((e) => [e.runId, e.status, e.reason]), [[results[0].runId, 'aborted', 'aborted']]);
    assert.deepEqual(eventsOf(r.events, 'reply').map((e) => [e.runId, e.text]), [[results[1].runId, 'slow-echo: never mind']]);
    assert.deepEqual(shape(transcriptOf(env, KEY)), [
      'user:long job', 'custom:run_failed',
      'user:never mind', 'tool_call', 'tool_result', 'assistant:slow-echo: never mind', 'mirror:slow-echo: never mind',
    ]);
    assertStoreValid(env);
  });

  test('stop and do this instead: what was waiting is dropped (reported, reason interrupt) and the newest runs next', async () => {
    const env = queueEnv(slowEcho({ toolCalls: 1 }, { mode: 'followup' }));
    const r = await ingestAll(env, [alice('long job'), alice('later 1'), alice('later 2'), alice('do this instead', { queue: { mode: 'interrupt' } })]);
    assert.equal(r.code, 0, r.stderr);
    const results = eventsOf(r.events, 'result');
    assert.deepEqual(results.map((e) => e.disposition), ['started', 'queued', 'queued', 'interrupted']);
    const dropped = eventsOf(r.events, 'dropped');
    assert.deepEqual(dropped.map((e) => [e.runId, e.reason]), [[results[1].runId, 'interrupt'], [results[2].runId, 'interrupt']]);
    // Only the interrupting message runs after the aborted one; the superseded ones never do.
    assert.deepEqual(eventsOf(r.events, 'reply').map((e) => e.text), ['slow-echo: do this instead']);
    assertStoreValid(env);
  });

  test('reaches a run in progress (of this process) and stops it mid-tool', async () => {
    const env = queueEnv({ session: { dmScope: 'per-peer' }, agents: { defaults: { runner: queueRunner('hold') } }, messages: { queue: { mode: 'interrupt' } } });
    const live = new LiveIngest(env);
    live.send(alice('long job'));
    const first = await live.waitFor((e) => e.type === 'run_started', 'the first run');
    live.send(alice('stop that'));
    assert.equal((await live.result(2)).disposition, 'interrupted');
    const failed = await live.waitFor((e) => e.type === 'run_failed', 'the aborted run');
    assert.deepEqual([failed.runId, failed.status], [first.runId, 'aborted']);
    await live.waitFor((e) => e.type === 'run_started' && e.runId !== first.runId, 'the second run');
    releaseHolds(env);
    const reply = await live.waitFor((e) => e.type === 'reply', 'the reply');
    assert.equal(reply.text, 'hold: stop that');
    await live.finish();
    assert.deepEqual(shape(transcriptOf(env, KEY)), [
      'user:long job', 'tool_call', 'custom:run_failed',
      'user:stop that', 'tool_call', 'tool_result', 'assistant:hold: stop that', 'mirror:hold: stop that',
    ]);
  });
});

describe('session commands', () => {
  test('/queue stores the override and replies with the settings; /queue alone reports; invalid changes nothing', async () => {
    const env = queueEnv(slowEcho({ toolCalls: 0 }));
    const r = await ingestAll(env, [
      alice('/queue collect debounce:2s'),
      alice('/queue'),
      alice('/queue cap:0 drop:sideways'),
      alice('/queue followup tell me more'),
      alice('/queue reset'),
    ]);
    assert.equal(r.code, 0, r.stderr);
    const results = eventsOf(r.events, 'result');
    assert.deepEqual(results.map((e) => e.disposition), ['command', 'command', 'command', 'started', 'command']);
    const replies = eventsOf(r.events, 'reply');
    assert.deepEqual(replies.map((e) => e.text), [
      'Queue settings: mode collect · debounce 2s · cap 20 · drop summarize',
      'Queue settings: mode collect · debounce 2s · cap 20 · drop summarize',
      replies[2].text,
      // command replies come with the batch's results; the run's reply when the run has it
      'Queue settings: mode steer · debounce 20ms · cap 20 · drop summarize (session override cleared)',
      'slow-echo: tell me more',
    ]);
    assert.match(replies[2].text, /^Invalid \/queue directive: cap: "0" .*drop: "sideways".* Nothing was changed\.$/);
    assert.ok(replies.every((e) => e.delivered === true));
    const stored = readStore(env)[KEY];
    assert.equal(stored.queueMode, undefined);
    assert.equal(stored.queueDebounceMs, undefined);
    const conversation = shape(transcriptOf(env, KEY));
    assert.deepEqual(conversation.slice(0, 3), ['user:/queue collect debounce:2s', 'command:Queue settings: mode collect · debounce 2s · cap 20 · drop summarize', 'mirror:Queue settings: mode collect · debounce 2s · cap 20 · drop summarize']);
    assert.ok(conversation.includes('user:tell me more'), 'the directive is removed from a normal message');
    assertStoreValid(env);
  });

  test('the session override steers the mode of later messages', async () => {
    const env = queueEnv(slowEcho({ toolCalls: 1 }));
    const first = await ingestAll(env, [alice('/queue followup')]);
    assert.equal(first.code, 0, first.stderr);
    const r = await ingestAll(env, [alice('a'), alice('b')]);
    assert.deepEqual(eventsOf(r.events, 'result').map((e) => e.disposition), ['started', 'queued']);
  });

  test('/send off keeps replies from being delivered (recorded, not mirrored); /send inherit restores', async () => {
    const env = queueEnv(slowEcho({ toolCalls: 0 }));
    const off = await ingestAll(env, [alice('/send off'), alice('hello')]);
    assert.equal(off.code, 0, off.stderr);
    const [confirm, reply] = eventsOf(off.events, 'reply');
    assert.equal(confirm.text, 'Sending: off (deny, session override)');
    assert.equal(confirm.delivered, true, 'the confirmation goes out under the setting it replaces');
    assert.deepEqual([reply.text, reply.delivered, reply.policy], ['slow-echo: hello', false, { decision: 'deny', rule: null }]);
    const back = await ingestAll(env, [alice('/send inherit'), alice('again')]);
    const [, second] = eventsOf(back.events, 'reply');
    assert.deepEqual([second.text, second.delivered], ['slow-echo: again', true]);
    const conversation = shape(transcriptOf(env, KEY));
    assert.ok(conversation.includes('undelivered:slow-echo: hello'));
    assert.ok(!conversation.includes('mirror:slow-echo: hello'));
    assert.ok(conversation.includes('mirror:slow-echo: again'));
  });

  test('session.sendPolicy rules apply to replies: a matching deny names its rule', async () => {
    const env = queueEnv(slowEcho({ toolCalls: 0 }, {}, { session: { dmScope: 'per-peer', sendPolicy: { rules: [{ action: 'allow', match: { channel: 'slack' } }, { action: 'deny', match: { channel: 'telegram' } }] } } }));
    const r = await ingestAll(env, [alice('hi')]);
    const [reply] = eventsOf(r.events, 'reply');
    assert.deepEqual([reply.delivered, reply.policy], [false, { decision: 'deny', rule: 1 }]);
  });

  test('/stop cancels the queued messages first, then aborts the active run', async () => {
    const env = queueEnv({ session: { dmScope: 'per-peer' }, agents: { defaults: { runner: queueRunner('hold') } }, messages: { queue: { mode: 'followup' } } });
    const live = new LiveIngest(env);
    live.send(alice('job'), alice('waiting 1'), alice('waiting 2'));
    const started = await live.waitFor((e) => e.type === 'run_started', 'the run');
    const waiting = [await live.result(2), await live.result(3)];
    live.send(alice('/stop'));
    const stop = await live.result(4);
    assert.equal(stop.disposition, 'command');
    const dropped = await live.waitFor((e) => e.type === 'dropped' && e.runId === waiting[1].runId, 'the cancellations');
    assert.equal(dropped.reason, 'stopped');
    const failed = await live.waitFor((e) => e.type === 'run_failed', 'the aborted run');
    assert.equal(failed.runId, started.runId);
    await live.finish();
    assert.deepEqual(eventsOf(live.events, 'dropped').map((e) => e.runId), waiting.map((e) => e.runId));
    assert.deepEqual(eventsOf(live.events, 'run_started').map((e) => e.runId), [started.runId], 'nothing queued ran');
    const reply = eventsOf(live.events, 'reply').find((e) => e.runId === stop.runId);
    assert.equal(reply.text, `Stopped: 2 queued message(s) cancelled; run ${started.runId} aborted.`);
    // The command and its reply were written by the run's owner (it held the transcript).
    // (whether the runner's tool call was recorded before /stop arrived is a race of no interest here)
    const records = transcriptOf(env, KEY);
    assert.deepEqual(shape(records).filter((label) => label !== 'tool_call' && label !== 'custom:dropped'), ['user:job', 'user:/stop', `command:${reply.text}`, `mirror:${reply.text}`, 'custom:run_failed']);
    // Each cancelled message is recorded too, in the write that took it out (whenever the outbox is appended).
    const droppedRecords = records.filter((record) => record.type === 'custom' && record.customType === 'dropped');
    assert.deepEqual(droppedRecords.map((record: any) => [record.data.runId, record.data.reason]).sort(), waiting.map((e) => [e.runId, 'stopped']).sort());
    assertStoreValid(env);
  });
});

describe('cap and drop', () => {
  const capped = (drop: string) =>
    queueEnv({ session: { dmScope: 'per-peer' }, agents: { defaults: { runner: queueRunner('hold') } }, messages: { queue: { mode: 'followup', cap: 2, drop, debounceMs: 20 } } });

  async function fill(drop: string, count: number) {
    const env = capped(drop);
    const live = new LiveIngest(env);
    live.send(alice('active'));
    await live.waitFor((e) => e.type === 'run_started', 'the active run');
    for (let n = 1; n <= count; n++) live.send(alice(`m${n}`, { runId: `m${n}` }));
    for (let n = 2; n <= count + 1; n++) await live.result(n);
    return { env, live };
  }

  test('"new" rejects the incoming message and reports it', async () => {
    const { env, live } = await fill('new', 3);
    const results = eventsOf(live.events, 'result');
    assert.deepEqual(results.map((e) => e.disposition), ['started', 'queued', 'queued', 'dropped']);
    const dropped = await live.waitFor((e) => e.type === 'dropped', 'the dropped event');
    assert.deepEqual([dropped.runId, dropped.reason, dropped.drop, dropped.requester], ['m3', 'cap', 'new', 'alice']);
    releaseHolds(env);
    await live.finish();
    assert.deepEqual(eventsOf(live.events, 'reply').map((e) => e.text), ['hold: active', 'hold: m1', 'hold: m2']);
    // Its fate is on disk, as for every drop: a custom dropped record naming it.
    const records = transcriptOf(env, KEY).filter((r) => r.type === 'custom' && r.customType === 'dropped');
    assert.deepEqual(records.map((r) => [r.data.runId, r.data.reason, r.data.drop]), [['m3', 'cap', 'new']]);
  });

  test('"old" drops the oldest waiting message and reports it with its runId and requester', async () => {
    const { env, live } = await fill('old', 3);
    assert.deepEqual(eventsOf(live.events, 'result').map((e) => e.disposition), ['started', 'queued', 'queued', 'queued']);
    const dropped = await live.waitFor((e) => e.type === 'dropped', 'the dropped event');
    assert.deepEqual([dropped.runId, dropped.reason, dropped.drop, dropped.requester], ['m1', 'cap', 'old', 'alice']);
    releaseHolds(env);
    await live.finish();
    assert.deepEqual(eventsOf(live.events, 'reply').map((e) => e.text), ['hold: active', 'hold: m2', 'hold: m3']);
  });

  test('"summarize" drops the oldest but delivers a summary turn of them before the rest', async () => {
    const { env, live } = await fill('summarize', 4);
    assert.deepEqual(eventsOf(live.events, 'result').map((e) => e.disposition), ['started', 'queued', 'queued', 'queued', 'queued']);
    await live.waitFor((e) => e.type === 'dropped' && e.runId === 'm2', 'the second drop');
    releaseHolds(env);
    await live.finish();
    assert.deepEqual(eventsOf(live.events, 'dropped').map((e) => [e.runId, e.drop]), [['m1', 'summarize'], ['m2', 'summarize']]);
    const [overflow] = eventsOf(live.events, 'overflow');
    assert.deepEqual([overflow.dropped, overflow.summary, overflow.reason], [2, ['ALICE: m1', 'ALICE: m2'], 'cap']);
    const summary = '[Queue overflow] Dropped 2 messages due to cap.\nSummary:\n- ALICE: m1\n- ALICE: m2';
    assert.deepEqual(eventsOf(live.events, 'reply').map((e) => e.text), ['hold: active', `hold: ${summary}`, 'hold: m3', 'hold: m4']);
    const conversation = shape(transcriptOf(env, KEY));
    assert.deepEqual(conversation.filter((label) => label.startsWith('user:') || label === 'queue_overflow'), ['user:active', 'queue_overflow', 'user:m3', 'user:m4']);
    assertStoreValid(env);
  });
});

describe('send', () => {
  test('`switchboard send` with a runner waits for the run and prints its events', async () => {
    const env = queueEnv({ agents: { defaults: { runner: { command: 'builtin:echo' } } } });
    const r = await runCli(['send', 'ping', '--channel', 'telegram', '--peer', 'direct:alice', '--state-dir', env.state, '--config', env.config]);
    assert.equal(r.code, 0, r.stderr);
    const events = jsonLines(r.stdout);
    assert.deepEqual(events.map((e) => e.type), ['result', 'run_started', 'reply', 'run_ended']);
    assert.equal(events[2].text, 'echo: ping');
    assert.deepEqual(shape(transcriptOf(env, 'agent:main:main')), ['user:ping', 'assistant:echo: ping', 'mirror:echo: ping']);
  });
});

describe('heartbeats, system events and --no-wait', () => {
  test('heartbeat and system events never queue behind user work: dropped and reported when busy', async () => {
    const env = queueEnv(slowEcho({ toolCalls: 1 }));
    const r = await ingestAll(env, [
      alice('work'),
      { channel: 'telegram', peer: 'direct:alice', kind: 'heartbeat' },
      { channel: 'telegram', peer: 'direct:alice', kind: 'system', text: 'went offline' },
      { channel: 'telegram', peer: 'direct:bob', kind: 'heartbeat' },
      { channel: 'telegram', peer: 'direct:carol', kind: 'system', text: 'joined' },
    ]);
    assert.equal(r.code, 0, r.stderr);
    const results = eventsOf(r.events, 'result');
    assert.deepEqual(results.map((e) => e.disposition), ['started', 'dropped', 'dropped', 'started', 'recorded']);
    assert.deepEqual(eventsOf(r.events, 'dropped').map((e) => [e.runId, e.reason]), [[results[1].runId, 'busy'], [results[2].runId, 'busy']]);
    assert.deepEqual(eventsOf(r.events, 'reply').map((e) => e.text).sort(), ['slow-echo: [heartbeat]', 'slow-echo: work']);
    assert.deepEqual(shape(transcriptOf(env, 'agent:main:direct:carol')), ['custom:system']);
  });

  test('--no-wait records and queues; the next ingest runs what waits', async () => {
    const env = queueEnv(slowEcho({ toolCalls: 0 }));
    const first = await ingestAll(env, [alice('later please')], ['--no-wait']);
    assert.equal(first.code, 0, first.stderr);
    assert.deepEqual(eventsOf(first.events, 'result').map((e) => e.disposition), ['queued']);
    assert.deepEqual(eventsOf(first.events, 'run_started'), []);
    const next = await ingestAll(env, []);
    assert.equal(next.code, 0, next.stderr);
    assert.deepEqual(eventsOf(next.events, 'reply').map((e) => e.text), ['slow-echo: later please']);
    assert.deepEqual(shape(transcriptOf(env, KEY)), ['user:later please', 'assistant:slow-echo: later please', 'mirror:slow-echo: later please']);
  });
});
