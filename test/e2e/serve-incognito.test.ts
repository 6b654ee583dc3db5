// Incognito in `serve` (store.md "Incognito"): the session row and transcript live only in the
// server's memory, run like any other session, are listed with a marker, and vanish at stop —
// checked against the real state dir, byte for byte, while the server runs and after it stopped.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import { connectClient, type SwitchboardClient } from '../../src/server/index.js';
import { tempDir, writeJson } from '../helpers.js';
import { pushWaiter, startServe, stopAllServers } from '../serve-process.js';

after(stopAllServers);

/**
 * Every regular file under dir with its contents, by relative path. A lock being released meanwhile
 * may vanish between listing and reading: that is skipped (the socket is not a regular file).
 */
function diskContents(dir: string, prefix = '', files = new Map<string, string>()): Map<string, string> {
  let names: fs.Dirent[];
  try {
    names = fs.readdirSync(path.join(dir, prefix), { withFileTypes: true });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return files;
    throw err;
  }
  for (const entry of names) {
    const name = path.join(prefix, entry.name);
    if (entry.isDirectory()) diskContents(dir, name, files);
    else if (entry.isFile()) {
      try {
        files.set(name, fs.readFileSync(path.join(dir, name), 'utf8'));
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
      }
    }
  }
  return files;
}

function assertNoTrace(state: string, secrets: string[]): void {
  for (const [name, text] of diskContents(state)) {
    assert.doesNotMatch(name, /incognito/, `no incognito folder on disk: ${name}`);
    for (const secret of secrets) assert.ok(!text.includes(secret), `${name} holds "${secret}"`);
  }
}

async function waitUntil<T>(probe: () => Promise<T | undefined>, what: string): Promise<T> {
  for (let i = 0; i < 1_000; i++) {
    const value = await probe();
    if (value !== undefined) return value;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  throw new Error(`timed out waiting for ${what}`);
}

describe('incognito sessions in serve', { timeout: 60_000 }, () => {
  test('kept in memory only: run, listed with a marker, never on disk, gone after the stop', async () => {
    const state = tempDir();
    const config = writeJson(path.join(state, 'c.json'), {
      agents: { defaults: { runner: { command: 'builtin:echo' } } },
      bindings: [{ agentId: 'main', match: { channel: 'whisper' }, incognito: true }],
      session: { dmScope: 'per-peer' },
    });
    const configText = fs.readFileSync(config, 'utf8');
    const server = await startServe(state, ['--config', config]);
    const client = await connectClient(server.socketPath);
    const waitFor = pushWaiter(client);
    await client.request('subscribe', {});

    const { events } = await client.request<any>('ingest', {
      messages: [
        { channel: 'whisper', peer: 'direct:7', text: 'secret-by-binding' },
        { channel: 'telegram', peer: 'direct:8', text: 'secret-by-flag', incognito: true },
        { channel: 'telegram', peer: 'direct:9', text: 'kept-on-disk' },
      ],
    });
    assert.deepEqual(events.map((e: any) => [e.type, e.persisted, e.disposition]), [
      ['result', false, 'started'],
      ['result', false, 'started'],
      ['result', true, 'started'],
    ]);
    // Incognito changes storage only: the runner runs and its reply is delivered.
    for (const event of events) {
      const reply = await waitFor((push) => push.event === 'reply' && push.runId === event.runId);
      assert.equal(reply.text, `echo: ${['secret-by-binding', 'secret-by-flag', 'kept-on-disk'][events.indexOf(event)]}`);
      await waitFor((push) => push.event === 'run_ended' && push.runId === event.runId);
    }

    const listing = await client.request<any>('sessions.list', { allAgents: true });
    const rows = new Map(listing.sessions.map((row: any) => [row.key, row]));
    assert.equal(listing.count, 3);
    const whisper: any = rows.get(events[0].sessionKey);
    assert.equal(whisper.incognito, true);
    assert.equal(whisper.sessionId, events[0].sessionId);
    assert.ok(whisper.transcriptBytes > 0, 'the in-memory transcript holds the turn');
    assert.equal((rows.get(events[1].sessionKey) as any).incognito, true);
    assert.equal((rows.get(events[2].sessionKey) as any).incognito, false);

    // On disk: only the ordinary session (its store row and transcript), no trace of the others.
    assertNoTrace(state, ['secret-by-binding', 'secret-by-flag', events[0].sessionKey, events[1].sessionKey, events[0].sessionId, events[1].sessionId]);
    const onDisk = diskContents(state);
    assert.ok([...onDisk.values()].some((text) => text.includes('kept-on-disk')), 'the ordinary message was stored');

    // A config reload (SIGHUP) builds a new engine; the incognito sessions stay with the server.
    server.signal('SIGHUP');
    await server.waitForStderr(/config reloaded/);
    const reloaded = await client.request<any>('sessions.list', { allAgents: true });
    assert.deepEqual(
      reloaded.sessions.filter((row: any) => row.incognito).map((row: any) => row.sessionId).sort(),
      [events[0].sessionId, events[1].sessionId].sort(),
    );

    // A second message to the incognito session continues the same in-memory instance.
    const again = (await client.request<any>('ingest', { message: { channel: 'whisper', peer: 'direct:7', text: 'secret-again' } })).events[0];
    assert.equal(again.sessionId, events[0].sessionId);
    await waitFor((push) => push.event === 'run_ended' && push.runId === again.runId);
    assertNoTrace(state, ['secret-again']);

    await client.close();
    server.signal('SIGTERM');
    assert.deepEqual(await server.exited, { code: 0, signal: null });
    assertNoTrace(state, ['secret-by-binding', 'secret-by-flag', 'secret-again', events[0].sessionId]);

    // A new server knows nothing of them; the stored session is still there.
    const next = await startServe(state, ['--config', config]);
    const probe = await connectClient(next.socketPath);
    const after = await probe.request<any>('sessions.list', { allAgents: true });
    assert.deepEqual(after.sessions.map((row: any) => [row.key, row.incognito]), [[events[2].sessionKey, false]]);
    await probe.close();
    await next.stop();
    assert.equal(fs.readFileSync(config, 'utf8'), configText);
  });

  test('incognito items still queued when the grace period ends are reported dropped (reason shutdown)', async () => {
    const state = tempDir();
    const config = writeJson(path.join(state, 'c.json'), {
      agents: { defaults: { runner: { command: 'builtin:slow-echo', delayMs: 30_000, toolCalls: 1 } } },
      messages: { queue: { mode: 'followup', debounceMs: 0 } },
    });
    const server = await startServe(state, ['--config', config, '--grace', '300']);
    const client: SwitchboardClient = await connectClient(server.socketPath);
    const waitFor = pushWaiter(client);
    await client.request('subscribe', {});
    const first = (await client.request<any>('ingest', { message: { channel: 'telegram', peer: 'direct:5', text: 'busy', incognito: true } })).events[0];
    await waitFor((push) => push.event === 'run_started' && push.runId === first.runId);
    const second = (await client.request<any>('ingest', { message: { channel: 'telegram', peer: 'direct:5', text: 'waiting', incognito: true } })).events[0];
    assert.equal(second.disposition, 'queued');
    const listed = await waitUntil(async () => {
      const queue = await client.request<any>('queue.list', {});
      return queue.items.length === 1 ? queue : undefined;
    }, 'the incognito item in queue.list');
    assert.deepEqual([listed.items[0].runId, listed.items[0].incognito], [second.runId, true]);
    assert.deepEqual(listed.active.map((run: any) => [run.runId, run.incognito]), [[first.runId, true]]);

    server.signal('SIGTERM');
    const dropped = await waitFor((push) => push.event === 'dropped' && push.runId === second.runId);
    assert.equal(dropped.reason, 'shutdown');
    assert.equal((await waitFor((push) => push.event === 'run_ended' && push.runId === first.runId)).status, 'aborted');
    assert.deepEqual(await server.exited, { code: 0, signal: null });
    assertNoTrace(state, ['busy', 'waiting', first.sessionId]);
  });
});
