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
