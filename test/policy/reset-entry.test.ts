// The one rotation rule (rotateEntry, and the planner's rotations through it) against an entry
// shaped exactly as OpenClaw 2026.7.1 writes it after a turn on the claude-cli backend: a new
// instance must not inherit OpenClaw's per-conversation state (the CLI backend's conversation —
// but for a subagent session reset on request —, systemSent, abortedLastRun, run status, the old
// counts, which start again at 0), as OpenClaw's own reset does not; the address's settings,
// labels and switchboard's own fields survive, and so do the fields OpenClaw keeps.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import { planSessionMessage, rotateEntry, type PlannedEntry, type PlanMessage } from '../../src/policy/index.js';
import { OPENCLAW_SESSION_ID, OPENCLAW_SESSION_KEY, openClawEntry as openClawEntryOf } from '../fixtures/openclaw-entry.js';
import { REPO_ROOT } from '../helpers.js';

const KEY = OPENCLAW_SESSION_KEY;
const OLD = OPENCLAW_SESSION_ID;
const NOW = Date.parse('2026-12-03T12:00:00Z');

/** What OpenClaw 2026.7.1 left in sessions.json (recordSessionMetaFromInbound, updateLastRoute, a claude-cli run). */
function openClawEntry(): PlannedEntry {
  return openClawEntryOf({ updatedAt: NOW - 3_600_000, sessionStartedAt: NOW - 36_000_000 }, `/state/agents/main/sessions/${OLD}.jsonl`) as PlannedEntry;
}

/** OpenClaw fields of the same kind as above that its reset keeps or drops (SessionEntry, 2026.7.1). */
const OPENCLAW_KEPT = {
  thinkingLevel: 'low', fastMode: true, verboseLevel: 'on', traceLevel: 'off', reasoningLevel: 'on', elevatedLevel: 'ask', ttsAuto: 'off',
  execHost: 'sandbox', execSecurity: 'allowlist', execAsk: 'on-miss', execNode: 'n1', responseUsage: 'tokens', pinnedAt: 5,
  groupActivation: 'mention', groupActivationNeedsSystemIntro: true, label: 'work chat', groupId: 'g1', groupChannel: '#g',
  spawnedWorkspaceDir: '/w', spawnedCwd: '/w/sub', forkedFromParent: true, subagentRole: 'leaf', subagentControlScope: 'none',
  compactionCheckpoints: [{ id: 'c' }],
};
const OPENCLAW_DROPPED = {
  status: 'done', startedAt: 1, endedAt: 2, runtimeMs: 1, estimatedCostUsd: 0.1, cacheRead: 3, cacheWrite: 4, contextTokens: 200000,
  contextBudgetStatus: { ok: true }, systemPromptReport: { chars: 10 }, skillsSnapshot: { prompt: 'x' }, goal: 'g',
  memoryFlushAt: 9, memoryFlushCompactionCount: 1, fallbackNoticeReason: 'r',
  someFieldNobodyKnows: 'x',
};

/** switchboard's own fields of an address (docs/decisions.md "Sessions and resets", store-format/README.md). */
const SWITCHBOARD_KEPT = {
  channel: 'telegram', accountId: 'default', chatType: 'direct' as const, displayName: 'Alice', subject: 's', space: 'sp',
  deliveryOwner: { channel: 'telegram', peer: { kind: 'direct', id: '111' }, pinned: true },
  recentMessageIds: `${NOW - 1000} telegram default direct:111  tg-1`,
  dmSenders: [{ channel: 'telegram', id: '111', name: 'Alice' }],
  queueMode: 'collect', queueDebounceMs: 500, queueCap: 5, queueDrop: 'old', sendPolicy: 'deny',
  parentSessionKey: 'agent:main:main', spawnDepth: 1, spawnedBy: 'agent:main:main', pinned: true,
  queue: [{ runId: 'r1', sessionId: 'other', enqueuedAt: 1, mode: 'collect', state: 'waiting' }],
  outbox: [{ id: 'o1', sessionId: OLD, records: [{ type: 'custom' }] }],
};

let n = 0;
const rotate = (entry: PlannedEntry) => rotateEntry(entry, { sessionKey: KEY, now: NOW, newSessionId: () => `new-${++n}`, transcriptName: (id) => `${id}.jsonl` }, { reason: 'command', threadId: undefined });
const ctx = { sessionKey: KEY, session: undefined, now: NOW, newSessionId: () => `new-${++n}`, transcriptName: (id: string) => `${id}.jsonl` };
const dm = (text: string): PlanMessage => ({ kind: 'user', text, channel: 'telegram', accountId: 'default', peer: { kind: 'direct', id: '111' }, sender: { id: '111', name: 'Alice' } });

function assertFreshInstance(next: PlannedEntry): void {
  for (const field of ['cliSessionBindings', 'cliSessionIds', 'claudeCliSessionId']) assert.equal(next[field], undefined, `${field}: the old CLI conversation is not resumed`);
  assert.equal(next.systemSent, false, 'the new instance gets the system intro again');
  assert.equal(next.abortedLastRun, false);
  assert.equal(next.compactionCount, 0);
  for (const field of ['model', 'modelProvider', 'contextTokens']) assert.equal(next[field], undefined, `${field} belonged to the old instance`);
  // The counts start again at a known 0, marked fresh, as OpenClaw's reset writes them.
  assert.deepEqual([next.inputTokens, next.outputTokens, next.totalTokens, next.totalTokensFresh, next.totalTokensVersion], [0, 0, 0, true, 1]);
  assert.notEqual(next.sessionId, OLD);
  assert.equal(next.sessionFile, `${next.sessionId}.jsonl`);
  assert.equal(next.sessionStartedAt, NOW);
  // The address stays: where output goes, the origin, OpenClaw's copies of the address.
  assert.deepEqual(next.origin, openClawEntry().origin);
  assert.deepEqual(next.deliveryContext, openClawEntry().deliveryContext);
  assert.deepEqual([next.lastChannel, next.lastTo, next.lastAccountId], ['telegram', 'telegram:111', 'default']);
  assert.equal((next.route as { target: { to: string } }).target.to, 'telegram:111');
}

describe('a reset of an entry OpenClaw wrote', () => {
  test('rotateEntry: the CLI session, systemSent, abortedLastRun, compactions and usage are the old instance\'s', () => {
    const next = rotate(openClawEntry());
    assertFreshInstance(next);
    assert.equal(next.lastInteractionAt, NOW);
    assert.equal(next.updatedAt, NOW);
  });

  test('/new and a due daily reset through the planner produce the same fresh instance', () => {
    const byCommand = planSessionMessage(openClawEntry(), dm('/new'), ctx);
    assert.equal(byCommand.rotation?.reason, 'command');
    assertFreshInstance(byCommand.entry);
    const daily = planSessionMessage(openClawEntry(), dm('hello'), { ...ctx, session: { reset: { mode: 'daily', atHour: 4, timezone: 'UTC' } } } as never);
    assert.equal(daily.rotation?.reason, 'daily');
    assertFreshInstance(daily.entry);
  });

  test('fields OpenClaw\'s reset keeps survive, its run state and fields nobody keeps do not', () => {
    const next = rotate({ ...openClawEntry(), ...OPENCLAW_KEPT, ...OPENCLAW_DROPPED });
    for (const [field, value] of Object.entries(OPENCLAW_KEPT)) assert.deepEqual(next[field], value, `${field} is kept`);
    for (const field of Object.keys(OPENCLAW_DROPPED)) assert.equal(next[field], undefined, `${field} is dropped`);
  });

  test('switchboard\'s own fields of the address survive: labels, owner, duplicate memory, DM senders, overrides, lineage, pin, queue', () => {
    const next = rotate({ ...openClawEntry(), ...SWITCHBOARD_KEPT });
    for (const [field, value] of Object.entries(SWITCHBOARD_KEPT)) assert.deepEqual(next[field], value, `${field} is kept`);
  });

  test('a model chosen by the user survives (and is the model of the new instance); one OpenClaw fell back to does not', () => {
    const chosen = rotate({ ...openClawEntry(), modelOverride: 'gpt-5', providerOverride: 'openai' });
    assert.deepEqual([chosen.modelOverride, chosen.providerOverride, chosen.model, chosen.modelProvider], ['gpt-5', 'openai', 'gpt-5', 'openai']);
    const bySwitchboard = rotate({ sessionId: OLD, updatedAt: 1, model: 'llama3:8b', modelOverride: 'llama3:8b' });
    assert.deepEqual([bySwitchboard.modelOverride, bySwitchboard.model, bySwitchboard.modelProvider], ['llama3:8b', 'llama3:8b', undefined]);
    const fallback = rotate({ ...openClawEntry(), modelOverride: 'm2', providerOverride: 'p2', modelOverrideSource: 'auto' });
    assert.deepEqual([fallback.modelOverride, fallback.providerOverride, fallback.modelOverrideSource, fallback.model], [undefined, undefined, undefined, undefined]);
    const legacyFallback = rotate({ ...openClawEntry(), modelOverride: 'm2', modelOverrideFallbackOriginProvider: 'p', modelOverrideFallbackOriginModel: 'm' });
    assert.equal(legacyFallback.modelOverride, undefined, 'an override with fallback provenance is OpenClaw\'s, not the user\'s');
    const auth = rotate({ ...openClawEntry(), authProfileOverride: 'work', authProfileOverrideSource: 'user', authProfileOverrideCompactionCount: 1 });
    assert.deepEqual([auth.authProfileOverride, auth.authProfileOverrideSource, auth.authProfileOverrideCompactionCount], ['work', 'user', 1]);
    const autoAuth = rotate({ ...openClawEntry(), authProfileOverride: 'rotated', authProfileOverrideSource: 'auto' });
    assert.equal(autoAuth.authProfileOverride, undefined);
  });

  test('an entry switchboard alone wrote gains no OpenClaw fields; one with counts starts them at 0', () => {
    const next = rotate({ sessionId: OLD, updatedAt: 1, sessionStartedAt: 1, lastInteractionAt: 1, channel: 'telegram', model: 'gpt-5' });
    assert.deepEqual(next, { sessionId: 'new-' + n, sessionFile: `new-${n}.jsonl`, updatedAt: NOW, sessionStartedAt: NOW, lastInteractionAt: NOW, channel: 'telegram' });
    const counted = rotate({ sessionId: OLD, updatedAt: 1, channel: 'telegram', model: 'gpt-5', inputTokens: 1 });
    assert.deepEqual(counted, { sessionId: 'new-' + n, sessionFile: `new-${n}.jsonl`, updatedAt: NOW, sessionStartedAt: NOW, lastInteractionAt: NOW, channel: 'telegram', inputTokens: 0, outputTokens: 0, totalTokens: 0, totalTokensFresh: true, totalTokensVersion: 1 });
  });

  test('a subagent session reset on request keeps its CLI conversation and re-owns only the omitted receipts OpenClaw reads', () => {
    const hash = 'b'.repeat(64);
    const receipt = (disposition: string, extra: Record<string, unknown> = {}) => ({ version: 1, promptHash: ` ${hash} `, localSessionId: OLD, userTurnDisposition: disposition, ...extra });
    const bindings = {
      a: { sessionId: 'conv-a', reseedReceipt: receipt('omitted', { note: 'dropped, as OpenClaw rebuilds the receipt' }) },
      b: { sessionId: 'conv-b', reseedReceipt: receipt('persisted') },
      c: { sessionId: 'conv-c', reseedReceipt: receipt('omitted', { version: 2 }) },
      d: { sessionId: 'conv-d', reseedReceipt: receipt('omitted', { promptHash: 'not-a-hash' }) },
      e: { sessionId: 'conv-e' },
    };
    const entry = (): PlannedEntry => ({ sessionId: OLD, updatedAt: 1, cliSessionBindings: structuredClone(bindings), cliSessionIds: { a: 'conv-a' }, claudeCliSessionId: 'conv-a' });
    const SUB = 'agent:main:subagent:s1';
    const kept = rotateEntry(entry(), { sessionKey: SUB, now: NOW, newSessionId: () => 'next', transcriptName: (id) => `${id}.jsonl` }, { reason: 'command', threadId: undefined });
    assert.deepEqual(kept.cliSessionBindings, {
      ...bindings,
      a: { sessionId: 'conv-a', reseedReceipt: { version: 1, promptHash: hash, localSessionId: 'next', userTurnDisposition: 'omitted' } },
    });
    assert.deepEqual([kept.cliSessionIds, kept.claudeCliSessionId], [{ a: 'conv-a' }, 'conv-a']);
    // An expiry, or any other key, ends the conversation.
    const expired = rotateEntry(entry(), { sessionKey: SUB, now: NOW, newSessionId: () => 'next', transcriptName: (id) => `${id}.jsonl` }, { reason: 'idle', threadId: undefined });
    const other = rotateEntry(entry(), { sessionKey: 'agent:main:main', now: NOW, newSessionId: () => 'next', transcriptName: (id) => `${id}.jsonl` }, { reason: 'command', threadId: undefined });
    for (const next of [expired, other]) for (const field of ['cliSessionBindings', 'cliSessionIds', 'claudeCliSessionId']) assert.equal(next[field], undefined, field);
  });

  test('every entry field of sessions.schema.json is either kept by a reset or one of the instance\'s own', () => {
    const schema = JSON.parse(fs.readFileSync(path.join(REPO_ROOT, 'store-format', 'sessions.schema.json'), 'utf8'));
    const fields = Object.keys(schema.definitions.sessionEntry.properties);
    const instanceOnly = new Set(['sessionId', 'sessionFile', 'updatedAt', 'sessionStartedAt', 'lastInteractionAt', 'model', 'modelProvider', 'inputTokens', 'outputTokens', 'totalTokens', 'totalTokensFresh', 'contextTokens']);
    const entry: PlannedEntry = { sessionId: OLD, updatedAt: 1 };
    for (const field of fields) if (!instanceOnly.has(field)) entry[field] = `sample-${field}`;
    const next = rotate(entry);
    for (const field of fields) {
      if (instanceOnly.has(field)) continue;
      assert.equal(next[field], `sample-${field}`, `${field} survives a reset (or belongs in the instance-only list, documented)`);
    }
  });
});
