// Maintenance without cron (issue 13 item 6), through real `serve` processes: in enforce mode the
// store write itself keeps maxEntries (never a pinned session), `serve` runs `maintain` on its own
// schedule, and doctor's kept copies (.bak-<ts>, .corrupt-<ts>) fall under archive retention.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, describe, test } from 'node:test';
import { connectClient } from '../../src/server/index.js';
import { BIN, REPO_ROOT, runCli, tempDir, writeJson } from '../helpers.js';
import { cleanEnv, startServe, stopAllServers } from '../serve-process.js';

after(stopAllServers);

const HOLDER = fileURLToPath(new URL('../fixtures/lock-holder-child.js', import.meta.url));

function message(peer: number): string {
  return JSON.stringify({ channel: 'telegram', peer: { kind: 'direct', id: String(peer) }, sender: { id: String(peer) }, text: `hello from ${peer}`, messageId: `m-${peer}` });
}

/** `switchboard ingest --socket`: the messages go through the server, as a client would send them. */
function ingestThroughSocket(state: string, socketPath: string, lines: string[]): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, 'ingest', '--state-dir', state, '--socket', socketPath], { env: cleanEnv(), cwd: REPO_ROOT, stdio: ['pipe', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.setEncoding('utf8');
    child.stderr.on('data', (chunk: string) => (stderr += chunk));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stderr }));
    child.stdin.end(`${lines.join('\n')}\n`);
  });
}

function bigMessage(peer: number, bytes: number): string {
  return JSON.stringify({ channel: 'telegram', peer: { kind: 'direct', id: String(peer) }, sender: { id: String(peer) }, text: `${peer}:`.padEnd(bytes, 'x'), messageId: `m-${peer}` });
}

/**
 * The bytes the disk budget counts: every file of the sessions folder but the store's own files
 * and the transcripts of the protected sessions (`exclude`).
 */
function budgetBytesOf(state: string, exclude: readonly string[]): number {
  const dir = sessionsDirOf(state);
  let total = 0;
  for (const dirent of fs.readdirSync(dir, { withFileTypes: true })) {
    if (!dirent.isFile() || dirent.name.startsWith('sessions.json') || exclude.includes(dirent.name)) continue;
    total += fs.statSync(path.join(dir, dirent.name)).size;
  }
  return total;
}

function storeOf(state: string): Record<string, { pinned?: boolean; sessionFile?: string }> {
  return JSON.parse(fs.readFileSync(path.join(state, 'agents', 'main', 'sessions', 'sessions.json'), 'utf8'));
}

function sessionsDirOf(state: string): string {
  return path.join(state, 'agents', 'main', 'sessions');
}

/** Polls until `check` holds; the limit only bounds a hang, it is not what the test measures. */
async function eventually(check: () => boolean | Promise<boolean>, what: string, limitMs = 60_000): Promise<void> {
  const until = Date.now() + limitMs;
  while (!(await check())) {
    if (Date.now() > until) throw new Error(`never happened: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

describe('maintenance without cron', () => {
  test('a serve with maxEntries 50 in enforce mode and no cron, fed 500 sessions, holds at most 50 entries after every batch; a pinned session stays', async () => {
    const state = tempDir();
    // The schedule is off: what keeps the cap here is the store write itself.
    const config = writeJson(path.join(state, 'config.json'), { session: { dmScope: 'per-peer', maintenance: { mode: 'enforce', maxEntries: 50, maintainEvery: false } } });
    const server = await startServe(state, ['--config', config]);
    const first = await ingestThroughSocket(state, server.socketPath, [message(0)]);
    assert.equal(first.code, 0, first.stderr);
    const pinned = await runCli(['sessions', 'pin', 'agent:main:direct:0', '--state-dir', state, '--config', config]);
    assert.equal(pinned.code, 0, pinned.stderr);

    for (let start = 1; start < 500; start += 50) {
      const lines = Array.from({ length: Math.min(50, 500 - start) }, (_, i) => message(start + i));
      const fed = await ingestThroughSocket(state, server.socketPath, lines);
      assert.equal(fed.code, 0, fed.stderr);
      const count = Object.keys(storeOf(state)).length;
      assert.ok(count <= 50, `after sessions ${start}..${start + lines.length - 1}: ${count} entries`);
    }
    const store = storeOf(state);
    assert.equal(Object.keys(store).length, 50);
    assert.equal(store['agent:main:direct:0']?.pinned, true, 'the pinned (oldest) session was never capped');
    assert.ok(store['agent:main:direct:499'] !== undefined, 'the newest session is kept');
    // Every removal archives first: the capped sessions' transcripts are .deleted archives, none lost.
    const names = fs.readdirSync(sessionsDirOf(state));
    assert.equal(names.filter((name) => /\.jsonl\.deleted\./.test(name)).length, 450);
    assert.equal(names.filter((name) => name.endsWith('.jsonl')).length, 50);

    const status = await connectClient(server.socketPath);
    try {
      const answer = (await status.request('status', {})) as { maintain: { everyMs: number | null; runs: number } };
      assert.equal(answer.maintain.everyMs, null, 'maintainEvery: false turns the schedule off');
      assert.equal(answer.maintain.runs, 0);
    } finally {
      await status.close();
    }
    await server.stop();
  });

  test('a session whose write lock is held (a run writing) is never capped by the store write; once free, the next write caps it', async () => {
    const state = tempDir();
    const config = writeJson(path.join(state, 'config.json'), { session: { dmScope: 'per-peer', maintenance: { mode: 'enforce', maxEntries: 5, maintainEvery: false } } });
    const server = await startServe(state, ['--config', config]);
    const first = await ingestThroughSocket(state, server.socketPath, [message(1)]);
    assert.equal(first.code, 0, first.stderr);
    const transcript = path.join(sessionsDirOf(state), storeOf(state)['agent:main:direct:1']!.sessionFile!);
    const holder = spawn(process.execPath, [HOLDER, JSON.stringify({ target: transcript, behaviour: 'hold', sessionKey: 'agent:main:direct:1', runId: 'long-run' })], { stdio: ['pipe', 'pipe', 'inherit'] });
    try {
      await new Promise<void>((resolve) => holder.stdout.on('data', (d: Buffer) => d.toString().includes('held') && resolve()));
      for (let peer = 2; peer <= 20; peer += 1) {
        const fed = await ingestThroughSocket(state, server.socketPath, [message(peer)]);
        assert.equal(fed.code, 0, fed.stderr);
        const store = storeOf(state);
        assert.ok(Object.keys(store).length <= 5, `after session ${peer}: ${Object.keys(store).length} entries`);
        assert.ok(store['agent:main:direct:1'] !== undefined, `after session ${peer}: the busy (oldest) session is still there`);
      }
      assert.ok(fs.existsSync(transcript), 'its transcript was not moved under the holder');
    } finally {
      holder.stdin.end('release\n');
      await new Promise((resolve) => holder.on('exit', resolve));
    }
    const next = await ingestThroughSocket(state, server.socketPath, [message(21)]);
    assert.equal(next.code, 0, next.stderr);
    const store = storeOf(state);
    assert.equal(store['agent:main:direct:1'], undefined, 'free now, the oldest session is capped');
    assert.equal(Object.keys(store).length, 5);
    assert.ok(!fs.existsSync(transcript));
    assert.ok(fs.readdirSync(sessionsDirOf(state)).some((name) => name.startsWith(`${path.basename(transcript)}.deleted.`)), 'archived, not deleted');
    await server.stop();
  });

  test('a serve with a small maxDiskBytes in enforce mode and no cron keeps the disk budget as the store is written: under maxDiskBytes after every batch, down to highWaterBytes, the pinned session kept', async () => {
    const state = tempDir();
    const maxDiskBytes = 40_000;
    const highWaterBytes = 30_000;
    const config = writeJson(path.join(state, 'config.json'), {
      session: { dmScope: 'per-peer', maintenance: { mode: 'enforce', maxDiskBytes, highWaterBytes, maintainEvery: false } },
    });
    const server = await startServe(state, ['--config', config]);
    const first = await ingestThroughSocket(state, server.socketPath, [message(0)]);
    assert.equal(first.code, 0, first.stderr);
    const pinned = await runCli(['sessions', 'pin', 'agent:main:direct:0', '--state-dir', state, '--config', config]);
    assert.equal(pinned.code, 0, pinned.stderr);
    // The protected session alone grows bigger than the budget: it is never removed, and not counted.
    const grown = await ingestThroughSocket(state, server.socketPath, [bigMessage(0, 50_000).replace('"m-0"', '"m-0b"')]);
    assert.equal(grown.code, 0, grown.stderr);
    const pinnedFile = storeOf(state)['agent:main:direct:0']!.sessionFile!;

    for (let start = 1; start <= 60; start += 5) {
      const fed = await ingestThroughSocket(state, server.socketPath, Array.from({ length: 5 }, (_, i) => bigMessage(start + i, 2_000)));
      assert.equal(fed.code, 0, fed.stderr);
      const bytes = budgetBytesOf(state, [pinnedFile]);
      assert.ok(bytes <= maxDiskBytes, `after sessions ${start}..${start + 4}: ${bytes} bytes > maxDiskBytes ${maxDiskBytes}`);
    }
    // 12 kB more passes maxDiskBytes from anywhere at or under it: that write brings the folder down to high water.
    const last = await ingestThroughSocket(state, server.socketPath, [bigMessage(100, 12_000)]);
    assert.equal(last.code, 0, last.stderr);
    const bytes = budgetBytesOf(state, [pinnedFile]);
    assert.ok(bytes <= highWaterBytes, `${bytes} bytes > highWaterBytes ${highWaterBytes}`);

    const store = storeOf(state);
    assert.equal(store['agent:main:direct:0']?.pinned, true, 'the pinned session is kept');
    assert.ok(fs.existsSync(path.join(sessionsDirOf(state), pinnedFile)), 'with its transcript');
    assert.ok(store['agent:main:direct:100'] !== undefined, 'the newest session is kept');
    assert.equal(store['agent:main:direct:1'], undefined, 'the oldest unprotected session was evicted');
    assert.ok(Object.keys(store).length < 62, 'sessions were evicted');
    // Every entry left names a transcript that is there: the budget removed whole sessions.
    for (const [key, entry] of Object.entries(store)) assert.ok(fs.existsSync(path.join(sessionsDirOf(state), entry.sessionFile!)), `${key}: transcript kept`);
    await server.stop();
  });

  test('the disk budget on write never evicts a session whose write lock is held (a run writing): the next oldest goes instead', async () => {
    const state = tempDir();
    const maxDiskBytes = 20_000;
    const config = writeJson(path.join(state, 'config.json'), { session: { dmScope: 'per-peer', maintenance: { mode: 'enforce', maxDiskBytes, maintainEvery: false } } });
    const server = await startServe(state, ['--config', config]);
    const first = await ingestThroughSocket(state, server.socketPath, [bigMessage(1, 2_000)]);
    assert.equal(first.code, 0, first.stderr);
    const transcript = path.join(sessionsDirOf(state), storeOf(state)['agent:main:direct:1']!.sessionFile!);
    const holder = spawn(process.execPath, [HOLDER, JSON.stringify({ target: transcript, behaviour: 'hold', sessionKey: 'agent:main:direct:1', runId: 'long-run' })], { stdio: ['pipe', 'pipe', 'inherit'] });
    try {
      await new Promise<void>((resolve) => holder.stdout.on('data', (d: Buffer) => d.toString().includes('held') && resolve()));
      for (let peer = 2; peer <= 30; peer += 1) {
        const fed = await ingestThroughSocket(state, server.socketPath, [bigMessage(peer, 2_000)]);
        assert.equal(fed.code, 0, fed.stderr);
        assert.ok(storeOf(state)['agent:main:direct:1'] !== undefined, `after session ${peer}: the locked (oldest) session is still there`);
      }
      assert.ok(fs.existsSync(transcript), 'its transcript was not moved under the holder');
      assert.equal(storeOf(state)['agent:main:direct:2'], undefined, `the next oldest was evicted instead: ${Object.keys(storeOf(state)).join(' ')} / ${fs.readdirSync(sessionsDirOf(state)).join(' ')}`);
      const bytes = budgetBytesOf(state, [path.basename(transcript)]);
      assert.ok(bytes <= maxDiskBytes, `${bytes} bytes > maxDiskBytes ${maxDiskBytes}`);
    } finally {
      holder.stdin.end('release\n');
      await new Promise((resolve) => holder.on('exit', resolve));
    }
    await server.stop();
  });

  test('a plain `ingest` in enforce mode keeps the disk budget too (each process measures the folder once, then estimates)', async () => {
    const state = tempDir();
    const maxDiskBytes = 30_000;
    const config = writeJson(path.join(state, 'config.json'), { session: { dmScope: 'per-peer', maintenance: { mode: 'enforce', maxDiskBytes, maintainEvery: false } } });
    for (let start = 0; start < 40; start += 10) {
      const lines = Array.from({ length: 10 }, (_, i) => bigMessage(start + i, 2_000));
      const fed = await runCli(['ingest', '--state-dir', state, '--config', config], { input: `${lines.join('\n')}\n` });
      assert.equal(fed.code, 0, fed.stderr);
      const bytes = budgetBytesOf(state, []);
      assert.ok(bytes <= maxDiskBytes, `after sessions ${start}..${start + 9}: ${bytes} bytes > maxDiskBytes ${maxDiskBytes}`);
    }
    assert.ok(storeOf(state)['agent:main:direct:39'] !== undefined, 'the newest session is kept');
  });

  test('in warn mode the store write removes nothing (the cap is only reported)', async () => {
    const state = tempDir();
    const config = writeJson(path.join(state, 'config.json'), { session: { dmScope: 'per-peer', maintenance: { mode: 'warn', maxEntries: 5, maintainEvery: false } } });
    const server = await startServe(state, ['--config', config]);
    const fed = await ingestThroughSocket(state, server.socketPath, Array.from({ length: 12 }, (_, i) => message(i)));
    assert.equal(fed.code, 0, fed.stderr);
    assert.equal(Object.keys(storeOf(state)).length, 12);
    await server.stop();
  });

  test('serve runs maintain on its schedule: old doctor copies (.bak-<ts>, .corrupt-<ts>) are purged like archives, young ones kept; the timer stops with the server', async () => {
    const state = tempDir();
    const config = writeJson(path.join(state, 'config.json'), {
      session: { dmScope: 'per-peer', maintenance: { mode: 'enforce', resetArchiveRetention: '7d', maintainEvery: '300ms' } },
    });
    const seeded = await runCli(['ingest', '--state-dir', state, '--config', config], { input: `${message(1)}\n` });
    assert.equal(seeded.code, 0, seeded.stderr);
    const dir = sessionsDirOf(state);
    const transcript = storeOf(state)['agent:main:direct:1']!.sessionFile!;
    const old = [`${transcript}.bak-2020-01-01T00-00-00.000Z`, 'sessions.json.corrupt-2020-01-01T00-00-00.000Z'];
    const young = [`${transcript}.bak-${new Date().toISOString().replace(/:/g, '-')}`];
    for (const name of [...old, ...young]) fs.writeFileSync(path.join(dir, name), 'kept bytes\n');

    const server = await startServe(state, ['--config', config]);
    await eventually(() => old.every((name) => !fs.existsSync(path.join(dir, name))), 'the scheduled maintain purged the old copies');
    for (const name of young) assert.ok(fs.existsSync(path.join(dir, name)), `${name} is younger than the retention: kept`);
    assert.ok(fs.existsSync(path.join(dir, transcript)), 'the live transcript is untouched');
    await server.waitForStderr(/scheduled maintain: .*2 old archive\(s\) purged/);

    const client = await connectClient(server.socketPath);
    try {
      const answer = (await client.request('status', {})) as { maintain: { everyMs: number; runs: number; lastOk: boolean } };
      assert.equal(answer.maintain.everyMs, 300);
      assert.ok(answer.maintain.runs >= 1);
      assert.equal(answer.maintain.lastOk, true);
    } finally {
      await client.close();
    }
    server.signal('SIGTERM');
    const exit = await server.exited;
    assert.equal(exit.code, 0, server.stderr);
  });

  test('sessions cleanup (and so cron maintain) purges doctor copies past the retention too', async () => {
    const state = tempDir();
    const config = writeJson(path.join(state, 'config.json'), { session: { dmScope: 'per-peer', maintenance: { resetArchiveRetention: '7d' } } });
    const seeded = await runCli(['ingest', '--state-dir', state, '--config', config], { input: `${message(1)}\n` });
    assert.equal(seeded.code, 0, seeded.stderr);
    const dir = sessionsDirOf(state);
    const oldCopy = path.join(dir, 'sessions.json.corrupt-2020-01-01T00-00-00.000Z');
    fs.writeFileSync(oldCopy, '{not json\n');
    const dry = await runCli(['sessions', 'cleanup', '--dry-run', '--json', '--state-dir', state, '--config', config]);
    assert.equal(dry.code, 0, dry.stderr);
    assert.equal(JSON.parse(dry.stdout).purgedArchives, 1);
    assert.ok(fs.existsSync(oldCopy), 'a dry run changes nothing');
    const done = await runCli(['sessions', 'cleanup', '--enforce', '--json', '--state-dir', state, '--config', config]);
    assert.equal(done.code, 0, done.stderr);
    assert.ok(!fs.existsSync(oldCopy));
  });
});
