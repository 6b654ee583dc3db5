// A runner's stderr is logged with the run (queue.md: "stderr is logged"): each line on the
// command's stderr, named by agent, run and session, escaped for the terminal and bounded, and
// silent under --quiet. It used to be read and dropped, so a failing runner left no diagnostic.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { runCli, tempDir, writeJson } from '../helpers.js';

function setup(): { state: string; config: string } {
  const state = tempDir();
  // A runner that says why on stderr (with an escape sequence a terminal would act on) and fails.
  const script = path.join(state, 'loud-runner.mjs');
  fs.writeFileSync(script, "process.stderr.write('model backend refused: quota\\n\\u001b[31mred\\u001b[0m\\n'); for (let i = 0; i < 500; i++) process.stderr.write(`noise ${i}\\n`); process.exit(3);\n");
  const config = writeJson(path.join(state, 'config.json'), { agents: { defaults: { runner: { command: [process.execPath, script] } } } });
  return { state, config };
}

test("a runner's stderr lines are on the command's stderr, named by the run, escaped, at most 200 of them", async () => {
  const { state, config } = setup();
  const sent = await runCli(['send', 'hi', '--channel', 'telegram', '--peer', 'direct:1', '--state-dir', state, '--config', config]);
  const lines = sent.stderr.split('\n').filter((line) => line.includes(' stderr: ') || line.includes('more stderr lines'));
  assert.match(lines[0] ?? '', /^switchboard: runner main run [0-9a-f-]+ \(agent:main:main\) stderr: model backend refused: quota$/, sent.stderr);
  assert.match(lines[1] ?? '', /stderr: \\u\{1b\}\[31mred\\u\{1b\}\[0m$/);
  assert.ok(!sent.stderr.includes('\u001b'), 'no escape sequence reaches the terminal');
  assert.equal(lines.filter((line) => line.includes(' stderr: ')).length, 200);
  assert.match(lines[200] ?? '', /more stderr lines are not shown$/);
  const quiet = await runCli(['send', 'hi again', '--quiet', '--channel', 'telegram', '--peer', 'direct:1', '--state-dir', state, '--config', config]);
  assert.ok(!quiet.stderr.includes('model backend refused'), quiet.stderr);
});
