// Lock owner records and the judgement of a lock found on disk: writing, reading and parsing
// `<target>.lock/owner.json`, the holder's liveness, mayTakeOver(), and the verified removal of a
// lock through a tombstone. lock.ts (acquire, withLock), lock-held.ts (a holding),
// lock-describe.ts (a holder in words) and lock-admin.ts (`switchboard locks`) build on this
// module; it imports none of them.
//
// On-disk layout of one lock:
//   <target>.lock/             proper-lockfile's mkdir lock; its mtime is refreshed while held
//   <target>.lock/owner.json   the owner record, written by the holder right after the mkdir
//   <target>.lock/child.json   the runner process the holding started, if it started one (a
//                              session lock held for a run): whoever takes the lock over kills it,
//                              so a run whose switchboard died does not go on beside the next one.
//                              Made empty with owner.json and filled in place once the runner is
//                              up: a file created in the folder later would change its mtime,
//                              which proper-lockfile's refresh takes for a takeover
//
// Why the owner record lives INSIDE the lock directory, although proper-lockfile removes locks
// with rmdir (which fails with ENOTEMPTY on a non-empty directory):
//  * the record's lifetime is exactly the lock's. A sibling file would survive a crash and make a
//    reader pair a fresh lock with the previous holder's record; inside, one atomic rename moves
//    the lock and its record together.
//  * a non-empty lock cannot be rmdir-ed by accident. proper-lockfile's own "stale → rmdir → mkdir"
//    path is racy (a waiter can remove a lock another waiter has just taken); once the record is
//    written that rmdir fails, so only our verified paths ever remove a lock:
//      - release (removeLockIfOwned below): the holder renames its directory to a unique tombstone,
//        checks the tombstone carries its own lockId (otherwise puts it back) and deletes it.
//        proper-lockfile is only told to stop refreshing (unlock with an fs whose rmdir does nothing).
//      - takeover (clearLock below): a waiter that may take the lock over (see "Takeover policies"
//        below) renames it to a tombstone, checks it moved the very lock it
//        judged (same lockId; for stale, mtime still old), deletes it and competes for a fresh
//        mkdir. The old holder finds out through its own max-hold clock (assertHeld), through
//        verifyHeld() (reads owner.json: writers call it right before writing), or through
//        proper-lockfile's refresh (ECOMPROMISED, within staleMs / 2).
//      - exit (lock-held.ts): an 'exit' hook removes this process's records and directories
//        synchronously.
//        (On a signal death proper-lockfile's own exit hook cannot rmdir the non-empty directory;
//        the lock then goes stale within staleMs and is taken over like a crashed holder's.)
//  * a directory without owner.json is a holder between mkdir and writing its record, or one that
//    crashed there; it is judged by mtime only (an empty stale one proper-lockfile removes itself).
//
// Takeover policies (LockOptions.takeover, recorded in owner.json; a waiter applies the stricter of
// its own and the holder's, like it applies the larger staleMs):
//  * 'stale' (session write locks and lane slots, the default): taken over when the holder is
//    known dead (at once) or over-held (acquiredAt + maxHoldMs passed), and when stale (mtime older
//    than staleMs, the larger of the waiter's and the holder's: the holder crashed) unless the
//    holder is known ALIVE on this host (same pid and /proc start time). A stopped (SIGSTOP) or
//    stalled process is alive and resumes where it stopped: taken over at staleness, its run was
//    ended behind its back while it may have been nearly done, and both it and the taker reported
//    it. So a live holder is waited for (busy errors name it) until its max hold, which bounds the
//    wait. A holder taken over past its max hold can resume after the takeover, so writers fence:
//    verifyHeld() right before and right after a write.
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
// Locks of another program: OpenClaw (2026.7.1; its session-write-lock on fs-safe's sidecar lock)
// guards the same transcripts with a regular FILE `<target>.lock`, created with open(…, "wx") and
// holding `{pid, createdAt, maxHoldMs, starttime}` (starttime: /proc/<pid>/stat field 22, like
// processStartTicks). Neither program can take the other's shape (mkdir fails on the file, open
// "wx" fails on the folder), so such a file is a lock HELD by another program (kind 'openclaw';
// 'file' when it holds no record, e.g. between OpenClaw's create and its write): writers wait for
// it and time out with their busy code. It is reclaimed (renamed to a tombstone, checked to be the
// very file judged — same inode, same bytes — and deleted, as OpenClaw's remove-if-unchanged does)
// by OpenClaw's own rule for a waiter, never from a live holder:
//  * its pid is dead (no such process, a zombie) or reused (starttime differs): at once;
//  * it names no pid (no record, half-written, foreign): once its mtime is 30 s old (OpenClaw's
//    orphan-payload grace);
//  * a live holder is never reclaimed, even past createdAt + maxHoldMs or OpenClaw's staleMs
//    (OpenClaw's own waiters only report those, "too-old" / "hold-exceeded"; the holder's own
//    watchdog releases a hold past its max): it is waited for until the waiter's timeout.
// OpenClaw also reclaims locks of a live pid whose command line is not OpenClaw's, and of a record
// without a valid createdAt after the grace; switchboard does not (it cannot know every way
// OpenClaw is started, and a live pid may be writing), so it is the stricter of the two.
// switchboard never creates such a file. Only regular files count: a link, FIFO or socket at a
// lock path stays STORE_CORRUPT (lock.ts), never read, never waited on.
//
// Lock timing deliberately uses the real wall clock (core's systemClock), never an injected `--now`
// clock: ages are compared with file mtimes and with other processes' records.

import { closeSync, constants as fsConstants, fstatSync, ftruncateSync, lstatSync, openSync, readFileSync, readdirSync, renameSync, rmdirSync, statSync, unlinkSync, writeFileSync, writeSync } from 'node:fs';
import { hostname as osHostname } from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { errnoOf, ioError, isProcessAlive, killProcessSession, nodeCrypto, readProcStat, systemClock, thisProcessStartTicks } from '../core/index.js';
import { clearFileLock, inspectFileLock, lockTargetOf, type FileLockRecord } from './file-lock.js';
import { MAX_WHOLE_FILE_BYTES, STORE_OPEN_FLAGS } from './regular-file.js';

export const DEFAULT_STALE_MS = 10_000;
export const OWNER_FILE = 'owner.json';
export const CHILD_FILE = 'child.json';
export const LOCK_SUFFIX = '.lock';

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

/**
 * What stands at a lock path: 'switchboard', a lock folder (owner.json inside); 'openclaw', a
 * regular file holding OpenClaw's lock record; 'file', a regular file without one (see "Locks of
 * another program" above).
 */
export type LockKind = 'switchboard' | 'openclaw' | 'file';

/** One lock found on disk, as `switchboard locks` shows it. */
export interface LockInfo {
  lockPath: string;
  targetPath: string;
  kind: LockKind;
  /** switchboard's owner record; null for a lock folder without one and for file locks. */
  owner: LockOwnerRecord | null;
  /** A file lock's record (kind 'openclaw' or 'file'); null for a lock folder. */
  fileLock: FileLockRecord | null;
  mtimeMs: number;
  /** Time since acquiredAt (a file lock: createdAt); null when the record is missing. */
  ageMs: number | null;
  /**
   * mtime older than staleMs: the holder stopped refreshing (crashed or frozen). A file lock: it
   * names no pid and its mtime is FILE_LOCK_ORPHAN_GRACE_MS old.
   */
  stale: boolean;
  /** acquiredAt + maxHoldMs has passed: any waiter may take the lock over. Never for a file lock (see fileLock.pastMaxHold). */
  overHeld: boolean;
  /** Same host only (a file lock's holder is taken to be on this host): false when no process with that pid exists; null when unknown. */
  holderAlive: boolean | null;
  heldByThisProcess: boolean;
}

// ---------------------------------------------------------------------------------------------
// This process: its identity in owner records, and the locks it holds

export function isPositiveNumber(value: unknown): value is number {
  return typeof value === 'number' && Number.isFinite(value) && value > 0;
}

export const now = (): number => systemClock.now();

/** The owner record's processStartTicks, where /proc tells it. */
function startTicksField(): { processStartTicks?: number } {
  const ticks = thisProcessStartTicks();
  return ticks === null ? {} : { processStartTicks: ticks };
}
const PROCESS_START_TIME = Math.round(performance.timeOrigin);
const HOSTNAME = osHostname();

/** A holding of this process as judging a lock sees it; lock-held.ts's HeldLock is the one kind. */
export interface OwnHolding {
  readonly lockPath: string;
  readonly owner: LockOwnerRecord;
  /** A lock on a memory-volume path: nothing of it is on disk. */
  readonly inMemory: boolean;
  /** releaseLock(--force) on a lock this very process holds. */
  loseToOperator(): void;
}

/**
 * Locks this process holds, by lock path (at most one holding per path thanks to lock.ts's turns).
 * Kept here rather than next to HeldLock because judging a lock on disk asks whether we are its holder.
 */
export const heldLocks = new Map<string, OwnHolding>();

/** A fresh record for a holding about to start; its lockId is unique to this acquisition. */
export function ownerRecordFor(
  settings: { takeover: TakeoverPolicy; maxHoldMs: number; staleMs: number },
  ownerInfo: LockOwnerInfo,
): LockOwnerRecord {
  return {
    version: 2,
    lockId: `${process.pid}-${nodeCrypto().randomBytes(8).toString('hex')}`,
    pid: process.pid,
    hostname: HOSTNAME,
    processStartTime: PROCESS_START_TIME,
    ...startTicksField(),
    ...(settings.takeover === 'dead' ? { takeover: 'dead' as const } : {}),
    acquiredAt: now(),
    maxHoldMs: settings.maxHoldMs,
    staleMs: settings.staleMs,
    ...(ownerInfo.sessionKey !== undefined ? { sessionKey: ownerInfo.sessionKey } : {}),
    ...(ownerInfo.runId !== undefined ? { runId: ownerInfo.runId } : {}),
  };
}

// ---------------------------------------------------------------------------------------------
// Owner records, inspection, removal

export async function writeOwnerRecord(lockPath: string, owner: LockOwnerRecord): Promise<void> {
  // Written in place (exclusive create in the directory we just made): a reader that catches it
  // half-written gets an unparseable record, which is judged exactly like no record yet (by the
  // directory's mtime), so a temp file + rename would buy nothing but one more directory operation.
  writeFileSync(path.join(lockPath, OWNER_FILE), `${JSON.stringify(owner)}\n`, { mode: 0o600, flag: 'wx' });
}

/**
 * The holder's own owner record written again (HeldLock.restartMaxHold): in place, with no temp
 * file, because a folder holding anything but its records is no lock of ours (removeLockFolder).
 * A reader that catches it half-written judges the lock as one without a record yet (by the
 * folder's mtime, which the holder keeps fresh), as at acquisition.
 */
export function rewriteOwnerRecord(lockPath: string, owner: LockOwnerRecord): void {
  const fd = openSync(path.join(lockPath, OWNER_FILE), fsConstants.O_WRONLY | fsConstants.O_TRUNC | STORE_OPEN_FLAGS);
  try {
    writeSync(fd, `${JSON.stringify(owner)}\n`);
  } finally {
    closeSync(fd);
  }
}

/**
 * Deletes a lock folder (or its tombstone): the child and owner records, then the folder — never
 * more. A folder that holds anything else is no lock of ours (a `build.lock` of some other program
 * named as a target, say) and is left as it is; false then, and for anything else that fails.
 */
export function removeLockFolder(dir: string): boolean {
  try {
    for (const name of [CHILD_FILE, OWNER_FILE]) {
      try {
        unlinkSync(path.join(dir, name));
      } catch (err) {
        if (errnoOf(err) !== 'ENOENT') throw err;
      }
    }
    rmdirSync(dir);
    return true;
  } catch (err) {
    return errnoOf(err) === 'ENOENT';
  }
}

/** What a lock folder holds besides its owner record (null: nothing, or it is gone). */
export function foreignLockContent(lockPath: string): string | null {
  try {
    return readdirSync(lockPath).find((name) => name !== OWNER_FILE && name !== CHILD_FILE) ?? null;
  } catch {
    return null;
  }
}

async function removeTombstone(tomb: string): Promise<void> {
  // A tombstone that cannot go is left for doctor, which reports it: never mistaken for a lock.
  removeLockFolder(tomb);
}

export function parseOwnerRecord(text: string): LockOwnerRecord | null {
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

/**
 * The text of a lock's owner record, read like every store file: no link followed, no FIFO waited
 * on (a plain read of a FIFO put there by hand blocked until someone wrote into it — with the
 * store lock's waiters, `locks` and `doctor` all stuck behind it). Not a regular file: ENOTREG;
 * larger than any store file read whole: EFBIG.
 */
export function readOwnerText(lockPath: string): string {
  const file = path.join(lockPath, OWNER_FILE);
  const fd = openSync(file, fsConstants.O_RDONLY | STORE_OPEN_FLAGS);
  try {
    const stats = fstatSync(fd);
    if (!stats.isFile()) throw Object.assign(new Error(`${file} is not a regular file`), { code: 'ENOTREG' });
    // An owner record is a few hundred bytes: a huge file is no record of ours (EFBIG), and
    // reading it whole cost seconds and gigabytes at every look at the lock.
    if (stats.size > MAX_WHOLE_FILE_BYTES) throw Object.assign(new Error(`${file} is ${stats.size} bytes, too large to be an owner record`), { code: 'EFBIG' });
    return readFileSync(fd, 'utf8');
  } finally {
    closeSync(fd);
  }
}

/** The owner record of a lock directory, or null when there is none (yet) or it is unreadable. */
export async function readLockOwner(lockPath: string): Promise<LockOwnerRecord | null> {
  try {
    return parseOwnerRecord(readOwnerText(lockPath));
  } catch {
    return null;
  }
}

export function describeHolding(lockPath: string, owner: LockOwnerRecord | null, mtimeMs: number, at: number, staleMs?: number): LockInfo {
  // The larger of the observer's and the holder's threshold: a holder with a long staleMs only
  // refreshes every staleMs / 2, and must not look dead to a waiter configured with a short one
  // (proper-lockfile alone cannot tell; the owner record can).
  const staleAfter = Math.max(staleMs ?? 0, isPositiveNumber(owner?.staleMs) ? owner.staleMs : 0) || DEFAULT_STALE_MS;
  return {
    lockPath,
    targetPath: lockTargetOf(lockPath),
    kind: 'switchboard',
    owner,
    fileLock: null,
    mtimeMs,
    ageMs: owner === null ? null : Math.max(0, at - owner.acquiredAt),
    stale: mtimeMs < at - staleAfter,
    overHeld: owner !== null && at > owner.acquiredAt + owner.maxHoldMs,
    holderAlive: owner === null ? null : isHolderAlive(owner),
    heldByThisProcess: owner !== null && heldLocks.get(lockPath)?.owner.lockId === owner.lockId,
  };
}

/**
 * Reads one lock — a lock folder, or a regular file (another program's lock, see "Locks of
 * another program" above); null when nothing is there. staleMs: the observer's threshold.
 */
export async function inspectLock(lockPath: string, staleMs?: number): Promise<LockInfo | null> {
  let mtimeMs: number;
  try {
    if (lstatSync(lockPath).isFile()) return inspectFileLock(lockPath)?.info ?? null;
    mtimeMs = statSync(lockPath).mtimeMs;
  } catch (err) {
    if (errnoOf(err) === 'ENOENT') return null;
    throw ioError(`could not inspect lock ${lockPath}`, err);
  }
  return describeHolding(lockPath, await readLockOwner(lockPath), mtimeMs, now(), staleMs);
}

function isHolderAlive(owner: LockOwnerRecord): boolean | null {
  if (owner.hostname !== HOSTNAME) return null;
  if (owner.pid === process.pid) {
    if (owner.processStartTime === PROCESS_START_TIME) return true;
    // Our pid in the record of another start: the process that had this pid before us, which is
    // gone (one pid, one live process). Told by the start ticks, as for any other pid.
    const ownTicks = thisProcessStartTicks();
    return typeof owner.processStartTicks === 'number' && ownTicks !== null && owner.processStartTicks !== ownTicks ? false : null;
  }
  return isProcessAlive(owner.pid, typeof owner.processStartTicks === 'number' ? owner.processStartTicks : null);
}

/**
 * May a waiter with `policy` take over the lock it found? 'stale': a dead holder, an over-held
 * one, or a stale one not known to be alive (a live holder on this host is waited for until its
 * max hold). 'dead' (when either side asks for it): only a holder known to be dead; a holder on
 * another host, whose liveness cannot be checked, when stale. A lock without a record (holder
 * between mkdir and record) goes by its mtime under both.
 */
export function mayTakeOver(seen: LockInfo, policy: TakeoverPolicy): boolean {
  // Another program's lock file, by OpenClaw's own rule whatever the policy: a dead or reused
  // pid, or no pid and untouched for the grace; never a live holder, even past its max hold.
  if (seen.kind !== 'switchboard') return seen.holderAlive === false || seen.stale;
  const strict = policy === 'dead' || seen.owner?.takeover === 'dead';
  // A holder known to be dead (no such pid, a zombie, a reused pid) writes nothing more: its
  // lock is taken over at once, so a crash does not stall the session for staleMs. A stale one
  // known alive is frozen or stalled, not gone: its max hold ends the wait (see above).
  if (!strict) return seen.overHeld || seen.holderAlive === false || (seen.stale && seen.holderAlive !== true);
  if (seen.owner === null) return seen.stale;
  if (seen.holderAlive === false) return true;
  if (seen.holderAlive === true) return false;
  return seen.stale;
}

function tombstonePath(lockPath: string): string {
  // no `.lock` suffix, so listLocks never reports a tombstone; same folder, so rename is atomic
  return `${lockPath}-gone-${process.pid}-${nodeCrypto().randomBytes(6).toString('hex')}`;
}

/** Holder side: removes the lock directory only if it still carries our lockId. */
export async function removeLockIfOwned(lockPath: string, lockId: string): Promise<void> {
  if ((await readLockOwner(lockPath))?.lockId !== lockId) return; // taken over: not ours to touch
  const tomb = tombstonePath(lockPath);
  try {
    renameSync(lockPath, tomb);
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
export async function clearLock(lockPath: string, seen: LockInfo, staleMs: number | undefined): Promise<boolean> {
  const tomb = tombstonePath(lockPath);
  if (seen.kind !== 'switchboard') return clearFileLock(lockPath, tomb, seen);
  try {
    renameSync(lockPath, tomb);
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
  stopChildOf(tomb);
  await removeTombstone(tomb);
  return true;
}

/** The child record a holding writes once its runner has started (see the layout above). */
interface ChildRecord {
  pid: number;
  hostname: string;
  startTicks?: number;
}

/** Holder side, at acquisition: the empty child record of a holding that will start a runner. */
export function reserveChildRecord(lockPath: string): void {
  writeFileSync(path.join(lockPath, CHILD_FILE), '', { mode: 0o600, flag: 'wx' });
}

/**
 * Holder side: names the runner process this holding started, in the child record reserved when
 * the lock was taken (writing the bytes of an existing file leaves the folder's mtime alone; a
 * new file would make the holder's next refresh report its own lock as lost). A holding without
 * a reserved record names no runner: opened without creating it, and without following a link.
 */
export function writeChildRecord(lockPath: string, pid: number): void {
  const record: ChildRecord = { pid, hostname: HOSTNAME };
  const startTicks = readProcStat(pid)?.startTicks;
  if (startTicks !== undefined) record.startTicks = startTicks;
  const bytes = Buffer.from(`${JSON.stringify(record)}\n`, 'utf8');
  const fd = openSync(path.join(lockPath, CHILD_FILE), fsConstants.O_RDWR | fsConstants.O_NOFOLLOW);
  try {
    writeSync(fd, bytes, 0, bytes.length, 0);
    ftruncateSync(fd, bytes.length);
  } finally {
    closeSync(fd);
  }
}

/**
 * Kills the runner a taken-over holding started, with every process of its session, if it is
 * still that process (same host, same /proc start time: a pid reused since is left alone). The
 * holding is over once its lock is taken, so its run is too: left alive, a run whose switchboard
 * was SIGKILLed went on (tools, side effects) beside the run of the next holder.
 */
function stopChildOf(tomb: string): void {
  let record: Partial<ChildRecord>;
  try {
    record = JSON.parse(readFileSync(path.join(tomb, CHILD_FILE), 'utf8')) as Partial<ChildRecord>;
  } catch {
    return; // none (no runner, or it was being written): nothing known to stop
  }
  const { pid, hostname, startTicks } = record;
  if (typeof pid !== 'number' || !Number.isSafeInteger(pid) || pid <= 1 || pid === process.pid || hostname !== HOSTNAME || typeof startTicks !== 'number') return;
  const proc = readProcStat(pid);
  if (proc === null || proc.startTicks !== startTicks || proc.session !== pid) return;
  killProcessSession(pid);
}

/** Undo a rename that moved a lock we did not mean to. If a new lock already took the path, the
 *  moved holder is the loser: its refresh/verify finds the lock gone and it stops writing. */
async function putBack(tomb: string, lockPath: string): Promise<void> {
  try {
    renameSync(tomb, lockPath);
  } catch {
    await removeTombstone(tomb);
  }
}
