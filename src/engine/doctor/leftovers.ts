// Step: leftovers of interrupted writes — temp files and lock tombstones (engine/leftovers.ts has
// the rule, which maintain applies too). They never held committed data, so --repair removes
// them; a tombstone holding anything else is reported and left alone.

import { systemClock } from '../../core/index.js';
import { findLeftovers, removeLeftover } from '../leftovers.js';
import type { StoreCheck } from './store-check.js';

export async function checkLeftovers(doc: StoreCheck): Promise<void> {
  for (const leftover of await findLeftovers(doc.location.storePath, doc.listing, doc.liveLocks, systemClock.now())) {
    const problem = doc.problem({ kind: leftover.kind, file: leftover.file, message: leftover.message, repairable: leftover.removable });
    if (!doc.repair || !leftover.removable) continue;
    await doc.attempt([problem], async () => {
      await removeLeftover(leftover);
      return { action: leftover.kind === 'temp-file' ? 'removed (it never held committed data)' : 'removed', changes: [{ action: 'removed', file: leftover.file }] };
    });
  }
}
