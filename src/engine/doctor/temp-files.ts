// Step: temp files of interrupted writes (sessions.json.<n> of write-file-atomic,
// sessions.json.bak.tmp, our own <transcript>.doctor-<pid>-<hex>.tmp). Older than a minute with
// their lock free they never held committed data, so --repair removes them.

import { promises as fsp } from 'node:fs';
import path from 'node:path';
import { SwitchboardError, errnoOf, systemClock } from '../../core/index.js';
import { REMOVED_MEMORY_SUFFIX, lockPathFor } from '../../store/index.js';
import { LEFTOVER_AGE_MS, isProcessAlive, statOrNull } from './files.js';
import type { StoreCheck } from './store-check.js';

const DOCTOR_TEMP_NAME = /^(.+\.jsonl)\.doctor-(\d+)-[0-9a-f]+\.tmp$/;

/** The lock that guards the write a temp file belongs to, or null when the name is no temp of ours. */
function tempGuard(doc: StoreCheck, name: string): { lockPath: string; pid: number | null } | null {
  const storeBase = path.basename(doc.location.storePath);
  const removedBase = `${storeBase}${REMOVED_MEMORY_SUFFIX}`;
  const atomicTemp = (base: string) => name.startsWith(`${base}.`) && /^\d{1,10}$/.test(name.slice(base.length + 1));
  if (name === `${storeBase}.bak.tmp` || atomicTemp(storeBase) || atomicTemp(removedBase)) {
    // write-file-atomic names its temp `<file>.<uint32>`; .bak.tmp is the store's backup link;
    // sessions.json.removed is replaced under the store lock too
    return { lockPath: lockPathFor(doc.location.storePath), pid: null };
  }
  const doctorTemp = DOCTOR_TEMP_NAME.exec(name);
  if (doctorTemp !== null) return { lockPath: lockPathFor(doc.inside(doctorTemp[1]!)), pid: Number(doctorTemp[2]) };
  return null;
}

export async function checkTempFiles(doc: StoreCheck): Promise<void> {
  for (const name of doc.listing.files) {
    const guard = tempGuard(doc, name);
    if (guard === null) continue;
    if (guard.pid === process.pid || (guard.pid !== null && isProcessAlive(guard.pid))) continue;
    const full = doc.inside(name);
    const stats = await statOrNull(full);
    if (stats === null) continue;
    const ageMs = systemClock.now() - stats.mtimeMs;
    // Young, or its lock is held: the write it belongs to may still be going on.
    if (ageMs < LEFTOVER_AGE_MS || doc.liveLocks.has(guard.lockPath)) continue;
    const problem = doc.problem({
      kind: 'temp-file',
      file: full,
      message: `temp file of an interrupted write (${stats.size} bytes, ${Math.round(ageMs / 1000)} s old)`,
      repairable: true,
    });
    if (!doc.repair) continue;
    await doc.attempt([problem], async () => {
      if ((await statOrNull(guard.lockPath)) !== null) {
        throw new SwitchboardError('STORE_BUSY', `${path.basename(guard.lockPath)} is held now; left ${name} alone`, { hint: 'run doctor again later' });
      }
      await fsp.unlink(full).catch((err: unknown) => {
        if (errnoOf(err) !== 'ENOENT') throw err;
      });
      return { action: 'removed (it never held committed data)', changes: [{ action: 'removed', file: full }] };
    });
  }
}
