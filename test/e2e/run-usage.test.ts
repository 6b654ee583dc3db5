// A runner's `usage` event fills the entry's model and token counts in OpenClaw's field names,
// shown by `sessions` and `sessions show`; the report is recorded first (issue 13, item 10).

import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { FIXTURES } from '../fixtures/queue-lib.js';
import { jsonLines, runCli, tempDir, writeJson } from '../helpers.js';

function setup(env?: Record<string, string>): { stateDir: string; config: string } {
  const stateDir = tempDir();
  const runner = { command: [process.execPath, path.join(FIXTURES, 'runner-protocol.js'), 'usage'], ...(env ? { env } : {}) };
  const config = writeJson(path.join(stateDir, 'switchboard.json5'), { agents: { defaults: { runner } } });
  return { stateDir, config };
}

const message = (text: string): string => `${JSON.stringify({ channel: 'telegram', peer: 'direct:alice', sender: { id: 'alice', name: 'Alice' }, text })}\n`;

test('a usage report sets model and token counts; listings and show print them; a reset clears the instance counts, model and window', async () => {
  const { stateDir, config } = setup();
  const flags = ['--state-dir', stateDir, '--config', config];
  const ingest = await runCli(['ingest', ...flags], { input: message('hello') });
  assert.equal(ingest.code, 0, ingest.stderr);
  const events = jsonLines(ingest.stdout);
  assert.equal(events.find((e) => e.type === 'reply')?.text, 'usage: hello', ingest.stdout);
  assert.equal(events.filter((e) => e.type === 'run_failed').length, 0, ingest.stdout);

  const listing = await runCli(['sessions', '--json', ...flags]);
  assert.equal(listing.code, 0, listing.stderr);
  const [row] = JSON.parse(listing.stdout).sessions;
  assert.equal(row.model, 'fixture-model-1');
  assert.deepEqual([row.inputTokens, row.outputTokens, row.totalTokens, row.contextTokens], [1200, 34, 16000, 200000]);

  const table = await runCli(['sessions', ...flags]);
  assert.match(table.stdout.split('\n')[0], /Model\s+Tokens\s+Flags/);
  assert.match(table.stdout, /fixture-model-1\s+16k\/200k \(8%\)/);

  const show = await runCli(['sessions', 'show', 'agent:main:main', '--json', ...flags]);
  const { entry, transcriptPath } = JSON.parse(show.stdout);
  assert.equal(entry.model, 'fixture-model-1');
  assert.equal(entry.modelProvider, 'fixture');
  assert.equal(entry.totalTokens, 16000);
  assert.equal(entry.totalTokensFresh, true);
  assert.equal(entry.contextTokens, 200000);
  const text = await runCli(['sessions', 'show', 'agent:main:main', ...flags]);
  assert.match(text.stdout, /tokens\s+context 16k\/200k \(8%\), in 1200, out 34/);

  // Record first: the report is in the transcript, so the entry's copy can be derived from it.
  const records = fs.readFileSync(transcriptPath, 'utf8').trim().split('\n').map((l) => JSON.parse(l));
  const usage = records.find((r) => r.type === 'custom' && r.customType === 'usage');
  assert.ok(usage, 'a usage record');
  assert.equal(usage.data.totalTokens, 16000);
  assert.equal(usage.data.model, 'fixture-model-1');

  const reset = await runCli(['sessions', 'reset', 'agent:main:main', ...flags]);
  assert.equal(reset.code, 0, reset.stderr);
  const after = JSON.parse((await runCli(['sessions', 'show', 'agent:main:main', '--json', ...flags])).stdout).entry;
  // As OpenClaw's reset writes it: an empty context, a known 0 and fresh, not an unknown count.
  assert.deepEqual([after.inputTokens, after.outputTokens, after.totalTokens, after.totalTokensFresh, after.totalTokensVersion], [0, 0, 0, true, 1]);
  // As OpenClaw's reset: the model that ran, its provider and window were the old instance's (docs/decisions.md "What a new instance keeps").
  assert.deepEqual([after.contextTokens, after.model, after.modelProvider], [undefined, undefined, undefined]);
});

test('a usage event with a bad count is a protocol error: the run fails, reported', async () => {
  const { stateDir, config } = setup({ FIXTURE_USAGE: JSON.stringify({ totalTokens: -5 }) });
  const ingest = await runCli(['ingest', '--state-dir', stateDir, '--config', config], { input: message('hello') });
  assert.equal(ingest.code, 0, ingest.stderr);
  const failed = jsonLines(ingest.stdout).find((e) => e.type === 'run_failed');
  assert.equal(failed?.reason, 'protocol', ingest.stdout);
  const entry = JSON.parse((await runCli(['sessions', 'show', 'agent:main:main', '--json', '--state-dir', stateDir, '--config', config])).stdout).entry;
  assert.equal(entry.totalTokens, undefined);
});
