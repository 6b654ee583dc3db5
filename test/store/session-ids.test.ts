// Which session ids switchboard takes, against what OpenClaw 2026.9.6's own code said of the same
// candidates (test/fixtures/openclaw-session-ids/verdicts.json): exactly the ids OpenClaw accepts
// and writes as they are — letters, digits and marks of any script, NFC, within the byte limit —
// with the transcript names OpenClaw derives from them, every one inside the sessions folder.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import { SwitchboardError } from '../../src/core/index.js';
import { schemaValidator } from '../../src/config/index.js';
import { parseInboundMessage } from '../../src/engine/index.js';
import { isTranscriptFileName, resolveThreadTranscriptPath, resolveTranscriptPath, sessionEntryProblem, validateSessionId } from '../../src/store/index.js';
import { REPO_ROOT } from '../helpers.js';

interface Verdict {
  id: string;
  validateSessionId: string | null;
  transcript: string | null;
  topicTranscript: string | null;
  loaderKeeps: string | null;
}

const VERDICTS: Verdict[] = JSON.parse(fs.readFileSync(path.join(REPO_ROOT, 'test', 'fixtures', 'openclaw-session-ids', 'verdicts.json'), 'utf8'));
const DIR = '/srv/state/agents/main/sessions';
const shown = (id: string): string => JSON.stringify(id.length > 24 ? `${id.slice(0, 12)}…(${id.length})` : id);

/** What OpenClaw accepts and writes as it is (not an id it only takes after trimming it). */
const writtenAsIs = (v: Verdict): boolean => v.validateSessionId === v.id;

function isBadInput(err: unknown): boolean {
  return err instanceof SwitchboardError && err.code === 'BAD_INPUT';
}

/** The store's rule (isSessionId), through the check every path name goes through. */
function accepts(id: string): boolean {
  try {
    return validateSessionId(id) === id;
  } catch (err) {
    if (isBadInput(err)) return false;
    throw err;
  }
}

describe('session ids, as OpenClaw 2026.9.6 accepts them', () => {
  test('the fixture covers both sides: ids of several scripts accepted, unsafe ones refused', () => {
    assert.ok(VERDICTS.filter(writtenAsIs).some((v) => /[^\x00-\x7f]/.test(v.id)), 'non-ASCII ids OpenClaw accepts');
    assert.ok(VERDICTS.filter((v) => v.validateSessionId === null).length >= 10, 'ids OpenClaw refuses');
    // Its store loader keeps exactly the ids its validateSessionId accepts (trimmed as it trims).
    for (const v of VERDICTS) assert.equal(v.loaderKeeps, v.validateSessionId, shown(v.id));
  });

  test('the store takes exactly the ids OpenClaw writes as they are', () => {
    for (const v of VERDICTS) {
      if (writtenAsIs(v) || v.validateSessionId === null) assert.equal(accepts(v.id), writtenAsIs(v), shown(v.id));
      // OpenClaw trims an id first; a stored id with spaces around it is none here (OpenClaw never writes one).
      else assert.equal(accepts(v.id), false, `${shown(v.id)} as stored`);
    }
  });

  test('transcript names are OpenClaw\'s, inside the folder; a topic name over 255 bytes is refused as OpenClaw refuses it', () => {
    for (const v of VERDICTS.filter(writtenAsIs)) {
      const file = resolveTranscriptPath(DIR, v.id);
      assert.equal(path.dirname(file), DIR, shown(v.id));
      assert.equal(path.basename(file), v.transcript, shown(v.id));
      assert.ok(isTranscriptFileName(v.transcript), shown(v.id));
      assert.equal(sessionEntryProblem({ sessionId: v.id, updatedAt: 1, sessionFile: v.transcript }, DIR), null, shown(v.id));
      if (v.topicTranscript === null) {
        assert.throws(() => resolveThreadTranscriptPath(DIR, v.id, '42'), isBadInput, shown(v.id));
      } else {
        const topic = resolveThreadTranscriptPath(DIR, v.id, '42');
        assert.equal(path.dirname(topic), DIR, shown(v.id));
        assert.equal(path.basename(topic), v.topicTranscript, shown(v.id));
        assert.ok(isTranscriptFileName(v.topicTranscript), shown(v.id));
        assert.equal(sessionEntryProblem({ sessionId: v.id, updatedAt: 1, sessionFile: v.topicTranscript }, DIR), null, shown(v.id));
      }
    }
  });

  test('ids OpenClaw refuses are BAD_INPUT for every path and an unusable entry', () => {
    for (const v of VERDICTS.filter((x) => x.validateSessionId === null)) {
      assert.throws(() => validateSessionId(v.id), isBadInput, shown(v.id));
      assert.throws(() => resolveTranscriptPath(DIR, v.id), isBadInput, shown(v.id));
      assert.throws(() => resolveThreadTranscriptPath(DIR, v.id, '1'), isBadInput, shown(v.id));
      assert.equal(sessionEntryProblem({ sessionId: v.id, updatedAt: 1 }, DIR)?.field, 'sessionId', shown(v.id));
      assert.equal(isTranscriptFileName(`${v.id}.jsonl`), false, shown(v.id));
    }
  });

  test('the schemas take the grammar (what a pattern can say: not NFC, bytes or checkpoint names)', () => {
    const sessions = schemaValidator('sessions');
    const header = schemaValidator('transcript-header');
    for (const v of VERDICTS.filter(writtenAsIs)) {
      assert.ok(sessions({ [`agent:main:explicit:x`]: { sessionId: v.id, updatedAt: 1, sessionFile: v.transcript } }), `${shown(v.id)}: ${JSON.stringify(sessions.errors)}`);
      assert.ok(header({ type: 'session', version: 3, id: v.id, timestamp: '2026-11-30T07:00:00.000Z', cwd: '/' }), shown(v.id));
    }
    for (const bad of ['a b', 'a:b', '../x', '.x', '-x', '😀', 'a\u200bb', '\u0301x', 'x'.repeat(129)]) {
      assert.equal(sessions({ 'agent:main:main': { sessionId: bad, updatedAt: 1 } }), false, shown(bad));
      assert.equal(header({ type: 'session', version: 3, id: bad, timestamp: '2026-11-30T07:00:00.000Z', cwd: '/' }), false, shown(bad));
    }
  });

  test('a message\'s sessionId is trimmed, then held to the same rule, as OpenClaw trims what it is given', () => {
    // A blank field is an absent one, as every optional field of a message: no pin.
    for (const v of VERDICTS.filter((x) => x.id.trim() !== '')) {
      const parse = () => parseInboundMessage({ channel: 'webchat', sessionKey: 'agent:main:x', text: 'hi', sessionId: v.id });
      if (v.validateSessionId === null) assert.throws(parse, shown(v.id));
      else assert.equal(parse().sessionId, v.validateSessionId, shown(v.id));
    }
  });
});
