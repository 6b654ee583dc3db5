// File steps the cleanup paths share (session-cleanup.ts and the cleanup on write): many
// transcript locks held at once without waiting, archive renames made durable by one folder fsync,
// deletes that tolerate a file already gone, and an archive's time read from its name.

import { promises as fsp } from 'node:fs';
import { errnoOf, ioError, toSwitchboardError } from '../core/index.js';
import { nodeStoreFileSystem, parseArchiveName, parseKeptCopyName, withLock, type LockOptions, type StoreFileSystem } from '../store/index.js';

export interface HeldLocks {
  held: Set<string>;
  failed: Map<string, string>;
  release(): Promise<void>;
}

/**
 * Takes the write locks of many transcripts at once without waiting for busy ones (a live lock
 * means a run is writing: that session is protected now). Released together by release().
 */
export async function holdTranscriptLocks(items: { id: string; file: string; sessionKey: string }[], lockOptions: (key: string) => LockOptions): Promise<HeldLocks> {
  let open!: () => void;
  const gate = new Promise<void>((resolve) => (open = resolve));
  const holdings: Promise<unknown>[] = [];
  const outcomes = await Promise.all(
    items.map(
      (item) =>
        new Promise<{ id: string; ok: boolean; reason?: string }>((resolve) => {
          const holding = withLock(item.file, { ...lockOptions(item.sessionKey), acquireTimeoutMs: 0 }, async () => {
            resolve({ id: item.id, ok: true });
            await gate;
          });
          holdings.push(holding);
          holding.catch((err: unknown) => {
            const error = toSwitchboardError(err);
            resolve({ id: item.id, ok: false, reason: error.code === 'SESSION_BUSY' ? 'busy' : `lock failed: ${error.code}` });
          });
        }),
    ),
  );
  const held = new Set(outcomes.filter((o) => o.ok).map((o) => o.id));
  const failed = new Map(outcomes.filter((o) => !o.ok).map((o) => [o.id, o.reason ?? 'busy']));
  return {
    held,
    failed,
    release: async () => {
      open();
      await Promise.allSettled(holdings);
    },
  };
}

/** archiveFile's file system, its per-rename folder fsync left to removeEntries (once per chunk). */
export const ARCHIVE_FS: StoreFileSystem = {
  ...nodeStoreFileSystem,
  // archiveFile fsyncs only the folder of the renamed file, never the file itself.
  fsyncPath: async () => undefined,
};

export async function fsyncFolder(dir: string): Promise<void> {
  try {
    await nodeStoreFileSystem.fsyncPath(dir);
  } catch (err) {
    if (!['EINVAL', 'ENOTSUP', 'EOPNOTSUPP', 'EISDIR'].includes(errnoOf(err) ?? '')) throw ioError(`cannot fsync ${dir}`, err, { path: dir });
  }
}

/** Deletes one file; a file already gone counts as done. Returns whether it was there. */
export async function unlinkIfPresent(file: string): Promise<boolean> {
  try {
    await fsp.unlink(file);
    return true;
  } catch (err) {
    if (errnoOf(err) === 'ENOENT') return false;
    throw ioError(`cannot delete ${file}`, err, { path: file });
  }
}

/** When a file whose name says it is an archive or a doctor copy was made; null for any other name. */
export function archivedAtOf(name: string): number | null {
  return parseArchiveName(name)?.archivedAt ?? parseKeptCopyName(name)?.keptAt ?? null;
}
