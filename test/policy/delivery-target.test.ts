// Delivery targets in OpenClaw's form, and one write path that keeps deliveryContext, the last*
// fields and route in agreement (issue 12, item 2).

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { deliveryTarget, isOwnerMessage, planDelivery, setDeliveryAddress, type PlannedEntry } from '../../src/policy/index.js';

test('targets: telegram:<chatId>; user:/channel: where a bare id would be read as a channel; else the bare id', () => {
  assert.equal(deliveryTarget('telegram', { kind: 'direct', id: '111' }), 'telegram:111');
  assert.equal(deliveryTarget('telegram', { kind: 'group', id: '-100888' }), 'telegram:-100888');
  // A forum topic, as OpenClaw 2026.7.1's Telegram code records its last route.
  assert.equal(deliveryTarget('telegram', { kind: 'group', id: '-100888:topic:42' }), 'telegram:-100888:topic:42');
  assert.equal(deliveryTarget('discord', { kind: 'direct', id: '42' }), 'user:42');
  assert.equal(deliveryTarget('discord', { kind: 'channel', id: '1234567890' }), 'channel:1234567890');
  assert.equal(deliveryTarget('slack', { kind: 'direct', id: 'U07DAN' }), 'user:U07DAN');
  assert.equal(deliveryTarget('slack', { kind: 'group', id: 'C0GEN' }), 'channel:C0GEN');
  assert.equal(deliveryTarget('whatsapp', { kind: 'direct', id: '+15550001' }), '+15550001');
});

test('deliveryContext, lastChannel/lastTo/lastAccountId/lastThreadId and an existing route always agree', () => {
  const entry: PlannedEntry = {
    sessionId: 's',
    updatedAt: 1,
    lastThreadId: 'old-thread',
    route: { channel: 'telegram', accountId: 'default', target: { to: 'telegram:1', chatType: 'group' }, thread: { id: 'old-thread' }, extra: 'kept' },
  };
  setDeliveryAddress(entry, { channel: 'telegram', to: 'telegram:-100888', accountId: 'default', threadId: '42' }, 'group');
  assert.deepEqual(entry.deliveryContext, { channel: 'telegram', to: 'telegram:-100888', accountId: 'default', threadId: '42' });
  assert.equal(entry.lastChannel, 'telegram');
  assert.equal(entry.lastTo, 'telegram:-100888');
  assert.equal(entry.lastAccountId, 'default');
  assert.equal(entry.lastThreadId, '42');
  assert.deepEqual(entry.route, { channel: 'telegram', accountId: 'default', target: { to: 'telegram:-100888', chatType: 'group' }, thread: { id: '42' }, extra: 'kept' });

  setDeliveryAddress(entry, { channel: 'telegram', to: 'telegram:-100888', accountId: 'default' }, 'group');
  assert.equal(entry.lastThreadId, undefined, 'no thread: no stale lastThreadId');
  assert.equal((entry.route as { thread?: unknown }).thread, undefined);

  const fresh: PlannedEntry = { sessionId: 't', updatedAt: 1 };
  setDeliveryAddress(fresh, { channel: 'slack', to: 'user:U1', accountId: 'default' }, 'direct');
  assert.equal(fresh.route, undefined, 'route is written only where the entry has one (OpenClaw adds it on its own turns)');
});

// The delivery rule (issue 13, item 1): replies on the message's own route, the session's address
// follows its owner, proactive output uses the session's address.
const tg = (id: string) => ({ kind: 'user' as const, channel: 'telegram', accountId: 'default', peer: { kind: 'direct', id } });
const TG_1 = { channel: 'telegram', to: 'telegram:1', accountId: 'default' };
const TG_2 = { channel: 'telegram', to: 'telegram:2', accountId: 'default' };

test('a session of its own: every sender is the owner, the address follows the latest message', () => {
  const plan = planDelivery({ deliveryContext: TG_1 }, tg('2'), { sharedAddress: false });
  assert.deepEqual([plan.replyTo, plan.replySource, plan.movesSessionAddress, plan.claimsOwner], [TG_2, 'message', true, false]);
});

test('a shared address: the first DM sender claims it; another is answered on its own route only; a linked peer of the owner moves it', () => {
  const identityOf = (channel: string, id: string) => (`${channel}:${id}` === 'telegram:1' || `${channel}:${id}` === 'slack:U1' ? 'alice' : undefined);
  const first = planDelivery(undefined, tg('1'), { sharedAddress: true, identityOf });
  assert.deepEqual([first.movesSessionAddress, first.claimsOwner], [true, true]);
  const owner = { channel: 'telegram', peer: { kind: 'direct', id: '1' } };
  const other = planDelivery({ deliveryContext: TG_1, deliveryOwner: owner }, tg('2'), { sharedAddress: true, identityOf });
  assert.deepEqual([other.replyTo, other.movesSessionAddress, other.claimsOwner], [TG_2, false, false]);
  const linked = planDelivery({ deliveryContext: TG_1, deliveryOwner: owner }, { kind: 'user', channel: 'slack', accountId: 'default', peer: { kind: 'direct', id: 'U1' } }, { sharedAddress: true, identityOf });
  assert.deepEqual([linked.replyTo, linked.movesSessionAddress], [{ channel: 'slack', to: 'user:U1', accountId: 'default' }, true]);
  // Not linked without identity links: the same id on another channel is another sender.
  assert.equal(isOwnerMessage(owner, { channel: 'slack', peer: { kind: 'direct', id: '1' } }), false);
});

test('heartbeats, system and cron messages use the session address and only give a session without one its first', () => {
  for (const kind of ['heartbeat', 'system', 'cron'] as const) {
    const kept = planDelivery({ deliveryContext: TG_1 }, { ...tg('2'), kind }, { sharedAddress: false });
    assert.deepEqual([kept.replyTo, kept.replySource, kept.movesSessionAddress], [TG_1, 'session', false]);
    const first = planDelivery(undefined, { ...tg('2'), kind }, { sharedAddress: false });
    assert.deepEqual([first.replyTo, first.movesSessionAddress], [TG_2, true]);
  }
  // No peer and no address: nowhere to answer.
  const none = planDelivery(undefined, { kind: 'user', channel: 'x', accountId: 'default' }, {});
  assert.deepEqual([none.replyTo, none.replySource, none.movesSessionAddress], [undefined, 'none', false]);
  // A hand-broken owner names nobody rather than throwing.
  const broken = planDelivery({ deliveryContext: TG_1, deliveryOwner: { channel: 'telegram' } as never }, tg('2'), { sharedAddress: false });
  assert.equal(broken.movesSessionAddress, true);
});
