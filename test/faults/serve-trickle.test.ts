// A peer that trickles its request lines a byte per read over many connections: the server's
// memory for those partial lines stays near their size, and every line is read back intact.

import assert from 'node:assert/strict';
import net from 'node:net';
import { after, test } from 'node:test';
import { rssBytes, tempDir } from '../helpers.js';
import { startServe, stopAllServers } from '../serve-process.js';

after(stopAllServers);

const CONNECTIONS = 100;
const ROUNDS = 5_000;
const ID_CHARS = 200;

/** Lines from a raw connection, one promise per line in order. */
function lineReader(socket: net.Socket): () => Promise<string> {
  let buffer = '';
  const lines: string[] = [];
  const waiters: ((line: string) => void)[] = [];
  socket.setEncoding('utf8');
  socket.on('data', (chunk: string) => {
    buffer += chunk;
    for (let nl = buffer.indexOf('\n'); nl >= 0; nl = buffer.indexOf('\n')) {
      const line = buffer.slice(0, nl);
      buffer = buffer.slice(nl + 1);
      const waiter = waiters.shift();
      if (waiter) waiter(line);
      else lines.push(line);
    }
  });
  return () => (lines.length > 0 ? Promise.resolve(lines.shift()!) : new Promise((resolve) => waiters.push(resolve)));
}

function connect(socketPath: string): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const socket = net.createConnection(socketPath);
    socket.once('error', reject);
    socket.once('connect', () => resolve(socket));
  });
}

test('request lines trickled a byte per read on 100 connections cost the server about their bytes, and arrive intact', { skip: process.platform !== 'linux', timeout: 60_000 }, async () => {
  const state = tempDir('sb-trickle-');
  const server = await startServe(state);
  const pid = server.child.pid!;
  const probe = await connect(server.socketPath);
  const readProbe = lineReader(probe);
  // One answered request on another connection per round: by then the server has read the byte
  // each trickling connection got before it (a read of its own).
  const roundTrip = async (): Promise<void> => {
    probe.write('{"id":"probe","op":"status"}\n');
    assert.equal(JSON.parse(await readProbe()).id, 'probe');
  };
  const ids = Array.from({ length: CONNECTIONS }, (_, c) => Array.from({ length: ID_CHARS }, (_, i) => String.fromCharCode(0x61 + ((c + i * 7) % 26))).join(''));
  const clients = await Promise.all(ids.map(() => connect(server.socketPath)));
  const readers = clients.map(lineReader);
  for (const client of clients) client.write('{"id":"');
  await roundTrip();
  const before = rssBytes(pid);
  for (let round = 0; round < ROUNDS; round++) {
    clients.forEach((client, c) => {
      if (round < ID_CHARS) client.write(ids[c]![round]!);
      else if (round === ID_CHARS) client.write('","op":"status","pad":"');
      else client.write('a');
    });
    await roundTrip();
  }
  const grown = rssBytes(pid) - before;
  for (const client of clients) client.write('"}\n');
  const answers = await Promise.all(readers.map((read) => read().then((line) => JSON.parse(line))));
  assert.deepEqual(
    answers.map((answer) => answer.id),
    ids,
  );
  for (const answer of answers) assert.equal(answer.result.pid, pid);
  // ~0.5 MB of partial lines in all; one Buffer kept per byte read made that ~150 MB.
  assert.ok(grown < 48 * 1024 * 1024, `the server grew by ${Math.round(grown / 1024 / 1024)} MiB for ${(CONNECTIONS * ROUNDS) / 1000} KB of partial lines`);
  for (const client of clients) client.destroy();
  probe.destroy();
});
