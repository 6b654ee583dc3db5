// SIGHUP after SIGHUP: each reload builds a new engine context, and the one it replaces is let go
// once its work is over, so a long-lived server reloaded often does not grow with every reload.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, test } from 'node:test';
import { connectClient } from '../../src/server/index.js';
import { tempDir } from '../helpers.js';
import { startServe, stopAllServers } from '../serve-process.js';

after(stopAllServers);

const RELOADS = 20;

test('twenty SIGHUPs leave one config held by the server (the replaced ones were idle), and it still answers with the newest', { timeout: 30_000 }, async () => {
  const state = tempDir('sb-reload-');
  const config = path.join(state, 'switchboard.json5');
  const agents = { list: [{ id: 'main', default: true }, { id: 'work' }] };
  fs.writeFileSync(config, JSON.stringify({ agents }));
  const server = await startServe(state, ['--config', config]);
  const client = await connectClient(server.socketPath);
  try {
    for (let reload = 1; reload <= RELOADS; reload++) {
      // The last reload routes slack to `work`, so the answer below shows the newest config is used.
      if (reload === RELOADS) fs.writeFileSync(config, JSON.stringify({ agents, bindings: [{ agentId: 'work', match: { channel: 'slack', accountId: '*' } }] }));
      server.signal('SIGHUP');
      // One signal at a time (two pending SIGHUPs would be delivered as one).
      await server.waitForStderr(new RegExp(`(?:config reloaded from[^\\n]*\\n[^]*?){${reload}}`));
    }
    const status = await client.request<any>('status');
    assert.deepEqual(status.reloads, { applied: RELOADS, rejected: 0, retained: 1 });
    assert.equal((await client.request<any>('route.resolve', { input: { channel: 'slack', peer: 'channel:C1' } })).agentId, 'work');
  } finally {
    await client.close();
  }
});
