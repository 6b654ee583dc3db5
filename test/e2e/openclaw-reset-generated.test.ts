// switchboard's resets against OpenClaw's own reset of the same store, through the real binary.
// test/fixtures/openclaw-reset/ holds a sessions.json before a reset and what OpenClaw's code made
// of it (its sessions.reset, 2026.7.1 on the JSON store and 2026.9.6 after importing it; see the
// README there): a new instance's token counts are a known 0, not missing; a subagent session reset
// on request goes on with its CLI backend's conversation, every other new instance starts without.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import { REPO_ROOT, jsonLines, runCli, tempDir } from '../helpers.js';

const FIXTURE = path.join(REPO_ROOT, 'test', 'fixtures', 'openclaw-reset');
/** Where the harness ran OpenClaw 2026.7.1; the copies move the absolute sessionFile paths to their own folder. */
const WRITTEN_IN = '/tmp/oc-harness/r71/state';
const DM = 'agent:main:telegram:direct:111';
const SUBAGENT = 'agent:main:subagent:3f1c2a4b-5d6e-4f70-8a91-b2c3d4e5f607';

type Store = Record<string, Record<string, unknown>>;
const readFixture = (name: string): Store => JSON.parse(fs.readFileSync(path.join(FIXTURE, name), 'utf8'));

function sessionsDir(state: string): string {
  return path.join(state, 'agents', 'main', 'sessions');
}

/** A state dir holding the fixture's store before the reset, with a transcript for every entry. */
function stateBeforeReset(config: Record<string, unknown> = { session: { dmScope: 'per-channel-peer' } }): string {
  const state = tempDir('sb-oc-reset-gen-');
  const dir = sessionsDir(state);
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  fs.writeFileSync(path.join(state, 'switchboard.json5'), JSON.stringify(config));
  const text = fs.readFileSync(path.join(FIXTURE, 'before.json'), 'utf8').split(WRITTEN_IN).join(state);
  fs.writeFileSync(path.join(dir, 'sessions.json'), text, { mode: 0o600 });
  for (const entry of Object.values(JSON.parse(text) as Store)) {
    const header = { type: 'session', version: 3, id: entry.sessionId, timestamp: '2026-11-30T08:00:00.000Z', cwd: '/home/oc' };
    fs.writeFileSync(entry.sessionFile as string, `${JSON.stringify(header)}\n`, { mode: 0o600 });
  }
  return state;
}

function storeOf(state: string): Store {
  return JSON.parse(fs.readFileSync(path.join(sessionsDir(state), 'sessions.json'), 'utf8'));
}

async function cli(args: string[], input?: string): Promise<Record<string, any>[]> {
  const r = await runCli(args, input === undefined ? {} : { input });
  assert.equal(r.code, 0, r.stdout + r.stderr);
  return jsonLines(r.stdout);
}

const USAGE = ['inputTokens', 'outputTokens', 'totalTokens', 'totalTokensFresh', 'totalTokensVersion', 'contextTokens'];
const usageOf = (entry: Record<string, unknown>): Record<string, unknown> => Object.fromEntries(USAGE.map((field) => [field, entry[field]]));

describe('the token counts of a new instance, as OpenClaw\'s reset writes them', () => {
  const before = readFixture('before.json')[DM];
  const openclaw71 = readFixture('after-2026.7.1.json')[DM];
  const openclaw96 = readFixture('after-2026.9.6.json')[DM];

  test('the fixture: OpenClaw zeroes the counts, marks them fresh and drops the window', () => {
    assert.deepEqual(usageOf(before), { inputTokens: 10, outputTokens: 5, totalTokens: 15, totalTokensFresh: true, totalTokensVersion: undefined, contextTokens: 200000 });
    assert.deepEqual(usageOf(openclaw96), { inputTokens: 0, outputTokens: 0, totalTokens: 0, totalTokensFresh: true, totalTokensVersion: 1, contextTokens: undefined });
    assert.deepEqual(usageOf(openclaw71), { ...usageOf(openclaw96), totalTokensVersion: undefined }, '2026.7.1 writes the same counts, without the version it did not have yet');
  });

  for (const [how, run] of [
    ['sessions reset', (state: string) => cli(['sessions', 'reset', DM, '--yes', '--json', '--state-dir', state])],
    ['/new through ingest', (state: string) => cli(['ingest', '--state-dir', state], `${JSON.stringify({ channel: 'telegram', peer: { kind: 'direct', id: '111' }, text: '/new' })}\n`)],
  ] as const) {
    test(`${how} gives the new instance the counts OpenClaw 2026.9.6 gives it`, async () => {
      const state = stateBeforeReset();
      await run(state);
      const entry = storeOf(state)[DM];
      assert.notEqual(entry.sessionId, before.sessionId, 'a new instance');
      assert.deepEqual(usageOf(entry), usageOf(openclaw96));
      // The listing reads them as a known empty context, not as unknown.
      const row = (await cli(['sessions', '--json', '--state-dir', state]))[0].sessions.find((s: { key: string }) => s.key === DM);
      assert.equal(row.totalTokens, 0);
    });
  }

  test('an entry without counts gains none: a store switchboard alone wrote stays as it was', async () => {
    const state = tempDir('sb-oc-reset-gen-');
    fs.writeFileSync(path.join(state, 'switchboard.json5'), JSON.stringify({ session: { dmScope: 'per-channel-peer' } }));
    const dm = (text: string) => `${JSON.stringify({ channel: 'telegram', peer: { kind: 'direct', id: '111' }, text })}\n`;
    await cli(['ingest', '--state-dir', state], dm('hello'));
    await cli(['ingest', '--state-dir', state], dm('/new'));
    assert.deepEqual(usageOf(storeOf(state)[DM]), Object.fromEntries(USAGE.map((field) => [field, undefined])));
  });
});

const CLI = ['cliSessionBindings', 'cliSessionIds', 'claudeCliSessionId'];
const cliOf = (entry: Record<string, unknown>): Record<string, unknown> => Object.fromEntries(CLI.map((field) => [field, entry[field]]));
/** The entry's CLI fields with one sessionId written as another (OpenClaw's new id and switchboard's differ). */
const renamed = (value: unknown, from: unknown, to: unknown): unknown => JSON.parse(JSON.stringify(value).split(JSON.stringify(from)).join(JSON.stringify(to)));

describe('the CLI backend\'s conversation across a reset, as OpenClaw\'s reset keeps or ends it', () => {
  const before = readFixture('before.json');
  const openclaw71 = readFixture('after-2026.7.1.json');
  const openclaw96 = readFixture('after-2026.9.6.json');
  const imported96 = readFixture('imported-2026.9.6.json');

  test('the fixture: OpenClaw keeps a subagent\'s, re-owning the omitted receipt, and clears the DM\'s', () => {
    const sub = openclaw71[SUBAGENT];
    assert.notEqual(sub.sessionId, before[SUBAGENT].sessionId);
    assert.deepEqual([sub.cliSessionIds, sub.claudeCliSessionId], [before[SUBAGENT].cliSessionIds, before[SUBAGENT].claudeCliSessionId]);
    const bindings = sub.cliSessionBindings as Record<string, { reseedReceipt: { localSessionId: string } }>;
    assert.equal(bindings['claude-cli'].reseedReceipt.localSessionId, sub.sessionId, 'the omitted turn belongs to the new instance');
    assert.equal(bindings['codex-cli'].reseedReceipt.localSessionId, before[SUBAGENT].sessionId, 'the persisted one stays with the old transcript');
    assert.deepEqual(cliOf(openclaw71[DM]), { cliSessionBindings: undefined, cliSessionIds: undefined, claudeCliSessionId: undefined });
    // 2026.9.6, on what its import kept: the same.
    assert.deepEqual(cliOf(openclaw96[SUBAGENT]), cliOf(imported96[SUBAGENT]));
    assert.deepEqual(cliOf(openclaw96[DM]), { cliSessionBindings: undefined, cliSessionIds: undefined, claudeCliSessionId: undefined });
  });

  for (const [how, run] of [
    ['sessions reset', (state: string, key: string) => cli(['sessions', 'reset', key, '--yes', '--json', '--state-dir', state])],
    ['/new through ingest', (state: string, key: string) => cli(['ingest', '--state-dir', state], `${JSON.stringify({ channel: 'webchat', sessionKey: key, text: '/new' })}\n`)],
  ] as const) {
    test(`${how}: a subagent session goes on with its CLI conversation, the DM does not — as OpenClaw's reset`, async () => {
      const state = stateBeforeReset();
      await run(state, SUBAGENT);
      await run(state, DM);
      const after = storeOf(state);
      const sub = after[SUBAGENT];
      assert.notEqual(sub.sessionId, before[SUBAGENT].sessionId, 'a new instance');
      // What OpenClaw 2026.7.1 made of the same entry, its new id read as ours.
      assert.deepEqual(cliOf(sub), renamed(cliOf(openclaw71[SUBAGENT]), openclaw71[SUBAGENT].sessionId, sub.sessionId));
      assert.deepEqual(cliOf(after[DM]), cliOf(openclaw71[DM]));
      assert.equal(sub.systemSent, false, 'the rest is a new instance as for any key');
    });
  }

  test('an expiry ends it on every key: a due daily reset by maintain', async () => {
    const state = stateBeforeReset({ session: { dmScope: 'per-channel-peer', reset: { mode: 'daily', atHour: 4, timezone: 'UTC' } } });
    await cli(['maintain', '--json', '--state-dir', state, '--now', '2026-12-04T05:00:00Z']);
    const after = storeOf(state);
    for (const key of [SUBAGENT, DM]) {
      assert.notEqual(after[key].sessionId, before[key].sessionId, `${key} was reset`);
      assert.deepEqual(cliOf(after[key]), { cliSessionBindings: undefined, cliSessionIds: undefined, claudeCliSessionId: undefined }, key);
    }
  });
});
