// A run's bookkeeping in the store and its transcript, in the drain order that loses nothing:
// a turn's items are claimed in the queue (runtime.planDrain), their user record is appended and
// fsynced, and only then are they taken out of the queue (commitClaim). A turn that takes over
// the claim of a dead run first looks in the transcript for its records (recordedItems).

import { randomUUID } from 'node:crypto';
import { toSwitchboardError } from '../core/index.js';
import { unparkAll, type CarriedMessage, type QueueItem } from '../policy/index.js';
import { readTranscript, updateSessionStore, type NewTranscriptEntry, type SessionStore, type StoreLocation } from '../store/index.js';
import { storeWriteOptions, type EngineContext } from './context.js';
import { dropOutbox, droppedEventOf, isThisProcess, noteRemoved, ownerRecord, pushOutbox, queueOf, setQueue, takeCancelled, type DroppedEvent, type QueueEvent, type QueuedEntry, type SessionRef } from './queue-state.js';

/** A store update with the configured store-lock wait. */
export function updateStore<T>(ctx: EngineContext, location: StoreLocation, mutate: (store: SessionStore) => T): Promise<T> {
  return updateSessionStore(location.storePath, mutate, storeWriteOptions(ctx));
}

/**
 * Which queue item a user record is the record of: its runId, messageId (none for none) and the
 * time it was queued, which every record of a queued item carries (`queued.enqueuedAt`, or
 * `enqueuedAt` in a collect record's list). runIds are client-chosen and a client may give two
 * messages one runId, with or without messageIds: by runId (and messageId) alone, the record of an
 * earlier message was taken for a later one's, which then ran and was never recorded. A message
 * recorded as it arrived has no `queued` field, and no item looks for it (recordedOnArrival).
 */
export function itemRecordKey(runId: string, messageId: string | null | undefined, enqueuedAt: number): string {
  return JSON.stringify([runId, messageId ?? null, enqueuedAt]);
}

export function recordKeyOfItem(item: Pick<QueueItem, 'runId' | 'messageId' | 'enqueuedAt'>): string {
  return itemRecordKey(item.runId, item.messageId, item.enqueuedAt);
}

/**
 * The items among `items` that the transcript already records (by recordKeyOfItem): one recorded
 * on arrival, or one with a user message of its own, a collect record listing it, or an overflow
 * record of its runId. Streams
 * the file (it may be large; this only runs for turns taken over from a dead run). A missing or
 * unreadable file records nothing.
 */
export async function recordedItems(transcript: string, items: readonly Pick<QueueItem, 'runId' | 'messageId' | 'enqueuedAt' | 'recordedOnArrival'>[]): Promise<Set<string>> {
  const found = new Set<string>();
  for (const item of items) if (item.recordedOnArrival === true) found.add(recordKeyOfItem(item));
  const sought = items.filter((item) => item.recordedOnArrival !== true);
  if (sought.length === 0) return found;
  const wanted = new Set(sought.map(recordKeyOfItem));
  const overflowRuns = new Map<string, string[]>();
  for (const item of sought) overflowRuns.set(item.runId, [...(overflowRuns.get(item.runId) ?? []), recordKeyOfItem(item)]);
  const look = (part: { runId?: unknown; messageId?: unknown } | undefined, enqueuedAt: unknown): void => {
    if (typeof part?.runId !== 'string' || typeof enqueuedAt !== 'number') return;
    const key = itemRecordKey(part.runId, typeof part.messageId === 'string' ? part.messageId : null, enqueuedAt);
    if (wanted.has(key)) found.add(key);
  };
  try {
    for await (const record of readTranscript(transcript)) {
      // An overflow item's record names its runId alone: overflow runIds are switchboard's own.
      if (record.type === 'queue_overflow' && typeof record.runId === 'string') for (const key of overflowRuns.get(record.runId) ?? []) found.add(key);
      if (record.type !== 'message') continue;
      const message = record.message as Record<string, unknown> | undefined;
      if (message?.role !== 'user') continue;
      if (!Array.isArray(message.collected)) look(message, (message.queued as { enqueuedAt?: unknown } | undefined)?.enqueuedAt);
      else for (const part of message.collected as { runId?: unknown; messageId?: unknown; enqueuedAt?: unknown }[]) look(part, part?.enqueuedAt);
    }
  } catch {
    // No transcript yet (or not readable): nothing of these items is recorded in it.
  }
  return found;
}

/** What became of a turn's claim when its runner was about to start. */
export type ClaimCommit = 'committed' | 'failed' | 'lost';

/**
 * After the turn's user record (and the outbox items `outboxIds`) are on disk, right before its
 * runner starts: its claimed items leave the queue, those outbox items the outbox. `failed` when
 * this update failed: the run does not start, and its release removes the items (the outbox
 * items are appended again by a later holder: a repeated note, never a lost one). If the process
 * dies first, the next owner finds the items claimed, finds their record, and runs them without
 * recording them again. `lost` when the run (`runId`) no longer holds the session's claim: its
 * process was frozen past its lock's max hold and another one judged it dead; nothing changes,
 * and no runner may start — the claim is the takeover's now (see giveBackClaim).
 */
export async function commitClaim(ctx: EngineContext, ref: SessionRef, runId: string | undefined, outboxIds: readonly string[] = []): Promise<ClaimCommit> {
  try {
    return await updateStore(ctx, ref.location, (store): ClaimCommit => {
      const entry = store[ref.sessionKey] as QueuedEntry | undefined;
      if (!entry) return 'committed';
      if (runId !== undefined && !holdsClaim(entry, runId)) return 'lost';
      const queue = queueOf(entry);
      const rest = runId === undefined ? queue : queue.filter((item) => item.claimedBy !== runId);
      const dropped = dropOutbox(entry, outboxIds);
      if (rest.length === queue.length && !dropped) return 'committed';
      setQueue(entry, rest);
      entry.updatedAt = ctx.clock.now();
      return 'committed';
    });
  } catch {
    // releaseSession takes the items out at the end of the run.
    return 'failed';
  }
}

/** Whether the entry's claim is still this process's run `runId` (not cleared, not taken over). */
function holdsClaim(entry: QueuedEntry, runId: string): boolean {
  return entry.activeRun !== undefined && entry.activeRun.runId === runId && isThisProcess(entry.activeRun);
}

/**
 * What the entry, read by a run once it has the session lock, says of its claim: `held`; `lost`
 * when the instance is the same and the claim was cleared as a dead run's (its process frozen
 * past the lock's max hold) or taken over with its items — the turn goes back for the
 * takeover (giveBackClaim); `superseded` when the session was reset, removed or is another
 * run's (releaseUnstarted reports it).
 */
export function claimOf(entry: QueuedEntry | undefined, sessionId: string, runId: string): 'held' | 'lost' | 'superseded' {
  if (entry === undefined || entry.sessionId !== sessionId) return 'superseded';
  if (holdsClaim(entry, runId)) return 'held';
  return entry.activeRun === undefined || entry.activeRun.runId === runId ? 'lost' : 'superseded';
}

/**
 * A run whose claim was cleared before its runner started (its process frozen past the session
 * lock's max hold, the run judged dead by another process) gives its turn back instead of
 * reporting it failed: no runner saw it. Its claimed items stay claimed, marked as left by it
 * (`orphanedFrom`: their record may be on disk, so the takeover looks before recording them), and
 * the queue is this process's again unless a live other one owns it; the next drain takes the
 * claim over and runs the turn, once. Nothing changes when another run holds the session now: the turn is its own.
 * A failed write changes nothing either: the claim is left as the other process left it.
 */
export async function giveBackClaim(ctx: EngineContext, ref: SessionRef, runId: string): Promise<void> {
  try {
    await updateStore(ctx, ref.location, (store) => {
      const entry = store[ref.sessionKey] as QueuedEntry | undefined;
      if (!entry || entry.activeRun !== undefined) return;
      const queue = queueOf(entry).map((item) => {
        if (item.claimedBy !== runId && item.leasedBy !== runId) return item;
        const back = { ...item };
        if (back.claimedBy === runId) back.orphanedFrom ??= runId;
        if (back.leasedBy === runId) delete back.leasedBy; // never injected: its runner never started
        return back;
      });
      setQueue(entry, queue);
      if (queue.length > 0 && (!entry.queueOwner || isThisProcess(entry.queueOwner))) entry.queueOwner = ownerRecord(ctx.clock.now());
      entry.updatedAt = ctx.clock.now();
    });
  } catch {
    // The other process left the claim for the queue's owner (this one): the next drain takes it over.
  }
}

/**
 * After steered items are recorded: out of the queue, and into the run's record of what it
 * carries (so that a run_failed for a dead holder names them too).
 */
export async function commitSteer(ctx: EngineContext, ref: SessionRef, runId: string, items: readonly QueueItem[], carried: CarriedMessage[]): Promise<void> {
  const runIds = new Set(items.map((item) => item.runId));
  try {
    await updateStore(ctx, ref.location, (store) => {
      const entry = store[ref.sessionKey] as QueuedEntry | undefined;
      if (!entry) return;
      const queue = queueOf(entry);
      setQueue(entry, queue.filter((item) => !runIds.has(item.runId)));
      if (entry.activeRun?.runId === runId) entry.activeRun.messages = carried;
      entry.updatedAt = ctx.clock.now();
    });
  } catch {
    // The records are on disk: the end of the run removes them from the queue (steeredIds).
  }
}

/** What releaseSession did: what to report before run_ended, or that the run is not this process's to report. */
export interface SessionRelease {
  dropped: QueueItem[];
  reason: 'stopped' | 'interrupt';
  cancelled: DroppedEvent[];
  /**
   * The entry no longer names this process's run: another process judged it abandoned (its
   * process frozen past the session lock's max hold), reported it `orphaned` and cleared it —
   * or removed the session with that report in its archive. Nothing was changed, and the run
   * reports nothing more: that report stands, and it cannot be taken back.
   */
  takenOver: boolean;
}

/**
 * The end of a run in the store: activeRun and its abort request go, the items it claimed go
 * (recorded, or named by its run_failed), parked items that were not injected become followups,
 * the queue stays owned by this process while anything waits. A run whose claim is gone
 * (`takenOver`) changes nothing: the session is the taker's now.
 * Retried a few times: a session left marked active would stay busy until this process exits.
 */
export async function releaseSession(
  ctx: EngineContext,
  ref: SessionRef,
  runId: string,
  steered: ReadonlySet<string>,
  owed: readonly NewTranscriptEntry[] = [],
): Promise<SessionRelease> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await updateStore(ctx, ref.location, (store): SessionRelease => {
        const entry = store[ref.sessionKey] as QueuedEntry | undefined;
        if (!entry || !holdsClaim(entry, runId)) return { dropped: [], reason: 'stopped', cancelled: [], takenOver: true };
        const now = ctx.clock.now();
        const stopped = entry.stopRequested === runId;
        const reason = stopped && entry.stopReason === 'interrupt' ? 'interrupt' : 'stopped';
        delete entry.activeRun;
        if (entry.abortRequested === runId) delete entry.abortRequested;
        if (stopped) {
          delete entry.stopRequested;
          delete entry.stopReason;
        }
        const remaining = queueOf(entry).filter((item) => !steered.has(item.runId) && item.claimedBy !== runId);
        // A stopped run takes what it had leased with it; otherwise they become followups.
        const dropped = stopped ? remaining.filter((item) => item.leasedBy === runId) : [];
        const queue = unparkAll(remaining.filter((item) => !(stopped && item.leasedBy === runId)));
        setQueue(entry, queue);
        // Recorded in this write, whichever stop took them (a /stop, an interrupt): the events are
        // printed after it, and a process that dies in between must leave their report on disk.
        noteRemoved(entry, dropped.map((item) => droppedEventOf(item, reason)), randomUUID);
        // The outbox stays: what came after the run's last flush is appended by the next drain,
        // and so is what the run itself could not append (its run_failed after losing the lock).
        if (owed.length > 0) pushOutbox(entry, { id: randomUUID(), sessionId: entry.sessionId, records: owed.map((record) => record as Record<string, unknown>) });
        if (!entry.activeRun) {
          if (queue.length === 0 && !entry.pendingReset) {
            if (!entry.queueOwner || isThisProcess(entry.queueOwner)) delete entry.queueOwner;
          } else {
            entry.queueOwner = ownerRecord(now);
          }
        }
        entry.updatedAt = now;
        // What `queue cancel`/`abort` took out meanwhile is reported now, before run_ended, so a
        // client that stops listening once the run is over has heard it.
        return { dropped, reason, cancelled: takeCancelled(entry, ref.sessionKey), takenOver: false };
      });
    } catch (err) {
      if (attempt >= 4) {
        process.emitWarning(`switchboard: could not release session ${ref.sessionKey} after run ${runId}: ${toSwitchboardError(err).message}`);
        return { dropped: [], reason: 'stopped', cancelled: [], takenOver: false };
      }
      await new Promise((resolve) => setTimeout(resolve, 200 * (attempt + 1)));
    }
  }
}

/**
 * The session lock could not be had: the run never started, its claimed items stay queued (the
 * claim is dropped, they were not recorded), the session is left for a later process, and a
 * run_failed event says why. A run ingest started (`recorded`: its message was recorded by the
 * batch) takes its item out instead: queued again, it would be recorded a second time.
 */
export async function releaseUnstarted(
  ctx: EngineContext,
  ref: SessionRef,
  turn: { runId: string; sessionId: string; items: readonly QueueItem[]; carried: CarriedMessage[]; recorded: boolean },
  reason: 'lock' | 'changed',
  why: string,
  emit: (event: QueueEvent) => void,
): Promise<void> {
  try {
    await updateStore(ctx, ref.location, (store) => {
      const entry = store[ref.sessionKey] as QueuedEntry | undefined;
      if (!entry) return;
      if (entry.activeRun?.runId === turn.runId) delete entry.activeRun;
      if (entry.abortRequested === turn.runId) delete entry.abortRequested;
      setQueue(
        entry,
        queueOf(entry).flatMap((item) => {
          if (item.claimedBy !== turn.runId && item.leasedBy !== turn.runId) return [item];
          if (turn.recorded && item.claimedBy === turn.runId) return [];
          const rest = { ...item };
          if (rest.claimedBy === turn.runId) delete rest.claimedBy;
          if (rest.leasedBy === turn.runId) delete rest.leasedBy;
          return [rest];
        }),
      );
      if (entry.queueOwner && isThisProcess(entry.queueOwner)) delete entry.queueOwner;
      entry.updatedAt = ctx.clock.now();
    });
  } catch {
    // Nothing more to do here; the run_failed event below still reports it.
  }
  const requeued = turn.items.length > 0 && !turn.recorded ? `; its ${turn.items.length} queued message(s) stay queued for a later ingest` : '';
  emit({
    type: 'run_failed',
    runId: turn.runId,
    sessionKey: ref.sessionKey,
    sessionId: turn.sessionId,
    status: 'failed',
    reason,
    message: `${why}${requeued}`,
    messages: turn.carried,
  });
}
