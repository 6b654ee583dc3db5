// Admission: what one inbound message does to its session entry, decided inside the store
// transaction — the record-only plan, or queue admission for agents with a runner (start, steer,
// queue, collect, interrupt, drop, session commands). Pure apart from the store object it edits.

import { randomUUID } from 'node:crypto';
import {
  applyQueueDirective,
  carriedOf,
  describeQueueSettings,
  describeSendSetting,
  enqueueItem,
  evaluateSendPolicy,
  parseControlCommand,
  parseQueueDirective,
  planAdmission,
  sameDeliveryRoute,
  planSessionMessage,
  resolveQueueSettings,
  splitByInstance,
  type LaneName,
  type PendingReset,
  type PlanMessage,
  type PlannedEntry,
  type PlanContext,
  type QueueDirective,
  type QueueItem,
  type SessionPlan,
} from '../policy/index.js';
import { lookupIdentityLink } from '../routing/index.js';
import { DELIVERY_MIRROR_MODEL, INJECTED_MODEL, transcriptOnlyMarks, type NewTranscriptEntry, type SessionEntry, type SessionStore, type StoreLocation } from '../store/index.js';
import { transcriptNameFor, type EngineContext } from './context.js';
import type { InboundMessage } from './message.js';
import {
  THIS_PROCESS,
  clearDeadHolders,
  droppedEventOf,
  expiredEventOf,
  isThisProcess,
  orphanFailure,
  ownerRecord,
  pushOutbox,
  queueOf,
  runnerFor,
  sessionRefKey,
  setQueue,
  takeOutbox,
  type DroppedEvent,
  type Liveness,
  type QueueEvent,
  type QueuedEntry,
  type SessionRef,
} from './queue-state.js';

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
}

/** What one store's admission asks of the runtime once the batch is on disk. */
export interface BatchEffects {
  starts: StartClaim[];
  aborts: { sessionKey: string; runId: string; reason: string }[];
  /** In-process runs to show their entry (parked items, outbox, abort requests). */
  observe: Map<string, QueuedEntry>;
  drains: Map<string, SessionRef>;
}


export function planMessageOf(item: Addressed): PlanMessage {
  const { message } = item;
  return {
    kind: message.kind,
    text: message.text,
    messageId: message.messageId,
    sender: message.sender,
    channel: message.route.channel,
    accountId: message.route.accountId,
    peer: message.route.peer,
    parentPeer: message.route.parentPeer,
    threadId: message.route.threadId,
    ...(message.group ? { group: message.group } : {}),
    ...(message.lineage ? { lineage: message.lineage } : {}),
  };
}

/** The transcript record of one inbound message (user and cron turns are user messages). */
export function messageRecord(item: Addressed, text: string | undefined, now: number): NewTranscriptEntry {
  const { message } = item;
  const meta: Record<string, unknown> = { channel: message.route.channel, runId: item.runId };
  if (message.messageId !== undefined) meta.messageId = message.messageId;
  if (message.sender) meta.sender = message.sender;
  if (message.route.threadId) meta.threadId = message.route.threadId;
  if (message.kind === 'heartbeat' || message.kind === 'system') {
    return { type: 'custom', customType: message.kind, data: { text: text ?? null, timestamp: message.timestamp ?? now, ...meta } };
  }
  const record: Record<string, unknown> = {
    role: 'user',
    content: [{ type: 'text', text: text ?? '' }],
    timestamp: message.timestamp ?? now,
    ...meta,
  };
  if (message.cronJobId) record.cron = { jobId: message.cronJobId };
  return { type: 'message', message: record };
}


export function planContextFor(ctx: EngineContext, location: StoreLocation, sessionKey: string, now: number): PlanContext {
  return {
    sessionKey,
    session: ctx.config.session,
    now,
    newSessionId: randomUUID,
    transcriptName: (sessionId: string, threadId?: string) => transcriptNameFor(location, sessionId, threadId),
    ...deliveryContextFor(ctx, sessionKey),
  };
}

/** What the delivery rule needs to know of a session: is its address shared, who is linked to whom. */
export function deliveryContextFor(ctx: EngineContext, sessionKey: string): Pick<PlanContext, 'sharedAddress' | 'identityOf'> {
  // The agent's main session is where DMs of several senders meet (dmScope "main"; also a
  // peerless or groupScope "main" message): its address belongs to one owner.
  const rest = /^agent:[^:]+:(.+)$/.exec(sessionKey)?.[1];
  return {
    sharedAddress: rest === ctx.table.mainKey,
    identityOf: (channel: string, peerId: string) => lookupIdentityLink(ctx.table.identityLinks, channel, peerId)?.canonical,
  };
}

const NO_DIRECTIVE: QueueDirective = { found: false, cleanedText: '', directiveOnly: false, errors: [] };

export function requesterOf(message: InboundMessage): string {
  const sender = message.sender?.id?.trim() || message.sender?.name?.trim();
  if (sender) return sender;
  const peer = message.route.peer;
  return peer ? `${message.route.channel}:${peer.kind}:${peer.id}` : message.route.channel;
}

function runMessageText(item: Addressed, text: string | undefined): string {
  if (text !== undefined && text !== '') return text;
  return item.message.kind === 'user' ? '' : `[${item.message.kind}]`;
}

function fileOf(entry: QueuedEntry): string {
  return typeof entry.sessionFile === 'string' ? entry.sessionFile : `${entry.sessionId}.jsonl`;
}

/** Undoes what a rotation did to the instance fields: the rotation waits for the active run to end. */
function keepInstance(entry: QueuedEntry, previous: QueuedEntry): QueuedEntry {
  const kept: QueuedEntry = { ...entry };
  for (const field of ['sessionId', 'sessionFile', 'sessionStartedAt', 'lastInteractionAt', 'model', 'modelOverride'] as const) {
    if (field === 'lastInteractionAt' && entry.lastInteractionAt !== undefined) continue; // moved by this message itself
    if (previous[field] === undefined) delete kept[field];
    else (kept as Record<string, unknown>)[field] = previous[field];
  }
  return kept;
}

function commandReplyRecords(text: string, now: number, runId: string, delivered: boolean, policy: { decision: string; rule: number | null }, deliveryContext: unknown): NewTranscriptEntry[] {
  // A command's answer is no model output: marked so that OpenClaw never replays it (`command` tells it apart).
  const reply: Record<string, unknown> = { role: 'assistant', content: [{ type: 'text', text }], timestamp: now, runId, ...transcriptOnlyMarks(INJECTED_MODEL), command: true };
  if (!delivered) Object.assign(reply, { delivered: false, policy });
  const records: NewTranscriptEntry[] = [{ type: 'message', message: reply }];
  if (delivered) {
    records.push({ type: 'message', message: { role: 'assistant', content: [{ type: 'text', text }], timestamp: now, runId, ...transcriptOnlyMarks(DELIVERY_MIRROR_MODEL), deliveryContext: deliveryContext ?? null } });
  }
  return records;
}

export interface AdmitEnv {
  ctx: EngineContext;
  location: StoreLocation;
  liveness: Liveness;
  effects: BatchEffects;
  now: number;
  nowWall: number;
  noWait: boolean;
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
  const plan = planSessionMessage(existing, planMessageOf(item), planContextFor(env.ctx, env.location, item.sessionKey, env.now));
  item.plan = plan;
  if (!plan.duplicate) store[item.sessionKey] = plan.entry as SessionEntry;
}

function mayBeCommand(item: Addressed): boolean {
  return item.message.kind === 'user' && item.message.text !== undefined && item.message.text.trimStart().startsWith('/');
}

/** A session command (`/stop`, `/send …`, a `/queue` directive alone or an invalid one): applied now, answered with a reply. */
function runCommand(
  entry: QueuedEntry,
  item: Addressed,
  env: AdmitEnv,
  command: { control: ReturnType<typeof parseControlCommand>; directive: QueueDirective },
  events: QueueEvent[],
): string {
  const { control, directive } = command;
  if (control?.kind === 'stop') {
    // Queued items first, then the run; items the run has already taken for its next boundary
    // go with it (injected if that boundary comes first, else dropped when it ends).
    const queue = queueOf(entry);
    const cancelled = queue.filter((waiting) => waiting.leasedBy === undefined);
    setQueue(entry, queue.filter((waiting) => waiting.leasedBy !== undefined));
    for (const waiting of cancelled) events.push(droppedEventOf(waiting, 'stopped'));
    let aborted: string | undefined;
    if (entry.activeRun) {
      aborted = entry.activeRun.runId;
      entry.abortRequested = aborted;
      entry.stopRequested = aborted;
      env.effects.aborts.push({ sessionKey: item.sessionKey, runId: aborted, reason: '/stop' });
    }
    return `Stopped: ${cancelled.length} queued message(s) cancelled; ${aborted ? `run ${aborted} aborted` : 'no run was active'}.`;
  }
  if (control?.kind === 'send-invalid') {
    return `Invalid /send argument "${control.argument}": use /send on, /send off or /send inherit. Nothing was changed.`;
  }
  if (control?.kind === 'send') {
    if (control.value === 'allow' || control.value === 'deny') entry.sendPolicy = control.value;
    else if (control.value === 'inherit') delete entry.sendPolicy;
    const effective = evaluateSendPolicy(
      { sessionKey: item.sessionKey, channel: entry.channel ?? item.message.route.channel, chatType: entry.chatType ?? null, entryOverride: entry.sendPolicy ?? null },
      env.ctx.config.session?.sendPolicy ?? null,
    );
    return describeSendSetting(entry.sendPolicy, effective);
  }
  if (directive.errors.length > 0) return `Invalid /queue directive: ${directive.errors.join('; ')}. Nothing was changed.`;
  const current = { queueMode: entry.queueMode, queueDebounceMs: entry.queueDebounceMs, queueCap: entry.queueCap, queueDrop: entry.queueDrop };
  const next = applyQueueDirective(current, directive) ?? current;
  for (const field of ['queueMode', 'queueDebounceMs', 'queueCap', 'queueDrop'] as const) {
    const value = (next as Record<string, unknown>)[field];
    if (value === undefined) delete entry[field];
    else (entry as Record<string, unknown>)[field] = value;
  }
  const settings = resolveQueueSettings({ channel: item.message.route.channel, entry, config: env.ctx.config.messages?.queue ?? null });
  return `Queue settings: ${describeQueueSettings(settings)}${directive.reset ? ' (session override cleared)' : ''}`;
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
    const orphan = clearDeadHolders(working, liveness);
    if (orphan) {
      const failure = orphanFailure(orphan, key);
      events.push(failure.event);
      pushOutbox(working, { id: randomUUID(), sessionId: orphan.run.sessionId, records: [failure.record as Record<string, unknown>] });
    }
  }

  const plan = planSessionMessage(working as PlannedEntry | undefined, planMessageOf(item), planContextFor(ctx, location, key, now));
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
  if (rotation && activeRun && working) {
    // A rotation is deferred while a run is active: it applies when the run has ended, and what
    // arrives meanwhile is pinned to the instance-to-be.
    const pending: PendingReset = {
      reason: rotation.reason,
      previousSessionId: working.sessionId,
      newSessionId: entry.sessionId,
      newSessionFile: fileOf(entry),
      requestedAt: now,
      expireOld: rotation.reason === 'command',
    };
    if (entry.modelOverride !== undefined && entry.modelOverride !== working.modelOverride) pending.model = entry.modelOverride as string;
    entry = keepInstance(entry, working);
    if (rotation.reason === 'command' || !working.pendingReset) entry.pendingReset = pending;
    deferredCommand = rotation.reason === 'command';
    rotation = undefined;
  } else if (rotation) {
    // Rotated now (no run active): what waits for an older instance expires, a pending rotation is superseded.
    delete entry.pendingReset;
    const { keep, expired } = splitByInstance(queueOf(entry), entry.sessionId);
    for (const waiting of expired) events.push(expiredEventOf(waiting, entry.sessionId));
    setQueue(entry, keep);
  }
  const pinned = entry.pendingReset?.newSessionId ?? entry.sessionId;
  item.plan = { ...plan, entry, rotation };
  const outcome: Outcome = { disposition: 'recorded', sessionId: pinned, reset, record: false, text: plan.text, before: [], after: [], events };
  item.outcome = outcome;
  const finish = (): void => {
    store[key] = entry as SessionEntry;
    if (entry.activeRun && isThisProcess(entry.activeRun)) effects.observe.set(sessionRefKey(ref), structuredClone(entry));
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
        channel: deliveryContext?.channel ?? entry.channel ?? item.message.route.channel,
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
  if (runnerFor(ctx, item.agentId) === undefined) {
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
    activeRunElsewhere:
      entry.activeRun?.deliveryContext !== undefined &&
      !sameDeliveryRoute({ channel: entry.activeRun.deliveryContext.channel, deliveryContext: entry.activeRun.deliveryContext }, { channel: item.message.route.channel, deliveryContext: plan.replyTo ? { ...plan.replyTo } : undefined }),
  });
  const droppedEvent = (reason: DroppedEvent['reason'], drop?: string): DroppedEvent => {
    const event: DroppedEvent = { type: 'dropped', runId: item.runId, sessionKey: key, sessionId: pinned, reason, requester: requesterOf(item.message), messageId: item.message.messageId ?? null };
    if (drop !== undefined) event.drop = drop;
    return event;
  };
  const forgetId = (): void => {
    // Not taken, so a retry of the same message must not count as a duplicate.
    if (working?.recentMessageIds === undefined) delete entry.recentMessageIds;
    else entry.recentMessageIds = working.recentMessageIds;
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
      effects.starts.push({
        item,
        ref,
        sessionId: entry.sessionId,
        sessionFile: fileOf(entry),
        lane,
        text: runMessageText(item, text),
        deliveryContext: plan.replyTo ? { ...plan.replyTo } : undefined,
      });
      break;
    }
    case 'record':
      outcome.record = true;
      outcome.disposition = 'recorded';
      break;
    case 'drop':
      forgetId();
      events.push(droppedEvent('busy'));
      outcome.disposition = 'dropped';
      break;
    case 'reject':
      forgetId();
      events.push(droppedEvent('cap', 'new'));
      outcome.disposition = 'dropped';
      break;
    case 'enqueue': {
      const { message } = item;
      const queued: QueueItem = {
        runId: item.runId,
        requester: requesterOf(message),
        sessionKey: key,
        sessionId: pinned,
        enqueuedAt: now,
        // The quiet window counts from arrival: waiting for the store lock must not stretch it.
        wallAt: Math.min(env.nowWall, item.receivedAt ?? env.nowWall),
        mode: deferredCommand ? 'interrupt' : settings.mode,
        state: admission.state,
        kind: message.kind === 'cron' ? 'cron' : message.kind === 'heartbeat' || message.kind === 'system' ? 'heartbeat' : 'user',
        text: text ?? '',
        channel: message.route.channel,
        debounceMs: settings.debounceMs,
        maxWaitMs: settings.debounceMaxWaitMs,
      };
      if (message.messageId !== undefined) queued.messageId = message.messageId;
      if (message.sender) queued.sender = message.sender;
      if (message.route.threadId) queued.threadId = message.route.threadId;
      if (message.timestamp !== undefined) queued.timestamp = message.timestamp;
      if (message.cronJobId) queued.cronJobId = message.cronJobId;
      // Answered on the route it came from (proactive output: the session's address).
      if (plan.replyTo) queued.deliveryContext = { ...plan.replyTo };
      let waiting = queue;
      if (queued.mode === 'interrupt' && !deferredCommand) {
        // "Stop and do this instead": what was waiting is superseded, each item reported (never
        // silently); items the active run has already taken (leased, claimed) go with that run.
        waiting = queue.filter((other) => other.leasedBy !== undefined || other.claimedBy !== undefined);
        for (const other of queue) if (!waiting.includes(other)) events.push(droppedEventOf(other, 'interrupt'));
      }
      const next = enqueueItem(waiting, queued, settings, randomUUID);
      if (next.rejected) {
        // At the cap and every waiting message is already taken by the active run.
        forgetId();
        events.push(droppedEvent('cap', settings.dropPolicy));
        outcome.disposition = 'dropped';
        break;
      }
      setQueue(entry, next.queue);
      for (const victim of next.dropped) events.push(droppedEventOf(victim.item, 'cap', victim.drop));
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

/** Nobody alive drains this queue (or it is ours): this process takes it, unless it will not wait. */
function takeOwnership(entry: QueuedEntry, ref: SessionRef, env: AdmitEnv): void {
  if (env.noWait) return;
  if (entry.queueOwner && !isThisProcess(entry.queueOwner)) return; // a live owner (dead ones were cleared)
  if (!entry.queueOwner) entry.queueOwner = ownerRecord(env.now);
  env.effects.drains.set(sessionRefKey(ref), ref);
}
