// The one rule for OpenClaw's session artifacts (engine/session-artifacts.ts): which names are
// artifacts (OpenClaw's own patterns), and which of them a store keeps.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { isSessionArtifact, storeReferences } from '../../src/engine/session-artifacts.js';
import { parseSessionArtifactName, trajectoryArtifactNames, type SessionStore, type StoreLocation } from '../../src/store/index.js';

const ID = '6398abbc-36d6-4a0f-a43d-1b1faa1a0997';
const CHECKPOINT = 'b0c5658b-21bb-424f-8990-747183ed7b09';
const location: StoreLocation = { agentId: 'main', sessionsDir: '/srv/oc/agents/main/sessions', storePath: '/srv/oc/agents/main/sessions/sessions.json' };

describe('artifact names', () => {
  test('trajectory, pointer and checkpoint names as OpenClaw makes them', () => {
    assert.deepEqual(parseSessionArtifactName(`${ID}.trajectory.jsonl`), { kind: 'trajectory', stem: ID });
    assert.deepEqual(parseSessionArtifactName(`${ID}.trajectory-path.json`), { kind: 'trajectory-pointer', stem: ID });
    assert.deepEqual(parseSessionArtifactName(`${ID}-topic-42.trajectory.jsonl`), { kind: 'trajectory', stem: `${ID}-topic-42` });
    assert.deepEqual(parseSessionArtifactName(`${ID}.checkpoint.${CHECKPOINT}.jsonl`), { kind: 'checkpoint', stem: ID });
    // OpenClaw's pattern is case-insensitive and wants a UUID of versions 1–5.
    assert.deepEqual(parseSessionArtifactName(`${ID}.checkpoint.${CHECKPOINT.toUpperCase()}.jsonl`), { kind: 'checkpoint', stem: ID });
    assert.deepEqual(trajectoryArtifactNames(`${ID}-topic-42.jsonl`), [`${ID}-topic-42.trajectory.jsonl`, `${ID}-topic-42.trajectory-path.json`]);
  });

  test('transcripts, archives and look-alikes are not artifacts', () => {
    for (const name of [
      `${ID}.jsonl`,
      `${ID}-topic-42.jsonl`,
      `${ID}.jsonl.reset.2026-11-30T08-15-45.781Z`,
      `${ID}.trajectory.jsonl.deleted.2026-11-30T08-15-45.781Z`,
      `${ID}.checkpoint.not-a-uuid.jsonl`,
      `${ID}.checkpoint.b0c5658b-21bb-024f-8990-747183ed7b09.jsonl`, // version 0
      '.trajectory.jsonl',
      'sessions.json',
    ]) {
      assert.equal(isSessionArtifact(name, new Set()), false, name);
    }
  });

  test('a transcript an entry names is a transcript, whatever its name looks like', () => {
    // Thread "1700.trajectory" of session ID: its transcript has a trajectory capture's name.
    const name = `${ID}-topic-1700.trajectory.jsonl`;
    assert.equal(isSessionArtifact(name, new Set()), true);
    assert.equal(isSessionArtifact(name, new Set([name])), false);
  });
});

describe('what a store keeps', () => {
  const store = (entries: Record<string, unknown>): SessionStore => entries as SessionStore;

  test('the artifacts of an instance an entry names, and every file its checkpoints list', () => {
    const refs = storeReferences(
      location,
      store({
        'agent:main:main': {
          sessionId: ID,
          updatedAt: 1,
          sessionFile: `${location.sessionsDir}/${ID}.jsonl`,
          compactionCheckpoints: [
            { checkpointId: CHECKPOINT, preCompaction: { sessionId: ID, sessionFile: `${location.sessionsDir}/${ID}.checkpoint.${CHECKPOINT}.jsonl` }, postCompaction: { sessionId: 'b', sessionFile: `${location.sessionsDir}/2026-12-01T00-00-00-000Z_b.jsonl` } },
            null,
            { preCompaction: null },
          ],
        },
        'agent:main:telegram:group:1:topic:42': { sessionId: 'c1', updatedAt: 1, sessionFile: 'c1-topic-42.jsonl' },
      }),
    );
    for (const name of [
      `${ID}.jsonl`,
      `${ID}.trajectory.jsonl`,
      `${ID}.trajectory-path.json`,
      `${ID}.checkpoint.${CHECKPOINT}.jsonl`,
      // A checkpoint of the live instance that the list no longer names: kept all the same (safe side).
      `${ID}.checkpoint.11111111-2222-4333-8444-555555555555.jsonl`,
      '2026-12-01T00-00-00-000Z_b.jsonl',
      'c1-topic-42.jsonl',
      'c1-topic-42.trajectory.jsonl',
      'c1-topic-42.trajectory-path.json',
    ]) {
      assert.equal(refs.isReferenced(name), true, name);
    }
    for (const name of ['old.jsonl', 'old.trajectory.jsonl', 'old.trajectory-path.json', `old.checkpoint.${CHECKPOINT}.jsonl`, 'c1.jsonl.reset.2026-11-30T08-15-45.781Z']) {
      assert.equal(refs.isReferenced(name), false, name);
    }
  });

  test('an entry of the wrong shape still keeps the artifacts of its sessionId, never names a transcript', () => {
    const refs = storeReferences(location, store({ 'agent:main:main': { sessionId: 'w1', updatedAt: 'yesterday' } }));
    assert.equal(refs.transcripts.size, 0);
    assert.equal(refs.isReferenced('w1.trajectory.jsonl'), true);
    assert.equal(refs.isReferenced('w1.jsonl'), false);
  });
});
