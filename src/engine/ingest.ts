// The main job: a batch of NDJSON lines in, one result or error event per line out.
//
// Write order (docs/write-path.md): under the store lock of each agent, every message is planned
// (queue admission included), the plan is journalled, the records are appended and fsynced, and
// only then is sessions.json written; results are acknowledged after that. A crash can leave
// "recorded, not yet indexed" (the next writer completes it from the journal), never "indexed, not
// recorded". Every line fails alone: bad input is refused before the shared work, a line whose plan
// throws is taken out and the rest re-planned, a busy or failing transcript fails only its session.

import { EXIT_CODES, SwitchboardError, describeLineError, isSwitchboardError, newUuid, toSwitchboardError, type ErrorCode, type NdjsonLine } from '../core/index.js';
import { cronSessionKey, normalizeExplicitSessionKey, parseSessionKey, resolveRoute } from '../routing/index.js';
import type { StoreLocation } from '../store/index.js';
import { requesterOf } from './addressed.js';
import type { Addressed, BatchEffects, Disposition, ResetInfo } from './admission-types.js';
import { incognitoStoreFor, knownAgentIds, storeFor, transcriptNameFor, transcriptPathIn, type EngineContext } from './context.js';
import { ingestStore } from './ingest-store.js';
import { parseMessageLine, type InboundMessage } from './message.js';
import { runnerFor, type QueueEvent } from './queue-state.js';
import { queueRuntimeFor, type QueueRuntime } from './runtime.js';
import type { TurnSpec } from './turn-spec.js';

export type { Disposition } from './admission-types.js';

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
  reset: ResetInfo | null;
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

/** A session id as long as any we create, to check a new transcript's name before planning. */
const SAMPLE_SESSION_ID = '00000000-0000-4000-8000-000000000000';

function errorEvent(line: number, err: unknown): ErrorEvent {
  const error = toSwitchboardError(err);
  const event: ErrorEvent = { type: 'error', line, code: error.code, message: `line ${line}: ${error.message}` };
  // For bad input, details.path is the JSON path of the offending field.
  const jsonPath = error.details?.path;
  if ((error.code === 'BAD_MESSAGE' || error.code === 'BAD_INPUT') && typeof jsonPath === 'string') event.path = jsonPath;
  return event;
}

/**
 * A message's explicit `sessionKey`, normalised. A key that does not normalise is a fault of the
 * line (BAD_MESSAGE at `sessionKey`, like every other bad field), not of the command's usage
 * (BAD_INPUT, which the key functions throw for command arguments); NO_OWNER stays a config problem.
 */
function explicitKeyOf(ctx: EngineContext, raw: string): string {
  try {
    return normalizeExplicitSessionKey(raw, ctx.table.owner);
  } catch (err) {
    if (!isSwitchboardError(err, 'BAD_INPUT')) throw err;
    throw new SwitchboardError('BAD_MESSAGE', `"sessionKey": ${err.message}`, { details: { path: 'sessionKey' } });
  }
}

/** Routing or the explicit/cron key families: where this message lives. */
function address(ctx: EngineContext, line: number, message: InboundMessage): Addressed {
  const runId = message.runId ?? newUuid();
  if (message.sessionKey !== undefined) {
    const sessionKey = explicitKeyOf(ctx, message.sessionKey);
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

/**
 * Refuses, before any shared work, a message whose transcript could not be created: a thread id
 * that is not valid Unicode or whose file name (with the suffixes locks and archives add) is too
 * long. Inside the batch such a line would fail its neighbours' store update too.
 */
function checkTranscriptName(ctx: EngineContext, item: Addressed): void {
  const threadId = item.message.route.threadId;
  if (threadId === undefined) return;
  try {
    transcriptNameFor(storeOf(ctx, item), SAMPLE_SESSION_ID, threadId);
  } catch (err) {
    const reason = err instanceof Error ? err.message : String(err);
    throw new SwitchboardError('BAD_MESSAGE', `"threadId" cannot name a transcript: ${reason}`, { details: { path: 'threadId' } });
  }
}

/** The store a message is kept in: its agent's, or the agent's incognito store in memory. */
function storeOf(ctx: EngineContext, item: Addressed): StoreLocation {
  return item.incognito && ctx.incognitoRoot !== undefined ? incognitoStoreFor(ctx.incognitoRoot, item.agentId) : storeFor(ctx, item.agentId);
}

/** `persisted`: on disk — false for incognito messages, kept in a server's memory or not at all. */
function resultOf(item: Addressed): ResultEvent {
  const { plan, outcome, rebind } = item;
  const rotation = plan?.rotation;
  // A rebind: recorded in the instance it was pinned to when that file still exists, never in the
  // new one. With a queue outcome (runner agents) the queue decided; else the plan did.
  const decided = rebind
    ? { sessionId: rebind.sessionId, reset: null, disposition: (rebind.file === null ? 'dropped' : 'recorded') as Disposition }
    : plan && outcome
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

/** The `expired` event of a message whose pinned instance is no longer current. */
function rebindEventOf(item: Addressed, rebind: NonNullable<Addressed['rebind']>): QueueEvent {
  return {
    type: 'expired',
    runId: item.runId,
    sessionKey: item.sessionKey,
    sessionId: rebind.sessionId,
    currentSessionId: rebind.currentSessionId,
    reason: 'rebind',
    requester: requesterOf(item.message),
    messageId: item.message.messageId ?? null,
    recordedIn: rebind.file === null ? null : rebind.file.slice(rebind.file.lastIndexOf('/') + 1),
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
      if (item.receivedAt !== undefined) addressed.receivedAt = item.receivedAt;
      if (addressed.incognito && ctx.incognitoRoot === undefined) {
        // Incognito without a server's memory to keep it in: routed, nothing is kept.
        events.set(item.line, resultOf(addressed));
        continue;
      }
      checkTranscriptName(ctx, addressed);
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
  const batchEffects: BatchEffects[] = [];
  for (const { location, items } of byStore.values()) {
    const { committed, failed, effects } = await ingestStore(ctx, runtime, location, items);
    for (const [item, err] of failed) events.set(item.line, errorEvent(item.line, err));
    for (const item of committed) {
      events.set(item.line, resultOf(item));
      if (item.rebind) queueEvents.set(item.line, [rebindEventOf(item, item.rebind)]);
      else if (item.outcome && item.outcome.events.length > 0) queueEvents.set(item.line, item.outcome.events);
    }
    batchEffects.push(...effects);
  }
  if (queueEvents.size > 0 || batchEffects.length > 0) {
    // After this batch's results have been handed out: the events of a line follow its result.
    setImmediate(() => {
      for (const line of order) for (const event of queueEvents.get(line) ?? []) runtime.emit(event);
      for (const effects of batchEffects) applyEffects(ctx, runtime, effects);
    });
  }
  return order.map((line) => events.get(line)!);
}

/** Hands what admission decided to the runtime: aborts, entry views for in-process runs, runs to start, queues to drain. */
function applyEffects(ctx: EngineContext, runtime: QueueRuntime, effects: BatchEffects): void {
  for (const { runId, reason } of effects.aborts) runtime.requestAbort(runId, reason);
  for (const [key, entry] of effects.observe) runtime.observe(key, entry);
  for (const claim of effects.starts) {
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
      items: [claim.claimed],
      deliveryContext: claim.deliveryContext,
      shape: 'start',
    });
  }
  for (const ref of effects.drains.values()) runtime.scheduleDrain(ref, 0);
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
