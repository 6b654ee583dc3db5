// The one lock helper: every lock in switchboard (the sessions.json store lock, the session write
// locks) is taken through withLock(); listLocks()/releaseLock() serve `switchboard locks`.
//
// On-disk layout of one lock:
//   <target>.lock/             proper-lockfile's mkdir lock; its mtime is refreshed while held
//   <target>.lock/owner.json   the owner record, written by the holder right after the mkdir
//
// Why the owner record lives INSIDE the lock directory, although proper-lockfile removes locks
// with rmdir (which fails with ENOTEMPTY on a non-empty directory):
//  * the record's lifetime is exactly the lock's. A sibling file would survive a crash and make a
//    reader pair a fresh lock with the previous holder's record; inside, one atomic rename moves
//    the lock and its record together.
//  * a non-empty lock cannot be rmdir-ed by accident. proper-lockfile's own "stale → rmdir → mkdir"
//    path is racy (a waiter can remove a lock another waiter has just taken); once the record is
//    written that rmdir fails, so only our verified paths below ever remove a lock:
//      - release: the holder renames its directory to a unique tombstone, checks the tombstone
//        carries its own lockId (otherwise puts it back) and deletes it. proper-lockfile is only
//        told to stop refreshing (unlock with an fs whose rmdir does nothing).
//      - takeover: a waiter that may take the lock over (see "Takeover policies" below) renames it
//        to a tombstone, checks it moved the very lock it
//        judged (same lockId; for stale, mtime still old), deletes it and competes for a fresh
//        mkdir. The old holder finds out through its own max-hold clock (assertHeld), through
//        verifyHeld() (reads owner.json: writers call it right before writing), or through
//        proper-lockfile's refresh (ECOMPROMISED, within staleMs / 2).
//      - exit: an 'exit' hook removes this process's records and directories synchronously.
//        (On a signal death proper-lockfile's own exit hook cannot rmdir the non-empty directory;
//        the lock then goes stale within staleMs and is taken over like a crashed holder's.)
//  * a directory without owner.json is a holder between mkdir and writing its record, or one that
//    crashed there; it is judged by mtime only (an empty stale one proper-lockfile removes itself).
//
// Takeover policies (LockOptions.takeover, recorded in owner.json; a waiter applies the stricter of
// its own and the holder's, like it applies the larger staleMs):
//  * 'stale' (session write locks, the default): taken over when the holder is known dead (at
//    once), stale (mtime older than staleMs, the larger of the waiter's and the holder's: the
//    holder crashed or froze) or over-held (acquiredAt + maxHoldMs passed). A frozen holder can resume after the takeover, so writers
//    fence: verifyHeld() right before and right after a write.
//  * 'dead' (the sessions.json registry lock): never taken from a LIVE holder on this host. A
//    stopped (SIGSTOP) or busy process is alive and may resume in the middle of its replace, after
//    its last check — a takeover would let it rename a stale copy over the new holder's acked
//    entries. So a waiter waits and, at its acquire timeout, fails with STORE_BUSY naming the
//    holder. Taken over at once when the holder is dead: no such pid, a zombie, or a pid reused by
//    another process (its /proc start time differs from the one recorded). On another host
//    liveness cannot be checked: there the lock is taken over when stale, as with 'stale' (a
//    shared state dir across hosts gets the write fencing only, not this guarantee).
//    The holder's own max-hold watchdog still gives the lock up, but never in the middle of a
//    fenced write (LockHandle.fence): the release waits until the write has finished.
//
// Lock timing deliberately uses the real wall clock (core's systemClock), never an injected `--now`
// clock: ages are compared with file mtimes and with other processes' records.

import { AsyncLocalStorage } from 'node:async_hooks';
import { randomBytes } from 'node:crypto';
import { promises as fsp, readFileSync, rmdirSync, unlinkSync } from 'node:fs';
import { hostname as osHostname } from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import nodeFs from 'node:fs';
import lockfile from 'proper-lockfile';
import { SwitchboardError, errnoOf, ioError, systemClock } from '../core/index.js';
import { isInMemory } from './memory-volume.js';

export const DEFAULT_ACQUIRE_TIMEOUT_MS = 60_000;
export const DEFAULT_STALE_MS = 10_000;
/** proper-lockfile's floor: it refreshes the mtime every staleMs / 2, and at least every second. */
export const MIN_STALE_MS = 2_000;
/** Largest delay setTimeout accepts; longer max holds would fire at once. */
export const MAX_TIMER_MS = 2 ** 31 - 1;
const MIN_MAX_HOLD_MS = 5 * 60_000;
const RUN_GRACE_MS = 2 * 60_000;
const OWNER_FILE = 'owner.json';
const LOCK_SUFFIX = '.lock';

export type BusyCode = 'SESSION_BUSY' | 'STORE_BUSY';
/** When a waiter may take a lock over from its holder; see "Takeover policies" above. */
export type TakeoverPolicy = 'stale' | 'dead';

/** What the caller tells us about itself, for `switchboard locks` and busy errors. */
export interface LockOwnerInfo {
  sessionKey?: string;
  runId?: string;
}

/** The record stored in `<target>.lock/owner.json`. */
export interface LockOwnerRecord {
  /** 2 since processStartTicks and takeover were added (a version 1 record has neither). */
  version: 1 | 2;
  /** Unique per acquisition: tells this holding apart from any earlier or later one. */
  lockId: string;
  pid: number;
  hostname: string;
  /** Epoch ms at which the holding process started (for people; see processStartTicks). */
  processStartTime: number;
  /**
   * Linux: the holder's start time as /proc/<pid>/stat field 22 (clock ticks since boot). Compared
   * exactly with the live pid's, it tells a reused pid apart; absent where /proc is not available.
   */
  processStartTicks?: number;
  /** The holder's takeover policy (absent in older records: 'stale'). */
  takeover?: TakeoverPolicy;
  acquiredAt: number;
  maxHoldMs: number;
  staleMs: number;
  sessionKey?: string;
  runId?: string;
}

export interface LockOptions {
  /** How long to wait for the lock before failing with SESSION_BUSY / STORE_BUSY (default 60 s). */
  acquireTimeoutMs?: number;
  /** A lock whose mtime is older than this is abandoned (holder crashed). Default 10 s, min 2 s. */
  staleMs?: number;
  /** How long one holder may keep the lock; see computeMaxHoldMs for the default. */
  maxHoldMs?: number;
  /** The run timeout the default max hold is derived from. */
  runTimeoutMs?: number;
  /** Error code used when the wait times out or the lock is lost (default SESSION_BUSY). */
  busyCode?: BusyCode;
  /** 'stale' (default) or 'dead': never take the lock from a live holder on this host. */
  takeover?: TakeoverPolicy;
  owner?: LockOwnerInfo;
}

export interface ResolvedLockSettings {
  acquireTimeoutMs: number;
  staleMs: number;
  maxHoldMs: number;
  busyCode: BusyCode;
  takeover: TakeoverPolicy;
}

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
}

/** One lock found on disk, as `switchboard locks` shows it. */
export interface LockInfo {
  lockPath: string;
  targetPath: string;
  owner: LockOwnerRecord | null;
  mtimeMs: number;
  /** Time since acquiredAt; null when the owner record is missing. */
  ageMs: number | null;
  /** mtime older than staleMs: the holder stopped refreshing (crashed or frozen). */
  stale: boolean;
  /** acquiredAt + maxHoldMs has passed: any waiter may take the lock over. */
  overHeld: boolean;
  /** Same host only: false when no process with that pid exists; null when unknown. */
  holderAlive: boolean | null;
  heldByThisProcess: boolean;
}

export interface ReleaseLockResult {
  lockPath: string;
  owner: LockOwnerRecord | null;
  /** True when the holder was live and in time, so only --force could release it. */
  forced: boolean;
  wasStale: boolean;
  wasOverHeld: boolean;
}

// ---------------------------------------------------------------------------------------------
// Settings

/** `min(2^31-1, max(5 min, runTimeoutMs + 2 min))`, or the configured value when one is given. */
export function computeMaxHoldMs(runTimeoutMs?: number, configured?: number): number {
  if (isPositiveNumber(configured)) return Math.min(MAX_TIMER_MS, Math.ceil(configured));
  const runMs = isPositiveNumber(runTimeoutMs) ? runTimeoutMs : 0;
  return Math.min(MAX_TIMER_MS, Math.max(MIN_MAX_HOLD_MS, Math.ceil(runMs + RUN_GRACE_MS)));
}

export function resolveLockSettings(options: LockOptions = {}): ResolvedLockSettings {
  const acquire = options.acquireTimeoutMs;
  return {
    acquireTimeoutMs:
      typeof acquire === 'number' && Number.isFinite(acquire) && acquire >= 0 ? acquire : DEFAULT_ACQUIRE_TIMEOUT_MS,
    staleMs: Math.max(MIN_STALE_MS, isPositiveNumber(options.staleMs) ? Math.ceil(options.staleMs) : DEFAULT_STALE_MS),
    maxHoldMs: computeMaxHoldMs(options.runTimeoutMs, options.maxHoldMs),
    busyCode: options.busyCode ?? 'SESSION_BUSY',
    takeover: options.takeover === 'dead' ? 'dead' : 'stale',
  };
}

function isPositiveNumber(value: unknown): value is number {
  return typeof value === 'number' && Number.isFinite(value) && value > 0;
}

export function lockPathFor(targetPath: string): string {
  return `${path.resolve(targetPath)}${LOCK_SUFFIX}`;
}

const now = (): number => systemClock.now();
const PROCESS_START_TIME = Math.round(performance.timeOrigin);
const HOSTNAME = osHostname();

interface ProcStat {
  state: string;
  startTicks: number;
}

/** /proc/<pid>/stat's state (field 3) and start time (field 22); null where there is no /proc. */
function readProcStat(pid: number | 'self'): ProcStat | null {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return null;
  }
  // field 2 (comm) is in parentheses and may itself hold spaces and parentheses
  const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
  const startTicks = Number(fields[19]);
  return fields[0] !== undefined && Number.isSafeInteger(startTicks) ? { state: fields[0], startTicks } : null;
}

const PROCESS_START_TICKS = readProcStat('self')?.startTicks;

// ---------------------------------------------------------------------------------------------
// In-process state: holders, FIFO turns, the async-context that makes nested acquires re-entrant

type HoldState = 'held' | 'released' | 'lost';

/** Locks this process holds, by lock path (at most one holding per path thanks to the turns). */
const heldLocks = new Map<string, HeldLock>();

/**
 * Locks held by the current async chain. A nested withLock made while holding sees its lock here
 * and re-enters; an unrelated concurrent caller (another chain) does not, and queues.
 */
const heldInContext = new AsyncLocalStorage<ReadonlyMap<string, HeldLock>>();

interface TurnQueue {
  active: boolean;
  waiters: Array<() => void>;
}

/** Per lock path: one in-process caller at a time may compete for the file lock, in arrival order. */
const turnQueues = new Map<string, TurnQueue>();

/** Handed to proper-lockfile's unlock() so it stops refreshing without touching the directory. */
const KEEP_DIRECTORY_FS = { rmdir: (_dir: string, done: (err: null) => void): void => done(null) };
/** proper-lockfile creates the lock directory with plain mkdir; ours are private like every store folder. */
const PRIVATE_MKDIR_FS = {
  ...nodeFs,
  mkdir: (dir: string, done: (err: NodeJS.ErrnoException | null) => void): void => nodeFs.mkdir(dir, { mode: 0o700 }, (err) => done(err)),
};

class HeldLock {
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
    };
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
      onDisk = parseOwnerRecord(await fsp.readFile(path.join(this.lockPath, OWNER_FILE), 'utf8'));
    } catch (err) {
      const code = errnoOf(err);
      // a failing disk is not proof that someone else holds the lock: report it as such
      if (code !== 'ENOENT' && code !== 'ENOTDIR') throw ioError(`could not verify lock ${this.lockPath}`, err);
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
      const ownerFile = path.join(held.lockPath, OWNER_FILE);
      const record = parseOwnerRecord(readFileSync(ownerFile, 'utf8'));
      if (record?.lockId !== held.owner.lockId) continue;
      unlinkSync(ownerFile);
      rmdirSync(held.lockPath);
    } catch {
      // best effort: a leftover lock goes stale within staleMs
    }
  }
}

function once(fn: () => void): () => void {
  let done = false;
  return () => {
    if (done) return;
    done = true;
    fn();
  };
}

/** Waits for this caller's in-process turn (FIFO); returns the function that passes it on. */
async function takeTurn(lockPath: string, deadline: number, onTimeout: () => Promise<SwitchboardError>): Promise<() => void> {
  let queue = turnQueues.get(lockPath);
  if (queue === undefined) {
    queue = { active: false, waiters: [] };
    turnQueues.set(lockPath, queue);
  }
  const turns = queue;
  const passTurn = once(() => {
    const next = turns.waiters.shift();
    if (next !== undefined) {
      next();
      return;
    }
    turns.active = false;
    if (turnQueues.get(lockPath) === turns) turnQueues.delete(lockPath);
  });
  if (!turns.active) {
    turns.active = true;
    return passTurn;
  }
  await new Promise<void>((resolve, reject) => {
    const grant = (): void => {
      clearTimeout(timer);
      resolve();
    };
    const timer = setTimeout(() => {
      const index = turns.waiters.indexOf(grant);
      if (index >= 0) turns.waiters.splice(index, 1);
      onTimeout().then(reject, reject);
    }, Math.min(MAX_TIMER_MS, Math.max(0, deadline - now())));
    turns.waiters.push(grant);
  });
  return passTurn;
}

/** For `switchboard locks` and tests: is the lock held in this process, and how many wait for it. */
export function lockQueueState(targetPath: string): { heldInProcess: boolean; waiting: number } {
  const lockPath = lockPathFor(targetPath);
  return {
    heldInProcess: heldLocks.has(lockPath),
    waiting: turnQueues.get(lockPath)?.waiters.length ?? 0,
  };
}

/**
 * Whether any lock (live, stale or half-made) exists on targetPath: one lstat, for a store-lock
 * holder that appends to idle transcripts without a lock cycle of their own. Anything but a
 * clean "no such file" counts as present, so the caller falls back to withLock.
 */
export async function lockPresent(targetPath: string): Promise<boolean> {
  const lockPath = lockPathFor(targetPath);
  if (heldLocks.has(lockPath) || (turnQueues.get(lockPath)?.waiters.length ?? 0) > 0) return true;
  try {
    await fsp.lstat(lockPath);
    return true;
  } catch (err) {
    return errnoOf(err) !== 'ENOENT';
  }
}

/** The handle of the lock on targetPath if the current async chain holds it (else undefined). */
export function heldLockFor(targetPath: string): LockHandle | undefined {
  const held = heldInContext.getStore()?.get(lockPathFor(targetPath));
  return held === undefined || held.state === 'released' ? undefined : held.nestedHandle;
}

// ---------------------------------------------------------------------------------------------
// withLock

/**
 * Runs fn while holding the lock on targetPath (`<targetPath>.lock`). Re-entrant for nested calls
 * made while holding; other in-process callers queue FIFO; other processes are retried with jitter;
 * a stale or over-held lock is taken over. Times out with options.busyCode (exit 75).
 */
export async function withLock<T>(targetPath: string, options: LockOptions, fn: (handle: LockHandle) => Promise<T>): Promise<T> {
  const target = path.resolve(targetPath);
  const lockPath = `${target}${LOCK_SUFFIX}`;
  const enclosing = heldInContext.getStore()?.get(lockPath);
  if (enclosing !== undefined && enclosing.state !== 'released') {
    enclosing.assertHeld(); // a run whose lock is gone must not carry on under a fresh one
    return fn(enclosing.nestedHandle);
  }
  const settings = resolveLockSettings(options);
  const held = await acquire(target, lockPath, settings, options.owner ?? {});
  const context = new Map(heldInContext.getStore() ?? []);
  context.set(lockPath, held);
  try {
    return await heldInContext.run(context, () => fn(held.handle));
  } finally {
    await held.release();
  }
}

async function acquire(target: string, lockPath: string, settings: ResolvedLockSettings, ownerInfo: LockOwnerInfo): Promise<HeldLock> {
  const startedAt = now();
  const deadline = startedAt + settings.acquireTimeoutMs;
  const passTurn = await takeTurn(lockPath, deadline, async () => {
    const holder = heldLocks.get(lockPath);
    const seen = holder !== undefined ? describeHolding(lockPath, holder.owner, now(), now()) : await inspectLock(lockPath, settings.staleMs);
    return busyError(target, lockPath, settings, seen, now() - startedAt);
  });
  if (isInMemory(target)) return holdInMemory(target, lockPath, settings, ownerInfo, passTurn);
  try {
    return await acquireFileLock(target, lockPath, settings, ownerInfo, { startedAt, deadline, passTurn });
  } catch (err) {
    passTurn();
    throw err;
  }
}

interface AcquireRun {
  startedAt: number;
  deadline: number;
  passTurn: () => void;
}

async function acquireFileLock(
  target: string,
  lockPath: string,
  settings: ResolvedLockSettings,
  ownerInfo: LockOwnerInfo,
  run: AcquireRun,
): Promise<HeldLock> {
  let lastSeen: LockInfo | null = null;
  let createdParent = false;
  for (let attempt = 0; ; attempt++) {
    try {
      return await lockOnce(target, lockPath, settings, ownerInfo, run.passTurn);
    } catch (err) {
      const code = errnoOf(err);
      if (code === 'ELOCKED' || code === 'ENOTEMPTY' || code === 'EEXIST') {
        // ENOTEMPTY: proper-lockfile judged the lock stale but could not rmdir it (owner record)
        const seen = await inspectLock(lockPath, settings.staleMs);
        if (seen === null) continue; // released meanwhile: try again at once
        if (mayTakeOver(seen, settings.takeover) && (await clearLock(lockPath, seen, settings.staleMs))) continue;
        lastSeen = seen;
      } else if (code === 'ENOENT' && !createdParent) {
        createdParent = true;
        await fsp.mkdir(path.dirname(lockPath), { recursive: true, mode: 0o700 }).catch(() => undefined);
        continue;
      } else {
        throw ioError(`could not create lock ${lockPath}`, err);
      }
    }
    const remaining = run.deadline - now();
    if (remaining <= 0) throw busyError(target, lockPath, settings, lastSeen, now() - run.startedAt);
    await sleep(Math.min(remaining, retryDelayMs(attempt)));
  }
}

/** Exponential backoff with jitter so that processes polling the same lock spread out. */
function retryDelayMs(attempt: number): number {
  const ceiling = Math.min(100, 4 * 2 ** Math.min(attempt, 5));
  return ceiling / 2 + Math.random() * (ceiling / 2);
}

function ownerRecordFor(settings: ResolvedLockSettings, ownerInfo: LockOwnerInfo): LockOwnerRecord {
  return {
    version: 2,
    lockId: `${process.pid}-${randomBytes(8).toString('hex')}`,
    pid: process.pid,
    hostname: HOSTNAME,
    processStartTime: PROCESS_START_TIME,
    ...(PROCESS_START_TICKS !== undefined ? { processStartTicks: PROCESS_START_TICKS } : {}),
    ...(settings.takeover === 'dead' ? { takeover: 'dead' as const } : {}),
    acquiredAt: now(),
    maxHoldMs: settings.maxHoldMs,
    staleMs: settings.staleMs,
    ...(ownerInfo.sessionKey !== undefined ? { sessionKey: ownerInfo.sessionKey } : {}),
    ...(ownerInfo.runId !== undefined ? { runId: ownerInfo.runId } : {}),
  };
}

/** Only this process can reach a memory volume, so its turn is the lock; max hold still applies. */
function holdInMemory(target: string, lockPath: string, settings: ResolvedLockSettings, ownerInfo: LockOwnerInfo, passTurn: () => void): HeldLock {
  const held = new HeldLock(target, lockPath, ownerRecordFor(settings, ownerInfo), settings.busyCode, passTurn, true);
  held.start();
  return held;
}

async function lockOnce(
  target: string,
  lockPath: string,
  settings: ResolvedLockSettings,
  ownerInfo: LockOwnerInfo,
  passTurn: () => void,
): Promise<HeldLock> {
  let held: HeldLock | undefined;
  let compromisedEarly: { cause: unknown } | undefined;
  await lockfile.lock(target, {
    lockfilePath: lockPath,
    realpath: false,
    stale: settings.staleMs,
    retries: 0, // we retry ourselves: FIFO turns, takeover checks, deadline, busy details
    fs: PRIVATE_MKDIR_FS,
    onCompromised: (err) => {
      if (held !== undefined) held.onCompromised(err);
      else compromisedEarly = { cause: err };
    },
  });
  const owner = ownerRecordFor(settings, ownerInfo);
  try {
    // Creating owner.json changes the directory's mtime, which proper-lockfile checks against
    // the one it recorded at its first refresh (staleMs / 2): put it back, or every lock held
    // longer than that would be reported compromised.
    const recorded = await fsp.stat(lockPath);
    await writeOwnerRecord(lockPath, owner);
    await fsp.utimes(lockPath, recorded.atime, recorded.mtime);
  } catch (err) {
    await lockfile.unlock(target, { lockfilePath: lockPath, realpath: false, fs: KEEP_DIRECTORY_FS }).catch(() => undefined);
    // EEXIST: while we were stopped between mkdir and the record, our directory was judged
    // abandoned and someone else's lock (with its record) took the path: not ours to remove.
    if (errnoOf(err) === 'EEXIST') throw Object.assign(new Error(`lock ${lockPath} was taken while being created`), { code: 'ELOCKED' });
    await fsp.rm(lockPath, { recursive: true, force: true }).catch(() => undefined);
    throw ioError(`could not write the owner record of lock ${lockPath}`, err);
  }
  held = new HeldLock(target, lockPath, owner, settings.busyCode, passTurn);
  held.start();
  if (compromisedEarly !== undefined) held.onCompromised(compromisedEarly.cause);
  return held;
}

// ---------------------------------------------------------------------------------------------
// Owner records, inspection, removal

async function writeOwnerRecord(lockPath: string, owner: LockOwnerRecord): Promise<void> {
  // Written in place (exclusive create in the directory we just made): a reader that catches it
  // half-written gets an unparseable record, which is judged exactly like no record yet (by the
  // directory's mtime), so a temp file + rename would buy nothing but one more directory operation.
  await fsp.writeFile(path.join(lockPath, OWNER_FILE), `${JSON.stringify(owner)}\n`, { mode: 0o600, flag: 'wx' });
}

/** Deletes a tombstone: owner record + directory (two operations), or recursively if it holds more. */
async function removeTombstone(tomb: string): Promise<void> {
  try {
    await fsp.unlink(path.join(tomb, OWNER_FILE)).catch((err: unknown) => {
      if (errnoOf(err) !== 'ENOENT') throw err;
    });
    await fsp.rmdir(tomb);
  } catch {
    await fsp.rm(tomb, { recursive: true, force: true });
  }
}

function parseOwnerRecord(text: string): LockOwnerRecord | null {
  try {
    const value: unknown = JSON.parse(text);
    if (typeof value !== 'object' || value === null) return null;
    const record = value as Partial<LockOwnerRecord>;
    const numbers = [record.pid, record.acquiredAt, record.maxHoldMs];
    if (typeof record.lockId !== 'string' || !numbers.every((n) => typeof n === 'number' && Number.isFinite(n))) return null;
    return record as LockOwnerRecord;
  } catch {
    return null;
  }
}

/** The owner record of a lock directory, or null when there is none (yet) or it is unreadable. */
export async function readLockOwner(lockPath: string): Promise<LockOwnerRecord | null> {
  try {
    return parseOwnerRecord(await fsp.readFile(path.join(lockPath, OWNER_FILE), 'utf8'));
  } catch {
    return null;
  }
}

function describeHolding(lockPath: string, owner: LockOwnerRecord | null, mtimeMs: number, at: number, staleMs?: number): LockInfo {
  // The larger of the observer's and the holder's threshold: a holder with a long staleMs only
  // refreshes every staleMs / 2, and must not look dead to a waiter configured with a short one
  // (proper-lockfile alone cannot tell; the owner record can).
  const staleAfter = Math.max(staleMs ?? 0, isPositiveNumber(owner?.staleMs) ? owner.staleMs : 0) || DEFAULT_STALE_MS;
  return {
    lockPath,
    targetPath: lockPath.endsWith(LOCK_SUFFIX) ? lockPath.slice(0, -LOCK_SUFFIX.length) : lockPath,
    owner,
    mtimeMs,
    ageMs: owner === null ? null : Math.max(0, at - owner.acquiredAt),
    stale: mtimeMs < at - staleAfter,
    overHeld: owner !== null && at > owner.acquiredAt + owner.maxHoldMs,
    holderAlive: owner === null ? null : isHolderAlive(owner),
    heldByThisProcess: owner !== null && heldLocks.get(lockPath)?.owner.lockId === owner.lockId,
  };
}

/** Reads one lock directory; null when it does not exist. staleMs: the observer's threshold. */
async function inspectLock(lockPath: string, staleMs?: number): Promise<LockInfo | null> {
  let mtimeMs: number;
  try {
    mtimeMs = (await fsp.stat(lockPath)).mtimeMs;
  } catch (err) {
    if (errnoOf(err) === 'ENOENT') return null;
    throw ioError(`could not inspect lock ${lockPath}`, err);
  }
  return describeHolding(lockPath, await readLockOwner(lockPath), mtimeMs, now(), staleMs);
}

function isHolderAlive(owner: LockOwnerRecord): boolean | null {
  if (owner.hostname !== HOSTNAME) return null;
  if (owner.pid === process.pid) return owner.processStartTime === PROCESS_START_TIME ? true : null;
  try {
    process.kill(owner.pid, 0);
  } catch (err) {
    if (errnoOf(err) !== 'EPERM') return false;
  }
  // The pid exists. It is the holder unless /proc proves otherwise: a zombie has exited (it can
  // write nothing more), a different start time is another process that reused the pid. Without
  // /proc or without a recorded start time, "alive" is the conservative reading.
  const proc = readProcStat(owner.pid);
  if (proc === null) return true;
  if (proc.state === 'Z' || proc.state === 'X') return false;
  if (typeof owner.processStartTicks === 'number' && owner.processStartTicks !== proc.startTicks) return false;
  return true;
}

/**
 * May a waiter with `policy` take over the lock it found? 'stale': stale or over-held. 'dead'
 * (when either side asks for it): only a holder known to be dead; a holder on another host,
 * whose liveness cannot be checked, when stale; a lock without a record (holder between mkdir
 * and record) by its mtime.
 */
export function mayTakeOver(seen: LockInfo, policy: TakeoverPolicy): boolean {
  const strict = policy === 'dead' || seen.owner?.takeover === 'dead';
  // A holder known to be dead (no such pid, a zombie, a reused pid) writes nothing more: its
  // lock is taken over at once, so a crash does not stall the session for staleMs.
  if (!strict) return seen.stale || seen.overHeld || seen.holderAlive === false;
  if (seen.owner === null) return seen.stale;
  if (seen.holderAlive === false) return true;
  if (seen.holderAlive === true) return false;
  return seen.stale;
}

function tombstonePath(lockPath: string): string {
  // no `.lock` suffix, so listLocks never reports a tombstone; same folder, so rename is atomic
  return `${lockPath}-gone-${process.pid}-${randomBytes(6).toString('hex')}`;
}

/** Holder side: removes the lock directory only if it still carries our lockId. */
async function removeLockIfOwned(lockPath: string, lockId: string): Promise<void> {
  if ((await readLockOwner(lockPath))?.lockId !== lockId) return; // taken over: not ours to touch
  const tomb = tombstonePath(lockPath);
  try {
    await fsp.rename(lockPath, tomb);
  } catch (err) {
    if (errnoOf(err) === 'ENOENT') return;
    throw err;
  }
  if ((await readLockOwner(tomb))?.lockId !== lockId) {
    await putBack(tomb, lockPath); // it changed hands between the read and the rename
    return;
  }
  await removeTombstone(tomb);
}

/**
 * Waiter / operator side: removes the lock judged in `seen` (stale, over-held or forced) if the
 * directory we move away is still that lock. Returns whether the lock path is now free to try.
 */
async function clearLock(lockPath: string, seen: LockInfo, staleMs: number | undefined): Promise<boolean> {
  const tomb = tombstonePath(lockPath);
  try {
    await fsp.rename(lockPath, tomb);
  } catch (err) {
    const code = errnoOf(err);
    if (code === 'ENOENT') return true; // someone else cleared it
    throw ioError(`could not clear lock ${lockPath}`, err);
  }
  const moved = await inspectLock(tomb, staleMs);
  const sameHolding = moved !== null && (moved.owner?.lockId ?? null) === (seen.owner?.lockId ?? null);
  const stillJudgedTheSame = seen.stale && !seen.overHeld ? moved?.stale === true : true;
  if (!sameHolding || !stillJudgedTheSame) {
    await putBack(tomb, lockPath);
    return false;
  }
  await removeTombstone(tomb);
  return true;
}

/** Undo a rename that moved a lock we did not mean to. If a new lock already took the path, the
 *  moved holder is the loser: its refresh/verify finds the lock gone and it stops writing. */
async function putBack(tomb: string, lockPath: string): Promise<void> {
  try {
    await fsp.rename(tomb, lockPath);
  } catch {
    await fsp.rm(tomb, { recursive: true, force: true }).catch(() => undefined);
  }
}

// ---------------------------------------------------------------------------------------------
// `switchboard locks`

/** Every `*.lock` directory under rootDir (recursively), with its owner record and judgement. */
export async function listLocks(rootDir: string, options: { staleMs?: number } = {}): Promise<LockInfo[]> {
  const lockDirs: string[] = [];
  await collectLockDirs(path.resolve(rootDir), lockDirs);
  const found = await Promise.all(lockDirs.map((lockPath) => inspectLock(lockPath, options.staleMs)));
  return found.filter((info): info is LockInfo => info !== null).sort((a, b) => a.lockPath.localeCompare(b.lockPath));
}

async function collectLockDirs(dir: string, out: string[]): Promise<void> {
  let entries;
  try {
    entries = await fsp.readdir(dir, { withFileTypes: true });
  } catch (err) {
    const code = errnoOf(err);
    if (code === 'ENOENT' || code === 'ENOTDIR') return;
    throw ioError(`could not list ${dir}`, err);
  }
  for (const entry of entries) {
    if (!entry.isDirectory()) continue; // symlinks are not followed
    const full = path.join(dir, entry.name);
    if (entry.name.endsWith(LOCK_SUFFIX)) out.push(full);
    else await collectLockDirs(full, out);
  }
}

/**
 * Removes a lock (given as the lock directory or its target). A live, in-time holder is refused
 * with SESSION_BUSY unless force; stale, over-held or dead holders are released without it.
 * dryRun: the same checks and answer, nothing removed.
 */
export async function releaseLock(lockOrTargetPath: string, options: { force?: boolean; staleMs?: number; dryRun?: boolean } = {}): Promise<ReleaseLockResult> {
  const resolved = path.resolve(lockOrTargetPath);
  const lockPath = resolved.endsWith(LOCK_SUFFIX) ? resolved : `${resolved}${LOCK_SUFFIX}`;
  const info = await inspectLock(lockPath, options.staleMs);
  if (info === null) throw new SwitchboardError('NOT_FOUND', `no lock at ${lockPath}`, { details: { lockPath } });
  const live = !info.stale && !info.overHeld && info.holderAlive !== false;
  if (live && options.force !== true) {
    throw new SwitchboardError('SESSION_BUSY', `lock ${lockPath} is ${describeHolder(info)}, alive and within its max hold`, {
      hint: 'wait for it, or pass --force to release it anyway (the holder then stops writing)',
      details: { lockPath, owner: info.owner, ageMs: info.ageMs },
    });
  }
  if (options.dryRun === true) return { lockPath, owner: info.owner, forced: live, wasStale: info.stale, wasOverHeld: info.overHeld };
  const ownHolder = heldLocks.get(lockPath);
  if (ownHolder !== undefined && ownHolder.owner.lockId === info.owner?.lockId) ownHolder.loseToOperator();
  if (!(await clearLock(lockPath, info, options.staleMs))) {
    throw new SwitchboardError('SESSION_BUSY', `lock ${lockPath} changed hands while being released`, {
      hint: 'run `switchboard locks` again and retry',
      details: { lockPath },
    });
  }
  return { lockPath, owner: info.owner, forced: live, wasStale: info.stale, wasOverHeld: info.overHeld };
}

// ---------------------------------------------------------------------------------------------
// Errors

function describeHolder(info: LockInfo | null): string {
  const owner = info?.owner;
  if (owner == null) return 'held by an unknown process (no owner record)';
  const run = owner.runId !== undefined ? `, run ${owner.runId}` : '';
  const session = owner.sessionKey !== undefined ? `, session ${owner.sessionKey}` : '';
  return `held by pid ${owner.pid} on ${owner.hostname}${run}${session} for ${formatMs(info?.ageMs ?? 0)}`;
}

function busyError(target: string, lockPath: string, settings: ResolvedLockSettings, seen: LockInfo | null, waitedMs: number): SwitchboardError {
  const what = settings.busyCode === 'STORE_BUSY' ? 'store lock' : 'session write lock';
  return new SwitchboardError(
    settings.busyCode,
    `${what} on ${target} is busy: ${describeHolder(seen)}; gave up after ${formatMs(waitedMs)}`,
    {
      hint: 'retry later; `switchboard locks` shows holders, and a holder past its max hold is taken over automatically',
      details: { lockPath, targetPath: target, owner: seen?.owner ?? null, ageMs: seen?.ageMs ?? null, waitedMs },
    },
  );
}



function formatMs(ms: number): string {
  if (ms < 1_000) return `${Math.round(ms)} ms`;
  if (ms < 120_000) return `${(ms / 1_000).toFixed(1)} s`;
  return `${Math.round(ms / 60_000)} min`;
}
