// `switchboard serve` end to end: real server processes on real Unix sockets in temp dirs, real
// signals, real clients (raw sockets and src/server/client.ts), the store checked on disk.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { connectClient, type Push, type SwitchboardClient } from '../../src/server/index.js';
import { withLock } from '../../src/store/index.js';
import { BIN, REPO_ROOT, jsonLines, rssBytes, runCli, tempDir, writeJson } from '../helpers.js';
import { ServeProcess, cleanEnv, pushWaiter, startServe, stopAllServers, trackServer } from '../serve-process.js';

const FIXTURES = path.join(REPO_ROOT, 'dist', 'test', 'fixtures');
const LIMITS_FIXTURE = path.join(FIXTURES, 'serve-limits.js');
const EXAMPLE_CONFIG = path.join(REPO_ROOT, 'examples', 'switchboard.json5');
const EXAMPLE_MESSAGES = path.join(REPO_ROOT, 'examples', 'alice.ndjson');
const NOW = '2026-11-30T10:00:00Z';

const SERVE_ENTRY = BIN;
const SOCKET_CLIENT_ENTRY = BIN;

interface Finished {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** Runs a short-lived command through `entry` (bin/switchboard or the stand-in). */
function run(entry: string, args: string[], input = ''): Promise<Finished> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [entry, ...args], { env: cleanEnv(), cwd: REPO_ROOT, stdio: ['pipe', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on('data', (chunk: Buffer) => out.push(chunk));
    child.stderr.on('data', (chunk: Buffer) => err.push(chunk));
    const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
    child.on('error', reject);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout: Buffer.concat(out).toString('utf8'), stderr: Buffer.concat(err).toString('utf8') });
    });
    child.stdin.on('error', () => undefined);
    child.stdin.end(input);
  });
}

async function startLimited(state: string, maxQueuedBytes: number, highWaterBytes: number, maxClients?: number, maxPendingBytesTotal?: number): Promise<ServeProcess> {
  const extra = [maxClients !== undefined ? String(maxClients) : '-', ...(maxPendingBytesTotal !== undefined ? [String(maxPendingBytesTotal)] : [])];
  const child = spawn(process.execPath, [LIMITS_FIXTURE, state, String(maxQueuedBytes), String(highWaterBytes), ...extra], { env: cleanEnv(), cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  const server = trackServer(new ServeProcess(child, path.join(state, 'switchboard.sock')));
  await server.waitForStderr(/listening on/);
  return server;
}

/** A client on a raw socket: write any bytes, read answers line by line. */
class RawClient {
  private buffer = '';
  private readonly lines: any[] = [];
  private waiting: ((line: any) => void) | undefined;
  ended = false;

  private constructor(readonly socket: net.Socket) {
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => {
      this.buffer += chunk;
      let nl: number;
      while ((nl = this.buffer.indexOf('\n')) >= 0) {
        const line = JSON.parse(this.buffer.slice(0, nl));
        this.buffer = this.buffer.slice(nl + 1);
        if (this.waiting) {
          const wake = this.waiting;
          this.waiting = undefined;
          wake(line);
        } else this.lines.push(line);
      }
    });
    socket.on('close', () => {
      this.ended = true;
      this.waiting?.(undefined);
    });
    socket.on('error', () => undefined);
  }

  static connect(socketPath: string): Promise<RawClient> {
    return new Promise((resolve, reject) => {
      const socket = net.createConnection(socketPath);
      socket.once('connect', () => resolve(new RawClient(socket)));
      socket.once('error', reject);
    });
  }

  send(value: unknown): void {
    this.socket.write(typeof value === 'string' ? value : `${JSON.stringify(value)}\n`);
  }

  /** The next line from the server (undefined once the connection is closed). */
  next(timeoutMs = 20_000): Promise<any> {
    if (this.lines.length > 0) return Promise.resolve(this.lines.shift());
    if (this.ended) return Promise.resolve(undefined);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('no answer in time')), timeoutMs);
      this.waiting = (line) => {
        clearTimeout(timer);
        resolve(line);
      };
    });
  }

  close(): void {
    this.socket.destroy();
  }
}

function modeOf(file: string): number {
  return fs.statSync(file).mode & 0o777;
}

function sessionsDir(state: string, agent = 'main'): string {
  return path.join(state, 'agents', agent, 'sessions');
}

function readStore(state: string, agent = 'main'): Record<string, any> {
  return JSON.parse(fs.readFileSync(path.join(sessionsDir(state, agent), 'sessions.json'), 'utf8'));
}

function transcriptOf(state: string, agent: string, entry: { sessionFile: string }): any[] {
  return jsonLines(fs.readFileSync(path.join(sessionsDir(state, agent), entry.sessionFile), 'utf8'));
}

/** User texts of a transcript, in file order. */
function userTexts(lines: any[]): string[] {
  return lines.filter((l) => l.type === 'message' && l.message.role === 'user').map((l) => l.message.content[0].text);
}

/** Random ids replaced by their order of first appearance, so two runs can be compared. */
function canonical(value: unknown): unknown {
  const ids = new Map<string, string>();
  const text = JSON.stringify(value).replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g, (id) => {
    if (!ids.has(id)) ids.set(id, `<id${ids.size}>`);
    return ids.get(id)!;
  });
  return JSON.parse(text);
}

const line = (message: Record<string, unknown>) => JSON.stringify(message);

after(stopAllServers);

describe('the socket file and single instance (quality case 25)', { timeout: 60_000 }, () => {
  test('socket is 0600 inside a 0700 folder; a second serve on the same socket refuses with exit 75 and the first keeps serving', async () => {
    const state = path.join(tempDir(), 'fresh-state'); // does not exist yet: serve creates it 0700
    const server = await startServe(state);
    assert.equal(modeOf(state), 0o700);
    assert.ok(fs.lstatSync(server.socketPath).isSocket());
    assert.equal(modeOf(server.socketPath), 0o600);

    const second = await run(SERVE_ENTRY, ['serve', '--state-dir', state, '--json']);
    assert.equal(second.code, 75, second.stderr);
    const error = jsonLines(second.stderr).find((l) => l.error)?.error;
    assert.equal(error.code, 'STORE_BUSY');
    assert.match(error.message, new RegExp(`pid ${server.child.pid}`));

    const client = await connectClient(server.socketPath);
    const status = await client.request<any>('status');
    assert.equal(status.pid, server.child.pid);
    await client.close();
    server.signal('SIGTERM');
    assert.deepEqual(await server.exited, { code: 0, signal: null });
  });

  test('an existing state dir with a looser mode is made private; --socket in a world-writable folder without sticky bit is refused', async () => {
    const state = tempDir();
    fs.chmodSync(state, 0o755);
    const server = await startServe(state);
    assert.equal(modeOf(state), 0o700);
    assert.match(server.stderr, /made .* private \(0700\)/);
    await server.stop();

    const open = path.join(tempDir(), 'open');
    fs.mkdirSync(open);
    fs.chmodSync(open, 0o777);
    const refused = await run(SERVE_ENTRY, ['serve', '--state-dir', state, '--socket', path.join(open, 's.sock'), '--json']);
    assert.equal(refused.code, 74, refused.stderr);
    assert.equal(jsonLines(refused.stderr)[0].error.code, 'IO');
  });

  test('a stale socket left by a killed server is replaced; a file that is not a socket is never replaced', async () => {
    const state = tempDir();
    const killed = await startServe(state);
    killed.signal('SIGKILL');
    await killed.exited;
    assert.ok(fs.lstatSync(killed.socketPath).isSocket(), 'SIGKILL leaves the socket file behind');

    const server = await startServe(state);
    assert.match(server.stderr, /stale socket/);
    const client = await connectClient(server.socketPath);
    assert.equal((await client.request<any>('status')).pid, server.child.pid);
    await client.close();
    await server.stop();
    assert.equal(fs.existsSync(server.socketPath), false);

    const notSocket = path.join(state, 'plain.sock');
    fs.writeFileSync(notSocket, 'keep me');
    const refused = await run(SERVE_ENTRY, ['serve', '--state-dir', state, '--socket', notSocket, '--json']);
    assert.equal(refused.code, 2, refused.stderr);
    assert.equal(fs.readFileSync(notSocket, 'utf8'), 'keep me');
  });

  test('a bad config stops the start with exit 78 before any socket exists', async () => {
    const state = tempDir();
    const config = path.join(state, 'bad.json5');
    fs.writeFileSync(config, '{ agents: { list: [ { id: 1 } ] } }');
    const r = await run(SERVE_ENTRY, ['serve', '--state-dir', state, '--config', config, '--json']);
    assert.equal(r.code, 78, r.stderr);
    assert.equal(jsonLines(r.stderr)[0].error.code, 'CONFIG_INVALID');
    assert.equal(fs.existsSync(path.join(state, 'switchboard.sock')), false);
  });

  test('--quiet: no start or stop lines, still serving', async () => {
    const state = tempDir();
    const server = await startServe(state, ['-q'], { ready: false });
    let client: SwitchboardClient | undefined;
    // Nothing is logged, so wait for the socket to answer instead.
    for (let i = 0; i < 400 && client === undefined; i++) {
      client = await connectClient(server.socketPath).catch(async () => {
        await new Promise((resolve) => setTimeout(resolve, 25));
        return undefined;
      });
    }
    assert.ok(client, 'the quiet server answers');
    assert.equal((await client.request<any>('status')).pid, server.child.pid);
    await client.close();
    server.signal('SIGINT');
    assert.deepEqual(await server.exited, { code: 0, signal: null });
    assert.equal(server.stderr, '');
  });
});

/** Holds the default agent's sessions.json lock, so an ingest stays in flight until released. */
async function holdStoreLock(state: string): Promise<{ release: () => Promise<void> }> {
  const storePath = path.join(sessionsDir(state), 'sessions.json');
  fs.mkdirSync(path.dirname(storePath), { recursive: true, mode: 0o700 });
  let release!: () => void;
  let taken!: () => void;
  const gate = new Promise<void>((resolve) => (release = resolve));
  const held = new Promise<void>((resolve) => (taken = resolve));
  const done = withLock(storePath, { busyCode: 'STORE_BUSY' }, async () => {
    taken();
    await gate;
  });
  await held;
  return {
    release: async () => {
      release();
      await done;
    },
  };
}

describe('lifecycle: SIGTERM drains, SIGHUP reloads', { timeout: 60_000 }, () => {
  /** Waits until the server reports `count` requests in flight besides the asking one. */
  async function waitInFlight(socketPath: string, count: number): Promise<void> {
    const probe = await connectClient(socketPath);
    try {
      for (let i = 0; i < 1_000; i++) {
        const status = await probe.request<any>('status');
        if (status.requests.inFlight - 1 >= count) return;
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      assert.fail('the request never became in flight');
    } finally {
      await probe.close();
    }
  }

  test('SIGTERM: stops accepting, the in-flight ingest is acknowledged, exit 0, socket removed', async () => {
    const state = tempDir();
    const server = await startServe(state);
    const lock = await holdStoreLock(state);
    const client = await connectClient(server.socketPath);
    const answer = client.request<any>('ingest', { message: { channel: 'telegram', peer: 'direct:7', text: 'in flight at SIGTERM', messageId: 'drain-1' } });
    await waitInFlight(server.socketPath, 1);
    server.signal('SIGTERM');
    // Once the drain has begun, a new connection is told so at once (`{id: null, error}`) and closed;
    // one accepted just before the signal is merely frozen, so try until the refusal shows.
    let refusal: any;
    for (let attempt = 0; attempt < 200 && refusal === undefined; attempt++) {
      const late = await RawClient.connect(server.socketPath);
      refusal = await late.next(100).catch(() => undefined);
      late.close();
    }
    assert.deepEqual([refusal?.id, refusal?.error?.code], [null, 'UNAVAILABLE']);
    assert.ok(fs.existsSync(server.socketPath), 'the socket stays until the drain is over');
    await lock.release();
    const { events } = await answer;
    assert.equal(events.length, 1);
    assert.equal(events[0].type, 'result');
    assert.equal(events[0].persisted, true);
    assert.deepEqual(await server.exited, { code: 0, signal: null });
    assert.equal(fs.existsSync(server.socketPath), false);
    assert.match(server.stderr, /stopped \(SIGTERM\): 1 request\(s\) finished, 0 aborted/);
    const entry = readStore(state)[events[0].sessionKey];
    assert.deepEqual(userTexts(transcriptOf(state, 'main', entry)), ['in flight at SIGTERM']);
  });

  test('grace period over: a request not yet being stored is answered UNAVAILABLE (not stored); the batch being stored gets its real result; exit 0', async () => {
    const state = tempDir();
    const server = await startServe(state, ['--grace', '200']);
    const lock = await holdStoreLock(state);
    const client = await connectClient(server.socketPath);
    const other = await connectClient(server.socketPath);
    const pushes: Push[] = [];
    client.onPush((push) => pushes.push(push));
    const stored = client.request<any>('ingest', { message: { channel: 'telegram', peer: 'direct:8', text: 'being stored', messageId: 'grace-1' } });
    await waitInFlight(server.socketPath, 1);
    // Sent while the first batch waits for the store lock: it waits for the next batch.
    const notStarted = other.request<any>('ingest', { message: { channel: 'telegram', peer: 'direct:9', text: 'never stored', messageId: 'grace-2' } });
    const probe = await connectClient(server.socketPath);
    for (let i = 0; i < 1_000 && (await probe.request<any>('status')).messages.queued < 1; i++) await new Promise((resolve) => setTimeout(resolve, 10));
    await probe.close();
    server.signal('SIGTERM');
    await assert.rejects(notStarted, (err: any) => err.code === 'UNAVAILABLE' && err.exitCode === 69 && /nothing of it was stored/.test(err.message));
    // The engine's batch is not cut short: once it can store, its sender hears the real outcome.
    await lock.release();
    const { events } = await stored;
    assert.deepEqual([events[0].type, events[0].messageId, events[0].persisted], ['result', 'grace-1', true]);
    await client.closed;
    assert.deepEqual(pushes, [{ event: 'shutdown', reason: 'SIGTERM' }]);
    assert.deepEqual(await server.exited, { code: 0, signal: null });
    assert.equal(fs.existsSync(server.socketPath), false);
    assert.match(server.stderr, /1 aborted/);
    const store = readStore(state);
    assert.deepEqual(userTexts(transcriptOf(state, 'main', store[events[0].sessionKey])), ['being stored']);
    assert.equal(Object.keys(store).length, 1, 'the refused message left no session behind');
  });

  test('SIGHUP: a bad config is rejected and the old one kept; a good one is applied (seen through route.resolve)', async () => {
    const state = tempDir();
    const config = path.join(state, 'switchboard.json5');
    fs.writeFileSync(config, JSON.stringify({ agents: { list: [{ id: 'main', default: true }, { id: 'work' }] } }));
    const server = await startServe(state, ['--config', config]);
    const client = await connectClient(server.socketPath);
    const input = { channel: 'slack', peer: 'channel:C1' };
    assert.equal((await client.request<any>('route.resolve', { input })).agentId, 'main');

    fs.writeFileSync(config, '{ agents: { list: [ { id: 1 } ] }'); // not even valid JSON5
    server.signal('SIGHUP');
    await server.waitForStderr(/config reload rejected/);
    assert.equal((await client.request<any>('route.resolve', { input })).agentId, 'main');

    fs.writeFileSync(
      config,
      JSON.stringify({ agents: { list: [{ id: 'main', default: true }, { id: 'work' }] }, bindings: [{ agentId: 'work', match: { channel: 'slack', accountId: '*' } }] }),
    );
    server.signal('SIGHUP');
    await server.waitForStderr(/config reloaded from/);
    const route = await client.request<any>('route.resolve', { input });
    assert.equal(route.agentId, 'work');
    assert.equal(route.matchedBy, 'binding.channel');
    const status = await client.request<any>('status');
    assert.deepEqual(status.reloads, { applied: 1, rejected: 1, retained: 1 });
    await client.close();
    await server.stop();
  });
});

describe('requests', { timeout: 60_000 }, () => {
  let state: string;
  let config: string;
  let server: ServeProcess;

  before(async () => {
    state = tempDir();
    config = EXAMPLE_CONFIG;
    server = await startServe(state, ['--config', config, '--now', NOW]);
  });
  after(() => server.stop());

  test('bad requests get error answers (id when readable, else null) and hurt nobody', async () => {
    const bad = await RawClient.connect(server.socketPath);
    const good = await connectClient(server.socketPath);
    bad.send('this is not json\n');
    let answer = await bad.next();
    assert.deepEqual([answer.id, answer.error.code], [null, 'BAD_INPUT']);
    bad.send({ op: 'status' });
    answer = await bad.next();
    assert.equal(answer.id, null);
    assert.equal(answer.error.code, 'BAD_INPUT');
    bad.send({ id: 'u', op: 'reboot' });
    answer = await bad.next();
    assert.deepEqual([answer.id, answer.error.code], ['u', 'USAGE']);
    bad.send({ id: 'w1', op: 'route.resolve', input: 5 });
    answer = await bad.next();
    assert.deepEqual([answer.id, answer.error.code], ['w1', 'BAD_INPUT']);
    bad.send({ id: 'w2', op: 'ingest', messages: 'nope' });
    answer = await bad.next();
    assert.deepEqual([answer.id, answer.error.code], ['w2', 'BAD_INPUT']);
    bad.send({ id: 'w3', op: 'sessions.list', limit: -1 });
    answer = await bad.next();
    assert.deepEqual([answer.id, answer.error.code], ['w3', 'BAD_INPUT']);
    // A store path the client cannot mean: relative (to the server's cwd) or holding a NUL.
    for (const store of ['agents/main/sessions/sessions.json', '/tmp/x\u0000/sessions.json']) {
      bad.send({ id: 'w4', op: 'sessions.list', store });
      answer = await bad.next();
      assert.deepEqual([answer.id, answer.error.code], ['w4', 'BAD_INPUT'], JSON.stringify(answer));
    }
    bad.send({ id: { nested: true }, op: 'status' });
    answer = await bad.next();
    assert.deepEqual([answer.id, answer.error.code], [null, 'BAD_INPUT']);
    // A line over the cap (1 MiB + envelope): answered, the connection stays usable.
    bad.send(`{"id":"huge","op":"ingest","message":{"channel":"telegram","text":"${'x'.repeat(2 * 1024 * 1024)}"}}\n`);
    answer = await bad.next();
    assert.deepEqual([answer.id, answer.error.code], [null, 'BAD_INPUT']);
    assert.match(answer.error.message, /over the \d+-byte cap/);
    // A bad message inside a good request is an error event, as on the command line.
    bad.send({ id: 'm', op: 'ingest', messages: [{ text: 'no channel' }, 42], line: 7 });
    answer = await bad.next();
    assert.equal(answer.id, 'm');
    assert.deepEqual(
      answer.result.events.map((e: any) => [e.type, e.line, e.code, e.path]),
      [
        ['error', 7, 'BAD_MESSAGE', 'channel'],
        ['error', 8, 'BAD_MESSAGE', '$'],
      ],
    );
    assert.match(answer.result.events[0].message, /^line 7: /);
    bad.send({ id: 'ok', op: 'status' });
    answer = await bad.next();
    assert.equal(answer.id, 'ok');
    assert.equal(answer.result.pid, server.child.pid);
    // Meanwhile the well-behaved client was never disturbed.
    assert.equal((await good.request<any>('route.resolve', { input: { channel: 'telegram', peer: 'direct:1' } })).agentId, 'main');
    bad.close();
    await good.close();
  });

  test('a client that does not read holds only itself up; its answers come later, all of them, in order', async () => {
    const slow = await RawClient.connect(server.socketPath);
    slow.socket.pause();
    const count = 4_000; // ≈ 3 MB of status answers: more than the kernel buffers plus the high-water mark
    let batch = '';
    for (let i = 1; i <= count; i++) batch += `${JSON.stringify({ id: i, op: 'status' })}\n`;
    slow.send(batch);
    const other = await connectClient(server.socketPath);
    for (let i = 0; i < 20; i++) assert.equal((await other.request<any>('status')).pid, server.child.pid);
    // The slow client's requests wait behind its unread answers instead of piling up in memory.
    const waiting = (await other.request<any>('status')).requests;
    assert.ok(waiting.total < count, `server stopped reading the slow client (${waiting.total} requests read so far)`);
    await other.close();
    slow.socket.resume();
    for (let i = 1; i <= count; i++) assert.equal((await slow.next()).id, i);
    slow.close();
  });

  test('route.resolve / route.explain / sessions.list return what the CLI prints with --json', async () => {
    const client = await connectClient(server.socketPath);
    const flags = ['--config', config, '--state-dir', state, '--now', NOW, '--json'];
    const input = { channel: 'discord', peer: { kind: 'channel', id: 'thread-dune' }, parentPeer: { kind: 'channel', id: 'book-club' }, guildId: 'g-friends' };
    const routeFlags = ['--channel', 'discord', '--peer', 'channel:thread-dune', '--parent-peer', 'channel:book-club', '--guild', 'g-friends'];
    const resolved = await client.request('route.resolve', { input });
    assert.deepEqual(resolved, jsonLines((await runCli(['route', 'resolve', ...routeFlags, ...flags])).stdout)[0]);
    const explained = await client.request('route.explain', { input });
    assert.deepEqual(explained, jsonLines((await runCli(['route', 'explain', ...routeFlags, ...flags])).stdout)[0]);

    const messages = fs.readFileSync(EXAMPLE_MESSAGES, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l));
    const { events } = await client.request<any>('ingest', { messages });
    assert.deepEqual(events.map((e: any) => [e.type, e.line]), [1, 2, 3, 4, 5].map((n) => ['result', n]));
    for (const options of [{}, { allAgents: true }, { agent: 'club', limit: 1 }]) {
      const cliFlags = [...('allAgents' in options ? ['--all-agents'] : []), ...('agent' in options ? ['--agent', 'club', '--limit', '1'] : [])];
      const listing = await client.request('sessions.list', options);
      assert.deepEqual(listing, jsonLines((await runCli(['sessions', ...cliFlags, ...flags])).stdout)[0]);
    }
    // After an ingest the explain answer sees the instance, as the CLI does.
    const again = await client.request<any>('route.explain', { input });
    assert.equal(again.session.exists, true);
    await client.close();
  });

  test('status and the queue ops', async () => {
    const client = await connectClient(server.socketPath);
    const status = await client.request<any>('status');
    assert.equal(status.pid, server.child.pid);
    assert.equal(status.socket, server.socketPath);
    assert.equal(status.stateDir, state);
    assert.equal(status.config, config);
    assert.deepEqual(status.stores.map((s: any) => s.agentId), ['main', 'club']);
    assert.ok(status.clients >= 1);
    assert.equal(typeof status.uptimeMs, 'number');
    assert.equal(status.activeRuns, 0);
    // No runner in this config: nothing waits, and the ops answer as the queue commands do.
    assert.deepEqual(await client.request('queue.list', {}), { items: [], active: [] });
    const by = { pid: 4242, hostname: 'client-host', user: 'alice' };
    const abort = await client.request<Record<string, any>>('queue.abort', { session: 'agent:main:direct:alice', by, reason: 'testing' });
    assert.deepEqual(abort, { sessionKey: 'agent:main:direct:alice', cancelled: [], aborted: null, cancelledBy: { ...by, reason: 'testing', at: abort.cancelledBy.at } }, 'the client named in "by" is who asked');
    await assert.rejects(client.request('queue.abort', { session: 'agent:main:direct:alice', by: { pid: 'x' } }), (err: any) => err.code === 'BAD_INPUT');
    await assert.rejects(client.request('queue.cancel', { runId: 'no-such-run' }), (err: any) => err.code === 'NOT_FOUND' && err.exitCode === 66);
    await assert.rejects(client.request('queue.show', { runId: 'no-such-run' }), (err: any) => err.code === 'NOT_FOUND');
    await assert.rejects(client.request('queue.cancel', {}), (err: any) => err.code === 'BAD_INPUT');
    await client.close();
  });

  test('subscribe pushes events of the chosen session (or of all) to other clients', async () => {
    const watcher = await connectClient(server.socketPath);
    const all = await connectClient(server.socketPath);
    const sender = await connectClient(server.socketPath);
    const seen: Push[] = [];
    const seenAll: Push[] = [];
    watcher.onPush((push) => seen.push(push));
    all.onPush((push) => seenAll.push(push));
    assert.deepEqual(await watcher.request('subscribe', { sessionKey: 'agent:main:direct:sub-1' }), { subscribed: ['agent:main:direct:sub-1'] });
    assert.deepEqual(await all.request('subscribe', {}), { subscribed: 'all' });
    const { events } = await sender.request<any>('ingest', {
      messages: [
        { channel: 'telegram', peer: 'direct:sub-1', text: 'for the watcher', messageId: 'sub-a' },
        { channel: 'telegram', peer: 'direct:sub-2', text: 'not for the watcher', messageId: 'sub-b' },
        { text: 'bad line: nobody else hears of it' },
      ],
    });
    // Pushes are written before the sender's answer; a status round trip orders after them.
    await watcher.request('status');
    await all.request('status');
    assert.equal(seen.length, 1);
    const { type: _type, line: _line, ...fields } = events[0];
    assert.deepEqual(seen[0], { event: 'result', ...fields });
    assert.deepEqual(seenAll.map((p) => p.messageId), ['sub-a', 'sub-b']);
    // A subscriber may close its sending side and keep listening (`printf … | socat - UNIX-CONNECT:…`).
    const listener = await RawClient.connect(server.socketPath);
    listener.send({ id: 1, op: 'subscribe', sessionKey: 'agent:main:direct:sub-3' });
    listener.socket.end();
    assert.deepEqual(await listener.next(), { id: 1, result: { subscribed: ['agent:main:direct:sub-3'] } });
    await sender.request('ingest', { message: { channel: 'telegram', peer: 'direct:sub-3', text: 'to a half-closed listener', messageId: 'sub-c' } });
    const heard = await listener.next();
    assert.deepEqual([heard.event, heard.messageId], ['result', 'sub-c']);
    listener.close();
    // A mistyped param is refused, not ignored: without "sessionKey" a subscribe means every session.
    for (const op of ['subscribe', 'unsubscribe'] as const) {
      await assert.rejects(watcher.request(op, { sessionKeys: ['agent:main:direct:sub-2'] }), (err: any) => err.code === 'BAD_INPUT' && /"sessionKeys"/.test(err.message));
    }
    assert.deepEqual(await watcher.request('subscribe', { sessionKey: 'agent:main:direct:sub-1' }), { subscribed: ['agent:main:direct:sub-1'] }, 'the refused requests changed nothing');
    assert.deepEqual(await watcher.request('unsubscribe', {}), { subscribed: null });
    await sender.request('ingest', { message: { channel: 'telegram', peer: 'direct:sub-1', text: 'after unsubscribe' } });
    await watcher.request('status');
    assert.equal(seen.length, 1);
    await Promise.all([watcher.close(), all.close(), sender.close()]);
  });
});

describe('runs in the server', { timeout: 60_000 }, () => {
  test('replies and run events are pushed to subscribers; SIGTERM lets the running run finish', async () => {
    const state = tempDir();
    const config = writeJson(path.join(state, 'c.json'), { agents: { defaults: { runner: { command: 'builtin:slow-echo', delayMs: 300, toolCalls: 1 } } } });
    const server = await startServe(state, ['--config', config]);
    const watcher = await connectClient(server.socketPath);
    const waitFor = pushWaiter(watcher);
    await watcher.request('subscribe', {});
    const sender = await connectClient(server.socketPath);
    const { events } = await sender.request<any>('ingest', { message: { channel: 'telegram', peer: 'direct:9', text: 'hello runner' } });
    assert.equal(events[0].disposition, 'started');
    const runId = events[0].runId;
    await waitFor((p) => p.event === 'run_started' && p.runId === runId);
    assert.equal((await sender.request<any>('status')).activeRuns, 1);
    await sender.close();
    server.signal('SIGTERM');
    const reply = await waitFor((p) => p.event === 'reply' && p.runId === runId);
    assert.equal(reply.text, 'slow-echo: hello runner');
    assert.equal((await waitFor((p) => p.event === 'run_ended' && p.runId === runId)).status, 'done');
    await waitFor((p) => p.event === 'shutdown');
    assert.deepEqual(await server.exited, { code: 0, signal: null });
    await watcher.closed;
  });

  test('SIGTERM: the running turn finishes, a queued followup does not start (it would be cut off); the next process runs it', async () => {
    const state = tempDir();
    const config = writeJson(path.join(state, 'c.json'), {
      agents: { defaults: { runner: { command: 'builtin:slow-echo', delayMs: 800, toolCalls: 1 } } },
      messages: { queue: { mode: 'followup', debounceMs: 0 } },
    });
    const server = await startServe(state, ['--config', config, '--grace', '20000']);
    const client = await connectClient(server.socketPath);
    const waitFor = pushWaiter(client);
    const started: string[] = [];
    client.onPush((push) => {
      if (push.event === 'run_started') started.push(push.runId as string);
    });
    await client.request('subscribe', {});
    const a = (await client.request<any>('ingest', { message: { channel: 'telegram', peer: 'direct:23', text: 'first', messageId: 't-1' } })).events[0];
    await waitFor((p) => p.event === 'run_started' && p.runId === a.runId);
    const b = (await client.request<any>('ingest', { message: { channel: 'telegram', peer: 'direct:23', text: 'second', messageId: 't-2' } })).events[0];
    assert.equal(b.disposition, 'queued');
    server.signal('SIGTERM');
    assert.equal((await waitFor((p) => p.event === 'run_ended' && p.runId === a.runId)).status, 'done');
    assert.deepEqual(await server.exited, { code: 0, signal: null });
    assert.deepEqual(started, [a.runId], 'only the turn already running ran');
    const entry = readStore(state)[b.sessionKey];
    assert.deepEqual(entry.queue.map((item: any) => item.runId), [b.runId], 'the followup waits on disk');
    assert.equal(entry.queueOwner, undefined, 'given up by the stopped server');
    assert.equal(entry.activeRun, undefined);

    // The next ingest takes the queue over and runs it (its own message waits behind it).
    const next = await runCli(['ingest', '--state-dir', state, '--config', config, '--json'], {
      input: `${JSON.stringify({ channel: 'telegram', peer: 'direct:23', text: 'third', messageId: 't-3' })}\n`,
    });
    assert.equal(next.code, 0, next.stderr);
    const replies = jsonLines(next.stdout).filter((e) => e.type === 'reply').map((e) => e.text);
    assert.ok(replies.includes('slow-echo: second'), JSON.stringify(replies));
    const texts = transcriptOf(state, 'main', readStore(state)[b.sessionKey]).filter((l) => l.type === 'message' && l.message.role === 'user').map((l) => l.message.content[0].text);
    assert.deepEqual(texts, ['first', 'second', 'third']);
  });

  test('case 22 for serve: items queued when the server is SIGKILLed run after the restart', async () => {
    const state = tempDir();
    const config = writeJson(path.join(state, 'c.json'), {
      agents: { defaults: { runner: { command: 'builtin:slow-echo', delayMs: 1_000, toolCalls: 1 } } },
      messages: { queue: { mode: 'followup', debounceMs: 0 } },
    });
    const first = await startServe(state, ['--config', config]);
    const client = await connectClient(first.socketPath);
    const waitFor = pushWaiter(client);
    await client.request('subscribe', {});
    const a = (await client.request<any>('ingest', { message: { channel: 'telegram', peer: 'direct:22', text: 'first' } })).events[0];
    await waitFor((p) => p.event === 'run_started' && p.runId === a.runId);
    const b = (await client.request<any>('ingest', { message: { channel: 'telegram', peer: 'direct:22', text: 'second' } })).events[0];
    assert.equal(b.disposition, 'queued');
    first.signal('SIGKILL');
    await first.exited;
    await client.closed.catch(() => undefined);

    const second = await startServe(state, ['--config', config]);
    assert.match(second.stderr, /stale socket/);
    assert.match(second.stderr, /resumed 1 waiting queue/);
    const watcher = await connectClient(second.socketPath);
    // The queued item runs here now; wait until nothing is queued or running any more.
    for (let i = 0; i < 1_000; i++) {
      const listing = await watcher.request<any>('queue.list', {});
      if (listing.items.length === 0 && listing.active.length === 0) break;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    const entry = readStore(state)[b.sessionKey];
    const lines = transcriptOf(state, 'main', entry);
    const texts = lines.filter((l) => l.type === 'message').map((l) => `${l.message.role}:${l.message.content?.[0]?.text ?? ''}`);
    assert.ok(texts.includes('assistant:slow-echo: second'), `the queued message ran after the restart: ${JSON.stringify(texts)}`);
    await watcher.close();
    await second.stop();
  });
});

describe('a subscriber that stops reading', { timeout: 60_000 }, () => {
  test('is dropped with a final UNAVAILABLE error once its queued events pass the cap; the others are unaffected', async () => {
    const state = tempDir();
    const server = await startLimited(state, 64 * 1024, 16 * 1024);
    const subscriber = await RawClient.connect(server.socketPath);
    subscriber.send({ id: 's', op: 'subscribe' });
    assert.deepEqual(await subscriber.next(), { id: 's', result: { subscribed: 'all' } });
    subscriber.socket.pause();
    const sender = await connectClient(server.socketPath);
    let status: any;
    for (let round = 0; round < 10; round++) {
      const messages = Array.from({ length: 500 }, (_, i) => ({ channel: 'telegram', peer: `direct:p${i % 10}`, text: `push ${round}-${i} ${'x'.repeat(200)}` }));
      const { events } = await sender.request<any>('ingest', { messages });
      assert.equal(events.filter((e: any) => e.type === 'result').length, 500);
      // Stop as soon as it is dropped, so that it reads its final line before the close timeout.
      status = await sender.request<any>('status');
      if (status.clients === 1) break;
    }
    assert.equal(status.clients, 1, 'the slow subscriber was disconnected');
    subscriber.socket.resume();
    let last: any;
    for (let next = await subscriber.next(); next !== undefined; next = await subscriber.next()) last = next;
    assert.equal(last.id, null);
    assert.equal(last.error.code, 'UNAVAILABLE');
    assert.match(last.error.message, /too slow/);
    await sender.close();
    await server.stop();
  });
});

describe('a client that stops reading while the server stops', { timeout: 60_000 }, () => {
  test('every line it had sent that the server read is answered, in order: a request UNAVAILABLE, an unreadable line its error', async () => {
    const state = tempDir();
    const server = await startLimited(state, 64 * 1024, 1024);
    const slow = await RawClient.connect(server.socketPath);
    slow.socket.pause();
    // Requests with an unreadable line after every third: far more answers than the socket holds,
    // so the server stops answering until the client reads, with read lines still waiting.
    const sent: (number | 'bad')[] = [];
    let text = '';
    for (let id = 1; id <= 3000; id++) {
      text += `${JSON.stringify({ id, op: 'status' })}\n`;
      sent.push(id);
      if (id % 3 === 0) {
        text += 'this is not a request\n';
        sent.push('bad');
      }
    }
    slow.socket.write(text);
    const probe = await connectClient(server.socketPath);
    let handled = -1;
    for (let probes = 1; ; probes++) {
      // Requests handled but the probe's own: once that stops growing, the slow client's answers
      // are stuck until it reads.
      const total = (await probe.request<any>('status')).requests.total - probes;
      if (total === handled) break;
      handled = total;
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    await probe.close();
    server.signal('SIGTERM');
    // Reading again once the grace period (2 s in the fixture) is over: the server then answers
    // what is still waiting and closes, and cuts a client that reads nothing 1.5 s later.
    await new Promise((resolve) => setTimeout(resolve, 2_200));
    slow.socket.resume();
    const answers: any[] = [];
    for (let next = await slow.next(); next !== undefined; next = await slow.next()) answers.push(next);
    await server.exited;
    assert.deepEqual(answers.pop(), { event: 'shutdown', reason: 'SIGTERM' });
    const waiting = answers.filter((a) => a.error?.message === 'the server stopped before handling this request');
    assert.ok(waiting.length > 0, 'some read requests were still waiting when the server closed');
    assert.deepEqual(answers.map((a) => (a.id === null ? 'bad' : a.id)), sent.slice(0, answers.length), 'one answer per line read, in order');
    for (const answer of answers.filter((a) => a.id === null)) assert.equal(answer.error.code, 'BAD_INPUT');
  });
});

describe('many clients that send and do not read', { timeout: 60_000 }, () => {
  test('what the server holds of their requests stays within its total, whatever each may hold; all are answered once the work moves', async () => {
    const state = tempDir();
    const TOTAL = 2 * 1024 * 1024;
    const server = await startLimited(state, 16 * 1024 * 1024, 1024 * 1024, undefined, TOTAL);
    const lock = await holdStoreLock(state);
    const before = rssBytes(server.child.pid!);
    // Each client: an ingest that waits for the store lock, then 4 MiB of unreadable lines
    // queued behind it — within its own limit (8 MiB), 64 MiB for the sixteen together.
    const clients = await Promise.all(Array.from({ length: 16 }, () => RawClient.connect(server.socketPath)));
    const filler = `${'x'.repeat(64 * 1024)}\n`.repeat(64);
    clients.forEach((client, i) => {
      client.send({ id: `in-${i}`, op: 'ingest', messages: [{ channel: 'telegram', peer: `direct:p${i}`, text: 'hello' }] });
      client.send(filler);
    });
    const probe = await connectClient(server.socketPath);
    let held = -1;
    for (;;) {
      // Reading has stopped once the bytes held stop growing.
      const now = rssBytes(server.child.pid!);
      if (now === held) break;
      held = now;
      await new Promise((resolve) => setTimeout(resolve, 300));
    }
    const status = await probe.request<any>('status');
    assert.ok(held - before < 24 * 1024 * 1024, `the server grew by ${((held - before) / 2 ** 20).toFixed(1)} MiB`);
    assert.ok(status.requests.pendingBytes <= TOTAL + 16 * 128 * 1024, `${status.requests.pendingBytes} bytes held`);
    await lock.release();
    for (const [i, client] of clients.entries()) {
      const first = await client.next();
      assert.equal(first.id, `in-${i}`);
      assert.equal(first.result.events[0].persisted, true);
      for (let line = 0; line < 64; line++) assert.equal((await client.next()).error.code, 'BAD_INPUT');
      client.close();
    }
    await probe.close();
    await server.stop();
  });
});

describe('at its client limit', { timeout: 60_000 }, () => {
  test('the connection idle longest is let go for a new client (a final UNAVAILABLE line); busy ones and subscribers never are', async () => {
    const state = tempDir();
    const server = await startLimited(state, 16 * 1024 * 1024, 1024 * 1024, 3);
    const subscriber = await RawClient.connect(server.socketPath);
    subscriber.send({ id: 's', op: 'subscribe' });
    assert.deepEqual(await subscriber.next(), { id: 's', result: { subscribed: 'all' } });
    // A slowloris (half a line, never finished), then one that connects and says nothing.
    const trickler = await RawClient.connect(server.socketPath);
    trickler.socket.write('{"id":1,"op":"sta');
    await new Promise((resolve) => setTimeout(resolve, 50));
    const silent = await RawClient.connect(server.socketPath);
    await new Promise((resolve) => setTimeout(resolve, 50));

    const newcomer = await connectClient(server.socketPath);
    assert.equal((await newcomer.request<any>('status')).clients, 3, 'let in: the server is still at its limit');
    const goodbye = await trickler.next();
    assert.equal(goodbye.id, null);
    assert.equal(goodbye.error.code, 'UNAVAILABLE');
    assert.match(goodbye.error.message, /idle/);
    assert.equal(await trickler.next(), undefined, 'and closed');

    // The next one takes the silent client's place; then the newcomers subscribe, and with every
    // client busy a further connection is refused.
    const second = await RawClient.connect(server.socketPath);
    second.send({ id: 'b', op: 'subscribe' });
    assert.deepEqual(await second.next(), { id: 'b', result: { subscribed: 'all' } });
    assert.equal((await silent.next()).error.code, 'UNAVAILABLE');
    await newcomer.request<any>('subscribe', {});
    const refused = await RawClient.connect(server.socketPath);
    const answer = await refused.next();
    assert.equal(answer.error.code, 'UNAVAILABLE');
    assert.match(answer.error.message, /too many clients/);
    subscriber.send({ id: 'still', op: 'status' });
    let status = await subscriber.next();
    while (status.id !== 'still') status = await subscriber.next();
    assert.equal(status.result.clients, 3, 'the subscribers were never let go');
    await newcomer.close();
    await server.stop();
  });
});

describe('ingest and send through the socket', { timeout: 60_000 }, () => {
  test('writes the same store and prints the same events as the CLI (bad lines included)', async () => {
    const viaSocket = tempDir();
    const direct = tempDir();
    const input = [
      ...fs.readFileSync(EXAMPLE_MESSAGES, 'utf8').trim().split('\n'),
      '',
      'not json at all',
      line({ channel: 'telegram', text: 'no peer is fine' }),
      line({ peer: 'direct:1', text: 'no channel' }),
      line({ channel: 'telegram', peer: 'direct:111222333', text: 'x'.repeat(1024 * 1024) }),
      line({ channel: 'telegram', peer: 'direct:111222333', text: 'after the huge line', messageId: 'tg-1002' }),
      line({ channel: 'telegram', peer: 'direct:111222333', text: 'duplicate', messageId: 'tg-1001' }),
      // Numbers JSON reads as Infinity: the socket client used to send them as null (a thread or
      // peer id dropped, the message taken into another session), where the CLI refuses the line.
      '{"channel":"telegram","peer":"direct:111222333","text":"thread overflow","threadId":1e400}',
      '{"channel":"telegram","peer":{"kind":"direct","id":-1e400},"text":"peer id overflow"}',
      '{"channel":"telegram","peer":"direct:111222333","text":"time overflow","timestamp":1e400}',
    ].join('\n');
    const server = await startServe(viaSocket, ['--config', EXAMPLE_CONFIG, '--now', NOW]);
    const socketRun = await run(SOCKET_CLIENT_ENTRY, ['ingest', '--socket', server.socketPath, '--state-dir', viaSocket], input);
    const directRun = await runCli(['ingest', '--config', EXAMPLE_CONFIG, '--state-dir', direct, '--now', NOW], { input });
    assert.equal(directRun.code, 65, directRun.stderr);
    assert.equal(socketRun.code, directRun.code, socketRun.stderr);
    const socketEvents = jsonLines(socketRun.stdout);
    assert.deepEqual(
      socketEvents.map((e) => [e.line, e.type, e.disposition ?? e.code]),
      jsonLines(directRun.stdout).map((e) => [e.line, e.type, e.disposition ?? e.code]),
    );
    assert.deepEqual(canonical(socketEvents), canonical(jsonLines(directRun.stdout)));
    for (const agent of ['main', 'club']) {
      const a = readStore(viaSocket, agent);
      const b = readStore(direct, agent);
      assert.deepEqual(canonical(a), canonical(b));
      for (const key of Object.keys(a)) {
        assert.deepEqual(canonical(transcriptOf(viaSocket, agent, a[key])), canonical(transcriptOf(direct, agent, b[key])));
      }
    }

    const sent = await run(SOCKET_CLIENT_ENTRY, ['send', 'hello from send', '--channel', 'telegram', '--peer', 'direct:55', '--socket', server.socketPath, '--state-dir', viaSocket]);
    assert.equal(sent.code, 0, sent.stderr);
    const [event] = jsonLines(sent.stdout);
    assert.deepEqual([event.type, event.line, event.sessionKey, event.persisted], ['result', 1, 'agent:main:direct:55', true]);
    await server.stop();
  });

  test('with a runner, ingest --socket prints the runs\' events and returns once they ended, as ingest does; --no-wait prints results only', async () => {
    const state = tempDir();
    const config = writeJson(path.join(state, 'c.json'), {
      agents: { defaults: { runner: { command: 'builtin:slow-echo', delayMs: 50, toolCalls: 1 } } },
      messages: { queue: { mode: 'followup', debounceMs: 0 } },
      session: { dmScope: 'per-peer' },
    });
    const server = await startServe(state, ['--config', config]);
    const input = [
      line({ channel: 'telegram', peer: 'direct:1', text: 'one' }),
      line({ channel: 'telegram', peer: 'direct:1', text: 'two' }),
      line({ channel: 'telegram', peer: 'direct:2', text: 'three' }),
    ].join('\n');
    const waited = await run(SOCKET_CLIENT_ENTRY, ['ingest', '--socket', server.socketPath, '--state-dir', state], input);
    assert.equal(waited.code, 0, waited.stderr);
    const events = jsonLines(waited.stdout);
    const results = events.filter((e) => e.type === 'result');
    assert.deepEqual(results.map((e) => e.disposition), ['started', 'queued', 'started']);
    assert.deepEqual(events.filter((e) => e.type === 'reply').map((e) => e.text).sort(), ['slow-echo: one', 'slow-echo: three', 'slow-echo: two']);
    // Every run it caused was seen to start and to end before it returned.
    const started = events.filter((e) => e.type === 'run_started').map((e) => e.runId).sort();
    assert.equal(started.length, 3);
    assert.deepEqual(events.filter((e) => e.type === 'run_ended').map((e) => e.runId).sort(), started);
    const probe = await connectClient(server.socketPath);
    assert.deepEqual(await probe.request('queue.list', {}), { items: [], active: [] });
    await probe.close();

    const quick = await run(SOCKET_CLIENT_ENTRY, ['ingest', '--socket', server.socketPath, '--state-dir', state, '--no-wait'], line({ channel: 'telegram', peer: 'direct:3', text: 'four' }));
    assert.equal(quick.code, 0, quick.stderr);
    assert.deepEqual(jsonLines(quick.stdout).map((e) => [e.type, e.disposition]), [['result', 'started']]);

    // Another client's run while this ingest is between two lines: its events are not this
    // ingest's to print (they wait until the next answer shows they are another session's).
    const streaming = spawn(process.execPath, [SOCKET_CLIENT_ENTRY, 'ingest', '--socket', server.socketPath, '--state-dir', state], { env: cleanEnv(), stdio: ['pipe', 'pipe', 'pipe'] });
    let streamed = '';
    streaming.stdout.on('data', (chunk: Buffer) => (streamed += chunk));
    const streamExit = new Promise<number | null>((resolve) => streaming.on('close', resolve));
    streaming.stdin.write(`${line({ channel: 'telegram', peer: 'direct:6', text: 'six' })}\n`);
    while (!streamed.includes('"type":"result"')) await new Promise((resolve) => setTimeout(resolve, 10));
    const other = await connectClient(server.socketPath);
    const noise = (await other.request<any>('ingest', { message: { channel: 'telegram', peer: 'direct:9', text: 'noise' } })).events[0];
    for (;;) {
      const listing = await other.request<any>('queue.list', { session: noise.sessionKey });
      if (listing.active.length === 0 && listing.items.length === 0) break;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    await other.close();
    streaming.stdin.end(`${line({ channel: 'telegram', peer: 'direct:7', text: 'seven' })}\n`);
    assert.equal(await streamExit, 0);
    const streamedEvents = jsonLines(streamed);
    assert.deepEqual(streamedEvents.filter((e) => e.sessionKey === noise.sessionKey), []);
    assert.deepEqual(streamedEvents.filter((e) => e.type === 'reply').map((e) => e.text).sort(), ['slow-echo: seven', 'slow-echo: six']);

    // send --socket is one line of ingest --socket: it waits for its run too.
    const sent = await run(SOCKET_CLIENT_ENTRY, ['send', 'five', '--channel', 'telegram', '--peer', 'direct:5', '--socket', server.socketPath, '--state-dir', state]);
    assert.equal(sent.code, 0, sent.stderr);
    const sentEvents = jsonLines(sent.stdout);
    assert.deepEqual([sentEvents[0].type, sentEvents[0].disposition], ['result', 'started']);
    assert.equal(sentEvents.find((e) => e.type === 'reply')?.text, 'slow-echo: five');
    assert.equal(sentEvents.at(-1).type, 'run_ended');
    await server.stop();
  });

  test('without a server: exit 69 UNAVAILABLE with a hint, for ingest, send and the client API', async () => {
    const state = tempDir();
    const socketPath = path.join(state, 'switchboard.sock');
    const ingest = await run(SOCKET_CLIENT_ENTRY, ['ingest', '--socket', socketPath, '--state-dir', state, '--json'], line({ channel: 'telegram', text: 'hi' }));
    assert.equal(ingest.code, 69, ingest.stderr);
    const error = jsonLines(ingest.stderr)[0].error;
    assert.equal(error.code, 'UNAVAILABLE');
    assert.match(error.hint, /switchboard serve/);
    assert.equal(ingest.stdout, '');
    const send = await run(SOCKET_CLIENT_ENTRY, ['send', 'hi', '--channel', 'telegram', '--socket', socketPath, '--state-dir', state]);
    assert.equal(send.code, 69, send.stderr);
    // A leftover socket file with nobody behind it is the same situation.
    const killed = await startServe(state);
    killed.signal('SIGKILL');
    await killed.exited;
    await assert.rejects(connectClient(socketPath), (err: any) => err.code === 'UNAVAILABLE' && err.exitCode === 69);
    assert.equal(fs.existsSync(path.join(state, 'agents')), false, 'nothing was written');
  });
});

describe('load (quality case 24)', { timeout: 120_000 }, () => {
  test('50 concurrent clients × 200 messages (and a CLI ingest alongside): every request answered, store consistent, accounting exact', async () => {
    const clients = 50;
    const perClient = 200;
    const peers = 25;
    const state = tempDir();
    const config = writeJson(path.join(state, 'config.json'), { session: { dmScope: 'per-peer' } });
    const server = await startServe(state, ['--config', config]);
    const latencies: number[] = [];
    const peerOf = (c: number, i: number) => `u${(c * 7 + i) % peers}`;

    // The CLI writes to the same sessions at the same time: both go through the same engine and locks.
    const cliLines = Array.from({ length: 500 }, (_, i) => line({ channel: 'telegram', peer: `direct:u${i % peers}`, text: `cli-${i}`, messageId: `cli-${i}` })).join('\n');
    const cliRun = runCli(['ingest', '--config', config, '--state-dir', state], { input: cliLines });

    const started = performance.now();
    await Promise.all(
      Array.from({ length: clients }, async (_, c) => {
        const client = await connectClient(server.socketPath);
        for (let i = 0; i < perClient; i++) {
          const sentAt = performance.now();
          const { events } = await client.request<any>('ingest', { message: { channel: 'telegram', peer: `direct:${peerOf(c, i)}`, text: `c${c}-${i}`, messageId: `c${c}-${i}` } });
          latencies.push(performance.now() - sentAt);
          assert.equal(events.length, 1);
          assert.deepEqual([events[0].type, events[0].line, events[0].disposition, events[0].sessionKey], ['result', 1, 'recorded', `agent:main:direct:${peerOf(c, i)}`]);
        }
        await client.close();
      }),
    );
    const elapsed = performance.now() - started;
    const cli = await cliRun;
    assert.equal(cli.code, 0, cli.stderr);
    assert.equal(jsonLines(cli.stdout).length, 500);

    assert.equal(latencies.length, clients * perClient);
    latencies.sort((a, b) => a - b);
    const median = latencies[Math.floor(latencies.length / 2)]!;
    const p99 = latencies[Math.floor(latencies.length * 0.99)]!;
    console.log(
      `case 24: ${clients} clients × ${perClient} messages in ${(elapsed / 1000).toFixed(1)} s (${Math.round((clients * perClient) / (elapsed / 1000))} msg/s); request→result latency median ${median.toFixed(1)} ms, p99 ${p99.toFixed(1)} ms`,
    );

    // Every message exactly once, in its own session's transcript, each client's messages in order.
    const store = readStore(state);
    assert.equal(Object.keys(store).length, peers);
    const seen = new Map<string, number>();
    for (const [key, entry] of Object.entries(store)) {
      const texts = userTexts(transcriptOf(state, 'main', entry));
      const lastIndex = new Map<string, number>();
      for (const text of texts) {
        seen.set(text, (seen.get(text) ?? 0) + 1);
        const [, who, index] = /^(c\d+|cli)-(\d+)$/.exec(text)!;
        const expectedPeer = who === 'cli' ? `u${Number(index) % peers}` : peerOf(Number(who!.slice(1)), Number(index));
        assert.equal(key, `agent:main:direct:${expectedPeer}`);
        assert.ok((lastIndex.get(who!) ?? -1) < Number(index), `${who}'s messages are in order in ${key}`);
        lastIndex.set(who!, Number(index));
      }
    }
    assert.equal(seen.size, clients * perClient + 500);
    assert.ok([...seen.values()].every((n) => n === 1), 'no message twice');

    const client = await connectClient(server.socketPath);
    const status = await client.request<any>('status');
    const { batches, ...messages } = status.messages;
    assert.deepEqual(messages, { results: clients * perClient, errors: 0, queued: 0 });
    assert.ok(batches >= 1 && batches <= clients * perClient, `batches: ${batches}`);
    assert.deepEqual(status.requests, { total: clients * perClient + 1, inFlight: 1, errors: 0, badRequests: 0, pendingBytes: 0 });
    assert.equal(status.connections, clients + 1);
    await client.close();
    await server.stop();
  });
});
