// One `sessions cleanup` run: its options, the per-store plan → apply (the plan comes from policy/,
// the snapshot from cleanup-snapshot.ts, removal from session-cleanup.ts), and the summary in
// OpenClaw's shape that the CLI prints; one failing store does not stop the others.

import path from 'node:path';
import { SwitchboardError, asSwitchboardError, type ErrorCode } from '../core/index.js';
import {
  planCleanup,
  resolveMaintenanceSettings,
  type CleanupPlan,
  type DiskBudgetPlan,
  type MaintenanceMode,
  type MaintenanceSettings,
  type MaintenanceSnapshot,
  type PlannedSession,
  type SessionAction,
} from '../policy/index.js';
import { explicitSessionKeyAsTyped, normalizeExplicitSessionKey } from '../routing/index.js';
import type { StoreLocation } from '../store/index.js';
import { knownAgentIds, type EngineContext } from './context.js';
import { buildMaintenanceSnapshot, type BusyKeysProvider } from './cleanup-snapshot.js';
import { applyCleanupPlan, type ApplyOutcome, type CleanupProgress } from './session-cleanup.js';
import { selectStores, type StoreSelection } from './session-list.js';

export interface SessionCleanupOptions extends StoreSelection {
  dryRun?: boolean;
  /** `--enforce`: apply this run whatever session.maintenance.mode says. */
  enforce?: boolean;
  /** `--active-key`: never remove this session (the caller is using it). */
  activeKeys?: readonly string[];
  fixMissing?: boolean;
  busyKeys?: BusyKeysProvider;
  onProgress?: (progress: CleanupProgress) => void;
  /** Called with each store's plan (the CLI's text table shows every session of it). */
  onPlan?: (location: StoreLocation, plan: CleanupPlan) => void;
  /** Dry runs of `maintain`: the snapshot as the earlier maintain stages would leave it. */
  adjustSnapshot?: (snapshot: MaintenanceSnapshot, location: StoreLocation) => MaintenanceSnapshot;
}

/** One row of the per-session plan in the summary (sessions that are kept are left out). */
export interface CleanupAction {
  key: string;
  sessionId: string;
  action: Exclude<SessionAction, 'keep'>;
  updatedAt: number | null;
  ageMs: number | null;
  model: string | null;
  transcriptBytes: number;
}

/** The `diskBudget` of the JSON summary: exactly the plan's budget figures. */
export type DiskBudgetSummary = DiskBudgetPlan;

/** OpenClaw's cleanup summary plus a few additions (after `applied`). */
export interface CleanupStoreSummary {
  agentId: string;
  storePath: string;
  mode: MaintenanceMode;
  dryRun: boolean;
  beforeCount: number;
  afterCount: number;
  missing: number;
  pruned: number;
  capped: number;
  diskBudget: DiskBudgetSummary | null;
  wouldMutate: boolean;
  applied?: boolean;
  /** Entries found without a transcript file (removed only with --fix-missing). */
  missingTranscripts: number;
  /** Entries that are pinned, locked, running, queued or active: never removed. */
  protected: number;
  /** Entries of the wrong shape, or sharing another's transcript: never removed (see `doctor`). */
  unusable: number;
  /** Transcripts archived as `.deleted.<ts>` (planned, or done when applied). */
  archived: number;
  /** `.reset`/`.deleted` archives deleted for being older than resetArchiveRetention. */
  purgedArchives: number;
  /** The rotated copy of the store file made by this run, if any. */
  rotatedTo: string | null;
  /** Planned removals that apply left alone: the entry changed or became busy meanwhile. */
  skipped: { key: string; reason: string }[];
  actions: CleanupAction[];
}

export interface CleanupStoreFailure {
  agentId: string;
  storePath: string;
  error: { code: ErrorCode; message: string; hint?: string };
}

export type CleanupStoreResult = CleanupStoreSummary | CleanupStoreFailure;

export interface CleanupReport {
  mode: MaintenanceMode;
  dryRun: boolean;
  /** One result per selected store, in selection order; failures do not stop the others. */
  stores: CleanupStoreResult[];
  /** The exit code of the first failure; 0 when every store succeeded. */
  exitCode: number;
}

export function isCleanupFailure(result: CleanupStoreResult): result is CleanupStoreFailure {
  return 'error' in result;
}

/** Settings for this run: config, with `--enforce` forcing enforce mode. */
export function cleanupSettingsFor(ctx: EngineContext, enforce = false): MaintenanceSettings {
  const settings = resolveMaintenanceSettings(ctx.config.session?.maintenance);
  return enforce ? { ...settings, mode: 'enforce' } : settings;
}

/** Runs `sessions cleanup` over the selected stores; one failing store does not stop the others. */
export async function cleanupSessions(ctx: EngineContext, options: SessionCleanupOptions = {}): Promise<CleanupReport> {
  const settings = cleanupSettingsFor(ctx, options.enforce);
  const dryRun = options.dryRun === true;
  const stores: CleanupStoreResult[] = [];
  let exitCode = 0;
  for (const location of selectStores(ctx, options)) {
    try {
      stores.push(await cleanupStore(ctx, location, settings, { ...options, dryRun }));
    } catch (err) {
      // A file-system error is IO (74), never INTERNAL: the other stores' results still count.
      const error = asSwitchboardError(err);
      if (exitCode === 0) exitCode = error.exitCode;
      stores.push({ agentId: location.agentId, storePath: location.storePath, error: error.toJSON() });
    }
  }
  return { mode: settings.mode, dryRun, stores, exitCode };
}

/**
 * Active keys as the store spells them: explicit-key rules (a bare `foo` → `agent:<owner>:foo`),
 * and the key as typed too — a Signal group's or Matrix room's key keeps its case in the store,
 * and that is the key `sessions` lists (keeping too much is safe).
 */
export function normalizeActiveKeys(ctx: EngineContext, keys: readonly string[] | undefined): string[] {
  return (keys ?? []).flatMap((key) => {
    try {
      const normalized = normalizeExplicitSessionKey(key, ctx.table.owner);
      return [...new Set([normalized, explicitSessionKeyAsTyped(key, normalized)])];
    } catch (err) {
      // A bare key with no owner: it protects that key of every agent (keeping too much is safe).
      if (err instanceof SwitchboardError && err.code === 'NO_OWNER') {
        return knownAgentIds(ctx).flatMap((id) => [...new Set([`agent:${id}:${key.trim().toLowerCase()}`, `agent:${id}:${key.trim()}`])]);
      }
      return [key.trim()];
    }
  });
}

/** Plans (and, in enforce mode without dry-run, applies) the cleanup of one store. */
export async function cleanupStore(
  ctx: EngineContext,
  location: StoreLocation,
  settings: MaintenanceSettings,
  options: SessionCleanupOptions = {},
): Promise<CleanupStoreSummary> {
  const now = ctx.clock.now();
  const activeKeys = normalizeActiveKeys(ctx, options.activeKeys);
  const report = (stage: CleanupProgress['stage'], done: number, total: number) =>
    options.onProgress?.({ agentId: location.agentId, stage, done, total });
  const snapshot = await buildMaintenanceSnapshot(location, { busyKeys: options.busyKeys, onProgress: (done, total) => report('scan', done, total) });
  const apply = settings.mode === 'enforce' && options.dryRun !== true;
  // Only a dry run may look at an adjusted snapshot: apply must act on what is on disk.
  const planned = !apply && options.adjustSnapshot !== undefined ? options.adjustSnapshot(snapshot.snapshot, location) : snapshot.snapshot;
  const plan = planCleanup(planned, settings, now, { fixMissing: options.fixMissing, activeKeys });
  options.onPlan?.(location, plan);
  if (!apply) return summarize(location, settings.mode, options.dryRun === true, plan);
  const outcome = await applyCleanupPlan(ctx, location, snapshot, plan, report);
  return summarize(location, settings.mode, false, plan, outcome);
}

// Summary

function actionRow(session: PlannedSession, action: Exclude<SessionAction, 'keep'>): CleanupAction {
  return {
    key: session.key,
    sessionId: session.sessionId,
    action,
    updatedAt: session.updatedAt,
    ageMs: session.ageMs,
    model: session.model,
    transcriptBytes: session.transcript.bytes,
  };
}

/** OpenClaw's summary shape from the plan, corrected by what apply actually did. */
export function summarize(location: StoreLocation, mode: MaintenanceMode, dryRun: boolean, plan: CleanupPlan, applied?: ApplyOutcome): CleanupStoreSummary {
  const purgeStep = plan.steps.find((s) => s.step === 'purge-archives');
  const rotateStep = plan.steps.find((s) => s.step === 'rotate-store');
  const archiveStep = plan.steps.find((s) => s.step === 'archive-transcripts');
  let actions: CleanupAction[];
  let counts: { pruned: number; missing: number; capped: number; evicted: number };
  if (applied === undefined) {
    actions = plan.sessions.filter((s) => s.action !== 'keep').map((s) => actionRow(s, s.action as Exclude<SessionAction, 'keep'>));
    counts = { pruned: plan.pruned, missing: plan.missing, capped: plan.capped, evicted: plan.diskBudget?.removedEntries ?? 0 };
  } else {
    actions = plan.sessions.flatMap((s) => {
      const done = applied.removed.get(s.key);
      return done === undefined ? [] : [actionRow(s, done.action as Exclude<SessionAction, 'keep'>)];
    });
    const count = (action: SessionAction) => actions.filter((a) => a.action === action).length;
    counts = { pruned: count('prune-stale'), missing: count('prune-missing'), capped: count('cap-overflow'), evicted: count('evict-budget') };
  }
  let diskBudget: DiskBudgetSummary | null = null;
  if (plan.diskBudget !== null) {
    const b = plan.diskBudget;
    const done = applied === undefined ? null : (applied.budget ?? { removedFiles: 0, removedEntries: 0, freedBytes: 0 });
    diskBudget = {
      totalBytesBefore: b.totalBytesBefore,
      totalBytesAfter: done === null ? b.totalBytesAfter : b.totalBytesBefore - done.freedBytes,
      removedFiles: done === null ? b.removedFiles : done.removedFiles,
      removedEntries: done === null ? b.removedEntries : done.removedEntries,
      freedBytes: done === null ? b.freedBytes : done.freedBytes,
      maxBytes: b.maxBytes,
      highWaterBytes: b.highWaterBytes,
      overBudget: b.overBudget,
      protectedBytes: b.protectedBytes,
    };
  }
  return {
    agentId: location.agentId,
    storePath: location.storePath,
    mode,
    dryRun,
    beforeCount: plan.beforeCount,
    afterCount: plan.beforeCount - counts.pruned - counts.missing - counts.capped - counts.evicted,
    missing: counts.missing,
    pruned: counts.pruned,
    capped: counts.capped,
    diskBudget,
    wouldMutate: plan.wouldMutate,
    ...(applied !== undefined ? { applied: true } : {}),
    missingTranscripts: plan.missingTranscripts,
    protected: plan.protectedCount,
    unusable: plan.unusableCount,
    archived: applied === undefined ? (archiveStep?.step === 'archive-transcripts' ? archiveStep.files.length : 0) : applied.archived,
    purgedArchives: applied === undefined ? (purgeStep?.step === 'purge-archives' ? purgeStep.files.length : 0) : applied.purged,
    rotatedTo:
      applied === undefined
        ? rotateStep?.step === 'rotate-store'
          ? path.join(location.sessionsDir, rotateStep.backupName)
          : null
        : applied.rotatedTo,
    skipped: applied?.skipped ?? [],
    actions,
  };
}
