// The CLI contract: exit codes, JSON errors on stderr, help with an example on every command.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import type { Command } from 'commander';
import { buildProgram } from '../../src/cli/main.js';
import { processStreams } from '../../src/cli/output.js';
import { jsonLines, runCli, tempDir } from '../helpers.js';

describe('cli contract', () => {
  test('an unknown option is USAGE, exit 2, JSON on stderr with --json', async () => {
    const r = await runCli(['route', 'resolve', '--channel', 'x', '--bogus', '--json']);
    assert.equal(r.code, 2);
    assert.equal(JSON.parse(r.stderr.trim()).error.code, 'USAGE');
    assert.equal(r.stdout, '');
  });

  test('a blank --agent or --store is USAGE wherever a command selects stores (never the default agent)', async () => {
    const state = tempDir();
    for (const args of [
      ['sessions', '--agent', ''],
      ['sessions', '--agent', '  '],
      ['sessions', 'show', 'agent:main:main', '--agent', ''],
      ['sessions', 'cleanup', '--dry-run', '--store', ''],
      ['doctor', '--agent', ''],
      ['doctor', '--agent', 'main', '--all-agents'],
    ]) {
      const r = await runCli([...args, '--state-dir', state, '--json']);
      assert.equal(r.code, 2, `${args.join(' ')}: ${r.stderr}`);
      assert.equal(JSON.parse(r.stderr.trim()).error.code, 'USAGE');
    }
  });

  test('an --agent that names no agent is NOT_FOUND, naming what was typed and how it was read', async () => {
    const r = await runCli(['sessions', '--agent', '../Zed', '--state-dir', tempDir(), '--json']);
    assert.equal(r.code, 66);
    const { error } = JSON.parse(r.stderr.trim());
    assert.equal(error.code, 'NOT_FOUND');
    assert.match(error.message, /"\.\.\/Zed" \(read as "zed"\)/);
  });

  test('with --json every error on stderr is one object {error: {code, message, hint}}, whatever failed', async () => {
    const state = tempDir();
    const cases: [string[], string, number][] = [
      [['bogus'], 'USAGE', 2],
      [['route', 'resolve', '--channel', 'x', '--bogus'], 'USAGE', 2],
      [['sessions', '--limit', 'abc'], 'USAGE', 2],
      [['queue', 'abort'], 'USAGE', 2],
      [['ingest', path.join(state, 'no-such-file.ndjson')], 'NOT_FOUND', 66],
      [['ingest', state], 'IO', 74],
    ];
    for (const [args, code, exit] of cases) {
      const r = await runCli([...args, '--json', '--state-dir', state]);
      assert.equal(r.code, exit, args.join(' '));
      assert.equal(r.stdout, '', args.join(' '));
      const lines = r.stderr.trim().split('\n');
      assert.equal(lines.length, 1, `${args.join(' ')}: ${r.stderr}`);
      const error = JSON.parse(lines[0]!).error;
      assert.equal(error.code, code, args.join(' '));
      assert.equal(typeof error.message, 'string');
      assert.equal(typeof error.hint, 'string', `${args.join(' ')} has a hint`);
      assert.ok(error.hint.length > 0);
    }
  });

  test('a usage error an action finds (--limit abc) names the command\'s --help, in text as with --json', async () => {
    const state = tempDir();
    const text = await runCli(['sessions', '--limit', 'abc', '--state-dir', state]);
    assert.equal(text.code, 2);
    assert.match(text.stderr, /^hint: run `switchboard sessions --help` for usage$/m);
    const json = await runCli(['sessions', '--limit', 'abc', '--json', '--state-dir', state]);
    assert.equal(JSON.parse(json.stderr.trim()).error.hint, 'run `switchboard sessions --help` for usage');
  });

  test('a command group without its subcommand is USAGE (2); with --json stderr is the JSON error alone, naming the group', async () => {
    for (const group of [[], ['config'], ['route'], ['sessions', 'cleanup', 'bogus']]) {
      const r = await runCli([...group, '--json', '--state-dir', tempDir()]);
      assert.equal(r.code, 2, group.join(' '));
      assert.equal(r.stdout, '');
      const lines = r.stderr.trim().split('\n');
      assert.equal(lines.length, 1, `${group.join(' ')}: ${r.stderr}`);
      const error = JSON.parse(lines[0]!).error;
      assert.equal(error.code, 'USAGE');
      assert.doesNotMatch(error.message, /outputHelp/);
      assert.match(error.hint, new RegExp(`switchboard ${group.slice(0, 1).join(' ')}`.trim()));
    }
    const text = await runCli(['config']);
    assert.equal(text.code, 2);
    assert.match(text.stderr, /Usage: switchboard config/);
  });

  test('a bad --now is USAGE', async () => {
    const r = await runCli(['route', 'resolve', '--channel', 'x', '--now', 'yesterday', '--json']);
    assert.equal(r.code, 2);
    assert.equal(JSON.parse(r.stderr.trim()).error.code, 'USAGE');
  });

  test('a --now or SWITCHBOARD_NOW that is not on the calendar is USAGE, not a rolled-over date', async () => {
    for (const now of ['2026-02-30', '2026-11-30T24:00:00Z', '2026-11-30 (note)']) {
      const flag = await runCli(['route', 'resolve', '--channel', 'x', '--now', now, '--json', '--state-dir', tempDir()]);
      assert.equal(flag.code, 2, now);
      assert.equal(JSON.parse(flag.stderr.trim()).error.code, 'USAGE', now);
      assert.equal(flag.stdout, '');
      const env = await runCli(['route', 'resolve', '--channel', 'x', '--json', '--state-dir', tempDir()], { env: { SWITCHBOARD_NOW: now } });
      assert.equal(env.code, 2, `SWITCHBOARD_NOW=${now}`);
      assert.equal(JSON.parse(env.stderr.trim()).error.code, 'USAGE');
    }
  });

  test('a blank --channel is a usage error (2) naming --channel, for route resolve, route explain and send; nothing is written', async () => {
    const state = tempDir();
    for (const args of [['route', 'resolve'], ['route', 'explain'], ['send', 'hello']]) {
      for (const channel of ['', '   ']) {
        const r = await runCli([...args, '--channel', channel, '--json', '--state-dir', state]);
        assert.equal(r.code, 2, `${args.join(' ')} --channel "${channel}"`);
        assert.equal(r.stdout, '');
        const error = JSON.parse(r.stderr.trim()).error;
        assert.equal(error.code, 'USAGE');
        assert.match(error.message, /--channel/);
      }
    }
    assert.equal(fs.existsSync(path.join(state, 'agents')), false);
  });

  test('send: a message its flags cannot make (unknown --kind, empty TEXT, --kind cron without --cron-job) is a usage error (2), nothing is written', async () => {
    const state = tempDir();
    for (const args of [['hello', '--kind', 'bogus'], [''], ['hello', '--kind', 'cron']]) {
      const r = await runCli(['send', ...args, '--channel', 'telegram', '--peer', 'direct:1', '--json', '--state-dir', state]);
      assert.equal(r.code, 2, `send ${args.join(' ')}: ${r.stdout}${r.stderr}`);
      assert.equal(r.stdout, '', 'no event: the command line was refused, not a line of input');
      assert.equal(JSON.parse(r.stderr.trim()).error.code, 'USAGE');
    }
    assert.equal(fs.existsSync(path.join(state, 'agents')), false);
    const sent = await runCli(['send', 'hello', '--kind', 'heartbeat', '--channel', 'telegram', '--peer', 'direct:1', '--state-dir', state]);
    assert.equal(sent.code, 0, sent.stderr);
  });

  test('a bad --peer is a usage error (2) naming the field; an empty id is refused', async () => {
    for (const peer of ['room:1', 'direct:', 'direct']) {
      const r = await runCli(['route', 'resolve', '--channel', 'x', '--peer', peer, '--json', '--state-dir', tempDir()]);
      assert.equal(r.code, 2, peer);
      const error = JSON.parse(r.stderr.trim()).error;
      assert.equal(error.code, 'USAGE');
      assert.match(error.message, /--peer/);
    }
  });

  test('--batch reports bad lines in place and exits 65 at the end, good lines still answered', async () => {
    const input = ['{"channel":"a"}', '{"channel":', '', '{"peer":"direct:1"}', '{"channel":"b","peer":{"kind":"dm","id":"7"}}'].join('\n');
    const r = await runCli(['route', 'resolve', '--batch', '--state-dir', tempDir()], { input });
    assert.equal(r.code, 65);
    const lines = jsonLines(r.stdout);
    assert.equal(lines.length, 4);
    assert.equal(lines[0].channel, 'a');
    assert.deepEqual([lines[1].error.code, lines[1].error.line], ['BAD_INPUT', 2]);
    assert.deepEqual([lines[2].error.code, lines[2].error.line], ['BAD_INPUT', 4]);
    assert.equal(lines[3].channel, 'b');
  });

  test('--batch rejects lines over 1 MiB and invalid UTF-8 without stopping', async () => {
    const huge = `{"channel":"${'x'.repeat(1024 * 1024 + 10)}"}`;
    const input = Buffer.concat([Buffer.from(`${huge}\n`), Buffer.from([0x7b, 0xff, 0xfe, 0x7d, 0x0a]), Buffer.from('{"channel":"ok"}\n')]);
    const r = await runCli(['route', 'resolve', '--batch', '--state-dir', tempDir()], { input });
    assert.equal(r.code, 65);
    const lines = jsonLines(r.stdout);
    assert.deepEqual(lines.map((l) => l.error?.line ?? l.channel), [1, 2, 'ok']);
  });

  test('--batch prints escaped ids back as JSON.stringify would, lines with and without escapes alike', async () => {
    const ids = ['plain-1', 'quo"te', 'back\\slash', 'tab\there', 'lone \ud800', 'h\u00e9llo \u2028 x', 'Mixed-CASE'];
    const inputs = ids.map((id) => ({ channel: 'slack', peer: { kind: 'direct', id }, threadId: id }));
    const state = tempDir();
    fs.writeFileSync(path.join(state, 'switchboard.json5'), JSON.stringify({ session: { dmScope: 'per-peer' } }));
    const r = await runCli(['route', 'resolve', '--batch', '--state-dir', state], { input: inputs.map((i) => JSON.stringify(i)).join('\n') });
    assert.equal(r.code, 0, r.stderr);
    const printed = r.stdout.trimEnd().split('\n');
    assert.equal(printed.length, ids.length);
    printed.forEach((line, i) => {
      const route = JSON.parse(line);
      const id = ids[i].trim().toLowerCase();
      assert.equal(route.sessionKey, `agent:main:direct:${id}:thread:${id}`);
      assert.equal(line, JSON.stringify(route), ids[i]);
    });
  });

  test('every command has help with an example', async () => {
    // Walk the real program so that a command added later cannot skip this check.
    const program = await buildProgram(processStreams(), () => undefined);
    const commands: string[][] = [[]];
    const walk = (command: Command, prefix: string[]) => {
      for (const sub of command.commands) {
        if (sub.name() === 'help') continue;
        commands.push([...prefix, sub.name()]);
        walk(sub, [...prefix, sub.name()]);
      }
    };
    walk(program, []);
    assert.ok(commands.length > 15, `found ${commands.length} commands`);
    for (const command of commands) {
      const r = await runCli([...command, '--help']);
      assert.equal(r.code, 0, command.join(' '));
      assert.match(r.stdout, /Examples?:\n\s+\$ switchboard /, `help of "${command.join(' ')}" has an example`);
    }
  });

  test('--version prints the package version', async () => {
    const r = await runCli(['--version']);
    assert.equal(r.code, 0);
    assert.match(r.stdout.trim(), /^\d+\.\d+\.\d+$/);
  });
});
