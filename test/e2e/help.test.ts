// Help that helps, through the real binary: "did you mean" under every group, `help <cmd> <sub>`,
// global options in every subcommand's help, -V, shell completion, doctor --fix, send --socket.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import type { Command } from 'commander';
import { buildProgram } from '../../src/cli/main.js';
import { processStreams } from '../../src/cli/output.js';
import { runCli, tempDir } from '../helpers.js';

const program = await buildProgram(processStreams(), () => undefined);
const groups = program.commands.filter((command) => command.commands.length > 0 && command.name() !== 'help');
const leaves: string[][] = [];
const walk = (command: Command, prefix: string[]) => {
  for (const sub of command.commands) {
    if (sub.commands.length === 0) leaves.push([...prefix, sub.name()]);
    walk(sub, [...prefix, sub.name()]);
  }
};
walk(program, []);

/** The name with two neighbouring letters swapped: a typo one edit away. */
function typo(name: string): string {
  return `${name.slice(0, 1)}${name.slice(2, 3)}${name.slice(1, 2)}${name.slice(3)}`;
}

describe('help that helps', () => {
  test('a mistyped subcommand under every group is a usage error with a suggestion', async () => {
    assert.ok(groups.length >= 5);
    for (const group of groups) {
      for (const sub of group.commands.filter((c) => c.name().length >= 4)) {
        const r = await runCli([group.name(), typo(sub.name()), '--state-dir', tempDir()]);
        assert.equal(r.code, 2, `${group.name()} ${typo(sub.name())}: ${r.stderr}`);
        assert.match(r.stderr, new RegExp(`unknown command '${typo(sub.name())}'\\n\\(Did you mean ${sub.name()}\\?\\)`), `${group.name()} ${typo(sub.name())}`);
      }
    }
    const top = await runCli(['sesions']);
    assert.equal(top.code, 2);
    assert.match(top.stderr, /Did you mean sessions\?/);
  });

  test('switchboard help <cmd> <sub> prints what <cmd> <sub> --help prints; a wrong name is a usage error', async () => {
    for (const path of [['sessions', 'cleanup'], ['locks', 'release'], ['route', 'explain'], ['ingest']]) {
      const viaHelp = await runCli(['help', ...path]);
      const viaFlag = await runCli([...path, '--help']);
      assert.equal(viaHelp.code, 0);
      assert.equal(viaHelp.stdout, viaFlag.stdout, path.join(' '));
    }
    const wrong = await runCli(['help', 'sessions', 'cleaup']);
    assert.equal(wrong.code, 2);
    assert.match(wrong.stderr, /Did you mean cleanup\?/);
  });

  test('every subcommand lists the global options in its help', async () => {
    for (const path of leaves) {
      const r = await runCli([...path, '--help']);
      assert.equal(r.code, 0, path.join(' '));
      assert.match(r.stdout, /Global Options:[\s\S]*--state-dir <dir>[\s\S]*--json[\s\S]*-q, --quiet/, path.join(' '));
    }
  });

  test('-V and --version print the version', async () => {
    const short = await runCli(['-V']);
    const long = await runCli(['--version']);
    assert.equal(short.code, 0);
    assert.equal(short.stdout, long.stdout);
  });

  test('bash completion completes groups, subcommands and options (run in a real bash)', async () => {
    const script = await runCli(['completion', 'bash']);
    assert.equal(script.code, 0);
    const file = path.join(tempDir(), 'switchboard.bash');
    fs.writeFileSync(file, script.stdout);
    const complete = (...words: string[]) => {
      const line = ['switchboard', ...words].map((w) => `'${w}'`).join(' ');
      const r = spawnSync('bash', ['-c', `source '${file}'; COMP_WORDS=(${line}); COMP_CWORD=${words.length}; _switchboard; printf '%s\\n' "\${COMPREPLY[@]}"`], { encoding: 'utf8' });
      assert.equal(r.status, 0, r.stderr);
      return r.stdout.trim().split('\n');
    };
    assert.deepEqual(complete('se'), ['send', 'serve', 'sessions']);
    assert.deepEqual(complete('sessions', 'cl'), ['cleanup']);
    assert.deepEqual(complete('--state-dir', '/tmp', 'sessions', 'cleanup', '--dr'), ['--dry-run']);
    assert.ok(complete('locks', 'release', '--').includes('--force'));
    assert.ok(complete('locks', 'release', '--').includes('--state-dir'), 'global options after a subcommand');
  });

  test('zsh and fish completion scripts name every command; an unknown shell is a usage error', async () => {
    for (const shell of ['zsh', 'fish']) {
      const r = await runCli(['completion', shell]);
      assert.equal(r.code, 0);
      for (const group of groups) assert.ok(r.stdout.includes(group.name()), `${shell}: ${group.name()}`);
      assert.ok(r.stdout.includes('cleanup'));
    }
    const bad = await runCli(['completion', 'tcsh', '--json']);
    assert.equal(bad.code, 2);
    assert.equal(JSON.parse(bad.stderr).error.code, 'USAGE');
  });

  test('doctor --fix is doctor --repair', async () => {
    const state = tempDir();
    const r = await runCli(['doctor', '--fix', '--json', '--state-dir', state]);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(JSON.parse(r.stdout).repair, true);
  });

  test('send --socket without a path uses the default socket, as ingest --socket does', async () => {
    const state = tempDir();
    for (const args of [['send', 'hi', '--channel', 'x', '--peer', 'direct:1'], ['ingest']]) {
      const r = await runCli([...args, '--socket', '--json', '--state-dir', state], { input: '{"channel":"x","text":"hi"}\n' });
      assert.equal(r.code, 69, r.stderr);
      assert.equal(JSON.parse(r.stderr).error.code, 'UNAVAILABLE');
      assert.ok(r.stderr.includes(path.join(state, 'switchboard.sock')), r.stderr);
    }
  });
});
