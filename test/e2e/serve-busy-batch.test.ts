// A big batch to a session whose run is going (in this server): every message waits in the
// session's outbox, and admitting them must not cost the square of their number — the server's
// event loop is held meanwhile, so nobody else gets an answer, and clients declare it dead.

import assert from 'node:assert/strict';
import path from 'node:path';
import { after, test } from 'node:test';
import { connectClient } from '../../src/server/index.js';
import { tempDir, writeJson } from '../helpers.js';
import { startServe, stopAllServers } from '../serve-process.js';

after(stopAllServers);

const MESSAGES = 5_000;

test('5 000 messages in one request to a busy session are answered (one event each) and the server keeps answering', { timeout: 30_000 }, async () => {
  const state = tempDir('sb-busy-batch-');
  // The run never ends by itself; the stop aborts it at once (--grace 0).
  const config = writeJson(path.join(state, 'c.json'), { agents: { defaults: { runner: { command: 'builtin:slow-echo', delayMs: 600_000 } } } });
  const server = await startServe(state, ['--config', config, '--grace', '0']);
  const client = await connectClient(server.socketPath);
  try {
    const first = await client.request<any>('ingest', { message: { channel: 'telegram', peer: 'direct:7', text: 'a long turn' } });
    assert.equal(first.events[0].disposition, 'started');
    // cap 1, drop new: the first waits, every other one is refused — and reported, one event each.
    const messages = Array.from({ length: MESSAGES }, (_, i) => ({ channel: 'telegram', peer: 'direct:7', text: `/queue followup cap:1 drop:new message ${i}` }));
    // Before the fix this took ~36 s with the event loop held: the client's silence check asked
    // `status` on a second connection, got no answer either, and gave up with UNAVAILABLE.
    const { events } = await client.request<any>('ingest', { messages });
    assert.equal(events.length, MESSAGES);
    assert.deepEqual(
      [...new Set(events.map((event: any) => event.disposition))].sort(),
      ['dropped', 'queued'],
    );
    assert.equal((await client.request<any>('status')).activeRuns, 1);
  } finally {
    await client.close();
  }
  server.signal('SIGTERM');
  assert.equal((await server.exited).code, 0);
});
