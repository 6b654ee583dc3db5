// Appending to a transcript inside a store transaction (docs/write-path.md): the one way every
// writer but a run (which holds its session's write lock under an `activeRun` claim) adds records.

import { setTimeout as sleep } from 'node:timers/promises';
import { isSwitchboardError, systemClock } from '../core/index.js';
import { appendEntries, busyAfterWaiting, isInMemory, lockPresent, transactSessionStore, withLock, type NewTranscriptEntry, type StoreLocation, type StoreTransaction } from '../store/index.js';
import { sessionLockOptions, storeWriteOptions, type EngineContext } from './context.js';

export interface AppendTarget {
  file: string;
  sessionKey: string;
  sessionId: string;
  agentId: string;
  /** The session recorded into this file before (not a new instance): see AppendOptions.resumesFile. */
  resumesFile?: boolean;
}

/**
 * Appends under the store lock the caller's transaction holds. A transcript nobody holds a lock
 * on is covered by that store lock (every other writer of an idle session's transcript holds it
 * too), so it costs one lstat instead of a lock cycle; otherwise its write lock is tried without
 * waiting — a store-lock holder never waits for a session lock — and SESSION_BUSY means "again
 * later, without the store lock".
 */
export async function appendInStore(ctx: EngineContext, tx: StoreTransaction, target: AppendTarget, entries: readonly NewTranscriptEntry[]): Promise<void> {
  const options = { session: { sessionId: target.sessionId, sessionKey: target.sessionKey, agentId: target.agentId }, clock: ctx.clock, resumesFile: target.resumesFile };
  if (!isInMemory(target.file) && !(await lockPresent(target.file))) {
    await appendEntries(target.file, entries, { ...options, coveredBy: tx.handle });
    return;
  }
  const lockOptions = { ...sessionLockOptions(ctx, { sessionKey: target.sessionKey }), acquireTimeoutMs: 0 };
  await withLock(target.file, lockOptions, (handle) => appendEntries(target.file, entries, { ...options, handle }));
}

/** Backoff between attempts while a session's write lock is busy. */
export function busyRetryDelayMs(attempt: number): number {
  return Math.min(200, 5 * 2 ** Math.min(attempt, 6)) * (0.5 + Math.random() / 2);
}

/**
 * Runs `work` in a store transaction, again (after a pause, the store lock released) while it
 * fails with SESSION_BUSY, until `session.writeLock.acquireTimeoutMs` has passed.
 */
export async function transactRetryingBusy<T>(ctx: EngineContext, location: StoreLocation, work: Parameters<typeof transactSessionStore<T>>[1]): Promise<T> {
  const writeLock = ctx.config.session?.writeLock;
  const startedAt = systemClock.now();
  const deadline = startedAt + (writeLock?.acquireTimeoutMs ?? 60_000);
  for (let attempt = 0; ; attempt++) {
    try {
      return await transactSessionStore(location.storePath, work, storeWriteOptions(ctx));
    } catch (err) {
      if (!isSwitchboardError(err, 'SESSION_BUSY')) throw err;
      if (systemClock.now() >= deadline) throw busyAfterWaiting(err, systemClock.now() - startedAt);
    }
    await sleep(busyRetryDelayMs(attempt));
  }
}
