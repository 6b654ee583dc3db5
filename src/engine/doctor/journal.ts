// Step: sessions.json.journal (docs/write-path.md).

import path from 'node:path';
import { journalPathFor, lockPathFor, readJournal, readSessionStore, updateSessionStore } from '../../store/index.js';
import type { StoreCheck } from './store-check.js';

/**
 * A non-empty journal with a free store lock is a batch whose writer died after (maybe) writing
 * its records: the next store write completes it, and --repair makes that write now.
 */
export async function checkJournal(doc: StoreCheck): Promise<void> {
  const storePath = doc.location.storePath;
  if (doc.liveLocks.has(lockPathFor(storePath))) return; // a batch is being written right now
  const pending = await readJournal(storePath);
  if (pending === null) return;
  const problem = doc.problem({
    kind: 'journal-pending',
    file: journalPathFor(storePath),
    message: `a writer died during a batch of ${pending.length} session(s): records it wrote are not yet in ${path.basename(storePath)}`,
    repairable: true,
  });
  if (!doc.repair) return;
  await doc.attempt([problem], async () => {
    // The one update path completes the journal before anything else; nothing more to change.
    // No enforce upkeep in this write: it would remove entries (and archive their files) under
    // the steps that follow, which judge the folder as it was scanned.
    await updateSessionStore(storePath, () => undefined, { lock: { acquireTimeoutMs: doc.storeLock().acquireTimeoutMs }, skipUpkeep: true });
    doc.store = await readSessionStore(storePath);
    return { action: 'completed: sessions.json now names the records that reached the transcripts', changes: [{ action: 'rewrote', file: storePath }] };
  });
}
