// `ingest --socket` waiting for its own session's run, on a server busy with other sessions:
// the pushed events of those sessions are dropped, not kept, once all of its answers are in.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import path from 'node:path';
import { after, test } from 'node:test';
import { connectClient } from '../../src/server/index.js';
import { BIN, REPO_ROOT, rssBytes, tempDir, writeJson } from '../helpers.js';
import { cleanEnv, startServe, stopAllServers } from '../serve-process.js';

after(stopAllServers);

const FLOOD_REQUESTS = 16;
const PER_REQUEST = 5_000;

test('a waiting ingest --socket does not keep the events of other sessions (80 000 of them)', { skip: process.platform !== 'linux', timeout: 60_000 }, async () => {
  const state = tempDir('sb-follow-');
  const config = writeJson(path.join(state, 'c.json'), { agents: { defaults: { runner: { command: 'builtin:slow-echo', delayMs: 600_000 } } }, session: { dmScope: 'per-peer' } });
  const server = await startServe(state, ['--config', config, '--grace', '0']);
  const other = await connectClient(server.socketPath);
  assert.equal((await other.request<any>('ingest', { message: { channel: 'telegram', peer: 'direct:busy', text: 'a long turn' } })).events[0].disposition, 'started');

  // Its own session gets a run that lasts until the test aborts it.
  const child = spawn(process.execPath, [BIN, 'ingest', '--socket', server.socketPath, '--state-dir', state, '--config', config], { env: cleanEnv(), cwd: REPO_ROOT, stdio: ['pipe', 'pipe', 'pipe'] });
  let stdout = '';
  child.stdout.setEncoding('utf8');
  const printed = (pattern: RegExp): Promise<void> =>
    new Promise((resolve) => {
      const check = (): void => {
        if (pattern.test(stdout)) {
          child.stdout.off('data', check);
          resolve();
        }
      };
      child.stdout.on('data', check);
      check();
    });
  child.stdout.on('data', (chunk: string) => (stdout += chunk));
  child.stderr.resume();
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  child.stdin.end(`${JSON.stringify({ channel: 'telegram', peer: 'direct:mine', text: 'my turn' })}\n`);
  await printed(/"type":"run_started"/);
  const sessionKey = JSON.parse(stdout.split('\n')[0]!).sessionKey as string;
  const before = rssBytes(child.pid!);

  // Other sessions' events: every refused message of the busy session is pushed as `dropped`.
  for (let r = 0; r < FLOOD_REQUESTS; r++) {
    const messages = Array.from({ length: PER_REQUEST }, (_, i) => ({ channel: 'telegram', peer: 'direct:busy', text: `/queue followup cap:1 drop:new flood ${r}-${i}` }));
    await other.request('ingest', { messages });
  }
  // One event of its own session after the flood: once it is printed, the flood has been read.
  for (let i = 0; i < 2; i++) await other.request('ingest', { message: { channel: 'telegram', peer: 'direct:mine', text: `/queue followup cap:1 drop:new mine ${i}` } });
  await printed(/"type":"dropped"/);
  const grown = rssBytes(child.pid!) - before;

  await other.request('queue.abort', { session: sessionKey });
  assert.equal(await exited, 0, stdout);
  await other.close();
  assert.ok(grown < 40 * 1024 * 1024, `ingest --socket grew by ${Math.round(grown / 1024 / 1024)} MiB while it waited`);
});
