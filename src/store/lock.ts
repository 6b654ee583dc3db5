// The one lock helper: every lock in switchboard (the sessions.json store lock, the session write
// locks) is taken through withLock(). This module acquires: settings, the in-process FIFO turns,
// the async context that makes nested acquires re-entrant, and the acquire loop (retries with
// jitter, takeover, busy errors). A holding itself (max-hold watchdog, write fencing, release,
// the exit hook) is lock-held.ts. The on-disk layout, why the owner record lives inside the lock
// directory, the verified removal paths and the takeover policies are explained in lock-owner.ts,
// next to the code that implements them; `switchboard locks` is lock-admin.ts.

import { AsyncLocalStorage } from 'node:async_hooks';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { lstatSync, mkdirSync, realpathSync, rmdirSync, rmSync, statSync, utimesSync } from 'node:fs';
import { makeDirectories } from './paths.js';
import lockfile from 'proper-lockfile';
import { MAX_TIMER_MS, SwitchboardError, errnoOf, ioError } from '../core/index.js';
import { HeldLock, KEEP_DIRECTORY_FS, type BusyCode, type LockHandle } from './lock-held.js';
import { describeHolder, formatMs } from './lock-describe.js';
import { isInMemory } from './memory-volume.js';
import { describeFileKind, lstatKindSync, type FileKind } from './regular-file.js';
import {
  DEFAULT_STALE_MS,
  LOCK_SUFFIX,
  clearLock,
  describeHolding,
  heldLocks,
  inspectLock,
  isPositiveNumber,
  mayTakeOver,
  now,
  ownerRecordFor,
  reserveChildRecord,
  writeOwnerRecord,
  type LockInfo,
  type LockOwnerInfo,
  type TakeoverPolicy,
} from './lock-owner.js';

export type { BusyCode, LockHandle } from './lock-held.js';

export const DEFAULT_ACQUIRE_TIMEOUT_MS = 60_000;
/** proper-lockfile's floor: it refreshes the mtime every staleMs / 2, and at least every second. */
export const MIN_STALE_MS = 2_000;
const MIN_MAX_HOLD_MS = 5 * 60_000;
const RUN_GRACE_MS = 2 * 60_000;

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
  /**
   * The holding starts a runner process and names it (LockHandle.noteChild): its child.json is
   * made empty with owner.json, so that naming the runner later changes no folder entry (see lockOnce).
   */
  startsRunner?: boolean;
}

export interface ResolvedLockSettings {
  acquireTimeoutMs: number;
  staleMs: number;
  maxHoldMs: number;
  busyCode: BusyCode;
  takeover: TakeoverPolicy;
  startsRunner: boolean;
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
    startsRunner: options.startsRunner === true,
  };
}

export function lockPathFor(targetPath: string): string {
  return `${path.resolve(targetPath)}${LOCK_SUFFIX}`;
}

// ---------------------------------------------------------------------------------------------
// In-process state: FIFO turns, the async-context that makes nested acquires re-entrant

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

type Done = (err: NodeJS.ErrnoException | null, value?: unknown) => void;

/** Runs a synchronous fs call and answers proper-lockfile's callback on the next tick. */
function callback<A extends unknown[]>(call: (...args: A) => unknown): (...args: [...A, Done]) => void {
  return (...args) => {
    const done = args.pop() as Done;
    let value: unknown;
    try {
      value = call(...(args as unknown as A));
    } catch (err) {
      process.nextTick(done, err as NodeJS.ErrnoException);
      return;
    }
    process.nextTick(done, null, value);
  };
}

/**
 * The fs proper-lockfile works through: synchronous calls behind its callback API (see
 * nodeStoreFileSystem in store-fs.ts for why), and lock directories made private like every
 * store folder (it would use a plain mkdir).
 */
const LOCK_FS = {
  mkdir: callback((dir: string) => mkdirSync(dir, { mode: 0o700 })),
  stat: callback((file: string) => statSync(file)),
  utimes: callback((file: string, atime: Date | number, mtime: Date | number) => utimesSync(file, atime, mtime)),
  rmdir: callback((dir: string) => rmdirSync(dir)),
  rmdirSync: (dir: string) => rmdirSync(dir),
  realpath: callback((file: string) => realpathSync(file)),
};

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
  // Asked once per transcript of every batch, and the answer is nearly always "no": without
  // throwIfNoEntry, each "no" would build (and throw) an error with its stack trace.
  try {
    return lstatSync(lockPath, { throwIfNoEntry: false }) !== undefined;
  } catch {
    return true; // cannot tell (EACCES, ENOTDIR…): taken as held, so the caller tries the lock
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
      // A lock of ours is a folder; a regular file in its place is another program's lock
      // (OpenClaw's: lock-owner.ts, "Locks of another program"), waited for and reclaimed by that
      // program's rule. A link, FIFO or socket there is no holder to wait for or to take over, and
      // no error to retry.
      const kind = lstatKindSync(lockPath);
      if (kind !== null && kind !== 'directory' && kind !== 'file') throw notALockFolder(lockPath, kind);
      if (kind === 'file' || code === 'ELOCKED' || code === 'ENOTEMPTY' || code === 'EEXIST') {
        // ENOTEMPTY: proper-lockfile judged the lock stale but could not rmdir it (owner record);
        // ENOTDIR: it judged a lock file stale by its mtime, and rmdir cannot remove a file
        const seen = await inspectLock(lockPath, settings.staleMs);
        if (seen === null) continue; // released meanwhile: try again at once
        if (mayTakeOver(seen, settings.takeover) && (await clearLock(lockPath, seen, settings.staleMs))) continue;
        lastSeen = seen;
      } else if (code === 'ENOENT' && !createdParent) {
        createdParent = true;
        try {
          makeDirectories(path.dirname(lockPath), 0o700);
        } catch {
          // the next attempt reports what is wrong
        }
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
    fs: LOCK_FS,
    onCompromised: (err) => {
      if (held !== undefined) held.onCompromised(err);
      else compromisedEarly = { cause: err };
    },
  });
  const owner = ownerRecordFor(settings, ownerInfo);
  try {
    // Creating owner.json changes the directory's mtime, which proper-lockfile checks against
    // the one it recorded at its first refresh (staleMs / 2): put it back, or every lock held
    // longer than that would be reported compromised. Any later change of the folder's entries
    // would do the same, so the child record a run fills in once its runner has started is made
    // here too (the runner is named in place, which leaves the folder alone).
    const recorded = statSync(lockPath);
    await writeOwnerRecord(lockPath, owner);
    if (settings.startsRunner) reserveChildRecord(lockPath);
    utimesSync(lockPath, recorded.atime, recorded.mtime);
  } catch (err) {
    await lockfile.unlock(target, { lockfilePath: lockPath, realpath: false, fs: KEEP_DIRECTORY_FS }).catch(() => undefined);
    // EEXIST: while we were stopped between mkdir and the record, our directory was judged
    // abandoned and someone else's lock (with its record) took the path: not ours to remove.
    if (errnoOf(err) === 'EEXIST') throw Object.assign(new Error(`lock ${lockPath} was taken while being created`), { code: 'ELOCKED' });
    try {
      rmSync(lockPath, { recursive: true, force: true });
    } catch {
      // what is left is judged like any abandoned lock
    }
    throw ioError(`could not write the owner record of lock ${lockPath}`, err);
  }
  held = new HeldLock(target, lockPath, owner, settings.busyCode, passTurn);
  held.start();
  if (compromisedEarly !== undefined) held.onCompromised(compromisedEarly.cause);
  return held;
}

// ---------------------------------------------------------------------------------------------
// Errors

function notALockFolder(lockPath: string, kind: FileKind): SwitchboardError {
  return new SwitchboardError('STORE_CORRUPT', `${lockPath} is ${describeFileKind(kind)}, not a lock (a folder, or another program's lock file); switchboard never follows links or waits on pipes in its store`, {
    hint: 'run `switchboard doctor` to see it; `switchboard doctor --repair` removes it (never what a link points at)',
    details: { path: lockPath, fileKind: kind },
  });
}

/**
 * A busy error as its caller finally gives up after trying again and again without waiting (a
 * store-lock holder never waits for a session lock): the last try waited 0 ms, the caller
 * `waitedMs` in all, which is what the message and details say then.
 */
export function busyAfterWaiting(err: SwitchboardError, waitedMs: number): SwitchboardError {
  if (err.code !== 'SESSION_BUSY' && err.code !== 'STORE_BUSY') return err;
  return new SwitchboardError(err.code, err.message.replace(/; gave up after [^;]*$/, `; gave up after ${formatMs(waitedMs)}`), {
    hint: err.hint,
    details: { ...err.details, waitedMs },
  });
}

function busyError(target: string, lockPath: string, settings: ResolvedLockSettings, seen: LockInfo | null, waitedMs: number): SwitchboardError {
  const what = settings.busyCode === 'STORE_BUSY' ? 'store lock' : 'session write lock';
  const foreign = seen !== null && seen.kind !== 'switchboard';
  const holder = describeHolder(seen);
  return new SwitchboardError(
    settings.busyCode,
    `${what} on ${target} is busy: ${holder}; gave up after ${formatMs(waitedMs)}`,
    {
      hint: foreign
        ? 'another program (OpenClaw) is writing this file: retry once it is done; `switchboard locks` shows the holder, and its lock is reclaimed once that process is gone'
        : 'retry later; `switchboard locks` shows holders, and a holder past its max hold is taken over automatically',
      details: {
        lockPath,
        targetPath: target,
        kind: seen?.kind ?? null,
        owner: seen?.owner ?? null,
        ...(foreign ? { fileLock: seen.fileLock } : {}),
        ageMs: seen?.ageMs ?? null,
        // A live holder that stopped refreshing (frozen, stalled): waited for, not taken over.
        unresponsive: seen !== null && seen.stale && seen.holderAlive === true,
        holder,
        waitedMs,
      },
    },
  );
}
