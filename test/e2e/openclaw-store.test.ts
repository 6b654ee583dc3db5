// A state dir written the way OpenClaw 2026.7.1 writes it (test/fixtures/openclaw-store/README.md):
// every reading command reads it cleanly, doctor finds nothing, and an ingest continues the
// existing session in the same file without dropping a field.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import { REPO_ROOT, copyOpenClawState, jsonLines, runCli } from '../helpers.js';

const FIXTURE = path.join(REPO_ROOT, 'test', 'fixtures', 'openclaw-store', 'state');
/** The state dir OpenClaw wrote the fixture in; its absolute sessionFile paths start with it. */
const WRITTEN_AT = '/home/oc/.openclaw';

function copyFixture(): string {
  return copyOpenClawState(FIXTURE, WRITTEN_AT);
}

function storeOf(state: string, agent: string): Record<string, Record<string, unknown>> {
  return JSON.parse(fs.readFileSync(path.join(state, 'agents', agent, 'sessions', 'sessions.json'), 'utf8'));
}

function recordsOf(file: string): any[] {
  return jsonLines(fs.readFileSync(file, 'utf8'));
}

function transcriptOf(state: string, agent: string, entry: Record<string, unknown>): string {
  const name = path.basename(String(entry.sessionFile));
  return path.join(state, 'agents', agent, 'sessions', name);
}

const AGENTS = ['main', 'work'];

/**
 * The texts OpenClaw 2026.7.1 replays to its model from a transcript: every message except the
 * assistant messages it wrote for the record only (provider "openclaw", model "delivery-mirror"
 * or "gateway-injected") — its rule, restated here.
 */
function replayedTexts(records: any[]): string[] {
  return records
    .filter((record) => record.type === 'message')
    .filter(({ message }) => !(message.role === 'assistant' && message.provider === 'openclaw' && ['delivery-mirror', 'gateway-injected'].includes(message.model)))
    .map(({ message }) => (typeof message.content === 'string' ? message.content : message.content.map((block: any) => block.text ?? `[${block.type}]`).join(' ')));
}

describe('an OpenClaw 2026.7.1 store', () => {
  test('the fixture has what OpenClaw writes: absolute and relative sessionFile, OpenClaw origins, string content, OpenClaw record types', () => {
    const main = JSON.parse(fs.readFileSync(path.join(FIXTURE, 'agents', 'main', 'sessions', 'sessions.json'), 'utf8'));
    const files = Object.values(main).map((entry: any) => entry.sessionFile as string);
    assert.ok(files.some((file) => file.startsWith(`${WRITTEN_AT}/agents/main/sessions/`)));
    assert.ok(files.some((file) => !file.includes('/')));
    assert.ok(Object.values(main).every((entry: any) => entry.origin === undefined || entry.origin.channel === undefined));
    const types = new Set<string>();
    let stringContent = false;
    for (const agent of AGENTS) {
      const dir = path.join(FIXTURE, 'agents', agent, 'sessions');
      for (const name of fs.readdirSync(dir).filter((n) => n.endsWith('.jsonl'))) {
        for (const record of recordsOf(path.join(dir, name))) {
          types.add(record.type === 'message' ? `message:${record.message.role}` : record.type);
          if (record.message?.role === 'user' && typeof record.message.content === 'string') stringContent = true;
        }
      }
    }
    for (const type of ['session', 'model_change', 'thinking_level_change', 'custom', 'message:user', 'message:assistant', 'message:toolResult']) assert.ok(types.has(type), type);
    assert.ok(stringContent);
  });

  test('doctor reports nothing (text and --json)', async () => {
    const state = copyFixture();
    const text = await runCli(['doctor', '--state-dir', state]);
    assert.equal(text.code, 0, text.stdout + text.stderr);
    assert.match(text.stdout, /healthy: 2 store\(s\) checked, no problems/);
    assert.equal(text.stderr, '');
    const json = await runCli(['doctor', '--json', '--state-dir', state]);
    assert.equal(json.code, 0, json.stderr);
    const report = jsonLines(json.stdout)[0];
    assert.equal(report.summary.problems, 0, JSON.stringify(report.stores.map((s: any) => s.problems)));
    assert.deepEqual(report.stores.map((s: any) => [s.agentId, s.sessions]), [['main', 7], ['work', 1]]);
  });

  test('sessions lists every entry as usable, with its transcript', async () => {
    const state = copyFixture();
    const r = await runCli(['sessions', '--all-agents', '--json', '--state-dir', state]);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stderr, '');
    const listing = jsonLines(r.stdout)[0];
    assert.equal(listing.count, 8);
    for (const row of listing.sessions) {
      assert.equal(row.problem, undefined, `${row.key}: ${row.problem}`);
      assert.ok(typeof row.transcriptBytes === 'number' && row.transcriptBytes > 0, row.key);
    }
    const text = await runCli(['sessions', '--all-agents', '--state-dir', state]);
    assert.equal(text.code, 0, text.stderr);
    assert.doesNotMatch(text.stdout, /unusable|no-transcript/);
  });

  test('show and transcript (text and --json) read every session, whatever its content form', async () => {
    const state = copyFixture();
    for (const agent of AGENTS) {
      for (const [key, entry] of Object.entries(storeOf(state, agent))) {
        const file = transcriptOf(state, agent, entry);
        const show = await runCli(['sessions', 'show', key, '--json', '--state-dir', state]);
        assert.equal(show.code, 0, show.stderr);
        const details = jsonLines(show.stdout)[0];
        assert.equal(details.transcriptPath, file);
        assert.deepEqual(details.entry, entry);
        const showText = await runCli(['sessions', 'show', key, '--state-dir', state]);
        assert.equal(showText.code, 0, showText.stderr);

        const records = recordsOf(file);
        const json = await runCli(['sessions', 'transcript', key, '--json', '--state-dir', state]);
        assert.equal(json.code, 0, json.stderr);
        assert.deepEqual(jsonLines(json.stdout), records);

        const text = await runCli(['sessions', 'transcript', key, '--state-dir', state]);
        assert.equal(text.code, 0, `${key}: ${text.stderr}`);
        assert.equal(text.stderr, '');
        const lines = text.stdout.trimEnd().split('\n');
        assert.equal(lines.length, records.length);
        // Every message's text is shown, from a plain string as from text blocks.
        for (const record of records.filter((r) => r.type === 'message')) {
          const content = record.message.content;
          const shown = typeof content === 'string' ? content : content.find((b: any) => b.type === 'text').text;
          assert.ok(text.stdout.includes(shown), `${key}: ${shown}`);
        }
      }
    }
    const cli = await runCli(['sessions', 'transcript', 'agent:work:main', '--agent', 'work', '--state-dir', state]);
    assert.match(cli.stdout, /user: Summarise README\.md in one line\./);
  });

  test('ingest continues the session: same sessionId and file, every field kept, the parentId chain continued', async () => {
    const state = copyFixture();
    const before = storeOf(state, 'main')['agent:main:main']!;
    const file = transcriptOf(state, 'main', before);
    const recordsBefore = recordsOf(file);
    const message = { channel: 'telegram', peer: { kind: 'direct', id: '111' }, sender: { id: '111', name: 'Alice' }, text: 'and the day after?', messageId: 'tg-5002' };
    const r = await runCli(['ingest', '--json', '--state-dir', state], { input: JSON.stringify(message) });
    assert.equal(r.code, 0, r.stderr);
    const result = jsonLines(r.stdout).find((event) => event.type === 'result');
    assert.equal(result.sessionKey, 'agent:main:main');
    assert.equal(result.sessionId, before.sessionId);
    assert.equal(result.persisted, true);

    const after = storeOf(state, 'main')['agent:main:main']!;
    assert.equal(after.sessionId, before.sessionId);
    assert.equal(after.sessionFile, before.sessionFile, 'the absolute path OpenClaw wrote stays as it was');
    // What a new message moves; everything else is exactly as OpenClaw left it.
    const moved = new Set(['updatedAt', 'lastInteractionAt', 'recentMessageIds', 'deliveryContext', 'lastChannel', 'lastTo', 'lastAccountId', 'lastThreadId', 'route']);
    for (const [field, value] of Object.entries(before)) {
      assert.ok(Object.hasOwn(after, field), `${field} was dropped`);
      if (!moved.has(field)) assert.deepEqual(after[field], value, field);
    }

    // The address stays in OpenClaw's target form, and every field that names it agrees.
    const route = after.route as { target: { to: string } };
    assert.deepEqual([(after.deliveryContext as { to: string }).to, after.lastTo, route.target.to], ['telegram:111', 'telegram:111', 'telegram:111']);
    assert.equal(after.lastChannel, 'telegram');

    const recordsAfter = recordsOf(file);
    assert.deepEqual(recordsAfter.slice(0, recordsBefore.length), recordsBefore, 'the records OpenClaw wrote are untouched');
    const added = recordsAfter.slice(recordsBefore.length);
    assert.equal(added.length, 1);
    assert.equal(added[0].parentId, recordsBefore.at(-1).id);
    assert.equal(added[0].message.content[0].text, 'and the day after?');
    assert.equal(fs.readdirSync(path.dirname(file)).filter((n) => n.endsWith('.jsonl')).length, 6, 'no new transcript');

    const doctor = await runCli(['doctor', '--state-dir', state]);
    assert.equal(doctor.code, 0, doctor.stdout);
  });

  test('what switchboard appends is marked the way OpenClaw keeps out of the model context, and continues the parentId chain', async () => {
    const state = copyFixture();
    const before = storeOf(state, 'main')['agent:main:main']!;
    const file = transcriptOf(state, 'main', before);
    const recordsBefore = recordsOf(file);
    // A directive-only message: switchboard answers it (a command reply) and mirrors what it delivered.
    const message = { channel: 'telegram', peer: { kind: 'direct', id: '111' }, sender: { id: '111', name: 'Alice' }, text: '/queue collect', messageId: 'tg-5003' };
    const r = await runCli(['ingest', '--json', '--state-dir', state], { input: JSON.stringify(message) });
    assert.equal(r.code, 0, r.stderr);
    const records = recordsOf(file);
    const added = records.slice(recordsBefore.length);
    assert.deepEqual(added.map((record) => [record.message.role, record.message.provider, record.message.model]), [
      ['user', undefined, undefined],
      ['assistant', 'openclaw', 'gateway-injected'],
      ['assistant', 'openclaw', 'delivery-mirror'],
    ]);
    for (const record of added.slice(1)) assert.deepEqual([record.message.api, record.message.usage.totalTokens, record.message.stopReason], ['openclaw-transcript', 0, 'stop']);
    // The chain, read as OpenClaw reads it: every entry's parent is the one before it.
    records.slice(2).forEach((record, i) => assert.equal(record.parentId, records[i + 1].id, `line ${i + 3}`));
    // What OpenClaw replays to its model: none of what switchboard added.
    assert.deepEqual(replayedTexts(records), replayedTexts(recordsBefore).concat(['/queue collect']));
  });

  test("after OpenClaw's leaf record, an append continues where OpenClaw's own next append would", async () => {
    for (const [leaf, expected] of [
      [{ targetId: '1a2b3c06', appendParentId: '1a2b3c07', appendMode: 'side' }, '1a2b3c07'],
      [{ targetId: '1a2b3c05' }, '1a2b3c05'],
    ] as const) {
      const state = copyFixture();
      const file = transcriptOf(state, 'main', storeOf(state, 'main')['agent:main:main']!);
      const last = recordsOf(file).at(-1);
      fs.appendFileSync(file, `${JSON.stringify({ type: 'leaf', id: '9f9f9f9f', parentId: last.id, timestamp: '2026-06-20T09:01:00.000Z', ...leaf })}\n`);
      const message = { channel: 'telegram', peer: { kind: 'direct', id: '111' }, text: 'after the leaf', messageId: `leaf-${expected}` };
      const r = await runCli(['ingest', '--json', '--state-dir', state], { input: JSON.stringify(message) });
      assert.equal(r.code, 0, r.stderr);
      assert.equal(recordsOf(file).at(-1).parentId, expected);
      const doctor = await runCli(['doctor', '--state-dir', state]);
      assert.equal(doctor.code, 0, doctor.stdout);
    }
  });

  test('an absolute sessionFile outside the sessions folder, or naming a file that is no transcript, is still refused', async () => {
    for (const bad of ['/elsewhere/agents/main/sessions/0197a1b2-0001-7000-8000-00000000a001.jsonl', 'SESSIONS/sessions.json', 'SESSIONS/../../work/sessions/0197a1b2-0001-7000-8000-00000000a001.jsonl']) {
      const state = copyFixture();
      const sessions = path.join(state, 'agents', 'main', 'sessions');
      const store = storeOf(state, 'main');
      store['agent:main:main']!.sessionFile = bad.replace('SESSIONS', sessions);
      fs.writeFileSync(path.join(sessions, 'sessions.json'), JSON.stringify(store, null, 2));
      const doctor = await runCli(['doctor', '--json', '--state-dir', state]);
      assert.equal(doctor.code, 65, bad);
      const problems = jsonLines(doctor.stdout)[0].stores[0].problems;
      assert.ok(problems.some((p: any) => p.kind === 'invalid-entry' && /agent:main:main/.test(p.message)), `${bad}: ${JSON.stringify(problems)}`);
      const show = await runCli(['sessions', 'show', 'agent:main:main', '--state-dir', state]);
      assert.equal(show.code, 65, bad);
    }
  });
});
