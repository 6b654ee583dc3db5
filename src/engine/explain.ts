// `route explain` beyond routing: which session instance the route lands in (and
// whether the next message would rotate it), the queue settings with their sources, and sendPolicy.

import { evaluateFreshness, evaluateSendPolicy, planDelivery, resetPolicyFor, resolveQueueSettings, type DeliveryAddress, type DeliveryOwner, type QueueSettings, type ResetPolicy } from '../policy/index.js';
import { explainRoute, type RouteExplanation, type ResolvedRoute, type RouteInput } from '../routing/index.js';
import { readSessionStore, sessionEntryProblem } from '../store/index.js';
import { deliveryContextFor } from './addressed.js';
import { storeFor, type EngineContext } from './context.js';
import { transcriptStartedAtOf } from './session-list.js';
import { routeSharedDmWarning } from './shared-dm.js';

export interface SessionSection {
  sessionId?: string;
  exists: boolean;
  /** Only for an entry of the wrong shape: why it cannot be used (a message to it is STORE_CORRUPT). */
  problem?: string;
  fresh: boolean;
  staleReason?: string;
  nextResetAt?: number;
  reset: Pick<ResetPolicy, 'mode' | 'atHour' | 'idleMinutes' | 'timezone' | 'source'>;
  storePath: string;
}

export interface InstanceAndTime {
  session: SessionSection;
  queue: Pick<QueueSettings, 'mode' | 'debounceMs' | 'cap' | 'dropPolicy' | 'sources'>;
  send: { decision: string; rule: number | null; source: string };
  delivery: DeliverySection;
}

/** Where a reply to this message would go, and what it would do to the session's address. */
export interface DeliverySection {
  /** The reply's address: the message's own route (or the session's address when it has no peer). */
  reply: DeliveryAddress | null;
  replySource: 'message' | 'session' | 'none';
  /** The session's address after this message: where proactive output (cron, heartbeats) goes. */
  /** The session's address; OpenClaw's rows may not name a target (`to`) yet. */
  sessionAddress: (Omit<DeliveryAddress, 'to'> & { to?: string }) | null;
  movesSessionAddress: boolean;
  /** Whose messages move the session's address after this message (null: every sender's). */
  owner: DeliveryOwner | null;
  why: string;
}

export async function explainInstanceAndTime(ctx: EngineContext, route: ResolvedRoute, input: RouteInput): Promise<InstanceAndTime> {
  const location = storeFor(ctx, route.agentId);
  const store = await readSessionStore(location.storePath);
  const stored = Object.hasOwn(store, route.sessionKey) ? store[route.sessionKey] : undefined;
  const problem = stored === undefined ? null : sessionEntryProblem(stored, location.sessionsDir);
  // An entry of the wrong shape is explained as such; nothing below reads its fields.
  const entry = problem === null ? stored : undefined;
  const policy = resetPolicyFor(ctx.config.session, route.sessionKey, { channel: input.channel, threadId: input.threadId, peer: input.peer });
  const reset = { mode: policy.mode, atHour: policy.atHour, idleMinutes: policy.idleMinutes, timezone: policy.timezone, source: policy.source };
  let session: SessionSection;
  if (problem !== null) {
    session = { exists: true, fresh: false, problem: problem.reason, reset, storePath: location.storePath };
    if (typeof stored?.sessionId === 'string') session.sessionId = stored.sessionId;
  } else if (entry) {
    const transcriptStartedAt = await transcriptStartedAtOf(location, entry);
    const freshness = evaluateFreshness({ ...entry, transcriptStartedAt }, policy, ctx.clock.now());
    session = { sessionId: entry.sessionId, exists: true, ...freshness, reset, storePath: location.storePath };
  } else {
    // No instance yet: the next message creates one.
    session = { exists: false, fresh: false, reset, storePath: location.storePath };
  }
  const queue = resolveQueueSettings({ channel: input.channel, entry: entry ?? null, config: ctx.config.messages?.queue ?? null });
  const chatType = input.peer?.kind ?? entry?.chatType ?? null;
  const send = evaluateSendPolicy({ sessionKey: route.sessionKey, channel: input.channel, chatType, entryOverride: entry?.sendPolicy ?? null }, ctx.config.session?.sendPolicy ?? null);
  const plan = planDelivery(entry, { kind: 'user', channel: input.channel, accountId: route.accountId, peer: input.peer, threadId: input.threadId }, deliveryContextFor(ctx, route.sessionKey));
  let owner = (entry?.deliveryOwner as DeliveryOwner | undefined) ?? null;
  if (plan.claimsOwner && input.peer) owner = { channel: input.channel, peer: { kind: input.peer.kind, id: input.peer.id }, accountId: route.accountId };
  const delivery: DeliverySection = {
    reply: plan.replyTo ?? null,
    replySource: plan.replySource,
    sessionAddress: (plan.movesSessionAddress ? plan.own : entry?.deliveryContext) ?? null,
    movesSessionAddress: plan.movesSessionAddress,
    owner,
    why: plan.why,
  };
  return {
    delivery,
    session,
    queue: { mode: queue.mode, debounceMs: queue.debounceMs, cap: queue.cap, dropPolicy: queue.dropPolicy, sources: queue.sources },
    send,
  };
}

export interface FullExplanation extends InstanceAndTime {
  explanation: RouteExplanation;
  warnings: string[];
}

/** Everything `route explain` answers: space (trace, key), instance (session) and time (queue, send). */
export async function explainFully(ctx: EngineContext, input: RouteInput): Promise<FullExplanation> {
  const explanation = explainRoute(ctx.table, input);
  const more = await explainInstanceAndTime(ctx, explanation.route, input);
  const sharedDm = await routeSharedDmWarning(ctx, explanation.route, input);
  return { explanation, ...more, warnings: [...ctx.table.warnings, ...(sharedDm !== null ? [sharedDm] : [])] };
}

/** The `route explain --json` shape (cli.md), shared by the command and the socket op. */
export function explanationJson(input: RouteInput, full: FullExplanation): Record<string, unknown> {
  return {
    input,
    route: full.explanation.route,
    trace: full.explanation.trace,
    key: full.explanation.derivation,
    session: full.session,
    queue: full.queue,
    send: full.send,
    delivery: full.delivery,
    warnings: full.warnings,
  };
}
