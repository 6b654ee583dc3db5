// Stopping queued work says what it will do and who asked: `queue cancel`/`abort` and `locks release
// --force` take several targets, --dry-run labels each line, a real pseudo-terminal (script(1)) is
// asked, and the ingest that submitted a cancelled message reports it (dropped, with cancelledBy)
// before it ends (issue 14 item 3, issue 13 item 12).

import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, describe, test } from 'node:test';
import { BIN, jsonLines, runCli, tempDir } from '../helpers.js';
import { LiveIngest, assertStoreValid, dm, killLiveIngests, queueCli, queueEnv, queueRunner, type QueueEnv } from '../fixtures/queue-lib.js';
import { connectClient } from '../../src/server/index.js';
import { cleanEnv, startServe, stopAllServers } from '../serve-process.js';

after(killLiveIngests);
after(stopAllServers);

const KEY = 'agent:main:direct:alice';
const alice = (text: string, extra: Record<string, unknown> = {}) => dm('alice', text, extra);

function holdConfig(): Record<string, unknown> {
  return { session: { dmScope: 'per-peer' }, agents: { defaults: { runner: queueRunner('hold') } }, messages: { queue: { mode: 'followup', debounceMs: 20 } } };
}

/** Runs the binary on a pseudo-terminal (script(1)), typing `answer` at the question. */
function onTerminal(args: string[], answer: string): { status: number | null; output: string } {
  const command = [process.execPath, BIN, ...args].map((word) => `'${word}'`).join(' ');
  const r = spawnSync('script', ['-qec', command, '/dev/null'], { input: `${answer}\n`, encoding: 'utf8', env: { ...process.env, NO_COLOR: '1' } });
  return { status: r.status, output: r.stdout };
}

const flags = (env: QueueEnv) => ['--state-dir', env.state, '--config', env.config];

async function queuedIds(env: QueueEnv): Promise<string[]> {
  return (await queueCli(env, ['queue', '--json'])).json.items.map((item: { runId: string }) => item.runId);
}

describe('queue cancel and abort', () => {
  test('several targets, --dry-run per line, a question on a terminal, and the submitting ingest reports who cancelled', async () => {
    const env = queueEnv(holdConfig());
    const live = new LiveIngest(env);
    live.send(alice('active', { runId: 'A' }), alice('b', { runId: 'B' }), alice('c', { runId: 'C' }), alice('d', { runId: 'D' }));
    await live.waitFor((e) => e.type === 'run_started', 'the active run');
    await live.result(4);
    assert.deepEqual(await queuedIds(env), ['B', 'C', 'D']);

    const dry = await queueCli(env, ['queue', 'cancel', 'B', 'C', '--dry-run']);
    assert.equal(dry.code, 0, dry.stderr);
    assert.deepEqual(dry.stdout.trim().split('\n'), [`would cancel B (${KEY}, #1)`, `would cancel C (${KEY}, #2)`]);
    const dryJson = await queueCli(env, ['queue', 'cancel', 'B', '--dry-run', '--json']);
    assert.deepEqual(jsonLines(dryJson.stdout).map((e) => [e.dryRun, e.action, e.runId]), [[true, 'cancel', 'B']]);
    const unknown = await queueCli(env, ['queue', 'cancel', 'B', 'nope', '--json']);
    assert.equal(unknown.code, 66, 'one target that is not queued stops them all');
    const activeToo = await queueCli(env, ['queue', 'cancel', 'B', 'A']);
    assert.equal(activeToo.code, 66);
    assert.match(activeToo.stderr, /active run .* nothing was cancelled/);
    const dryAbort = await queueCli(env, ['queue', 'abort', '--session', KEY, '--dry-run']);
    assert.deepEqual(dryAbort.stdout.trim().split('\n'), [`would abort ${KEY}: cancel 3 queued item(s), abort run A`]);
    assert.deepEqual(await queuedIds(env), ['B', 'C', 'D'], 'dry runs and refused commands changed nothing');

    const no = onTerminal(['queue', 'cancel', 'B', ...flags(env)], 'n');
    assert.equal(no.status, 0, no.output);
    assert.match(no.output, new RegExp(`cancel B \\(${KEY}, #1\\)\\r?\\ncancel this queued item\\? \\[y/N\\]`));
    assert.match(no.output, /nothing changed/);
    assert.deepEqual(await queuedIds(env), ['B', 'C', 'D']);
    const yes = onTerminal(['queue', 'cancel', 'B', '--reason', 'sent twice', ...flags(env)], 'y');
    assert.equal(yes.status, 0, yes.output);
    assert.match(yes.output, new RegExp(`cancelled B \\(${KEY}, #1\\) by pid \\d+ \\(${os.userInfo().username}\\): sent twice`));

    // Not a terminal and no --yes: no question, it goes ahead (as sessions delete does).
    const piped = await queueCli(env, ['queue', 'cancel', 'C', '--json']);
    assert.equal(piped.code, 0, piped.stderr);
    assert.deepEqual([piped.json.cancelled.runId, piped.json.cancelledBy.pid, piped.json.cancelledBy.user], ['C', piped.json.cancelledBy.pid, os.userInfo().username]);
    assert.ok(Number.isInteger(piped.json.cancelledBy.pid) && piped.json.cancelledBy.pid !== live.child.pid);
    assertStoreValid(env);

    const abort = await queueCli(env, ['queue', 'abort', '--session', KEY, '--reason', 'wrong chat', '--yes', '--json']);
    assert.equal(abort.code, 0, abort.stderr);
    assert.deepEqual([abort.json.cancelled.map((i: { runId: string }) => i.runId), abort.json.aborted, abort.json.cancelledBy.reason], [['D'], 'A', 'wrong chat']);

    // The stream that submitted B, C and D says what became of them before it ends.
    await live.finish();
    const drops = live.events.filter((e) => e.type === 'dropped').map((e) => [e.runId, e.reason, e.cancelledBy?.user, e.cancelledBy?.reason ?? null]);
    const user = os.userInfo().username;
    assert.deepEqual(drops, [
      ['B', 'cancelled', user, 'sent twice'],
      ['C', 'cancelled', user, null],
      ['D', 'stopped', user, 'wrong chat'],
    ]);
    const b = live.events.find((e) => e.type === 'dropped' && e.runId === 'B');
    assert.deepEqual([b.sessionKey, b.requester, typeof b.cancelledBy.pid, typeof b.cancelledBy.at], [KEY, 'alice', 'number', 'number']);
    assert.deepEqual(live.events.filter((e) => e.type === 'run_started').map((e) => e.runId), ['A'], 'nothing cancelled ran');
    assert.equal(JSON.stringify(JSON.parse(fs.readFileSync(path.join(env.state, 'agents', 'main', 'sessions', 'sessions.json'), 'utf8'))[KEY].cancelledItems), undefined, 'reported, then gone from the store');
  });
});

describe('cancel knows who asked', () => {
  test('the ingest that submitted a cancelled or aborted message reports it as dropped, with who did it, before it ends', async () => {
    const env = queueEnv(holdConfig());
    const live = new LiveIngest(env);
    live.send(alice('active', { runId: 'A' }), alice('b', { runId: 'B' }), alice('c', { runId: 'C' }));
    await live.waitFor((e) => e.type === 'run_started', 'the active run');
    await live.result(3);
    const cancel = await queueCli(env, ['queue', 'cancel', 'B', '--json']);
    assert.equal(cancel.code, 0, cancel.stderr);
    const abort = await queueCli(env, ['queue', 'abort', '--session', KEY, '--json']);
    assert.equal(abort.code, 0, abort.stderr);
    await live.finish();
    const user = os.userInfo().username;
    const drops = live.events.filter((e) => e.type === 'dropped');
    assert.deepEqual(
      drops.map((e) => [e.runId, e.reason, e.requester, e.cancelledBy?.user, e.cancelledBy?.hostname]),
      [
        ['B', 'cancelled', 'alice', user, os.hostname()],
        ['C', 'stopped', 'alice', user, os.hostname()],
      ],
    );
    assert.ok(drops.every((e) => Number.isInteger(e.cancelledBy.pid) && e.cancelledBy.pid !== live.child.pid), 'the pid is the cancelling process, not the ingest');
    const ended = live.events.findIndex((e) => e.type === 'run_ended');
    assert.ok(live.events.findIndex((e) => e.type === 'dropped') < ended, 'reported before the run_ended that ends the stream');
  });

  test('send --socket: the server reports the cancel of the message it queued to the send that is waiting on it', async () => {
    const state = tempDir('sb-cancel-');
    const config = path.join(state, 'config.json');
    fs.writeFileSync(config, JSON.stringify({ session: { dmScope: 'per-peer' }, agents: { defaults: { runner: { command: 'builtin:slow-echo', delayMs: 600_000 } } }, messages: { queue: { mode: 'followup', debounceMs: 0 } } }));
    const serve = await startServe(state, ['--config', config, '--grace', '100']);
    const client = await connectClient(serve.socketPath);
    try {
      const first = await client.request<{ events: { disposition: string }[] }>('ingest', { message: { channel: 'telegram', peer: 'direct:1', text: 'long', runId: 't1' } });
      assert.equal(first.events[0].disposition, 'started');
      const send = spawn(process.execPath, [BIN, 'send', 'second', '--channel', 'telegram', '--peer', 'direct:1', '--run-id', 't2', '--socket', serve.socketPath, '--state-dir', state, '--config', config], {
        env: cleanEnv() as NodeJS.ProcessEnv,
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let out = '';
      send.stdout.on('data', (chunk: Buffer) => (out += chunk.toString('utf8')));
      const exited = new Promise<number | null>((resolve) => send.on('close', resolve));
      const deadline = Date.now() + 20_000;
      while (!/"disposition":"queued"/.test(out)) {
        assert.ok(Date.now() < deadline, `send never said queued: ${out}`);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      const cancel = await runCli(['queue', 'cancel', 't2', '--reason', 'sent twice', '--json', '--state-dir', state, '--config', config]);
      assert.equal(cancel.code, 0, cancel.stderr);
      assert.equal(jsonLines(cancel.stdout)[0].cancelledBy.reason, 'sent twice');
      await client.request('queue.abort', { session: 'agent:main:direct:1' });
      assert.equal(await exited, 0);
      const events = jsonLines(out);
      const dropped = events.find((e) => e.type === 'dropped');
      assert.ok(dropped, `send reported the cancel: ${out}`);
      assert.deepEqual([dropped.runId, dropped.reason, dropped.cancelledBy.reason, dropped.cancelledBy.user], ['t2', 'cancelled', 'sent twice', os.userInfo().username]);
    } finally {
      await client.close();
      await serve.stop();
    }
  });
});

describe('locks release', () => {
  test('several locks, --dry-run per line, and --force asks first on a terminal', async () => {
    const state = tempDir();
    const config = path.join(state, 'config.json');
    fs.writeFileSync(config, JSON.stringify({ session: { dmScope: 'per-peer' } }));
    const keys = ['agent:main:direct:one', 'agent:main:direct:two'];
    const holders: ReturnType<typeof spawn>[] = [];
    try {
      for (const [i, key] of keys.entries()) {
        const r = await runCli(['send', 'hi', '--channel', 'telegram', '--peer', `direct:${key.split(':').pop()}`, '--state-dir', state, '--config', config, '--json']);
        assert.equal(r.code, 0, r.stderr);
        const { sessionId, sessionKey } = jsonLines(r.stdout)[0];
        assert.equal(sessionKey, key);
        const transcript = path.join(state, 'agents', 'main', 'sessions', `${sessionId}.jsonl`);
        const holder = spawn(process.execPath, [fileURLToPath(new URL('../fixtures/lock-holder-child.js', import.meta.url)), JSON.stringify({ target: transcript, behaviour: 'hold', sessionKey: key, runId: `run-${i}` })], { stdio: ['pipe', 'pipe', 'inherit'] });
        holders.push(holder);
        await new Promise<void>((resolve) => holder.stdout.on('data', (d: Buffer) => d.toString().includes('held') && resolve()));
      }
      const count = async () => jsonLines((await runCli(['locks', '--json', '--state-dir', state, '--config', config])).stdout)[0].locks.length;
      assert.equal(await count(), 2);
      const refused = await runCli(['locks', 'release', ...keys, '--dry-run', '--state-dir', state, '--config', config]);
      assert.equal(refused.code, 75, 'without --force a live holder refuses the whole command, dry run or not');
      const dry = await runCli(['locks', 'release', ...keys, '--force', '--dry-run', '--state-dir', state, '--config', config]);
      assert.equal(dry.code, 0, dry.stderr);
      const lines = dry.stdout.trim().split('\n');
      assert.equal(lines.length, 2);
      lines.forEach((text, i) => assert.match(text, new RegExp(`^would release .*\\.jsonl\\.lock \\(forced: held by pid ${holders[i].pid} on .*, alive\\)$`)));
      assert.equal(await count(), 2);

      const no = onTerminal(['locks', 'release', ...keys, '--force', '--state-dir', state, '--config', config], 'n');
      assert.equal(no.status, 0, no.output);
      assert.match(no.output, /release these 2 locks\? \[y\/N\]/);
      assert.match(no.output, /nothing changed/);
      assert.equal(await count(), 2);
      const yes = onTerminal(['locks', 'release', ...keys, '--force', '--state-dir', state, '--config', config], 'y');
      assert.equal(yes.status, 0, yes.output);
      assert.equal(yes.output.match(/^released .*\(forced/gm)?.length, 2);
      assert.equal(await count(), 0);
    } finally {
      for (const holder of holders) holder.kill('SIGKILL');
    }
  });
});
