// Delivery targets in OpenClaw's form, and one write path that keeps deliveryContext, the last*
// fields and route in agreement (issue 12, item 2).

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { deliveryTarget, setDeliveryAddress, type PlannedEntry } from '../../src/policy/index.js';

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
