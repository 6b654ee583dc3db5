// Maintenance without cron: in `enforce` mode every write of a store keeps its caps
// (`maxEntries`, `pruneAfter` and the disk budget `maxDiskBytes`/`highWaterBytes`), inside the one
// update path (sessions-store.ts calls this upkeep on the batch's result, under the store lock),
// as OpenClaw does on every store save.
//
// The cost does not grow with the store. The entry count is checked on every write; the entry
// pass (a plan over the entries in memory, by the same rules as `sessions cleanup`) runs only when
// the store is over `maxEntries` or when the `pruneAfter` scan is due (at most once per
// PRUNE_SCAN_INTERVAL_MS per store). The disk budget is kept with a per-process running estimate
// of the removable bytes of the sessions folder: measured by one scan (the snapshot of `sessions
// cleanup`), then grown on each write by one stat per session the batch touched; the scan is
// repeated at most once per BUDGET_MEASURE_INTERVAL_MS, or sooner when the estimate passes
// maxDiskBytes — and that scan plans the budget with the same rules (protected sessions never
// removed, oldest first, down to highWaterBytes) and applies it here. Archive retention and store
// rotation are left to `maintain` (cron, or `serve`'s schedule).

import path from 'node:path';
import { promises as fsp } from 'node:fs';
import {
  planCleanup,
  resolveMaintenanceSettings,
  type BudgetRemoval,
  type CleanupPlan,
  type EntrySnapshot,
  type MaintenanceSettings,
  type MaintenanceSnapshot,
  type PlannedSession,
  type ProtectedKey,
} from '../policy/index.js';
import { archiveFile, isInMemory, lockQueueState, setStoreUpkeepProvider, type SessionStore, type StoreLocation, type StoreTransaction, type StoreUpkeep } from '../store/index.js';
import { sessionLockOptions, type EngineContext } from './context.js';
import { busyKeysIn } from './queue.js';
import { ARCHIVE_FS, archivedAtOf, fsyncFolder, holdTranscriptLocks, unlinkIfPresent, type HeldLocks } from './cleanup-files.js';
import { buildMaintenanceSnapshot, sharedKeysIn } from './cleanup-snapshot.js';
import { namedTranscripts, removeTrajectoryArtifacts, transcriptNameOf } from './session-artifacts.js';

/** How often, per store and process, the write path looks for entries older than pruneAfter. */
const PRUNE_SCAN_INTERVAL_MS = 60_000;
/**
 * Entries one write removes at most, oldest first: a store far over its limits (enforce just
 * turned on) comes down over the next writes and the scheduled `maintain`, and no single write
 * takes thousands of transcript locks.
 */
const MAX_REMOVALS_PER_WRITE = 256;
/** Plans tried per write when candidates turn out busy (each busy one is then protected). */
const MAX_PLAN_ROUNDS = 3;
/**
 * How often, per store and process, the disk estimate is measured again by a scan even when it
 * says the budget is kept (it cannot see what other processes write). An estimate that passes
 * maxDiskBytes asks for a scan sooner.
 */
const BUDGET_MEASURE_INTERVAL_MS = 60_000;
/**
 * After an early scan that found the budget kept (the estimate had drifted: a session locked by
 * another process grew, or a file counted before is protected now), the next early scan waits for
 * this share of maxDiskBytes (or a quarter of the hysteresis, if more) beyond it: wasted scans
 * then follow bytes written, never the number of writes.
 */
const FALSE_ALARM_SLACK = 0.05;

/** The running estimate of one store's removable bytes (what the disk budget counts). */
interface DiskEstimate {
  bytes: number;
  measuredAt: number;
  /** The estimate above which a write asks for a scan before the interval is over. */
  scanAbove: number;
  /** False until the scan succeeded: a failed one leaves nothing to grow (the next is due in a minute). */
  measured: boolean;
  /** Transcript name → bytes when last seen. */
  sizes: Map<string, number>;
  /** Entry key → updatedAt when last seen: a changed one is a session the batch touched. */
  seen: Map<string, unknown>;
}

/**
 * Installs the write-path upkeep for the stores of this context (stored ones; the incognito
 * volume is left to the schedule). With `mode: warn` (the default) it installs nothing.
 */
export function keepCapsOnWrite(ctx: EngineContext): void {
  // A bad session.maintenance value throws CONFIG_INVALID here: enforce mode never turns itself
  // off without a word (the CLI has refused such a config before any command acts).
  const settings: MaintenanceSettings = resolveMaintenanceSettings(ctx.config.session?.maintenance);
  if (settings.mode !== 'enforce' || (settings.maxEntries === null && settings.pruneAfterMs === null && settings.maxDiskBytes === null)) {
    setStoreUpkeepProvider(null);
    return;
  }
  const lastPruneScan = new Map<string, number>();
  const estimates = new Map<string, DiskEstimate>();
  setStoreUpkeepProvider((storePath) => (isInMemory(storePath) ? null : upkeepFor(ctx, settings, storePath, lastPruneScan, estimates)));
}

function upkeepFor(
  ctx: EngineContext,
  settings: MaintenanceSettings,
  storePath: string,
  lastPruneScan: Map<string, number>,
  estimates: Map<string, DiskEstimate>,
): StoreUpkeep {
  return async (store, tx, touched) => {
    const now = ctx.clock.now();
    // agentId is not needed by the rules below; the folder is the store's.
    const location: StoreLocation = { agentId: '', storePath, sessionsDir: path.dirname(storePath) };
    const measureDue = settings.maxDiskBytes !== null && (await budgetMeasureDue(location, store, estimates.get(storePath), now));
    const overCap = settings.maxEntries !== null && countOver(store, settings.maxEntries);
    const scanDue = settings.pruneAfterMs !== null && !(now - (lastPruneScan.get(storePath) ?? Number.NEGATIVE_INFINITY) < PRUNE_SCAN_INTERVAL_MS);
    if (!overCap && !scanDue && !measureDue) return null;
    if (scanDue) lastPruneScan.set(storePath, now);
    if (!measureDue) return removeOverCaps(ctx, settings, location, store, tx, now, null, touched);
    // One scan measures the folder and plans entry caps and budget together, as `sessions cleanup` does.
    const previous = estimates.get(storePath);
    const earlyScan = previous !== undefined && now - previous.measuredAt < BUDGET_MEASURE_INTERVAL_MS;
    const maxDiskBytes = settings.maxDiskBytes!;
    const estimate: DiskEstimate = { bytes: 0, measuredAt: now, scanAbove: maxDiskBytes, measured: false, sizes: new Map(), seen: new Map() };
    // In place before the scan: a scan that fails (upkeep is best effort) is tried again in a minute, not on every write.
    estimates.set(storePath, estimate);
    const built = await buildMaintenanceSnapshot(location, { store, busyKeys: async () => busyKeysIn(store) });
    estimate.measured = true;
    for (const entry of built.snapshot.entries) {
      estimate.seen.set(entry.key, store[entry.key]?.updatedAt);
      if (entry.transcript.name !== null) estimate.sizes.set(entry.transcript.name, entry.transcript.bytes);
    }
    const finish = await removeOverCaps(ctx, settings, location, store, tx, now, built.snapshot, touched, (plan) => {
      const budget = plan.diskBudget;
      estimate.bytes = budget === null ? 0 : budget.totalBytesAfter;
      if (earlyScan && budget !== null && !budget.overBudget) {
        const slack = Math.max(Math.floor(maxDiskBytes * FALSE_ALARM_SLACK), Math.floor((maxDiskBytes - (settings.highWaterBytes ?? maxDiskBytes)) / 4), 1);
        estimate.scanAbove = maxDiskBytes + slack;
      }
    });
    return finish;
  };
}

/**
 * Grows the estimate by what the unprotected sessions this batch touched (their updatedAt changed)
 * now hold on disk — one stat each — and says whether the folder must be measured (and the budget
 * planned). The pass over the entries is in memory only, cheaper than the serialization every
 * write does anyway.
 */
async function budgetMeasureDue(location: StoreLocation, store: SessionStore, estimate: DiskEstimate | undefined, now: number): Promise<boolean> {
  if (estimate === undefined || !(now - estimate.measuredAt < BUDGET_MEASURE_INTERVAL_MS)) return true;
  if (!estimate.measured) return false;
  for (const key in store) {
    if (!Object.hasOwn(store, key)) continue;
    const entry = store[key]!;
    if (estimate.seen.has(key) && Object.is(estimate.seen.get(key), entry.updatedAt)) continue;
    estimate.seen.set(key, entry.updatedAt);
    const name = transcriptNameOf(location, entry);
    // Pinned, running and queued sessions do not count toward the budget (the rule of planCleanup).
    if (name === null || entry.pinned === true || busyKeysIn({ [key]: entry }).length > 0) continue;
    const bytes = await fsp.stat(path.join(location.sessionsDir, name)).then((s) => s.size, () => 0);
    // A new instance's file is new bytes; the old one's stays counted (it is an archive now).
    estimate.bytes += bytes - (estimate.sizes.get(name) ?? 0);
    estimate.sizes.set(name, bytes);
  }
  return estimate.bytes > estimate.scanAbove;
}

/** Whether the store has more than `max` entries (stops counting there). */
function countOver(store: SessionStore, max: number): boolean {
  let count = 0;
  for (const key in store) {
    if (Object.hasOwn(store, key) && ++count > max) return true;
  }
  return false;
}

/**
 * Plans with the rules of `sessions cleanup` (pinned, running and queued sessions are never
 * removed; oldest first) on the entries in memory — or, when the folder was just measured
 * (`measured`), on that snapshot with the disk budget too — takes the write lock of each
 * transcript to go without waiting (a held lock means a run is writing: that session stays),
 * removes those entries from the batch's result and, once the file is written, archives their
 * transcripts as `.deleted.<ts>` — as removeEntries does — and deletes what the budget asked for,
 * as applyBudget does.
 */
async function removeOverCaps(
  ctx: EngineContext,
  settings: MaintenanceSettings,
  location: StoreLocation,
  store: SessionStore,
  tx: StoreTransaction,
  now: number,
  measured: MaintenanceSnapshot | null,
  touched: () => ReadonlySet<string>,
  onPlan: (plan: CleanupPlan) => void = () => undefined,
) {
  const entries: readonly EntrySnapshot[] =
    measured?.entries ??
    Object.entries(store).map(([key, entry]) => {
      const name = transcriptNameOf(location, entry);
      return {
        key,
        sessionId: String(entry.sessionId),
        updatedAt: typeof entry.updatedAt === 'number' && Number.isFinite(entry.updatedAt) ? entry.updatedAt : null,
        pinned: entry.pinned === true,
        model: null,
        // Not stat-ed: an entry's transcript counts as present (only `--fix-missing` acts on that).
        transcript: { name, exists: name !== null, bytes: 0 },
      };
    });
  const protectedKeys: ProtectedKey[] = measured === null ? [...busyKeysIn(store), ...sharedKeysIn(store)] : [...measured.protectedKeys];
  const withBudget = measured !== null && settings.maxDiskBytes !== null;
  const limits = {
    ...settings,
    rotateBytes: null,
    resetArchiveRetentionMs: null,
    maxDiskBytes: withBudget ? settings.maxDiskBytes : null,
    highWaterBytes: withBudget ? settings.highWaterBytes : null,
  };
  // The budget never evicts a session this very write records into (OpenClaw's budget spares its
  // activeSessionKey likewise): its bytes still count, it is just the last to go — at a later
  // write. Evicted here, a message was answered `persisted` after its transcript was deleted.
  // Caps and pruning archive what they remove, so they still apply to it.
  const leaving: PlannedSession[] = [];
  const toArchive = new Set<string>();
  const held: HeldLocks[] = [];
  let budgetRemovals: BudgetRemoval[] = [];
  const release = async (): Promise<void> => {
    for (const locks of held) await locks.release();
  };
  const fileOf = (name: string): string => path.join(location.sessionsDir, name);
  try {
    // A busy transcript lock (a run is writing) protects its session like `sessions cleanup`'s
    // snapshot does: it is planned again with that session locked, so the next oldest goes.
    for (let round = 0; round < MAX_PLAN_ROUNDS; round += 1) {
      const plan = planCleanup(
        {
          storeFileName: path.basename(location.storePath),
          storeBytes: 0,
          entries,
          archives: measured?.archives ?? [],
          unreferenced: measured?.unreferenced ?? [],
          storeBackups: [],
          protectedKeys,
        },
        limits,
        now,
      );
      onPlan(plan);
      const budgetStep = plan.steps.find((step) => step.step === 'disk-budget');
      budgetRemovals = budgetStep?.step === 'disk-budget' ? budgetStep.removals : [];
      const taken = new Set(leaving.map((s) => s.key));
      const fresh = plan.sessions
        .filter((s) => (s.action === 'prune-stale' || s.action === 'cap-overflow' || (s.action === 'evict-budget' && !touched().has(s.key))) && !taken.has(s.key))
        .sort((a, b) => (a.updatedAt ?? Number.NEGATIVE_INFINITY) - (b.updatedAt ?? Number.NEGATIVE_INFINITY))
        .slice(0, Math.max(0, MAX_REMOVALS_PER_WRITE - leaving.length));
      for (const step of plan.steps) if (step.step === 'archive-transcripts') for (const file of step.files) toArchive.add(file.key);
      // The budget's evictions are archived too (then the archive deleted, below).
      for (const s of fresh) if (s.action === 'evict-budget') toArchive.add(s.key);
      if (fresh.length === 0) break;
      // Held or awaited in this process (maybe by the very caller of this write, whose nested
      // acquire would re-enter): in use, like a lock held elsewhere.
      const inUse = fresh.filter((s) => s.transcript.name !== null && isInUse(fileOf(s.transcript.name))).map((s) => s.key);
      const lockable = fresh.filter((s) => s.transcript.name !== null && !inUse.includes(s.key));
      const locks = await holdTranscriptLocks(
        lockable.map((s) => ({ id: s.key, file: fileOf(s.transcript.name!), sessionKey: s.key })),
        (key) => sessionLockOptions(ctx, { sessionKey: key, runId: 'maintenance' }),
      );
      held.push(locks);
      leaving.push(...fresh.filter((s) => s.transcript.name === null || locks.held.has(s.key)));
      const busy = [...inUse, ...locks.failed.keys()];
      if (busy.length === 0) break;
      for (const key of busy) protectedKeys.push({ key, reason: 'locked' });
    }
  } catch (err) {
    await release();
    throw err;
  }
  // Orphaned transcripts the budget removes: under their write lock, taken without waiting. The
  // store lock is held and the snapshot was made from this very store, so nobody references them.
  const orphans = budgetRemovals.filter((r) => r.kind === 'unreferenced' && !isInUse(fileOf(r.name)));
  let orphanLocks: HeldLocks | null = null;
  try {
    if (orphans.length > 0) {
      orphanLocks = await holdTranscriptLocks(
        orphans.map((r) => ({ id: r.name, file: fileOf(r.name), sessionKey: '' })),
        () => sessionLockOptions(ctx, { runId: 'maintenance' }),
      );
      held.push(orphanLocks);
    }
  } catch (err) {
    await release();
    throw err;
  }
  const removed: { key: string; name: string | null; evicted: boolean }[] = [];
  for (const session of leaving) {
    const entry = store[session.key];
    // The entry read in this very lock: still the one planned on, still not pinned.
    if (entry === undefined || entry.pinned === true || String(entry.sessionId) !== session.sessionId) continue;
    tx.removeEntry(store, session.key, now);
    removed.push({ key: session.key, name: toArchive.has(session.key) ? session.transcript.name : null, evicted: session.action === 'evict-budget' });
  }
  const fileRemovals = budgetRemovals.filter((r) => r.kind === 'archive' || r.kind === 'new-archive' || (r.kind === 'unreferenced' && orphanLocks?.held.has(r.name) === true));
  if (removed.length === 0 && fileRemovals.length === 0) {
    await release();
    return null;
  }
  return async (written: boolean) => {
    try {
      if (!written && removed.length > 0) return;
      const archivedTo = new Map<string, string>();
      let changed = 0;
      for (const { key, name } of removed) {
        if (name === null) continue;
        // A transcript left under its name by a failure here is an orphan (doctor, the budget), never a loss.
        const to = await archiveFile(fileOf(name), 'deleted', now, { fs: ARCHIVE_FS }).catch(() => null);
        if (to !== null) archivedTo.set(key, to);
      }
      changed += archivedTo.size;
      // The budget asked for these bytes: the archives go (those of the sessions it evicted too).
      for (const r of fileRemovals) {
        if (r.kind === 'archive') {
          if (archivedAtOf(r.name) !== null && (await unlinkIfPresent(fileOf(r.name)).catch(() => false))) changed += 1;
        } else if (r.kind === 'new-archive') {
          const to = archivedTo.get(r.key);
          if (to !== undefined && (await unlinkIfPresent(to).catch(() => false))) changed += 1;
        } else if (r.kind === 'unreferenced') {
          const to = await archiveFile(fileOf(r.name), 'deleted', now, { fs: ARCHIVE_FS }).catch(() => null);
          if (to !== null && (await unlinkIfPresent(to).catch(() => false))) changed += 1;
        }
      }
      // What the entries left still name: a trajectory-shaped name may be one's own transcript.
      const named = removed.some((r) => r.evicted) ? namedTranscripts(location, store) : new Set<string>();
      for (const { key, name, evicted } of removed) {
        const to = archivedTo.get(key);
        if (evicted && to !== undefined && (await unlinkIfPresent(to).catch(() => false))) changed += 1;
        // OpenClaw's budget deletes an evicted entry's trajectory capture and pointer with it.
        if (evicted && name !== null) changed += (await removeTrajectoryArtifacts(location.sessionsDir, name, named).catch(() => ({ files: 0 }))).files;
      }
      if (changed > 0) await fsyncFolder(location.sessionsDir);
    } finally {
      await release();
    }
  };
}

function isInUse(file: string): boolean {
  const state = lockQueueState(file);
  return state.heldInProcess || state.waiting > 0;
}
