// `switchboard maintain`, the cron job: one housekeeping pass over every store —
// stale-lock removal, cron session retention, session cleanup and due daily/idle resets with no
// message arriving — one summary, failures collected.

import { promises as fsp } from 'node:fs';
import path from 'node:path';
import { SwitchboardError, asSwitchboardError, inPool, systemClock, type ErrorCode } from '../core/index.js';
import {
  dueResetOf,
  planCronRetention,
  planDueResets,
  resolveCronRetentionMs,
  resolveMaintainEveryMs,
  snapshotWithoutEntries,
  type MaintenanceMode,
  type MaintenanceSnapshot,
  type ResetCandidate,
  type StaleReason,
} from '../policy/index.js';
import {
  isUsableEntry,
  listLocks,
  lockPathFor,
  mayTakeOver,
  memoryVolumeFor,
  parseArchiveName,
  readSessionStore,
  releaseLock,
  transcriptSharing,
  type LockInfo,
  type SessionEntry,
  type StoreLocation,
} from '../store/index.js';
import { knownAgentIds, storeFor, type EngineContext } from './context.js';
import { handOffQueue, rotateInstance, turnBeforeReset, type BeforeResetReport } from './sessions.js';
import { buildMaintenanceSnapshot, unnamedTranscripts, type BusyKeysProvider } from './cleanup-snapshot.js';
import { transcriptNameOf } from './session-artifacts.js';
import { transcriptStartedAtOf } from './session-list.js';
import { removeEntries, type CleanupProgress } from './session-cleanup.js';
import { cleanupSettingsFor, cleanupStore, type CleanupStoreResult } from './session-cleanup-run.js';
import type { ExpiredEvent } from './queue-state.js';
import { finishInterruptedRotations, type FinishedRotation } from './interrupted-rotations.js';
import { findEmptyOrphans, findLeftovers, removeLeftover, type Leftover } from './leftovers.js';
import { listFolder } from './doctor/files.js';

const RESET_CONCURRENCY = 8;

export type MaintainStage = 'locks' | 'leftovers' | 'rotations' | 'cron-retention' | 'cleanup' | 'resets';

export interface MaintainOptions {
  dryRun?: boolean;
  /** Keys with running or queued work (from the durable queue, once it exists). */
  busyKeys?: BusyKeysProvider;
  onProgress?: (progress: CleanupProgress) => void;
}

export interface ReleasedLock {
  lockPath: string;
  targetPath: string;
  reason: 'stale' | 'over-held' | 'holder-dead';
  pid: number | null;
  sessionKey: string | null;
}

export interface ResetDone {
  agentId: string;
  sessionKey: string;
  reason: StaleReason;
  previousSessionId: string;
  /** The new instance; null in a dry run. */
  sessionId: string | null;
  archivedTo: string | null;
  /** The agent's turn before the reset (`session.reset.beforeReset`); absent when none is configured or in a dry run. */
  beforeReset?: BeforeResetReport;
  /** What waited for the old instance and expired with it (absent in a dry run). */
  expired?: ExpiredEvent[];
}

export interface ResetDeferred {
  agentId: string;
  sessionKey: string;
  sessionId: string;
  reason: StaleReason;
  /** Why it waits: an active run holds the session's write lock. */
  /** `busy`: the turn before the reset (session.reset.beforeReset) waits for a run or queue to finish. */
  deferredBecause: 'locked' | 'busy';
  holder: { pid: number | null; runId: string | null; ageMs: number | null };
}

export interface CronRemoval {
  agentId: string;
  sessionKey: string;
  sessionId: string;
  archivedTo: string | null;
}

export interface MaintainError {
  stage: MaintainStage;
  agentId: string | null;
  code: ErrorCode;
  message: string;
}

export interface MaintainReport {
  dryRun: boolean;
  now: string;
  locks: { released: ReleasedLock[]; kept: number };
  /** Temp files and lock tombstones killed processes left (engine/leftovers.ts): removed (in a dry run: found). */
  leftovers: { removed: { kind: Leftover['kind']; file: string }[] };
  /** Rotations a killed process left half done: the old instance's transcript, archived now. */
  rotations: { finished: FinishedRotation[] };
  cronRetention: { retentionMs: number | null; removed: CronRemoval[]; skipped: { agentId: string; sessionKey: string; reason: string }[] };
  cleanup: { allAgents: true; mode: MaintenanceMode; dryRun: boolean; stores: CleanupStoreResult[] };
  resets: {
    /** Sessions whose reset was due. */
    due: number;
    reset: ResetDone[];
    deferred: ResetDeferred[];
    /** Due when planned but not any more when applied (a message arrived, the entry went). */
    skipped: { agentId: string; sessionKey: string; reason: string }[];
  };
  errors: MaintainError[];
  ok: boolean;
}

export interface MaintainResult {
  report: MaintainReport;
  /** 0, or the exit code of the first failure. */
  exitCode: number;
}

function errorOf(stage: MaintainStage, agentId: string | null, err: unknown): MaintainError {
  // A file-system error is IO (74), as doctor reports it: an agent folder replaced by a file
  // made the leftovers stage's listing an INTERNAL error, and maintain exit 1.
  const error = asSwitchboardError(err);
  return { stage, agentId, code: error.code, message: error.message };
}

function isInside(dir: string, file: string): boolean {
  const relative = path.relative(dir, file);
  return relative === '' || (!relative.startsWith('..') && !path.isAbsolute(relative));
}

/** Every store of every configured agent, once each. */
function allStores(ctx: EngineContext): StoreLocation[] {
  const seen = new Set<string>();
  return knownAgentIds(ctx)
    .map((id) => storeFor(ctx, id))
    .filter((location) => (seen.has(location.storePath) ? false : (seen.add(location.storePath), true)));
}

/**
 * The leftovers of interrupted writes in one store's folder, removed (doctor's rule: older than a
 * minute, their process dead, their lock free). One that became busy again meanwhile is left.
 */
async function removeLeftovers(location: StoreLocation, liveLocks: ReadonlySet<string>, dryRun: boolean): Promise<{ kind: Leftover['kind']; file: string }[]> {
  const listing = await listFolder(location.sessionsDir);
  if (listing === null) return [];
  const now = systemClock.now();
  const found = await findLeftovers(location.storePath, listing, liveLocks, now);
  // Which transcripts are unnamed needs the store; a damaged one is doctor's, and so are they then.
  const store = await readSessionStore(location.storePath).catch((err: unknown) => {
    if (err instanceof SwitchboardError && err.code === 'STORE_CORRUPT') return null;
    throw err;
  });
  if (store !== null) found.push(...(await findEmptyOrphans(location.storePath, unnamedTranscripts(location, store, listing.files), liveLocks, now)));
  const removed: { kind: Leftover['kind']; file: string }[] = [];
  for (const leftover of found) {
    if (!leftover.removable) continue; // doctor reports it for a person
    if (!dryRun) {
      try {
        await removeLeftover(leftover);
      } catch (err) {
        if (err instanceof SwitchboardError && err.code === 'STORE_BUSY') continue;
        throw err;
      }
    }
    removed.push({ kind: leftover.kind, file: leftover.file });
  }
  return removed;
}

function releasableReason(info: LockInfo): ReleasedLock['reason'] | null {
  // What a waiter would take over (releaseLock's own rule): a live holder on this host is left
  // alone until its max hold, however stale its lock looks — a stopped process resumes.
  if (info.heldByThisProcess || !mayTakeOver(info, 'stale')) return null;
  if (info.holderAlive === false) return 'holder-dead';
  if (info.overHeld) return 'over-held';
  if (info.stale) return 'stale';
  return null;
}

/**
 * Runs the maintenance job. Order (each stage sees what the one before left):
 * 1. stale locks — only stale, over-held or dead-holder locks; a live, in-time lock is never touched
 *    (stale or not: a stopped holder is alive);
 *    then rotations a killed process left half done get their old transcript archived (the lock
 *    such a process held on it is gone by now);
 * 2. cron retention — cron-family entries idle longer than cron.sessionRetention;
 * 3. cleanup — `sessions cleanup` of every agent's store with the configured mode;
 * 4. due resets — daily/idle expiry without a message; a session whose write lock is held
 *    (an active run) is deferred to the next run, never rotated under the run.
 * Cleanup runs before resets so that a session about to be pruned is not first given a new,
 * empty instance (a reset sets updatedAt, which would keep it for another pruneAfter).
 */
export async function runMaintain(ctx: EngineContext, options: MaintainOptions = {}): Promise<MaintainResult> {
  const dryRun = options.dryRun === true;
  const now = ctx.clock.now();
  const stores = allStores(ctx);
  const errors: MaintainError[] = [];
  const staleMs = ctx.config.session?.writeLock?.staleMs;

  // 1. stale locks
  const locks: MaintainReport['locks'] = { released: [], kept: 0 };
  const releasedPaths = new Set<string>();
  const found = new Map<string, LockInfo>();
  try {
    const roots = [ctx.stateDir, ...stores.map((s) => s.sessionsDir).filter((dir) => !isInside(ctx.stateDir, dir))];
    for (const root of roots) for (const info of await listLocks(root, { staleMs })) found.set(info.lockPath, info);
    for (const info of found.values()) {
      const reason = releasableReason(info);
      if (reason === null) {
        locks.kept += 1;
        continue;
      }
      const record: ReleasedLock = { lockPath: info.lockPath, targetPath: info.targetPath, reason, pid: info.owner?.pid ?? null, sessionKey: info.owner?.sessionKey ?? null };
      if (dryRun) {
        locks.released.push(record);
        releasedPaths.add(info.lockPath);
        continue;
      }
      try {
        await releaseLock(info.lockPath, { staleMs });
        locks.released.push(record);
        releasedPaths.add(info.lockPath);
      } catch (err) {
        // Busy: it came back to life or changed hands meanwhile — that is a live lock, not a failure.
        if (err instanceof SwitchboardError && (err.code === 'SESSION_BUSY' || err.code === 'NOT_FOUND')) {
          if (err.code === 'SESSION_BUSY') locks.kept += 1;
          continue;
        }
        errors.push(errorOf('locks', null, err));
      }
    }
  } catch (err) {
    errors.push(errorOf('locks', null, err));
  }

  const leftovers: MaintainReport['leftovers'] = { removed: [] };
  const liveLocks = new Set([...found.keys()].filter((lockPath) => !releasedPaths.has(lockPath)));
  for (const location of stores) {
    try {
      leftovers.removed.push(...(await removeLeftovers(location, liveLocks, dryRun)));
    } catch (err) {
      errors.push(errorOf('leftovers', location.agentId, err));
    }
  }

  const rotations: MaintainReport['rotations'] = { finished: [] };
  for (const location of stores) {
    try {
      rotations.finished.push(...(await finishInterruptedRotations(ctx, location, { dryRun, releasedLocks: releasedPaths })));
    } catch (err) {
      errors.push(errorOf('rotations', location.agentId, err));
    }
  }

  // In a dry run, a lock that would be released does not protect its session.
  const withoutReleasedLocks = (snapshot: MaintenanceSnapshot, location: StoreLocation): MaintenanceSnapshot => {
    if (releasedPaths.size === 0) return snapshot;
    const lockOfKey = new Map(snapshot.entries.map((e) => [e.key, e.transcript.name === null ? null : lockPathFor(path.join(location.sessionsDir, e.transcript.name))]));
    return { ...snapshot, protectedKeys: snapshot.protectedKeys.filter((p) => p.reason !== 'locked' || !releasedPaths.has(lockOfKey.get(p.key) ?? '')) };
  };

  // 2. cron retention
  let retentionMs: number | null = null;
  try {
    retentionMs = resolveCronRetentionMs(ctx.config.cron);
  } catch (err) {
    // A bad cron.sessionRetention: this stage is skipped, the others still run.
    errors.push(errorOf('cron-retention', null, err));
  }
  const cronRetention: MaintainReport['cronRetention'] = { retentionMs, removed: [], skipped: [] };
  const cronRemovedKeys = new Map<string, string[]>();
  if (retentionMs !== null) {
    for (const location of stores) {
      try {
        const built = await buildMaintenanceSnapshot(location, { busyKeys: options.busyKeys });
        const snapshot = dryRun ? withoutReleasedLocks(built.snapshot, location) : built.snapshot;
        const keys = planCronRetention(snapshot, retentionMs, now);
        if (dryRun) {
          const byKey = new Map(snapshot.entries.map((e) => [e.key, e]));
          for (const key of keys) {
            const entry = byKey.get(key)!;
            cronRetention.removed.push({ agentId: location.agentId, sessionKey: key, sessionId: entry.sessionId, archivedTo: null });
          }
          cronRemovedKeys.set(location.storePath, keys);
          continue;
        }
        const names = new Map(snapshot.entries.map((e) => [e.key, e.transcript.name]));
        const outcome = await removeEntries(
          ctx,
          location,
          keys.map((key) => ({ key, identity: built.identities.get(key)!, transcriptName: names.get(key) ?? null })),
        );
        for (const removed of outcome.removed) cronRetention.removed.push({ agentId: location.agentId, sessionKey: removed.key, sessionId: removed.sessionId, archivedTo: removed.archivedTo });
        for (const skipped of outcome.skipped) cronRetention.skipped.push({ agentId: location.agentId, sessionKey: skipped.key, reason: skipped.reason });
      } catch (err) {
        errors.push(errorOf('cron-retention', location.agentId, err));
      }
    }
  }

  // 3. cleanup
  const cleanupRemoved = new Map<string, Set<string>>();
  let mode: MaintenanceMode = 'warn';
  const cleanupStores: CleanupStoreResult[] = [];
  try {
    const settings = cleanupSettingsFor(ctx);
    mode = settings.mode;
    for (const location of stores) {
      try {
        const summary = await cleanupStore(ctx, location, settings, {
          dryRun,
          busyKeys: options.busyKeys,
          onProgress: options.onProgress,
          adjustSnapshot: (snapshot, at) => snapshotWithoutEntries(withoutReleasedLocks(snapshot, at), cronRemovedKeys.get(at.storePath) ?? [], now),
        });
        cleanupStores.push(summary);
        // What cleanup removes (or, in a dry run of enforce mode, would remove) needs no reset.
        if (settings.mode === 'enforce') cleanupRemoved.set(location.storePath, new Set(summary.actions.map((a) => a.key)));
      } catch (err) {
        const error = asSwitchboardError(err);
        cleanupStores.push({ agentId: location.agentId, storePath: location.storePath, error: error.toJSON() });
        errors.push(errorOf('cleanup', location.agentId, err));
      }
    }
  } catch (err) {
    // Bad session.maintenance settings: nothing to clean with, the other stages still ran.
    errors.push(errorOf('cleanup', null, err));
  }

  // 4. due resets
  const resets: MaintainReport['resets'] = { due: 0, reset: [], deferred: [], skipped: [] };
  for (const location of stores) {
    try {
      const store = await readSessionStore(location.storePath);
      const gone = new Set([...(cronRemovedKeys.get(location.storePath) ?? []), ...(dryRun ? (cleanupRemoved.get(location.storePath) ?? []) : [])]);
      const sharing = transcriptSharing(store);
      const candidates: ResetCandidate[] = Object.entries(store)
        // A row of the wrong shape is never rotated here (doctor reports it): its names cannot be
        // trusted. Nor is one that shares its transcript: archiving it would take another's history.
        .filter(([key]) => !gone.has(key) && isUsableEntry(store, key, location.sessionsDir, sharing))
        .map(([key, entry]) => candidateOf(key, entry));
      // An entry without a start (OpenClaw's reset writes none) is measured from its header's time.
      const headerTimes = new Map<string, number>();
      for (const candidate of candidates) {
        const at = await transcriptStartedAtOf(location, store[candidate.key]!);
        if (at !== undefined) headerTimes.set(candidate.key, (candidate.transcriptStartedAt = at));
      }
      const due = planDueResets(candidates, ctx.config.session, now);
      resets.due += due.length;
      await inPool(due, RESET_CONCURRENCY, async (item) => {
        const entry = store[item.key]!;
        const name = transcriptNameOf(location, entry);
        const file = name === null ? null : path.join(location.sessionsDir, name);
        try {
          if (dryRun) {
            const lockPath = file === null ? null : lockPathFor(file);
            if (lockPath !== null && !releasedPaths.has(lockPath) && (await exists(lockPath))) {
              resets.deferred.push({ agentId: location.agentId, sessionKey: item.key, sessionId: item.sessionId, reason: item.staleReason, deferredBecause: 'locked', holder: { pid: null, runId: null, ageMs: null } });
            } else {
              resets.reset.push({ agentId: location.agentId, sessionKey: item.key, reason: item.staleReason, previousSessionId: item.sessionId, sessionId: null, archivedTo: null });
            }
            return;
          }
          const outcome = await rotateDue(ctx, location, item.key, item.sessionId, file, item.staleReason, headerTimes.get(item.key));
          if (outcome.kind === 'reset') resets.reset.push(outcome.done);
          else if (outcome.kind === 'deferred') resets.deferred.push({ agentId: location.agentId, sessionKey: item.key, sessionId: item.sessionId, reason: item.staleReason, deferredBecause: outcome.because, holder: outcome.holder });
          else resets.skipped.push({ agentId: location.agentId, sessionKey: item.key, reason: outcome.reason });
        } catch (err) {
          errors.push(errorOf('resets', location.agentId, err));
        }
      });
    } catch (err) {
      errors.push(errorOf('resets', location.agentId, err));
    }
  }

  const report: MaintainReport = {
    dryRun,
    now: new Date(now).toISOString(),
    locks,
    leftovers,
    rotations,
    cronRetention,
    cleanup: { allAgents: true, mode, dryRun, stores: cleanupStores },
    resets,
    errors,
    ok: errors.length === 0,
  };
  const first = errors[0];
  const exitCode = first === undefined ? 0 : new SwitchboardError(first.code, first.message).exitCode;
  return { report, exitCode };
}

function candidateOf(key: string, entry: SessionEntry, transcriptStartedAt?: number): ResetCandidate {
  return {
    key,
    sessionId: String(entry.sessionId),
    sessionStartedAt: entry.sessionStartedAt,
    lastInteractionAt: entry.lastInteractionAt,
    transcriptStartedAt,
    channel: entry.channel,
    chatType: entry.chatType,
    origin: (entry.origin ?? null) as ResetCandidate['origin'],
    deliveryContext: (entry.deliveryContext ?? null) as ResetCandidate['deliveryContext'],
  };
}

async function exists(file: string): Promise<boolean> {
  try {
    await fsp.stat(file);
    return true;
  } catch {
    return false;
  }
}


type RotateOutcome =
  | { kind: 'reset'; done: ResetDone }
  | { kind: 'deferred'; because: ResetDeferred['deferredBecause']; holder: ResetDeferred['holder'] }
  | { kind: 'skipped'; reason: string };

/**
 * A due reset through the one rotation shell, without waiting: a lock held by a live run means
 * deferred; inside the store update the entry must still be the planned instance and still be stale.
 */
async function rotateDue(ctx: EngineContext, location: StoreLocation, key: string, sessionId: string, file: string | null, staleReason: string, transcriptStartedAt?: number): Promise<RotateOutcome> {
  const beforeReset = await turnBeforeReset(ctx, location, key, sessionId, staleReason);
  // A session busy with a run or a queue gets its turn on a later run, like a locked one.
  if (beforeReset?.status === 'skipped' && beforeReset.reason === 'busy') return { kind: 'deferred', because: 'busy', holder: { pid: null, runId: null, ageMs: null } };
  const outcome = await rotateInstance(ctx, {
    location,
    key,
    sessionId,
    file,
    wait: false,
    runId: 'maintenance',
    note: 'applied by switchboard maintain',
    decide: (current, now) => {
      // The header read before the lock belongs to the instance planned; a newer one has its own start.
      const headerAt = current.sessionId === sessionId ? transcriptStartedAt : undefined;
      const reason = dueResetOf(candidateOf(key, current, headerAt), ctx.config.session, now);
      return reason === null ? { skip: 'fresh' } : { reason };
    },
  });
  if (beforeReset !== null) await handOffQueue(ctx, location, key);
  if (outcome.kind === 'busy') return { kind: 'deferred', because: 'locked', holder: outcome.holder };
  if (outcome.kind === 'skipped') return { kind: 'skipped', reason: outcome.reason };
  return {
    kind: 'reset',
    done: {
      agentId: location.agentId,
      sessionKey: key,
      reason: outcome.reason as StaleReason,
      previousSessionId: sessionId,
      sessionId: outcome.entry.sessionId,
      archivedTo: outcome.archivedTo,
      ...(beforeReset === null ? {} : { beforeReset }),
      expired: outcome.expired,
    },
  };
}

/** `session.maintenance.maintainEvery` (default 1h): how often `serve` runs this pass; null = never. */
export function maintainEveryMs(ctx: EngineContext): number | null {
  return resolveMaintainEveryMs(ctx.config.session?.maintenance);
}

/**
 * Archive retention inside serve's incognito volume (rotated incognito transcripts are archived
 * there and would otherwise live as long as the server): archives older than
 * resetArchiveRetention are dropped. Nothing else of the volume is touched. Returns how many.
 */
export function purgeIncognitoArchives(ctx: EngineContext): number {
  const retentionMs = cleanupSettingsFor(ctx).resetArchiveRetentionMs;
  const volume = ctx.incognitoRoot === undefined ? undefined : memoryVolumeFor(ctx.incognitoRoot);
  if (retentionMs === null || volume === undefined) return 0;
  const cutoff = ctx.clock.now() - retentionMs;
  let purged = 0;
  for (const file of volume.paths()) {
    const archive = parseArchiveName(path.basename(file));
    if (archive === null || archive.archivedAt >= cutoff) continue;
    volume.unlink(file);
    purged += 1;
  }
  return purged;
}
