// Privacy: under dmScope "main" every DM sender shares one session. When more than one has
// written, `config validate`, `doctor` and `route explain` warn, name them and suggest per-peer /
// per-channel-peer (issue 13, item 7).

import assert from 'node:assert/strict';
import path from 'node:path';
import { test } from 'node:test';
import { jsonLines, runCli, tempDir, writeJson } from '../helpers.js';

const ndjson = (...lines: unknown[]): string => `${lines.map((l) => JSON.stringify(l)).join('\n')}\n`;
const alice = { channel: 'telegram', peer: 'direct:111', sender: { id: '111', name: 'Alice' }, text: 'hi' };
const bob = { channel: 'slack', peer: 'direct:U9', sender: { id: 'U9', name: 'Bob' }, text: 'hello' };

test('two DM senders in the main session: validate, doctor and explain warn, naming both', async () => {
  const stateDir = tempDir();
  const ingest = await runCli(['ingest', '--state-dir', stateDir], { input: ndjson(alice, alice, bob) });
  assert.equal(ingest.code, 0, ingest.stderr);
  assert.ok(jsonLines(ingest.stdout).every((e) => e.sessionKey === 'agent:main:main'));

  const validate = await runCli(['config', 'validate', '--state-dir', stateDir]);
  assert.equal(validate.code, 0, 'a warning, not an error');
  assert.match(validate.stderr, /warning: .*dmScope is "main": 2 DM senders share agent:main:main/);
  assert.match(validate.stderr, /Alice \(telegram:111\), Bob \(slack:U9\)/);
  assert.match(validate.stderr, /"per-peer".*"per-channel-peer"/);
  const validateJson = JSON.parse((await runCli(['config', 'validate', '--json', '--state-dir', stateDir])).stdout);
  assert.equal(validateJson.warnings.filter((w: string) => w.includes('DM senders share')).length, 1);

  const doctor = await runCli(['doctor', '--json', '--state-dir', stateDir]);
  assert.equal(doctor.code, 0, 'a privacy warning is not a store problem');
  const report = JSON.parse(doctor.stdout);
  assert.equal(report.ok, true);
  const main = report.stores.find((s: { agentId: string }) => s.agentId === 'main');
  assert.ok(main.warnings.some((w: string) => /2 DM senders share agent:main:main.*Alice.*Bob/.test(w)), doctor.stdout);
  const doctorText = await runCli(['doctor', '--state-dir', stateDir]);
  assert.match(doctorText.stdout, /warning: .*DM senders share/);

  const explain = await runCli(['route', 'explain', '--json', '--channel', 'telegram', '--peer', 'direct:111', '--state-dir', stateDir]);
  assert.equal(explain.code, 0, explain.stderr);
  assert.ok(JSON.parse(explain.stdout).warnings.some((w: string) => w.includes('Alice (telegram:111)') && w.includes('Bob (slack:U9)')));
  const explainText = await runCli(['route', 'explain', '--channel', 'telegram', '--peer', 'direct:111', '--state-dir', stateDir]);
  assert.match(explainText.stdout, /warning: .*per-peer/);
});

test('one DM sender: no warning, until route explain looks at a second one; per-peer keeps no shared list', async () => {
  const stateDir = tempDir();
  assert.equal((await runCli(['ingest', '--state-dir', stateDir], { input: ndjson(alice) })).code, 0);
  const validate = JSON.parse((await runCli(['config', 'validate', '--json', '--state-dir', stateDir])).stdout);
  assert.deepEqual(validate.warnings.filter((w: string) => w.includes('DM senders')), []);
  const same = JSON.parse((await runCli(['route', 'explain', '--json', '--channel', 'telegram', '--peer', 'direct:111', '--state-dir', stateDir])).stdout);
  assert.deepEqual(same.warnings.filter((w: string) => w.includes('DM senders')), []);
  // A second person's message would share Alice's conversation: explain says so before it happens.
  const other = JSON.parse((await runCli(['route', 'explain', '--json', '--channel', 'telegram', '--peer', 'direct:999', '--state-dir', stateDir])).stdout);
  assert.ok(other.warnings.some((w: string) => w.includes('Alice (telegram:111), telegram:999')), JSON.stringify(other.warnings));

  const perPeer = tempDir();
  const config = writeJson(path.join(perPeer, 'switchboard.json5'), { session: { dmScope: 'per-peer' } });
  assert.equal((await runCli(['ingest', '--state-dir', perPeer, '--config', config], { input: ndjson(alice, bob) })).code, 0);
  const quiet = JSON.parse((await runCli(['config', 'validate', '--json', '--state-dir', perPeer, '--config', config])).stdout);
  assert.deepEqual(quiet.warnings.filter((w: string) => w.includes('DM senders')), []);
  const listing = JSON.parse((await runCli(['sessions', '--json', '--state-dir', perPeer, '--config', config])).stdout);
  assert.equal(listing.count, 2);
  for (const row of listing.sessions) {
    const { entry } = JSON.parse((await runCli(['sessions', 'show', row.key, '--json', '--state-dir', perPeer, '--config', config])).stdout);
    assert.equal(entry.dmSenders, undefined, 'a per-peer session is one person’s');
  }
});
