// The planner's in-place mode (editInPlace: the caller's own copy of the entry is edited instead
// of copied again) must plan exactly what the copying mode plans.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { planSessionMessage, type PlanMessage, type PlannedEntry, type SessionPlan } from '../../src/policy/index.js';

const message = (over: Partial<PlanMessage>): PlanMessage => ({ kind: 'user', text: 'hi', channel: 'telegram', accountId: 'default', peer: { kind: 'direct', id: '111' }, sender: { id: '111', name: 'Alice' }, ...over });

const SEQUENCE: PlanMessage[] = [
  message({ messageId: 'a' }),
  message({ messageId: 'b', text: 'second' }),
  message({ messageId: 'a' }), // duplicate
  message({ kind: 'heartbeat', text: undefined }),
  message({ messageId: 'c', sender: { id: '111', name: 'Alice B.' }, threadId: 't1' }),
  message({ messageId: 'd', text: '/new gpt-5' }), // rotation (and a model): a new object
  message({ messageId: 'e', peer: { kind: 'direct', id: '222' } }),
  message({ kind: 'cron', messageId: 'f' }), // rotation
  message({ messageId: 'g' }),
];

function planAll(editInPlace: boolean): { plans: SessionPlan[]; entry: PlannedEntry | undefined; texts: string[] } {
  let n = 0;
  let now = 1_000;
  let entry: PlannedEntry | undefined;
  const own = new Set<object>();
  const plans: SessionPlan[] = [];
  const texts: string[] = [];
  for (const m of SEQUENCE) {
    now += 1_000;
    const ctx = { sessionKey: 'agent:main:main', session: undefined, now, newSessionId: () => `s-${++n}`, transcriptName: (id: string) => `${id}.jsonl` };
    const plan = planSessionMessage(entry, m, ctx, editInPlace && entry !== undefined && own.has(entry));
    plans.push(plan);
    texts.push(JSON.stringify(plan.entry));
    if (!plan.duplicate) {
      entry = plan.entry;
      own.add(entry);
    }
  }
  return { plans, entry, texts };
}

test('planning in place gives the entries, in the same key order, and the plans that copying gives', () => {
  const copied = planAll(false);
  const inPlace = planAll(true);
  assert.equal(JSON.stringify(inPlace.entry), JSON.stringify(copied.entry));
  assert.deepEqual(
    inPlace.plans.map((p) => [p.entry.sessionId, p.rotation, p.created, p.duplicate, p.text, p.commandOnly, p.replyTo]),
    copied.plans.map((p) => [p.entry.sessionId, p.rotation, p.created, p.duplicate, p.text, p.commandOnly, p.replyTo]),
  );
  // Each plan's entry right after it was made is the same in both modes.
  assert.deepEqual(inPlace.texts, copied.texts);
});

test('in place, a message that starts a new instance leaves the entry the earlier messages planned as it was', () => {
  const inPlace = planAll(true);
  const beforeReset = inPlace.plans[4]!.entry;
  const reset = inPlace.plans[5]!;
  assert.ok(reset.rotation);
  assert.notEqual(reset.entry, beforeReset);
  assert.equal(beforeReset.model, undefined, 'the /new model lands on the new instance only');
  assert.equal(reset.entry.model, 'gpt-5');
  assert.equal(beforeReset.sessionId, inPlace.plans[0]!.entry.sessionId);
  // Without editInPlace the planner never edits what it was given.
  const given: PlannedEntry = { sessionId: 'x', updatedAt: 1, sessionStartedAt: 1, lastInteractionAt: 1 };
  const text = JSON.stringify(given);
  planSessionMessage(given, message({ messageId: 'z' }), { sessionKey: 'agent:main:main', session: undefined, now: 2_000, newSessionId: () => 'n', transcriptName: (id: string) => `${id}.jsonl` });
  assert.equal(JSON.stringify(given), text);
});
