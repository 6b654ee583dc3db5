// Tests of the pure queue decisions: admission per mode on idle and busy sessions, FIFO, cap and
// every drop policy, the next turn and its quiet window, rebind splits, prompt shapes, commands.

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  COLLECT_HEADER,
  SUMMARY_MAX_CHARS,
  collectPrompt,
  enqueueItem,
  orphanItems,
  overflowPrompt,
  parkedPrefix,
  parseControlCommand,
  planAdmission,
  planNextTurn,
  singleSender,
  splitByInstance,
  summaryLine,
  unparkAll,
  waitingItems,
  type AdmissionInput,
  type QueueItem,
} from '../../src/policy/index.js';

let counter = 0;
function item(overrides: Partial<QueueItem> = {}): QueueItem {
  counter += 1;
  return {
    runId: `r${counter}`,
    requester: 'u1',
    sessionKey: 'agent:main:main',
    sessionId: 's1',
    enqueuedAt: 1000 + counter,
    wallAt: 1000 + counter,
    mode: 'followup',
    state: 'queued',
    kind: 'user',
    text: `text ${counter}`,
    sender: { id: 'u1', name: 'Alice' },
    channel: 'telegram',
    deliveryContext: { channel: 'telegram', to: '1' },
    debounceMs: 100,
    maxWaitMs: 1000,
    ...overrides,
  };
}

function input(overrides: Partial<AdmissionInput> = {}): AdmissionInput {
  return { kind: 'user', mode: 'steer', cap: 20, dropPolicy: 'summarize', activeRun: false, queue: [], pendingReset: false, resetTrigger: false, canStart: true, ...overrides };
}

describe('planAdmission', () => {
  it('runs a message for an idle session at once, whatever the mode', () => {
    for (const mode of ['steer', 'followup', 'collect', 'interrupt'] as const) {
      assert.deepEqual(planAdmission(input({ mode })), { action: 'start' }, mode);
    }
    assert.deepEqual(planAdmission(input({ kind: 'cron' })), { action: 'start' });
    assert.deepEqual(planAdmission(input({ kind: 'heartbeat' })), { action: 'start' });
    assert.deepEqual(planAdmission(input({ kind: 'system' })), { action: 'record' });
  });

  it('maps each mode of a busy session to its disposition', () => {
    const busy = { activeRun: true };
    assert.deepEqual(planAdmission(input({ ...busy, mode: 'steer' })), { action: 'enqueue', state: 'parked', disposition: 'steered', abortActive: false });
    assert.deepEqual(planAdmission(input({ ...busy, mode: 'followup' })), { action: 'enqueue', state: 'queued', disposition: 'queued', abortActive: false });
    assert.deepEqual(planAdmission(input({ ...busy, mode: 'collect' })), { action: 'enqueue', state: 'queued', disposition: 'collected', abortActive: false });
    assert.deepEqual(planAdmission(input({ ...busy, mode: 'interrupt' })), { action: 'enqueue', state: 'queued', disposition: 'interrupted', abortActive: true });
  });

  it('never lets a message overtake waiting ones: a waiting item makes the session busy', () => {
    const waiting = [item()];
    assert.equal(planAdmission(input({ queue: waiting, mode: 'followup' })).action, 'enqueue');
    // steer behind a held followup is not parked (it would be injected before the followup ran)
    assert.deepEqual(planAdmission(input({ activeRun: true, queue: waiting, mode: 'steer' })), { action: 'enqueue', state: 'queued', disposition: 'queued', abortActive: false });
    // behind parked items it is parked too
    assert.equal((planAdmission(input({ activeRun: true, queue: [item({ state: 'parked' })], mode: 'steer' })) as { state: string }).state, 'parked');
    // interrupt aborts the active run but still queues behind what waits
    assert.deepEqual(planAdmission(input({ activeRun: true, queue: waiting, mode: 'interrupt' })), { action: 'enqueue', state: 'queued', disposition: 'interrupted', abortActive: true });
    // with waiting items but no active run there is nothing to abort or steer into
    assert.deepEqual(planAdmission(input({ queue: waiting, mode: 'interrupt' })), { action: 'enqueue', state: 'queued', disposition: 'queued', abortActive: false });
    assert.deepEqual(planAdmission(input({ queue: waiting, mode: 'steer' })), { action: 'enqueue', state: 'queued', disposition: 'queued', abortActive: false });
  });

  it('drops heartbeats and system events on a busy session', () => {
    for (const kind of ['heartbeat', 'system'] as const) {
      assert.deepEqual(planAdmission(input({ kind, activeRun: true })), { action: 'drop', reason: 'busy' });
      assert.deepEqual(planAdmission(input({ kind, queue: [item()] })), { action: 'drop', reason: 'busy' });
      assert.deepEqual(planAdmission(input({ kind, pendingReset: true })), { action: 'drop', reason: 'busy' });
    }
  });

  it('a reset trigger on a busy session interrupts', () => {
    assert.deepEqual(planAdmission(input({ activeRun: true, pendingReset: true, resetTrigger: true, mode: 'collect' })), {
      action: 'enqueue',
      state: 'queued',
      disposition: 'interrupted',
      abortActive: true,
    });
  });

  it('a pending rotation keeps the session busy and steering off', () => {
    assert.deepEqual(planAdmission(input({ activeRun: true, pendingReset: true, mode: 'steer' })), { action: 'enqueue', state: 'queued', disposition: 'queued', abortActive: false });
    assert.equal(planAdmission(input({ pendingReset: true })).action, 'enqueue');
  });

  it('rejects at the cap only with drop "new"; the overflow item does not count', () => {
    const full = [item(), item()];
    assert.deepEqual(planAdmission(input({ activeRun: true, queue: full, cap: 2, dropPolicy: 'new' })), { action: 'reject', reason: 'cap' });
    assert.equal(planAdmission(input({ activeRun: true, queue: full, cap: 2, dropPolicy: 'old', mode: 'followup' })).action, 'enqueue');
    const withOverflow = [item({ kind: 'overflow' }), item()];
    assert.equal(planAdmission(input({ activeRun: true, queue: withOverflow, cap: 2, dropPolicy: 'new', mode: 'followup' })).action, 'enqueue');
  });

  it('without permission to start (--no-wait) idle work waits in the queue', () => {
    assert.deepEqual(planAdmission(input({ canStart: false })), { action: 'enqueue', state: 'queued', disposition: 'queued', abortActive: false });
    assert.deepEqual(planAdmission(input({ canStart: false, kind: 'system' })), { action: 'record' });
  });
});

describe('enqueueItem and the cap', () => {
  const settings = (dropPolicy: 'old' | 'new' | 'summarize', cap = 2) => ({ cap, dropPolicy });
  let ids = 0;
  const newId = () => `overflow-${++ids}`;

  it('appends below the cap', () => {
    const a = item();
    const b = item();
    const { queue, dropped } = enqueueItem([a], b, settings('old'), newId);
    assert.deepEqual(queue.map((i) => i.runId), [a.runId, b.runId]);
    assert.deepEqual(dropped, []);
  });

  it('"old" drops the oldest waiting item and reports it', () => {
    const [a, b, c] = [item(), item(), item()];
    const { queue, dropped } = enqueueItem([a, b], c, settings('old'), newId);
    assert.deepEqual(queue.map((i) => i.runId), [b.runId, c.runId]);
    assert.deepEqual(dropped.map((d) => [d.item.runId, d.reason, d.drop]), [[a.runId, 'cap', 'old']]);
  });

  it('"summarize" drops the oldest and keeps one summary line each in an overflow item at the head', () => {
    const [a, b, c, d] = [item({ text: 'first' }), item({ text: 'second' }), item({ text: 'third' }), item({ text: 'fourth' })];
    const once = enqueueItem([a, b], c, settings('summarize'), newId);
    assert.deepEqual(once.queue.map((i) => i.kind), ['overflow', 'user', 'user']);
    assert.deepEqual(once.dropped.map((x) => x.item.runId), [a.runId]);
    const twice = enqueueItem(once.queue, d, settings('summarize'), newId);
    const overflow = twice.queue[0];
    assert.equal(overflow.kind, 'overflow');
    assert.equal(overflow.runId, once.queue[0].runId, 'the same summary item collects every drop');
    assert.equal(overflow.dropped, 2);
    assert.deepEqual(overflow.summaries, ['Alice: first', 'Alice: second']);
    assert.equal(overflow.text, '[Queue overflow] Dropped 2 messages due to cap.\nSummary:\n- Alice: first\n- Alice: second');
    assert.deepEqual(twice.queue.slice(1).map((i) => i.runId), [c.runId, d.runId]);
    assert.equal(once.queue[0].dropped, 1, 'the earlier queue is not changed in place');
  });

  it('never drops an item the active run has leased; with nothing else to drop it rejects the incoming one', () => {
    const leased = item({ state: 'parked', leasedBy: 'run-1' });
    const free = item();
    const incoming = item();
    const made = enqueueItem([leased, free], incoming, settings('old'), newId);
    assert.deepEqual(made.dropped.map((d) => d.item.runId), [free.runId]);
    assert.deepEqual(made.queue.map((i) => i.runId), [leased.runId, incoming.runId]);
    const blocked = enqueueItem([leased, item({ state: 'parked', leasedBy: 'run-1' })], item(), settings('summarize'), newId);
    assert.equal(blocked.rejected, true);
    assert.equal(blocked.queue.length, 2);
    assert.deepEqual(blocked.dropped, []);
    assert.deepEqual(unparkAll([leased]).map((i) => [i.state, i.leasedBy]), [['queued', undefined]]);
  });

  it('a summary line is one line of at most 160 characters', () => {
    const line = summaryLine(item({ text: `multi\nline\t${'x'.repeat(400)}` }));
    assert.ok(line.length <= SUMMARY_MAX_CHARS);
    assert.ok(!line.includes('\n'));
    assert.ok(line.startsWith('Alice: multi line x'));
    assert.equal(overflowPrompt(1, ['a']), '[Queue overflow] Dropped 1 message due to cap.\nSummary:\n- a');
  });
});

describe('planNextTurn', () => {
  it('is empty for an empty queue', () => {
    assert.deepEqual(planNextTurn([], 0), { kind: 'empty' });
  });

  it('waits for the quiet window after the latest enqueue', () => {
    const a = item({ wallAt: 1000, debounceMs: 100 });
    const b = item({ wallAt: 1050, debounceMs: 200 });
    assert.deepEqual(planNextTurn([a, b], 1100), { kind: 'wait', untilWall: 1250 });
    const turn = planNextTurn([a, b], 1250);
    assert.equal(turn.kind, 'turn');
    assert.deepEqual(turn.kind === 'turn' && turn.items.map((i) => i.runId), [a.runId]);
  });

  it('is bounded by maxWaitMs from the oldest waiting item under continuous input', () => {
    // A message every 50 ms since 1000: what has arrived by the time of each look.
    const items = (until: number) => Array.from({ length: (until - 1000) / 50 + 1 }, (_, n) => item({ wallAt: 1000 + n * 50, debounceMs: 300, maxWaitMs: 600 }));
    // The quiet window would end at 1500 + 300, the bound at 1000 + 600.
    assert.deepEqual(planNextTurn(items(1500), 1500), { kind: 'wait', untilWall: 1600 });
    assert.equal(planNextTurn(items(1600), 1600).kind, 'turn');
  });

  it('an item stamped after now (the wall clock was stepped back) has waited long enough: it is not held until the clock catches up', () => {
    const hourAhead = 1000 + 3_600_000;
    assert.equal(planNextTurn([item({ wallAt: hourAhead, debounceMs: 300, maxWaitMs: 600 })], 1000).kind, 'turn');
    // Behind an item stamped before now, too: the latest enqueue is the one that cannot be measured.
    assert.equal(planNextTurn([item({ wallAt: 900, debounceMs: 300, maxWaitMs: 600 }), item({ wallAt: hourAhead, debounceMs: 300, maxWaitMs: 600 })], 1000).kind, 'turn');
    // A stamp at now is an ordinary quiet window.
    assert.deepEqual(planNextTurn([item({ wallAt: 1000, debounceMs: 300, maxWaitMs: 600 })], 1000), { kind: 'wait', untilWall: 1300 });
  });

  it('right after a summary turn a ready regular turn goes first, so summaries cannot starve the queue', () => {
    const overflow = item({ kind: 'overflow' });
    const waiting = item({ wallAt: 0, debounceMs: 0 });
    const after = planNextTurn([overflow, waiting], 1e9, { afterOverflow: true });
    assert.equal(after.kind === 'turn' && after.items[0].runId, waiting.runId);
    assert.deepEqual(after.kind === 'turn' && after.rest.map((i) => i.runId), [overflow.runId]);
    // Without a ready regular turn the summary goes.
    const notReady = planNextTurn([overflow, item({ wallAt: 1e9, debounceMs: 100 })], 1e9, { afterOverflow: true });
    assert.equal(notReady.kind === 'turn' && notReady.shape, 'overflow');
  });

  it('runs the overflow summary and interrupting messages at once', () => {
    const overflow = item({ kind: 'overflow', wallAt: 5000 });
    assert.equal(planNextTurn([overflow, item({ wallAt: 5000 })], 0).kind, 'turn');
    assert.equal(planNextTurn([item({ mode: 'interrupt', wallAt: 5000 })], 0).kind, 'turn');
  });

  it('collect takes every collect item of the head\'s route from the run at the head, in order', () => {
    const tg = { channel: 'telegram', to: '1' };
    const slack = { channel: 'slack', to: 'U1' };
    const a = item({ mode: 'collect', deliveryContext: tg });
    const b = item({ mode: 'collect', deliveryContext: slack });
    const c = item({ mode: 'collect', deliveryContext: tg });
    const d = item({ mode: 'followup', deliveryContext: tg });
    const e = item({ mode: 'collect', deliveryContext: tg });
    const turn = planNextTurn([a, b, c, d, e], 1e9);
    assert.equal(turn.kind, 'turn');
    if (turn.kind !== 'turn') return;
    assert.equal(turn.shape, 'collect');
    assert.deepEqual(turn.items.map((i) => i.runId), [a.runId, c.runId]);
    assert.deepEqual(turn.rest.map((i) => i.runId), [b.runId, d.runId, e.runId]);
  });

  it('a parked item that missed its run is a turn of its own', () => {
    const parked = item({ mode: 'steer', state: 'parked' });
    const turn = planNextTurn([parked, item()], 1e9);
    assert.equal(turn.kind === 'turn' && turn.shape, 'single');
  });
});

describe('instances, parking and prompts', () => {
  it('splits off items pinned to a rotated instance; items pinned to the pending one stay', () => {
    const old = item({ sessionId: 'old' });
    const current = item({ sessionId: 'cur' });
    const next = item({ sessionId: 'next' });
    const { keep, expired } = splitByInstance([old, current, next], 'cur', 'next');
    assert.deepEqual(keep.map((i) => i.runId), [current.runId, next.runId]);
    assert.deepEqual(expired.map((i) => i.runId), [old.runId]);
  });

  it('the parked prefix stops at the first item that is not parked for this instance', () => {
    const p1 = item({ state: 'parked' });
    const p2 = item({ state: 'parked' });
    const q = item();
    const p3 = item({ state: 'parked' });
    assert.deepEqual(parkedPrefix([p1, p2, q, p3], 's1').map((i) => i.runId), [p1.runId, p2.runId]);
    assert.deepEqual(parkedPrefix([item({ state: 'parked', sessionId: 'other' })], 's1'), []);
    assert.deepEqual(unparkAll([p1, q]).map((i) => i.state), ['queued', 'queued']);
  });

  it('builds the collect prompt exactly as queue.md shows it', () => {
    const prompt = collectPrompt([item({ text: 'one', sender: { name: 'Alice' } }), item({ text: 'two\nlines', sender: { id: 'bob' } })]);
    assert.equal(prompt, [COLLECT_HEADER, '---', 'Queued #1 (from Alice)', 'one', '---', 'Queued #2 (from bob)', 'two\nlines'].join('\n'));
  });

  it('a batch from different senders carries no single sender', () => {
    assert.deepEqual(singleSender([item({ sender: { id: 'a', name: 'A' } }), item({ sender: { id: 'a', name: 'A' } })]), { id: 'a', name: 'A' });
    assert.equal(singleSender([item({ sender: { id: 'a' } }), item({ sender: { id: 'b' } })]), undefined);
  });
});

describe('claims: a turn\'s items stay queued until recorded', () => {
  it('a claim left by a dead run is the next turn, at once and as it was', () => {
    const a = item({ mode: 'collect', claimedBy: 'X', wallAt: 5000, debounceMs: 10_000 });
    const other = item({ mode: 'followup' });
    const b = item({ mode: 'collect', claimedBy: 'X' });
    const newer = item({ mode: 'collect' });
    const plan = planNextTurn([a, other, b, newer], 5001);
    assert.equal(plan.kind, 'turn');
    if (plan.kind !== 'turn') return;
    assert.equal(plan.shape, 'collect');
    assert.deepEqual(plan.items, [a, b], 'only the claimed items: a newer collect item does not join');
    assert.deepEqual(plan.rest, [other, newer]);
  });

  it('claimed items do not count against the cap and are never dropped for room', () => {
    const claimed = item({ claimedBy: 'X' });
    const waiting = item();
    assert.deepEqual(waitingItems([claimed, waiting]), [waiting]);
    const next = enqueueItem([claimed, waiting], item(), { cap: 1, dropPolicy: 'old' }, () => 'ov');
    assert.deepEqual(next.dropped.map((d) => d.item), [waiting]);
    assert.ok(next.queue.includes(claimed));
  });

  it('a claimed head does not stop parking or the parked prefix behind it', () => {
    const claimed = item({ claimedBy: 'X' });
    const parked = item({ state: 'parked', mode: 'steer' });
    assert.deepEqual(parkedPrefix([claimed, parked], 's1'), [parked]);
    const base: AdmissionInput = { kind: 'user', mode: 'steer', cap: 20, dropPolicy: 'old', activeRun: true, queue: [claimed], pendingReset: false, resetTrigger: false, canStart: true };
    assert.deepEqual(planAdmission(base), { action: 'enqueue', state: 'parked', disposition: 'steered', abortActive: false });
  });

  it('orphanItems: the dead run\'s claims stay claimed, its leases become followups, both marked', () => {
    const claimed = item({ claimedBy: 'X' });
    const leased = item({ state: 'parked', leasedBy: 'X' });
    const parked = item({ state: 'parked' });
    const result = orphanItems([claimed, leased, parked], 'X');
    assert.deepEqual([result.claimed, result.unparked], [1, 2]);
    assert.deepEqual(
      result.queue.map((q) => [q.runId, q.state, q.claimedBy, q.leasedBy, q.orphanedFrom]),
      [
        [claimed.runId, 'queued', 'X', undefined, 'X'],
        [leased.runId, 'queued', undefined, undefined, 'X'],
        [parked.runId, 'queued', undefined, undefined, undefined],
      ],
    );
  });
});

describe('parseControlCommand', () => {
  it('knows /stop and /send with its values, case-insensitive', () => {
    assert.deepEqual(parseControlCommand('/stop'), { kind: 'stop' });
    assert.deepEqual(parseControlCommand('  /STOP please'), { kind: 'stop' });
    assert.deepEqual(parseControlCommand('/send'), { kind: 'send' });
    assert.deepEqual(parseControlCommand('/send on'), { kind: 'send', value: 'allow' });
    assert.deepEqual(parseControlCommand('/send OFF'), { kind: 'send', value: 'deny' });
    assert.deepEqual(parseControlCommand('/send inherit'), { kind: 'send', value: 'inherit' });
    assert.deepEqual(parseControlCommand('/send maybe'), { kind: 'send-invalid', argument: 'maybe' });
    assert.deepEqual(parseControlCommand('/send __proto__'), { kind: 'send-invalid', argument: '__proto__' });
    assert.deepEqual(parseControlCommand('/send on now'), { kind: 'send-invalid', argument: 'on now' });
  });

  it('anything else is not a command', () => {
    for (const text of ['hello', '/stopped', 'please /stop', '/sender on', '', undefined]) assert.equal(parseControlCommand(text), null, String(text));
  });
});
