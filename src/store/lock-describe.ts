// Describing a lock's holder in words, for busy errors, `switchboard locks` and doctor: who holds
// it, for how long, and — for a live holder that stopped refreshing it (a stopped process) — why it
// is still waited for and until when. The judgement itself is lock-owner.ts's.

import { FILE_LOCK_ORPHAN_GRACE_MS } from './file-lock.js';
import { now, type LockInfo, type LockOwnerRecord } from './lock-owner.js';

export function describeHolder(info: LockInfo | null): string {
  if (info !== null && info.kind !== 'switchboard') return describeFileHolder(info);
  const owner = info?.owner;
  if (owner == null) return 'held by an unknown process (no owner record)';
  const run = owner.runId !== undefined ? `, run ${owner.runId}` : '';
  const session = owner.sessionKey !== undefined ? `, session ${owner.sessionKey}` : '';
  return `held by pid ${owner.pid} on ${owner.hostname}${run}${session} for ${formatMs(info?.ageMs ?? 0)}${info !== null ? unresponsive(info, owner) : ''}`;
}

/**
 * What a waiter is told of a live holder whose lock is stale (stopped or stalled): why it is still
 * waited for, and until when ('stale' policy: its max hold; 'dead': until it ends).
 */
function unresponsive(info: LockInfo, owner: LockOwnerRecord): string {
  if (!info.stale || info.holderAlive !== true) return '';
  const silent = `, not refreshed for ${formatMs(Math.max(0, now() - info.mtimeMs))} (a stopped or stalled process, still alive)`;
  if (owner.takeover === 'dead') return `${silent}: waited for until it ends`;
  if (info.overHeld) return '';
  return `${silent}: waited for until its max hold, in ${formatMs(Math.max(0, owner.acquiredAt + owner.maxHoldMs - now()))}`;
}

function describeFileHolder(info: LockInfo): string {
  const record = info.fileLock;
  if (record === null || record.pid === null) {
    return `held by another program (a lock file with no holder's pid in it, untouched for ${formatMs(Math.max(0, now() - info.mtimeMs))}; reclaimed once it is ${formatMs(FILE_LOCK_ORPHAN_GRACE_MS)} old)`;
  }
  const state = info.holderAlive === false ? ', which is gone' : record.pastMaxHold ? `, past its max hold of ${formatMs(record.maxHoldMs ?? 0)}` : '';
  const since = info.ageMs !== null ? ` for ${formatMs(info.ageMs)}` : '';
  return `held by OpenClaw, pid ${record.pid}${state}${since} (its lock file)`;
}

export function formatMs(ms: number): string {
  if (ms < 1_000) return `${Math.round(ms)} ms`;
  if (ms < 120_000) return `${(ms / 1_000).toFixed(1)} s`;
  return `${Math.round(ms / 60_000)} min`;
}
