// A store whose session ids are in other scripts, as OpenClaw 2026.9.6's own store writer wrote it
// (test/fixtures/openclaw-session-ids/sessions.json, no sessionFile: readers use <id>.jsonl),
// through the real binary: every session is usable — doctor finds nothing, listings and show
// have it, ingest appends to OpenClaw's transcript name — and a reset mints a lower-case uuid.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { REPO_ROOT, jsonLines, runCli, tempDir } from '../helpers.js';

const FIXTURE = path.join(REPO_ROOT, 'test', 'fixtures', 'openclaw-session-ids');
type Store = Record<string, { sessionId: string }>;

function stateWithOpenClawStore(): { state: string; dir: string; store: Store } {
  const state = tempDir('sb-oc-ids-');
  const dir = path.join(state, 'agents', 'main', 'sessions');
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  fs.copyFileSync(path.join(FIXTURE, 'sessions.json'), path.join(dir, 'sessions.json'));
  fs.chmodSync(path.join(dir, 'sessions.json'), 0o600);
  const store: Store = JSON.parse(fs.readFileSync(path.join(dir, 'sessions.json'), 'utf8'));
  // Each transcript under the name OpenClaw derives (verdicts.json `transcript`), its header as OpenClaw writes it.
  const verdicts: { id: string; transcript: string | null }[] = JSON.parse(fs.readFileSync(path.join(FIXTURE, 'verdicts.json'), 'utf8'));
  for (const { sessionId } of Object.values(store)) {
    const name = verdicts.find((v) => v.id === sessionId)?.transcript;
    assert.ok(name, sessionId);
    const header = { type: 'session', version: 3, id: sessionId, timestamp: '2026-11-30T08:00:00.000Z', cwd: '/home/oc' };
    fs.writeFileSync(path.join(dir, name), `${JSON.stringify(header)}\n`, { mode: 0o600 });
  }
  return { state, dir, store };
}

test('sessions whose ids OpenClaw wrote in other scripts are usable sessions', async () => {
  const { state, dir, store } = stateWithOpenClawStore();
  assert.ok(Object.values(store).some((e) => /[^\x00-\x7f]/.test(e.sessionId)), 'the fixture has non-ASCII ids');
  const doctor = await runCli(['doctor', '--json', '--state-dir', state]);
  assert.equal(doctor.code, 0, doctor.stdout + doctor.stderr);

  const rows: { key: string; sessionId: string; problem?: string; flags?: string[] }[] = jsonLines((await runCli(['sessions', '--json', '--limit', 'all', '--state-dir', state])).stdout)[0].sessions;
  for (const [key, entry] of Object.entries(store)) {
    const row = rows.find((r) => r.key === key);
    assert.equal(row?.sessionId, entry.sessionId, key);
    assert.equal(row?.problem, undefined, `${entry.sessionId}: ${JSON.stringify(row)}`);
    assert.ok(!(row?.flags ?? []).includes('unusable'), entry.sessionId);
  }

  const [key, { sessionId }] = Object.entries(store).find(([, e]) => e.sessionId === '日本語-1')!;
  const show = await runCli(['sessions', 'show', key, '--json', '--state-dir', state]);
  assert.equal(show.code, 0, show.stderr);
  assert.equal(jsonLines(show.stdout)[0].entry.sessionId, sessionId);
  // Pinned to the instance by its id, as a message may be.
  const ingest = await runCli(['ingest', '--state-dir', state], { input: `${JSON.stringify({ channel: 'webchat', sessionKey: key, sessionId, text: 'こんにちは' })}\n` });
  assert.equal(ingest.code, 0, ingest.stdout + ingest.stderr);
  assert.equal(jsonLines(ingest.stdout).find((e) => e.type === 'result').sessionId, sessionId);
  const records = fs.readFileSync(path.join(dir, `${sessionId}.jsonl`), 'utf8').trim().split('\n').map((line) => JSON.parse(line));
  assert.equal(records.at(-1).message.content[0].text, 'こんにちは', 'appended to OpenClaw\'s transcript');

  const reset = await runCli(['sessions', 'reset', key, '--yes', '--json', '--state-dir', state]);
  assert.equal(reset.code, 0, reset.stderr);
  assert.match(jsonLines(reset.stdout)[0].sessionId, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/, 'switchboard mints lower-case uuids');
  assert.ok(fs.readdirSync(dir).some((name) => name.startsWith(`${sessionId}.jsonl.reset.`)), 'the old transcript is archived under its own name');
  const after = await runCli(['doctor', '--json', '--state-dir', state]);
  assert.equal(after.code, 0, after.stdout + after.stderr);
});

test('an id OpenClaw refuses stays an unusable entry (a decomposed é, a format character, a mark first)', async () => {
  for (const bad of ['cafe\u0301', 'a\u200bb', '\u0301x', `${'é'.repeat(125)}`]) {
    const { state, dir, store } = stateWithOpenClawStore();
    const [key] = Object.keys(store);
    store[key].sessionId = bad;
    fs.writeFileSync(path.join(dir, 'sessions.json'), JSON.stringify(store));
    const show = await runCli(['sessions', 'show', key, '--json', '--state-dir', state]);
    assert.equal(show.code, 65, `${JSON.stringify(bad)}: ${show.stderr}`);
  }
});
