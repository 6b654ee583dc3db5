// OpenClaw's transcript write lock next to switchboard's: a regular FILE `<target>.lock` holding
// `{pid, createdAt, maxHoldMs, starttime}` (made with open(…, "wx") by a real child process, see
// fixtures/openclaw-lock.ts) is a lock held by another program. Writers wait for it and give up
// with the busy error, never STORE_CORRUPT; it is reclaimed by OpenClaw's own rule (holder dead,
// pid reused, or no record and untouched for 30 s), never from a live holder, even one past its
// max hold; listLocks shows it and releaseLock removes a live one only with force.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, readdirSync, statSync, utimesSync, writeFileSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import { SwitchboardError } from '../../src/core/index.js';
import { appendToTranscript, listLocks, lockPathFor, releaseLock, withLock, type LockInfo } from '../../src/store/index.js';
import { holdOpenClawLock } from '../fixtures/openclaw-lock.js';
import type { ChildRun } from '../fixtures/store-child-process.js';
import { tempDir as makeTempDir } from '../helpers.js';

const tempDir = (): string => makeTempDir('sb-oclock-');
const holders: ChildRun[] = [];
after(() => {
  for (const run of holders) if (run.child.exitCode === null && run.child.signalCode === null) run.child.kill('SIGKILL');
});

async function holder(lockPath: string, options: Parameters<typeof holdOpenClawLock>[1] = {}): Promise<ChildRun> {
  const run = await holdOpenClawLock(lockPath, options);
  holders.push(run);
  return run;
}

function busy(code: 'SESSION_BUSY' | 'STORE_BUSY') {
  return (err: unknown): boolean => {
    assert.ok(err instanceof SwitchboardError, String(err));
    assert.equal(err.code, code, err.message);
    assert.equal(err.exitCode, 75);
    return true;
  };
}

function setOld(file: string, ageMs: number): void {
  const when = new Date(Date.now() - ageMs);
  utimesSync(file, when, when);
}

const session = { sessionId: 'oc-lock-session', sessionKey: 'agent:main:direct:oc', agentId: 'main' };

describe('an OpenClaw lock file at a lock path', () => {
  test('a live holder: withLock waits up to its timeout, then SESSION_BUSY naming OpenClaw; the file is left untouched', async () => {
    const target = path.join(tempDir(), 's.jsonl');
    const lockPath = lockPathFor(target);
    const run = await holder(lockPath);
    const before = readFileSync(lockPath, 'utf8');
    const started = Date.now();
    await assert.rejects(
      withLock(target, { acquireTimeoutMs: 600 }, async () => 'never'),
      (err: unknown) => {
        busy('SESSION_BUSY')(err);
        const e = err as SwitchboardError;
        assert.match(e.message, /OpenClaw/);
        assert.match(e.message, new RegExp(`pid ${run.pid}\\b`));
        assert.equal((e.details as { kind?: string }).kind, 'openclaw');
        return true;
      },
    );
    assert.ok(Date.now() - started >= 550, 'it waited for its timeout');
    assert.equal(readFileSync(lockPath, 'utf8'), before, 'the holder keeps its lock');
    assert.ok(statSync(lockPath).isFile());
  });

  test('an append waits for the holder and goes through once OpenClaw removes its file', async () => {
    const target = path.join(tempDir(), 's.jsonl');
    const lockPath = lockPathFor(target);
    const run = await holder(lockPath);
    const appended = appendToTranscript(target, [{ type: 'custom', customType: 'test', data: { n: 1 } }], { session, lockOptions: { acquireTimeoutMs: 10_000 } });
    await new Promise((resolve) => setTimeout(resolve, 300));
    assert.ok(existsSync(lockPath) && statSync(lockPath).isFile(), 'still OpenClaw\'s while it holds it');
    run.send('release');
    await run.waitForLine((line) => line === 'released', 5_000, 'the release');
    await appended;
    assert.equal(existsSync(lockPath), false, 'switchboard released its own lock after the append');
    assert.ok(readFileSync(target, 'utf8').includes('"customType":"test"'));
  });

  test('a holder that died (SIGKILL) is reclaimed at once: its file goes and the lock is taken', async () => {
    const target = path.join(tempDir(), 's.jsonl');
    const lockPath = lockPathFor(target);
    const run = await holder(lockPath);
    run.child.kill('SIGKILL');
    await run.exited;
    assert.ok(statSync(lockPath).isFile(), 'a crash leaves the file behind');
    assert.equal(await withLock(target, { acquireTimeoutMs: 0 }, async () => statSync(lockPath).isDirectory()), true);
    assert.equal(existsSync(lockPath), false);
    assert.deepEqual(readdirSync(path.dirname(lockPath)), [], 'no tombstone left');
  });

  test('a pid reused by another process (starttime differs) counts as dead', async () => {
    const target = path.join(tempDir(), 's.jsonl');
    const lockPath = lockPathFor(target);
    await holder(lockPath, { starttimeOffset: 1 });
    const [seen] = await listLocks(path.dirname(lockPath));
    assert.equal(seen?.holderAlive, false);
    assert.equal(await withLock(target, { acquireTimeoutMs: 0 }, async () => 'taken'), 'taken');
  });

  test('past its max hold a live holder is still waited for (OpenClaw reclaims only dead holders; its own watchdog ends an over-long hold)', async () => {
    const target = path.join(tempDir(), 's.jsonl');
    const lockPath = lockPathFor(target);
    await holder(lockPath, { createdAt: new Date(Date.now() - 3_600_000).toISOString(), maxHoldMs: 1_000 });
    setOld(lockPath, 3_600_000);
    const [seen] = await listLocks(path.dirname(lockPath));
    assert.equal(seen?.kind, 'openclaw');
    assert.equal(seen?.fileLock?.pastMaxHold, true);
    assert.equal(seen?.overHeld, false, 'no waiter may take it over');
    assert.equal(seen?.stale, false);
    assert.equal(seen?.holderAlive, true);
    await assert.rejects(withLock(target, { acquireTimeoutMs: 200 }, async () => 'never'), busy('SESSION_BUSY'));
    assert.ok(statSync(lockPath).isFile());
  });

  test('the store lock (takeover "dead") waits for it too and fails STORE_BUSY', async () => {
    const dir = tempDir();
    const storePath = path.join(dir, 'sessions.json');
    await holder(lockPathFor(storePath));
    await assert.rejects(withLock(storePath, { acquireTimeoutMs: 200, busyCode: 'STORE_BUSY', takeover: 'dead' }, async () => 'never'), busy('STORE_BUSY'));
  });

  test('a file without a record (half-written, empty, foreign) is held until it is 30 s untouched, then reclaimed', async () => {
    const target = path.join(tempDir(), 's.jsonl');
    const lockPath = lockPathFor(target);
    writeFileSync(lockPath, '');
    await assert.rejects(withLock(target, { acquireTimeoutMs: 200 }, async () => 'never'), busy('SESSION_BUSY'));
    assert.ok(existsSync(lockPath));
    setOld(lockPath, 20_000);
    await assert.rejects(withLock(target, { acquireTimeoutMs: 0 }, async () => 'never'), busy('SESSION_BUSY'));
    setOld(lockPath, 31_000);
    assert.equal(await withLock(target, { acquireTimeoutMs: 0 }, async () => 'taken'), 'taken');
    assert.equal(existsSync(lockPath), false);
  });

  test('listLocks shows holder pid, since and kind; a garbage *.lock that is no store lock is not listed', async () => {
    const dir = tempDir();
    const sessions = path.join(dir, 'agents', 'main', 'sessions');
    mkdirSync(sessions, { recursive: true });
    const lockPath = path.join(sessions, 'a.jsonl.lock');
    const createdAt = new Date(Date.now() - 5_000).toISOString();
    const run = await holder(lockPath, { createdAt });
    writeFileSync(path.join(dir, 'agents', 'not-a-lock.lock'), 'a file, not a lock');
    writeFileSync(path.join(sessions, 'b.jsonl.lock'), '{"half":');
    const locks = await listLocks(dir);
    assert.deepEqual(
      locks.map((l: LockInfo) => [path.relative(dir, l.lockPath), l.kind]),
      [
        [path.join('agents', 'main', 'sessions', 'a.jsonl.lock'), 'openclaw'],
        [path.join('agents', 'main', 'sessions', 'b.jsonl.lock'), 'file'],
      ],
    );
    const [a, b] = locks as [LockInfo, LockInfo];
    assert.equal(a.owner, null, 'no switchboard owner record');
    assert.equal(a.fileLock?.pid, run.pid);
    assert.equal(a.fileLock?.createdAt, createdAt);
    assert.equal(a.fileLock?.maxHoldMs, 300_000);
    assert.equal(typeof a.fileLock?.starttime, 'number');
    assert.equal(a.holderAlive, true);
    assert.ok(a.ageMs !== null && a.ageMs >= 5_000 && a.ageMs < 60_000);
    assert.equal(a.targetPath, path.join(sessions, 'a.jsonl'));
    assert.equal(b.fileLock?.pid, null);
    assert.equal(b.holderAlive, null);
    assert.equal(b.stale, false, 'fresh: may be a holder between its create and its write');
  });

  test('releaseLock: a live holder only with force (dry run first); a dead one without', async () => {
    const dir = tempDir();
    const live = path.join(dir, 'live.jsonl.lock');
    const run = await holder(live);
    await assert.rejects(releaseLock(live), busy('SESSION_BUSY'));
    const planned = await releaseLock(live, { force: true, dryRun: true });
    assert.equal(planned.forced, true);
    assert.equal(planned.kind, 'openclaw');
    assert.equal(planned.fileLock?.pid, run.pid);
    assert.ok(existsSync(live), 'a dry run removes nothing');
    const forced = await releaseLock(live, { force: true });
    assert.equal(forced.forced, true);
    assert.equal(existsSync(live), false, 'forced: the file is gone although its holder lives');
    assert.equal(run.child.exitCode, null, 'the holder is not signalled');

    const dead = path.join(dir, 'dead.jsonl.lock');
    const gone = await holder(dead);
    gone.child.kill('SIGKILL');
    await gone.exited;
    const released = await releaseLock(dead);
    assert.equal(released.forced, false);
    assert.deepEqual(readdirSync(dir), []);
  });

  test('a record naming a pid that has exited, written by hand, is reclaimed too', async () => {
    const target = path.join(tempDir(), 's.jsonl');
    const lockPath = lockPathFor(target);
    const pid = spawnSync(process.execPath, ['-e', '0']).pid!;
    writeFileSync(lockPath, `${JSON.stringify({ pid, createdAt: new Date().toISOString(), maxHoldMs: 300_000 }, null, 2)}\n`, { flag: 'wx' });
    assert.equal(await withLock(target, { acquireTimeoutMs: 0 }, async () => 'taken'), 'taken');
  });
});
