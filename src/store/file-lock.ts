// Locks of another program at a lock path: OpenClaw (2026.7.1; its session-write-lock on fs-safe's
// sidecar lock) guards the same transcripts with a regular FILE `<target>.lock`, holding
// `{pid, createdAt, maxHoldMs, starttime}`. How such a file is read, judged (by OpenClaw's own rule
// for a waiter) and reclaimed; lock-owner.ts ("Locks of another program") says why.

import { closeSync, constants as fsConstants, fstatSync, linkSync, openSync, readSync, renameSync, unlinkSync } from 'node:fs';
import { errnoOf, ioError, isProcessAlive, systemClock } from '../core/index.js';
import type { LockInfo } from './lock-owner.js';
import { STORE_OPEN_FLAGS } from './regular-file.js';

/** A file lock without a pid is reclaimed once its mtime is this old (OpenClaw's orphan-payload grace). */
export const FILE_LOCK_ORPHAN_GRACE_MS = 30_000;
/** More than any lock record: what a file lock read takes at most. */
const MAX_FILE_LOCK_BYTES = 64 * 1024;

/** A file lock's record, fields as OpenClaw reads them (anything else in the file is ignored). */
export interface FileLockRecord {
  /** A positive integer, else null. */
  pid: number | null;
  /** ISO time the holder took the lock; null when missing or not a date. */
  createdAt: string | null;
  maxHoldMs: number | null;
  /** The holder's /proc start time (clock ticks since boot). */
  starttime: number | null;
  /** createdAt + maxHoldMs has passed: only the holder's own watchdog ends such a hold, no waiter does. */
  pastMaxHold: boolean;
}


/** A file lock as judged, with what tells that very file apart: inode and bytes (OpenClaw's own test). */
export interface FileLockSnapshot {
  info: LockInfo;
  dev: number;
  ino: number;
  text: string;
}

/** What clearLock compares the file it moved away with: the snapshot its judgement was made on. */
const judgedFileLocks = new WeakMap<LockInfo, FileLockSnapshot>();

const isCount = (value: unknown): value is number => typeof value === 'number' && Number.isSafeInteger(value) && value >= 0;

/** The record in a file lock, as OpenClaw's session-write-lock parses it; null when it is no JSON object. */
function parseFileLockRecord(text: string, at: number): FileLockRecord | null {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return null;
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return null;
  const raw = value as Record<string, unknown>;
  const pid = isCount(raw.pid) && raw.pid > 0 ? raw.pid : null;
  const createdAtMs = typeof raw.createdAt === 'string' ? Date.parse(raw.createdAt) : Number.NaN;
  const createdAt = Number.isFinite(createdAtMs) ? (raw.createdAt as string) : null;
  const maxHoldMs = isCount(raw.maxHoldMs) && raw.maxHoldMs > 0 ? raw.maxHoldMs : null;
  const starttime = isCount(raw.starttime) ? raw.starttime : null;
  return { pid, createdAt, maxHoldMs, starttime, pastMaxHold: createdAt !== null && maxHoldMs !== null && at > createdAtMs + maxHoldMs };
}

/** Reads and judges the regular file at lockPath (no link followed, no FIFO waited on); null when it is gone or no regular file. */
export function inspectFileLock(lockPath: string): FileLockSnapshot | null {
  let fd: number;
  try {
    fd = openSync(lockPath, fsConstants.O_RDONLY | STORE_OPEN_FLAGS);
  } catch (err) {
    const code = errnoOf(err);
    if (code === 'ENOENT' || code === 'ELOOP' || code === 'EISDIR' || code === 'ENXIO') return null;
    throw ioError(`could not inspect lock ${lockPath}`, err);
  }
  let text: string;
  let stats;
  try {
    stats = fstatSync(fd);
    if (!stats.isFile()) return null;
    const buffer = Buffer.alloc(Math.min(MAX_FILE_LOCK_BYTES, Math.max(0, stats.size)));
    let length = 0;
    while (length < buffer.length) {
      const read = readSync(fd, buffer, length, buffer.length - length, length);
      if (read === 0) break;
      length += read;
    }
    text = buffer.subarray(0, length).toString('utf8');
  } catch (err) {
    throw ioError(`could not read lock ${lockPath}`, err);
  } finally {
    closeSync(fd);
  }
  const at = systemClock.now();
  const record = parseFileLockRecord(text, at);
  const fileLock: FileLockRecord = record ?? { pid: null, createdAt: null, maxHoldMs: null, starttime: null, pastMaxHold: false };
  // switchboard holds no lock files: a record naming this very process was left by an earlier
  // process with the same pid (OpenClaw: "orphan-self-pid").
  const holderAlive = fileLock.pid === null ? null : fileLock.pid !== process.pid && isProcessAlive(fileLock.pid, fileLock.starttime);
  const info: LockInfo = {
    lockPath,
    targetPath: lockTargetOf(lockPath),
    kind: fileLock.pid !== null ? 'openclaw' : 'file',
    owner: null,
    fileLock,
    mtimeMs: stats.mtimeMs,
    ageMs: fileLock.createdAt === null ? null : Math.max(0, at - Date.parse(fileLock.createdAt)),
    stale: fileLock.pid === null && stats.mtimeMs < at - FILE_LOCK_ORPHAN_GRACE_MS,
    overHeld: false,
    holderAlive,
    heldByThisProcess: false,
  };
  const snapshot = { info, dev: stats.dev, ino: stats.ino, text };
  judgedFileLocks.set(info, snapshot);
  return snapshot;
}

/**
 * clearLock for a file lock: renames it to a tombstone, checks it moved the very file judged
 * (same inode and bytes; still without a pid and old, when it was judged by its age) and deletes
 * it; otherwise it is linked back (a file lock taken meanwhile at the path wins).
 */
export function clearFileLock(lockPath: string, tomb: string, seen: LockInfo): boolean {
  try {
    renameSync(lockPath, tomb);
  } catch (err) {
    if (errnoOf(err) === 'ENOENT') return true; // someone else cleared it
    throw ioError(`could not clear lock ${lockPath}`, err);
  }
  const moved = inspectFileLock(tomb);
  const judged = judgedFileLocks.get(seen);
  const sameFile =
    moved !== null &&
    (judged !== undefined
      ? moved.dev === judged.dev && moved.ino === judged.ino && moved.text === judged.text
      : moved.info.fileLock?.pid === seen.fileLock?.pid && moved.info.fileLock?.createdAt === seen.fileLock?.createdAt);
  const stillJudgedTheSame = seen.stale && seen.holderAlive !== false ? moved?.info.stale === true : true;
  if (!sameFile || !stillJudgedTheSame) {
    try {
      linkSync(tomb, lockPath);
    } catch {
      // the path was taken meanwhile: the moved holding lost it
    }
    removeFileTombstone(tomb);
    return false;
  }
  removeFileTombstone(tomb);
  return true;
}

function removeFileTombstone(tomb: string): void {
  try {
    unlinkSync(tomb);
  } catch {
    // gone already; a name that cannot go is left as it is (never taken for a lock: no .lock suffix)
  }
}

/** `<target>.lock` → `<target>` (LOCK_SUFFIX of lock-owner.ts, which imports this module). */
export function lockTargetOf(lockPath: string): string {
  return lockPath.endsWith('.lock') ? lockPath.slice(0, -'.lock'.length) : lockPath;
}
