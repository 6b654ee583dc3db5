// Lock faults with real child processes and signals (quality.md cases 7, 8, 10 and the busy and
// release rules): a SIGKILLed holder, holders past their max hold, forced release, busy errors.

import assert from 'node:assert/strict';
import { readdirSync, utimesSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import { SwitchboardError } from '../../src/core/index.js';
import {
  appendEntries,
  listLocks,
  loadTranscript,
  lockPathFor,
  readLockOwner,
  releaseLock,
  withLock,
  type LockOwnerRecord,
  type TranscriptRecord,
} from '../../src/store/index.js';
import { killChildren, startChild, type ChildRun } from '../fixtures/store-child-process.js';
import { tempDir as makeTempDir } from '../helpers.js';

const children: ChildRun[] = [];
const tempDir = (): string => makeTempDir('sb-lockfault-');
function holder(config: Record<string, unknown>): ChildRun {
  const run = startChild('lock-holder-child.js', [JSON.stringify(config)]);
  children.push(run);
  return run;
}
after(() => killChildren(children));

const session = { sessionId: 'lock-test-session', sessionKey: 'agent:main:test:direct:7', agentId: 'main' };

function isCode(code: string, exitCode: number) {
  return (err: unknown): boolean => err instanceof SwitchboardError && err.code === code && err.exitCode === exitCode;
}

/** Index of the parent's entry, and the child entries that come after it in the file. */
function childWritesAfterParent(entries: TranscriptRecord[]): { parentIndex: number; after: TranscriptRecord[] } {
  const parentIndex = entries.findIndex((e) => e.writer === 'parent');
  return { parentIndex, after: entries.slice(parentIndex + 1).filter((e) => e.writer === 'child') };
}

describe('lock faults with real processes', () => {
  test('case 7: a SIGKILLed holder loses the lock once it is stale; the next acquirer gets it', async () => {
    const dir = tempDir();
    const target = path.join(dir, 's.jsonl');
    const staleMs = 2_000;
    const child = holder({ target, behaviour: 'hold', staleMs, runId: 'doomed-run' });
    await child.waitForLine((l) => l.startsWith('held '), 10_000, 'the child to hold the lock');
    child.child.kill('SIGKILL');
    const { signal } = await child.exited;
    assert.equal(signal, 'SIGKILL');

    const [left] = await listLocks(dir);
    assert.equal(left?.owner?.pid, child.pid, 'the dead holder left its lock and record behind');
    assert.equal(left?.holderAlive, false);

    // No sleeping here: withLock itself waits, and must succeed once the mtime is staleMs old.
    const got = await withLock(target, { staleMs, acquireTimeoutMs: 6 * staleMs }, async (handle) => {
      const record = await readLockOwner(lockPathFor(target));
      assert.equal(record?.lockId, handle.owner.lockId);
      return record?.pid;
    });
    assert.equal(got, process.pid);
  });

  test('a SIGKILLed holder that is known dead loses its session lock at once, long before staleMs', async () => {
    const dir = tempDir();
    const target = path.join(dir, 'dead.jsonl');
    // A minute of staleMs: a waiter that could only wait for staleness would time out below.
    const child = holder({ target, behaviour: 'hold', staleMs: 60_000, runId: 'dead-run' });
    await child.waitForLine((l) => l.startsWith('held '), 10_000, 'the child to hold the lock');
    child.child.kill('SIGKILL');
    await child.exited;
    const got = await withLock(target, { staleMs: 60_000, acquireTimeoutMs: 5_000 }, async (handle) => handle.owner.pid);
    assert.equal(got, process.pid);
  });

  test('a process that exits while holding a lock removes it on the way out', async () => {
    const dir = tempDir();
    const target = path.join(dir, 'exit.jsonl');
    const child = holder({ target, behaviour: 'exit' });
    await child.waitForLine((l) => l.startsWith('held '), 10_000, 'the child to hold the lock');
    assert.equal((await child.exited).code, 0);
    assert.deepEqual(await listLocks(dir), []);
    assert.deepEqual(readdirSync(dir), []);
  });

  test('a busy lock held by another process: SESSION_BUSY (exit 75) naming it; waiters get it on release', async () => {
    const dir = tempDir();
    const target = path.join(dir, 'busy.jsonl');
    const child = holder({ target, behaviour: 'hold', runId: 'run-busy', sessionKey: 'agent:main:telegram:direct:42' });
    await child.waitForLine((l) => l.startsWith('held '), 10_000, 'the child to hold the lock');

    await assert.rejects(withLock(target, { acquireTimeoutMs: 300 }, async () => 'should not run'), (err: unknown) => {
      assert.ok(isCode('SESSION_BUSY', 75)(err));
      const owner = (err as SwitchboardError).details?.owner as LockOwnerRecord;
      assert.equal(owner.pid, child.pid);
      assert.equal(owner.runId, 'run-busy');
      assert.equal(owner.sessionKey, 'agent:main:telegram:direct:42');
      assert.equal(owner.hostname, os.hostname());
      assert.match((err as Error).message, new RegExp(`pid ${child.pid}\\b.*run-busy`));
      return true;
    });
    // releaseLock refuses a live, in-time holder
    await assert.rejects(releaseLock(target), isCode('SESSION_BUSY', 75));
    assert.equal((await readLockOwner(lockPathFor(target)))?.pid, child.pid);

    // case 10: a caller arriving during the hold waits and then runs — it is not dropped
    const waiter = withLock(target, { acquireTimeoutMs: 15_000 }, async (handle) => handle.owner.pid);
    child.send('release');
    assert.equal(await waiter, process.pid);
    await child.waitForLine((l) => l === 'done', 10_000, 'the child to finish');
  });

  test('case 8: past its max hold the holder watchdog aborts the run; a waiter gets the lock; no write after', async () => {
    const dir = tempDir();
    const target = path.join(dir, 'watchdog.jsonl');
    const child = holder({ target, behaviour: 'write-loop', maxHoldMs: 1_500, staleMs: 30_000, runId: 'long-run' });
    await child.waitForLine((l) => l.startsWith('wrote 0'), 10_000, 'the child to write');

    await withLock(target, { acquireTimeoutMs: 15_000 }, async (handle) => {
      await appendEntries(target, [{ type: 'custom', writer: 'parent' }], { handle, session });
      await child.waitForLine((l) => l.startsWith('stopped '), 10_000, 'the child to stop writing');
    });
    await child.waitForLine((l) => l === 'done', 10_000, 'the child to finish');
    assert.ok(child.lines.includes('aborted SESSION_BUSY max-hold'), child.lines.join(' | '));
    assert.ok(child.lines.includes('stopped SESSION_BUSY max-hold'), child.lines.join(' | '));

    const { entries, stats } = await loadTranscript(target);
    assert.equal(stats.skipped, 0);
    const { parentIndex, after: late } = childWritesAfterParent(entries);
    assert.ok(parentIndex > 0);
    assert.deepEqual(late, [], 'the old holder wrote nothing after losing the lock');
    const acknowledged = child.lines.filter((l) => l.startsWith('wrote ')).length;
    assert.equal(entries.filter((e) => e.writer === 'child').length, acknowledged, 'every acknowledged write is there');
  });

  test('case 8: a frozen holder past its max hold is taken over by a waiter; it writes nothing more', async () => {
    const dir = tempDir();
    const target = path.join(dir, 'frozen.jsonl');
    const unblockFlag = path.join(dir, 'unblock');
    // staleMs is long: only the owner record's acquiredAt + maxHoldMs can justify the takeover
    const child = holder({ target, behaviour: 'block', maxHoldMs: 1_000, staleMs: 60_000, runId: 'frozen-run', unblockFlag });
    const childLockId = (await child.waitForLine((l) => l.startsWith('held '), 10_000, 'the child to hold')).slice(5);
    await child.waitForLine((l) => l === 'wrote 0', 10_000, 'the child to write once');

    await withLock(target, { acquireTimeoutMs: 15_000 }, async (handle) => {
      assert.notEqual(handle.owner.lockId, childLockId);
      await appendEntries(target, [{ type: 'custom', writer: 'parent' }], { handle, session });
      writeFileSync(unblockFlag, '');
      await child.waitForLine((l) => l.startsWith('stopped '), 10_000, 'the old holder to notice');
      await child.waitForLine((l) => l === 'done', 10_000, 'the old holder to finish');
      // the old holder's own clean-up must not have removed the new holder's lock
      assert.equal((await readLockOwner(lockPathFor(target)))?.lockId, handle.owner.lockId);
      await handle.verifyHeld();
    });
    assert.ok(child.lines.includes('stopped SESSION_BUSY max-hold'), child.lines.join(' | '));
    const { entries } = await loadTranscript(target);
    assert.deepEqual(
      entries.map((e) => `${String(e.writer)}:${String(e.n ?? '')}`),
      ['child:0', 'parent:'],
      'the frozen holder wrote nothing after the takeover',
    );
  });

  test("a waiter with a short staleMs honours the holder's longer one (owner.json): no takeover in between", async () => {
    const dir = tempDir();
    const target = path.join(dir, 'long-stale.jsonl');
    // staleMs 60 s: the holder refreshes its mtime only every 30 s
    const child = holder({ target, behaviour: 'hold', staleMs: 60_000, runId: 'slow-refresh' });
    const lockId = (await child.waitForLine((l) => l.startsWith('held '), 10_000, 'the child to hold the lock')).slice(5);
    // Its last refresh 10 s ago: older than the waiter's staleMs (2 s), younger than the holder's.
    const lockPath = lockPathFor(target);
    const then = new Date(Date.now() - 10_000);
    utimesSync(lockPath, then, then);

    const [listed] = await listLocks(dir, { staleMs: 2_000 });
    assert.equal(listed?.stale, false, "judged by the holder's staleMs");
    await assert.rejects(withLock(target, { staleMs: 2_000, acquireTimeoutMs: 1_000 }, async () => 'taken over'), (err: unknown) => {
      assert.ok(isCode('SESSION_BUSY', 75)(err), String(err));
      assert.equal(((err as SwitchboardError).details?.owner as LockOwnerRecord).pid, child.pid);
      return true;
    });
    assert.equal((await readLockOwner(lockPath))?.lockId, lockId, 'the live holder kept its lock');
    child.send('release');
    await child.waitForLine((l) => l === 'done', 10_000, 'the child to finish');
    assert.ok(!child.lines.some((l) => l.startsWith('aborted ')), child.lines.join(' | '));
  });

  test('an idle holder learns of a forced release from proper-lockfile (ECOMPROMISED): its signal aborts', async () => {
    const dir = tempDir();
    const target = path.join(dir, 'idle.jsonl');
    // staleMs 2 s: proper-lockfile checks the lock every second
    const child = holder({ target, behaviour: 'hold', staleMs: 2_000, runId: 'idle-run' });
    await child.waitForLine((l) => l.startsWith('held '), 10_000, 'the child to hold the lock');
    assert.equal((await releaseLock(target, { force: true })).owner?.runId, 'idle-run');
    await child.waitForLine((l) => l.startsWith('aborted '), 10_000, 'the holder to notice');
    assert.ok(child.lines.includes('aborted SESSION_BUSY lost'), child.lines.join(' | '));
    child.send('release');
    await child.waitForLine((l) => l === 'done', 10_000, 'the child to finish');
    assert.deepEqual(readdirSync(dir), [], 'the old holder did not touch the (now free) lock path');
  });

  test('a forced release: refused without --force; with it the live holder detects the loss and stops', async () => {
    const dir = tempDir();
    const target = path.join(dir, 'forced.jsonl');
    const child = holder({ target, behaviour: 'write-loop', maxHoldMs: 120_000, staleMs: 2_000, runId: 'victim-run' });
    await child.waitForLine((l) => l.startsWith('wrote 2'), 10_000, 'the child to write');

    await assert.rejects(releaseLock(target), isCode('SESSION_BUSY', 75));
    const released = await releaseLock(target, { force: true });
    assert.equal(released.forced, true);
    assert.equal(released.owner?.pid, child.pid);
    await child.waitForLine((l) => l.startsWith('stopped '), 10_000, 'the holder to detect the loss');
    assert.ok(child.lines.includes('stopped SESSION_BUSY lost'), child.lines.join(' | '));

    await withLock(target, { acquireTimeoutMs: 10_000 }, (handle) =>
      appendEntries(target, [{ type: 'custom', writer: 'parent' }], { handle, session }),
    );
    await child.waitForLine((l) => l === 'done', 10_000, 'the child to finish');
    const { entries } = await loadTranscript(target);
    assert.deepEqual(childWritesAfterParent(entries).after, []);
    assert.equal(
      entries.filter((e) => e.writer === 'child').length,
      child.lines.filter((l) => l.startsWith('wrote ')).length,
    );
  });
});
