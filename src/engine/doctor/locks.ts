// Step: locks and tombstones. Stale locks (stale, dead holder, past max hold) are released through
// releaseLock(), which refuses a live in-time holder; tombstones left by a killed releaser go.

import path from 'node:path';
import { SwitchboardError, systemClock } from '../../core/index.js';
import { describeSchemaErrors, schemaValidator } from '../../config/index.js';
import { foreignLockContent, listLocks, releaseLock, removeLockFolder, type LockInfo } from '../../store/index.js';
import { LEFTOVER_AGE_MS, TOMBSTONE_NAME, isProcessAlive, readOrNull, statOrNull } from './files.js';
import type { StoreCheck } from './store-check.js';

export async function checkLocks(doc: StoreCheck): Promise<void> {
  const locks = await listLocks(doc.location.sessionsDir, { staleMs: doc.staleMs });
  for (const info of locks) {
    if (info.heldByThisProcess) continue;
    const reasons = lockReasons(info);
    if (reasons.length === 0) {
      doc.liveLocks.add(info.lockPath);
      const ownerProblem = await ownerRecordProblem(info.lockPath);
      if (ownerProblem !== null) {
        doc.problem({ kind: 'invalid-lock-owner', file: path.join(info.lockPath, 'owner.json'), message: `owner record of a live lock: ${ownerProblem}`, repairable: false });
      }
      continue;
    }
    const holder = info.owner === null ? 'no owner record' : `pid ${info.owner.pid} on ${info.owner.hostname}${info.owner.runId ? `, run ${info.owner.runId}` : ''}`;
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

export async function checkTombstones(doc: StoreCheck): Promise<void> {
  for (const name of doc.listing.dirs) {
    const match = TOMBSTONE_NAME.exec(name);
    if (match === null) continue;
    const pid = Number(match[1]);
    if (pid === process.pid) continue;
    const full = doc.inside(name);
    const stats = await statOrNull(full);
    if (stats === null) continue;
    // ctime, not mtime: the rename that made the tombstone sets ctime; mtime is the lock's last refresh.
    const old = systemClock.now() - stats.ctimeMs > LEFTOVER_AGE_MS;
    if (!old && isProcessAlive(pid)) continue; // a release in progress
    // It holds more than an owner record: whatever it was, it is no lock of ours to delete.
    const foreign = foreignLockContent(full);
    const problem = doc.problem({
      kind: 'lock-tombstone',
      file: full,
      message: `leftover of a lock release by process ${pid}, which died before it finished${foreign !== null ? `; it holds "${foreign}", so it is left for you to look at` : ''}`,
      repairable: foreign === null,
    });
    if (!doc.repair || foreign !== null) continue;
    await doc.attempt([problem], async () => {
      if (!removeLockFolder(full)) throw new SwitchboardError('IO', `could not remove ${full}`, { hint: 'remove it by hand' });
      return { action: 'removed', changes: [{ action: 'removed', file: full }] };
    });
  }
}

function lockReasons(info: LockInfo): string[] {
  const reasons: string[] = [];
  if (info.holderAlive === false) reasons.push('held by a dead process');
  if (info.stale) reasons.push('stale (not refreshed)');
  if (info.overHeld) reasons.push('past its max hold');
  return reasons;
}

async function ownerRecordProblem(lockPath: string): Promise<string | null> {
  let bytes: Buffer | null;
  try {
    bytes = await readOrNull(path.join(lockPath, 'owner.json'));
  } catch (err) {
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
