// OpenClaw's own route vectors, fed through the real CLI: every config as a config file, every
// input through `route resolve --batch`, all eight fields compared exactly.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { REPO_ROOT, jsonLines, runCli, tempDir, writeJson } from '../helpers.js';

interface Vectors {
  total?: number;
  configs: { config: unknown; cases: { input: unknown; expect: Record<string, unknown> }[] }[];
}

// A copy of ../shared/conformance/route-public.json: tests never read outside the repository.
const vectorFile = path.join(REPO_ROOT, 'test', 'fixtures', 'route-public.json');
const vectors = JSON.parse(fs.readFileSync(vectorFile, 'utf8')) as Vectors;
const FIELDS = ['agentId', 'channel', 'accountId', 'dmScope', 'sessionKey', 'mainSessionKey', 'lastRoutePolicy', 'matchedBy'];

test('conformance file is present and non-empty', () => {
  const cases = vectors.configs.reduce((n, c) => n + c.cases.length, 0);
  assert.ok(cases > 0);
  if (vectors.total !== undefined) assert.equal(cases, vectors.total);
});

test('every conformance vector resolves identically through route resolve --batch', async () => {
  const dir = tempDir();
  let checked = 0;
  for (const [i, group] of vectors.configs.entries()) {
    const configFile = writeJson(path.join(dir, `config-${i}.json`), group.config);
    const input = group.cases.map((c) => JSON.stringify(c.input)).join('\n') + '\n';
    const result = await runCli(['route', 'resolve', '--batch', '--config', configFile, '--state-dir', dir], { input });
    assert.equal(result.code, 0, `config ${i}: exit ${result.code}: ${result.stderr}`);
    const routes = jsonLines(result.stdout);
    assert.equal(routes.length, group.cases.length, `config ${i}: one output line per input`);
    group.cases.forEach((c, j) => {
      const got = Object.fromEntries(FIELDS.map((f) => [f, routes[j][f]]));
      const want = Object.fromEntries(FIELDS.map((f) => [f, c.expect[f]]));
      assert.deepEqual(got, want, `config ${i} case ${j}: input ${JSON.stringify(c.input)}`);
      checked++;
    });
  }
  assert.equal(checked, vectors.configs.reduce((n, c) => n + c.cases.length, 0));
});

interface CurrentVectors {
  generatedWith: string;
  configs: {
    config: unknown;
    openclawValid?: boolean;
    issues?: { path: string; message: string }[];
    cases: { input: unknown; expect: Record<string, unknown> }[];
  }[];
}

// A copy of ../shared/conformance/route-current-public.json (OpenClaw 2026.9.6's agents.entries format).
const currentVectors = JSON.parse(fs.readFileSync(path.join(REPO_ROOT, 'test', 'fixtures', 'route-current-public.json'), 'utf8')) as CurrentVectors;

test('current-format vectors: every valid config resolves as OpenClaw 2026.9.6, refusals included', async () => {
  const dir = tempDir();
  let checked = 0;
  let refused = 0;
  for (const [i, group] of currentVectors.configs.entries()) {
    if (group.openclawValid === false) continue;
    const configFile = writeJson(path.join(dir, `current-${i}.json`), group.config);
    const input = group.cases.map((c) => JSON.stringify(c.input)).join('\n') + '\n';
    const result = await runCli(['route', 'resolve', '--batch', '--config', configFile, '--state-dir', dir], { input });
    const refusals = group.cases.filter((c) => 'error' in c.expect).length;
    // A refused line fails that line only; the batch ends with NO_OWNER's exit code (78), as ingest does.
    assert.equal(result.code, refusals > 0 ? 78 : 0, `config ${i}: exit ${result.code}: ${result.stderr}`);
    const routes = jsonLines(result.stdout);
    assert.equal(routes.length, group.cases.length, `config ${i}: one output line per input`);
    group.cases.forEach((c, j) => {
      const where = `config ${i} case ${j}: input ${JSON.stringify(c.input)}`;
      if ('error' in c.expect) {
        const error = routes[j].error as { code?: string; line?: number } | undefined;
        assert.equal(error?.code, 'NO_OWNER', `${where}: expected a refusal, got ${JSON.stringify(routes[j])}`);
        assert.equal(error?.line, j + 1, where);
        refused++;
      } else {
        const got = Object.fromEntries(FIELDS.map((f) => [f, routes[j][f]]));
        const want = Object.fromEntries(FIELDS.map((f) => [f, c.expect[f]]));
        assert.deepEqual(got, want, where);
      }
      checked++;
    });
  }
  assert.ok(refused > 0, 'the vectors include refusals');
  assert.equal(checked, currentVectors.configs.filter((g) => g.openclawValid !== false).reduce((n, g) => n + g.cases.length, 0));
});

test('current-format vectors: every config OpenClaw refuses is refused with CONFIG_INVALID (78)', async () => {
  const dir = tempDir();
  const invalid = currentVectors.configs.filter((g) => g.openclawValid === false);
  assert.ok(invalid.length > 0);
  for (const [i, group] of invalid.entries()) {
    const configFile = writeJson(path.join(dir, `invalid-${i}.json`), group.config);
    const input = group.cases.map((c) => JSON.stringify(c.input)).join('\n') + '\n';
    const resolved = await runCli(['route', 'resolve', '--batch', '--json', '--config', configFile, '--state-dir', dir], { input });
    const why = `invalid config ${i} (OpenClaw: ${JSON.stringify(group.issues)}): exit ${resolved.code}, ${resolved.stdout}${resolved.stderr}`;
    assert.equal(resolved.code, 78, why);
    assert.equal((JSON.parse(resolved.stderr) as { error: { code: string } }).error.code, 'CONFIG_INVALID', why);
    assert.equal(resolved.stdout, '', why);
    const validated = await runCli(['config', 'validate', '--config', configFile, '--state-dir', dir]);
    assert.equal(validated.code, 78, why);
  }
});
