// One holding of a lock by this process: HeldLock with its handle, max-hold watchdog, write
// fencing, verification against owner.json and release; and the 'exit' hook that removes this
// process's locks. lock.ts creates holdings (withLock); removal and judging are lock-owner.ts's.

import { statSync, utimesSync } from 'node:fs';
import lockfile from 'proper-lockfile';
import { SwitchboardError, errnoOf, ioError } from '../core/index.js';
import { formatMs } from './lock-describe.js';
import { heldLocks, now, parseOwnerRecord, readOwnerText, removeLockFolder, removeLockIfOwned, rewriteOwnerRecord, writeChildRecord, type LockOwnerRecord, type OwnHolding } from './lock-owner.js';

export type BusyCode = 'SESSION_BUSY' | 'STORE_BUSY';

export interface LockHandle {
  readonly lockPath: string;
  readonly targetPath: string;
  readonly owner: Readonly<LockOwnerRecord>;
  /** Aborted (reason: a SwitchboardError) when the max hold passes or the lock is lost. */
  readonly signal: AbortSignal;
  /** True for the handle given to a nested withLock of a lock the caller already holds. */
  readonly reentrant: boolean;
  isHeld(): boolean;
  /** Cheap in-memory check (state + max-hold clock); throws the busy code once the lock is gone. */
  assertHeld(): void;
  /** assertHeld plus a read of the owner record on disk; call it right before writing. */
  verifyHeld(): Promise<void>;
  /**
   * Runs one write that must not overlap a loss of the lock caused by this process: assertHeld()
   * is checked synchronously right before `write` starts, and the holder's own max-hold release
   * waits until `write` has settled (so no waiter gets the lock while the write is in flight).
   * Writers still verifyHeld() afterwards: a takeover by a waiter cannot be held off.
   */
  fence<T>(write: () => Promise<T>): Promise<T>;
  /** Names the runner process (a session leader) this holding started: a takeover of the lock kills its session. */
  noteChild(pid: number): void;
  /**
   * Starts the max-hold clock again: from now the lock may be held for its max hold once more.
   * For a holder that waits on work bounded elsewhere before its own starts (a run waiting for a
   * lane slot, behind other runs with timeouts of their own): the wait must not eat into its time.
   */
  restartMaxHold(): void;
}

type HoldState = 'held' | 'released' | 'lost';

/** Handed to proper-lockfile's unlock() so it stops refreshing without touching the directory. */
export const KEEP_DIRECTORY_FS = { rmdir: (_dir: string, done: (err: null) => void): void => done(null) };

export class HeldLock implements OwnHolding {
  state: HoldState = 'held';
  lossError: SwitchboardError | undefined;
  readonly handle: LockHandle;
  readonly nestedHandle: LockHandle;
  private readonly controller = new AbortController();
  private watchdog: NodeJS.Timeout | undefined;
  private releasing: Promise<void> | undefined;

  constructor(
    readonly targetPath: string,
    readonly lockPath: string,
    readonly owner: LockOwnerRecord,
    private readonly busyCode: BusyCode,
    private readonly passTurn: () => void,
    /** A lock on a memory-volume path: the in-process turn is the whole lock, nothing is on disk. */
    readonly inMemory = false,
  ) {
    this.handle = this.makeHandle(false);
    this.nestedHandle = this.makeHandle(true);
    this.grantedMaxHoldMs = owner.maxHoldMs;
  }

  start(): void {
    heldLocks.set(this.lockPath, this);
    installExitHook();
    // Not unref'd: while a lock is held its holder has work pending, and the watchdog must fire
    // even if that work awaits something that never settles. Cleared on every release.
    this.watchdog = setTimeout(() => this.expire(), this.owner.maxHoldMs);
  }

  private makeHandle(reentrant: boolean): LockHandle {
    return {
      lockPath: this.lockPath,
      targetPath: this.targetPath,
      owner: this.owner,
      signal: this.controller.signal,
      reentrant,
      isHeld: () => this.isHeld(),
      assertHeld: () => this.assertHeld(),
      verifyHeld: () => this.verifyHeld(),
      fence: (write) => this.fence(write),
      noteChild: (pid) => this.noteChild(pid),
      restartMaxHold: () => this.restartMaxHold(),
    };
  }

  /** The max hold the lock was taken with: what restartMaxHold grants again from the moment it is called. */
  private readonly grantedMaxHoldMs: number;

  /**
   * LockHandle.restartMaxHold. Waiters judge over-holding by the owner record on disk, so it is
   * written again with the longer max hold (rewriteOwnerRecord), and the folder's mtime is put back
   * as at acquisition: proper-lockfile compares it with the one it set and would call the lock
   * compromised. All synchronous, so no refresh of proper-lockfile's comes in between.
   */
  private restartMaxHold(): void {
    this.assertHeld();
    const elapsed = Math.max(0, now() - this.owner.acquiredAt);
    const maxHoldMs = elapsed + this.grantedMaxHoldMs;
    if (!this.inMemory) {
      const recorded = statSync(this.lockPath);
      rewriteOwnerRecord(this.lockPath, { ...this.owner, maxHoldMs });
      utimesSync(this.lockPath, recorded.atime, recorded.mtime);
    }
    (this.owner as { maxHoldMs: number }).maxHoldMs = maxHoldMs;
    clearTimeout(this.watchdog);
    this.watchdog = setTimeout(() => this.expire(), this.grantedMaxHoldMs);
  }

  /** Records the runner this holding started, for whoever takes the lock over (lock-owner.ts, child.json). */
  private noteChild(pid: number): void {
    if (this.inMemory || !this.isHeld()) return;
    try {
      writeChildRecord(this.lockPath, pid);
    } catch {
      // Only a takeover reads it; without it, a run whose switchboard died is not stopped by the next holder.
    }
  }

  private fencedWrites = 0;
  private fenceIdle: Promise<void> = Promise.resolve();
  private endFence: (() => void) | undefined;

  async fence<T>(write: () => Promise<T>): Promise<T> {
    this.assertHeld();
    // No await between the check above and the start of `write`: nothing of this process can
    // release the lock in between.
    if (this.fencedWrites === 0) this.fenceIdle = new Promise<void>((resolve) => (this.endFence = resolve));
    this.fencedWrites += 1;
    try {
      return await write();
    } finally {
      this.fencedWrites -= 1;
      if (this.fencedWrites === 0) this.endFence?.();
    }
  }

  /** Resolves once no fenced write is in flight. */
  private fencesDone(): Promise<void> {
    return this.fencedWrites === 0 ? Promise.resolve() : this.fenceIdle;
  }

  isHeld(): boolean {
    return this.state === 'held' && !this.overdue();
  }

  private overdue(): boolean {
    return now() >= this.owner.acquiredAt + this.owner.maxHoldMs;
  }

  assertHeld(): void {
    // The clock check does not wait for the watchdog timer: a waiter may take over as soon as
    // acquiredAt + maxHoldMs passes, so from that instant on this holder must not write.
    if (this.state === 'held' && this.overdue()) this.expire();
    if (this.state === 'lost') throw this.lossError;
    if (this.state === 'released') {
      throw new SwitchboardError(this.busyCode, `lock on ${this.targetPath} was already released`, {
        details: { reason: 'released', lockPath: this.lockPath },
      });
    }
  }

  async verifyHeld(): Promise<void> {
    this.assertHeld();
    if (this.inMemory) return;
    let onDisk: LockOwnerRecord | null;
    try {
      onDisk = parseOwnerRecord(readOwnerText(this.lockPath));
    } catch (err) {
      const code = errnoOf(err);
      // a failing disk is not proof that someone else holds the lock: report it as such (but a
      // record that is no regular file, a link or a huge file, is not ours)
      if (code !== 'ENOENT' && code !== 'ENOTDIR' && code !== 'ENOTREG' && code !== 'ELOOP' && code !== 'EFBIG') throw ioError(`could not verify lock ${this.lockPath}`, err);
      onDisk = null;
    }
    this.assertHeld(); // the state may have changed while we read
    if (onDisk?.lockId === this.owner.lockId) return;
    this.lose('lost', `lock on ${this.targetPath} was taken over or removed while held`);
    this.stopRefreshing();
    this.passTurn();
    throw this.lossError;
  }

  /** The holder's own watchdog: past its max hold it gives the lock up and aborts its run. */
  expire(): void {
    if (this.state !== 'held') return;
    this.lose('max-hold', `lock on ${this.targetPath} was held past its max hold of ${formatMs(this.owner.maxHoldMs)}`);
    // kept so that withLock's own release, when the run finally ends, waits for this one. A write
    // in flight (fence) finishes first: the lock must not change hands under it.
    this.releasing = this.fencesDone()
      .then(() => this.releaseOnDisk())
      .catch(warnReleaseFailure(this.lockPath))
      .finally(() => this.passTurn());
  }

  /** proper-lockfile saw the mtime change or the directory vanish: someone else has the lock. */
  onCompromised(cause: unknown): void {
    if (this.state !== 'held') return;
    this.lose('lost', `lock on ${this.targetPath} was lost (taken over or removed)`, cause);
    // The directory may still be ours (proper-lockfile also gives up when it merely could not
    // refresh in time). Nobody takes a 'dead'-policy lock from a live process, so leaving it
    // would block every waiter for as long as this process lives: remove it if it is ours.
    this.releasing = this.fencesDone()
      .then(() => removeLockIfOwned(this.lockPath, this.owner.lockId))
      .catch(warnReleaseFailure(this.lockPath))
      .finally(() => this.passTurn());
  }

  /** releaseLock(--force) on a lock this very process holds. */
  loseToOperator(): void {
    if (this.state !== 'held') return;
    this.lose('lost', `lock on ${this.targetPath} was released by force`);
    this.stopRefreshing();
    this.passTurn();
  }

  release(): Promise<void> {
    if (this.state !== 'held') return this.releasing ?? Promise.resolve();
    this.state = 'released';
    this.releasing = this.releaseOnDisk()
      .catch(warnReleaseFailure(this.lockPath))
      .finally(() => this.passTurn());
    return this.releasing;
  }

  private lose(reason: 'max-hold' | 'lost', message: string, cause?: unknown): void {
    this.state = 'lost';
    this.lossError = new SwitchboardError(this.busyCode, message, {
      cause,
      hint: 'the run was stopped so that it writes nothing more; the message can be retried',
      details: { reason, lockPath: this.lockPath, owner: this.owner },
    });
    this.forget();
    this.controller.abort(this.lossError);
  }

  private forget(): void {
    if (this.watchdog !== undefined) clearTimeout(this.watchdog);
    if (heldLocks.get(this.lockPath) === this) heldLocks.delete(this.lockPath);
  }

  private stopRefreshing(): Promise<void> {
    if (this.inMemory) return Promise.resolve();
    return lockfile
      .unlock(this.targetPath, { lockfilePath: this.lockPath, realpath: false, fs: KEEP_DIRECTORY_FS })
      .catch(() => undefined); // ENOTACQUIRED: proper-lockfile already dropped it (compromised)
  }

  private async releaseOnDisk(): Promise<void> {
    this.forget();
    if (this.inMemory) return;
    await this.stopRefreshing();
    await removeLockIfOwned(this.lockPath, this.owner.lockId);
  }
}

function warnReleaseFailure(lockPath: string): (err: unknown) => void {
  // The data is written; a lock we failed to remove goes stale within staleMs (its refresh is
  // stopped), so a warning is the right weight here, not a failed operation.
  return (err) => process.emitWarning(`could not remove lock ${lockPath}: ${String(err)}`, 'SwitchboardLockWarning');
}

let exitHookInstalled = false;

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on('exit', removeHeldLocksSync);
}

/** Sync on purpose: nothing async runs in an 'exit' handler. */
function removeHeldLocksSync(): void {
  for (const held of heldLocks.values()) {
    if (held.inMemory) continue;
    try {
      const record = parseOwnerRecord(readOwnerText(held.lockPath));
      if (record?.lockId !== held.owner.lockId) continue;
      removeLockFolder(held.lockPath);
    } catch {
      // best effort: a leftover lock goes stale within staleMs
    }
  }
}
