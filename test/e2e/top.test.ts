// `switchboard top` end to end: its data sources against a real store and a real `serve` with a
// builtin:slow-echo runner, the real binary in a real terminal (tmux), and the refusal without one.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { systemClock } from '../../src/core/index.js';
import { CliContext } from '../../src/cli/context.js';
import { processStreams } from '../../src/cli/output.js';
import { TopFeed } from '../../src/cli/top/feed.js';
import { ServerSource, StoreSource, type SourceReading, type TopSource } from '../../src/cli/top/sources.js';
import type { TopSnapshot } from '../../src/cli/top/snapshot.js';
import type { EngineContext } from '../../src/engine/index.js';
import { connectClient, type SwitchboardClient } from '../../src/server/index.js';
import { BIN, REPO_ROOT, runCli, tempDir, writeJson } from '../helpers.js';
import { ServeProcess, cleanEnv, startServe as startServeProcess, stopAllServers } from '../serve-process.js';

after(stopAllServers);

const RUNNER = { command: 'builtin:slow-echo', delayMs: 600_000, toolCalls: 1 };

/** A temp state dir with a config whose runs last until aborted; at most 3 runs at once. */
function stateWithRunner(): { state: string; config: string } {
  const state = tempDir('sb-top-');
  const config = writeJson(path.join(state, 'c.json'), {
    agents: { defaults: { runner: RUNNER, maxConcurrent: 3 } },
    messages: { queue: { mode: 'followup', debounceMs: 0 } },
    session: { dmScope: 'per-peer' },
  });
  return { state, config };
}

/** A server whose runs are aborted at once on SIGTERM (short grace). */
function startServe(state: string, config: string): Promise<ServeProcess> {
  return startServeProcess(state, ['--config', config, '--grace', '100']);
}

/** Polls until `check` passes (a generous deadline, no timing asserted). */
async function eventually<T>(read: () => Promise<T>, check: (value: T) => boolean, what: string, deadlineMs = 20_000): Promise<T> {
  const deadline = Date.now() + deadlineMs;
  let last: T | undefined;
  for (;;) {
    last = await read();
    if (check(last)) return last;
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}; last: ${JSON.stringify(last, null, 1).slice(0, 3000)}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

async function ingest(client: SwitchboardClient, peer: string, runId: string): Promise<string> {
  const { events } = await client.request<{ events: { disposition: string }[] }>('ingest', { message: { channel: 'telegram', peer, text: `hello ${runId}`, runId } });
  return events[0].disposition;
}

function engineOf(state: string, config: string): Promise<EngineContext> {
  return new CliContext({ stateDir: state, config, color: false }, processStreams()).engine();
}

/** The run, its lane slot, the queued item and the locks that a running `a1` + queued `a2` leave. */
function assertBusyPicture(reading: SourceReading, serverPid: number): void {
  const run = reading.active.find((candidate) => candidate.runId === 'a1');
  assert.ok(run, 'the active run is listed');
  assert.deepEqual([run.sessionKey, run.lane, run.pid, run.state], ['agent:main:direct:1', 'main', serverPid, 'running']);
  assert.deepEqual(
    reading.lanes.map((lane) => [lane.lane, lane.used, lane.capacity]),
    [
      ['main', 1, 3],
      ['cron', 0, 8],
    ],
  );
  const item = reading.queued.find((candidate) => candidate.runId === 'a2');
  assert.ok(item, 'the queued item is listed');
  assert.deepEqual([item.sessionKey, item.mode, item.kind, item.state, item.position], ['agent:main:direct:1', 'followup', 'user', 'queued', 1]);
  assert.ok(item.owner, 'the queued item has an owner');
  assert.deepEqual([item.owner.pid, item.owner.alive], [serverPid, true], 'the server drains the queue');
  const slot = reading.locks.find((lock) => lock.path.startsWith('lanes/main/slot-'));
  assert.ok(slot, `a lane slot lock is held: ${JSON.stringify(reading.locks)}`);
  assert.deepEqual([slot.pid, slot.sessionKey, slot.state], [serverPid, 'agent:main:direct:1', 'held']);
  assert.ok(typeof slot.maxHoldMs === 'number' && slot.maxHoldMs > 0 && typeof slot.ageMs === 'number');
  const transcript = reading.locks.find((lock) => lock.path.startsWith('agents/main/sessions/') && lock.path.endsWith('.jsonl.lock'));
  assert.ok(transcript, 'the run holds its transcript lock');
  assert.equal(transcript.pid, serverPid);
}

describe('top data sources against a real serve', { timeout: 120_000 }, () => {
  let state: string;
  let config: string;
  let serve: ServeProcess;
  let client: SwitchboardClient;
  const busy = (reading: SourceReading): boolean =>
    reading.active.some((run) => run.runId === 'a1') && reading.locks.some((lock) => lock.path.startsWith('lanes/main/slot-'));

  before(async () => {
    ({ state, config } = stateWithRunner());
    serve = await startServe(state, config);
    client = await connectClient(serve.socketPath);
    assert.equal(await ingest(client, 'direct:1', 'a1'), 'started');
    assert.equal(await ingest(client, 'direct:1', 'a2'), 'queued');
  });

  after(async () => {
    await client?.close();
    if (serve) await serve.stop();
  });

  test('the store source sees the active run, the lane slot 1/3, the queued item with its owner and the held locks', async () => {
    const source = new StoreSource(await engineOf(state, config));
    const reading = await eventually(() => source.read(), busy, 'the run and its slot in the store');
    assertBusyPicture(reading, serve.child.pid!);
    assert.equal(reading.sourceLabel, `store ${state}`);
    assert.deepEqual(source.takeEvents(), [], 'nothing is pushed without a server');
  });

  test('the server source shows the same picture, gets pushed events, and cancels and aborts through the server', async () => {
    const source = await ServerSource.connect(serve.socketPath, () => engineOf(state, config), systemClock);
    try {
      const reading = await eventually(() => source.read(), busy, 'the run and its slot through the server');
      assertBusyPicture(reading, serve.child.pid!);
      assert.match(reading.sourceLabel, new RegExp(`^server pid ${serve.child.pid} on `));

      // A message from another client is pushed to top's subscription.
      const pushed = new Promise<void>((resolve) => source.onPush(resolve));
      assert.equal(await ingest(client, 'direct:2', 'b1'), 'started');
      await pushed;
      const seen: string[] = [];
      await eventually(
        async () => seen.push(...source.takeEvents().map((event) => `${event.type}:${event.runId}`)),
        () => seen.includes('result:b1') && seen.includes('run_started:b1'),
        'the pushed result and run_started of b1',
      );

      assert.equal(await source.cancel('a2'), 'cancelled a2 (agent:main:direct:1)');
      assert.ok(!(await source.read()).queued.some((item) => item.runId === 'a2'), 'the cancelled item is gone');
      await assert.rejects(source.cancel('a1'), (err: { code?: string }) => err.code === 'NOT_FOUND', 'an active run cannot be cancelled');

      assert.equal(await source.abort('agent:main:direct:2'), 'aborted agent:main:direct:2: 0 queued item(s) cancelled, run b1 asked to abort');
      const after = await eventually(() => source.read(), (r) => !r.active.some((run) => run.runId === 'b1'), 'b1 to end');
      assert.ok(after.active.some((run) => run.runId === 'a1'), 'the other session runs on');
      await eventually(
        async () => seen.push(...source.takeEvents().map((event) => `${event.type}:${event.runId}:${event.detail}`)),
        () => seen.includes('run_ended:b1:aborted'),
        'the pushed run_ended of b1',
      );
    } finally {
      await source.close();
    }
  });

  test('the feed shows the server when one answers and the store otherwise, and reports what changed in the store', async () => {
    const clock = systemClock;
    const openers = (socket: string) => ({
      server: () => ServerSource.connect(socket, () => engineOf(state, config), clock),
      store: async (): Promise<TopSource> => new StoreSource(await engineOf(state, config)),
    });
    const viaServer = new TopFeed(openers(serve.socketPath), clock, 60_000);
    try {
      const first = await viaServer.start();
      assert.equal(first.source, 'server');
    } finally {
      await viaServer.stop();
    }

    const missing = path.join(state, 'nobody.sock');
    const viaStore = new TopFeed(openers(missing), clock, 60_000);
    try {
      const first = await viaStore.start();
      assert.equal(first.source, 'store');
      assert.equal(first.sourceLabel, `store ${state} (no server at ${missing} (no socket there))`);
      assert.ok(first.active.some((run) => run.runId === 'a1'));
      assert.equal(await viaStore.abort('agent:main:direct:1'), 'aborted agent:main:direct:1: 0 queued item(s) cancelled, run a1 asked to abort');
      // The server owns the run and stops it; the store source sees it go.
      const snapshot = await eventually(
        async () => {
          await viaStore.refresh();
          return viaStore.current as TopSnapshot;
        },
        (s) => !s.active.some((run) => run.runId === 'a1'),
        'a1 to end',
      );
      const events = snapshot.events.map((event) => `${event.type}:${event.runId ?? event.sessionKey}`);
      assert.ok(events.includes('run_gone:a1'), `the store source saw the run go: ${events}`);
      assert.ok(events.includes('top_abort:agent:main:direct:1'), `top's own action is an event: ${events}`);
      assert.equal(snapshot.lanes[0].used, 0, 'the lane slot is free again');
    } finally {
      await viaStore.stop();
    }
  });
});

describe('top in a terminal', { timeout: 120_000 }, () => {
  test('without a terminal it refuses with a usage error (exit 2) and points to the JSON commands', async () => {
    const r = await runCli(['top', '--state-dir', tempDir('sb-top-')]);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /needs a terminal/);
    assert.match(r.stderr, /queue --json/);
    const json = await runCli(['top', '--json', '--state-dir', tempDir('sb-top-')]);
    assert.equal(json.code, 2);
    assert.equal(JSON.parse(json.stderr).error.code, 'USAGE');
  });

  const tmux = spawnSync('tmux', ['-V'], { encoding: 'utf8' });
  const skip = tmux.error !== undefined || tmux.status !== 0 ? 'tmux is not installed (Debian package tmux)' : false;

  test('in tmux: shows the run, c cancels the queued item, a aborts the session, q exits 0', { skip }, async () => {
    const { state, config } = stateWithRunner();
    const serve = await startServe(state, config);
    const client = await connectClient(serve.socketPath);
    // A private tmux server (its socket in the temp dir), so nothing of the user's tmux is touched.
    const tmuxSocket = path.join(state, 'tmux.sock');
    const tm = (...args: string[]) => spawnSync('tmux', ['-S', tmuxSocket, ...args], { encoding: 'utf8', env: cleanEnv() as NodeJS.ProcessEnv });
    const pane = (): string => tm('capture-pane', '-p', '-t', 'top').stdout;
    const paneShows = (pattern: RegExp, what: string) => eventually(async () => pane(), (text) => pattern.test(text), what);
    try {
      assert.equal(await ingest(client, 'direct:1', 't1'), 'started');
      assert.equal(await ingest(client, 'direct:1', 't2'), 'queued');
      const command = `${process.execPath} ${BIN} top --state-dir ${state} --config ${config} --interval 200; echo EXIT=$?; sleep 30`;
      const started = tm('new-session', '-d', '-s', 'top', '-x', '120', '-y', '40', '-c', REPO_ROOT, command);
      assert.equal(started.status, 0, started.stderr);

      let text = await paneShows(/^> agent:main:direct:1\s+t1\s+main\b/m, 'the active run, selected');
      assert.match(text, new RegExp(`source: server pid ${serve.child.pid} `));
      assert.match(text, /main\s+\[#--\] 1\/3/);
      assert.match(text, new RegExp(`agent:main:direct:1\\s+t2\\s+1\\s+followup/user\\s+queued\\s+${serve.child.pid}@`));
      assert.match(text, /lanes\/main\/slot-\d\.lock\s+\d+@/);

      tm('send-keys', '-t', 'top', 'j');
      await paneShows(/^> agent:main:direct:1\s+t2\s/m, 'the queued item selected');
      tm('send-keys', '-t', 'top', 'c');
      await paneShows(/status: cancel queued item t2 of agent:main:direct:1\? y\/n/, 'the question');
      tm('send-keys', '-t', 'top', 'y');
      await paneShows(/status: cancelled t2 \(agent:main:direct:1\)/, 'the cancel outcome');
      const afterCancel = await client.request<{ items: { runId: string }[] }>('queue.list', {});
      assert.deepEqual(afterCancel.items, [], 'the queued item was cancelled');

      text = await paneShows(/^> agent:main:direct:1\s+t1\s/m, 'the run selected again');
      tm('send-keys', '-t', 'top', 'a');
      await paneShows(/status: abort agent:main:direct:1 \(its queued items, then its run\)\? y\/n/, 'the question');
      tm('send-keys', '-t', 'top', 'y');
      await paneShows(/status: aborted agent:main:direct:1: 0 queued item\(s\) cancelled, run t1 asked to abort/, 'the abort outcome');
      await eventually(() => client.request<{ active: unknown[] }>('queue.list', {}), (listing) => listing.active.length === 0, 'the run to be aborted');
      // The pushed event shows at once; the panels follow with the next refresh.
      await paneShows(/run_ended\s+agent:main:direct:1\s+run t1\s+aborted/, 'the pushed run_ended event');
      text = await paneShows(/aborted\s+agent:main:direct:1\s+run t1\s+run aborted/, 'the user abort shown as aborted');
      assert.doesNotMatch(text, /run_failed/, 'a user abort is not a failure');
      await paneShows(/Active runs \(0\)/, 'the active runs panel empty');

      tm('send-keys', '-t', 'top', 'q');
      text = await paneShows(/^EXIT=\d+$/m, 'top to exit');
      assert.match(text, /^EXIT=0$/m);
    } finally {
      tm('kill-server');
      await client.close();
      await serve.stop();
    }
  });

  test('in tmux at 80x24: the alternate screen, a resize that keeps the scrollback, and the terminal as it was after q', { skip }, async () => {
    const state = tempDir('sb-top-');
    const tmuxSocket = path.join(state, 'tmux.sock');
    const tm = (...args: string[]) => spawnSync('tmux', ['-S', tmuxSocket, ...args], { encoding: 'utf8', env: cleanEnv() as NodeJS.ProcessEnv });
    const pane = (): string => tm('capture-pane', '-p', '-t', 'top').stdout;
    /** The whole pane: its scrollback and its screen. */
    const history = (): string => tm('capture-pane', '-p', '-S', '-', '-t', 'top').stdout.trimEnd();
    const format = (name: string): string => tm('display-message', '-p', '-t', 'top', `#{${name}}`).stdout.trim();
    const paneShows = (pattern: RegExp, what: string) => eventually(async () => pane(), (text) => pattern.test(text), what);
    const go = path.join(state, 'go');
    try {
      // Some shell history first; top starts once the test has seen it.
      const command = `seq 1 100; echo BEFORE-TOP; while [ ! -e ${go} ]; do sleep 0.05; done; ${process.execPath} ${BIN} top --state-dir ${state} --interval 200; echo EXIT=$?; sleep 30`;
      const started = tm('new-session', '-d', '-s', 'top', '-x', '80', '-y', '24', '-c', REPO_ROOT, command);
      assert.equal(started.status, 0, started.stderr);
      await paneShows(/^BEFORE-TOP$/m, 'the shell output');
      const before = history();
      assert.match(before, /^1\n2\n3\n/, 'the scrollback holds the start of the output');
      fs.writeFileSync(go, '');

      let text = await paneShows(/switchboard top/, 'top on the screen');
      assert.equal(format('alternate_on'), '1', 'top draws on the alternate screen');
      for (const line of text.split('\n')) assert.ok(line.length <= 80, `fits 80 columns: ${line}`);
      assert.match(text, /^up\/down or j\/k select/m);
      // Smaller than the frame: ink redraws the whole screen, which must not wipe the scrollback.
      assert.equal(tm('resize-window', '-t', 'top', '-x', '80', '-y', '10').status, 0);
      text = await paneShows(/^up\/down or j\/k select/m, 'the frame redrawn at 10 rows');
      assert.ok(text.trimEnd().split('\n').length <= 10);
      assert.equal(tm('resize-window', '-t', 'top', '-x', '80', '-y', '24').status, 0);
      await paneShows(/Events \(changes seen in the store/, 'the frame redrawn at 24 rows');

      tm('send-keys', '-t', 'top', 'q');
      await paneShows(/^EXIT=\d+$/m, 'top to exit');
      assert.equal(format('alternate_on'), '0');
      const after = history();
      assert.ok(after.startsWith(before), `the terminal is as it was, scrollback included:\n--- before\n${before.slice(-400)}\n--- after\n${after.slice(-400)}`);
      assert.equal(after.slice(before.length).trim(), 'EXIT=0', 'nothing of top is left behind');
    } finally {
      tm('kill-server');
    }
  });

  test('in tmux: SIGTERM leaves the alternate screen too, and exits 143', { skip }, async () => {
    const state = tempDir('sb-top-');
    const tmuxSocket = path.join(state, 'tmux.sock');
    const tm = (...args: string[]) => spawnSync('tmux', ['-S', tmuxSocket, ...args], { encoding: 'utf8', env: cleanEnv() as NodeJS.ProcessEnv });
    const pane = (): string => tm('capture-pane', '-p', '-t', 'top').stdout;
    const pidFile = path.join(state, 'top.pid');
    try {
      // exec keeps the pid the shell wrote, so the test signals exactly the top it started.
      const command = `echo BEFORE-TOP; sh -c 'echo $$ > ${pidFile}; exec ${process.execPath} ${BIN} top --state-dir ${state}'; echo EXIT=$?; sleep 30`;
      assert.equal(tm('new-session', '-d', '-s', 'top', '-x', '80', '-y', '24', '-c', REPO_ROOT, command).status, 0);
      const text = await eventually(async () => pane(), (t) => /^switchboard top/m.test(t), 'top at the top left of the screen');
      assert.match(text.split('\n')[0], /^switchboard top /, 'drawn from the first line');
      process.kill(Number(fs.readFileSync(pidFile, 'utf8').trim()), 'SIGTERM');
      const after = await eventually(async () => pane(), (t) => /^EXIT=\d+$/m.test(t), 'top to exit');
      assert.match(after, /^EXIT=143$/m);
      assert.match(after, /^BEFORE-TOP\nEXIT=143$/m, 'the shell screen as it was');
      assert.doesNotMatch(after, /switchboard top/);
    } finally {
      tm('kill-server');
    }
  });
});
