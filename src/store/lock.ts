// The one lock helper: every lock in switchboard (sessions.json store lock, session write lock,
// lane slots) is taken through withLock(). Built on proper-lockfile (mkdir lock + mtime refresh).
// STUB INTERFACE — being completed (owner record, max-hold, re-entrancy, FIFO, takeover).

import lockfile from 'proper-lockfile';
import { SwitchboardError } from '../core/index.js';

export interface LockOwnerInfo {
  sessionKey?: string;
  runId?: string;
}

export interface LockOptions {
  /** How long to wait for the lock before failing with SESSION_BUSY / STORE_BUSY. */
  acquireTimeoutMs?: number;
  /** A lock whose mtime is older than this is considered abandoned (holder crashed). */
  staleMs?: number;
  /** How long one holder may keep the lock before a waiter may take it over. */
  maxHoldMs?: number;
  /** Error code used when the wait times out. */
  busyCode?: 'SESSION_BUSY' | 'STORE_BUSY';
  owner?: LockOwnerInfo;
}

export interface LockHandle {
  /** Throws SESSION_BUSY-style error (code IO? see impl) if the lock was lost (compromised). */
  assertHeld(): void;
  readonly lockPath: string;
}

export async function withLock<T>(targetPath: string, options: LockOptions, fn: (handle: LockHandle) => Promise<T>): Promise<T> {
  const lockPath = `${targetPath}.lock`;
  let release: () => Promise<void>;
  try {
    release = await lockfile.lock(targetPath, {
      lockfilePath: lockPath,
      realpath: false,
      stale: options.staleMs ?? 10_000,
      retries: { retries: 1000, minTimeout: 5, maxTimeout: 50, randomize: true },
    });
  } catch (err) {
    throw new SwitchboardError(options.busyCode ?? 'SESSION_BUSY', `could not lock ${targetPath}`, { cause: err });
  }
  try {
    return await fn({ assertHeld: () => undefined, lockPath });
  } finally {
    await release();
  }
}
