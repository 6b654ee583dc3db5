// The queue's part of a session entry (queue, activeRun, queueOwner, pendingReset, outbox,
// abortRequested), who among their holders is still alive, and the records queued messages become.

import { hostname as osHostname } from 'node:os';
import { performance } from 'node:perf_hooks';
import { isProcessAlive, thisProcessStartTicks } from '../core/index.js';
import {
  carriedOf,
  orphanItems,
  type ActiveRunRecord,
  type CarriedMessage,
  type OutboxItem,
  type PendingReset,
  type ProcessRef,
  type QueueItem,
  type QueueOwnerRecord,
} from '../policy/index.js';
import type { RunMessage } from '../runner/index.js';
import { addRecordRoute, inspectLock, lockPathFor, mayTakeOver, type NewTranscriptEntry, type SessionEntry, type StoreLocation } from '../store/index.js';
import { transcriptPathIn, type EngineContext } from './context.js';

/** A session entry with the queue's fields typed. */
export type QueuedEntry = SessionEntry & {
  queue?: QueueItem[];
  activeRun?: ActiveRunRecord;
  queueOwner?: QueueOwnerRecord;
  pendingReset?: PendingReset;
  outbox?: OutboxItem[];
  /** The runId of the active run that must stop (set by interrupt, /stop, queue abort, resets). */
  abortRequested?: string;
  /** The runId of an active run stopped by /stop, `queue abort` or an interrupt: the items it leased are dropped with it. */
  stopRequested?: string;
  /** Set with stopRequested by an interrupt: the reason those drops are reported with. */
  stopReason?: 'interrupt';
  /**
   * Items `queue cancel` / `queue abort` took out while a process was draining this session: that
   * process (the ingest, send or serve that submitted them and waits on them) reports each as a
   * `dropped` event on its next look at the queue, then removes it from here.
   */
  cancelledItems?: CancelledItem[];
};

/** Who took a queued item out with `queue cancel` or `queue abort` (a process of this or another host). */
export interface CancelledBy {
  pid: number;
  hostname: string;
  user: string | null;
  /** `--reason`, when one was given. */
  reason?: string;
  /** Epoch ms on switchboard's clock. */
  at: number;
}

/** A cancelled item waiting to be reported by the process draining its session. */
export interface CancelledItem {
  runId: string;
  sessionId: string;
  requester: string;
  messageId: string | null;
  kind: string;
  /** `cancelled` (queue cancel) or `stopped` (queue abort). */
  reason: 'cancelled' | 'stopped';
  by: CancelledBy;
}

/** One session of one store: what the queue machinery addresses. */
export interface SessionRef {
  location: StoreLocation;
  agentId: string;
  sessionKey: string;
}

export function sessionRefKey(ref: Pick<SessionRef, 'location' | 'sessionKey'>): string {
  return `${ref.location.storePath}\u0000${ref.sessionKey}`;
}

const START_TICKS = thisProcessStartTicks();

export const THIS_PROCESS: ProcessRef = Object.freeze({
  pid: process.pid,
  hostname: osHostname(),
  processStartTime: Math.round(performance.timeOrigin),
  ...(START_TICKS !== null ? { processStartTicks: START_TICKS } : {}),
});

export function isThisProcess(ref: ProcessRef): boolean {
  return ref.pid === THIS_PROCESS.pid && ref.hostname === THIS_PROCESS.hostname && ref.processStartTime === THIS_PROCESS.processStartTime;
}

export function queueOf(entry: QueuedEntry | undefined): QueueItem[] {
  return Array.isArray(entry?.queue) ? entry.queue : [];
}

/**
 * Whether `item` is one of the active run's own messages: claimed by it, they stay in the queue
 * until its runner starts (a crash before that leaves them to be run, not lost). They are the
 * run — stopped or listed with it, never as waiting items besides it.
 */
export function claimedByActiveRun(entry: QueuedEntry | undefined, item: QueueItem): boolean {
  return entry?.activeRun !== undefined && item.claimedBy !== undefined && item.claimedBy === entry.activeRun.runId;
}

export function setQueue(entry: QueuedEntry, items: QueueItem[]): void {
  if (items.length === 0) delete entry.queue;
  else entry.queue = items;
}

export function ownerRecord(now: number): QueueOwnerRecord {
  return { ...THIS_PROCESS, since: now };
}

// ---------------------------------------------------------------------------------------------
// Liveness: decided outside the store mutators (it needs I/O) and handed in as a map

/** What a mutator knows about the holders it may meet: key → alive. */
export type Liveness = Map<string, boolean>;

function processKey(ref: ProcessRef): string {
  return `proc:${ref.hostname}/${ref.pid}/${ref.processStartTime}`;
}

function runKey(run: ActiveRunRecord): string {
  return `run:${run.hostname}/${run.pid}/${run.processStartTime}/${run.runId}`;
}

/**
 * Whether a holder is alive, as far as the map says: this process always is; another one is
 * undefined when the map does not know it yet (the caller computes it and tries again).
 */
export function ownerAlive(owner: ProcessRef, liveness: Liveness): boolean | undefined {
  if (isThisProcess(owner)) return true;
  return liveness.get(processKey(owner));
}

export function runAlive(run: ActiveRunRecord, liveness: Liveness): boolean | undefined {
  if (isThisProcess(run)) return true;
  return liveness.get(runKey(run));
}

/** The holders of an entry whose liveness the map does not know. */
export function unknownHolders(entry: QueuedEntry | undefined, liveness: Liveness): boolean {
  if (entry === undefined) return false;
  if (entry.activeRun && runAlive(entry.activeRun, liveness) === undefined) return true;
  if (entry.queueOwner && ownerAlive(entry.queueOwner, liveness) === undefined) return true;
  return false;
}

function processAlive(ref: ProcessRef): boolean {
  if (ref.hostname !== THIS_PROCESS.hostname) return true; // another host: no way to tell, assume alive
  if (ref.pid === THIS_PROCESS.pid) return ref.processStartTime === THIS_PROCESS.processStartTime;
  // The lock's rule (core's isProcessAlive): a zombie is dead, and so is a pid that a live process
  // of another start time has reused — judged by kill(pid, 0) alone, a dead run whose lock was
  // already released stayed "running", and a dead queue owner kept its queue, for as long as the
  // unrelated process lived.
  return isProcessAlive(ref.pid, typeof ref.processStartTicks === 'number' ? ref.processStartTicks : null);
}

/**
 * Fills in the liveness of every holder of the given entries: a process is alive when its pid
 * exists on this host (another host's are assumed alive); a run is alive when its process is
 * and its session write lock, if it holds it, may not be taken over — the lock's own rule
 * (store/lock-owner.ts, mayTakeOver). A frozen run's process is alive, so its run is too until
 * the lock's max hold, however stale the lock looks: judged dead at staleness, it was reported
 * `orphaned` here and again by itself once resumed.
 */
export async function learnLiveness(
  ctx: EngineContext,
  location: StoreLocation,
  entries: Iterable<QueuedEntry | undefined>,
  liveness: Liveness,
): Promise<void> {
  const staleMs = ctx.config.session?.writeLock?.staleMs;
  for (const entry of entries) {
    if (entry === undefined) continue;
    const owner = entry.queueOwner;
    if (owner && !isThisProcess(owner) && !liveness.has(processKey(owner))) liveness.set(processKey(owner), processAlive(owner));
    const run = entry.activeRun;
    if (run && !isThisProcess(run) && !liveness.has(runKey(run))) {
      let alive = processAlive(run);
      if (alive && typeof entry.sessionFile === 'string') alive = !(await runLockAbandoned(transcriptPathIn(location, entry.sessionFile), run, staleMs));
      liveness.set(runKey(run), alive);
    }
  }
}

/** Whether the run's session lock is held by the run and may be taken over (its holder is gone, past its max hold, or stale and of unknown liveness). */
async function runLockAbandoned(transcript: string, run: ActiveRunRecord, staleMs: number | undefined): Promise<boolean> {
  try {
    const seen = await inspectLock(lockPathFor(transcript), staleMs);
    return seen !== null && seen.owner?.runId === run.runId && mayTakeOver(seen, 'stale');
  } catch {
    return false; // cannot tell: alive, as without a lock
  }
}

export interface OrphanedRun {
  run: ActiveRunRecord;
  unparked: number;
  /** Items the dead run had claimed and not yet taken out of the queue: its turn is taken over. */
  claimed: number;
  /** Parked items it had leased for steering: it may have injected (and recorded) them before it died. */
  leased: CarriedMessage[];
}

/**
 * Clears holders that died: a dead run's record goes (its parked items become followups, its
 * claimed items stay claimed for the next owner to take over) and a dead owner's claim goes, so
 * that the caller may take the session over. Returns the dead run to report now — not one that
 * still had claimed items: whether it recorded them is only known from its transcript, so the
 * turn that takes the claim over reports it (or simply runs the items, never recorded).
 */
export function clearDeadHolders(entry: QueuedEntry, liveness: Liveness): OrphanedRun | undefined {
  let orphan: OrphanedRun | undefined;
  if (entry.activeRun && runAlive(entry.activeRun, liveness) === false) {
    const run = entry.activeRun;
    delete entry.activeRun;
    if (entry.abortRequested === run.runId) delete entry.abortRequested;
    if (entry.stopRequested === run.runId) {
      delete entry.stopRequested;
      delete entry.stopReason;
    }
    const leased = queueOf(entry).filter((item) => item.leasedBy === run.runId).map(carriedOf);
    const { queue, claimed, unparked } = orphanItems(queueOf(entry), run.runId);
    if (claimed > 0 || unparked > 0) setQueue(entry, queue);
    if (claimed === 0) orphan = { run, unparked, claimed, leased };
  }
  if (entry.queueOwner && ownerAlive(entry.queueOwner, liveness) === false) delete entry.queueOwner;
  return orphan;
}

/** Records waiting in the entry's outbox, taken out of it (the caller appends them). */
export function takeOutbox(entry: QueuedEntry): NewTranscriptEntry[] {
  const outbox = Array.isArray(entry.outbox) ? entry.outbox : [];
  delete entry.outbox;
  return outbox.flatMap((item) => item.records as NewTranscriptEntry[]);
}

/**
 * The outbox's records, left in it: they leave it (dropOutbox) only once they are appended, so a
 * crash in between repeats a note rather than losing it (a run_failed naming lost work, say).
 */
export function peekOutbox(entry: QueuedEntry | undefined): { ids: string[]; records: NewTranscriptEntry[] } {
  const outbox = Array.isArray(entry?.outbox) ? entry.outbox : [];
  return { ids: outbox.map((item) => item.id), records: outbox.flatMap((item) => item.records as NewTranscriptEntry[]) };
}

/** Takes the given (appended) items out of the outbox; true when something changed. */
export function dropOutbox(entry: QueuedEntry, ids: readonly string[]): boolean {
  if (ids.length === 0 || !Array.isArray(entry.outbox)) return false;
  const gone = new Set(ids);
  const rest = entry.outbox.filter((item) => !gone.has(item.id));
  if (rest.length === entry.outbox.length) return false;
  if (rest.length === 0) delete entry.outbox;
  else entry.outbox = rest;
  return true;
}

export function pushOutbox(entry: QueuedEntry, item: OutboxItem): void {
  entry.outbox = [...(Array.isArray(entry.outbox) ? entry.outbox : []), item];
}

/**
 * Items the queue itself takes out — dropped (cap, interrupt) or expired (pinned to an instance
 * a rotation replaced) — leave it in a store write whose events are printed after it: a death in
 * between must not leave them unreported. The same write puts a `custom` record per item
 * (customType `dropped` or `expired`, the event's fields as data) into the outbox, which the
 * session's next writer appends to its current transcript.
 */
export function noteRemoved(entry: QueuedEntry, events: readonly (DroppedEvent | ExpiredEvent)[], randomId: () => string): void {
  const records = removalRecords(events);
  if (records.length > 0) pushOutbox(entry, { id: randomId(), sessionId: entry.sessionId, records });
}

/** The transcript record of each removal: a `custom` record (customType `dropped`/`expired`) with the event's fields. */
export function removalRecords(events: readonly (DroppedEvent | ExpiredEvent)[]): NewTranscriptEntry[] {
  return events.map(({ type, sessionKey: _key, ...data }) => ({ type: 'custom', customType: type, data }));
}

// Runner config per agent: agent-runners.ts (re-exported here, where the queue's users look for it).
export { agentRunnerConfig, anyRunner, runnerFor } from './agent-runners.js';

// ---------------------------------------------------------------------------------------------
// Records and runner messages of queued items

function inboundMeta(item: QueueItem): Record<string, unknown> {
  const meta: Record<string, unknown> = { channel: item.channel, runId: item.runId };
  addRecordRoute(meta, item);
  if (item.messageId !== undefined) meta.messageId = item.messageId;
  if (item.sender) meta.sender = item.sender;
  if (item.threadId) meta.threadId = item.threadId;
  return meta;
}

/** The transcript record of a queued message, written when it is consumed (turn start or steer). */
export function recordOfItem(item: QueueItem): NewTranscriptEntry {
  if (item.kind === 'heartbeat') {
    return { type: 'custom', customType: 'heartbeat', data: { text: item.text === '' ? null : item.text, timestamp: item.timestamp ?? item.enqueuedAt, ...inboundMeta(item) } };
  }
  const message: Record<string, unknown> = {
    role: 'user',
    content: [{ type: 'text', text: item.text }],
    timestamp: item.timestamp ?? item.enqueuedAt,
    ...inboundMeta(item),
    queued: { mode: item.mode, enqueuedAt: item.enqueuedAt },
  };
  if (item.cronJobId) message.cron = { jobId: item.cronJobId };
  return { type: 'message', message };
}

export function runMessageOf(item: QueueItem): RunMessage {
  const message: RunMessage = { role: 'user', text: item.text, runId: item.runId, channel: item.channel };
  const sender = item.sender?.name ?? item.sender?.id;
  if (sender) message.sender = sender;
  if (item.messageId !== undefined) message.messageId = item.messageId;
  if (item.kind !== 'user') message.kind = item.kind;
  return message;
}

// ---------------------------------------------------------------------------------------------
// Events of the queue and of runs (cli.md "Events"; run_started/run_ended are additions)

export interface ReplyEvent {
  type: 'reply';
  runId: string;
  sessionKey: string;
  sessionId: string;
  text: string;
  deliveryContext: Record<string, unknown> | null;
  delivered: boolean;
  policy: { decision: 'allow' | 'deny'; rule: number | null };
}

/** `shutdown`: an incognito item still waiting when its server stopped (it lived only in memory). */
export type DroppedReason = 'busy' | 'cap' | 'cancelled' | 'stopped' | 'lock' | 'shutdown' | 'interrupt' | 'deleted';

export interface DroppedEvent {
  type: 'dropped';
  runId: string;
  sessionKey: string;
  sessionId: string | null;
  reason: DroppedReason;
  requester: string | null;
  messageId: string | null;
  /** For `cap`: the drop policy that applied. */
  drop?: string;
  /** The queued item's kind when it was not a plain message (`overflow`: a summary turn). */
  kind?: string;
  /** For `cancelled` (and `stopped` by `queue abort`): who took it out, and why if they said. */
  cancelledBy?: CancelledBy;
}

export interface ExpiredEvent {
  type: 'expired';
  runId: string;
  sessionKey: string;
  /** The instance the item was admitted under (rotated away). */
  sessionId: string;
  /** null: the session has no instance any more (deleted). */
  currentSessionId: string | null;
  reason: 'rebind';
  requester: string;
  messageId: string | null;
  /** The queued item's kind when it was not a plain message (`overflow`: a summary turn). */
  kind?: string;
  /** For an inbound message pinned to that instance: the file it was recorded in instead, or null. */
  recordedIn?: string | null;
}

export interface RunFailedEvent {
  type: 'run_failed';
  runId: string;
  sessionKey: string;
  sessionId: string;
  status: 'failed' | 'timeout' | 'aborted';
  /** runner failure reasons (exit, timeout, aborted, spawn, protocol, …) plus `orphaned`, `lock`, `changed` (the session was reset or removed before the run got its lock), `write`, `internal`. */
  reason: string;
  message: string;
  /** Every message the run carried (its turn's and those steered into it), by runId and messageId. */
  messages: CarriedMessage[];
}

export interface OverflowEvent {
  type: 'overflow';
  runId: string;
  sessionKey: string;
  sessionId: string;
  reason: 'cap';
  dropped: number;
  summary: string[];
}

export interface RunStartedEvent {
  type: 'run_started';
  runId: string;
  sessionKey: string;
  sessionId: string;
  agentId: string;
  lane: string;
  /** Queued messages in this turn (a collect turn carries several). */
  messages: number;
  /** Set on the agent's turn before a reset (`session.reset.beforeReset`), run on the old instance. */
  beforeReset?: true;
}

export interface RunEndedEvent {
  type: 'run_ended';
  runId: string;
  sessionKey: string;
  sessionId: string;
  status: 'done' | 'failed' | 'timeout' | 'aborted';
}

export type QueueEvent = ReplyEvent | DroppedEvent | ExpiredEvent | RunFailedEvent | OverflowEvent | RunStartedEvent | RunEndedEvent;

export function droppedEventOf(item: QueueItem, reason: DroppedReason, drop?: string): DroppedEvent {
  const event: DroppedEvent = {
    type: 'dropped',
    runId: item.runId,
    sessionKey: item.sessionKey,
    sessionId: item.sessionId,
    reason,
    requester: item.requester,
    messageId: item.messageId ?? null,
  };
  if (drop !== undefined) event.drop = drop;
  if (item.kind !== 'user') event.kind = item.kind;
  return event;
}

/** Cancelled items left for the draining process, taken out of the entry as the events to report. */
export function takeCancelled(entry: QueuedEntry, sessionKey: string): DroppedEvent[] {
  const items = Array.isArray(entry.cancelledItems) ? entry.cancelledItems : [];
  if (items.length === 0) return [];
  delete entry.cancelledItems;
  return items.map((item) => {
    const event: DroppedEvent = { type: 'dropped', runId: item.runId, sessionKey, sessionId: item.sessionId, reason: item.reason, requester: item.requester, messageId: item.messageId };
    if (item.kind !== 'user') event.kind = item.kind;
    event.cancelledBy = item.by;
    return event;
  });
}

export function expiredEventOf(item: QueueItem, currentSessionId: string): ExpiredEvent {
  return {
    type: 'expired',
    runId: item.runId,
    sessionKey: item.sessionKey,
    sessionId: item.sessionId,
    currentSessionId,
    reason: 'rebind',
    requester: item.requester,
    messageId: item.messageId ?? null,
    ...(item.kind !== 'user' ? { kind: item.kind } : {}),
  };
}

/** What a run record says it carries; a run started straight from ingest carries its own message. */
export function carriedBy(run: Pick<ActiveRunRecord, 'runId' | 'messages'>): CarriedMessage[] {
  return Array.isArray(run.messages) && run.messages.length > 0 ? run.messages : [{ runId: run.runId }];
}

/** The run_failed event of a run whose holder died, and the record that goes to its transcript. */
export function orphanFailure(orphan: OrphanedRun, sessionKey: string): { event: RunFailedEvent; record: NewTranscriptEntry } {
  // Gone, or alive but past its session lock's max hold (stopped, stalled): taken over either way.
  const message = `run ${orphan.run.runId} was abandoned: its process (pid ${orphan.run.pid} on ${orphan.run.hostname}) is gone or held the session past its max hold`;
  // What it leased is named too: it may have been injected. If it was not, it runs as a followup.
  const named = carriedBy(orphan.run);
  const messages = [...named, ...orphan.leased.filter((item) => !named.some((other) => other.runId === item.runId))];
  return {
    event: { type: 'run_failed', runId: orphan.run.runId, sessionKey, sessionId: orphan.run.sessionId, status: 'failed', reason: 'orphaned', message, messages },
    record: runFailedRecord(orphan.run.runId, 'failed', 'orphaned', message, messages),
  };
}

/**
 * Clears the claims of holders known dead; a run among them that was abandoned gets its run_failed
 * record into the entry's outbox (written to its transcript once the store is): the event that
 * reports it, or undefined when no run was abandoned.
 */
export function failAbandonedRun(entry: QueuedEntry, liveness: Liveness, sessionKey: string, newId: () => string): RunFailedEvent | undefined {
  const orphan = clearDeadHolders(entry, liveness);
  if (orphan === undefined) return undefined;
  const failure = orphanFailure(orphan, sessionKey);
  pushOutbox(entry, { id: newId(), sessionId: orphan.run.sessionId, records: [failure.record as Record<string, unknown>] });
  return failure.event;
}

export function runFailedRecord(runId: string, status: string, reason: string, message: string, messages: CarriedMessage[]): NewTranscriptEntry {
  return { type: 'custom', customType: 'run_failed', data: { runId, status, reason, message, messages } };
}
