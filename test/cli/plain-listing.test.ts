// A plain `sessions [list]` registers only the listing (cold start, P2). The argv test that picks
// it must know which of the listing's and the global flags take a value: checked here against the
// options commander actually has, so a flag added later cannot make it misread an operand.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Command } from 'commander';
import { buildProgram } from '../../src/cli/main.js';
import { processStreams } from '../../src/cli/output.js';
import { isPlainListing } from '../../src/cli/sessions.js';

const argv = (...args: string[]): string[] => ['node', 'switchboard', ...args];

test('every flag of the listing and of the program is read as commander reads it', async () => {
  const program = await buildProgram(processStreams(), () => undefined);
  const sessions = program.commands.find((command) => command.name() === 'sessions')!;
  const list = sessions.commands.find((command) => command.name() === 'list')!;
  const options = [program, sessions, list].flatMap((command: Command) => command.options);
  assert.ok(options.length > 10);
  for (const option of options) {
    for (const flag of [option.long, option.short].filter((name): name is string => name !== undefined)) {
      const takesValue = option.required || option.optional;
      if (flag === '--help' || flag === '-h' || flag === '--version' || flag === '-V') {
        assert.equal(isPlainListing(argv('sessions', flag)), false, flag);
      } else if (takesValue) {
        // Its value is never an operand, even one that names a subcommand.
        assert.equal(isPlainListing(argv('sessions', flag, 'show')), true, flag);
        assert.equal(isPlainListing(argv('sessions', `${flag}=show`)), true, flag);
      } else {
        assert.equal(isPlainListing(argv('sessions', flag)), true, flag);
        assert.equal(isPlainListing(argv('sessions', flag, 'show')), false, `${flag} takes no value: show is a subcommand`);
      }
    }
  }
});

test('only `sessions [list]` with known flags is a plain listing', () => {
  assert.equal(isPlainListing(argv('sessions')), true);
  assert.equal(isPlainListing(argv('--state-dir', 'x', 'sessions', 'list', '--json', '--limit', 'all')), true);
  for (const other of [
    [],
    ['list'],
    ['reset', 'k'],
    ['sessions', 'show', 'k'],
    ['sessions', 'list', 'extra'],
    ['sessions', 'list', 'list'],
    ['sessions', 'shwo'],
    ['sessions', '--', 'list'],
    ['sessions', '--bogus'],
    ['sessions', '-qv'],
    ['help', 'sessions'],
    ['route', 'resolve'],
  ]) {
    assert.equal(isPlainListing(argv(...other)), false, other.join(' '));
  }
});
