// Queue items a dead run had taken — claimed for its turn, leased for steering, or left behind
// (`orphanedFrom`) — whose user record may already be in the transcript. When such an item leaves
// the queue with an old instance (a reset) or is superseded (an interrupt), what it became is
// decided from the transcript, never from the queue alone:
//
// * not recorded: it never reached the agent, and is expired or dropped like any waiting item;
// * recorded and claimed: it was the dead run's turn, which is not run again — a `run_failed`
//   (reason `orphaned`) names it, as the takeover of that turn would have;
// * recorded and leased: it was steered into the dead run, whose `run_failed` named it already
//   (clearDeadHolders): it leaves without a second report.
//
// Before, a reset right after such a death reported a recorded message `expired` (and a steered
// one both `run_failed` and `expired`/`dropped`). What the transcript holds is learned before the
// store mutators run (they do no I/O), into the same map as the holders' liveness.

import { carriedOf, type QueueItem } from '../policy/index.js';
import { findInstanceTranscript, type NewTranscriptEntry, type StoreLocation } from '../store/index.js';
import { transcriptPathIn } from './context.js';
import { recordKeyOfItem, recordedItems } from './run-store.js';
import {
  isThisProcess,
  noteRemoved,
  pushOutbox,
  queueOf,
  runAlive,
  runFailedRecord,
  type DroppedEvent,
  type ExpiredEvent,
  type Liveness,
  type QueueEvent,
  type QueuedEntry,
  type RunFailedEvent,
} from './queue-state.js';

/** The liveness map's entry for whether an item's user record is in its transcript. */
function recordedKey(item: QueueItem): string {
  return `recorded:${recordKeyOfItem(item)}`;
}

/** The run that took `item` (or left it), if any. */
function takerOf(item: QueueItem): string | undefined {
  return item.orphanedFrom ?? item.claimedBy ?? item.leasedBy;
}

/**
 * The items of `entry` whose fate is not known yet: those a run no longer alive took (with the
 * entry's run dead or gone), and those an earlier dead run left (`orphanedFrom`) in any case.
 * A run whose liveness is not known yet counts as alive here: once it is known, ask again.
 */
export function unknownOrphans(entry: QueuedEntry | undefined, liveness: Liveness): QueueItem[] {
  if (entry === undefined) return [];
  const run = entry.activeRun;
  const runGone = run === undefined || (!isThisProcess(run) && runAlive(run, liveness) === false);
  return queueOf(entry).filter((item) => (runGone ? takerOf(item) !== undefined : item.orphanedFrom !== undefined) && !liveness.has(recordedKey(item)));
}

/**
 * Learns whether the user records of `entry`'s unknownOrphans are in its transcript (or in
 * `transcriptName`, the instance they were taken under, when the entry names a new one). Call once
 * the holders' liveness is known; reads the transcript only when there are such items.
 */
export async function learnRecordedOrphans(location: StoreLocation, entry: QueuedEntry | undefined, liveness: Liveness, transcriptName = entry?.sessionFile): Promise<void> {
  const items = unknownOrphans(entry, liveness);
  if (items.length === 0) return;
  // Each item's record is in the transcript of the instance it is pinned to. That is the entry's
  // own unless a reset rotated the session while the run was dead or frozen: then it is the old
  // instance's, by now under its archive name (found by a kill sweep: such a recorded message was
  // reported expired, as if it had never been recorded).
  const byInstance = new Map<string, QueueItem[]>();
  for (const item of items) byInstance.set(item.sessionId, [...(byInstance.get(item.sessionId) ?? []), item]);
  for (const [sessionId, pinned] of byInstance) {
    const file = sessionId === entry?.sessionId ? (typeof transcriptName === 'string' ? transcriptPathIn(location, transcriptName) : null) : await findInstanceTranscript(location.sessionsDir, sessionId);
    const found = file !== null ? await recordedItems(file, pinned) : new Set<string>();
    for (const item of pinned) liveness.set(recordedKey(item), found.has(recordKeyOfItem(item)));
  }
}

export interface LeavingReports {
  /** Every event to report, in order: the plain expiries or drops, then one run_failed per dead run. */
  events: QueueEvent[];
  /** The plain ones alone (what a command lists as expired or dropped). */
  plain: (DroppedEvent | ExpiredEvent)[];
  /** The transcript records of the run_failed events (the plain ones are recorded with noteRemoved). */
  failures: NewTranscriptEntry[];
}

/** Records what reportLeaving decided in the entry, in the write that takes the items out (the next drain appends it). */
export function noteLeaving(entry: QueuedEntry, leaving: LeavingReports, randomId: () => string): void {
  noteRemoved(entry, leaving.plain, randomId);
  if (leaving.failures.length > 0) pushOutbox(entry, { id: randomId(), sessionId: entry.sessionId, records: leaving.failures as Record<string, unknown>[] });
}

/**
 * The reports for `items` leaving the queue of session `sessionKey`: `report` makes the plain
 * one (expired, dropped); an item a dead run took and recorded goes by the rules at the top.
 */
export function reportLeaving<T extends DroppedEvent | ExpiredEvent>(items: readonly QueueItem[], sessionKey: string, liveness: Liveness, report: (item: QueueItem) => T): LeavingReports {
  const plain: T[] = [];
  const turns = new Map<string, QueueItem[]>();
  for (const item of items) {
    const taker = takerOf(item);
    if (taker === undefined || liveness.get(recordedKey(item)) !== true) {
      plain.push(report(item));
      continue;
    }
    if (item.claimedBy === undefined) continue; // steered into the dead run: its run_failed named it
    const turn = turns.get(taker);
    if (turn === undefined) turns.set(taker, [item]);
    else turn.push(item);
  }
  const events: QueueEvent[] = [...plain];
  const failures: NewTranscriptEntry[] = [];
  for (const [runId, turn] of turns) {
    const message = `run ${runId} was abandoned after its messages were recorded: its process is gone; not run again`;
    const messages = turn.map(carriedOf);
    const event: RunFailedEvent = { type: 'run_failed', runId, sessionKey, sessionId: turn[0]!.sessionId, status: 'failed', reason: 'orphaned', message, messages };
    events.push(event);
    failures.push(runFailedRecord(runId, 'failed', 'orphaned', message, messages));
  }
  return { events, plain, failures };
}
