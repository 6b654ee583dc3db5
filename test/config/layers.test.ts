// The two-file setup through the real CLI: switchboard.json5 extends an openclaw.json that stays as
// OpenClaw wants it; values name their file; problems name file:line:column; secrets never print.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import { jsonLines, runCli, tempDir } from '../helpers.js';

function errorOf(stderr: string): { code: string; message: string } {
  return JSON.parse(stderr.trim().split('\n').pop()!).error;
}

/** Only keys OpenClaw 2026.9.6 accepts (checked with its own validator when this test was written). */
const OPENCLAW = {
  agents: { ownership: 'explicit', defaults: { systemAgent: { agentId: 'main' } }, entries: { main: { name: 'Assistant' }, work: {} } },
  bindings: [{ agentId: 'work', match: { channel: 'slack', accountId: '*' } }],
  session: { dmScope: 'per-channel-peer' },
  channels: { telegram: { botToken: '123456:SECRET-TOKEN' } },
};

const OVERLAY = `{
  // switchboard's own keys; OpenClaw would refuse them in openclaw.json
  extends: "./openclaw.json",
  agents: { defaults: { runner: { command: "builtin:echo", env: { OPENAI_API_KEY: "sk-very-secret" } } } },
  session: { reset: { mode: "daily", atHour: 4, timezone: "Europe/Berlin" }, writeLock: { staleMs: 20000 } },
}
`;

function pair(overlay = OVERLAY): { dir: string; overlay: string; base: string; baseBytes: string } {
  const dir = tempDir();
  const base = path.join(dir, 'openclaw.json');
  const baseBytes = `${JSON.stringify(OPENCLAW, null, 2)}\n`;
  fs.writeFileSync(base, baseBytes);
  const file = path.join(dir, 'switchboard.json5');
  fs.writeFileSync(file, overlay);
  return { dir, overlay: file, base, baseBytes };
}

describe('switchboard.json5 extends openclaw.json', () => {
  test('routes with the OpenClaw file, adds switchboard keys, and leaves openclaw.json untouched', async () => {
    const { dir, base, baseBytes } = pair();
    // <state>/switchboard.json5 is found without --config.
    const routes = await runCli(['route', 'resolve', '--batch', '--state-dir', dir], { input: '{"channel":"slack","peer":"direct:U1"}\n{"channel":"telegram","peer":"direct:7"}\n' });
    assert.equal(routes.code, 0, routes.stderr);
    const [slack, telegram] = jsonLines(routes.stdout);
    assert.equal(slack.agentId, 'work');
    assert.equal(telegram.agentId, 'main');
    assert.equal(telegram.sessionKey, 'agent:main:telegram:direct:7');
    const ingest = await runCli(['ingest', '--state-dir', dir], { input: '{"channel":"telegram","peer":"direct:7","text":"hi"}\n' });
    assert.equal(ingest.code, 0, ingest.stderr);
    assert.ok(jsonLines(ingest.stdout).some((e) => e.type === 'reply'), 'the overlay runner ran');
    assert.equal(fs.readFileSync(base, 'utf8'), baseBytes);
    const validated = await runCli(['config', 'validate', '--state-dir', dir]);
    assert.equal(validated.code, 0, validated.stderr);
  });

  test('config show names the file each value came from and redacts secrets', async () => {
    const { dir, overlay, base } = pair();
    const r = await runCli(['config', 'show', '--json', '--state-dir', dir]);
    assert.equal(r.code, 0, r.stderr);
    const out = JSON.parse(r.stdout);
    assert.deepEqual(out.files, [base, overlay]);
    const byPath = new Map(out.values.map((v: { path: string }) => [v.path, v]));
    assert.equal((byPath.get('agents.ownership') as { file: string }).file, base);
    assert.equal((byPath.get('session.reset.timezone') as { file: string }).file, overlay);
    assert.equal((byPath.get('session.dmScope') as { file: string }).file, base);
    assert.equal((byPath.get('channels.telegram.botToken') as { value: string }).value, '__OPENCLAW_REDACTED__');
    assert.equal((byPath.get('agents.defaults.runner.env.OPENAI_API_KEY') as { value: string }).value, '__OPENCLAW_REDACTED__');
    for (const secret of ['SECRET-TOKEN', 'sk-very-secret']) assert.ok(!r.stdout.includes(secret));
    const text = await runCli(['config', 'show', '--state-dir', dir]);
    for (const secret of ['SECRET-TOKEN', 'sk-very-secret']) assert.ok(!text.stdout.includes(secret));
    assert.match(text.stdout, /session\.reset\.timezone\s+"Europe\/Berlin"\s+\(switchboard\.json5\)/);
    assert.match(text.stdout, /agents\.ownership\s+"explicit"\s+\(openclaw\.json\)/);
    // Every path is followed by at least two spaces, however long it is.
    for (const line of text.stdout.split('\n').filter((l) => /^[a-z]/.test(l) && l.includes('(') && !l.includes(':'))) {
      assert.match(line, /^\S+ {2,}\S/, line);
    }
  });

  test('a problem in either file is named at that file, line and column', async () => {
    const { dir, base } = pair(OVERLAY.replace('"Europe/Berlin"', '"Mars/Olympus"'));
    const bad = { ...OPENCLAW, bindings: [{ agentId: 'work', match: { channel: 'slack', guild: 'g1' } }] };
    fs.writeFileSync(base, JSON.stringify(bad, null, 2));
    const r = await runCli(['config', 'validate', '--json', '--state-dir', dir]);
    assert.equal(r.code, 78);
    const lines = fs.readFileSync(base, 'utf8').split('\n');
    const row = lines.findIndex((l) => l.includes('"guild"')) + 1;
    const column = lines[row - 1].indexOf('"guild"') + 1;
    assert.match(errorOf(r.stderr).message, new RegExp(`${base.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}:${row}:${column}: bindings\\[0\\]\\.match\\.guild: unknown key`));
    fs.writeFileSync(base, JSON.stringify(OPENCLAW, null, 2));
    const tz = await runCli(['config', 'validate', '--json', '--state-dir', dir]);
    assert.equal(tz.code, 78);
    assert.match(errorOf(tz.stderr).message, /switchboard\.json5:5:\d+: session\.reset\.timezone/);
  });

  test('a missing extends target is NOT_FOUND naming it; a cycle is CONFIG_INVALID', async () => {
    const { dir, overlay } = pair(OVERLAY.replace('./openclaw.json', './nope.json'));
    const missing = await runCli(['route', 'resolve', '--json', '--channel', 'x', '--state-dir', dir]);
    assert.equal(missing.code, 66);
    assert.match(errorOf(missing.stderr).message, /nope\.json/);
    fs.writeFileSync(overlay, '{ extends: "./switchboard.json5" }');
    const cycle = await runCli(['route', 'resolve', '--json', '--channel', 'x', '--state-dir', dir]);
    assert.equal(cycle.code, 78);
    assert.match(errorOf(cycle.stderr).message, /cycle/);
  });

  test('with only <state>/openclaw.json, switchboard reads it as it is', async () => {
    const dir = tempDir();
    fs.writeFileSync(path.join(dir, 'openclaw.json'), JSON.stringify(OPENCLAW));
    const r = await runCli(['route', 'resolve', '--json', '--channel', 'slack', '--state-dir', dir]);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(JSON.parse(r.stdout).agentId, 'work');
  });
});

describe('config paths that are no regular file, and keys named like Object.prototype members', () => {
  test('a FIFO or a device as the config, or as what it extends: IO (74) at once, naming it — never a wait or an endless read', async () => {
    const dir = tempDir();
    const fifo = path.join(dir, 'fifo.json5');
    (await import('node:child_process')).execFileSync('mkfifo', [fifo]);
    const extendsFifo = path.join(dir, 'extends-fifo.json5');
    fs.writeFileSync(extendsFifo, '{extends: "./fifo.json5"}');
    const extendsZero = path.join(dir, 'extends-zero.json5');
    fs.writeFileSync(extendsZero, '{extends: "/dev/zero"}');
    for (const [config, named, kind] of [
      [fifo, fifo, 'FIFO'],
      [extendsFifo, fifo, 'FIFO'],
      ['/dev/zero', '/dev/zero', 'device'],
      [extendsZero, '/dev/zero', 'device'],
    ]) {
      const r = await runCli(['config', 'validate', '--json', '--config', config, '--state-dir', dir], { timeoutMs: 20_000 });
      assert.equal(r.signal, null, `${config}: had to be killed`);
      assert.equal(r.code, 74, `${config}: ${r.stderr}`);
      const error = errorOf(r.stderr);
      assert.equal(error.code, 'IO');
      assert.ok(error.message.includes(named) && error.message.includes(kind), error.message);
    }
  });

  test('a config past 64 MiB is CONFIG_INVALID (78) before it is read', async () => {
    const dir = tempDir();
    const huge = path.join(dir, 'huge.json');
    fs.writeFileSync(huge, '{}');
    fs.truncateSync(huge, 64 * 1024 * 1024 + 1); // sparse: no 64 MiB written
    const r = await runCli(['config', 'validate', '--json', '--config', huge, '--state-dir', dir]);
    assert.equal(r.code, 78, r.stderr);
    assert.match(errorOf(r.stderr).message, /more than the 67108864/);
  });

  test('unknown keys called toString, constructor, valueOf or __proto__ are reported like any other unknown key', async () => {
    const dir = tempDir();
    const config = path.join(dir, 'config.json');
    fs.writeFileSync(config, '{"toString":1,"__proto__":{"x":1},"session":{"dmScope":"per-peer","valueOf":2,"constructor":4},"agents":{"list":[{"id":"a","hasOwnProperty":"x"}]}}');
    const r = await runCli(['config', 'validate', '--json', '--config', config, '--state-dir', dir]);
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(JSON.parse(r.stdout).unusedKeys.sort(), ['__proto__', 'agents.list[0].hasOwnProperty', 'session.constructor', 'session.valueOf', 'toString']);
  });
});
