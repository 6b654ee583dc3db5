// Stores written by OpenClaw 2026.7.1's own code (test/fixtures/openclaw-store/README.md, "Written by
// OpenClaw's code"): switchboard reads them without a finding and continues them without dropping a
// field, breaking OpenClaw's parentId chain or moving a reply target out of OpenClaw's form.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import { readAsOpenClaw } from '../fixtures/openclaw-reader.js';
import { REPO_ROOT, jsonLines, runCli, tempDir } from '../helpers.js';

const FIXTURES = path.join(REPO_ROOT, 'test', 'fixtures', 'openclaw-store');

/** A private copy of a fixture store, its absolute sessionFile paths moved to the copy (as if written there). */
function copyStore(name: string, writtenAt: string): string {
  const state = tempDir('sb-openclaw-gen-');
  fs.cpSync(path.join(FIXTURES, name), state, { recursive: true });
  for (const agent of fs.readdirSync(path.join(state, 'agents'))) {
    const file = path.join(state, 'agents', agent, 'sessions', 'sessions.json');
    fs.writeFileSync(file, fs.readFileSync(file, 'utf8').split(`${writtenAt}/`).join(`${state}/`));
  }
  return state;
}

type Store = Record<string, Record<string, any>>;
const storeOf = (state: string, agent: string): Store => JSON.parse(fs.readFileSync(path.join(state, 'agents', agent, 'sessions', 'sessions.json'), 'utf8'));
const transcriptOf = (state: string, agent: string, entry: Record<string, any>): string => path.join(state, 'agents', agent, 'sessions', path.basename(String(entry.sessionFile)));
const recordsOf = (file: string): any[] => jsonLines(fs.readFileSync(file, 'utf8'));

/** Everything a message must leave alone in an existing entry: all fields but the ones a turn moves. */
function assertFieldsKept(before: Record<string, any>, after: Record<string, any>, key: string): void {
  const moved = new Set(['updatedAt', 'lastInteractionAt', 'route', 'deliveryContext', 'lastChannel', 'lastTo', 'lastAccountId', 'lastThreadId']);
  for (const [field, value] of Object.entries(before)) {
    assert.ok(field in after, `${key}: ${field} dropped`);
    if (!moved.has(field)) assert.deepEqual(after[field], value, `${key}: ${field} changed`);
  }
}

/** The delivery fields read as one address. */
function assertDeliveryAgrees(entry: Record<string, any>, key: string): void {
  const context = entry.deliveryContext;
  assert.equal(entry.lastChannel, context.channel, `${key}: lastChannel`);
  assert.equal(entry.lastTo, context.to, `${key}: lastTo`);
  assert.equal(entry.lastThreadId, context.threadId, `${key}: lastThreadId`);
  if (entry.route?.target !== undefined) assert.equal(entry.route.target.to, context.to, `${key}: route.target.to`);
}

const OPENCLAW_WROTE_AT = '/tmp/g-harness/ocstore';
const TOPIC = 'agent:main:telegram:group:-100888:topic:42';

describe('a store written by OpenClaw 2026.7.1', () => {
  test('doctor finds nothing, also in a Telegram group row whose deliveryContext has no target', async () => {
    const state = copyStore('by-openclaw', OPENCLAW_WROTE_AT);
    const group = storeOf(state, 'main')['agent:main:telegram:group:-100555'];
    assert.deepEqual(group.deliveryContext, { channel: 'telegram' }, 'the fixture has the row as OpenClaw wrote it');
    const result = await runCli(['doctor', '--json', '--state-dir', state]);
    assert.equal(result.code, 0, result.stdout + result.stderr);
    const report = JSON.parse(result.stdout);
    assert.deepEqual(report.stores.flatMap((store: { problems: unknown[] }) => store.problems), []);
  });

  test('sessions, show and transcript (text and --json) read every row and record', async () => {
    const state = copyStore('by-openclaw', OPENCLAW_WROTE_AT);
    const listed = await runCli(['sessions', '--all-agents', '--json', '--state-dir', state]);
    assert.equal(listed.code, 0, listed.stderr);
    const keys = [...Object.keys(storeOf(state, 'main')), ...Object.keys(storeOf(state, 'work'))];
    assert.equal(keys.length, 9);
    for (const key of keys) assert.ok(listed.stdout.includes(key), `${key} listed`);
    for (const key of keys) {
      const agent = key.split(':')[1];
      const show = await runCli(['sessions', 'show', key, '--state-dir', state]);
      assert.equal(show.code, 0, show.stderr);
      assert.doesNotMatch(show.stdout, /undefined/, `${key}: show prints every field it has`);
      const text = await runCli(['sessions', 'transcript', key, '--state-dir', state]);
      assert.equal(text.code, 0, text.stderr);
      // OpenClaw's headers name no session key: the header line names the one asked for.
      assert.ok(text.stdout.split('\n')[0].includes(`(${key})`), text.stdout.split('\n')[0]);
      const json = await runCli(['sessions', 'transcript', key, '--json', '--state-dir', state]);
      assert.equal(json.code, 0, json.stderr);
      assert.deepEqual(jsonLines(json.stdout), recordsOf(transcriptOf(state, agent, storeOf(state, agent)[key])));
    }
  });

  test('ingest continues every kind of row in its own file and chain, keeps every field, and writes targets in OpenClaw form', async () => {
    const state = copyStore('by-openclaw', OPENCLAW_WROTE_AT);
    const config = path.join(state, 'switchboard.json');
    fs.writeFileSync(config, JSON.stringify({ extends: './openclaw.json', agents: { defaults: { runner: { command: 'builtin:echo' } } } }));
    const cases: Array<{ line: Record<string, unknown>; agent: string; key: string; to: string }> = [
      { line: { channel: 'telegram', peer: { kind: 'direct', id: '111' }, sender: { id: '111', name: 'Alice' } }, agent: 'main', key: 'agent:main:telegram:direct:alice', to: 'telegram:111' },
      { line: { channel: 'telegram', peer: { kind: 'group', id: '-100888' }, threadId: '42', sender: { id: '7', name: 'Bob' } }, agent: 'main', key: TOPIC, to: 'telegram:-100888:topic:42' },
      { line: { channel: 'telegram', peer: { kind: 'group', id: '-100555' }, sender: { id: '7', name: 'Bob' } }, agent: 'main', key: 'agent:main:telegram:group:-100555', to: 'telegram:-100555' },
      { line: { channel: 'slack', peer: { kind: 'channel', id: 'C0GEN' }, threadId: '1750410000.000100', sender: { id: 'U1' } }, agent: 'main', key: 'agent:main:slack:channel:c0gen:thread:1750410000.000100', to: 'channel:C0GEN' },
      { line: { channel: 'discord', peer: { kind: 'direct', id: '333' }, sender: { id: '333' } }, agent: 'work', key: 'agent:work:discord:direct:333', to: 'user:333' },
    ];
    for (const { line, agent, key, to } of cases) {
      const before = storeOf(state, agent)[key];
      const file = transcriptOf(state, agent, before);
      const leaf = recordsOf(file).at(-1).id;
      const result = await runCli(['ingest', '--config', config, '--state-dir', state], { input: `${JSON.stringify({ ...line, text: `switchboard in ${key}` })}\n` });
      assert.equal(result.code, 0, result.stderr);
      const outcome = jsonLines(result.stdout).find((event) => event.type === 'result');
      assert.deepEqual([outcome.sessionKey, outcome.sessionId], [key, before.sessionId], `${key}: the same address and instance`);
      const after = storeOf(state, agent)[key];
      assert.equal(after.sessionFile, before.sessionFile, `${key}: the same file, named as OpenClaw named it`);
      assertFieldsKept(before, after, key);
      assert.equal(after.deliveryContext.to, to, `${key}: target in OpenClaw's form`);
      assertDeliveryAgrees(after, key);
      const added = recordsOf(file).filter((record) => record.message?.runId === outcome.runId || record.message?.content?.[0]?.text === `switchboard in ${key}`);
      assert.equal(added[0].parentId, leaf, `${key}: the first record switchboard adds hangs off OpenClaw's leaf`);
      const reply = jsonLines(result.stdout).find((event) => event.type === 'reply');
      assert.equal(reply.deliveryContext.to, to, `${key}: the reply event carries the same target`);
    }
    for (const agent of ['main', 'work']) assert.deepEqual(readAsOpenClaw(path.join(state, 'agents', agent, 'sessions')).problems, []);
    const doctor = await runCli(['doctor', '--state-dir', state, '--config', config]);
    assert.equal(doctor.code, 0, doctor.stdout + doctor.stderr);
  });
});

const MIXED_WROTE_AT = '/tmp/g-harness/sbstore-a2';

describe('a switchboard store OpenClaw 2026.7.1 has taken turns in', () => {
  test('doctor finds nothing, and the next ingest continues from OpenClaw\'s records', async () => {
    const state = copyStore('switchboard-then-openclaw', MIXED_WROTE_AT);
    const config = path.join(state, 'switchboard.json');
    // OpenClaw's save normalises every row: the cron session (channel "cron", no target) now has
    // deliveryContext {channel: "cron"} and route {channel: "cron"}; that must stay valid.
    assert.deepEqual(storeOf(state, 'main')['agent:main:cron:daily-digest'].deliveryContext, { channel: 'cron' });
    const doctor = await runCli(['doctor', '--state-dir', state, '--config', config]);
    assert.equal(doctor.code, 0, doctor.stdout + doctor.stderr);
    const before = storeOf(state, 'main')[TOPIC];
    assert.ok(path.isAbsolute(before.sessionFile), 'OpenClaw rewrote sessionFile as an absolute path');
    const file = transcriptOf(state, 'main', before);
    const leaf = recordsOf(file).at(-1);
    assert.equal(leaf.message.model, 'delivery-mirror', 'the transcript ends with the mirror OpenClaw appended');
    const result = await runCli(['ingest', '--config', config, '--state-dir', state], {
      input: `${JSON.stringify({ channel: 'telegram', peer: { kind: 'group', id: '-100888' }, threadId: '42', sender: { id: '7', name: 'Bob' }, text: 'back on switchboard' })}\n`,
    });
    assert.equal(result.code, 0, result.stderr);
    const after = storeOf(state, 'main')[TOPIC];
    assert.equal(after.sessionId, before.sessionId);
    assertFieldsKept(before, after, TOPIC);
    assert.equal(after.deliveryContext.to, 'telegram:-100888:topic:42');
    assertDeliveryAgrees(after, TOPIC);
    const records = recordsOf(file);
    const first = records.findIndex((record) => record.id === leaf.id) + 1;
    assert.equal(records[first].parentId, leaf.id);
    assert.deepEqual(readAsOpenClaw(path.join(state, 'agents', 'main', 'sessions')).problems, []);
  });
});
