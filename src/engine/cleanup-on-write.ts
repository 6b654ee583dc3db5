// Maintenance without cron: in `enforce` mode every write of a store keeps its entry caps
// (`maxEntries`, `pruneAfter`), inside the one update path (sessions-store.ts calls this upkeep
// on the batch's result, under the store lock), as OpenClaw does on every store save.
//
// The cost does not grow with the store: nothing is stat-ed or read from disk. The entry count is
// checked on every write; the full pass (a plan over the entries in memory, by the same rules as
// `sessions cleanup`) runs only when the store is over `maxEntries` or when the `pruneAfter` scan
// is due (at most once per PRUNE_SCAN_INTERVAL_MS per store). What needs the disk — the disk
// budget, archive retention, store rotation — is left to `maintain` (cron, or `serve`'s schedule).

import path from 'node:path';
import { planCleanup, resolveMaintenanceSettings, type MaintenanceSettings, type PlannedSession, type ProtectedKey } from '../policy/index.js';
import { archiveFile, isInMemory, lockQueueState, setStoreUpkeepProvider, type SessionStore, type StoreLocation, type StoreUpkeep } from '../store/index.js';
import { sessionLockOptions, type EngineContext } from './context.js';
import { busyKeysIn } from './queue.js';
import { ARCHIVE_FS, fsyncFolder, holdTranscriptLocks, transcriptNameOf, type HeldLocks } from './session-cleanup.js';

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
 * Installs the write-path upkeep for the stores of this context (stored ones; the incognito
 * volume is left to the schedule). With `mode: warn` (the default) it installs nothing.
 */
export function keepCapsOnWrite(ctx: EngineContext): void {
  let settings: MaintenanceSettings;
  try {
    settings = resolveMaintenanceSettings(ctx.config.session?.maintenance);
  } catch {
    // A bad session.maintenance value is CONFIG_INVALID for `config validate`, `sessions cleanup`
    // and `maintain`, as before; it does not stop every other command from writing.
    setStoreUpkeepProvider(null);
    return;
  }
  if (settings.mode !== 'enforce' || (settings.maxEntries === null && settings.pruneAfterMs === null)) {
    setStoreUpkeepProvider(null);
    return;
  }
  const lastPruneScan = new Map<string, number>();
  setStoreUpkeepProvider((storePath) => (isInMemory(storePath) ? null : upkeepFor(ctx, settings, storePath, lastPruneScan)));
}

function upkeepFor(ctx: EngineContext, settings: MaintenanceSettings, storePath: string, lastPruneScan: Map<string, number>): StoreUpkeep {
  return async (store) => {
    const now = ctx.clock.now();
    const overCap = settings.maxEntries !== null && countOver(store, settings.maxEntries);
    const scanDue = settings.pruneAfterMs !== null && !(now - (lastPruneScan.get(storePath) ?? Number.NEGATIVE_INFINITY) < PRUNE_SCAN_INTERVAL_MS);
    if (!overCap && !scanDue) return null;
    if (scanDue) lastPruneScan.set(storePath, now);
    // agentId is not needed by the rules below; the folder is the store's.
    const location: StoreLocation = { agentId: '', storePath, sessionsDir: path.dirname(storePath) };
    return removeOverCaps(ctx, settings, location, store, now);
  };
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
 * removed; oldest first) on the entries in memory, takes the write lock of each transcript to go
 * without waiting (a held lock means a run is writing: that session stays), removes those entries
 * from the batch's result and, once the file is written, archives their transcripts as
 * `.deleted.<ts>` — as removeEntries does.
 */
async function removeOverCaps(ctx: EngineContext, settings: MaintenanceSettings, location: StoreLocation, store: SessionStore, now: number) {
  const entries = Object.entries(store).map(([key, entry]) => {
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
  const protectedKeys: ProtectedKey[] = busyKeysIn(store);
  const limits = { ...settings, rotateBytes: null, resetArchiveRetentionMs: null, maxDiskBytes: null, highWaterBytes: null };
  const leaving: PlannedSession[] = [];
  const toArchive = new Set<string>();
  const held: HeldLocks[] = [];
  const release = async (): Promise<void> => {
    for (const locks of held) await locks.release();
  };
  try {
    // A busy transcript lock (a run is writing) protects its session like `sessions cleanup`'s
    // snapshot does: it is planned again with that session locked, so the next oldest goes.
    for (let round = 0; round < MAX_PLAN_ROUNDS; round += 1) {
      const plan = planCleanup(
        { storeFileName: path.basename(location.storePath), storeBytes: 0, entries, archives: [], unreferenced: [], storeBackups: [], protectedKeys },
        limits,
        now,
      );
      const taken = new Set(leaving.map((s) => s.key));
      const fresh = plan.sessions
        .filter((s) => (s.action === 'prune-stale' || s.action === 'cap-overflow') && !taken.has(s.key))
        .sort((a, b) => (a.updatedAt ?? Number.NEGATIVE_INFINITY) - (b.updatedAt ?? Number.NEGATIVE_INFINITY))
        .slice(0, Math.max(0, MAX_REMOVALS_PER_WRITE - leaving.length));
      for (const step of plan.steps) if (step.step === 'archive-transcripts') for (const file of step.files) toArchive.add(file.key);
      if (fresh.length === 0) break;
      const fileOf = (s: PlannedSession): string => path.join(location.sessionsDir, s.transcript.name!);
      // Held or awaited in this process (maybe by the very caller of this write, whose nested
      // acquire would re-enter): in use, like a lock held elsewhere.
      const inUse = fresh.filter((s) => s.transcript.name !== null && isInUse(fileOf(s))).map((s) => s.key);
      const lockable = fresh.filter((s) => s.transcript.name !== null && !inUse.includes(s.key));
      const locks = await holdTranscriptLocks(
        lockable.map((s) => ({ id: s.key, file: fileOf(s), sessionKey: s.key })),
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
  const removed: { key: string; name: string | null }[] = [];
  for (const session of leaving) {
    const entry = store[session.key];
    // The entry read in this very lock: still the one planned on, still not pinned.
    if (entry === undefined || entry.pinned === true || String(entry.sessionId) !== session.sessionId) continue;
    delete store[session.key];
    removed.push({ key: session.key, name: toArchive.has(session.key) ? session.transcript.name : null });
  }
  if (removed.length === 0) {
    await release();
    return null;
  }
  return async (written: boolean) => {
    try {
      if (!written) return;
      let archived = 0;
      for (const { name } of removed) {
        if (name === null) continue;
        // A transcript left under its name by a failure here is an orphan (doctor, the budget), never a loss.
        if ((await archiveFile(path.join(location.sessionsDir, name), 'deleted', now, { fs: ARCHIVE_FS }).catch(() => null)) !== null) archived += 1;
      }
      if (archived > 0) await fsyncFolder(location.sessionsDir);
    } finally {
      await release();
    }
  };
}

function isInUse(file: string): boolean {
  const state = lockQueueState(file);
  return state.heldInProcess || state.waiting > 0;
}
