// Step: sessions.json.removed, the duplicate memory of removed sessions (store/removed-memory.ts).
// Derived: an unreadable one is read as empty by every writer, which costs only the duplicate
// protection it gave; --repair keeps its bytes and removes it.

import { promises as fsp } from 'node:fs';
import path from 'node:path';
import { errnoOf } from '../../core/index.js';
import { readRemovedMemoryFile, removedMemoryPathFor, withLock } from '../../store/index.js';
import { keepOriginal } from './files.js';
import type { StoreCheck } from './store-check.js';

export async function checkRemovedMemory(doc: StoreCheck): Promise<void> {
  const file = removedMemoryPathFor(doc.location.storePath);
  // A link or FIFO in its place is reported (and repaired) by checkNonRegular.
  if (doc.nonRegular.has(path.basename(file))) return;
  const read = readRemovedMemoryFile(file);
  if (read.ok) return;
  const problem = doc.problem({
    kind: 'removed-memory-invalid',
    file,
    message: `the duplicate memory of removed sessions is unusable (${read.problem}): a resend of a message recorded on a session removed in the last five minutes is recorded again; --repair removes it, keeping its bytes`,
    repairable: true,
  });
  if (!doc.repair) return;
  await doc.attempt([problem], () =>
    withLock(doc.location.storePath, doc.storeLock(), async () => {
      const backup = await keepOriginal(file, 'corrupt', doc.now());
      await fsp.unlink(file).catch((err: unknown) => {
        if (errnoOf(err) !== 'ENOENT') throw err;
      });
      return { action: 'removed (its bytes are kept)', backup, changes: [{ action: 'kept', file: backup, from: file }, { action: 'removed', file }] };
    }),
  );
}
