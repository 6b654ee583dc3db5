// Step: locks. Stale locks (stale, dead holder, past max hold) are released through releaseLock(),
// which refuses a live in-time holder (tombstones left by a killed releaser: leftovers.ts).

import path from 'node:path';
import { SwitchboardError } from '../../core/index.js';
import { describeSchemaErrors, schemaValidator } from '../../config/index.js';
import { listLocks, releaseLock, type LockInfo } from '../../store/index.js';
import { readOrNull } from './files.js';
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
