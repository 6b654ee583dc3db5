// Session commands (`/queue …`, `/send …`, `/stop`) are handled the same with or without a
// runner: stored on the session, answered with a `command` result and a reply — never recorded
// as plain text that leaves the session's settings unchanged (issue 13, item 5).

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { jsonLines, runCli, tempDir } from '../helpers.js';

const line = (text: string): string => JSON.stringify({ channel: 'telegram', peer: { kind: 'direct', id: 'alice' }, text });

test('without a runner, /queue, /send and /stop are commands: stored, answered, shown by route explain', async () => {
  const stateDir = tempDir();
  const input = [line('hello'), line('/queue collect debounce:2s'), line('/send off'), line('/stop'), line('/queue followup and some text'), line('mid /queue steer text'), line('see https://x.example/a')].join('\n');
  const result = await runCli(['ingest', '--state-dir', stateDir], { input: `${input}\n` });
  assert.equal(result.code, 0, result.stderr);
  const events = jsonLines(result.stdout);
  const results = events.filter((e) => e.type === 'result');
  assert.deepEqual(results.map((e) => e.disposition), ['recorded', 'command', 'command', 'command', 'recorded', 'recorded', 'recorded']);
  const replies = events.filter((e) => e.type === 'reply');
  assert.equal(replies.length, 3, JSON.stringify(events));
  assert.match(replies[0].text, /collect/);
  assert.equal(replies[2].delivered, false, 'the /stop reply comes after sending was turned off');

  const show = await runCli(['sessions', 'show', 'agent:main:main', '--json', '--state-dir', stateDir]);
  assert.equal(show.code, 0, show.stderr);
  const { entry } = JSON.parse(show.stdout);
  assert.equal(entry.queueMode, 'collect');
  assert.equal(entry.queueDebounceMs, 2000);
  assert.equal(entry.sendPolicy, 'deny');

  const transcript = await runCli(['sessions', 'transcript', 'agent:main:main', '--json', '--state-dir', stateDir]);
  const texts = jsonLines(transcript.stdout)
    .filter((r) => r.type === 'message' && r.message?.role === 'user')
    .map((r) => r.message.content[0].text);
  // An inline directive is taken out of the text it came with, as with a runner — mid-text too
  // (it was recorded as sent); a slash that is no directive leaves the text as it is.
  assert.deepEqual(texts, ['hello', '/queue collect debounce:2s', '/send off', '/stop', 'and some text', 'mid text', 'see https://x.example/a']);

  const explain = await runCli(['route', 'explain', '--json', '--channel', 'telegram', '--peer', 'direct:alice', '--state-dir', stateDir]);
  assert.equal(explain.code, 0, explain.stderr);
  assert.match(explain.stdout, /"collect"/);
});
