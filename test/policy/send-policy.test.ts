// Tests of sendPolicy: entry override, no policy, field matching (trimmed, lower-cased, keyPrefix
// with and without the agent prefix), "any matching deny wins", first allow, and the default.

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { REPO_ROOT } from '../helpers.js';
import type { SendPolicyRule } from '../../src/config/types.js';
import { evaluateSendPolicy, type SendPolicyInput } from '../../src/policy/index.js';

const groupSession: SendPolicyInput = {
  sessionKey: 'agent:main:telegram:group:-100123',
  channel: 'telegram',
  chatType: 'group',
};
const directSession: SendPolicyInput = { sessionKey: 'agent:main:main', channel: 'whatsapp', chatType: 'direct' };

const deny = (match?: SendPolicyRule['match']): SendPolicyRule => (match === undefined ? { action: 'deny' } : { action: 'deny', match });
const allow = (match?: SendPolicyRule['match']): SendPolicyRule => (match === undefined ? { action: 'allow' } : { action: 'allow', match });

describe('evaluateSendPolicy', () => {
  it('allows when there is no policy', () => {
    assert.deepEqual(evaluateSendPolicy(groupSession), { decision: 'allow', rule: null, source: 'none' });
    assert.deepEqual(evaluateSendPolicy(groupSession, null), { decision: 'allow', rule: null, source: 'none' });
  });

  it('lets the entry override win outright', () => {
    const denyAll = { rules: [deny()], default: 'deny' };
    assert.deepEqual(evaluateSendPolicy({ ...groupSession, entryOverride: 'allow' }, denyAll), { decision: 'allow', rule: null, source: 'entry' });
    assert.deepEqual(evaluateSendPolicy({ ...groupSession, entryOverride: ' DENY ' }), { decision: 'deny', rule: null, source: 'entry' });
    assert.deepEqual(evaluateSendPolicy({ ...groupSession, entryOverride: 'deny' }, { rules: [allow()] }), {
      decision: 'deny', rule: null, source: 'entry',
    });
    // `inherit` or junk is no override.
    assert.equal(evaluateSendPolicy({ ...groupSession, entryOverride: 'inherit' }, denyAll).source, 'rule');
  });

  it('falls back to the default, allow when unset', () => {
    assert.deepEqual(evaluateSendPolicy(groupSession, {}), { decision: 'allow', rule: null, source: 'default' });
    assert.deepEqual(evaluateSendPolicy(groupSession, { rules: [deny({ channel: 'slack' })] }), { decision: 'allow', rule: null, source: 'default' });
    assert.deepEqual(evaluateSendPolicy(groupSession, { rules: [], default: 'deny' }), { decision: 'deny', rule: null, source: 'default' });
    assert.deepEqual(evaluateSendPolicy(groupSession, { default: ' Deny ' }), { decision: 'deny', rule: null, source: 'default' });
  });

  it('a matching deny wins wherever it is in the list', () => {
    const rules = [allow({ channel: 'telegram' }), allow(), deny({ chatType: 'group' })];
    assert.deepEqual(evaluateSendPolicy(groupSession, { rules }), { decision: 'deny', rule: 2, source: 'rule' });
    // The same list lets a direct chat through, by the first matching allow.
    assert.deepEqual(evaluateSendPolicy(directSession, { rules }), { decision: 'allow', rule: 1, source: 'rule' });
    // With several matching denies, the first is reported.
    assert.deepEqual(evaluateSendPolicy(groupSession, { rules: [allow(), deny({ channel: 'telegram' }), deny()] }), {
      decision: 'deny', rule: 1, source: 'rule',
    });
  });

  it('a matching allow beats the default deny; a non-matching deny does not count', () => {
    const policy = { rules: [deny({ channel: 'slack' }), allow({ channel: 'telegram' })], default: 'deny' };
    assert.deepEqual(evaluateSendPolicy(groupSession, policy), { decision: 'allow', rule: 1, source: 'rule' });
    assert.deepEqual(evaluateSendPolicy(directSession, policy), { decision: 'deny', rule: null, source: 'default' });
  });

  it('requires every named field to match', () => {
    const rules = [deny({ channel: 'telegram', chatType: 'direct' })];
    assert.equal(evaluateSendPolicy(groupSession, { rules }).decision, 'allow');
    assert.equal(evaluateSendPolicy({ ...groupSession, chatType: 'direct' }, { rules }).decision, 'deny');
    const keyAndChannel = [deny({ channel: 'whatsapp', keyPrefix: 'telegram:' })];
    assert.equal(evaluateSendPolicy(groupSession, { rules: keyAndChannel }).decision, 'allow');
  });

  it('compares trimmed and lower-cased values', () => {
    assert.equal(evaluateSendPolicy(groupSession, { rules: [deny({ channel: ' Telegram ' })] }).decision, 'deny');
    assert.equal(evaluateSendPolicy({ ...groupSession, channel: 'TELEGRAM ' }, { rules: [deny({ channel: 'telegram' })] }).decision, 'deny');
    assert.equal(evaluateSendPolicy(groupSession, { rules: [deny({ chatType: 'GROUP' })] }).decision, 'deny');
    assert.equal(evaluateSendPolicy(groupSession, { rules: [deny({ keyPrefix: 'Telegram:Group:' })] }).decision, 'deny');
    assert.equal(evaluateSendPolicy(groupSession, { rules: [{ action: ' Deny ' as 'deny' }] }).decision, 'deny');
  });

  it('matches keyPrefix against the full key or the key without agent:<id>:', () => {
    const rule = (match: SendPolicyRule['match']) => ({ rules: [deny(match)] });
    assert.equal(evaluateSendPolicy(groupSession, rule({ keyPrefix: 'telegram:group:' })).decision, 'deny');
    assert.equal(evaluateSendPolicy(groupSession, rule({ keyPrefix: 'agent:main:telegram:' })).decision, 'deny');
    assert.equal(evaluateSendPolicy(groupSession, rule({ keyPrefix: 'agent:ops:telegram:' })).decision, 'allow');
    assert.equal(evaluateSendPolicy(groupSession, rule({ keyPrefix: 'group:' })).decision, 'allow');
    // Only the leading agent:<id>: is stripped.
    const nested = { sessionKey: 'agent:main:subagent:agent:x:cron:1', channel: 'internal', chatType: 'direct' };
    assert.equal(evaluateSendPolicy(nested, rule({ keyPrefix: 'subagent:' })).decision, 'deny');
    assert.equal(evaluateSendPolicy(nested, rule({ keyPrefix: 'cron:' })).decision, 'allow');
  });

  it('matches rawKeyPrefix against the full key only', () => {
    const rule = (rawKeyPrefix: string) => ({ rules: [deny({ rawKeyPrefix })] });
    assert.equal(evaluateSendPolicy(groupSession, rule('telegram:group:')).decision, 'allow');
    assert.equal(evaluateSendPolicy(groupSession, rule('agent:main:telegram:')).decision, 'deny');
    assert.equal(evaluateSendPolicy(groupSession, rule('AGENT:MAIN:')).decision, 'deny');
  });

  it('treats a rule without match, or with only blank fields, as matching everything', () => {
    assert.equal(evaluateSendPolicy(directSession, { rules: [deny()] }).decision, 'deny');
    assert.equal(evaluateSendPolicy(directSession, { rules: [deny({})] }).decision, 'deny');
    assert.equal(evaluateSendPolicy(directSession, { rules: [deny({ channel: '  ', keyPrefix: '' })] }).decision, 'deny');
  });

  it('treats dm as direct', () => {
    assert.equal(evaluateSendPolicy(directSession, { rules: [deny({ chatType: 'dm' })] }).decision, 'deny');
    assert.equal(evaluateSendPolicy({ ...directSession, chatType: 'dm' }, { rules: [deny({ chatType: 'direct' })] }).decision, 'deny');
  });

  it('ignores rules whose action is neither allow nor deny', () => {
    const rules = [{ action: 'block' } as unknown as SendPolicyRule, null as unknown as SendPolicyRule, allow()];
    assert.deepEqual(evaluateSendPolicy(directSession, { rules, default: 'deny' }), { decision: 'allow', rule: 2, source: 'rule' });
  });

  it('a session without channel or chat type only matches rules that do not name them', () => {
    const bare = { sessionKey: 'agent:main:notes' };
    assert.equal(evaluateSendPolicy(bare, { rules: [deny({ channel: 'telegram' })] }).decision, 'allow');
    assert.equal(evaluateSendPolicy(bare, { rules: [deny({ keyPrefix: 'notes' })] }).decision, 'deny');
  });
});

// Cases generated by a seeded fuzz and answered by OpenClaw 2026.7.1's own resolveSendPolicy
// (test/fixtures/send-policy-openclaw.json; the rule index is the shortest rule prefix that gives
// the same answer). About a third are cases switchboard once answered differently: a session with
// no usable chat type or channel (OpenClaw reads them from the key), a blank channel (the next
// candidate counts), and keys that fit two peer shapes (OpenClaw denies them).
describe('evaluateSendPolicy against OpenClaw 2026.7.1', () => {
  const vectors = JSON.parse(fs.readFileSync(path.join(REPO_ROOT, 'test', 'fixtures', 'send-policy-openclaw.json'), 'utf8')) as {
    cases: { input: SendPolicyInput; policy: { rules?: SendPolicyRule[]; default?: string } | null; expected: { decision: string; rule: number | null } }[];
  };

  it('decides every generated case as OpenClaw does, with the same rule', () => {
    assert.ok(vectors.cases.length > 500);
    for (const [i, c] of vectors.cases.entries()) {
      const got = evaluateSendPolicy(c.input, c.policy);
      assert.deepEqual({ decision: got.decision, rule: got.rule }, c.expected, `case ${i}: ${JSON.stringify(c)}`);
    }
  });

  it('reads the chat type from the key when the session has none it knows', () => {
    const policy = { rules: [deny({ chatType: 'group' })] };
    for (const chatType of [null, '', 'supergroup']) {
      assert.deepEqual(evaluateSendPolicy({ sessionKey: 'agent:main:telegram:group:-100', channel: 'telegram', chatType }, policy), {
        decision: 'deny', rule: 0, source: 'rule',
      });
    }
    assert.equal(evaluateSendPolicy({ sessionKey: 'agent:main:whatsapp:123@g.us', chatType: null }, policy).decision, 'deny');
    assert.equal(evaluateSendPolicy({ sessionKey: 'agent:main:main', chatType: null }, policy).decision, 'allow');
  });

  it('takes the first non-blank channel, else the one the key names', () => {
    const policy = { rules: [deny({ channel: 'telegram' })] };
    assert.equal(evaluateSendPolicy({ sessionKey: 'agent:main:main', channel: [' ', null, 'Telegram'] }, policy).decision, 'deny');
    assert.equal(evaluateSendPolicy({ sessionKey: 'agent:main:telegram:direct:1', channel: [] }, policy).decision, 'deny');
    assert.equal(evaluateSendPolicy({ sessionKey: 'agent:main:telegram:direct:1', channel: 'slack' }, policy).decision, 'allow');
  });

  it('holds a reply whose key fits two peer shapes', () => {
    assert.deepEqual(evaluateSendPolicy({ sessionKey: 'agent:main:telegram:group:direct:1', channel: 'telegram', chatType: 'group' }, { rules: [allow()] }), {
      decision: 'deny', rule: null, source: 'key',
    });
    // No policy, or the entry's own override: the shape does not matter.
    assert.equal(evaluateSendPolicy({ sessionKey: 'agent:main:telegram:group:direct:1' }).decision, 'allow');
    assert.equal(evaluateSendPolicy({ sessionKey: 'agent:main:telegram:group:direct:1', entryOverride: 'allow' }, {}).decision, 'allow');
  });
});
