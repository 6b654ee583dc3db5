// Every command that writes a store waits for its lock as long as configured
// (`session.writeLock.acquireTimeoutMs`), then says who holds it (STORE_BUSY, 75). Found by a
// store hunt: `sessions reset`/`delete`/`pin`, pin-route and the queue commands waited a fixed
// 30 s while `ingest` honoured the setting — under a script's own timeout, a hang.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, test } from 'node:test';
import { runCli, tempDir, writeJson } from '../helpers.js';
import { startChild, type ChildRun } from '../fixtures/store-child-process.js';

const children: ChildRun[] = [];
after(() => {
  for (const run of children) run.child.kill('SIGKILL');
});

/** Well under the 30 s default wait, well over the configured 1 s. */
const GIVE_UP_MS = 15_000;

test('with the store lock held by a live process, store commands give up after the configured wait with STORE_BUSY', async () => {
  const state = tempDir('sb-lock-wait-');
  const config = writeJson(path.join(state, 'c.json'), { session: { writeLock: { acquireTimeoutMs: 1_000 } } });
  const cli = (args: string[]) => runCli(['--state-dir', state, '--config', config, ...args], { timeoutMs: GIVE_UP_MS });
  assert.equal((await cli(['send', 'hi', '--channel', 'telegram', '--peer', 'direct:1'])).code, 0);
  const storePath = path.join(state, 'agents', 'main', 'sessions', 'sessions.json');
  const holder = startChild('lock-holder-child.js', [JSON.stringify({ target: storePath, behaviour: 'hold' })]);
  children.push(holder);
  await holder.waitForLine((line) => line.startsWith('held '), 10_000, 'the child to hold the store lock');

  const before = fs.readFileSync(storePath, 'utf8');
  for (const args of [
    ['sessions', 'reset', 'agent:main:main'],
    ['sessions', 'delete', 'agent:main:main'],
    ['sessions', 'pin', 'agent:main:main'],
    ['sessions', 'pin-route', 'agent:main:main', '--channel', 'telegram', '--peer', 'direct:2'],
    ['queue', 'abort', '--session', 'agent:main:main'],
    ['send', 'again', '--channel', 'telegram', '--peer', 'direct:1'],
  ]) {
    const r = await cli(args);
    assert.equal(r.signal, null, `${args.join(' ')} gave up by itself`);
    assert.equal(r.code, 75, `${args.join(' ')}: ${r.stderr}`);
    assert.match(r.stdout + r.stderr, /STORE_BUSY|is busy/, args.join(" "));
  }
  assert.equal(fs.readFileSync(storePath, 'utf8'), before, 'nothing was written');
  holder.send('release');
  await holder.waitForLine((line) => line === 'done', 10_000, 'the child to let go');
});
