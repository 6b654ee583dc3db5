// Minimal cases where switchboard once routed differently from OpenClaw, found by a differential fuzz
// and answered by OpenClaw's own resolver (test/fixtures/route-differential.json for agents.list,
// route-current-differential.json for agents.entries, each generated once; see its generatedWith).
// Fed through the real CLI, all eight fields compared exactly.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { REPO_ROOT, jsonLines, runCli, tempDir, writeJson } from '../helpers.js';

interface Differential {
  generatedWith: string;
  configs: { why: string; config: unknown; openclawValid?: false; cases: { input: unknown; expect: Record<string, unknown> }[] }[];
}

const FIELDS = ['agentId', 'channel', 'accountId', 'dmScope', 'sessionKey', 'mainSessionKey', 'lastRoutePolicy', 'matchedBy'];

for (const [fixture, label] of [['route-differential.json', 'differential'], ['route-current-differential.json', 'current differential']]) {
  const vectors = JSON.parse(fs.readFileSync(path.join(REPO_ROOT, 'test', 'fixtures', fixture), 'utf8')) as Differential;
  for (const [i, group] of vectors.configs.entries()) {
    test(`${label} ${i}: ${group.why}`, async () => {
      const dir = tempDir();
      const configFile = writeJson(path.join(dir, 'config.json'), group.config);
      if (group.openclawValid === false) {
        // A config OpenClaw's loader refuses: refused here too, before any line is routed.
        const refused = await runCli(['route', 'resolve', '--batch', '--config', configFile, '--state-dir', dir], { input: '{"channel":"slack"}\n' });
        assert.equal(refused.code, 78, `exit ${refused.code}: ${refused.stdout}${refused.stderr}`);
        assert.equal(refused.stdout, '');
        return;
      }
      const input = group.cases.map((c) => JSON.stringify(c.input)).join('\n') + '\n';
      const result = await runCli(['route', 'resolve', '--batch', '--config', configFile, '--state-dir', dir], { input });
      assert.equal(result.code, 0, `exit ${result.code}: ${result.stderr}`);
      const routes = jsonLines(result.stdout);
      assert.equal(routes.length, group.cases.length, 'one output line per input');
      group.cases.forEach((c, j) => {
        const got = Object.fromEntries(FIELDS.map((f) => [f, routes[j][f]]));
        const want = Object.fromEntries(FIELDS.map((f) => [f, c.expect[f]]));
        assert.deepEqual(got, want, `case ${j}: input ${JSON.stringify(c.input)}`);
      });
    });
  }
}
