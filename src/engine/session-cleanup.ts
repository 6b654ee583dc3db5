// The file side of session cleanup, shared by `sessions cleanup` (session-cleanup-run.ts), maintain
// and the cleanup on write: applying a plan made on the snapshot of cleanup-snapshot.ts — archiving
// before anything leaves, re-checking every entry under its lock.

import { constants as fsConstants, promises as fsp } from 'node:fs';
import path from 'node:path';
import { SwitchboardError, errnoOf, inPool, ioError } from '../core/index.js';
import type { BudgetRemoval, CleanupPlan, SessionAction } from '../policy/index.js';
import { archiveFile, readSessionStore, transactSessionStore, updateSessionStore, withLock, type StoreLocation } from '../store/index.js';
import { ARCHIVE_FS, archivedAtOf, fsyncFolder, holdTranscriptLocks, unlinkIfPresent } from './cleanup-files.js';
import type { BuiltSnapshot, EntryIdentity } from './cleanup-snapshot.js';
import { removeTrajectoryArtifacts, storeReferences } from './session-artifacts.js';
import { sessionLockOptions, storeWriteOptions, type EngineContext } from './context.js';

/**
 * Entries removed per store write; each chunk holds its transcripts' locks meanwhile. Taking and
 * releasing a lock (~10 file operations) dominates the cost, not the store rewrite.
 */
const REMOVE_CHUNK = 512;

export interface CleanupProgress {
  agentId: string;
  stage: 'scan' | 'remove' | 'purge' | 'budget';
  done: number;
  total: number;
}

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
      const result = await updateSessionStore(location.storePath, (store, tx) => {
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
            tx.removeEntry(store, candidate.key, now);
            removed.push({ key: candidate.key, sessionId: String(current.sessionId) });
          }
        }
        return { removed, skipped };
      }, storeWriteOptions(ctx, { skipUpkeep: true }));
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
    // What the store names now: a trajectory-shaped name may be another entry's own transcript.
    const named = storeReferences(location, await readSessionStore(location.storePath).catch(() => ({}))).transcripts;
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
      // With it go OpenClaw's trajectory capture and pointer of that instance, as its own budget
      // deletes them with an evicted entry (checkpoints become unreferenced, for a later pass).
      const transcriptName = candidateOf(removed.key).transcriptName;
      if (transcriptName !== null) {
        const artifacts = await removeTrajectoryArtifacts(dir, transcriptName, named);
        budget.removedFiles += artifacts.files;
        budget.freedBytes += artifacts.bytes;
      }
      tick();
    }
  }
  return budget;
}

/**
 * An orphaned transcript (or an OpenClaw artifact of an instance no entry names) is removed only
 * if, with its write lock held, the store (re-read) still does not reference it — an ingest that
 * just created its entry wins. Archived first, then the archive is deleted (the budget asked for
 * the bytes).
 */
async function removeUnreferenced(ctx: EngineContext, location: StoreLocation, name: string, now: number): Promise<boolean> {
  const file = path.join(location.sessionsDir, path.basename(name));
  try {
    return await withLock(file, { ...sessionLockOptions(ctx, { runId: 'maintenance' }), acquireTimeoutMs: 0 }, () =>
      // Inside a store transaction: an ingest batch writes a new instance's transcript before its
      // row (and completes a dead batch's journal first), so only the store lock shows that the
      // file is really nobody's.
      transactSessionStore(location.storePath, async (store) => {
        if (storeReferences(location, store).isReferenced(path.basename(name))) return false;
        const archivedTo = await archiveFile(file, 'deleted', now);
        return archivedTo !== null && (await unlinkIfPresent(archivedTo));
      }, storeWriteOptions(ctx, { skipUpkeep: true })),
    );
  } catch (err) {
    if (err instanceof SwitchboardError && err.code === 'SESSION_BUSY') return false;
    throw err;
  }
}

