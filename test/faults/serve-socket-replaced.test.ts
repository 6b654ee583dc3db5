// The socket file removed while a server runs, and a second server started on the same path: the
// first one's stop must leave the second one's socket alone (libuv unlinks the path a listener was
// bound to when it is closed, whatever that path holds by then).

import assert from 'node:assert/strict';
import fs from 'node:fs';
import { after, test } from 'node:test';
import { connectClient } from '../../src/server/index.js';
import { tempDir } from '../helpers.js';
import { startServe, stopAllServers } from '../serve-process.js';

after(stopAllServers);

test('a server stopped after its socket file was removed and another server took the path leaves that server reachable', { timeout: 30_000 }, async () => {
  const state = tempDir('sb-replaced-');
  const first = await startServe(state);
  fs.unlinkSync(first.socketPath); // a tmp cleaner, or a user, removed it
  const second = await startServe(state);
  const identity = fs.lstatSync(second.socketPath);

  first.signal('SIGTERM');
  assert.equal((await first.exited).code, 0);

  const now = fs.lstatSync(second.socketPath, { throwIfNoEntry: false });
  assert.ok(now !== undefined && now.isSocket() && now.ino === identity.ino, 'the second server\'s socket file is still there');
  const client = await connectClient(second.socketPath);
  try {
    assert.equal((await client.request<{ pid: number }>('status')).pid, second.child.pid);
  } finally {
    await client.close();
  }
  second.signal('SIGTERM');
  assert.equal((await second.exited).code, 0);
  assert.equal(fs.existsSync(second.socketPath), false, 'the second server removed its own socket when it stopped');
});
