// What one turn is, as the queue drain, ingest and the before-reset turn hand it to a run: the
// session and instance, the runner and its messages, the records and queue items it starts with.

import type { LaneName, QueueDeliveryContext, QueueItem } from '../policy/index.js';
import type { RunMessage, RunnerSpec } from '../runner/index.js';
import type { NewTranscriptEntry } from '../store/index.js';
import type { SessionRef } from './queue-state.js';

export interface TurnSpec {
  ref: SessionRef;
  sessionId: string;
  transcript: string;
  runId: string;
  lane: LaneName;
  spec: RunnerSpec;
  /** What the runner gets. */
  messages: RunMessage[];
  /**
   * A new instance's opening (its reset_notice), written first under the run's lock: before what
   * the outbox owes the session and before the turn's own records.
   */
  opening?: NewTranscriptEntry[];
  /** Written under the run's lock before the runner starts (the consumed queue items). */
  startRecords: NewTranscriptEntry[];
  /** The queue items this turn claimed (left queued if the session lock cannot be had). */
  items: QueueItem[];
  /** Taken over from a run that died: its items may be recorded already (checked first). */
  recheck?: boolean;
  deliveryContext?: QueueDeliveryContext;
  /** `before-reset`: the agent's turn on an instance about to be reset; its replies are not delivered. */
  shape: 'start' | 'single' | 'collect' | 'overflow' | 'before-reset';
  /** overflow turns: what the overflow event reports. */
  overflow?: { dropped: number; summary: string[] };
}
