// The file side of session cleanup, shared by `sessions cleanup` (session-cleanup-run.ts), maintain
// and the cleanup on write: the stat-only snapshot of a store that policy/ plans on, and applying a
// plan — archiving before anything leaves, re-checking every entry under its lock.

import { constants as fsConstants, promises as fsp, type Dirent } from 'node:fs';
import path from 'node:path';
import { SwitchboardError, errnoOf, inPool, ioError, toSwitchboardError } from '../core/index.js';
import {
  type BudgetRemoval,
  type CleanupPlan,
  type EntrySnapshot,
  type MaintenanceSnapshot,
  type ProtectedKey,
  type SessionAction,
} from '../policy/index.js';
import {
  archiveFile,
  entryTranscriptName,
  nodeStoreFileSystem,
  parseArchiveName,
  parseKeptCopyName,
  readSessionStore,
  sessionEntryProblem,
  transactSessionStore,
  updateSessionStore,
  withLock,
  type LockOptions,
  type SessionEntry,
  type SessionStore,
  type StoreFileSystem,
  type StoreLocation,
} from '../store/index.js';
import { queueBusyKeys } from './queue.js';
import { sessionLockOptions, transcriptPathIn, type EngineContext } from './context.js';

/** Files stat-ed at once while building a snapshot: enough to hide latency, few file handles. */
const STAT_CONCURRENCY = 64;
/**
 * Entries removed per store write; each chunk holds its transcripts' locks meanwhile. Taking and
 * releasing a lock (~10 file operations) dominates the cost, not the store rewrite.
 */
const REMOVE_CHUNK = 512;
const TRANSCRIPT_SUFFIX = '.jsonl';
const LOCK_SUFFIX = '.lock';

export interface CleanupProgress {
  agentId: string;
  stage: 'scan' | 'remove' | 'purge' | 'budget';
  done: number;
  total: number;
}

/**
 * Keys that have a run in progress or queued work; by default the durable queue's
 * `queueBusyKeys` (held transcript locks are found by the snapshot itself).
 */
export type BusyKeysProvider = (location: StoreLocation) => Promise<readonly ProtectedKey[]>;

// ---------------------------------------------------------------------------------------------
// Snapshot (stat only: transcript contents are never read)

/** The raw entry values the apply step compares against to see that a row did not change. */
export interface EntryIdentity {
  sessionId: unknown;
  updatedAt: unknown;
}

export interface BuiltSnapshot {
  snapshot: MaintenanceSnapshot;
  /** key → sessionId/updatedAt exactly as read. */
  identities: Map<string, EntryIdentity>;
}

export interface SnapshotOptions {
  busyKeys?: BusyKeysProvider;
  /** The store as it stands (the write path's upkeep, under the store lock); read from disk when absent. */
  store?: SessionStore;
  onProgress?: (done: number, total: number) => void;
}



/**
 * The transcript file name an entry refers to, or null when the entry is of the wrong shape (its
 * names cannot be trusted: archiving "its" file could move sessions.json or another session's).
 */
export function transcriptNameOf(location: StoreLocation, entry: SessionEntry): string | null {
  if (sessionEntryProblem(entry, location.sessionsDir) !== null) return null;
  try {
    return path.basename(transcriptPathIn(location, entryTranscriptName(entry)));
  } catch {
    return null;
  }
}

function modelOf(entry: SessionEntry): string | null {
  const model = entry.modelOverride ?? entry.model;
  return typeof model === 'string' ? model : null;
}

/**
 * One readdir of the sessions folder plus a stat per transcript/archive (bounded concurrency):
 * what exists, how big it is, which transcripts are locked and which files nobody references.
 */
export async function buildMaintenanceSnapshot(location: StoreLocation, options: SnapshotOptions = {}): Promise<BuiltSnapshot> {
  const store = options.store ?? (await readSessionStore(location.storePath));
  const storeFileName = path.basename(location.storePath);
  let dirents: Dirent[] = [];
  try {
    dirents = await fsp.readdir(location.sessionsDir, { withFileTypes: true });
  } catch (err) {
    if (errnoOf(err) !== 'ENOENT') throw ioError(`cannot list ${location.sessionsDir}`, err, { path: location.sessionsDir });
  }
  const files = new Set<string>();
  const locked = new Set<string>();
  for (const dirent of dirents) {
    if (dirent.isDirectory() && dirent.name.endsWith(LOCK_SUFFIX)) locked.add(dirent.name.slice(0, -LOCK_SUFFIX.length));
    else if (dirent.isFile()) files.add(dirent.name);
  }

  const identities = new Map<string, EntryIdentity>();
  const entries: EntrySnapshot[] = [];
  const referenced = new Set<string>();
  for (const [key, entry] of Object.entries(store)) {
    const name = transcriptNameOf(location, entry);
    if (name !== null) referenced.add(name);
    identities.set(key, { sessionId: entry.sessionId, updatedAt: entry.updatedAt });
    entries.push({
      key,
      sessionId: String(entry.sessionId),
      updatedAt: typeof entry.updatedAt === 'number' && Number.isFinite(entry.updatedAt) ? entry.updatedAt : null,
      pinned: entry.pinned === true,
      model: modelOf(entry),
      transcript: { name, exists: name !== null && files.has(name), bytes: 0 },
    });
  }

  const archives: MaintenanceSnapshot['archives'][number][] = [];
  const unreferenced: MaintenanceSnapshot['unreferenced'][number][] = [];
  const storeBackups: MaintenanceSnapshot['storeBackups'][number][] = [];
  const backupPattern = new RegExp(`^${storeFileName.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\\.bak\\.(\\d+)$`);
  const toStat: { name: string; apply: (size: number, mtimeMs: number) => void }[] = [];
  for (const name of files) {
    const archive = parseArchiveName(name);
    if (archive !== null) {
      toStat.push({ name, apply: (bytes) => archives.push({ name, reason: archive.reason, archivedAt: archive.archivedAt, bytes }) });
      continue;
    }
    // doctor's kept originals fall under the same retention (and disk budget) as archives.
    const kept = parseKeptCopyName(name);
    if (kept !== null) {
      toStat.push({ name, apply: (bytes) => archives.push({ name, reason: kept.tag, archivedAt: kept.keptAt, bytes }) });
      continue;
    }
    const backup = backupPattern.exec(name);
    if (backup !== null) {
      toStat.push({ name, apply: (bytes) => storeBackups.push({ name, createdAt: Number(backup[1]), bytes }) });
      continue;
    }
    // A transcript nobody references and nobody holds: an orphan only the disk budget removes.
    if (name.endsWith(TRANSCRIPT_SUFFIX) && !referenced.has(name) && !locked.has(name)) {
      toStat.push({ name, apply: (bytes, mtimeMs) => unreferenced.push({ name, bytes, mtimeMs }) });
    }
  }
  const byName = new Map<string, EntrySnapshot[]>();
  for (const entry of entries) {
    if (entry.transcript.exists) {
      const list = byName.get(entry.transcript.name!) ?? [];
      list.push(entry);
      byName.set(entry.transcript.name!, list);
    }
  }
  for (const [name, list] of byName) {
    toStat.push({
      name,
      apply: (bytes) => {
        for (const entry of list) entry.transcript.bytes = bytes;
      },
    });
  }

  let done = 0;
  // The start counts too: a display decides from the total whether there is much to do.
  options.onProgress?.(0, toStat.length);
  await inPool(toStat, STAT_CONCURRENCY, async (item) => {
    const file = path.join(location.sessionsDir, item.name);
    try {
      const stats = await fsp.stat(file);
      item.apply(stats.size, stats.mtimeMs);
    } catch (err) {
      // Gone between readdir and stat (archived or removed by someone else): treat as missing.
      if (errnoOf(err) !== 'ENOENT') throw ioError(`cannot stat ${file}`, err, { path: file });
      for (const entry of byName.get(item.name) ?? []) entry.transcript.exists = false;
    }
    done += 1;
    if (done % 500 === 0) options.onProgress?.(done, toStat.length);
  });

  let storeBytes = 0;
  try {
    storeBytes = (await fsp.stat(location.storePath)).size;
  } catch (err) {
    if (errnoOf(err) !== 'ENOENT') throw ioError(`cannot stat ${location.storePath}`, err, { path: location.storePath });
  }

  const protectedKeys: ProtectedKey[] = [];
  for (const entry of entries) {
    if (entry.transcript.name !== null && locked.has(entry.transcript.name)) protectedKeys.push({ key: entry.key, reason: 'locked' });
  }
  // Running and queued sessions (the durable queue in the entries) are protected like locked ones.
  protectedKeys.push(...(await (options.busyKeys ?? queueBusyKeys)(location)));

  // Sorted so that the plan (and its JSON) does not depend on readdir order.
  archives.sort((a, b) => (a.name < b.name ? -1 : 1));
  unreferenced.sort((a, b) => (a.name < b.name ? -1 : 1));
  storeBackups.sort((a, b) => (a.name < b.name ? -1 : 1));
  return { snapshot: { storeFileName, storeBytes, entries, archives, unreferenced, storeBackups, protectedKeys }, identities };
}

// ---------------------------------------------------------------------------------------------
// Applying

export interface RemovalCandidate {
  key: string;
  identity: EntryIdentity;
  /** Transcript file name (null: the entry names no usable file). */
  transcriptName: string | null;
  /** Archive the transcript after removing the entry (false: another entry still uses the file). */
  archive?: boolean;
}

export interface RemovalOutcome {
  removed: { key: string; sessionId: string; archivedTo: string | null }[];
  skipped: { key: string; reason: string }[];
}

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

/**
 * Removes entries the way every removal must go: under the transcript's write lock, the store
 * row is deleted only if it is still the row that was planned on (same sessionId and updatedAt)
 * and still not pinned — checked inside the store mutator — and then the transcript is archived
 * as `.deleted.<ts>` (never deleted). Chunks keep the number of store writes and held locks low.
 */
export async function removeEntries(
  ctx: EngineContext,
  location: StoreLocation,
  candidates: readonly RemovalCandidate[],
  onProgress?: (done: number, total: number) => void,
): Promise<RemovalOutcome> {
  const outcome: RemovalOutcome = { removed: [], skipped: [] };
  const now = ctx.clock.now();
  for (let start = 0; start < candidates.length; start += REMOVE_CHUNK) {
    const chunk = candidates.slice(start, start + REMOVE_CHUNK);
    const lockable = chunk.filter((c) => c.transcriptName !== null);
    const locks = await holdTranscriptLocks(
      lockable.map((c) => ({ id: c.key, file: path.join(location.sessionsDir, c.transcriptName!), sessionKey: c.key })),
      (key) => sessionLockOptions(ctx, { sessionKey: key, runId: 'maintenance' }),
    );
    try {
      for (const [key, reason] of locks.failed) outcome.skipped.push({ key, reason });
      const ready = chunk.filter((c) => c.transcriptName === null || locks.held.has(c.key));
      const result = await updateSessionStore(location.storePath, (store) => {
        // Built afresh on every call: a mutator may be re-run on a fresh copy of the file.
        const removed: { key: string; sessionId: string }[] = [];
        const skipped: { key: string; reason: string }[] = [];
        for (const candidate of ready) {
          const current = Object.hasOwn(store, candidate.key) ? store[candidate.key] : undefined;
          if (current === undefined) skipped.push({ key: candidate.key, reason: 'gone' });
          else if (!Object.is(current.sessionId, candidate.identity.sessionId) || !Object.is(current.updatedAt, candidate.identity.updatedAt)) {
            skipped.push({ key: candidate.key, reason: 'changed' });
          } else if (current.pinned === true) skipped.push({ key: candidate.key, reason: 'pinned' });
          else {
            delete store[candidate.key];
            removed.push({ key: candidate.key, sessionId: String(current.sessionId) });
          }
        }
        return { removed, skipped };
      }, { skipUpkeep: true });
      outcome.skipped.push(...result.skipped);
      const byKey = new Map(ready.map((c) => [c.key, c]));
      const archived = new Map<string, string | null>();
      await inPool(result.removed, 16, async ({ key }) => {
        const candidate = byKey.get(key);
        const name = candidate?.archive === false ? null : (candidate?.transcriptName ?? null);
        archived.set(key, name === null ? null : await archiveFile(path.join(location.sessionsDir, name), 'deleted', now, { fs: ARCHIVE_FS }));
      });
      // One folder fsync makes the chunk's renames durable (instead of one per file). A crash
      // before it can only leave a transcript under its old name: an orphan, never a loss.
      if (archived.size > 0) await fsyncFolder(location.sessionsDir);
      for (const { key, sessionId } of result.removed) outcome.removed.push({ key, sessionId, archivedTo: archived.get(key) ?? null });
    } finally {
      await locks.release();
    }
    onProgress?.(Math.min(candidates.length, start + chunk.length), candidates.length);
  }
  return outcome;
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

export interface ApplyOutcome {
  removed: Map<string, { action: SessionAction; archivedTo: string | null }>;
  skipped: { key: string; reason: string }[];
  archived: number;
  purged: number;
  rotatedTo: string | null;
  budget: { removedFiles: number; removedEntries: number; freedBytes: number } | null;
}

/** Applies a plan step by step, in its order. */
export async function applyCleanupPlan(
  ctx: EngineContext,
  location: StoreLocation,
  built: BuiltSnapshot,
  plan: CleanupPlan,
  report: (stage: CleanupProgress['stage'], done: number, total: number) => void = () => undefined,
): Promise<ApplyOutcome> {
  const outcome: ApplyOutcome = { removed: new Map(), skipped: [], archived: 0, purged: 0, rotatedTo: null, budget: null };
  const sessionsByKey = new Map(plan.sessions.map((s) => [s.key, s]));
  const candidateOf = (key: string): RemovalCandidate => ({
    key,
    identity: built.identities.get(key)!,
    transcriptName: sessionsByKey.get(key)?.transcript.name ?? null,
  });

  // Steps 1–4: the removed entries (prune-stale, prune-missing, cap-overflow) leave the store and
  // their transcripts are archived, chunk by chunk, each under its transcript lock.
  const removals = plan.steps.flatMap((step) =>
    step.step === 'prune-stale' || step.step === 'prune-missing' || step.step === 'cap-overflow' ? step.keys.map((key) => ({ key, action: step.step })) : [],
  );
  if (removals.length > 0) {
    const actionOf = new Map(removals.map((r) => [r.key, r.action as SessionAction]));
    const archiveStep = plan.steps.find((s) => s.step === 'archive-transcripts');
    const toArchive = new Set(archiveStep?.step === 'archive-transcripts' ? archiveStep.files.map((f) => f.key) : []);
    const candidates = removals.map((r) => ({ ...candidateOf(r.key), archive: toArchive.has(r.key) }));
    const result = await removeEntries(ctx, location, candidates, (done, total) => report('remove', done, total));
    for (const removed of result.removed) {
      outcome.removed.set(removed.key, { action: actionOf.get(removed.key)!, archivedTo: removed.archivedTo });
      if (removed.archivedTo !== null) outcome.archived += 1;
    }
    outcome.skipped.push(...result.skipped);
  }

  for (const step of plan.steps) {
    if (step.step === 'purge-archives') {
      let done = 0;
      for (const file of step.files) {
        // Belt and braces: only a file whose name still says it is an archive that old is deleted.
        if (archivedAtOf(file.name) !== file.archivedAt) continue;
        if (await unlinkIfPresent(path.join(location.sessionsDir, file.name))) outcome.purged += 1;
        done += 1;
        if (done % 200 === 0) report('purge', done, step.files.length);
      }
    } else if (step.step === 'rotate-store') {
      outcome.rotatedTo = await rotateStoreFile(location, step.backupName, step.dropBackups);
    } else if (step.step === 'disk-budget') {
      outcome.budget = await applyBudget(ctx, location, step.removals, outcome, candidateOf, (done, total) => report('budget', done, total));
    }
  }
  return outcome;
}

/** When a file whose name says it is an archive or a doctor copy was made; null for any other name. */
export function archivedAtOf(name: string): number | null {
  return parseArchiveName(name)?.archivedAt ?? parseKeptCopyName(name)?.keptAt ?? null;
}

/** Keeps a copy of the store file as `<store>.bak.<ms>` and drops the rotated copies beyond the kept ones. */
async function rotateStoreFile(location: StoreLocation, backupName: string, dropBackups: readonly string[]): Promise<string | null> {
  const dir = location.sessionsDir;
  const prefix = `${path.basename(location.storePath)}.bak.`;
  let stamp = Number(backupName.slice(prefix.length));
  let target = path.join(dir, backupName);
  for (let attempt = 0; attempt < 1000; attempt += 1, stamp += 1) {
    target = path.join(dir, `${prefix}${stamp}`);
    try {
      // The store is only ever replaced by rename, so a hard link keeps exactly these bytes.
      await fsp.link(location.storePath, target);
      break;
    } catch (err) {
      const code = errnoOf(err);
      if (code === 'EEXIST') continue;
      if (code === 'ENOENT') return null;
      try {
        await fsp.copyFile(location.storePath, target, fsConstants.COPYFILE_EXCL);
        break;
      } catch (copyErr) {
        if (errnoOf(copyErr) === 'EEXIST') continue;
        throw ioError(`cannot copy ${location.storePath}`, copyErr, { path: location.storePath });
      }
    }
  }
  for (const name of dropBackups) {
    if (name.startsWith(prefix)) await unlinkIfPresent(path.join(dir, name));
  }
  return target;
}

async function applyBudget(
  ctx: EngineContext,
  location: StoreLocation,
  removals: readonly BudgetRemoval[],
  outcome: ApplyOutcome,
  candidateOf: (key: string) => RemovalCandidate,
  report: (done: number, total: number) => void,
): Promise<{ removedFiles: number; removedEntries: number; freedBytes: number }> {
  const budget = { removedFiles: 0, removedEntries: 0, freedBytes: 0 };
  const dir = location.sessionsDir;
  const now = ctx.clock.now();
  let done = 0;
  const tick = () => {
    done += 1;
    if (done % 100 === 0) report(done, removals.length);
  };
  // Entries are evicted in chunks (one store write each) but in the plan's order.
  const entryRemovals = removals.filter((r): r is Extract<BudgetRemoval, { kind: 'entry' }> => r.kind === 'entry');
  for (const removal of removals) {
    if (removal.kind === 'archive') {
      if (archivedAtOf(removal.name) !== null && (await unlinkIfPresent(path.join(dir, removal.name)))) {
        budget.removedFiles += 1;
        budget.freedBytes += removal.bytes;
      }
      tick();
    } else if (removal.kind === 'new-archive') {
      const archivedTo = outcome.removed.get(removal.key)?.archivedTo ?? null;
      if (archivedTo !== null && (await unlinkIfPresent(archivedTo))) {
        budget.removedFiles += 1;
        budget.freedBytes += removal.bytes;
      }
      tick();
    } else if (removal.kind === 'unreferenced') {
      if (await removeUnreferenced(ctx, location, removal.name, now)) {
        budget.removedFiles += 1;
        budget.freedBytes += removal.bytes;
      } else outcome.skipped.push({ key: removal.name, reason: 'referenced or busy' });
      tick();
    }
  }
  if (entryRemovals.length > 0) {
    const result = await removeEntries(ctx, location, entryRemovals.map((r) => candidateOf(r.key)));
    outcome.skipped.push(...result.skipped);
    const bytesOf = new Map(entryRemovals.map((r) => [r.key, r.bytes]));
    for (const removed of result.removed) {
      outcome.removed.set(removed.key, { action: 'evict-budget', archivedTo: removed.archivedTo });
      budget.removedEntries += 1;
      // The transcript was archived first; the budget asked for its bytes, so the archive goes.
      if (removed.archivedTo !== null && (await unlinkIfPresent(removed.archivedTo))) {
        budget.removedFiles += 1;
        budget.freedBytes += bytesOf.get(removed.key) ?? 0;
      }
      tick();
    }
  }
  return budget;
}

/**
 * An orphaned transcript is removed only if, with its write lock held, the store (re-read) still
 * does not reference it — an ingest that just created its entry wins. Archived first, then the
 * archive is deleted (the budget asked for the bytes).
 */
async function removeUnreferenced(ctx: EngineContext, location: StoreLocation, name: string, now: number): Promise<boolean> {
  const file = path.join(location.sessionsDir, path.basename(name));
  try {
    return await withLock(file, { ...sessionLockOptions(ctx, { runId: 'maintenance' }), acquireTimeoutMs: 0 }, () =>
      // Inside a store transaction: an ingest batch writes a new instance's transcript before its
      // row (and completes a dead batch's journal first), so only the store lock shows that the
      // file is really nobody's.
      transactSessionStore(location.storePath, async (store) => {
        for (const entry of Object.values(store)) if (transcriptNameOf(location, entry) === name) return false;
        const archivedTo = await archiveFile(file, 'deleted', now);
        return archivedTo !== null && (await unlinkIfPresent(archivedTo));
      }, { skipUpkeep: true }),
    );
  } catch (err) {
    if (err instanceof SwitchboardError && err.code === 'SESSION_BUSY') return false;
    throw err;
  }
}

