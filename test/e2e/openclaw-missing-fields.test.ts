// Entries OpenClaw 2026.7.1's store writer leaves without a sessionId or an updatedAt
// (test/fixtures/openclaw-missing-fields/README.md): doctor names the missing field instead of
// describing an absent value as "undefined undefined", and reads the healthy entry next to them.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import { REPO_ROOT, runCli, tempDir } from '../helpers.js';

const FIXTURE = path.join(REPO_ROOT, 'test', 'fixtures', 'openclaw-missing-fields', 'state');

describe('entries OpenClaw 2026.7.1 wrote without sessionId or updatedAt', () => {
  test('doctor says the field is missing, and finds nothing else wrong', async () => {
    const state = tempDir('sb-openclaw-missing-');
    fs.cpSync(FIXTURE, state, { recursive: true });
    const result = await runCli(['doctor', '--json', '--state-dir', state, '--now', '2026-11-30T08:00:00Z']);
    const report = JSON.parse(result.stdout);
    const problems = report.stores.flatMap((store: { problems: Array<Record<string, unknown>> }) => store.problems);
    const invalid = problems.filter((problem: Record<string, unknown>) => problem.kind === 'invalid-entry');
    const text = invalid.map((problem: Record<string, unknown>) => JSON.stringify(problem));
    assert.equal(invalid.length, 2, JSON.stringify(problems));
    for (const line of text) assert.doesNotMatch(line, /undefined/, line);
    assert.ok(text.some((line: string) => line.includes('sessionId is missing')), text.join('\n'));
    assert.ok(text.some((line: string) => line.includes('updatedAt is missing')), text.join('\n'));
    const listed = await runCli(['sessions', '--json', '--state-dir', state, '--now', '2026-11-30T08:00:00Z']);
    assert.equal(listed.code, 0, listed.stderr);
    assert.doesNotMatch(listed.stderr, /undefined/, listed.stderr);
  });
});
