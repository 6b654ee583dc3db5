// Sizes on the wire of `serve`: a request line the server cannot read is still answered (in its
// place, with id null) and the client takes that answer as its own; `ingest --socket` sends each
// message as JSON.stringify writes it, which can be several times longer than the line it read.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import { connectClient } from '../../src/server/index.js';
import { MAX_REQUEST_BYTES } from '../../src/server/protocol.js';
import { jsonLines, runCli, tempDir } from '../helpers.js';
import { startServe, stopAllServers } from '../serve-process.js';

after(stopAllServers);

/** A message line of about `bytes` whose numbers JSON.stringify writes five times longer (1e20 → 21 digits). */
function expandingLine(messageId: string, bytes: number): string {
  const numbers = Array.from({ length: Math.floor(bytes / 5) }, () => '1e20').join(',');
  return `{"channel":"telegram","peer":"direct:7","text":"${messageId}","messageId":"${messageId}","meta":[${numbers}]}`;
}

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

  test('ingest --socket: lines that grow past the cap when re-encoded get their own error; every other line is stored and answered', { timeout: 30_000 }, async () => {
    const state = tempDir('sb-wire-');
    const server = await startServe(state);
    const lines = [
      // 300 KB read, 1.3 MB once JSON.stringify has written it out: over the per-message cap.
      expandingLine('huge', 300_000),
      // Each is well under the cap even re-encoded, but together they would pass the request cap.
      ...Array.from({ length: 4 }, (_, i) => expandingLine(`grows-${i}`, 60_000)),
      '{"channel":"telegram","peer":"direct:7","text":"plain","messageId":"plain"}',
    ];
    const file = path.join(state, 'in.ndjson');
    fs.writeFileSync(file, `${lines.join('\n')}\n`);
    const result = await runCli(['ingest', file, '--socket', server.socketPath, '--state-dir', state], { timeoutMs: 20_000 });
    assert.equal(result.signal, null, `ingest --socket hung; stderr: ${result.stderr}`);
    assert.equal(result.code, 65, result.stderr);
    const events = jsonLines(result.stdout);
    assert.deepEqual(
      events.map((event) => [event.line, event.type]),
      [1, 2, 3, 4, 5, 6].map((line) => [line, line === 1 ? 'error' : 'result']),
    );
    assert.equal(events[0].code, 'BAD_MESSAGE');
    assert.match(events[0].message, /^line 1: .*over the 1048576-byte cap/);
    assert.deepEqual(
      events.slice(1).map((event) => event.messageId),
      ['grows-0', 'grows-1', 'grows-2', 'grows-3', 'plain'],
    );
  });
});
