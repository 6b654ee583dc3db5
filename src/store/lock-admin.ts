// `switchboard locks` for operators: listLocks() finds every lock under a folder and judges it,
// releaseLock() removes one (a live, in-time holder only with force). Both work through
// lock-owner.ts's inspection and verified removal; acquiring is lock.ts's, holding lock-held.ts's.
// Locks are switchboard's lock folders and another program's lock files (OpenClaw's, a regular
// `<target>.lock`: lock-owner.ts, "Locks of another program").

import { promises as fsp } from 'node:fs';
import path from 'node:path';
import { SwitchboardError, errnoOf, ioError } from '../core/index.js';
import { inspectFileLock, type FileLockRecord } from './file-lock.js';
import { describeHolder } from './lock-describe.js';
import { LOCK_SUFFIX, clearLock, foreignLockContent, heldLocks, inspectLock, mayTakeOver, type LockInfo, type LockKind, type LockOwnerRecord } from './lock-owner.js';
import { TRANSCRIPT_SUFFIX } from './paths.js';

export interface ReleaseLockResult {
  lockPath: string;
  kind: LockKind;
  owner: LockOwnerRecord | null;
  /** An OpenClaw lock file's record (kind 'openclaw' / 'file'); null for a lock folder. */
  fileLock: FileLockRecord | null;
  /** True when the holder was live and in time, so only --force could release it. */
  forced: boolean;
  wasStale: boolean;
  wasOverHeld: boolean;
}

/**
 * Every lock under rootDir (recursively), with its record and judgement: each `*.lock` directory,
 * and each regular `*.lock` file that is a lock switchboard would wait for — one holding OpenClaw's
 * record, or any at the lock name of a transcript (`*.jsonl.lock`) or of a file next to it (a
 * `build.lock` of some other program, with no `build` beside it and no record, is none).
 */
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
  const names = new Set(entries.map((entry) => entry.name));
  for (const entry of entries) {
    const full = path.join(dir, entry.name);
    if (entry.isFile()) {
      if (entry.name.endsWith(LOCK_SUFFIX) && isLockFile(full, names)) out.push(full);
      continue;
    }
    if (!entry.isDirectory()) continue; // symlinks are not followed
    if (entry.name.endsWith(LOCK_SUFFIX)) out.push(full);
    else await collectLockDirs(full, out);
  }
}

/** Whether the regular file `file` is a lock switchboard waits for (see listLocks). */
function isLockFile(file: string, siblings: ReadonlySet<string>): boolean {
  const target = path.basename(file).slice(0, -LOCK_SUFFIX.length);
  if (target.endsWith(TRANSCRIPT_SUFFIX) || siblings.has(target)) return true;
  try {
    return inspectFileLock(file)?.info.fileLock?.pid != null;
  } catch {
    return false;
  }
}

/**
 * Removes a lock (given as the lock directory or file, or its target). Without force, exactly what
 * a waiter would take over (mayTakeOver) is released — a dead holder, one past its max hold, a
 * stale one not known to be alive; anything else is refused with SESSION_BUSY: a live holder on
 * this host within its max hold, however stale (a stopped process resumes, and would find its
 * run ended and its runner killed), and a live holder of the registry lock at all.
 * An OpenClaw lock file is released without force only when OpenClaw itself would reclaim it
 * (holder dead or pid reused; no pid and 30 s untouched): a live OpenClaw holder, even one past
 * its max hold, only with force — and is not told: it goes on writing as if it held the lock.
 * dryRun: the same checks and answer, nothing removed.
 */
export async function releaseLock(lockOrTargetPath: string, options: { force?: boolean; staleMs?: number; dryRun?: boolean } = {}): Promise<ReleaseLockResult> {
  const resolved = path.resolve(lockOrTargetPath);
  const lockPath = resolved.endsWith(LOCK_SUFFIX) ? resolved : `${resolved}${LOCK_SUFFIX}`;
  const info = await inspectLock(lockPath, options.staleMs);
  if (info === null) throw new SwitchboardError('NOT_FOUND', `no lock at ${lockPath}`, { details: { lockPath } });
  // A lock folder holds its owner record and nothing else; anything more is not a lock of ours.
  const foreign = foreignLockContent(lockPath);
  if (foreign !== null) {
    throw new SwitchboardError('NOT_FOUND', `${lockPath} is no switchboard lock: it holds "${foreign}"; left it alone`, {
      hint: 'a switchboard lock folder holds owner.json (and child.json) only; list them with `switchboard locks`',
      details: { lockPath },
    });
  }
  const live = !mayTakeOver(info, 'stale');
  if (live && options.force !== true) {
    // A lock that is never taken from a live holder (the registry's) has no max hold that would end the wait.
    const neverFromLive = info.owner?.takeover === 'dead';
    const state = info.kind !== 'switchboard' ? '' : neverFromLive ? ', alive (the registry lock is never taken from a live holder)' : ', alive and within its max hold';
    throw new SwitchboardError('SESSION_BUSY', `lock ${lockPath} is ${describeHolder(info)}${state}`, {
      hint:
        info.kind === 'switchboard'
          ? 'wait for it, or pass --force to release it anyway (the holder then stops writing)'
          : 'wait for OpenClaw to finish; --force removes its lock file anyway, but OpenClaw is not told and goes on writing: only for a holder you know is stuck',
      details: { lockPath, kind: info.kind, owner: info.owner, fileLock: info.fileLock, ageMs: info.ageMs },
    });
  }
  const result: ReleaseLockResult = { lockPath, kind: info.kind, owner: info.owner, fileLock: info.fileLock, forced: live, wasStale: info.stale, wasOverHeld: info.overHeld };
  if (options.dryRun === true) return result;
  const ownHolder = heldLocks.get(lockPath);
  if (ownHolder !== undefined && ownHolder.owner.lockId === info.owner?.lockId) ownHolder.loseToOperator();
  if (!(await clearLock(lockPath, info, options.staleMs))) {
    throw new SwitchboardError('SESSION_BUSY', `lock ${lockPath} changed hands while being released`, {
      hint: 'run `switchboard locks` again and retry',
      details: { lockPath },
    });
  }
  return result;
}
