// What `switchboard maintain` plans besides the cleanup: the daily/idle resets due with no message
// arriving, the cron sessions past their retention, and the snapshot as it will be without them.

import type { SessionConfig } from '../config/types.js';
import { parseSessionKey } from '../routing/index.js';
import { oldestFirst, type ArchiveSnapshot, type CleanupOptions, type MaintenanceSnapshot } from './maintenance.js';
import { evaluateFreshness, type StaleReason } from './reset.js';
import { resetPolicyFor } from './session-plan.js';

/** The entry fields the reset planner reads. */
export interface ResetCandidate {
  key: string;
  sessionId: string;
  sessionStartedAt?: number | null;
  lastInteractionAt?: number | null;
  /** The transcript header's time, for an entry without a usable sessionStartedAt (evaluateFreshness). */
  transcriptStartedAt?: number | null;
  channel?: string | null;
  chatType?: string | null;
  origin?: { channel?: unknown; provider?: unknown; chatType?: unknown; threadId?: unknown; peer?: unknown } | null;
  deliveryContext?: { channel?: unknown } | null;
}

export interface DueReset {
  key: string;
  sessionId: string;
  staleReason: StaleReason;
}

/** `agent:<id>:cron:<job>` (and its run keys): cron sessions start fresh every run anyway. */
export function isCronSessionKey(key: string): boolean {
  try {
    return parseSessionKey(key).kind === 'cron';
  } catch {
    return false;
  }
}

function peerOf(value: unknown): { kind: string; id: string } | undefined {
  if (value === null || typeof value !== 'object') return undefined;
  const { kind, id } = value as { kind?: unknown; id?: unknown };
  return typeof kind === 'string' && typeof id === 'string' ? { kind, id } : undefined;
}

const firstString = (...values: unknown[]): string | undefined => values.find((value): value is string => typeof value === 'string');

function recordOrEmpty<T extends object>(value: unknown): T {
  return (value !== null && typeof value === 'object' ? value : {}) as T;
}

/** The fields of an entry (of any shape: another tool may have written it) that say where its session lives. */
export interface EntryRouteFields {
  channel?: unknown;
  chatType?: unknown;
  origin?: unknown;
  deliveryContext?: unknown;
}

/**
 * The channel, thread and peer kind a stored entry's reset policy is resolved by, when no message
 * names them. switchboard's rows carry `origin.channel` and `origin.peer`; OpenClaw's name the
 * channel `origin.provider` (or only `deliveryContext.channel`) and the kind `chatType`, with no
 * peer, so a kind from `chatType` stands in for the peer (only its kind decides the type).
 */
export function resetRouteOf(entry: EntryRouteFields): { channel: string; threadId?: string; peer?: { kind: string; id: string } } {
  const origin: NonNullable<ResetCandidate['origin']> = recordOrEmpty(entry.origin);
  const channel = firstString(origin.channel, entry.channel, origin.provider, recordOrEmpty<{ channel?: unknown }>(entry.deliveryContext).channel) ?? '';
  const threadId = typeof origin.threadId === 'string' || typeof origin.threadId === 'number' ? String(origin.threadId) : undefined;
  const chatType = firstString(entry.chatType, origin.chatType);
  const peer = peerOf(origin.peer) ?? (chatType === 'direct' || chatType === 'group' || chatType === 'channel' ? { kind: chatType, id: '' } : undefined);
  return { channel, threadId, peer };
}

/** Whether a session is stale under its reset policy now (the message-free check of `maintain`). */
export function dueResetOf(candidate: ResetCandidate, session: SessionConfig | undefined, now: number): StaleReason | null {
  const policy = resetPolicyFor(session, candidate.key, resetRouteOf(candidate));
  const freshness = evaluateFreshness(candidate, policy, now);
  return freshness.fresh ? null : (freshness.staleReason ?? null);
}

/**
 * Sessions whose daily or idle reset is due at `now` with no message arriving. Cron sessions are
 * left out: every cron run already starts a fresh instance, and `cron.sessionRetention` ends them.
 */
export function planDueResets(candidates: readonly ResetCandidate[], session: SessionConfig | undefined, now: number): DueReset[] {
  const due: DueReset[] = [];
  for (const candidate of candidates) {
    if (isCronSessionKey(candidate.key)) continue;
    const staleReason = dueResetOf(candidate, session, now);
    if (staleReason !== null) due.push({ key: candidate.key, sessionId: candidate.sessionId, staleReason });
  }
  return due;
}

/**
 * Cron-family entries not updated within `retentionMs` (null = retention off → nothing). Protected
 * entries (pinned, locked, running, queued, active) stay.
 */
export function planCronRetention(
  snapshot: Pick<MaintenanceSnapshot, 'entries' | 'protectedKeys'>,
  retentionMs: number | null,
  now: number,
  options: Pick<CleanupOptions, 'activeKeys'> = {},
): string[] {
  if (retentionMs === null || retentionMs <= 0) return [];
  const blocked = new Set([...snapshot.protectedKeys.map((p) => p.key), ...(options.activeKeys ?? [])]);
  return snapshot.entries
    // A row that names no usable transcript is `unusable` (planCleanup's rule): never removed.
    .filter((e) => isCronSessionKey(e.key) && !e.pinned && !blocked.has(e.key) && e.transcript.name !== null && e.updatedAt !== null && now - e.updatedAt > retentionMs)
    .sort(oldestFirst)
    .map((e) => e.key);
}

/**
 * The snapshot as it will be once `keys` are removed and their transcripts archived at `now`:
 * lets a dry run of `maintain` plan the cleanup that follows cron retention.
 */
export function snapshotWithoutEntries(snapshot: MaintenanceSnapshot, keys: readonly string[], now: number): MaintenanceSnapshot {
  if (keys.length === 0) return snapshot;
  const gone = new Set(keys);
  const archives: ArchiveSnapshot[] = [...snapshot.archives];
  for (const entry of snapshot.entries) {
    if (gone.has(entry.key) && entry.transcript.exists && entry.transcript.name !== null) {
      archives.push({ name: `${entry.transcript.name}.deleted.(planned)`, reason: 'deleted', archivedAt: now, bytes: entry.transcript.bytes });
    }
  }
  return { ...snapshot, entries: snapshot.entries.filter((e) => !gone.has(e.key)), archives };
}
