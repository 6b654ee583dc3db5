// Colour conventions (issue 14, item 9): NO_COLOR only when non-empty, FORCE_COLOR honoured,
// --no-color always wins; through the real binary for the pipe case.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { wantsColour } from '../../src/cli/output.js';
import { runCli, tempDir } from '../helpers.js';

test('the rule: --no-color and a non-empty NO_COLOR turn colour off; FORCE_COLOR turns it on in a pipe', () => {
  assert.equal(wantsColour({}, true, true), true);
  assert.equal(wantsColour({}, false, true), false, 'a pipe gets no colour by default');
  assert.equal(wantsColour({ NO_COLOR: '1' }, true, true), false);
  assert.equal(wantsColour({ NO_COLOR: '' }, true, true), true, 'an empty NO_COLOR is not set');
  assert.equal(wantsColour({ FORCE_COLOR: '1' }, false, true), true);
  assert.equal(wantsColour({ FORCE_COLOR: '0' }, true, true), false);
  assert.equal(wantsColour({ FORCE_COLOR: 'false' }, true, true), false);
  assert.equal(wantsColour({ FORCE_COLOR: '1', NO_COLOR: 'x' }, false, true), false, 'NO_COLOR beats FORCE_COLOR');
  assert.equal(wantsColour({ FORCE_COLOR: '1' }, false, false), false, '--no-color beats FORCE_COLOR');
  assert.equal(wantsColour({ TERM: 'dumb' }, true, true), false);
});

test('FORCE_COLOR colours a piped listing; without it the pipe gets plain text', async () => {
  const stateDir = tempDir();
  const line = JSON.stringify({ channel: 'telegram', peer: { kind: 'direct', id: 'alice' }, text: 'hi' });
  assert.equal((await runCli(['ingest', '--state-dir', stateDir], { input: `${line}\n` })).code, 0);
  const explain = ['route', 'explain', '--channel', 'telegram', '--peer', 'direct:alice', '--state-dir', stateDir];
  const forced = await runCli(explain, { env: { FORCE_COLOR: '1', NO_COLOR: '' } });
  assert.equal(forced.code, 0, forced.stderr);
  assert.match(forced.stdout, /\u001b\[/, 'coloured');
  const plain = await runCli(explain, { env: { NO_COLOR: '' } });
  assert.doesNotMatch(plain.stdout, /\u001b\[/, 'no colour in a pipe by default');
});
