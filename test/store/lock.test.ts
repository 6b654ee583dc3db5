// In-process tests of the lock helper on real lock directories in temp dirs: owner records,
// re-entrancy, FIFO, busy errors, the max-hold watchdog, takeovers, listLocks and releaseLock.

import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { mkdirSync, readdirSync, readFileSync, statSync, utimesSync, writeFileSync, existsSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, test } from 'node:test';
import { MAX_TIMER_MS, SwitchboardError } from '../../src/core/index.js';
import {
  computeMaxHoldMs,
  heldLockFor,
  listLocks,
  lockPathFor,
  lockQueueState,
  readLockOwner,
  releaseLock,
  resolveLockSettings,
  withLock,
  type LockOwnerRecord,
} from '../../src/store/index.js';
import { waitUntil } from '../fixtures/store-child-process.js';
import { tempDir as makeTempDir } from '../helpers.js';

const tempDir = (): string => makeTempDir('sb-lock-');

function isCode(code: string, exitCode: number) {
  return (err: unknown): boolean => err instanceof SwitchboardError && err.code === code && err.exitCode === exitCode;
}

function gate(): { opened: Promise<void>; open: () => void } {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { opened, open };
}

/** A lock directory as another process would leave it (real files, nothing mocked). */
function craftForeignLock(lockPath: string, owner: Partial<LockOwnerRecord> | null, extraFiles: string[] = []): void {
  mkdirSync(lockPath);
  if (owner !== null) {
    const record: LockOwnerRecord = {
      version: 1,
      lockId: 'foreign',
      pid: 999_999,
      hostname: 'some-other-host',
      processStartTime: Date.now() - 3_600_000,
      acquiredAt: Date.now(),
      maxHoldMs: 600_000,
      staleMs: 10_000,
      ...owner,
    };
    writeFileSync(path.join(lockPath, 'owner.json'), JSON.stringify(record));
  }
  for (const name of extraFiles) writeFileSync(path.join(lockPath, name), '{"half":');
}

function ageDirectory(dirPath: string, ageMs: number): void {
  const then = new Date(Date.now() - ageMs);
  utimesSync(dirPath, then, then);
}

/** A pid that is certainly not running: a child that has exited and been reaped. */
function deadPid(): number {
  const result = spawnSync(process.execPath, ['-e', '0']);
  assert.equal(result.status, 0);
  return result.pid;
}

describe('settings', () => {
  test('computeMaxHoldMs = min(2^31-1, max(5 min, run + 2 min)) unless configured', () => {
    assert.equal(computeMaxHoldMs(), 300_000);
    assert.equal(computeMaxHoldMs(60_000), 300_000);
    assert.equal(computeMaxHoldMs(10 * 60_000), 12 * 60_000);
    assert.equal(computeMaxHoldMs(2 ** 31), MAX_TIMER_MS);
    assert.equal(computeMaxHoldMs(Number.NaN), 300_000);
    assert.equal(computeMaxHoldMs(10 * 60_000, 250), 250);
    assert.equal(computeMaxHoldMs(undefined, 2 ** 40), MAX_TIMER_MS);
    assert.equal(computeMaxHoldMs(undefined, 0), 300_000);
  });

  test('resolveLockSettings applies defaults and proper-lockfile floors', () => {
    assert.deepEqual(resolveLockSettings({}), { acquireTimeoutMs: 60_000, staleMs: 10_000, maxHoldMs: 300_000, busyCode: 'SESSION_BUSY', takeover: 'stale', startsRunner: false });
    const custom = resolveLockSettings({ acquireTimeoutMs: 0, staleMs: 100, runTimeoutMs: 600_000, busyCode: 'STORE_BUSY' });
    assert.deepEqual(custom, { acquireTimeoutMs: 0, staleMs: 2_000, maxHoldMs: 720_000, busyCode: 'STORE_BUSY', takeover: 'stale', startsRunner: false });
  });
});

describe('withLock', () => {
  test('a holding that starts a runner names it in child.json without touching the folder (its refresh would call that a takeover)', async () => {
    const dir = tempDir();
    const target = path.join(dir, 'run.jsonl');
    const lockPath = lockPathFor(target);
    await withLock(target, { startsRunner: true }, async (handle) => {
      assert.equal(readFileSync(path.join(lockPath, 'child.json'), 'utf8'), '', 'reserved empty with the owner record');
      const folderMtime = statSync(lockPath).mtimeMs;
      handle.noteChild(process.pid);
      handle.noteChild(process.pid);
      assert.equal(statSync(lockPath).mtimeMs, folderMtime);
      const child = JSON.parse(readFileSync(path.join(lockPath, 'child.json'), 'utf8'));
      assert.deepEqual([child.pid, typeof child.startTicks], [process.pid, 'number']);
    });
    assert.equal(existsSync(lockPath), false, 'released with its child record');
    await withLock(target, {}, async (handle) => {
      handle.noteChild(process.pid);
      assert.deepEqual(readdirSync(lockPath), ['owner.json'], 'a holding that reserved none names no runner');
    });
  });

  test('holds <target>.lock with a readable owner record and removes everything on release', async () => {
    const dir = tempDir();
    const target = path.join(dir, 's1.jsonl');
    const lockPath = lockPathFor(target);
    const before = Date.now();
    const owner = await withLock(target, { maxHoldMs: 90_000, owner: { sessionKey: 'agent:main:x', runId: 'run-1' } }, async (handle) => {
      assert.equal(statSync(lockPath).isDirectory(), true);
      const record = await readLockOwner(lockPath);
      assert.ok(record !== null);
      assert.deepEqual(record, handle.owner);
      const [listed] = await listLocks(dir);
      assert.equal(listed?.lockPath, lockPath);
      assert.equal(listed?.targetPath, target);
      assert.equal(listed?.heldByThisProcess, true);
      assert.equal(listed?.holderAlive, true);
      assert.equal(listed?.stale, false);
      assert.equal(listed?.overHeld, false);
      assert.equal(handle.isHeld(), true);
      handle.assertHeld();
      await handle.verifyHeld();
      return record;
    });
    assert.equal(owner.pid, process.pid);
    assert.equal(owner.hostname, os.hostname());
    assert.ok(owner.processStartTime <= owner.acquiredAt);
    assert.ok(owner.acquiredAt >= before && owner.acquiredAt <= Date.now());
    assert.equal(owner.maxHoldMs, 90_000);
    assert.equal(owner.sessionKey, 'agent:main:x');
    assert.equal(owner.runId, 'run-1');
    assert.deepEqual(readdirSync(dir), [], 'no lock directory or tombstone is left behind');
  });

  test('a failing fn still releases the lock', async () => {
    const target = path.join(tempDir(), 't');
    await assert.rejects(
      withLock(target, {}, async () => {
        throw new Error('boom');
      }),
      /boom/,
    );
    assert.equal(existsSync(lockPathFor(target)), false);
  });

  test('nested acquire of the same lock in the same async chain re-enters instead of deadlocking', async () => {
    const target = path.join(tempDir(), 'nested');
    const result = await withLock(target, { acquireTimeoutMs: 1_000 }, async (outer) => {
      assert.equal(outer.reentrant, false);
      const inner = await withLock(target, { acquireTimeoutMs: 1_000 }, async (handle) => {
        assert.equal(handle.reentrant, true);
        assert.equal(handle.owner.lockId, outer.owner.lockId);
        // deeper, and across a timer: the async context follows
        return new Promise<string>((resolve, reject) => {
          setTimeout(() => {
            withLock(target, { acquireTimeoutMs: 1_000 }, async (deepest) => deepest.owner.lockId).then(resolve, reject);
          }, 1);
        });
      });
      assert.equal(inner, outer.owner.lockId);
      assert.equal(heldLockFor(target)?.owner.lockId, outer.owner.lockId);
      // the nested release did not drop the outer holding
      assert.equal((await readLockOwner(lockPathFor(target)))?.lockId, outer.owner.lockId);
      return 'ok';
    });
    assert.equal(result, 'ok');
    assert.equal(heldLockFor(target), undefined);
  });

  test('an unrelated concurrent caller waits for the holder (no re-entry across chains)', async () => {
    const target = path.join(tempDir(), 'concurrent');
    const events: string[] = [];
    const holderGate = gate();
    const a = withLock(target, {}, async () => {
      events.push('a-in');
      await holderGate.opened;
      events.push('a-out');
    });
    await waitUntil(() => lockQueueState(target).heldInProcess, 5_000, 'a to hold the lock');
    const b = withLock(target, {}, async (handle) => {
      events.push(`b-in reentrant=${handle.reentrant}`);
    });
    await waitUntil(() => lockQueueState(target).waiting === 1, 5_000, 'b to queue');
    assert.deepEqual(events, ['a-in']);
    holderGate.open();
    await Promise.all([a, b]);
    assert.deepEqual(events, ['a-in', 'a-out', 'b-in reentrant=false']);
  });

  test('work started inside a holder that runs after the release acquires the lock itself', async () => {
    const target = path.join(tempDir(), 'leaked');
    const outerDone = gate();
    let later: Promise<boolean> | undefined;
    await withLock(target, {}, async () => {
      later = outerDone.opened.then(() => withLock(target, {}, async (handle) => handle.reentrant));
    });
    outerDone.open();
    assert.equal(await later, false);
  });

  test('in-process waiters are served in arrival order', async () => {
    const target = path.join(tempDir(), 'fifo');
    const holderGate = gate();
    const holder = withLock(target, {}, () => holderGate.opened);
    await waitUntil(() => lockQueueState(target).heldInProcess, 5_000, 'the holder');
    const order: number[] = [];
    const waiters = Array.from({ length: 6 }, (_, i) =>
      withLock(target, {}, async () => {
        order.push(i);
        await new Promise((resolve) => setImmediate(resolve));
      }),
    );
    await waitUntil(() => lockQueueState(target).waiting === 6, 5_000, 'six waiters');
    holderGate.open();
    await Promise.all([holder, ...waiters]);
    assert.deepEqual(order, [0, 1, 2, 3, 4, 5]);
    assert.deepEqual(lockQueueState(target), { heldInProcess: false, waiting: 0 });
  });

  test('a wait timeout is SESSION_BUSY (exit 75) naming the holder; busyCode switches the code', async () => {
    const target = path.join(tempDir(), 'busy');
    const holderGate = gate();
    const holder = withLock(target, { owner: { runId: 'run-A', sessionKey: 'agent:main:a' } }, () => holderGate.opened);
    await waitUntil(() => lockQueueState(target).heldInProcess, 5_000, 'the holder');
    let entered = false;
    await assert.rejects(
      withLock(target, { acquireTimeoutMs: 100 }, async () => {
        entered = true;
      }),
      (err: unknown) => {
        assert.ok(isCode('SESSION_BUSY', 75)(err));
        const details = (err as SwitchboardError).details as { owner: LockOwnerRecord; lockPath: string };
        assert.equal(details.owner.pid, process.pid);
        assert.equal(details.owner.runId, 'run-A');
        assert.equal(details.owner.sessionKey, 'agent:main:a');
        assert.equal(details.lockPath, lockPathFor(target));
        assert.match((err as Error).message, new RegExp(`pid ${process.pid}\\b.*run-A`));
        return true;
      },
    );
    await assert.rejects(withLock(target, { acquireTimeoutMs: 0, busyCode: 'STORE_BUSY' }, async () => undefined), isCode('STORE_BUSY', 75));
    assert.equal(entered, false);
    assert.equal(lockQueueState(target).waiting, 0, 'timed-out waiters leave the queue');
    holderGate.open();
    await holder;
    assert.equal(await withLock(target, { acquireTimeoutMs: 0 }, async () => 'free'), 'free');
  });

  test('a directory that does not exist yet is created for the lock', async () => {
    const target = path.join(tempDir(), 'agents', 'main', 'sessions', 'sessions.json');
    assert.equal(await withLock(target, {}, async () => existsSync(lockPathFor(target))), true);
  });

  test('a lock that cannot be created is an IO error (exit 74)', async () => {
    const dir = tempDir();
    writeFileSync(path.join(dir, 'plain-file'), '');
    await assert.rejects(withLock(path.join(dir, 'plain-file', 's.jsonl'), {}, async () => undefined), isCode('IO', 74));
  });
});

describe('max hold', () => {
  test('the holder watchdog aborts the run, releases the lock and assertHeld throws from then on', async () => {
    const target = path.join(tempDir(), 'watchdog');
    const lockPath = lockPathFor(target);
    const released = gate();
    const waiterDone = gate();
    const holder = withLock(target, { maxHoldMs: 300 }, async (handle) => {
      await once(handle.signal, 'abort');
      const reason = handle.signal.reason as SwitchboardError;
      assert.ok(isCode('SESSION_BUSY', 75)(reason));
      assert.equal(reason.details?.reason, 'max-hold');
      assert.equal(handle.isHeld(), false);
      assert.throws(() => handle.assertHeld(), (err: unknown) => err === reason);
      await assert.rejects(handle.verifyHeld(), isCode('SESSION_BUSY', 75));
      // a run whose lock is gone cannot re-enter it either
      await assert.rejects(withLock(target, {}, async () => 'nested'), isCode('SESSION_BUSY', 75));
      // the watchdog itself removed the lock (nobody else is there to take it over)
      await waitUntil(() => !existsSync(lockPath), 5_000, 'the watchdog to release the lock');
      released.open();
      await waiterDone.opened; // still running while a waiter gets the lock
      return 'holder finished late';
    });
    await released.opened;
    // started outside the holder's async chain: a real waiter, not a re-entry
    const waiter = await withLock(target, { acquireTimeoutMs: 10_000 }, async (handle) => handle.reentrant);
    assert.equal(waiter, false, 'the waiter got the lock while the old holder still runs');
    waiterDone.open();
    assert.equal(await holder, 'holder finished late');
    assert.equal(existsSync(lockPath), false);
  });

  test('assertHeld throws once the max hold has passed, even before the watchdog timer runs', async () => {
    const target = path.join(tempDir(), 'clock');
    await withLock(target, { maxHoldMs: 50 }, async (handle) => {
      const until = Date.now() + 80;
      while (Date.now() < until) {
        // keep the event loop busy so that the watchdog timer cannot have run
      }
      assert.equal(handle.signal.aborted, false);
      assert.throws(() => handle.assertHeld(), isCode('SESSION_BUSY', 75));
      assert.equal(handle.signal.aborted, true);
    });
  });

  test('a waiter takes over a lock whose owner record is past acquiredAt + maxHoldMs', async () => {
    const dir = tempDir();
    const target = path.join(dir, 'overheld');
    const lockPath = lockPathFor(target);
    craftForeignLock(lockPath, { lockId: 'stuck', acquiredAt: Date.now() - 60_000, maxHoldMs: 1_000, runId: 'stuck-run' });
    const [listed] = await listLocks(dir);
    assert.equal(listed?.overHeld, true);
    assert.equal(listed?.stale, false, 'the mtime is fresh: only the max hold allows the takeover');
    const mine = await withLock(target, { acquireTimeoutMs: 5_000 }, async (handle) => {
      assert.equal((await readLockOwner(lockPath))?.lockId, handle.owner.lockId);
      return handle.owner.lockId;
    });
    assert.notEqual(mine, 'stuck');
    assert.deepEqual(readdirSync(dir), []);
  });

  test('a foreign holder within its max hold is waited for, not taken over', async () => {
    const dir = tempDir();
    const target = path.join(dir, 'intime');
    const lockPath = lockPathFor(target);
    craftForeignLock(lockPath, { lockId: 'in-time', runId: 'long-run', pid: 4242 });
    await assert.rejects(withLock(target, { acquireTimeoutMs: 150 }, async () => undefined), (err: unknown) => {
      assert.ok(isCode('SESSION_BUSY', 75)(err));
      const details = (err as SwitchboardError).details as { owner: LockOwnerRecord };
      assert.equal(details.owner.lockId, 'in-time');
      assert.equal(details.owner.pid, 4242);
      assert.match((err as Error).message, /pid 4242\b.*long-run/);
      return true;
    });
    assert.equal((await readLockOwner(lockPath))?.lockId, 'in-time', 'the holder was left alone');
  });
});

describe('stale locks (crashed holders)', () => {
  test('a stale lock with an owner record inside is taken over', async () => {
    const target = path.join(tempDir(), 'stale-owner');
    const lockPath = lockPathFor(target);
    craftForeignLock(lockPath, { lockId: 'crashed' });
    ageDirectory(lockPath, 60_000);
    const id = await withLock(target, { staleMs: 2_000, acquireTimeoutMs: 5_000 }, async (handle) => handle.owner.lockId);
    assert.notEqual(id, 'crashed');
  });

  test('a stale lock without a record, or with only a half-written one, is taken over', async () => {
    for (const extra of [[], ['owner.json.1234.tmp']]) {
      const target = path.join(tempDir(), 'stale-empty');
      const lockPath = lockPathFor(target);
      craftForeignLock(lockPath, null, extra);
      ageDirectory(lockPath, 60_000);
      assert.equal(await withLock(target, { staleMs: 2_000, acquireTimeoutMs: 5_000 }, async () => 'taken'), 'taken');
    }
  });

  test('a fresh lock without a record (holder between mkdir and record) is waited for', async () => {
    const target = path.join(tempDir(), 'fresh-empty');
    craftForeignLock(lockPathFor(target), null);
    await assert.rejects(withLock(target, { acquireTimeoutMs: 100 }, async () => undefined), isCode('SESSION_BUSY', 75));
  });
});

/** /proc/<pid>/stat start time (field 22), read here independently of lock.ts; null without /proc. */
function procStartTicks(pid: number): number | null {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return Number(text.slice(text.lastIndexOf(')') + 2).split(' ')[19]);
  } catch {
    return null;
  }
}

const noProc = procStartTicks(process.pid) === null ? 'no /proc on this system' : false;

/** A live process other than this one, for the life of the test. */
async function liveProcess(): Promise<{ pid: number; stop: () => Promise<void> }> {
  const child = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { stdio: 'ignore' });
  await once(child, 'spawn');
  return {
    pid: child.pid!,
    stop: async () => {
      child.kill('SIGKILL');
      await once(child, 'exit');
    },
  };
}

describe("takeover 'stale' (session locks, lane slots): a live holder on this host is waited for until its max hold", () => {
  /** The lock of `pid` (alive, on this host), stale for a minute; `heldMs` ago, with a max hold of `maxHoldMs`. */
  function frozenHolderLock(pid: number, heldMs: number, maxHoldMs: number): string {
    const target = path.join(tempDir(), 'frozen.jsonl');
    const lockPath = lockPathFor(target);
    craftForeignLock(lockPath, { lockId: 'frozen', pid, hostname: os.hostname(), processStartTicks: procStartTicks(pid)!, acquiredAt: Date.now() - heldMs, maxHoldMs, runId: 'frozen-run' });
    ageDirectory(lockPath, 60_000);
    return target;
  }

  test('stale but within its max hold: waited for, and the busy error says who and until when', { skip: noProc }, async () => {
    const live = await liveProcess();
    try {
      const target = frozenHolderLock(live.pid, 1_000, 600_000);
      await assert.rejects(withLock(target, { staleMs: 2_000, acquireTimeoutMs: 300 }, async () => 'taken over'), (err: unknown) => {
        assert.ok(isCode('SESSION_BUSY', 75)(err), String(err));
        assert.match((err as Error).message, new RegExp(`pid ${live.pid}\\b.*run frozen-run.*not refreshed for 60\\.\\d s .*waited for until its max hold, in 10 min`));
        assert.equal((err as SwitchboardError).details?.unresponsive, true);
        return true;
      });
      // An operator's release, maintain and doctor go by the same rule: only with --force.
      await assert.rejects(releaseLock(target, { staleMs: 2_000 }), isCode('SESSION_BUSY', 75));
      assert.equal((await readLockOwner(lockPathFor(target)))?.lockId, 'frozen', 'left alone');
    } finally {
      await live.stop();
    }
  });

  test('past its max hold: taken over', { skip: noProc }, async () => {
    const live = await liveProcess();
    try {
      const target = frozenHolderLock(live.pid, 600_000, 1_000);
      assert.notEqual(await withLock(target, { staleMs: 2_000, acquireTimeoutMs: 5_000 }, async (handle) => handle.owner.lockId), 'frozen');
    } finally {
      await live.stop();
    }
  });
});

describe("takeover 'dead' (the sessions.json lock): never from a live holder on this host", () => {
  test('a live holder is waited for although stale and over-held; STORE_BUSY names it', { skip: noProc }, async () => {
    const live = await liveProcess();
    try {
      for (const [waiterPolicy, recorded] of [['dead', undefined], ['stale', 'dead']] as const) {
        const target = path.join(tempDir(), 'sessions.json');
        const lockPath = lockPathFor(target);
        craftForeignLock(lockPath, {
          lockId: 'frozen',
          pid: live.pid,
          hostname: os.hostname(),
          processStartTicks: procStartTicks(live.pid)!,
          acquiredAt: Date.now() - 600_000,
          maxHoldMs: 1_000,
          ...(recorded !== undefined ? { takeover: recorded } : {}),
        });
        ageDirectory(lockPath, 600_000);
        await assert.rejects(
          withLock(target, { busyCode: 'STORE_BUSY', takeover: waiterPolicy, staleMs: 2_000, acquireTimeoutMs: 300 }, async () => 'taken over'),
          (err: unknown) => {
            assert.ok(isCode('STORE_BUSY', 75)(err), String(err));
            assert.match((err as Error).message, new RegExp(`pid ${live.pid}\\b.* for \\d+ min`));
            assert.equal(((err as SwitchboardError).details as { ageMs: number }).ageMs >= 600_000, true);
            return true;
          },
        );
        assert.equal((await readLockOwner(lockPath))?.lockId, 'frozen', `waiter ${waiterPolicy}, record ${String(recorded)}: left alone`);
      }
    } finally {
      await live.stop();
    }
  });

  test('a dead holder, or a pid now used by another process, is taken over at once (fresh mtime)', { skip: noProc }, async () => {
    const live = await liveProcess();
    try {
      const holders: Array<Partial<LockOwnerRecord>> = [
        { pid: deadPid() },
        { pid: live.pid, processStartTicks: procStartTicks(live.pid)! - 1 }, // the pid was reused
        // our own pid, in the record of the process that had it before us (a container's
        // switchboard is often the same pid run after run): it was judged "unknown" and waited
        // for staleMs
        { pid: process.pid, processStartTicks: procStartTicks(process.pid)! - 1 },
      ];
      for (const holder of holders) {
        const target = path.join(tempDir(), 'sessions.json');
        craftForeignLock(lockPathFor(target), { lockId: 'gone', hostname: os.hostname(), takeover: 'dead', ...holder });
        const id = await withLock(target, { takeover: 'dead', acquireTimeoutMs: 5_000 }, async (handle) => handle.owner.lockId);
        assert.notEqual(id, 'gone');
      }
    } finally {
      await live.stop();
    }
  });

  test('a holder on another host (liveness unknown) is taken over only when stale', async () => {
    const target = path.join(tempDir(), 'sessions.json');
    const lockPath = lockPathFor(target);
    craftForeignLock(lockPath, { lockId: 'remote', hostname: 'some-other-host', takeover: 'dead' });
    await assert.rejects(withLock(target, { takeover: 'dead', busyCode: 'STORE_BUSY', acquireTimeoutMs: 200 }, async () => undefined), isCode('STORE_BUSY', 75));
    ageDirectory(lockPath, 60_000);
    assert.notEqual(await withLock(target, { takeover: 'dead', staleMs: 2_000, acquireTimeoutMs: 5_000 }, async (handle) => handle.owner.lockId), 'remote');
  });

  test('the owner record carries the policy and the exact process start', { skip: noProc }, async () => {
    const target = path.join(tempDir(), 'sessions.json');
    await withLock(target, { takeover: 'dead' }, async () => {
      const record = await readLockOwner(lockPathFor(target));
      assert.equal(record?.takeover, 'dead');
      assert.equal(record?.processStartTicks, procStartTicks(process.pid));
    });
  });
});

describe('listLocks and releaseLock', () => {
  test('listLocks walks folders for *.lock directories and judges each', async () => {
    const dir = tempDir();
    mkdirSync(path.join(dir, 'agents', 'main', 'sessions'), { recursive: true });
    writeFileSync(path.join(dir, 'agents', 'not-a-lock.lock'), 'a file, not a lock');
    const staleLock = path.join(dir, 'agents', 'main', 'sessions', 'a.jsonl.lock');
    const overLock = path.join(dir, 'agents', 'main', 'sessions', 'sessions.json.lock');
    const deadLock = path.join(dir, 'dead.jsonl.lock');
    craftForeignLock(staleLock, { lockId: 'stale', staleMs: 5_000 });
    ageDirectory(staleLock, 60_000);
    craftForeignLock(overLock, { lockId: 'over', acquiredAt: Date.now() - 10_000, maxHoldMs: 5_000 });
    craftForeignLock(deadLock, { lockId: 'dead', hostname: os.hostname(), pid: deadPid() });
    const locks = await listLocks(dir);
    assert.deepEqual(
      locks.map((l) => [path.relative(dir, l.lockPath), l.owner?.lockId, l.stale, l.overHeld, l.holderAlive]),
      [
        [path.join('agents', 'main', 'sessions', 'a.jsonl.lock'), 'stale', true, false, null],
        [path.join('agents', 'main', 'sessions', 'sessions.json.lock'), 'over', false, true, null],
        ['dead.jsonl.lock', 'dead', false, false, false],
      ],
    );
    const over = locks[1]!;
    assert.ok(over.ageMs !== null && over.ageMs >= 10_000);
    assert.equal(over.targetPath, path.join(dir, 'agents', 'main', 'sessions', 'sessions.json'));
    assert.deepEqual(await listLocks(path.join(dir, 'missing')), []);
  });

  test('releaseLock refuses a live in-time holder unless forced; the holder then loses the lock', async () => {
    const target = path.join(tempDir(), 'release-live');
    const lockPath = lockPathFor(target);
    const holderGate = gate();
    let held: { lost: boolean; reason?: unknown } = { lost: false };
    const holder = withLock(target, { owner: { runId: 'live-run' } }, async (handle) => {
      await holderGate.opened;
      held = { lost: handle.signal.aborted, reason: handle.signal.reason };
      assert.throws(() => handle.assertHeld(), isCode('SESSION_BUSY', 75));
    });
    await waitUntil(() => lockQueueState(target).heldInProcess, 5_000, 'the holder');
    await assert.rejects(releaseLock(lockPath), (err: unknown) => {
      assert.ok(isCode('SESSION_BUSY', 75)(err));
      assert.equal(((err as SwitchboardError).details?.owner as LockOwnerRecord).runId, 'live-run');
      return true;
    });
    assert.equal(existsSync(lockPath), true, 'refused: still there');
    const result = await releaseLock(target, { force: true });
    assert.equal(result.forced, true);
    assert.equal(result.owner?.runId, 'live-run');
    assert.equal(existsSync(lockPath), false);
    holderGate.open();
    await holder;
    assert.equal(held.lost, true);
    assert.equal((held.reason as SwitchboardError).details?.reason, 'lost');
    assert.equal(await withLock(target, { acquireTimeoutMs: 0 }, async () => 'free again'), 'free again');
  });

  test('releaseLock frees dead, stale and over-held holders without force; a missing lock is NOT_FOUND', async () => {
    const dir = tempDir();
    const dead = path.join(dir, 'dead.lock');
    craftForeignLock(dead, { hostname: os.hostname(), pid: deadPid() });
    const stale = path.join(dir, 'stale.lock');
    craftForeignLock(stale, {});
    ageDirectory(stale, 60_000);
    const over = path.join(dir, 'over.lock');
    craftForeignLock(over, { acquiredAt: Date.now() - 10_000, maxHoldMs: 1_000 });
    assert.equal((await releaseLock(dead)).forced, false);
    assert.equal((await releaseLock(stale)).wasStale, true);
    assert.equal((await releaseLock(over)).wasOverHeld, true);
    assert.deepEqual(readdirSync(dir), []);
    await assert.rejects(releaseLock(dead), isCode('NOT_FOUND', 66));
  });

  test('a foreign in-time lock is refused without force and removed with it', async () => {
    const dir = tempDir();
    const lockPath = path.join(dir, 'x.jsonl.lock');
    craftForeignLock(lockPath, { lockId: 'remote', runId: 'remote-run' });
    await assert.rejects(releaseLock(lockPath), isCode('SESSION_BUSY', 75));
    assert.equal(JSON.parse(readFileSync(path.join(lockPath, 'owner.json'), 'utf8')).lockId, 'remote');
    assert.equal((await releaseLock(lockPath, { force: true })).forced, true);
    assert.deepEqual(readdirSync(dir), []);
  });
});
