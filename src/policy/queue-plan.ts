// What the queue decides, as pure functions: the disposition of a message on an idle or busy
// session, cap and drop, which waiting items form the next turn and when (the items' shapes are in
// queue-records.ts, the prompt texts in queue-prompts.ts).

import type { DropPolicy, QueueMode } from './queue-settings.js';
import type { CarriedMessage, QueueItem, QueueItemState } from './queue-records.js';
import { overflowPrompt, summaryLine } from './queue-prompts.js';
import type { PlanMessageKind } from './session-plan.js';

export type QueueDisposition = 'started' | 'recorded' | 'steered' | 'queued' | 'collected' | 'interrupted' | 'dropped';

export interface AdmissionInput {
  kind: PlanMessageKind;
  mode: QueueMode;
  cap: number;
  dropPolicy: DropPolicy;
  /** A live run is active on the session. */
  activeRun: boolean;
  /** The session's waiting items, oldest first. */
  queue: readonly QueueItem[];
  /** A rotation is pending (waits for the active run to end). */
  pendingReset: boolean;
  /** The message is a reset trigger (`/new`, `/reset`) that found the session busy. */
  resetTrigger: boolean;
  /** False when runs may not start now (`ingest --no-wait`): idle work waits in the queue. */
  canStart: boolean;
  /** The active run answers another route than this message's: steering it in would answer it there. */
  activeRunElsewhere?: boolean;
  /** False when the agent's runner can never take a steer (runner maySteer): a steer message is a followup from the start. */
  runnerMaySteer?: boolean;
}

export type Admission =
  /** Idle: record the message and run it now. */
  | { action: 'start' }
  /** Idle system event: record it; it starts no run. */
  | { action: 'record' }
  /** Busy heartbeat/system event: never queued behind user work. */
  | { action: 'drop'; reason: 'busy' }
  /** Busy and the queue is at its cap with drop `new`. */
  | { action: 'reject'; reason: 'cap' }
  | {
      action: 'enqueue';
      state: QueueItemState;
      disposition: 'steered' | 'queued' | 'collected' | 'interrupted';
      /** Abort the active run (interrupt mode, reset trigger). */
      abortActive: boolean;
    };

/** Items that count against the cap (the overflow summary does not, nor items a run has claimed). */
export function waitingItems(queue: readonly QueueItem[]): QueueItem[] {
  return queue.filter((item) => item.kind !== 'overflow' && item.claimedBy === undefined);
}

/** The session is busy: a live run, anything waiting, or a rotation still to apply. */
export function isBusy(input: Pick<AdmissionInput, 'activeRun' | 'queue' | 'pendingReset'>): boolean {
  return input.activeRun || input.queue.length > 0 || input.pendingReset;
}

/**
 * The disposition of one message (queue.md "Queue modes"). Busy = a live run, waiting items or a
 * pending rotation; a message never overtakes waiting ones (FIFO, even for interrupt: it aborts the
 * active run but queues behind what waits). A steer message is parked for injection only while
 * everything ahead of it is parked too; behind a held followup it waits like one.
 */
export function planAdmission(input: AdmissionInput): Admission {
  const busy = isBusy(input);
  if (input.kind === 'heartbeat' || input.kind === 'system') {
    if (busy) return { action: 'drop', reason: 'busy' };
    if (input.kind === 'system') return { action: 'record' };
    if (input.canStart) return { action: 'start' };
  } else if (!busy && input.canStart) {
    return { action: 'start' };
  }
  if (!busy) return { action: 'enqueue', state: 'queued', disposition: 'queued', abortActive: false };

  // An interrupt supersedes what waits (the caller drops it, reported), so the cap cannot refuse it.
  if (input.mode !== 'interrupt' && waitingItems(input.queue).length >= input.cap && input.dropPolicy === 'new') return { action: 'reject', reason: 'cap' };
  if (input.resetTrigger) return { action: 'enqueue', state: 'queued', disposition: input.activeRun ? 'interrupted' : 'queued', abortActive: input.activeRun };
  switch (input.mode) {
    case 'interrupt':
      return { action: 'enqueue', state: 'queued', disposition: input.activeRun ? 'interrupted' : 'queued', abortActive: input.activeRun };
    case 'collect':
      return { action: 'enqueue', state: 'queued', disposition: 'collected', abortActive: false };
    case 'followup':
      return { action: 'enqueue', state: 'queued', disposition: 'queued', abortActive: false };
    case 'steer': {
      // Items the active run has claimed are its own (recorded a moment later), not waiting work.
      // A message from another route is never steered into a run that answers elsewhere: it
      // waits as a followup, answered on its own route. For a runner that cannot steer it is a
      // followup at once, and says so: reported `steered`, it was never injected anywhere.
      const canPark = input.activeRun && input.runnerMaySteer !== false && !input.activeRunElsewhere && !input.pendingReset && input.queue.every((item) => item.state === 'parked' || item.claimedBy !== undefined);
      return canPark
        ? { action: 'enqueue', state: 'parked', disposition: 'steered', abortActive: false }
        : { action: 'enqueue', state: 'queued', disposition: 'queued', abortActive: false };
    }
  }
}

export interface DroppedItem {
  item: QueueItem;
  reason: 'cap';
  drop: DropPolicy;
}

/**
 * Adds an admitted item at the end of the queue, first making room at the cap: `old` drops the
 * oldest waiting items, `summarize` drops them too but keeps a one-line summary of each in the
 * overflow item at the head of the queue (created when missing). `new` never gets here (rejected).
 * Items leased by the active run are not dropped; when nothing else could make room, the
 * incoming message is rejected instead (`rejected`, the queue unchanged).
 */
export function enqueueItem(
  queue: readonly QueueItem[],
  item: QueueItem,
  settings: { cap: number; dropPolicy: DropPolicy },
  overflowRunId: () => string,
): { queue: QueueItem[]; dropped: DroppedItem[]; rejected: boolean } {
  const cap = Math.max(1, settings.cap);
  const evictable = queue.filter((candidate) => isEvictable(candidate)).length;
  if (waitingItems(queue).length - evictable >= cap) return { queue: [...queue], dropped: [], rejected: true };
  const next = [...queue];
  const dropped: DroppedItem[] = [];
  let waiting = waitingItems(next).length;
  while (waiting >= cap) {
    const index = next.findIndex((candidate) => isEvictable(candidate));
    if (index < 0) break;
    const [victim] = next.splice(index, 1);
    waiting -= 1;
    dropped.push({ item: victim, reason: 'cap', drop: settings.dropPolicy });
    if (settings.dropPolicy === 'summarize') {
      let overflow = next[0]?.kind === 'overflow' ? { ...next[0] } : undefined;
      if (overflow === undefined) {
        overflow = {
          runId: overflowRunId(),
          requester: 'switchboard',
          sessionKey: victim.sessionKey,
          sessionId: victim.sessionId,
          enqueuedAt: item.enqueuedAt,
          wallAt: item.wallAt,
          mode: 'followup',
          state: 'queued',
          kind: 'overflow',
          text: '',
          channel: victim.channel,
          deliveryContext: victim.deliveryContext,
          debounceMs: victim.debounceMs,
          maxWaitMs: victim.maxWaitMs,
          dropped: 0,
          summaries: [],
        };
        next.unshift(overflow);
      } else {
        next[0] = overflow;
      }
      overflow.dropped = (overflow.dropped ?? 0) + 1;
      overflow.summaries = [...(overflow.summaries ?? []), summaryLine(victim)];
      overflow.text = overflowPrompt(overflow.dropped, overflow.summaries);
    }
  }
  next.push(item);
  return { queue: next, dropped, rejected: false };
}

/** Leased and claimed items belong to a run: the cap never drops them. */
function isEvictable(item: QueueItem): boolean {
  return item.kind !== 'overflow' && item.leasedBy === undefined && item.claimedBy === undefined;
}

function routeKey(item: Pick<QueueItem, 'deliveryContext' | 'channel'>): string {
  const context = item.deliveryContext;
  if (!context) return `channel:${item.channel}`;
  return JSON.stringify([context.channel, context.to, context.accountId ?? null, context.threadId ?? null]);
}

/** Two messages are answered on the same route (collect batches and steering never mix routes). */
export function sameDeliveryRoute(a: Pick<QueueItem, 'deliveryContext' | 'channel'>, b: Pick<QueueItem, 'deliveryContext' | 'channel'>): boolean {
  return routeKey(a) === routeKey(b);
}

export type TurnPlan =
  | { kind: 'empty' }
  /** Not yet: the quiet window runs until this wall-clock time. */
  | { kind: 'wait'; untilWall: number }
  /** These items form the next turn (in order); `rest` is what stays queued. */
  | { kind: 'turn'; shape: 'single' | 'collect' | 'overflow'; items: QueueItem[]; rest: QueueItem[] };

/**
 * The next turn of an idle session's queue. The overflow summary goes first, at once; an
 * interrupting message runs at once; otherwise the quiet window must pass: `debounceMs` (of the
 * latest item) after the latest enqueue, but no later than `maxWaitMs` after the oldest waiting
 * item. A collect item takes every collect item of the same delivery route from the run of
 * collect items at the head; any other item (a parked steer message that missed its run is a
 * followup now) is a turn of its own.
 */
export function planNextTurn(queue: readonly QueueItem[], nowWall: number, options: { afterOverflow?: boolean } = {}): TurnPlan {
  if (queue.length === 0) return { kind: 'empty' };
  const claimed = claimedTurn(queue);
  if (claimed !== undefined) return claimed;
  const head = queue[0];
  if (head.kind === 'overflow') {
    // Under sustained input at the cap every arrival drops one more message and renews the
    // summary; right after a summary turn, a regular turn that is ready goes first so that
    // summaries cannot starve the messages they make room for.
    if (options.afterOverflow && queue.length > 1) {
      const regular = planNextTurn(queue.slice(1), nowWall);
      if (regular.kind === 'turn') return { ...regular, rest: [head, ...regular.rest] };
    }
    return { kind: 'turn', shape: 'overflow', items: [head], rest: queue.slice(1) };
  }
  if (head.mode !== 'interrupt') {
    let latest = head;
    let oldestWall = head.wallAt;
    for (const item of queue) {
      if (item.wallAt >= latest.wallAt) latest = item;
      oldestWall = Math.min(oldestWall, item.wallAt);
    }
    const quietAt = latest.wallAt + Math.max(0, latest.debounceMs);
    const boundAt = oldestWall + Math.max(0, head.maxWaitMs);
    const readyAt = Math.min(quietAt, boundAt);
    if (nowWall < readyAt && !stampedAfter(latest, nowWall)) return { kind: 'wait', untilWall: readyAt };
  }
  if (head.mode !== 'collect') return { kind: 'turn', shape: 'single', items: [head], rest: queue.slice(1) };
  const key = routeKey(head);
  const items: QueueItem[] = [];
  const rest: QueueItem[] = [];
  let inRun = true;
  for (const item of queue) {
    if (inRun && item.mode === 'collect' && item.kind !== 'overflow') {
      if (routeKey(item) === key) items.push(item);
      else rest.push(item);
    } else {
      inRun = false;
      rest.push(item);
    }
  }
  return { kind: 'turn', shape: 'collect', items, rest };
}

/**
 * An item stamped after "now": the wall clock was stepped back since it was enqueued (NTP, a VM
 * resumed), so how long it has waited cannot be told. Its window is over: waiting for the clock to
 * come back to the stamp held the queue for as long as the step (an hour back, an hour of silence,
 * debounceMaxWaitMs and all). The price is a collect window cut short, never a message held.
 */
function stampedAfter(item: QueueItem, nowWall: number): boolean {
  return item.wallAt > nowWall;
}

/**
 * A claim left by a run that died before its runner started (claimed items leave the queue right
 * before it does): that same turn (its items, its shape) goes first and at once — it was due
 * already, and re-planning it could mix items that may already be recorded with new ones.
 */
function claimedTurn(queue: readonly QueueItem[]): TurnPlan | undefined {
  const first = queue.find((item) => item.claimedBy !== undefined);
  if (first === undefined) return undefined;
  const items = queue.filter((item) => item.claimedBy === first.claimedBy);
  const rest = queue.filter((item) => item.claimedBy !== first.claimedBy);
  const head = items[0];
  const shape = head.kind === 'overflow' ? 'overflow' : head.mode === 'collect' ? 'collect' : 'single';
  return { kind: 'turn', shape, items, rest };
}

/** Splits the queue into what may still run in this address's instance(s) and what is pinned to a rotated one. */
export function splitByInstance(queue: readonly QueueItem[], sessionId: string, pendingSessionId?: string): { keep: QueueItem[]; expired: QueueItem[] } {
  const keep: QueueItem[] = [];
  const expired: QueueItem[] = [];
  for (const item of queue) {
    if (item.sessionId === sessionId || (pendingSessionId !== undefined && item.sessionId === pendingSessionId)) keep.push(item);
    else expired.push(item);
  }
  return { keep, expired };
}

/** The parked items at the head of the queue: what may be injected at the active run's next boundary. */
export function parkedPrefix(queue: readonly QueueItem[], sessionId: string): QueueItem[] {
  const prefix: QueueItem[] = [];
  for (const item of queue) {
    if (item.claimedBy !== undefined) continue; // taken by a turn, recorded in a moment: not ahead of them
    if (item.state !== 'parked' || item.sessionId !== sessionId) break;
    prefix.push(item);
  }
  return prefix;
}

/** At the end of a run, parked items that were not injected become followups (one turn each, in order). */
export function unparkAll(queue: readonly QueueItem[]): QueueItem[] {
  return queue.map((item) => {
    if (item.state !== 'parked') return item;
    const { leasedBy: _leasedBy, ...rest } = item;
    return { ...rest, state: 'queued' as const };
  });
}

/**
 * The queue after the run `runId` died: items it had claimed stay claimed (their turn is taken
 * over as it was), parked items it had leased become followups; both are marked orphanedFrom,
 * because the dead run may have recorded them before it could take them out of the queue.
 */
export function orphanItems(queue: readonly QueueItem[], runId: string): { queue: QueueItem[]; claimed: number; unparked: number } {
  let claimed = 0;
  let unparked = 0;
  const next = queue.map((item): QueueItem => {
    if (item.claimedBy === runId) {
      claimed += 1;
      return { ...item, orphanedFrom: runId };
    }
    if (item.state !== 'parked') return item;
    unparked += 1;
    const { leasedBy, ...rest } = item;
    return leasedBy === runId ? { ...rest, state: 'queued', orphanedFrom: runId } : { ...rest, state: 'queued' };
  });
  return { queue: next, claimed, unparked };
}

/** How a run names a message it carries (runId, and messageId when the message had one). */
export function carriedOf(item: Pick<QueueItem, 'runId' | 'messageId'>): CarriedMessage {
  return item.messageId === undefined ? { runId: item.runId } : { runId: item.runId, messageId: item.messageId };
}
