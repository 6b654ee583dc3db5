// Two promises today's other tests did not check (issue 13, "Must show"), through the real binary:
// a heartbeat or system message that finds a session stale never rotates it (store.md: only
// real user messages are interactions; `maintain` applies due resets without a message), and
// `session.sendPolicy.default: "deny"` holds for what a runner replies.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import { LiveIngest, eventsOf, ingestAll, queueEnv, queueRunner, readStore, sessionsDir, transcriptOf, type QueueEnv } from '../fixtures/queue-lib.js';

const KEY = 'agent:main:direct:9';
const DM = { channel: 'telegram', peer: 'direct:9', sender: { id: '9', name: 'Nine' } };
const ECHO = { agents: { defaults: { runner: { command: 'builtin:echo' } } } };

async function at(env: QueueEnv, when: string, message: Record<string, unknown>): Promise<any> {
  const r = await ingestAll(env, [message], ['--now', when]);
  assert.equal(r.code, 0, r.stderr);
  const [result] = eventsOf(r.events, 'result');
  return { result, events: r.events };
}

describe('a heartbeat or system message never rotates a stale session', () => {
  const policies: [string, Record<string, unknown>, string, string, string][] = [
    // [name, reset policy, first message, stale probe time, reason]
    ['idle', { mode: 'idle', idleMinutes: 30 }, '2026-11-30T10:00:00Z', '2026-11-30T11:00:00Z', 'idle'],
    ['daily', { mode: 'daily', atHour: 4, timezone: 'UTC' }, '2026-11-30T10:00:00Z', '2026-12-01T05:00:00Z', 'daily'],
  ];
  for (const runner of [false, true]) {
    for (const [name, reset, first, stale, reason] of policies) {
      test(`${name} policy, ${runner ? 'with a runner' : 'record only'}: the heartbeat and the system event stay in the old instance; the next user message rotates it`, async () => {
        const env = queueEnv({ session: { dmScope: 'per-peer', reset }, ...(runner ? ECHO : {}) });
        const opened = (await at(env, first, { ...DM, text: 'hello' })).result;
        const before = readStore(env)[KEY];
        for (const kind of ['heartbeat', 'system']) {
          const { result } = await at(env, stale, { ...DM, kind, text: `${kind} ping` });
          assert.equal(result.sessionId, opened.sessionId, `${kind} stays in the instance it found`);
          assert.equal(result.reset, null, `${kind} reports no reset`);
        }
        const entry = readStore(env)[KEY];
        assert.equal(entry.sessionId, opened.sessionId);
        assert.equal(entry.sessionStartedAt, before.sessionStartedAt);
        assert.equal(entry.lastInteractionAt, Date.parse(first), 'never an interaction');
        assert.ok(!transcriptOf(env, KEY).some((r) => r.type === 'reset_notice'), 'no reset notice in the transcript');
        // The session was stale all along: the next real message finds it so.
        const { result } = await at(env, stale, { ...DM, text: 'back again' });
        assert.deepEqual(result.reset, { reason, previousSessionId: opened.sessionId });
      });
    }
  }
});

describe('sendPolicy holds on run delivery', () => {
  test('default "deny": the runner\'s reply is recorded, marked undelivered, reported denied, never mirrored as delivered', async () => {
    const env = queueEnv({ session: { dmScope: 'per-peer', sendPolicy: { rules: [], default: 'deny' } }, ...ECHO });
    const r = await ingestAll(env, [{ ...DM, text: 'hello' }]);
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(eventsOf(r.events, 'reply').map((e) => [e.text, e.delivered, e.policy]), [['echo: hello', false, { decision: 'deny', rule: null }]]);
    const records = transcriptOf(env, KEY).filter((record) => record.type === 'message' && record.message.role === 'assistant');
    assert.deepEqual(records.map((record) => [record.message.content[0].text, record.message.delivered, record.message.model ?? null]), [['echo: hello', false, null]]);
  });

  test('a rule for the channel the reply goes out on: a linked session\'s Slack reply is allowed, its Telegram reply falls to default "deny"', async () => {
    const env = queueEnv({
      session: {
        dmScope: 'per-peer',
        identityLinks: { nine: ['telegram:9', 'slack:U9'] },
        sendPolicy: { rules: [{ action: 'allow', match: { channel: 'slack' } }], default: 'deny' },
      },
      ...ECHO,
    });
    const events: any[] = [];
    for (const message of [{ ...DM, text: 'on telegram' }, { ...DM, channel: 'slack', peer: 'direct:U9', text: 'on slack' }]) {
      const r = await ingestAll(env, [message]);
      assert.equal(r.code, 0, r.stderr);
      events.push(...r.events);
    }
    assert.deepEqual(eventsOf(events, 'reply').map((e) => [e.text, e.deliveryContext.channel, e.delivered, e.policy]), [
      ['echo: on telegram', 'telegram', false, { decision: 'deny', rule: null }],
      ['echo: on slack', 'slack', true, { decision: 'allow', rule: 0 }],
    ]);
  });
});

describe('sendPolicy decides as OpenClaw 2026.7.1 does on keys of odd shapes', () => {
  test('a group whose id reads as a DM (`group:direct:1`) has its reply held; a plain group is answered', async () => {
    // OpenClaw's resolveSendPolicy denies whenever a policy is configured and the key fits two
    // peer shapes, whatever the rules say (here: only DMs are denied).
    const env = queueEnv({ session: { sendPolicy: { rules: [{ action: 'deny', match: { chatType: 'direct' } }] } }, ...ECHO });
    const r = await ingestAll(env, [
      { channel: 'telegram', peer: 'group:direct:1', sender: { id: '9' }, text: 'odd' },
      { channel: 'telegram', peer: 'group:g1', sender: { id: '9' }, text: 'plain' },
    ]);
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(eventsOf(r.events, 'reply').map((e) => [e.sessionKey, e.delivered, e.policy]), [
      ['agent:main:telegram:group:direct:1', false, { decision: 'deny', rule: null }],
      ['agent:main:telegram:group:g1', true, { decision: 'allow', rule: null }],
    ]);
  });
});

describe('a reply is sent on what the run knows of its session, never on a failed read', () => {
  test('"/send off" holds every reply of a run, also one made while sessions.json is unreadable', async () => {
    const env = queueEnv({ session: { dmScope: 'per-peer' }, agents: { defaults: { runner: queueRunner('replies') } } });
    const off = await ingestAll(env, [{ ...DM, text: '/send off' }]);
    assert.equal(off.code, 0, off.stderr);
    assert.equal(readStore(env)[KEY].sendPolicy, 'deny');
    const ingest = new LiveIngest(env);
    ingest.send({ ...DM, text: 'talk to me' });
    await ingest.waitFor((e) => e.type === 'reply' && e.text === 'first', 'the first reply');
    // A damaged registry while the run goes on (a half-written copy, a disk error): the second
    // reply is made while it cannot be read.
    const storeFile = path.join(sessionsDir(env), 'sessions.json');
    const good = fs.readFileSync(storeFile);
    fs.writeFileSync(storeFile, '{ "not json');
    fs.writeFileSync(`${env.release}.1`, 'go');
    await ingest.waitFor((e) => e.type === 'reply' && e.text === 'second', 'the second reply');
    fs.writeFileSync(storeFile, good);
    fs.writeFileSync(`${env.release}.2`, 'go');
    await ingest.finish();
    assert.deepEqual(eventsOf(ingest.events, 'reply').map((e) => [e.text, e.delivered]), [['first', false], ['second', false]]);
    const runReplies = transcriptOf(env, KEY).filter((record) => record.type === 'message' && record.message.role === 'assistant' && ['first', 'second'].includes(record.message.content[0].text));
    assert.deepEqual(runReplies.map((record) => [record.message.content[0].text, record.message.delivered ?? true]), [['first', false], ['second', false]]);
  });
});
