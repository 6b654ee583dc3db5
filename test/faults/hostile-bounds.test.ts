// Values at the edges of what the platform holds, found by a hostile-input hunt: each of these
// crashed (INTERNAL, exit 1), hung, lost output silently or deleted what was not ours before.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import { MAX_TIMER_MS, timerDelay } from '../../src/core/index.js';
import { BIN, runCli, tempDir, writeJson } from '../helpers.js';

describe('hostile bounds', () => {
  test('timers never get a delay setTimeout would turn into 1 ms', () => {
    assert.equal(timerDelay(30 * 86_400_000), MAX_TIMER_MS);
    assert.equal(timerDelay(-5), 0);
    assert.equal(timerDelay(Number.NaN), 0);
    assert.equal(timerDelay(250), 250);
  });

  test('locks release refuses a folder that holds more than an owner record, and leaves it whole', async () => {
    const dir = tempDir('sb-foreign-lock-');
    fs.mkdirSync(path.join(dir, 'build.lock', 'sub'), { recursive: true });
    fs.writeFileSync(path.join(dir, 'build.lock', 'sub', 'data'), 'precious');
    const r = await runCli(['locks', 'release', path.join(dir, 'build'), '--force', '--yes', '--json', '--state-dir', path.join(dir, 'state')]);
    assert.equal(r.code, 66, r.stdout + r.stderr);
    assert.match(r.stderr, /no switchboard lock/);
    assert.equal(fs.readFileSync(path.join(dir, 'build.lock', 'sub', 'data'), 'utf8'), 'precious');
  });

  test('--now past the year 9999 is a usage error; a huge idleMinutes is "never", not a crash', async () => {
    const state = tempDir('sb-bounds-');
    const tooLate = await runCli(['send', 'hi', '--channel', 'telegram', '--now', '8640000000000001', '--state-dir', state]);
    assert.equal(tooLate.code, 2, tooLate.stderr);
    // Past the safe integers it is still a time after the clock's end, not "not a time".
    const wayTooLate = await runCli(['send', 'hi', '--channel', 'telegram', '--now', '99999999999999999', '--state-dir', state]);
    assert.equal(wayTooLate.code, 2, wayTooLate.stderr);
    assert.match(wayTooLate.stderr, /after 9999-12-31/);
    const config = writeJson(path.join(state, 'config.json'), { session: { reset: { mode: 'idle', idleMinutes: 1e12 } } });
    const sent = await runCli(['send', 'hi', '--channel', 'telegram', '--state-dir', state, '--config', config]);
    assert.equal(sent.code, 0, sent.stderr);
    const shown = await runCli(['sessions', 'show', 'agent:main:main', '--state-dir', state, '--config', config]);
    assert.equal(shown.code, 0, shown.stderr);
    const json = await runCli(['sessions', 'show', 'agent:main:main', '--json', '--state-dir', state, '--config', config]);
    assert.equal(JSON.parse(json.stdout).freshness.nextResetAt, undefined);
  });

  test('a blank --state-dir or --config is a usage error (it fell back to ~/.switchboard and wrote there)', async () => {
    const home = tempDir('sb-bounds-home-');
    for (const flags of [['--state-dir', ''], ['--state-dir', home, '--config', ' ']]) {
      const r = await runCli(['send', 'hi', '--channel', 'telegram', ...flags], { env: { HOME: home } });
      assert.equal(r.code, 2, `${flags.join(' ')}: ${r.stderr}`);
      assert.match(r.stderr, /path is empty/);
    }
    assert.deepEqual(fs.readdirSync(home), [], 'nothing was written');
  });

  test('stdout that cannot be written (a full disk) is IO, 74; flags that are not digits are usage errors', async () => {
    const state = tempDir('sb-bounds-');
    await runCli(['send', 'hi', '--channel', 'telegram', '--state-dir', state]);
    const fd = fs.openSync('/dev/full', 'w');
    try {
      const r = spawnSync(process.execPath, [BIN, 'sessions', '--json', '--state-dir', state], { stdio: ['ignore', fd, 'pipe'], encoding: 'utf8', timeout: 30_000 });
      assert.equal(r.status, 74, r.stderr);
      assert.match(r.stderr, /writing to stdout failed/);
    } finally {
      fs.closeSync(fd);
    }
    for (const limit of ['', '0x1']) {
      const r = await runCli(['sessions', '--limit', limit, '--state-dir', state]);
      assert.equal(r.code, 2, `--limit "${limit}": ${r.stderr}`);
    }
  });

  test('a state dir where no folder can be made (procfs) fails with IO at once instead of spinning', async () => {
    const r = await runCli(['send', 'hi', '--channel', 'telegram', '--state-dir', '/proc/1'], { timeoutMs: 20_000 });
    assert.equal(r.code, 74, r.stdout + r.stderr);
  });

  test('an agent folder replaced by a plain file: maintain and cleanup fail with IO (74), not INTERNAL, and still report every stage', async () => {
    const state = tempDir('sb-bounds-');
    assert.equal((await runCli(['send', 'hi', '--channel', 'telegram', '--state-dir', state])).code, 0);
    fs.rmSync(path.join(state, 'agents', 'main'), { recursive: true });
    fs.writeFileSync(path.join(state, 'agents', 'main'), 'not a folder');
    const maintain = await runCli(['maintain', '--json', '--state-dir', state]);
    assert.equal(maintain.code, 74, maintain.stdout + maintain.stderr);
    const report = JSON.parse(maintain.stdout);
    assert.equal(report.ok, false);
    assert.ok(report.errors.length > 0);
    for (const error of report.errors) assert.equal(error.code, 'IO', `${error.stage}: ${error.message}`);
    const cleanup = await runCli(['sessions', 'cleanup', '--enforce', '--json', '--state-dir', state]);
    assert.equal(cleanup.code, 74, cleanup.stdout + cleanup.stderr);
    assert.equal(fs.readFileSync(path.join(state, 'agents', 'main'), 'utf8'), 'not a folder', 'left as it was');
  });
});
