// Maintenance planning (store.md "Maintenance"): the ordered cleanup plan as a pure function of a
// store snapshot — the shell in engine/ only applies it. Settings are in maintenance-settings.ts.

import { SwitchboardError } from '../core/index.js';
import type { MaintenanceSettings } from './maintenance-settings.js';

// ---------------------------------------------------------------------------------------------
// Snapshot

/**
 * Why an entry must not be removed. `running`/`queued` come from the runner/queue layer.
 * `unusable`: a row of the wrong shape (not an object, a bad sessionFile…) or one that shares its
 * transcript with another key — only a person knows what it is, so maintenance leaves it as it is.
 */
export type ProtectionReason = 'pinned' | 'locked' | 'running' | 'queued' | 'active' | 'unusable';

export interface TranscriptSnapshot {
  /** File name inside the sessions folder; null when the entry names no usable file (it is then `unusable`). */
  name: string | null;
  exists: boolean;
  /** Size on disk (0 when missing). */
  bytes: number;
}

export interface EntrySnapshot {
  key: string;
  sessionId: string;
  /** Epoch ms; null when the row has no usable updatedAt (its age is unknown). */
  updatedAt: number | null;
  pinned: boolean;
  model: string | null;
  transcript: TranscriptSnapshot;
}

export interface ArchiveSnapshot {
  name: string;
  /** `reset`/`deleted`: archived transcripts; `bak`/`corrupt`: copies doctor kept before a repair. */
  reason: 'reset' | 'deleted' | 'bak' | 'corrupt';
  /** Epoch ms from the archive name. */
  archivedAt: number;
  bytes: number;
}

/** A transcript-like file that no entry references (an orphan); only the disk budget removes it. */
export interface UnreferencedFileSnapshot {
  name: string;
  bytes: number;
  mtimeMs: number;
}

/** A rotated copy of the store file, `sessions.json.bak.<ms>`. */
export interface StoreBackupSnapshot {
  name: string;
  createdAt: number;
  bytes: number;
}

export interface ProtectedKey {
  key: string;
  reason: Exclude<ProtectionReason, 'pinned' | 'active'>;
}

export interface MaintenanceSnapshot {
  /** File name of the store (`sessions.json` unless session.store says otherwise). */
  storeFileName: string;
  storeBytes: number;
  entries: readonly EntrySnapshot[];
  archives: readonly ArchiveSnapshot[];
  unreferenced: readonly UnreferencedFileSnapshot[];
  storeBackups: readonly StoreBackupSnapshot[];
  /** Keys with a held transcript lock, a running or queued run. */
  protectedKeys: readonly ProtectedKey[];
}

export interface CleanupOptions {
  /** `--fix-missing`: drop entries whose transcript file is missing. */
  fixMissing?: boolean;
  /** `--active-key`: sessions the caller is using right now; treated like pinned. */
  activeKeys?: readonly string[];
}

// ---------------------------------------------------------------------------------------------
// Plan

export type SessionAction = 'keep' | 'prune-missing' | 'prune-stale' | 'cap-overflow' | 'evict-budget';

export interface PlannedSession {
  key: string;
  sessionId: string;
  action: SessionAction;
  updatedAt: number | null;
  ageMs: number | null;
  model: string | null;
  pinned: boolean;
  protectedBy: ProtectionReason[];
  transcript: TranscriptSnapshot;
}

export type BudgetRemoval =
  /** An archive that existed before this run: deleted. */
  | { kind: 'archive'; name: string; bytes: number }
  /** The `.deleted` archive this run made of a removed entry's transcript: deleted. */
  | { kind: 'new-archive'; key: string; name: string; bytes: number }
  /** An orphaned transcript: archived, then the archive deleted. */
  | { kind: 'unreferenced'; name: string; bytes: number }
  /** An entry evicted: removed, its transcript archived, then the archive deleted. */
  | { kind: 'entry'; key: string; name: string; bytes: number };

export type CleanupStep =
  | { step: 'prune-stale'; keys: string[] }
  | { step: 'prune-missing'; keys: string[] }
  | { step: 'cap-overflow'; keys: string[] }
  | { step: 'archive-transcripts'; files: { key: string; name: string; bytes: number }[] }
  | { step: 'purge-archives'; files: { name: string; bytes: number; archivedAt: number }[] }
  | { step: 'rotate-store'; backupName: string; dropBackups: string[] }
  | { step: 'disk-budget'; removals: BudgetRemoval[] };

export interface DiskBudgetPlan {
  /** Removable bytes when the budget step starts (after pruning and purging). */
  totalBytesBefore: number;
  totalBytesAfter: number;
  removedFiles: number;
  removedEntries: number;
  freedBytes: number;
  maxBytes: number;
  highWaterBytes: number;
  /** The removable bytes exceeded maxBytes when the budget step started. */
  overBudget: boolean;
  /** Bytes the budget cannot touch: protected transcripts (store files are never counted). */
  protectedBytes: number;
}

export interface CleanupPlan {
  now: number;
  /** Every entry of the store with its action, in snapshot order. */
  sessions: PlannedSession[];
  /** Only the steps that have work, in store.md's order. */
  steps: CleanupStep[];
  beforeCount: number;
  afterCount: number;
  pruned: number;
  missing: number;
  capped: number;
  /** Usable entries whose transcript file is missing (removed only with fixMissing). */
  missingTranscripts: number;
  /** Entries kept for being pinned, locked, running, queued or active. */
  protectedCount: number;
  /** Entries of the wrong shape or sharing a transcript: kept, and a `doctor` finding. */
  unusableCount: number;
  diskBudget: DiskBudgetPlan | null;
  wouldMutate: boolean;
}

/** Oldest first; an unknown updatedAt counts as the oldest; ties by key for a stable order. */
export function oldestFirst(a: { updatedAt: number | null; key: string }, b: { updatedAt: number | null; key: string }): number {
  const ua = a.updatedAt ?? Number.NEGATIVE_INFINITY;
  const ub = b.updatedAt ?? Number.NEGATIVE_INFINITY;
  if (ua !== ub) return ua < ub ? -1 : 1;
  return a.key < b.key ? -1 : a.key > b.key ? 1 : 0;
}

function byName(a: { name: string }, b: { name: string }): number {
  return a.name < b.name ? -1 : a.name > b.name ? 1 : 0;
}

/**
 * The cleanup plan, in store.md's order: prune entries older than pruneAfter (by updatedAt) →
 * drop entries whose transcript is missing (fixMissing only) → cap to maxEntries, oldest first →
 * archive the removed entries' transcripts as `.deleted` → purge `.reset`/`.deleted` archives
 * older than resetArchiveRetention → rotate the store file when over rotateBytes → enforce the
 * disk budget down to high water (archives, then unreferenced files, then oldest entries).
 *
 * Protected entries (pinned, locked, running, queued, active, unusable) are never removed, and their
 * transcripts do not count toward the budget: only files maintenance may remove count. The plan
 * does not depend on the mode: warn reports it, enforce applies it, dry-run shows it.
 */
export function planCleanup(snapshot: MaintenanceSnapshot, settings: MaintenanceSettings, now: number, options: CleanupOptions = {}): CleanupPlan {
  if (!Number.isFinite(now)) throw new SwitchboardError('BAD_INPUT', `now: ${String(now)} is not a time`);
  const activeKeys = new Set(options.activeKeys ?? []);
  const protectedBy = new Map<string, ProtectionReason[]>();
  const protect = (key: string, reason: ProtectionReason): void => {
    const reasons = protectedBy.get(key) ?? [];
    if (!reasons.includes(reason)) reasons.push(reason);
    protectedBy.set(key, reasons);
  };
  for (const entry of snapshot.entries) {
    if (entry.pinned) protect(entry.key, 'pinned');
    if (activeKeys.has(entry.key)) protect(entry.key, 'active');
    if (entry.transcript.name === null) protect(entry.key, 'unusable');
  }
  for (const { key, reason } of snapshot.protectedKeys) protect(key, reason);

  const sessions: PlannedSession[] = snapshot.entries.map((entry) => ({
    key: entry.key,
    sessionId: entry.sessionId,
    action: 'keep',
    updatedAt: entry.updatedAt,
    ageMs: entry.updatedAt === null ? null : Math.max(0, now - entry.updatedAt),
    model: entry.model,
    pinned: entry.pinned,
    protectedBy: protectedBy.get(entry.key) ?? [],
    transcript: entry.transcript,
  }));
  const removable = (s: PlannedSession): boolean => s.action === 'keep' && s.protectedBy.length === 0;
  const steps: CleanupStep[] = [];

  // 1. prune stale entries
  const stale: string[] = [];
  if (settings.pruneAfterMs !== null) {
    for (const s of sessions) {
      if (removable(s) && s.updatedAt !== null && now - s.updatedAt > settings.pruneAfterMs) {
        s.action = 'prune-stale';
        stale.push(s.key);
      }
    }
  }
  if (stale.length > 0) steps.push({ step: 'prune-stale', keys: stale });

  // 2. drop entries whose transcript is missing
  const missing: string[] = [];
  if (options.fixMissing === true) {
    for (const s of sessions) {
      if (removable(s) && !s.transcript.exists) {
        s.action = 'prune-missing';
        missing.push(s.key);
      }
    }
  }
  if (missing.length > 0) steps.push({ step: 'prune-missing', keys: missing });

  // 3. cap to maxEntries, oldest first (protected entries count but are never removed)
  const capped: string[] = [];
  if (settings.maxEntries !== null) {
    let remaining = sessions.filter((s) => s.action === 'keep').length;
    if (remaining > settings.maxEntries) {
      for (const s of sessions.filter(removable).sort(oldestFirst)) {
        if (remaining <= settings.maxEntries) break;
        s.action = 'cap-overflow';
        capped.push(s.key);
        remaining -= 1;
      }
    }
  }
  if (capped.length > 0) steps.push({ step: 'cap-overflow', keys: capped });

  // 4. archive the transcripts of the removed entries — but never a file a kept entry still
  // names (hand-edited stores may share one), and each file once
  const namesInUse = new Set(sessions.filter((s) => s.action === 'keep' && s.transcript.name !== null).map((s) => s.transcript.name as string));
  const archivedNow: { key: string; name: string; bytes: number }[] = [];
  for (const s of sessions) {
    if (s.action === 'keep' || !s.transcript.exists || s.transcript.name === null || namesInUse.has(s.transcript.name)) continue;
    namesInUse.add(s.transcript.name);
    archivedNow.push({ key: s.key, name: s.transcript.name, bytes: s.transcript.bytes });
  }
  if (archivedNow.length > 0) steps.push({ step: 'archive-transcripts', files: archivedNow });

  // 5. purge old archives
  const purged =
    settings.resetArchiveRetentionMs === null
      ? []
      : snapshot.archives
          .filter((a) => now - a.archivedAt > settings.resetArchiveRetentionMs!)
          .sort((a, b) => a.archivedAt - b.archivedAt || byName(a, b))
          .map((a) => ({ name: a.name, bytes: a.bytes, archivedAt: a.archivedAt }));
  if (purged.length > 0) steps.push({ step: 'purge-archives', files: purged });

  // 6. rotate the store file
  if (settings.rotateBytes !== null && snapshot.storeBytes > settings.rotateBytes) {
    const taken = new Set(snapshot.storeBackups.map((b) => b.name));
    let stamp = Math.floor(now);
    while (taken.has(`${snapshot.storeFileName}.bak.${stamp}`)) stamp += 1;
    const keepOld = Math.max(0, settings.rotateKeep - 1);
    const dropBackups = [...snapshot.storeBackups]
      .sort((a, b) => b.createdAt - a.createdAt || byName(b, a))
      .slice(keepOld)
      .map((b) => b.name);
    steps.push({ step: 'rotate-store', backupName: `${snapshot.storeFileName}.bak.${stamp}`, dropBackups });
  }

  // 7. disk budget
  let diskBudget: DiskBudgetPlan | null = null;
  if (settings.maxDiskBytes !== null && settings.highWaterBytes !== null) {
    const purgedNames = new Set(purged.map((p) => p.name));
    const oldArchives = snapshot.archives.filter((a) => !purgedNames.has(a.name)).sort((a, b) => a.archivedAt - b.archivedAt || byName(a, b));
    const livingEntries = sessions.filter((s) => s.action === 'keep');
    const protectedBytes = livingEntries.filter((s) => s.protectedBy.length > 0).reduce((sum, s) => sum + s.transcript.bytes, 0);
    const candidates: BudgetRemoval[] = [
      ...oldArchives.map((a): BudgetRemoval => ({ kind: 'archive', name: a.name, bytes: a.bytes })),
      // Made in step 4 with the time `now`: newer than every archive from earlier runs.
      ...archivedNow.map((f): BudgetRemoval => ({ kind: 'new-archive', key: f.key, name: f.name, bytes: f.bytes })),
      ...[...snapshot.unreferenced]
        .sort((a, b) => a.mtimeMs - b.mtimeMs || byName(a, b))
        .map((u): BudgetRemoval => ({ kind: 'unreferenced', name: u.name, bytes: u.bytes })),
    ];
    const uses = new Map<string, number>();
    for (const s of livingEntries) if (s.transcript.name !== null) uses.set(s.transcript.name, (uses.get(s.transcript.name) ?? 0) + 1);
    // A transcript shared by two entries is not evicted: the other entry would lose it.
    const evictable = livingEntries
      .filter((s) => s.protectedBy.length === 0 && s.transcript.exists && s.transcript.name !== null && uses.get(s.transcript.name) === 1)
      .sort(oldestFirst);
    const total =
      candidates.reduce((sum, c) => sum + c.bytes, 0) + evictable.reduce((sum, s) => sum + s.transcript.bytes, 0);
    const overBudget = total > settings.maxDiskBytes;
    const removals: BudgetRemoval[] = [];
    let current = total;
    if (overBudget) {
      for (const candidate of candidates) {
        if (current <= settings.highWaterBytes) break;
        removals.push(candidate);
        current -= candidate.bytes;
      }
      for (const s of evictable) {
        if (current <= settings.highWaterBytes) break;
        // An empty transcript frees nothing: its session is not worth evicting.
        if (s.transcript.bytes <= 0) continue;
        s.action = 'evict-budget';
        removals.push({ kind: 'entry', key: s.key, name: s.transcript.name as string, bytes: s.transcript.bytes });
        current -= s.transcript.bytes;
      }
    }
    if (removals.length > 0) steps.push({ step: 'disk-budget', removals });
    diskBudget = {
      totalBytesBefore: total,
      totalBytesAfter: current,
      removedFiles: removals.length,
      removedEntries: removals.filter((r) => r.kind === 'entry').length,
      freedBytes: total - current,
      maxBytes: settings.maxDiskBytes,
      highWaterBytes: settings.highWaterBytes,
      overBudget,
      protectedBytes,
    };
  }

  const evicted = sessions.filter((s) => s.action === 'evict-budget').length;
  const beforeCount = sessions.length;
  return {
    now,
    sessions,
    steps,
    beforeCount,
    afterCount: beforeCount - stale.length - missing.length - capped.length - evicted,
    pruned: stale.length,
    missing: missing.length,
    capped: capped.length,
    missingTranscripts: sessions.filter((s) => s.transcript.name !== null && !s.transcript.exists).length,
    protectedCount: sessions.filter((s) => s.protectedBy.some((reason) => reason !== 'unusable')).length,
    unusableCount: sessions.filter((s) => s.protectedBy.includes('unusable')).length,
    diskBudget,
    wouldMutate: steps.length > 0,
  };
}
