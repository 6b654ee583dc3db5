// Admission: what one inbound message does to its session entry, decided inside the store
// transaction — the record-only plan, or queue admission for agents with a runner (start, steer,
// queue, collect, interrupt, drop, session commands). Pure apart from the store object it edits.
// Its shapes are in admission-types.ts, the session commands themselves in session-commands.ts.

import { randomUUID } from 'node:crypto';
import { maySteer } from '../runner/index.js';
import {
  carriedOf,
  enqueueItem,
  evaluateSendPolicy,
  forgetDuplicateKey,
  isAddressField,
  parseControlCommand,
  parseQueueDirective,
  planAdmission,
  sameDeliveryRoute,
  planSessionMessage,
  resolveQueueSettings,
  splitByInstance,
  type DeliveryAddress,
  type LaneName,
  type PendingReset,
  type PlanContext,
  type PlannedEntry,
  type QueueDirective,
  type QueueItem,
} from '../policy/index.js';
import { addRecordRoute, type SessionEntry, type SessionStore } from '../store/index.js';
import { planContextFor, planMessageOf, requesterOf, messageRecord } from './addressed.js';
import type { Addressed, AdmitEnv, BatchEffects, Outcome } from './admission-types.js';
import { beforeResetFor } from './before-reset.js';
import {
  THIS_PROCESS,
  claimedByActiveRun,
  failAbandonedRun,
  droppedEventOf,
  expiredEventOf,
  isThisProcess,
  noteRemoved,
  ownerRecord,
  pushOutbox,
  queueOf,
  runnerFor,
  sessionRefKey,
  setQueue,
  takeOutbox,
  type DroppedEvent,
  type QueueEvent,
  type QueuedEntry,
  type SessionRef,
} from './queue-state.js';
import { noteLeaving, reportLeaving } from './orphans.js';
import { commandReplyRecords, mayBeCommand, runCommand } from './session-commands.js';

const NO_DIRECTIVE: QueueDirective = { found: false, cleanedText: '', directiveOnly: false, errors: [] };

function runMessageText(item: Addressed, text: string | undefined): string {
  if (text !== undefined && text !== '') return text;
  return item.message.kind === 'user' ? '' : `[${item.message.kind}]`;
}

function fileOf(entry: QueuedEntry): string {
  return typeof entry.sessionFile === 'string' ? entry.sessionFile : `${entry.sessionId}.jsonl`;
}

/**
 * Undoes what a rotation did to the instance, for a rotation that waits for the active run (or the
 * turn before the reset) to end: until the new instance starts the entry is the old instance's,
 * so its id, file and start and every field of its own (isAddressField: what carryOverToNewInstance
 * drops or resets — OpenClaw's CLI conversation, token counts, model, run flags …) are put back as
 * they were. Dropped here, they were gone from the entry while the run went on: an OpenClaw running
 * the session meanwhile lost them early. The message's own changes to the address (labels,
 * delivery, duplicate memory, updatedAt, its interaction time) stand.
 */
function keepInstance(entry: QueuedEntry, previous: QueuedEntry): QueuedEntry {
  const kept: QueuedEntry = { ...entry };
  const restore = (field: string): void => {
    if ((previous as Record<string, unknown>)[field] === undefined) delete (kept as Record<string, unknown>)[field];
    else (kept as Record<string, unknown>)[field] = (previous as Record<string, unknown>)[field];
  };
  for (const field of ['sessionId', 'sessionFile', 'sessionStartedAt']) restore(field);
  // Moved by this message itself, unless it is a cron run's (a fresh cron instance has none).
  if (entry.lastInteractionAt === undefined) restore('lastInteractionAt');
  for (const field of new Set([...Object.keys(entry), ...Object.keys(previous)])) if (!isAddressField(field)) restore(field);
  return kept;
}

/** Plan contexts of one planning pass, per session: the same for every message of a session in it. */
const planContexts = new WeakMap<AdmitEnv, Map<string, PlanContext>>();

function planContextOf(env: AdmitEnv, sessionKey: string): PlanContext {
  let bySession = planContexts.get(env);
  if (bySession === undefined) planContexts.set(env, (bySession = new Map()));
  let planContext = bySession.get(sessionKey);
  if (planContext === undefined) bySession.set(sessionKey, (planContext = planContextFor(env.ctx, env.location, sessionKey, env.now, env.removed.get(sessionKey), env.headerTimes.get(sessionKey))));
  return planContext;
}

/**
 * The entries in-process runs are to see, copied as they stand at the end of the round's admission.
 * admitOne used to copy the whole entry for every message: with a run going, every message's
 * records wait in the entry's outbox, so a batch of n messages to a busy session copied O(n²)
 * (5 000 messages: ~36 s with the event loop held, so `serve` answered nobody, not even `status`).
 * Only the last view of each session was ever used.
 */
export function snapshotObserved(effects: BatchEffects): void {
  for (const [key, entry] of effects.observe) effects.observe.set(key, structuredClone(entry));
}

/** Plans one message against the store being updated: queue admission for agents with a runner, else the record-only plan. */
export function admitItem(store: SessionStore, item: Addressed, env: AdmitEnv): void {
  item.rebind = undefined;
  const pinned = item.message.sessionId;
  if (pinned !== undefined) {
    const current = Object.hasOwn(store, item.sessionKey) ? store[item.sessionKey] : undefined;
    if (current?.sessionId !== pinned) {
      // Work that belongs to an older instance never lands in the new conversation.
      item.plan = undefined;
      item.outcome = undefined;
      item.rebind = { sessionId: pinned, currentSessionId: typeof current?.sessionId === 'string' ? current.sessionId : null, file: null };
      return;
    }
  }
  // Session commands (`/queue …`, `/send …`, `/stop`) are handled the same with or without a
  // runner; the cheap first-character test keeps the record-only path (P3) free of parsing.
  if (runnerFor(env.ctx, item.agentId) !== undefined || mayBeCommand(item)) {
    admitOne(store, item, env);
    return;
  }
  item.outcome = undefined;
  const existing = Object.hasOwn(store, item.sessionKey) ? (store[item.sessionKey] as PlannedEntry) : undefined;
  const plan = planSessionMessage(existing, planMessageOf(item), planContextOf(env, item.sessionKey), existing !== undefined && env.planned.has(existing));
  item.plan = plan;
  if (!plan.duplicate) {
    store[item.sessionKey] = plan.entry as SessionEntry;
    env.planned.add(plan.entry);
  }
}

/** One message of a store with a runner: plan, rotation (now or deferred), command or queue admission. */
function admitOne(store: SessionStore, item: Addressed, env: AdmitEnv): void {
  const { ctx, location, liveness, effects, now } = env;
  const key = item.sessionKey;
  const ref: SessionRef = { location, agentId: item.agentId, sessionKey: key };
  const stored = Object.hasOwn(store, key) ? (store[key] as QueuedEntry) : undefined;
  const working: QueuedEntry | undefined = stored ? { ...stored } : undefined;
  const events: QueueEvent[] = [];
  if (working) {
    const abandoned = failAbandonedRun(working, liveness, key, randomUUID);
    if (abandoned) events.push(abandoned);
  }

  const plan = planSessionMessage(working as PlannedEntry | undefined, planMessageOf(item), planContextOf(env, key));
  if (plan.duplicate) {
    item.plan = plan;
    item.outcome = { disposition: 'duplicate', sessionId: plan.entry.sessionId, reset: null, record: false, before: [], after: [], events: [] };
    return;
  }
  let entry = plan.entry as QueuedEntry;
  const activeRun = entry.activeRun;
  let rotation = plan.rotation;
  const reset = rotation && rotation.reason !== 'cron' ? { reason: rotation.reason, previousSessionId: rotation.previousSessionId } : null;
  let deferredCommand = false;
  // With session.reset.beforeReset, a rotation (not a cron run's fresh instance) waits for the
  // agent's turn on the old instance, which the queue drain runs before it applies the rotation.
  const turnFirst = rotation !== undefined && rotation.reason !== 'cron' && working !== undefined && beforeResetFor(ctx, item.agentId) !== undefined;
  if (rotation && working && (activeRun || turnFirst)) {
    // A rotation is deferred while a run is active (or a turn before it is due): it applies when
    // the run has ended, and what arrives meanwhile is pinned to the instance-to-be.
    const pending: PendingReset = {
      reason: rotation.reason,
      previousSessionId: working.sessionId,
      newSessionId: entry.sessionId,
      newSessionFile: fileOf(entry),
      requestedAt: now,
      expireOld: rotation.reason === 'command',
    };
    if (entry.modelOverride !== undefined && entry.modelOverride !== working.modelOverride) pending.model = entry.modelOverride as string;
    // Once per reset: a rotation that replaces a pending one keeps its turn's state (still due, or
    // claimed already), so a second /new during the turn does not ask for another.
    const due = working.pendingReset ? working.pendingReset.beforeReset === 'due' : turnFirst;
    if (due) pending.beforeReset = 'due';
    entry = keepInstance(entry, working);
    if (rotation.reason === 'command' || !working.pendingReset) entry.pendingReset = pending;
    deferredCommand = rotation.reason === 'command' && activeRun !== undefined;
    rotation = undefined;
  } else if (rotation) {
    // Rotated now (no run active): what waits for an older instance expires, a pending rotation is superseded.
    delete entry.pendingReset;
    const { keep, expired } = splitByInstance(queueOf(entry), entry.sessionId);
    const current = entry.sessionId;
    const leaving = reportLeaving(expired, key, liveness, (waiting) => expiredEventOf(waiting, current));
    events.push(...leaving.events);
    setQueue(entry, keep);
    noteLeaving(entry, leaving, randomUUID);
  }
  const pinned = entry.pendingReset?.newSessionId ?? entry.sessionId;
  item.plan = { ...plan, entry, rotation };
  const outcome: Outcome = { disposition: 'recorded', sessionId: pinned, reset, record: false, text: plan.text, before: [], after: [], events };
  item.outcome = outcome;
  const finish = (): void => {
    store[key] = entry as SessionEntry;
    // The view is copied once the round's admission is over (snapshotObserved), not per message.
    if (entry.activeRun && isThisProcess(entry.activeRun)) effects.observe.set(sessionRefKey(ref), entry);
  };
  const abortActive = (reason: string): void => {
    if (!entry.activeRun) return;
    entry.abortRequested = entry.activeRun.runId;
    effects.aborts.push({ sessionKey: key, runId: entry.activeRun.runId, reason });
  };

  if (plan.commandOnly) {
    // A bare reset trigger: its notice is written with the rotation (now, or when the run has ended).
    outcome.disposition = deferredCommand ? 'interrupted' : 'command';
    if (deferredCommand) abortActive('reset');
    if (entry.pendingReset && !entry.activeRun) takeOwnership(entry, ref, env);
    finish();
    return;
  }

  const isUser = item.message.kind === 'user';
  const control = isUser ? parseControlCommand(plan.text) : null;
  const directive = isUser && control === null && plan.text !== undefined ? parseQueueDirective(plan.text) : NO_DIRECTIVE;
  if (control !== null || (directive.found && (directive.directiveOnly || directive.errors.length > 0))) {
    // Answered where the command came from.
    const deliveryContext = plan.replyTo ?? null;
    // /send is answered under the setting it replaces (turning sending off still confirms it).
    const before = control?.kind === 'send' ? entry.sendPolicy : undefined;
    const text = runCommand(entry, item, env, { control, directive }, events);
    const policy = evaluateSendPolicy(
      {
        sessionKey: key,
        channel: [deliveryContext?.channel, entry.channel, entry.lastChannel as string | undefined, item.message.route.channel],
        chatType: entry.chatType ?? null,
        entryOverride: control?.kind === 'send' ? (before ?? null) : (entry.sendPolicy ?? null),
      },
      ctx.config.session?.sendPolicy ?? null,
    );
    const delivered = policy.decision === 'allow';
    const sessionId = entry.sessionId;
    const after = commandReplyRecords(text, now, item.runId, delivered, { decision: policy.decision, rule: policy.rule }, deliveryContext);
    if (entry.activeRun) {
      // The run holds the transcript: its owner writes these at its next step.
      pushOutbox(entry, { id: randomUUID(), sessionId, records: [messageRecord(item, plan.text, now), ...after].map((record) => record as Record<string, unknown>) });
    } else {
      outcome.record = true;
      outcome.after = after;
    }
    events.push({ type: 'reply', runId: item.runId, sessionKey: key, sessionId, text, deliveryContext: deliveryContext as Record<string, unknown> | null, delivered, policy: { decision: policy.decision, rule: policy.rule } });
    outcome.disposition = 'command';
    outcome.sessionId = sessionId;
    finish();
    return;
  }

  const text = directive.found ? directive.cleanedText : plan.text;
  const runner = runnerFor(ctx, item.agentId);
  if (runner === undefined) {
    // No runner: nothing to queue or start; the message (its directive taken out) is recorded.
    outcome.record = true;
    outcome.text = text;
    finish();
    return;
  }
  outcome.text = text;
  const settings = resolveQueueSettings({
    channel: item.message.route.channel,
    messageQueue: item.message.queue ?? null,
    directive: directive.found ? directive : null,
    entry,
    config: ctx.config.messages?.queue ?? null,
  });
  const queue = queueOf(entry);
  const admission = planAdmission({
    kind: item.message.kind,
    mode: settings.mode,
    cap: settings.cap,
    dropPolicy: settings.dropPolicy,
    activeRun: entry.activeRun !== undefined,
    queue,
    pendingReset: entry.pendingReset !== undefined,
    resetTrigger: deferredCommand,
    canStart: !env.noWait,
    runnerMaySteer: maySteer(runner),
    activeRunElsewhere:
      entry.activeRun?.deliveryContext !== undefined &&
      !sameDeliveryRoute({ channel: entry.activeRun.deliveryContext.channel, deliveryContext: entry.activeRun.deliveryContext }, { channel: item.message.route.channel, deliveryContext: plan.replyTo ? { ...plan.replyTo } : undefined }),
  });
  /**
   * The incoming message not taken (busy, or the cap with drop "new"): reported, and recorded in
   * the same write like every drop (a `custom` `dropped` record through the outbox), so that its
   * fate is on disk as its `persisted: true` says, not only on the stream of whoever sent it.
   */
  const dropIncoming = (reason: DroppedEvent['reason'], drop?: string): void => {
    const event: DroppedEvent = { type: 'dropped', runId: item.runId, sessionKey: key, sessionId: pinned, reason, requester: requesterOf(item.message), messageId: item.message.messageId ?? null };
    if (drop !== undefined) event.drop = drop;
    forgetId();
    events.push(event);
    noteRemoved(entry, [event], randomUUID);
    outcome.disposition = 'dropped';
  };
  const forgetId = (): void => {
    // Not taken, so a retry of the same message must not count as a duplicate.
    if (plan.duplicateKey === undefined || entry.recentMessageIds === undefined) return;
    forgetDuplicateKey(entry, plan.duplicateKey);
    if (entry.recentMessageIds === '' && working?.recentMessageIds === undefined) delete entry.recentMessageIds;
  };

  switch (admission.action) {
    case 'start': {
      const lane: LaneName = item.message.kind === 'cron' ? 'cron' : 'main';
      // The run names what it carries, so a run_failed for a dead holder can name the message.
      const carried = carriedOf({ runId: item.runId, messageId: item.message.messageId });
      entry.activeRun = { ...THIS_PROCESS, runId: item.runId, sessionId: entry.sessionId, startedAt: now, lane, messages: [carried] };
      if (plan.replyTo) entry.activeRun.deliveryContext = { ...plan.replyTo };
      if (!entry.queueOwner || !isThisProcess(entry.queueOwner)) entry.queueOwner = ownerRecord(now);
      delete entry.abortRequested;
      outcome.before = takeOutbox(entry);
      outcome.record = true;
      delete entry.stopRequested;
      delete entry.stopReason;
      outcome.disposition = 'started';
      // Recorded by this batch, and also in the queue, claimed by its run until that run hands it
      // to a runner (commitClaim, right before the runner starts): a process that dies while the
      // run waits for a lane slot leaves it claimed, and the next owner runs it (recorded already,
      // not recorded again) instead of reporting a message no runner ever saw.
      const claimed: QueueItem = { ...queueItemOf(item, env, { sessionKey: key, sessionId: entry.sessionId, mode: settings.mode, state: 'queued', text, settings, replyTo: plan.replyTo }), claimedBy: item.runId, recordedOnArrival: true };
      setQueue(entry, [...queue, claimed]);
      effects.starts.push({
        item,
        ref,
        sessionId: entry.sessionId,
        sessionFile: fileOf(entry),
        lane,
        text: runMessageText(item, text),
        deliveryContext: plan.replyTo ? { ...plan.replyTo } : undefined,
        claimed,
      });
      break;
    }
    case 'record':
      outcome.record = true;
      outcome.disposition = 'recorded';
      break;
    case 'drop':
      dropIncoming('busy');
      break;
    case 'reject':
      dropIncoming('cap', 'new');
      break;
    case 'enqueue': {
      const queued = queueItemOf(item, env, { sessionKey: key, sessionId: pinned, mode: deferredCommand ? 'interrupt' : settings.mode, state: admission.state, text, settings, replyTo: plan.replyTo });
      let waiting = queue;
      let superseded: QueueItem[] = [];
      if (queued.mode === 'interrupt' && !deferredCommand) {
        // "Stop and do this instead": what was waiting is superseded, each item reported (never
        // silently); items the active run has already taken (leased, claimed) go with that run.
        // A dead run's claim never reached a runner: it is superseded too — reported by its
        // run_failed when it was recorded, dropped when it was not (orphans.ts).
        waiting = queue.filter((other) => other.leasedBy !== undefined || claimedByActiveRun(entry, other));
        superseded = queue.filter((other) => !waiting.includes(other));
      }
      const next = enqueueItem(waiting, queued, settings, randomUUID);
      if (next.rejected) {
        // At the cap and every waiting message is already taken by the active run.
        dropIncoming('cap', settings.dropPolicy);
        break;
      }
      setQueue(entry, next.queue);
      // What the interrupt superseded that a dead run had taken and recorded is not dropped (orphans.ts).
      const leaving = reportLeaving(superseded, key, liveness, (other) => droppedEventOf(other, 'interrupt'));
      const victims = [...leaving.plain, ...next.dropped.map((victim) => droppedEventOf(victim.item, 'cap', victim.drop))];
      events.push(...victims, ...leaving.events.filter((event) => event.type === 'run_failed'));
      noteLeaving(entry, { ...leaving, plain: victims }, randomUUID);
      if (admission.abortActive) abortActive(deferredCommand ? 'reset' : 'interrupted by a newer message');
      if (queued.mode === 'interrupt' && !deferredCommand && entry.activeRun) {
        // What the aborted run had taken for its next step leaves with it, so the newest runs next.
        entry.stopRequested = entry.activeRun.runId;
        entry.stopReason = 'interrupt';
      }
      if (!entry.activeRun) takeOwnership(entry, ref, env);
      outcome.disposition = admission.disposition;
      break;
    }
  }
  finish();
}

/** A message as a queue item (waiting, or claimed by the run it starts). */
function queueItemOf(
  item: Addressed,
  env: AdmitEnv,
  at: { sessionKey: string; sessionId: string; mode: QueueItem['mode']; state: QueueItem['state']; text: string | undefined; settings: { debounceMs: number; debounceMaxWaitMs: number }; replyTo: DeliveryAddress | undefined },
): QueueItem {
  const { message } = item;
  const queued: QueueItem = {
    runId: item.runId,
    requester: requesterOf(message),
    sessionKey: at.sessionKey,
    sessionId: at.sessionId,
    enqueuedAt: env.now,
    // The quiet window counts from arrival: waiting for the store lock must not stretch it.
    wallAt: Math.min(env.nowWall, item.receivedAt ?? env.nowWall),
    mode: at.mode,
    state: at.state,
    kind: message.kind === 'cron' ? 'cron' : message.kind === 'heartbeat' || message.kind === 'system' ? 'heartbeat' : 'user',
    text: at.text ?? '',
    channel: message.route.channel,
    debounceMs: at.settings.debounceMs,
    maxWaitMs: at.settings.debounceMaxWaitMs,
  };
  addRecordRoute(queued, message.route);
  if (message.messageId !== undefined) queued.messageId = message.messageId;
  if (message.sender) queued.sender = message.sender;
  if (message.route.threadId) queued.threadId = message.route.threadId;
  if (message.timestamp !== undefined) queued.timestamp = message.timestamp;
  if (message.cronJobId) queued.cronJobId = message.cronJobId;
  // Answered on the route it came from (proactive output: the session's address).
  if (at.replyTo) queued.deliveryContext = { ...at.replyTo };
  return queued;
}

/** Nobody alive drains this queue (or it is ours): this process takes it, unless it will not wait. */
function takeOwnership(entry: QueuedEntry, ref: SessionRef, env: AdmitEnv): void {
  if (env.noWait) return;
  if (entry.queueOwner && !isThisProcess(entry.queueOwner)) return; // a live owner (dead ones were cleared)
  if (!entry.queueOwner) entry.queueOwner = ownerRecord(env.now);
  env.effects.drains.set(sessionRefKey(ref), ref);
}
