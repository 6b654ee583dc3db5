// Draining one session's queue: one look inside the store update (planDrain, pure given
// liveness and the clocks), then what it decided — rotation, expiries, outbox records, the next
// turn — carried out (drainOnce). Used by the QueueRuntime in runtime.ts.

import { randomUUID } from 'node:crypto';
import { systemClock, toSwitchboardError } from '../core/index.js';
import {
  carriedOf,
  carryOverToNewInstance,
  collectPrompt,
  planNextTurn,
  singleSender,
  senderLabel,
  splitByInstance,
  type LaneName,
  type QueueItem,
} from '../policy/index.js';
import type { RunMessage } from '../runner/index.js';
import { archiveFile, isInMemory, isUsableEntry, readSessionStore, withLock, type NewTranscriptEntry, type SessionStore } from '../store/index.js';
import { appendInStore, transactRetryingBusy } from './store-append.js';
import { sessionLockOptions, transcriptPathIn, type EngineContext } from './context.js';
import {
  THIS_PROCESS,
  failAbandonedRun,
  dropOutbox,
  expiredEventOf,
  isThisProcess,
  learnLiveness,
  ownerRecord,
  queueOf,
  recordOfItem,
  runMessageOf,
  runnerFor,
  setQueue,
  takeCancelled,
  peekOutbox,
  unknownHolders,
  type Liveness,
  type QueueEvent,
  type QueuedEntry,
  type SessionRef,
} from './queue-state.js';
import { learnRecordedOrphans, noteLeaving, reportLeaving, unknownOrphans } from './orphans.js';
import { executeTurn, updateStore } from './runs.js';
import type { TurnSpec } from './turn-spec.js';
import { beforeResetFor, beforeResetTurnSpec } from './before-reset.js';
import { transcriptFileOf } from './session-list.js';
import type { QueueRuntime } from './runtime.js';

interface DrainTurn {
  items: QueueItem[];
  shape: 'single' | 'collect' | 'overflow';
  runId: string;
  lane: LaneName;
  /** Some item was held by a run that died: check the transcript before recording it again. */
  recheck: boolean;
}

interface DrainPlan {
  kind: 'need-liveness' | 'stop' | 'done' | 'wait' | 'turn';
  events: QueueEvent[];
  /** The outbox items owed now, by id: appended (those still there then) after the plan, and only then taken out. */
  outboxIds: string[];
  rotation?: { previousSessionId: string; previousSessionFile?: string; reason: string; model?: string };
  sessionId?: string;
  sessionFile?: string;
  waitMs: number;
  turn?: DrainTurn;
  /** The agent's turn before the pending rotation (claimed in this plan). */
  beforeReset?: { runId: string; reason: string };
}

/**
 * One look at a session's queue inside the store update (pure given liveness and the clocks):
 * dead holders are cleared; a session with a live run or a live other owner is left alone;
 * otherwise this process owns it: a pending rotation is applied (a reset command at once, a
 * daily/idle/cron one when nothing of the old instance waits any more), items pinned to a
 * rotated instance expire, and the next turn is claimed when its quiet window has passed.
 */
function planDrain(
  store: SessionStore,
  ref: SessionRef,
  liveness: Liveness,
  hasRunner: boolean,
  canTurnFirst: boolean,
  mayStartTurns: boolean,
  now: number,
  nowWall: number,
  afterOverflow: boolean,
): DrainPlan {
  const plan: DrainPlan = { kind: 'stop', events: [], outboxIds: [], waitMs: 0 };
  const entry = store[ref.sessionKey] as QueuedEntry | undefined;
  // A row of the wrong shape, or one sharing its transcript with another key, is left as it is
  // (STORE_CORRUPT for its lines, a doctor finding): a drain would read its queue and write into
  // whatever file it names — another session's, for a shared one.
  if (!entry || !isUsableEntry(store, ref.sessionKey, ref.location.sessionsDir)) return plan;
  if (unknownHolders(entry, liveness) || unknownOrphans(entry, liveness).length > 0) return { ...plan, kind: 'need-liveness' };
  let changed = false;
  const abandoned = failAbandonedRun(entry, liveness, ref.sessionKey, randomUUID);
  if (abandoned) {
    plan.events.push(abandoned);
    changed = true;
  }
  if (entry.activeRun) return finish(plan, entry, changed, now);
  if (entry.queueOwner && !isThisProcess(entry.queueOwner)) return finish(plan, entry, changed, now);
  // This process drains the session: what `queue cancel`/`abort` took out of it is reported here.
  const cancelled = takeCancelled(entry, ref.sessionKey);
  if (cancelled.length > 0) {
    plan.events.push(...cancelled);
    changed = true;
  }
  if (!hasRunner) {
    if (entry.queueOwner) {
      delete entry.queueOwner;
      changed = true;
    }
    return finish(plan, entry, changed, now);
  }

  const pending = entry.pendingReset;
  const turnFirstDue = pending?.beforeReset === 'due' && canTurnFirst && typeof entry.sessionFile === 'string';
  if (!mayStartTurns && turnFirstDue) return letGo(plan, entry, changed, now); // the turn before the reset comes first
  if (pending) {
    const oldWaiting = queueOf(entry).some((item) => item.sessionId === entry.sessionId);
    if ((pending.expireOld || !oldWaiting) && turnFirstDue) {
      // The agent's turn on the old instance comes first; the rotation is applied by the drain
      // step after it, whatever became of the turn. Claimed once: the mark goes with the claim.
      const { beforeReset: _due, ...rest } = pending;
      entry.pendingReset = rest;
      const runId = randomUUID();
      if (!entry.queueOwner) entry.queueOwner = ownerRecord(now);
      entry.activeRun = { ...THIS_PROCESS, runId, sessionId: entry.sessionId, startedAt: now, lane: 'main', messages: [{ runId }] };
      delete entry.abortRequested;
      delete entry.stopRequested;
      delete entry.stopReason;
      plan.kind = 'turn';
      plan.sessionId = entry.sessionId;
      plan.sessionFile = entry.sessionFile as string;
      plan.beforeReset = { runId, reason: pending.reason };
      return finish(plan, entry, true, now);
    }
    if (pending.expireOld || !oldWaiting) {
      plan.rotation = { previousSessionId: entry.sessionId, previousSessionFile: entry.sessionFile as string | undefined, reason: pending.reason, model: pending.model };
      carryOverToNewInstance(entry, { sessionKey: ref.sessionKey, reason: pending.reason, sessionId: pending.newSessionId });
      entry.sessionId = pending.newSessionId;
      entry.sessionFile = pending.newSessionFile;
      entry.sessionStartedAt = now;
      if (pending.model) entry.model = entry.modelOverride = pending.model;
      delete entry.pendingReset;
      changed = true;
    }
  }
  const queue = queueOf(entry);
  const { keep, expired } = splitByInstance(queue, entry.sessionId, entry.pendingReset?.newSessionId);
  const current = entry.sessionId;
  const leaving = reportLeaving(expired, ref.sessionKey, liveness, (item) => expiredEventOf(item, current));
  plan.events.push(...leaving.events);
  if (expired.length > 0) {
    setQueue(entry, keep);
    // Recorded with the write that takes them out (the outbox just below carries them now).
    noteLeaving(entry, leaving, randomUUID);
    changed = true;
  }
  plan.outboxIds = peekOutbox(entry).ids;
  plan.sessionId = entry.sessionId;
  plan.sessionFile = entry.sessionFile as string | undefined;

  if (keep.length === 0 && !entry.pendingReset) {
    if (entry.queueOwner) {
      delete entry.queueOwner;
      changed = true;
    }
    if (entry.abortRequested !== undefined || entry.stopRequested !== undefined) {
      delete entry.abortRequested;
      delete entry.stopRequested;
      delete entry.stopReason;
      changed = true;
    }
    plan.kind = 'done';
    return finish(plan, entry, changed, now);
  }
  if (!mayStartTurns) return letGo(plan, entry, changed, now);
  if (!entry.queueOwner) {
    entry.queueOwner = ownerRecord(now);
    changed = true;
  }
  const next = planNextTurn(keep, nowWall, { afterOverflow });
  if (next.kind === 'wait') {
    plan.kind = 'wait';
    plan.waitMs = Math.max(1, next.untilWall - nowWall);
    return finish(plan, entry, changed, now);
  }
  if (next.kind === 'empty') {
    plan.kind = 'done';
    return finish(plan, entry, changed, now);
  }
  // Claimed, not removed: the items leave the queue only once their user record is on disk
  // (LocalRun.commitClaim), so a crash before that leaves them here for the next owner.
  const runId = next.items[0].claimedBy ?? next.items[0].runId;
  const chosen = new Set(next.items);
  const items = next.items.map((item) => ({ ...item, claimedBy: runId }));
  setQueue(entry, keep.map((item) => (chosen.has(item) ? { ...item, claimedBy: runId } : item)));
  const lane: LaneName = next.items.some((item) => item.kind === 'cron') ? 'cron' : 'main';
  entry.activeRun = { ...THIS_PROCESS, runId, sessionId: entry.sessionId, startedAt: now, lane, messages: items.map(carriedOf) };
  if (items[0].deliveryContext) entry.activeRun.deliveryContext = { ...items[0].deliveryContext };
  if (entry.abortRequested !== undefined) delete entry.abortRequested;
  delete entry.stopRequested;
  delete entry.stopReason;
  plan.kind = 'turn';
  plan.turn = { items, shape: next.shape, runId, lane, recheck: items.some((item) => item.orphanedFrom !== undefined) };
  return finish(plan, entry, true, now);
}

/**
 * A stopping process (serve after SIGTERM) starts no queued turn: it gives the queue up, so that
 * the next ingest or serve takes it over at once instead of waiting for this process to be gone.
 * The notes and expiries planned so far are still written.
 */
function letGo(plan: DrainPlan, entry: QueuedEntry, changed: boolean, now: number): DrainPlan {
  if (entry.queueOwner && isThisProcess(entry.queueOwner)) {
    delete entry.queueOwner;
    changed = true;
  }
  plan.kind = 'stop';
  return finish(plan, entry, changed, now);
}

function finish(plan: DrainPlan, entry: QueuedEntry, changed: boolean, now: number): DrainPlan {
  if (changed) entry.updatedAt = now;
  return plan;
}

type DrainOutcome = { kind: 'stop' | 'done' } | { kind: 'turn'; shape: DrainTurn['shape'] } | { kind: 'wait'; waitMs: number };

/** One drain step: plan in the store, then the side effects (events, rotation, records, the turn). */
export async function drainOnce(ctx: EngineContext, runtime: QueueRuntime, ref: SessionRef, afterOverflow: boolean): Promise<DrainOutcome> {
  const spec = runnerFor(ctx, ref.agentId);
  const turnFirst = beforeResetFor(ctx, ref.agentId);
  const liveness: Liveness = new Map();
  // An incognito queue cannot wait for the next process (it lives in this one's memory): it still runs.
  const mayStartTurns = runtime.startsQueuedTurns || isInMemory(ref.location.storePath);
  let plan: DrainPlan | undefined;
  for (let attempt = 0; attempt < 4; attempt++) {
    const now = ctx.clock.now();
    // The wall clock is read under the store lock: every item in the store was stamped before it,
    // so a stamp after it can only be a clock stepped back (planNextTurn runs such items at once).
    plan = await updateStore(ctx, ref.location, (store) => planDrain(store, ref, liveness, spec !== undefined, turnFirst !== undefined, mayStartTurns, now, systemClock.now(), afterOverflow));
    if (plan.kind !== 'need-liveness') break;
    const store = await readSessionStore(ref.location.storePath);
    const entry = store[ref.sessionKey] as QueuedEntry | undefined;
    await learnLiveness(ctx, ref.location, [entry], liveness);
    await learnRecordedOrphans(ref.location, entry, liveness);
  }
  if (plan === undefined || plan.kind === 'need-liveness') return { kind: 'stop' };
  for (const event of plan.events) runtime.emit(event);

  const { location } = ref;
  const sessionId = plan.sessionId;
  const preRecords: NewTranscriptEntry[] = [];
  if (plan.rotation) {
    if (plan.rotation.previousSessionFile) {
      const oldFile = transcriptPathIn(location, plan.rotation.previousSessionFile);
      try {
        await withLock(oldFile, sessionLockOptions(ctx, { sessionKey: ref.sessionKey }), () => archiveFile(oldFile, 'reset', ctx.clock.now()));
      } catch {
        // The new instance is current already; an unarchived old file is reported by doctor.
      }
    }
    if (plan.rotation.reason !== 'cron') {
      const notice: NewTranscriptEntry = { type: 'reset_notice', reason: plan.rotation.reason, previousSessionId: plan.rotation.previousSessionId };
      if (plan.rotation.model) notice.model = plan.rotation.model;
      preRecords.push(notice);
    }
  }
  if (sessionId === undefined) return { kind: plan.kind === 'done' ? 'done' : 'stop' };
  const transcript = transcriptPathIn(location, plan.sessionFile ?? `${sessionId}.jsonl`);

  if (plan.kind === 'turn' && plan.beforeReset && turnFirst) {
    const { runId, reason } = plan.beforeReset;
    await executeTurn(ctx, runtime, beforeResetTurnSpec(turnFirst, { ref, runId, sessionId, transcript, reason }));
    return { kind: 'turn', shape: 'single' };
  }
  if (plan.kind === 'turn' && plan.turn && spec) {
    // The run reads the outbox itself once it holds the session lock (nothing is appended twice).
    await executeTurn(ctx, runtime, buildTurn(ctx, ref, plan.turn, sessionId, transcript, spec, preRecords));
    return { kind: 'turn', shape: plan.turn.shape };
  }
  if (preRecords.length > 0 || plan.outboxIds.length > 0) {
    const planned = new Set(plan.outboxIds);
    try {
      // In a store transaction, like every append of an idle session's transcript; the notes
      // leave the outbox in the same sessions.json write that follows their fsync.
      await transactRetryingBusy(ctx, location, async (store, tx) => {
        const entry = (Object.hasOwn(store, ref.sessionKey) ? store[ref.sessionKey] : undefined) as QueuedEntry | undefined;
        // Removed or rotated since the plan: the file is an archive's old name or another
        // instance's, and an append would make it again as an orphan. Whatever is still in the
        // outbox goes to the instance the entry names now, with its next drain.
        if (entry === undefined || !isUsableEntry(store, ref.sessionKey, location.sessionsDir) || entry.sessionId !== sessionId || transcriptFileOf(location, entry, ref.sessionKey) !== transcript) return;
        // Only what is still owed: a run that held the session lock while this waited for it
        // (SESSION_BUSY, retried) may have appended the same outbox items and taken them out.
        const owed = peekOutbox({ ...entry, outbox: (entry.outbox ?? []).filter((item) => planned.has(item.id)) });
        const records = [...preRecords, ...owed.records];
        if (records.length === 0) return;
        // The entry's own instance, unless this drain rotated it: a file missing with a `.deleted.`
        // archive is an interrupted `sessions delete`, put back first (as an ingest append does).
        await appendInStore(ctx, tx, { file: transcript, sessionKey: ref.sessionKey, sessionId, agentId: ref.agentId, resumesFile: plan.rotation === undefined }, records);
        if (owed.ids.length > 0 && dropOutbox(entry, owed.ids)) entry.updatedAt = ctx.clock.now();
      });
    } catch (err) {
      process.emitWarning(`switchboard: could not record queue notes in ${transcript}: ${toSwitchboardError(err).message}`);
    }
  }
  if (plan.kind === 'wait') return { kind: 'wait', waitMs: plan.waitMs };
  return { kind: plan.kind === 'done' ? 'done' : 'stop' };
}

function buildTurn(
  ctx: EngineContext,
  ref: SessionRef,
  turn: DrainTurn,
  sessionId: string,
  transcript: string,
  spec: NonNullable<ReturnType<typeof runnerFor>>,
  preRecords: NewTranscriptEntry[],
): TurnSpec {
  const head = turn.items[0];
  const base = { ref, sessionId, transcript, runId: turn.runId, lane: turn.lane, spec, items: turn.items, recheck: turn.recheck, deliveryContext: head.deliveryContext, opening: preRecords };
  if (turn.shape === 'overflow') {
    const summary = head.summaries ?? [];
    return {
      ...base,
      shape: 'overflow',
      overflow: { dropped: head.dropped ?? summary.length, summary },
      startRecords: [{ type: 'queue_overflow', runId: head.runId, dropped: head.dropped ?? summary.length, summary, text: head.text }],
      messages: [{ role: 'user', text: head.text, runId: head.runId, kind: 'overflow' }],
    };
  }
  if (turn.shape === 'collect') {
    const prompt = collectPrompt(turn.items);
    const sender = singleSender(turn.items);
    const record: Record<string, unknown> = {
      role: 'user',
      content: [{ type: 'text', text: prompt }],
      timestamp: ctx.clock.now(),
      channel: head.channel,
      runId: turn.runId,
      collected: turn.items.map((item) => ({ runId: item.runId, messageId: item.messageId ?? null, requester: item.requester, enqueuedAt: item.enqueuedAt })),
    };
    if (sender) record.sender = sender;
    const message: RunMessage = { role: 'user', text: prompt, runId: turn.runId, channel: head.channel, queued: turn.items.length };
    const label = sender ? senderLabel(sender) : undefined;
    if (label) message.sender = label;
    return { ...base, shape: 'collect', startRecords: [{ type: 'message', message: record }], messages: [message] };
  }
  return { ...base, shape: 'single', startRecords: [recordOfItem(head)], messages: [runMessageOf(head)] };
}

// ---------------------------------------------------------------------------------------------
// Taking over after a crash or restart

