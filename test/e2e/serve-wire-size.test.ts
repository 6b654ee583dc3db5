// Sizes on the wire of `serve`: a request line the server cannot read is still answered (in its
// place, with id null) and the client takes that answer as its own.

import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { connectClient } from '../../src/server/index.js';
import { MAX_REQUEST_BYTES } from '../../src/server/protocol.js';
import { tempDir } from '../helpers.js';
import { startServe, stopAllServers } from '../serve-process.js';

after(stopAllServers);

describe('request sizes on the socket', () => {
  test('a request over the size cap is answered (BAD_INPUT) through the client, and the connection goes on', { timeout: 30_000 }, async () => {
    const state = tempDir('sb-wire-');
    const server = await startServe(state);
    const client = await connectClient(server.socketPath);
    try {
      const tooLong = client.request('status', { pad: 'x'.repeat(MAX_REQUEST_BYTES) });
      const next = client.request<{ pid: number }>('status');
      await assert.rejects(tooLong, (err: { code?: string; message?: string }) => err.code === 'BAD_INPUT' && /over the \d+-byte cap/.test(err.message ?? ''));
      assert.equal((await next).pid, server.child.pid);
    } finally {
      await client.close();
    }
  });
});
