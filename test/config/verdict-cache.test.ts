// A config found valid is not checked again while its texts (and the checking build) are the
// same: its digest is kept in <state>/cache/config.verified. What must hold: a changed text is
// checked again (an invalid one still exits 78), a digest is noted only for a valid config, the
// file stays bounded, a damaged or hostile cache file is a miss (never a wait on a FIFO, never a
// write through a link), and a state dir that does not exist is not created for it.

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import { configDigest, knownValid, loadConfig } from '../../src/config/index.js';
import { runCli, tempDir, writeJson } from '../helpers.js';

const valid = { agents: { list: [{ id: 'main', default: true }] }, bindings: [{ agentId: 'main', match: { channel: 'slack' } }] };
const invalid = { bindings: [{ agentId: 'main', match: { channel: 7 } }] };
const cacheOf = (state: string) => path.join(state, 'cache', 'config.verified');

describe('config verdict cache', () => {
  test('a valid config is noted by digest; an edit is checked again; an invalid one is never noted', async () => {
    const state = tempDir();
    const file = writeJson(path.join(state, 'c.json'), valid);
    const loaded = await loadConfig({ configFlag: file, stateDir: state });
    assert.equal(knownValid(state, configDigest(loaded.layers)), true);
    const again = await loadConfig({ configFlag: file, stateDir: state });
    assert.deepEqual(again.config, loaded.config, 'a hit gives the same config');

    writeJson(file, invalid);
    await assert.rejects(loadConfig({ configFlag: file, stateDir: state }), (err: any) => err.code === 'CONFIG_INVALID');
    assert.equal(fs.readFileSync(cacheOf(state), 'utf8').trim().split('\n').length, 1, 'the invalid text was not noted');
    const cli = await runCli(['route', 'resolve', '--channel', 'slack', '--json', '--config', file, '--state-dir', state]);
    assert.equal(cli.code, 78, 'the CLI checks the edited file too');
  });

  test('a noted digest is trusted: the checks are skipped (what a hit saves), for that exact text only', async () => {
    const state = tempDir();
    const file = writeJson(path.join(state, 'c.json'), invalid);
    fs.mkdirSync(path.join(state, 'cache'));
    fs.writeFileSync(cacheOf(state), `${configDigest([{ file, text: fs.readFileSync(file, 'utf8'), data: invalid }])}\n`);
    assert.deepEqual((await loadConfig({ configFlag: file, stateDir: state })).config, invalid);
    fs.appendFileSync(file, ' ');
    await assert.rejects(loadConfig({ configFlag: file, stateDir: state }), (err: any) => err.code === 'CONFIG_INVALID');
  });

  test('at most 8 digests are kept, newest first', async () => {
    const state = tempDir();
    const file = path.join(state, 'c.json');
    const digests: string[] = [];
    for (let i = 0; i < 10; i++) {
      writeJson(file, { ...valid, bindings: [{ agentId: 'main', match: { channel: `c${i}` } }] });
      digests.push(configDigest((await loadConfig({ configFlag: file, stateDir: state })).layers));
    }
    assert.deepEqual(fs.readFileSync(cacheOf(state), 'utf8').trim().split('\n'), digests.slice(2).reverse());
  });

  test('a damaged, oversized or FIFO cache file is a miss, and the config is checked', async () => {
    const state = tempDir();
    const file = writeJson(path.join(state, 'c.json'), invalid);
    fs.mkdirSync(path.join(state, 'cache'));
    const digest = configDigest([{ file, text: fs.readFileSync(file, 'utf8'), data: invalid }]);
    for (const content of [`x${digest}\n`, `${digest}\n`.repeat(100)]) {
      fs.writeFileSync(cacheOf(state), content);
      assert.equal(knownValid(state, digest), false);
    }
    fs.rmSync(cacheOf(state));
    execFileSync('mkfifo', [cacheOf(state)]);
    // A read that waited on the FIFO would hang this test (the CLI is given 10 s).
    const r = await runCli(['route', 'resolve', '--channel', 'slack', '--json', '--config', file, '--state-dir', state], { timeoutMs: 10_000 });
    assert.equal(r.code, 78, r.stderr);
  });

  test('a cache folder that is a link is not written through; a missing state dir is not created', async () => {
    const state = tempDir();
    const elsewhere = tempDir();
    fs.symlinkSync(elsewhere, path.join(state, 'cache'));
    const file = writeJson(path.join(state, 'c.json'), valid);
    await loadConfig({ configFlag: file, stateDir: state });
    assert.deepEqual(fs.readdirSync(elsewhere), []);

    const missing = path.join(tempDir(), 'not-yet');
    await loadConfig({ configFlag: file, stateDir: missing });
    assert.equal(fs.existsSync(missing), false);
  });
});
