// Replies go back where the message came from (issue 13, items 1 and 2), through the real binary
// with a runner: each message is answered on its own route, the session's address follows its
// owner, proactive output uses that address, collect batches never mix routes.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { assertStoreValid, eventsOf, ingestAll, queueCli, queueEnv, readStore, transcriptOf, type QueueEnv } from '../fixtures/queue-lib.js';

const ALICE_TG = { channel: 'telegram', peer: 'direct:111222333', sender: { id: '111222333', name: 'Alice' } };
const ALICE_SLACK = { channel: 'slack', peer: 'direct:U07ALICE', sender: { id: 'U07ALICE', name: 'Alice' } };
const BOB_TG = { channel: 'telegram', peer: 'direct:444', sender: { id: '444', name: 'Bob' } };
const TO_ALICE_TG = { channel: 'telegram', to: 'telegram:111222333', accountId: 'default' };
const TO_ALICE_SLACK = { channel: 'slack', to: 'user:U07ALICE', accountId: 'default' };
const TO_BOB_TG = { channel: 'telegram', to: 'telegram:444', accountId: 'default' };

function config(session: Record<string, unknown>, runner: Record<string, unknown> = { command: 'builtin:echo' }, queue: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    session: { identityLinks: { alice: ['telegram:111222333', 'slack:U07ALICE'] }, ...session },
    agents: { defaults: { runner } },
    messages: { queue: { debounceMs: 20, ...queue } },
  };
}

/** One message per ingest process, so each run has ended before the next message arrives. */
async function oneByOne(env: QueueEnv, messages: Record<string, unknown>[]): Promise<any[]> {
  const events: any[] = [];
  for (const message of messages) {
    const r = await ingestAll(env, [message]);
    assert.equal(r.code, 0, r.stderr);
    events.push(...r.events);
  }
  return events;
}

/** What the transcript says was delivered, and where: the delivery mirrors in order. */
function mirrors(records: any[]): [string, unknown][] {
  return records.filter((r) => r.type === 'message' && r.message.model === 'delivery-mirror').map((r) => [r.message.content[0].text, r.message.deliveryContext]);
}

describe('the Alice scenario with a runner (identity-linked Slack and Telegram DMs)', () => {
  test('her Slack message is answered on Slack and her Telegram message on Telegram: one session, one transcript', async () => {
    const env = queueEnv(config({ dmScope: 'per-peer' }));
    const events = await oneByOne(env, [
      { ...ALICE_TG, text: 'remind me about the trip', messageId: 'tg-1' },
      { ...ALICE_SLACK, text: 'add the hotel booking', messageId: 'sl-1' },
      { ...ALICE_TG, text: 'thanks', messageId: 'tg-2' },
    ]);
    const results = eventsOf(events, 'result');
    assert.deepEqual(results.map((e) => e.sessionKey), Array(3).fill('agent:main:direct:alice'));
    assert.equal(new Set(results.map((e) => e.sessionId)).size, 1, 'one session instance');
    assert.deepEqual(eventsOf(events, 'reply').map((e) => [e.text, e.deliveryContext, e.delivered]), [
      ['echo: remind me about the trip', TO_ALICE_TG, true],
      ['echo: add the hotel booking', TO_ALICE_SLACK, true],
      ['echo: thanks', TO_ALICE_TG, true],
    ]);
    const store = readStore(env);
    assert.deepEqual(Object.keys(store), ['agent:main:direct:alice']);
    const records = transcriptOf(env, 'agent:main:direct:alice');
    assert.deepEqual(records.filter((r) => r.type === 'message' && r.message.role === 'user').map((r) => [r.message.channel, r.message.messageId]), [
      ['telegram', 'tg-1'], ['slack', 'sl-1'], ['telegram', 'tg-2'],
    ]);
    assert.deepEqual(mirrors(records), [
      ['echo: remind me about the trip', TO_ALICE_TG],
      ['echo: add the hotel booking', TO_ALICE_SLACK],
      ['echo: thanks', TO_ALICE_TG],
    ]);
    // The session's address follows its owner's latest message (and its OpenClaw mirrors agree).
    const entry = store['agent:main:direct:alice'];
    assert.deepEqual(entry.deliveryContext, TO_ALICE_TG);
    assert.equal(entry.lastChannel, 'telegram');
    assert.equal(entry.lastTo, 'telegram:111222333');
    assertStoreValid(env);
  });

  test('sent together (default steer mode): the Slack message is not steered into the Telegram run; each is answered on its own route', async () => {
    const env = queueEnv(config({ dmScope: 'per-peer' }, { command: 'builtin:slow-echo', delayMs: 100, toolCalls: 1 }));
    const r = await ingestAll(env, [{ ...ALICE_TG, text: 'first' }, { ...ALICE_SLACK, text: 'second' }]);
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(eventsOf(r.events, 'result').map((e) => e.disposition), ['started', 'queued']);
    assert.deepEqual(eventsOf(r.events, 'reply').map((e) => [e.text, e.deliveryContext]), [
      ['slow-echo: first', TO_ALICE_TG],
      ['slow-echo: second', TO_ALICE_SLACK],
    ]);
    assert.deepEqual(readStore(env)['agent:main:direct:alice'].deliveryContext, TO_ALICE_SLACK);
  });

  test('collect: held messages from her two apps become one turn per route, each answered there', async () => {
    const env = queueEnv(config({ dmScope: 'per-peer' }, { command: 'builtin:slow-echo', delayMs: 100, toolCalls: 0 }, { mode: 'collect' }));
    const r = await ingestAll(env, [
      { ...ALICE_TG, text: 'start' },
      { ...ALICE_SLACK, text: 'one' },
      { ...ALICE_TG, text: 'two' },
      { ...ALICE_SLACK, text: 'three' },
    ]);
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(eventsOf(r.events, 'result').map((e) => e.disposition), ['started', 'collected', 'collected', 'collected']);
    const header = '[Queued messages while agent was busy]';
    assert.deepEqual(eventsOf(r.events, 'reply').map((e) => [e.text, e.deliveryContext]), [
      ['slow-echo: start', TO_ALICE_TG],
      [`slow-echo: ${header}\n---\nQueued #1 (from Alice)\none\n---\nQueued #2 (from Alice)\nthree`, TO_ALICE_SLACK],
      [`slow-echo: ${header}\n---\nQueued #1 (from Alice)\ntwo`, TO_ALICE_TG],
    ]);
    assert.equal(eventsOf(r.events, 'run_started').length, 3);
    assertStoreValid(env);
  });
});

test('the runner is told where its reply goes: the run line carries the triggering route', async () => {
  // `cat` echoes its run line back as the reply.
  const env = queueEnv(config({ dmScope: 'per-peer' }, { command: ['cat'] }));
  const events = await oneByOne(env, [{ ...ALICE_TG, text: 'hi' }, { ...ALICE_SLACK, text: 'hi again' }]);
  assert.deepEqual(eventsOf(events, 'reply').map((e) => JSON.parse(e.text).deliveryContext), [TO_ALICE_TG, TO_ALICE_SLACK]);
});

describe('dmScope "main": the first DM peer owns the address', () => {
  test('a second DM sender is answered on its own route but never moves the owner\'s address; a heartbeat goes to the owner', async () => {
    const env = queueEnv(config({ dmScope: 'main' }));
    const events = await oneByOne(env, [
      { ...ALICE_TG, text: 'hello' },
      { ...BOB_TG, text: 'I am Bob' },
      { ...BOB_TG, channel: 'slack', peer: 'direct:UBOB', text: 'Bob on Slack' },
      { channel: 'telegram', kind: 'heartbeat' },
    ]);
    const results = eventsOf(events, 'result');
    assert.deepEqual(results.map((e) => e.sessionKey), Array(4).fill('agent:main:main'));
    assert.deepEqual(eventsOf(events, 'reply').map((e) => [e.text, e.deliveryContext]), [
      ['echo: hello', TO_ALICE_TG],
      ['echo: I am Bob', TO_BOB_TG],
      ['echo: Bob on Slack', { channel: 'slack', to: 'user:UBOB', accountId: 'default' }],
      // Proactive output uses the session's address: still Alice's.
      ['echo: [heartbeat]', TO_ALICE_TG],
    ]);
    const entry = readStore(env)['agent:main:main'];
    assert.deepEqual(entry.deliveryContext, TO_ALICE_TG);
    assert.deepEqual(entry.deliveryOwner, { channel: 'telegram', peer: { kind: 'direct', id: '111222333' }, accountId: 'default' });
    // The owner's own messages still move it, on any app linked to her identity.
    const more = await oneByOne(env, [{ ...ALICE_SLACK, text: 'from Slack' }, { channel: 'telegram', kind: 'heartbeat' }]);
    assert.deepEqual(eventsOf(more, 'reply').map((e) => e.deliveryContext), [TO_ALICE_SLACK, TO_ALICE_SLACK]);
    assertStoreValid(env);
  });

  test('sessions pin-route names the owner; unpin-route lets the next DM sender claim it', async () => {
    const env = queueEnv(config({ dmScope: 'main' }));
    await oneByOne(env, [{ ...ALICE_TG, text: 'hello' }]);
    let cli = await queueCli(env, ['sessions', 'pin-route', 'agent:main:main', '--channel', 'telegram', '--peer', 'direct:444', '--json']);
    assert.equal(cli.code, 0, cli.stderr);
    assert.deepEqual(cli.json, {
      sessionKey: 'agent:main:main',
      deliveryOwner: { channel: 'telegram', peer: { kind: 'direct', id: '444' }, accountId: 'default', pinned: true },
      deliveryContext: TO_BOB_TG,
    });
    const events = await oneByOne(env, [{ ...ALICE_TG, text: 'still me' }, { channel: 'telegram', kind: 'heartbeat' }]);
    assert.deepEqual(eventsOf(events, 'reply').map((e) => e.deliveryContext), [TO_ALICE_TG, TO_BOB_TG]);
    assert.deepEqual(readStore(env)['agent:main:main'].deliveryContext, TO_BOB_TG);

    cli = await queueCli(env, ['sessions', 'unpin-route', 'agent:main:main', '--json']);
    assert.equal(cli.code, 0, cli.stderr);
    assert.deepEqual(cli.json, { sessionKey: 'agent:main:main', deliveryOwner: null, deliveryContext: TO_BOB_TG });
    await oneByOne(env, [{ ...ALICE_TG, text: 'mine again' }]);
    const entry = readStore(env)['agent:main:main'];
    assert.deepEqual(entry.deliveryContext, TO_ALICE_TG);
    assert.equal(entry.deliveryOwner.peer.id, '111222333');
    assertStoreValid(env);
  });

  test('pin-route refuses a session that does not exist (66) and a bad peer (2)', async () => {
    const env = queueEnv(config({ dmScope: 'main' }));
    let cli = await queueCli(env, ['sessions', 'pin-route', 'agent:main:nope', '--channel', 'telegram', '--peer', 'direct:1']);
    assert.equal(cli.code, 66, cli.stderr);
    await oneByOne(env, [{ ...ALICE_TG, text: 'hello' }]);
    cli = await queueCli(env, ['sessions', 'pin-route', 'agent:main:main', '--channel', 'telegram', '--peer', 'nobody']);
    assert.equal(cli.code, 2, cli.stderr);
    cli = await queueCli(env, ['sessions', 'pin-route', 'agent:main:main', '--peer', 'direct:1']);
    assert.equal(cli.code, 2, cli.stderr);
    // A blank channel is a usage error as it is for send and route (it was 65, bad input data).
    cli = await queueCli(env, ['sessions', 'pin-route', 'agent:main:main', '--channel', ' ', '--peer', 'direct:1']);
    assert.equal(cli.code, 2, cli.stderr);
    assert.match(cli.stderr, /channel is blank/);
  });
});

describe('route explain names the reply address', () => {
  test('its own route for a message; the session address for proactive output; whether the session address moves', async () => {
    const env = queueEnv(config({ dmScope: 'main' }));
    await oneByOne(env, [{ ...ALICE_TG, text: 'hello' }]);
    const cli = await queueCli(env, ['route', 'explain', '--channel', 'telegram', '--peer', 'direct:444', '--json']);
    assert.equal(cli.code, 0, cli.stderr);
    assert.deepEqual(cli.json.delivery.reply, TO_BOB_TG);
    assert.equal(cli.json.delivery.replySource, 'message');
    assert.deepEqual(cli.json.delivery.sessionAddress, TO_ALICE_TG);
    assert.equal(cli.json.delivery.movesSessionAddress, false);
    assert.deepEqual(cli.json.delivery.owner, { channel: 'telegram', peer: { kind: 'direct', id: '111222333' }, accountId: 'default' });
    const text = await queueCli(env, ['route', 'explain', '--channel', 'telegram', '--peer', 'direct:444']);
    assert.match(text.stdout, /reply to: telegram telegram:444/);
  });
});
