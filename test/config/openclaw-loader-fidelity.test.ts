// Config files loaded as OpenClaw loads them, through the real CLI (`config show --json`): each
// folder of test/fixtures/openclaw-config-loader is copied and loaded, and the values must be the
// ones OpenClaw 2026.9.6's own loader produced from the same files and environment (cases.json).
// Found by a differential sweep of the loader: escaped `$include` keys and `${VAR}` references
// were read literally, `env.vars` beat a direct `env` entry, OPENCLAW_INCLUDE_ROOTS entries with
// `~`, blanks or a relative path were ignored, the state dir's .env was read with other rules than
// dotenv's, the .env beside the OpenClaw config (where OpenClaw reads its own) was not read, and
// a "__proto__" entry in `env` made any `${VAR}` an internal error.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import { REPO_ROOT, runCli, tempDir } from '../helpers.js';

const FIXTURES = path.join(REPO_ROOT, 'test', 'fixtures', 'openclaw-config-loader');

interface LoaderCase {
  /** The config file, relative to the case folder (state/openclaw.json when absent). */
  config?: string;
  env: Record<string, string>;
  expect: Record<string, unknown>;
  unset?: string[];
}

const { cases } = JSON.parse(fs.readFileSync(path.join(FIXTURES, 'cases.json'), 'utf8')) as { cases: Record<string, LoaderCase> };

describe('config files load as OpenClaw 2026.9.6 loads them', () => {
  for (const [name, loaderCase] of Object.entries(cases)) {
    test(name, async () => {
      const copy = path.join(tempDir(), name);
      fs.cpSync(path.join(FIXTURES, name), copy, { recursive: true });
      fs.mkdirSync(path.join(copy, 'home'), { recursive: true });
      const env: Record<string, string> = { HOME: path.join(copy, 'home'), OPENCLAW_INCLUDE_ROOTS: '' };
      for (const [key, value] of Object.entries(loaderCase.env)) env[key] = value.replaceAll('<copy>', copy);
      const state = path.join(copy, 'state');
      fs.mkdirSync(state, { recursive: true });
      const config = path.join(copy, loaderCase.config ?? 'state/openclaw.json');
      const result = await runCli(['config', 'show', '--json', '--config', config, '--state-dir', state], { env, cwd: copy });
      assert.equal(result.code, 0, result.stderr);
      const shown = JSON.parse(result.stdout) as { values: { path: string; value: unknown; source: string }[]; warnings: string[] };
      for (const [at, expected] of Object.entries(loaderCase.expect)) {
        const entry = shown.values.find((value) => value.path === at);
        assert.ok(entry, `${at} is shown`);
        assert.equal(entry.source, 'file', at);
        assert.deepEqual(entry.value, expected, at);
      }
      const unsetWarnings = shown.warnings.filter((warning) => warning.startsWith('environment variable '));
      assert.deepEqual(unsetWarnings.map((warning) => warning.split(' ')[2]), loaderCase.unset ?? []);
    });
  }
});

describe('where the config file is', () => {
  test('a leading ~ in --config and SWITCHBOARD_CONFIG is the home folder, as in --state-dir', async () => {
    const home = tempDir();
    fs.mkdirSync(path.join(home, '.openclaw'));
    fs.writeFileSync(path.join(home, '.openclaw', 'openclaw.json'), '{ session: { mainKey: "home" } }');
    const expected = path.join(home, '.openclaw', 'openclaw.json');
    for (const [args, env] of [
      [['--config=~/.openclaw/openclaw.json'], {}],
      [[], { SWITCHBOARD_CONFIG: '~/.openclaw/openclaw.json' }],
    ] as [string[], Record<string, string>][]) {
      const result = await runCli(['config', 'show', '--json', '--state-dir=~/state', ...args], { env: { HOME: home, ...env }, cwd: home });
      assert.equal(result.code, 0, result.stderr);
      const shown = JSON.parse(result.stdout) as { path: string; stateDir: string; values: { path: string; value: unknown }[] };
      assert.equal(shown.path, expected);
      assert.equal(shown.stateDir, path.join(home, 'state'));
      assert.equal(shown.values.find((value) => value.path === 'session.mainKey')?.value, 'home');
    }
  });

  test("the .env beside the OpenClaw file is read after the state dir's: the base of an extends chain, and the state dir's names win", async () => {
    const dir = tempDir();
    fs.mkdirSync(path.join(dir, 'openclaw'));
    fs.mkdirSync(path.join(dir, 'state'));
    fs.writeFileSync(path.join(dir, 'openclaw', 'openclaw.json'), '{ session: { mainKey: "${MAIN}-${OTHER}" } }');
    fs.writeFileSync(path.join(dir, 'openclaw', '.env'), 'MAIN=beside\nOTHER=beside\n');
    fs.writeFileSync(path.join(dir, 'state', '.env'), 'OTHER=state\n');
    fs.writeFileSync(path.join(dir, 'state', 'switchboard.json5'), '{ extends: "../openclaw/openclaw.json" }');
    const result = await runCli(['config', 'show', '--json', '--state-dir', path.join(dir, 'state')], { env: { HOME: dir } });
    assert.equal(result.code, 0, result.stderr);
    const shown = JSON.parse(result.stdout) as { values: { path: string; value: unknown }[] };
    assert.equal(shown.values.find((value) => value.path === 'session.mainKey')?.value, 'beside-state');
  });
});
