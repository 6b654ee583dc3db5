// Step: locks. Stale locks (stale, dead holder, past max hold) are released through releaseLock(),
// which refuses a live in-time holder, stale or not: a stopped process is alive and is warned
// about, not repaired (tombstones left by a killed releaser: leftovers.ts).
// OpenClaw's lock files (a regular `<transcript>.lock`) are locks too, judged by OpenClaw's rule
// (store/lock-owner.ts): a live holder is a warning (not a problem: nothing to repair, and doctor
// never removes it), a dead one a stale lock that --repair removes.

import path from 'node:path';
import { SwitchboardError } from '../../core/index.js';
import { describeSchemaErrors, schemaValidator } from '../../config/index.js';
import { FILE_LOCK_ORPHAN_GRACE_MS, describeHolder, isTooLargeToRead, listLocks, mayTakeOver, releaseLock, type LockInfo } from '../../store/index.js';
import { readOrNull } from './files.js';
import type { StoreCheck } from './store-check.js';

export async function checkLocks(doc: StoreCheck): Promise<void> {
  const locks = await listLocks(doc.location.sessionsDir, { staleMs: doc.staleMs });
  for (const info of locks) {
    if (info.heldByThisProcess) continue;
    // Only what a waiter would take over is a problem to repair (releaseLock's rule): a live
    // holder on this host within its max hold is no leftover, however stale its lock looks.
    const reasons = mayTakeOver(info, 'stale') ? lockReasons(info) : [];
    if (reasons.length === 0) {
      doc.liveLocks.add(info.lockPath);
      if (info.kind !== 'switchboard') {
        doc.report.warnings.push(describeLiveFileLock(info));
        continue;
      }
      if (info.stale) doc.report.warnings.push(`${path.basename(info.lockPath)} is ${describeHolder(info)}: writes of ${path.basename(info.targetPath)} wait for it, and doctor leaves it alone`);
      const ownerProblem = await ownerRecordProblem(info.lockPath);
      if (ownerProblem !== null) {
        doc.problem({ kind: 'invalid-lock-owner', file: path.join(info.lockPath, 'owner.json'), message: `owner record of a live lock: ${ownerProblem}`, repairable: false });
      }
      continue;
    }
    const holder =
      info.kind !== 'switchboard'
        ? info.fileLock?.pid != null
          ? `OpenClaw's lock file, pid ${info.fileLock.pid}`
          : 'a lock file with no holder in it'
        : info.owner === null
          ? 'no owner record'
          : `pid ${info.owner.pid} on ${info.owner.hostname}${info.owner.runId ? `, run ${info.owner.runId}` : ''}`;
    const problem = doc.problem({
      kind: 'stale-lock',
      file: info.lockPath,
      ...(info.owner?.sessionKey !== undefined ? { sessionKey: info.owner.sessionKey } : {}),
      message: `lock on ${path.basename(info.targetPath)} is ${reasons.join(', ')} (${holder})`,
      repairable: true,
    });
    if (!doc.repair) continue;
    const released = await doc.attempt([problem], async () => {
      try {
        await releaseLock(info.lockPath, { staleMs: doc.staleMs });
      } catch (err) {
        if (!(err instanceof SwitchboardError && err.code === 'NOT_FOUND')) throw err;
        return { action: 'already gone', changes: [] };
      }
      return { action: 'released', changes: [{ action: 'released', file: info.lockPath }] };
    });
    if (!released) doc.liveLocks.add(info.lockPath);
  }
}

/** A lock another program (OpenClaw) holds: what it is and what switchboard does about it. */
function describeLiveFileLock(info: LockInfo): string {
  const name = path.basename(info.lockPath);
  const target = path.basename(info.targetPath);
  const record = info.fileLock;
  if (record === null || record.pid === null) {
    return `${name} is a lock file with no holder's pid in it (OpenClaw between creating and writing its lock?): writes of ${target} wait for it; it is reclaimed once ${Math.round(FILE_LOCK_ORPHAN_GRACE_MS / 1000)} s untouched`;
  }
  const since = record.createdAt !== null ? ` since ${record.createdAt}` : '';
  const overLong = record.pastMaxHold
    ? `; it is past its max hold of ${Math.round((record.maxHoldMs ?? 0) / 1000)} s, which OpenClaw's own watchdog ends — if that process is stuck, end it (or \`switchboard locks release --force\`)`
    : '';
  return `${name} is held by OpenClaw (pid ${record.pid}${since}): writes of ${target} wait for it, and doctor leaves it alone${overLong}`;
}

function lockReasons(info: LockInfo): string[] {
  const reasons: string[] = [];
  if (info.holderAlive === false) reasons.push('held by a dead process');
  if (info.stale && info.kind !== 'switchboard') reasons.push(`left without a holder (no pid in it, untouched for ${Math.round(FILE_LOCK_ORPHAN_GRACE_MS / 1000)} s)`);
  else if (info.stale) reasons.push('stale (not refreshed)');
  if (info.overHeld) reasons.push('past its max hold');
  return reasons;
}

async function ownerRecordProblem(lockPath: string): Promise<string | null> {
  let bytes: Buffer | null;
  try {
    bytes = await readOrNull(path.join(lockPath, 'owner.json'));
  } catch (err) {
    if (isTooLargeToRead(err)) return String(err.details!.reason);
    if (err instanceof SwitchboardError && err.code === 'STORE_CORRUPT') return 'not a regular file';
    throw err;
  }
  if (bytes === null) return null; // between mkdir and writing the record: normal
  let value: unknown;
  try {
    value = JSON.parse(bytes.toString('utf8'));
  } catch {
    return 'not JSON';
  }
  const validate = schemaValidator('lock-owner');
  return validate(value) ? null : describeSchemaErrors(validate.errors).slice(0, 3).join('; ');
}
