// The shapes admission works with: a message with its address between routing and storing, what
// admission decided for it, and what one store's admission asks of the runtime after the batch.

import type { LaneName, QueueItem, SessionPlan } from '../policy/index.js';
import type { NewTranscriptEntry, RemovedMemories, StoreLocation } from '../store/index.js';
import type { EngineContext } from './context.js';
import type { InboundMessage } from './message.js';
import type { Liveness, QueueEvent, QueuedEntry, SessionRef } from './queue-state.js';

/**
 * `recorded`: stored (no runner, or a system event); `started`: stored and run now; `steered`:
 * parked for the active run's next boundary; `queued` / `collected`: held for a later turn (one
 * each / one batch); `interrupted`: the active run is aborted and this message runs after it;
 * `dropped`: not taken (reported by a dropped event); `duplicate`; `command`: a session command.
 */
export type Disposition = 'recorded' | 'started' | 'steered' | 'queued' | 'collected' | 'interrupted' | 'dropped' | 'duplicate' | 'command';

export interface ResetInfo {
  reason: 'daily' | 'idle' | 'command';
  previousSessionId: string;
}

/** A message with its address, between routing and storing. */
export interface Addressed {
  line: number;
  message: InboundMessage;
  agentId: string;
  sessionKey: string;
  matchedBy: string;
  runId: string;
  incognito: boolean;
  /** Wall-clock ms when the line arrived (see NdjsonLine), if known. */
  receivedAt?: number;
  plan?: SessionPlan;
  /** Set for agents with a runner: what admission decided (re-set on every mutator run). */
  outcome?: Outcome;
  /** Pinned (`sessionId`) to an instance that is no longer current: the rebind check failed. */
  rebind?: Rebind;
}

/** Where a message pinned to a rotated-away instance goes instead of the current conversation. */
export interface Rebind {
  sessionId: string;
  currentSessionId: string | null;
  /** That instance's transcript (archived or not yet), if it still exists; found after planning. */
  file: string | null;
}

/** What queue admission decided for one message of an agent with a runner. */
export interface Outcome {
  disposition: Disposition;
  sessionId: string;
  reset: ResetInfo | null;
  /** Append the message's own record now (otherwise it is queued, dropped or in the outbox). */
  record: boolean;
  /** The text to record (reset trigger and `/queue` directive removed). */
  text?: string;
  /** Records owed to this transcript (the outbox), written before the message. */
  before: NewTranscriptEntry[];
  /** Records written after the message (a command's reply). */
  after: NewTranscriptEntry[];
  /** Events reported after this line's result (dropped, expired, reply, run_failed). */
  events: QueueEvent[];
}

/** A run claimed for an idle session by this batch; it starts once the batch is on disk. */
export interface StartClaim {
  item: Addressed;
  ref: SessionRef;
  sessionId: string;
  sessionFile: string;
  lane: LaneName;
  text: string;
  deliveryContext?: QueueItem['deliveryContext'];
  /** The message's queue item, claimed by the run until it reaches a runner. */
  claimed: QueueItem;
}

/** What one store's admission asks of the runtime once the batch is on disk. */
export interface BatchEffects {
  starts: StartClaim[];
  aborts: { sessionKey: string; runId: string; reason: string }[];
  /** In-process runs to show their entry (parked items, outbox, abort requests). */
  observe: Map<string, QueuedEntry>;
  drains: Map<string, SessionRef>;
}

export interface AdmitEnv {
  ctx: EngineContext;
  location: StoreLocation;
  liveness: Liveness;
  effects: BatchEffects;
  now: number;
  nowWall: number;
  noWait: boolean;
  /**
   * Entries the record-only plan made in this pass (copies now in the store, held by no one
   * else): the session's next message edits its entry in place instead of copying it again.
   */
  planned: Set<object>;
  /** What removed entries of the store remembered (store/removed-memory.ts), by key. */
  removed: RemovedMemories;
  /** The header's time of entries without a usable sessionStartedAt (transcriptStartedAtOf), by key. */
  headerTimes: Map<string, { sessionId: string; at: number }>;
}
