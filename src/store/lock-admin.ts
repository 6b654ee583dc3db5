// `switchboard locks` for operators: listLocks() finds every lock under a folder and judges it,
// releaseLock() removes one (a live, in-time holder only with force). Both work through
// lock-owner.ts's inspection and verified removal; acquiring is lock.ts's, holding lock-held.ts's.

import { promises as fsp } from 'node:fs';
import path from 'node:path';
import { SwitchboardError, errnoOf, ioError } from '../core/index.js';
import { LOCK_SUFFIX, clearLock, describeHolder, foreignLockContent, heldLocks, inspectLock, type LockInfo, type LockOwnerRecord } from './lock-owner.js';

export interface ReleaseLockResult {
  lockPath: string;
  owner: LockOwnerRecord | null;
  /** True when the holder was live and in time, so only --force could release it. */
  forced: boolean;
  wasStale: boolean;
  wasOverHeld: boolean;
}

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
  // A lock folder holds its owner record and nothing else; anything more is not a lock of ours.
  const foreign = foreignLockContent(lockPath);
  if (foreign !== null) {
    throw new SwitchboardError('NOT_FOUND', `${lockPath} is no switchboard lock: it holds "${foreign}"; left it alone`, {
      hint: 'a switchboard lock folder holds owner.json (and child.json) only; list them with `switchboard locks`',
      details: { lockPath },
    });
  }
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
