// Leftovers of interrupted writes in a store's folder: temp files (`sessions.json.<n>` of the
// registry replace and write-file-atomic, `sessions.json.bak.tmp`, `sessions.json.removed.<n>`,
// doctor's `<transcript>.doctor-<pid>-<hex>.tmp`), lock tombstones (`<lock>-gone-<pid>-<hex>`,
// what a process killed while releasing a lock leaves) and empty transcripts no entry names (a
// writer killed between creating a transcript and its first write). None of them ever held
// committed data.
// One rule for both users: doctor reports them (a problem: --repair removes them) and maintain
// removes them, so a killed process's debris does not keep `doctor` failing until someone
// repairs by hand. A leftover is one only when it is older than a minute, the process named in
// it (if any) is dead, and the lock that guards its write is free.

import { promises as fsp } from 'node:fs';
import path from 'node:path';
import { SwitchboardError, errnoOf } from '../core/index.js';
import { REMOVED_MEMORY_SUFFIX, foreignLockContent, lockPathFor, removeLockFolder, resolveInside } from '../store/index.js';

/** A temp file or tombstone younger than this may belong to a write in progress. */
export const LEFTOVER_AGE_MS = 60_000;
/** `<lock>-gone-<pid>-<hex>`: what a process killed while releasing a lock leaves behind. */
export const TOMBSTONE_NAME = /\.lock-gone-(\d+)-[0-9a-f]+$/;
const DOCTOR_TEMP_NAME = /^(.+\.jsonl)\.doctor-(\d+)-[0-9a-f]+\.tmp$/;

export interface Leftover {
  kind: 'temp-file' | 'lock-tombstone' | 'empty-transcript';
  file: string;
  /** What it is, for a report. */
  message: string;
  /** False for a tombstone that holds more than an owner record: whatever it is, it is not ours to delete. */
  removable: boolean;
  /** The lock that must be free when a temp file or an empty transcript is removed (its write runs under it). */
  guardLock: string | null;
}

export interface FolderNames {
  files: readonly string[];
  dirs: readonly string[];
}

export function isProcessAlive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return errnoOf(err) === 'EPERM';
  }
}

/** The lock that guards the write a temp file belongs to, and the pid its name carries; null when the name is no temp of ours. */
function tempGuard(storePath: string, name: string): { lockPath: string; pid: number | null } | null {
  const storeBase = path.basename(storePath);
  const removedBase = `${storeBase}${REMOVED_MEMORY_SUFFIX}`;
  const numberedTemp = (base: string) => name.startsWith(`${base}.`) && /^\d{1,10}$/.test(name.slice(base.length + 1));
  // The registry's temp and backup link, and sessions.json.removed's temp: all under the store lock.
  if (name === `${storeBase}.bak.tmp` || numberedTemp(storeBase) || numberedTemp(removedBase)) return { lockPath: lockPathFor(storePath), pid: null };
  const doctorTemp = DOCTOR_TEMP_NAME.exec(name);
  if (doctorTemp !== null) return { lockPath: lockPathFor(resolveInside(path.dirname(storePath), doctorTemp[1]!)), pid: Number(doctorTemp[2]) };
  return null;
}

async function statOrNull(file: string): Promise<{ size: number; mtimeMs: number; ctimeMs: number } | null> {
  try {
    return await fsp.lstat(file);
  } catch (err) {
    if (errnoOf(err) === 'ENOENT') return null;
    throw err;
  }
}

/**
 * The leftovers among a store folder's entries. `liveLocks`: locks known to be held by a live
 * process now (their writes may still be going on); `now`: the wall clock (file times are).
 */
export async function findLeftovers(storePath: string, names: FolderNames, liveLocks: ReadonlySet<string>, now: number): Promise<Leftover[]> {
  const dir = path.dirname(storePath);
  const found: Leftover[] = [];
  for (const name of names.files) {
    const guard = tempGuard(storePath, name);
    if (guard === null) continue;
    if (guard.pid === process.pid || (guard.pid !== null && isProcessAlive(guard.pid))) continue;
    const file = resolveInside(dir, name);
    const stats = await statOrNull(file);
    if (stats === null) continue;
    const ageMs = now - stats.mtimeMs;
    // Young, or its lock is held: the write it belongs to may still be going on.
    if (ageMs < LEFTOVER_AGE_MS || liveLocks.has(guard.lockPath)) continue;
    found.push({ kind: 'temp-file', file, message: `temp file of an interrupted write (${stats.size} bytes, ${Math.round(ageMs / 1000)} s old)`, removable: true, guardLock: guard.lockPath });
  }
  for (const name of names.dirs) {
    const match = TOMBSTONE_NAME.exec(name);
    if (match === null) continue;
    const pid = Number(match[1]);
    if (pid === process.pid) continue;
    const file = resolveInside(dir, name);
    const stats = await statOrNull(file);
    if (stats === null) continue;
    // ctime, not mtime: the rename that made the tombstone sets ctime; mtime is the lock's last refresh.
    if (now - stats.ctimeMs <= LEFTOVER_AGE_MS && isProcessAlive(pid)) continue; // a release in progress
    const foreign = foreignLockContent(file);
    found.push({
      kind: 'lock-tombstone',
      file,
      message: `leftover of a lock release by process ${pid}, which died before it finished${foreign !== null ? `; it holds "${foreign}", so it is left for you to look at` : ''}`,
      removable: foreign === null,
      guardLock: null,
    });
  }
  return found;
}

/**
 * The empty ones among a store folder's transcripts that no entry names (`unnamed`), older than a
 * minute and with no lock on them. doctor reports every empty unnamed transcript at once
 * (`empty-transcript`); maintain removes these.
 */
export async function findEmptyOrphans(storePath: string, unnamed: readonly string[], liveLocks: ReadonlySet<string>, now: number): Promise<Leftover[]> {
  const dir = path.dirname(storePath);
  const found: Leftover[] = [];
  for (const name of unnamed) {
    const file = resolveInside(dir, name);
    const stats = await statOrNull(file);
    if (stats === null || stats.size !== 0 || now - stats.mtimeMs < LEFTOVER_AGE_MS) continue;
    const guardLock = lockPathFor(file);
    if (liveLocks.has(guardLock)) continue;
    found.push({ kind: 'empty-transcript', file, message: 'an empty transcript no entry names (a writer died right after creating it)', removable: true, guardLock });
  }
  return found;
}

/** Removes a removable leftover; STORE_BUSY when the lock its write runs under is held again. */
export async function removeLeftover(leftover: Leftover): Promise<void> {
  if (!leftover.removable) throw new SwitchboardError('STORE_CORRUPT', `${leftover.file} is not a leftover of ours`, { hint: 'look at it and remove it by hand' });
  if (leftover.kind === 'lock-tombstone') {
    if (!removeLockFolder(leftover.file)) throw new SwitchboardError('IO', `could not remove ${leftover.file}`, { hint: 'remove it by hand' });
    return;
  }
  if (leftover.guardLock !== null && (await statOrNull(leftover.guardLock)) !== null) {
    throw new SwitchboardError('STORE_BUSY', `${path.basename(leftover.guardLock)} is held now; left ${path.basename(leftover.file)} alone`, { hint: 'run it again later' });
  }
  // An empty transcript is removed only while it is still empty (a writer may have begun it since).
  if (leftover.kind === 'empty-transcript' && ((await statOrNull(leftover.file))?.size ?? 0) !== 0) {
    throw new SwitchboardError('STORE_BUSY', `${path.basename(leftover.file)} was written meanwhile; left alone`, { hint: 'run it again later' });
  }
  await fsp.unlink(leftover.file).catch((err: unknown) => {
    if (errnoOf(err) !== 'ENOENT') throw err;
  });
}
