// The queue's durable shapes in a session entry (sessions.json): waiting items, the active run and
// its process, the queue owner, a rotation waiting for the run, and the outbox. Types only, shared
// by the planners here and the engine that stores them.

import type { QueueMode } from './queue-settings.js';

export type QueueItemState = 'queued' | 'parked';
/** `overflow` is the summary turn of messages dropped at the cap (drop `summarize`). */
export type QueueItemKind = 'user' | 'cron' | 'heartbeat' | 'overflow';

export interface QueueDeliveryContext {
  channel: string;
  /** Absent when the session's own has none (an OpenClaw row without a last route). */
  to?: string;
  accountId?: string;
  threadId?: string;
  [extra: string]: unknown;
}

/** One waiting message, as stored in `entry.queue` (durable, in sessions.json). */
export interface QueueItem {
  runId: string;
  messageId?: string;
  /** Who asked: the sender's id, else its name, else the channel and peer. */
  requester: string;
  sessionKey: string;
  /** The instance the item was admitted under; it is expired if that instance is rotated away. */
  sessionId: string;
  /** Epoch ms on switchboard's clock (`--now` pins it). */
  enqueuedAt: number;
  /** Epoch ms on the real wall clock: the quiet window is measured in real time even under `--now`. */
  wallAt: number;
  mode: QueueMode;
  state: QueueItemState;
  kind: QueueItemKind;
  text: string;
  sender?: { id?: string; name?: string };
  channel: string;
  /** The rest of the route it came from (accountId unless the default one): its record names it (store record-route.ts). */
  accountId?: string;
  peer?: { kind: string; id: string };
  threadId?: string;
  /** The sender's own timestamp, if the message had one. */
  timestamp?: number;
  cronJobId?: string;
  /** Where replies to this message go. */
  deliveryContext?: QueueDeliveryContext;
  /** Quiet window and its bound, as resolved when the item was admitted. */
  debounceMs: number;
  maxWaitMs: number;
  /** overflow items: how many messages were dropped, and a one-line summary of each. */
  dropped?: number;
  summaries?: string[];
  /**
   * A parked item the active run has taken for injection at its next boundary: from then on it is
   * the run's (cap drops and `queue cancel` leave it alone), so it cannot be both injected and
   * reported dropped. Cleared when the run ends without injecting it (it becomes a followup).
   */
  leasedBy?: string;
  /**
   * The run that took this item for its turn. The item leaves the queue only once its user record
   * is on disk (claim → record + fsync → removal), so a crash in between leaves it claimed; a
   * claim whose run died is taken over as it was (same runId, same turn) by the next owner.
   */
  claimedBy?: string;
  /**
   * The runId of a run that died holding this item (claimed or leased for steering): it may have
   * recorded it already, so the transcript is checked before it is recorded again.
   */
  orphanedFrom?: string;
  /**
   * The message was recorded as it arrived, by the batch that wrote this item (a message that
   * started its run at once, claimed by it until its runner starts): the record is written and
   * fsynced before the store holds the item, so it is known recorded without looking for it.
   */
  recordedOnArrival?: true;
}

/** A message a run carries: what its run_failed names when the run fails or its process dies. */
export interface CarriedMessage {
  runId: string;
  messageId?: string;
}

/** A process, as far as another process on the same host can check that it is still alive. */
export interface ProcessRef {
  pid: number;
  hostname: string;
  /** Epoch ms the process started: tells this process's own records apart from an earlier one's of the same pid. */
  processStartTime: number;
  /**
   * Linux: /proc/<pid>/stat field 22 of the process (as in lock owner records). Compared exactly
   * with the live pid's, it tells a reused pid apart; absent where /proc is not (and in records
   * of older versions: those are judged by their pid alone).
   */
  processStartTicks?: number;
}

export type LaneName = 'main' | 'cron';

/** `entry.activeRun`: the one run of this session, while it is claimed or running. */
export interface ActiveRunRecord extends ProcessRef {
  runId: string;
  sessionId: string;
  startedAt: number;
  lane: LaneName;
  /** The messages the run carries (its turn's and those steered into it); absent = only its own runId. */
  messages?: CarriedMessage[];
  /** Where the run's replies go (the route of the message that started it). */
  deliveryContext?: QueueDeliveryContext;
}

/** `entry.queueOwner`: the process that drains this session's queue (the session lane holder). */
export interface QueueOwnerRecord extends ProcessRef {
  since: number;
}

export type PendingResetReason = 'command' | 'daily' | 'idle' | 'cron';

/** `entry.pendingReset`: a rotation asked for while a run was active, applied once it has ended. */
export interface PendingReset {
  reason: PendingResetReason;
  previousSessionId: string;
  newSessionId: string;
  newSessionFile: string;
  requestedAt: number;
  model?: string;
  /** A reset command abandons what waits under the old instance; a daily/idle/cron rotation drains it first. */
  expireOld: boolean;
  /**
   * `due`: the agent's turn before the reset (`session.reset.beforeReset`) has not run yet; the
   * rotation waits for it. Taken off when that turn is claimed, so it runs at most once.
   */
  beforeReset?: 'due';
}

/** `entry.outbox`: transcript records waiting for the session write lock (held by a run elsewhere). */
export interface OutboxItem {
  id: string;
  sessionId: string;
  records: Record<string, unknown>[];
}
