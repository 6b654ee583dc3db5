// The main job: a batch of NDJSON lines in, one result or error event per line out. Messages are
// routed, planned against sessions.json in ONE store update per agent (queue admission included),
// appended to their transcripts (one lock + one fsync per session per batch), and acknowledged
// only afterwards; runs of idle sessions start once the batch is on disk.

import { randomUUID } from 'node:crypto';
import { EXIT_CODES, SwitchboardError, describeLineError, systemClock, toSwitchboardError, type ErrorCode, type NdjsonLine } from '../core/index.js';
import {
  applyQueueDirective,
  describeQueueSettings,
  describeSendSetting,
  enqueueItem,
  evaluateSendPolicy,
  forgetMessageId,
  parseControlCommand,
  parseQueueDirective,
  planAdmission,
  planSessionMessage,
  resolveQueueSettings,
  splitByInstance,
  type LaneName,
  type PendingReset,
  type PlanMessage,
  type PlannedEntry,
  type QueueDirective,
  type QueueItem,
  type RecentMessageIds,
  type SessionPlan,
} from '../policy/index.js';
import { cronSessionKey, normalizeExplicitSessionKey, parseSessionKey, resolveRoute } from '../routing/index.js';
import {
  appendEntries,
  archiveFile,
  readSessionStore,
  updateSessionStore,
  withLock,
  type NewTranscriptEntry,
  type SessionEntry,
  type SessionStore,
  type StoreLocation,
} from '../store/index.js';
import { incognitoStoreFor, knownAgentIds, sessionLockOptions, storeFor, transcriptNameFor, transcriptPathIn, type EngineContext } from './context.js';
import { parseMessageLine, type InboundMessage } from './message.js';
import {
  THIS_PROCESS,
  clearDeadHolders,
  droppedEventOf,
  expiredEventOf,
  isThisProcess,
  learnLiveness,
  orphanFailure,
  ownerRecord,
  pushOutbox,
  queueOf,
  runnerFor,
  sessionRefKey,
  setQueue,
  takeOutbox,
  unknownHolders,
  type DroppedEvent,
  type Liveness,
  type QueueEvent,
  type QueuedEntry,
  type SessionRef,
} from './queue-state.js';
import { queueRuntimeFor, type QueueRuntime } from './runtime.js';
import type { TurnSpec } from './runs.js';

/**
 * `recorded`: stored (no runner, or a system event); `started`: stored and run now; `steered`:
 * parked for the active run's next boundary; `queued` / `collected`: held for a later turn (one
 * each / one batch); `interrupted`: the active run is aborted and this message runs after it;
 * `dropped`: not taken (reported by a dropped event); `duplicate`; `command`: a session command.
 */
export type Disposition = 'recorded' | 'started' | 'steered' | 'queued' | 'collected' | 'interrupted' | 'dropped' | 'duplicate' | 'command';

export interface ResultEvent {
  type: 'result';
  line: number;
  ok: true;
  messageId: string | null;
  runId: string;
  agentId: string;
  sessionKey: string;
  sessionId: string | null;
  matchedBy: string;
  reset: { reason: 'daily' | 'idle' | 'command'; previousSessionId: string } | null;
  disposition: Disposition;
  persisted: boolean;
}

export interface ErrorEvent {
  type: 'error';
  line: number;
  code: string;
  message: string;
  path?: string;
}

export type IngestEvent = ResultEvent | ErrorEvent;

/** A message with its address, between routing and storing. */
interface Addressed {
  line: number;
  message: InboundMessage;
  agentId: string;
  sessionKey: string;
  matchedBy: string;
  runId: string;
  incognito: boolean;
  plan?: SessionPlan;
  /** Set for agents with a runner: what admission decided (re-set on every mutator run). */
  outcome?: Outcome;
}

/** What queue admission decided for one message of an agent with a runner. */
interface Outcome {
  disposition: Disposition;
  sessionId: string;
  reset: ResultEvent['reset'];
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
interface StartClaim {
  item: Addressed;
  ref: SessionRef;
  sessionId: string;
  sessionFile: string;
  lane: LaneName;
  text: string;
  deliveryContext?: QueueItem['deliveryContext'];
}

/** What one store's admission asks of the runtime once the batch is on disk. */
interface BatchEffects {
  needLiveness: boolean;
  starts: StartClaim[];
  aborts: { runId: string; reason: string }[];
  /** In-process runs to show their entry (parked items, outbox, abort requests). */
  observe: Map<string, QueuedEntry>;
  drains: Map<string, SessionRef>;
}

const APPEND_CONCURRENCY = 32;

function errorEvent(line: number, err: unknown): ErrorEvent {
  const error = toSwitchboardError(err);
  const event: ErrorEvent = { type: 'error', line, code: error.code, message: `line ${line}: ${error.message}` };
  // For bad input, details.path is the JSON path of the offending field.
  const jsonPath = error.details?.path;
  if ((error.code === 'BAD_MESSAGE' || error.code === 'BAD_INPUT') && typeof jsonPath === 'string') event.path = jsonPath;
  return event;
}

/** Routing or the explicit/cron key families: where this message lives. */
function address(ctx: EngineContext, line: number, message: InboundMessage): Addressed {
  const runId = message.runId ?? randomUUID();
  if (message.sessionKey !== undefined) {
    const sessionKey = normalizeExplicitSessionKey(message.sessionKey, ctx.table.defaultAgentId);
    const { agentId } = parseSessionKey(sessionKey);
    const known = knownAgentIds(ctx);
    if (!known.includes(agentId)) {
      throw new SwitchboardError('BAD_MESSAGE', `"sessionKey" names agent "${agentId}", which is not configured (known: ${known.join(', ')})`, {
        details: { path: 'sessionKey' },
      });
    }
    return { line, message, agentId, sessionKey, matchedBy: 'explicit', runId, incognito: message.incognito };
  }
  const resolution = resolveRoute(ctx.table, message.route);
  const { agentId } = resolution.route;
  const sessionKey = message.cronJobId ? cronSessionKey(agentId, message.cronJobId) : resolution.route.sessionKey;
  return {
    line,
    message,
    agentId,
    sessionKey,
    matchedBy: resolution.route.matchedBy,
    runId,
    incognito: message.incognito || resolution.binding?.incognito === true,
  };
}

function planMessageOf(item: Addressed): PlanMessage {
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
  };
}

/** The transcript record of one inbound message (user and cron turns are user messages). */
function messageRecord(item: Addressed, text: string | undefined, now: number): NewTranscriptEntry {
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


function planContextFor(ctx: EngineContext, location: StoreLocation, sessionKey: string, now: number) {
  return {
    sessionKey,
    session: ctx.config.session,
    now,
    newSessionId: randomUUID,
    transcriptName: (sessionId: string, threadId?: string) => transcriptNameFor(location, sessionId, threadId),
  };
}

/** Plans every message of one agent's store inside ONE locked read-modify-write of sessions.json. */
async function planStore(ctx: EngineContext, location: StoreLocation, items: Addressed[]): Promise<void> {
  const now = ctx.clock.now();
  await updateSessionStore(
    location.storePath,
    (store) => {
      // A mutator may be re-run (after a failing neighbour in the same write batch): start clean.
      for (const item of items) {
        const existing = Object.hasOwn(store, item.sessionKey) ? (store[item.sessionKey] as PlannedEntry) : undefined;
        const plan = planSessionMessage(existing, planMessageOf(item), planContextFor(ctx, location, item.sessionKey, now));
        item.plan = plan;
        if (!plan.duplicate) store[item.sessionKey] = plan.entry as SessionEntry;
      }
    },
    { lock: { acquireTimeoutMs: ctx.config.session?.writeLock?.acquireTimeoutMs } },
  );
}

// ---------------------------------------------------------------------------------------------
// Queue admission (agents with a runner)

const NO_DIRECTIVE: QueueDirective = { found: false, cleanedText: '', directiveOnly: false, errors: [] };

function requesterOf(message: InboundMessage): string {
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
  const reply: Record<string, unknown> = { role: 'assistant', content: [{ type: 'text', text }], timestamp: now, runId, provider: 'switchboard', model: 'command' };
  if (!delivered) Object.assign(reply, { delivered: false, policy });
  const records: NewTranscriptEntry[] = [{ type: 'message', message: reply }];
  if (delivered) {
    records.push({ type: 'message', message: { role: 'assistant', content: [{ type: 'text', text }], timestamp: now, runId, provider: 'switchboard', model: 'delivery-mirror', deliveryContext: deliveryContext ?? null } });
  }
  return records;
}

interface AdmitEnv {
  ctx: EngineContext;
  location: StoreLocation;
  liveness: Liveness;
  effects: BatchEffects;
  now: number;
  nowWall: number;
  noWait: boolean;
}

/**
 * Admits every message of one store (one mutator run). Holders whose liveness is unknown stop the
 * pass before anything is changed (`needLiveness`): the caller learns it and runs the pass again.
 */
function admitAll(store: SessionStore, items: Addressed[], env: AdmitEnv, assumeAlive: boolean): BatchEffects {
  if (!assumeAlive) {
    for (const item of items) {
      if (unknownHolders(store[item.sessionKey] as QueuedEntry | undefined, env.liveness)) {
        env.effects.needLiveness = true;
        return env.effects;
      }
    }
  }
  for (const item of items) {
    if (runnerFor(env.ctx, item.agentId) !== undefined) {
      admitOne(store, item, env);
      continue;
    }
    // Record only: exactly what planStore does.
    item.outcome = undefined;
    const existing = Object.hasOwn(store, item.sessionKey) ? (store[item.sessionKey] as PlannedEntry) : undefined;
    const plan = planSessionMessage(existing, planMessageOf(item), planContextFor(env.ctx, env.location, item.sessionKey, env.now));
    item.plan = plan;
    if (!plan.duplicate) store[item.sessionKey] = plan.entry as SessionEntry;
  }
  return env.effects;
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
      env.effects.aborts.push({ runId: aborted, reason: '/stop' });
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
    effects.aborts.push({ runId: entry.activeRun.runId, reason });
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
    const deliveryContext = entry.deliveryContext ?? null;
    // /send is answered under the setting it replaces (turning sending off still confirms it).
    const before = control?.kind === 'send' ? entry.sendPolicy : undefined;
    const text = runCommand(entry, item, env, { control, directive }, events);
    const policy = evaluateSendPolicy(
      {
        sessionKey: key,
        channel: entry.channel ?? item.message.route.channel,
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
      entry.activeRun = { ...THIS_PROCESS, runId: item.runId, sessionId: entry.sessionId, startedAt: now, lane };
      if (!entry.queueOwner || !isThisProcess(entry.queueOwner)) entry.queueOwner = ownerRecord(now);
      delete entry.abortRequested;
      outcome.before = takeOutbox(entry);
      outcome.record = true;
      delete entry.stopRequested;
      outcome.disposition = 'started';
      effects.starts.push({
        item,
        ref,
        sessionId: entry.sessionId,
        sessionFile: fileOf(entry),
        lane,
        text: runMessageText(item, text),
        deliveryContext: entry.deliveryContext,
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
        wallAt: env.nowWall,
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
      if (entry.deliveryContext) queued.deliveryContext = { ...entry.deliveryContext };
      const next = enqueueItem(queue, queued, settings, randomUUID);
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

/** Admission for an agent with a runner: ONE store update (repeated only to learn who is alive). */
async function admitStore(ctx: EngineContext, runtime: QueueRuntime, location: StoreLocation, items: Addressed[]): Promise<BatchEffects> {
  const liveness: Liveness = new Map();
  for (let attempt = 0; ; attempt++) {
    const now = ctx.clock.now();
    const nowWall = systemClock.now();
    const effects = await updateSessionStore(
      location.storePath,
      (store) => {
        const env: AdmitEnv = {
          ctx,
          location,
          liveness,
          now,
          nowWall,
          noWait: runtime.noWait,
          effects: { needLiveness: false, starts: [], aborts: [], observe: new Map(), drains: new Map() },
        };
        return admitAll(store, items, env, attempt >= 3);
      },
      { lock: { acquireTimeoutMs: ctx.config.session?.writeLock?.acquireTimeoutMs } },
    );
    if (!effects.needLiveness) return effects;
    const store = await readSessionStore(location.storePath);
    await learnLiveness(ctx, location, new Set(items.map((item) => store[item.sessionKey] as QueuedEntry | undefined)), liveness);
  }
}

interface SessionWork {
  location: StoreLocation;
  agentId: string;
  sessionKey: string;
  sessionId: string;
  file: string;
  /** The plan created this instance, so its transcript is expected not to exist yet. */
  expectNew: boolean;
  entries: NewTranscriptEntry[];
  items: Addressed[];
}

/** Groups planned messages by the transcript they append to, in arrival order. */
function collectWork(ctx: EngineContext, location: StoreLocation, items: Addressed[]): { work: SessionWork[]; rotations: { file: string; sessionKey: string }[] } {
  const bySession = new Map<string, SessionWork>();
  const rotations: { file: string; sessionKey: string }[] = [];
  const paths = new Map<string, string>();
  const now = ctx.clock.now();
  for (const item of items) {
    const plan = item.plan!;
    if (plan.duplicate) continue;
    const outcome = item.outcome;
    // Queued, parked, dropped or outboxed messages are not written now (rotations still are).
    if (outcome && !outcome.record && outcome.before.length === 0 && outcome.after.length === 0 && !plan.rotation) continue;
    const sessionFile = plan.entry.sessionFile ?? `${plan.entry.sessionId}.jsonl`;
    let file = paths.get(sessionFile);
    if (file === undefined) paths.set(sessionFile, (file = transcriptPathIn(location, sessionFile)));
    let work = bySession.get(file);
    if (!work) {
      work = { location, agentId: item.agentId, sessionKey: item.sessionKey, sessionId: plan.entry.sessionId, file, expectNew: false, entries: [], items: [] };
      bySession.set(file, work);
    }
    if (plan.created) work.expectNew = true;
    if (plan.rotation) {
      work.expectNew = true;
      if (plan.rotation.previousSessionFile) rotations.push({ file: transcriptPathIn(location, plan.rotation.previousSessionFile), sessionKey: item.sessionKey });
      if (plan.rotation.reason !== 'cron') {
        work.entries.push({ type: 'reset_notice', reason: plan.rotation.reason, previousSessionId: plan.rotation.previousSessionId });
      }
    }
    if (outcome) {
      work.entries.push(...outcome.before);
      if (!plan.commandOnly && outcome.record) work.entries.push(messageRecord(item, outcome.text, now));
      work.entries.push(...outcome.after);
    } else if (!plan.commandOnly) work.entries.push(messageRecord(item, plan.text, now));
    work.items.push(item);
  }
  return { work: [...bySession.values()], rotations };
}

/** Runs tasks with at most `limit` in flight. */
async function inPool<T>(items: T[], limit: number, task: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const workers = Array.from({ length: Math.min(limit, items.length) }, async () => {
    while (next < items.length) await task(items[next++]);
  });
  await Promise.all(workers);
}

/**
 * Appends one session's entries. If the transcript had to be created although the plan expected an
 * existing one, another process rotated this session in between: the records belong to the old
 * instance (they were admitted to it), so that stray file is archived like the rest of it.
 */
async function appendWork(ctx: EngineContext, work: SessionWork): Promise<void> {
  if (work.entries.length === 0) return;
  const lockOptions = sessionLockOptions(ctx, { sessionKey: work.sessionKey });
  await withLock(work.file, lockOptions, async (handle) => {
    const result = await appendEntries(work.file, work.entries, {
      session: { sessionId: work.sessionId, sessionKey: work.sessionKey, agentId: work.agentId },
      clock: ctx.clock,
      handle,
    });
    if (result.createdFile && !work.expectNew) {
      const store = await readSessionStore(work.location.storePath);
      if (store[work.sessionKey]?.sessionId !== work.sessionId) await archiveFile(work.file, 'reset', ctx.clock.now());
    }
  });
}

/** Archives the transcript of a rotated instance under its own write lock. */
async function archiveRotated(ctx: EngineContext, rotation: { file: string; sessionKey: string }): Promise<void> {
  await withLock(rotation.file, sessionLockOptions(ctx, { sessionKey: rotation.sessionKey }), () => archiveFile(rotation.file, 'reset', ctx.clock.now()));
}

/** The store a message is kept in: its agent's, or the agent's incognito store in memory. */
function storeOf(ctx: EngineContext, item: Addressed): StoreLocation {
  return item.incognito && ctx.incognitoRoot !== undefined ? incognitoStoreFor(ctx.incognitoRoot, item.agentId) : storeFor(ctx, item.agentId);
}

/** `persisted`: on disk — false for incognito messages, kept in a server's memory or not at all. */
function resultOf(item: Addressed): ResultEvent {
  const { plan, outcome } = item;
  const rotation = plan?.rotation;
  // With a queue outcome (runner agents) the queue decided; record-only messages follow the plan.
  const decided = plan && outcome
    ? { sessionId: outcome.sessionId, reset: outcome.reset, disposition: outcome.disposition }
    : {
        sessionId: plan ? plan.entry.sessionId : null,
        reset: rotation && rotation.reason !== 'cron' ? { reason: rotation.reason, previousSessionId: rotation.previousSessionId } : null,
        disposition: (plan?.duplicate ? 'duplicate' : plan?.commandOnly ? 'command' : 'recorded') as Disposition,
      };
  return {
    type: 'result',
    line: item.line,
    ok: true,
    messageId: item.message.messageId ?? null,
    runId: item.runId,
    agentId: item.agentId,
    sessionKey: item.sessionKey,
    sessionId: decided.sessionId,
    matchedBy: item.matchedBy,
    reset: decided.reset,
    disposition: decided.disposition,
    persisted: !item.incognito,
  };
}

/** Ingests one batch of lines; returns one event per non-blank line, in line order. */
export async function ingestBatch(ctx: EngineContext, lines: NdjsonLine[]): Promise<IngestEvent[]> {
  const events = new Map<number, IngestEvent>();
  const byStore = new Map<string, { location: StoreLocation; items: Addressed[] }>();
  const locations = new Map<string, StoreLocation>();
  const order: number[] = [];

  for (const item of lines) {
    if ('error' in item) {
      order.push(item.line);
      events.set(item.line, { type: 'error', line: item.line, code: 'BAD_MESSAGE', message: `line ${item.line}: ${describeLineError(item.error, item.bytes)}` });
      continue;
    }
    if (item.text.trim() === '') continue;
    order.push(item.line);
    try {
      const addressed = address(ctx, item.line, parseMessageLine(item.text));
      if (addressed.incognito && ctx.incognitoRoot === undefined) {
        // Incognito without a server's memory to keep it in: routed, nothing is kept.
        events.set(item.line, resultOf(addressed));
        continue;
      }
      const storeKey = `${addressed.incognito ? 'incognito' : 'stored'}:${addressed.agentId}`;
      let location = locations.get(storeKey);
      if (!location) locations.set(storeKey, (location = storeOf(ctx, addressed)));
      let group = byStore.get(location.storePath);
      if (!group) byStore.set(location.storePath, (group = { location, items: [] }));
      group.items.push(addressed);
    } catch (err) {
      events.set(item.line, errorEvent(item.line, err));
    }
  }

  const runtime = queueRuntimeFor(ctx);
  const queueEvents = new Map<number, QueueEvent[]>();
  const actions: (() => void)[] = [];
  for (const { location, items } of byStore.values()) {
    let effects: BatchEffects | undefined;
    try {
      if (items.some((item) => runnerFor(ctx, item.agentId) !== undefined)) effects = await admitStore(ctx, runtime, location, items);
      else await planStore(ctx, location, items);
    } catch (err) {
      for (const item of items) events.set(item.line, errorEvent(item.line, err));
      continue;
    }
    const { work, rotations } = collectWork(ctx, location, items);
    const failures = new Map<SessionWork, unknown>();
    await inPool(work, APPEND_CONCURRENCY, async (session) => {
      try {
        await appendWork(ctx, session);
      } catch (err) {
        failures.set(session, err);
      }
    });
    // Archive rotated instances only after the appends: an instance this very batch created
    // (then rotated, e.g. a cron job run twice) has its file only now.
    await inPool(rotations, APPEND_CONCURRENCY, async (rotation) => {
      try {
        await archiveRotated(ctx, rotation);
      } catch {
        // The new instance is already current; an unarchived old file is reported by doctor.
      }
    });
    const failed = new Set<Addressed>();
    for (const session of work) {
      const failure = failures.get(session);
      for (const item of session.items) {
        events.set(item.line, failure === undefined ? resultOf(item) : errorEvent(item.line, failure));
        if (failure !== undefined) failed.add(item);
      }
    }
    for (const item of items) {
      // Duplicates, and messages that were queued, parked or dropped rather than written now.
      if (item.plan && !events.has(item.line) && (item.plan.duplicate || item.outcome)) events.set(item.line, resultOf(item));
    }
    if (failures.size > 0) await forgetFailedMessageIds(location, [...failures.keys()].flatMap((s) => s.items));
    if (effects) {
      for (const item of items) {
        if (!failed.has(item) && item.outcome && item.outcome.events.length > 0) queueEvents.set(item.line, item.outcome.events);
      }
      const starts = effects.starts.filter((claim) => !failed.has(claim.item));
      const unstarted = effects.starts.filter((claim) => failed.has(claim.item));
      if (unstarted.length > 0) await releaseClaims(ctx, location, unstarted);
      actions.push(() => applyEffects(ctx, runtime, effects!, starts, unstarted));
    }
  }
  if (queueEvents.size > 0 || actions.length > 0) {
    // After this batch's results have been handed out: the events of a line follow its result.
    setImmediate(() => {
      for (const line of order) for (const event of queueEvents.get(line) ?? []) runtime.emit(event);
      for (const action of actions) action();
    });
  }
  return order.map((line) => events.get(line)!);
}

/** Hands what admission decided to the runtime: aborts, entry views for in-process runs, runs to start, queues to drain. */
function applyEffects(ctx: EngineContext, runtime: QueueRuntime, effects: BatchEffects, starts: StartClaim[], unstarted: StartClaim[]): void {
  for (const { runId, reason } of effects.aborts) runtime.requestAbort(runId, reason);
  for (const [key, entry] of effects.observe) runtime.observe(key, entry);
  for (const claim of starts) {
    const spec = runnerFor(ctx, claim.ref.agentId);
    if (spec === undefined) continue;
    const { message } = claim.item;
    const runMessage: TurnSpec['messages'][number] = { role: 'user', text: claim.text, runId: claim.item.runId, channel: message.route.channel };
    const sender = message.sender?.name ?? message.sender?.id;
    if (sender) runMessage.sender = sender;
    if (message.messageId !== undefined) runMessage.messageId = message.messageId;
    if (message.kind !== 'user') runMessage.kind = message.kind;
    runtime.startTurn({
      ref: claim.ref,
      sessionId: claim.sessionId,
      transcript: transcriptPathIn(claim.ref.location, claim.sessionFile),
      runId: claim.item.runId,
      lane: claim.lane,
      spec,
      messages: [runMessage],
      startRecords: [],
      items: [],
      deliveryContext: claim.deliveryContext,
      shape: 'start',
    });
  }
  for (const claim of unstarted) runtime.scheduleDrain(claim.ref, 0);
  for (const ref of effects.drains.values()) runtime.scheduleDrain(ref, 0);
}

/** A run claimed for a message whose append failed never starts: its claim is taken back. */
async function releaseClaims(ctx: EngineContext, location: StoreLocation, claims: StartClaim[]): Promise<void> {
  try {
    await updateSessionStore(
      location.storePath,
      (store) => {
        for (const claim of claims) {
          const entry = store[claim.ref.sessionKey] as QueuedEntry | undefined;
          if (entry?.activeRun?.runId !== claim.item.runId) continue;
          delete entry.activeRun;
          if (queueOf(entry).length === 0 && !entry.pendingReset && entry.queueOwner && isThisProcess(entry.queueOwner)) delete entry.queueOwner;
        }
      },
      { lock: { acquireTimeoutMs: ctx.config.session?.writeLock?.acquireTimeoutMs } },
    );
  } catch {
    // The claim stays until this process exits; the next ingest then finds its holder gone.
  }
}

/**
 * A message whose append failed was not recorded, so a retry must not be taken for a duplicate:
 * its messageId is removed from the entry again (best effort — the store may be failing too).
 */
async function forgetFailedMessageIds(location: StoreLocation, items: Addressed[]): Promise<void> {
  const withIds = items.filter((item) => item.message.messageId !== undefined);
  if (withIds.length === 0) return;
  try {
    await updateSessionStore(location.storePath, (store) => {
      for (const item of withIds) {
        const entry = store[item.sessionKey];
        if (entry?.recentMessageIds) entry.recentMessageIds = forgetMessageId(entry.recentMessageIds as RecentMessageIds, item.message.messageId!);
      }
    });
  } catch {
    // Nothing more to do: the error events already tell the sender these lines were not taken.
  }
}

/**
 * The process exit code after some events, given the code so far: a failure that is not bad input
 * (I/O, busy, corrupt store) wins over bad lines (65), and the first such failure is kept.
 */
export function exitCodeFor(events: Iterable<IngestEvent>, soFar = 0): number {
  let code = soFar;
  for (const event of events) {
    if (event.type !== 'error') continue;
    const exit = event.code in EXIT_CODES ? EXIT_CODES[event.code as ErrorCode] : 1;
    const isInput = event.code === 'BAD_MESSAGE' || event.code === 'BAD_INPUT';
    if (isInput) code = code === 0 ? exit : code;
    else if (code === 0 || code === 65) code = exit;
  }
  return code;
}
