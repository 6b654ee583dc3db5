// The pure rules behind issue 13 items 7, 10 and 11: the shared-DM warning, usage reports on an
// entry, and labels/lineage from messages — and how the session planner applies them.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  DM_SENDERS_KEPT,
  applyMessageLabels,
  applyUsageReport,
  carryOverToNewInstance,
  noteDmSender,
  planSessionMessage,
  sharedDmWarning,
  type PlanMessage,
} from '../../src/policy/index.js';

const dm = (channel: string, id: string, name?: string): PlanMessage => ({ kind: 'user', text: 'hi', channel, accountId: 'default', peer: { kind: 'direct', id }, sender: { id, ...(name ? { name } : {}) } });
let n = 0;
const ctx = (sessionKey: string, now = 1000) => ({ sessionKey, session: undefined, now, newSessionId: () => `s-${++n}`, transcriptName: (id: string) => `${id}.jsonl` });

describe('sharedDmWarning', () => {
  const two = [{ channel: 'telegram', id: '111', name: 'Alice' }, { channel: 'slack', id: 'U9' }];
  test('dmScope main with two senders warns, naming both and the fix', () => {
    const w = sharedDmWarning({ dmScope: 'main', sessionKey: 'agent:main:main', senders: two });
    assert.ok(w !== null);
    assert.equal(w.senders.length, 2);
    assert.match(w.message, /Alice \(telegram:111\), slack:U9/);
    assert.match(w.message, /"per-peer".*"per-channel-peer"/);
  });
  test('an unset dmScope is main', () => assert.notEqual(sharedDmWarning({ dmScope: undefined, sessionKey: 'k', senders: two }), null));
  test('other scopes, one sender, repeats of one sender and junk never warn', () => {
    for (const dmScope of ['per-peer', 'per-channel-peer', 'per-account-channel-peer']) assert.equal(sharedDmWarning({ dmScope, sessionKey: 'k', senders: two }), null);
    assert.equal(sharedDmWarning({ dmScope: 'main', sessionKey: 'k', senders: [two[0]] }), null);
    assert.equal(sharedDmWarning({ dmScope: 'main', sessionKey: 'k', senders: [two[0], { ...two[0], name: 'A.' }] }), null);
    assert.equal(sharedDmWarning({ dmScope: 'main', sessionKey: 'k', senders: 'x' }), null);
    assert.equal(sharedDmWarning({ dmScope: 'main', sessionKey: 'k', senders: [null, { channel: 1 }, two[0]] }), null);
  });
  test('a full list says "at least"', () => {
    const many = Array.from({ length: DM_SENDERS_KEPT }, (_, i) => ({ channel: 'telegram', id: String(i) }));
    assert.match(sharedDmWarning({ dmScope: 'main', sessionKey: 'k', senders: many })!.message, new RegExp(`at least ${DM_SENDERS_KEPT} DM senders`));
  });
});

describe('noteDmSender', () => {
  test('kept on a key without a direct peer of its own, once per channel and id, up to the cap', () => {
    const entry: Record<string, unknown> = {};
    noteDmSender(entry, dm('telegram', '111', 'Alice'), 'agent:main:main');
    noteDmSender(entry, dm('telegram', '111', 'Alice'), 'agent:main:main');
    noteDmSender(entry, dm('slack', '111'), 'agent:main:main');
    assert.deepEqual(entry.dmSenders, [{ channel: 'telegram', id: '111', name: 'Alice' }, { channel: 'slack', id: '111' }]);
    for (let i = 0; i < 20; i++) noteDmSender(entry, dm('x', String(i)), 'agent:main:main');
    assert.equal((entry.dmSenders as unknown[]).length, DM_SENDERS_KEPT);
  });
  test('never on a per-peer key, for groups, or for heartbeats', () => {
    const entry: Record<string, unknown> = {};
    noteDmSender(entry, dm('telegram', '111'), 'agent:main:direct:alice');
    noteDmSender(entry, dm('telegram', '111'), 'agent:main:telegram:direct:111');
    noteDmSender(entry, { ...dm('telegram', '111'), peer: { kind: 'group', id: 'g' } }, 'agent:main:main');
    noteDmSender(entry, { ...dm('telegram', '111'), kind: 'heartbeat' }, 'agent:main:main');
    assert.equal(entry.dmSenders, undefined);
  });
});

describe('usage reports', () => {
  test('latest report wins, totalTokens is fresh, left-out fields are kept', () => {
    const entry: Record<string, unknown> = { sessionId: 's', updatedAt: 1, model: 'old' };
    assert.equal(applyUsageReport(entry, { model: 'gpt-5', provider: 'openai', inputTokens: 10, outputTokens: 2, totalTokens: 900, contextTokens: 200000 }), true);
    assert.equal(applyUsageReport(entry, { totalTokens: 1200 }), true);
    assert.deepEqual(entry, { sessionId: 's', updatedAt: 1, model: 'gpt-5', modelProvider: 'openai', inputTokens: 10, outputTokens: 2, totalTokens: 1200, totalTokensFresh: true, contextTokens: 200000 });
    assert.equal(applyUsageReport(entry, { totalTokens: 1200 }), false, 'nothing changed');
    carryOverToNewInstance(entry, { sessionKey: 'agent:main:main', reason: 'command', sessionId: 'next' });
    assert.deepEqual(entry, { sessionId: 's', updatedAt: 1, inputTokens: 0, outputTokens: 0, totalTokens: 0, totalTokensFresh: true, totalTokensVersion: 1 }, 'a new instance starts with nothing used yet, without the old one\'s model and window');
  });
  test('a rotation by the planner starts the new instance\'s counts again at 0', () => {
    const existing = { sessionId: 'old', updatedAt: 1, sessionStartedAt: 1, model: 'gpt-5', inputTokens: 5, outputTokens: 6, totalTokens: 7, totalTokensFresh: true, contextTokens: 8 };
    const plan = planSessionMessage(existing, { ...dm('telegram', '111'), text: '/new' }, ctx('agent:main:main'));
    assert.equal(plan.rotation?.reason, 'command');
    assert.deepEqual([plan.entry.inputTokens, plan.entry.outputTokens, plan.entry.totalTokens, plan.entry.totalTokensFresh, plan.entry.totalTokensVersion], [0, 0, 0, true, 1], 'counted again from 0, as OpenClaw\'s reset does');
    assert.deepEqual([plan.entry.model, plan.entry.contextTokens], [undefined, undefined], 'as OpenClaw\'s reset: the model that ran and its window are the old instance\'s');
  });
});

describe('labels and lineage', () => {
  test('group labels: the latest wins; origin keeps the first sender and its raw id; lineage is written when given', () => {
    const first = planSessionMessage(undefined, { ...dm('telegram', '111', 'Alice'), peer: { kind: 'group', id: 'g' }, group: { displayName: 'Club', subject: 'Dune' } }, ctx('agent:main:telegram:group:g'));
    assert.deepEqual([first.entry.displayName, first.entry.subject], ['Club', 'Dune']);
    assert.deepEqual([first.entry.origin?.sender, first.entry.origin?.senderId], ['Alice', '111']);
    const second = planSessionMessage(first.entry, { ...dm('telegram', '222', 'Bob'), peer: { kind: 'group', id: 'g' }, group: { subject: 'Messiah', space: 'Friends' } }, ctx('agent:main:telegram:group:g', 2000));
    assert.deepEqual([second.entry.displayName, second.entry.subject, second.entry.space], ['Club', 'Messiah', 'Friends']);
    assert.deepEqual([second.entry.origin?.sender, second.entry.origin?.senderId], ['Alice', '111'], 'origin is the first message');
    const entry: Record<string, unknown> = {};
    applyMessageLabels(entry, { lineage: { parentSessionKey: 'agent:main:main', spawnDepth: 0 } }, false);
    assert.deepEqual(entry, { parentSessionKey: 'agent:main:main', spawnDepth: 0 });
  });
});
