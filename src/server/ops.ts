// What each socket op does: thin adapters from a request's fields to the engine's and routing's
// public functions, returning the same JSON shapes the CLI prints.

import path from 'node:path';
import { MAX_JSON_DEPTH, jsonDepthExceeds, type NdjsonLine } from '../core/index.js';
import {
  abortSession,
  cancelQueued,
  explainFully,
  explanationJson,
  ingestBatch,
  listQueue,
  listSessions,
  showQueued,
  type EngineContext,
  type IngestEvent,
  type QueueEvent,
  type CancelRequest,
  type SessionListing,
} from '../engine/index.js';
import { normalizeExplicitSessionKey, normalizeRouteInput, resolveRoute, type ResolvedRoute } from '../routing/index.js';
import type { ClientConnection } from './connection.js';
import { badRequest, messageLine, onlyParams, optionalBooleanParam, optionalCountParam, optionalStringParam, requiredStringParam, type Op, type Push } from './protocol.js';

/** What an op may ask of the server around it. */
export interface OpHost {
  /** Sends an engine event to the clients subscribed to its session. */
  publish(event: IngestEvent | QueueEvent): void;
  /** Stores lines through the engine (combined with other clients' lines); one event per line. */
  ingest(engine: EngineContext, lines: NdjsonLine[]): Promise<IngestEvent[]>;
  status(): Record<string, unknown>;
  readonly maxMessagesPerRequest: number;
}

export interface OpContext {
  engine: EngineContext;
  client: ClientConnection;
  host: OpHost;
}

type OpHandler = (params: Record<string, unknown>, ctx: OpContext) => Promise<unknown> | unknown;

/**
 * The one call into the engine's ingest. Run and queue events (replies, drops, failures…) do not
 * come back here: they reach the server through the sink it gives the engine (configureQueue).
 */
export function engineIngest(engine: EngineContext, lines: NdjsonLine[]): Promise<IngestEvent[]> {
  return ingestBatch(engine, lines);
}

async function ingest(params: Record<string, unknown>, ctx: OpContext): Promise<{ events: IngestEvent[] }> {
  const hasOne = params.message !== undefined;
  const hasMany = params.messages !== undefined;
  if (hasOne && hasMany) throw badRequest('give "message" (one object) or "messages" (an array), not both');
  if (!hasOne && !hasMany) throw badRequest('"message" (one object) or "messages" (an array of objects) is required');
  let messages: unknown[];
  if (hasMany) {
    if (!Array.isArray(params.messages)) throw badRequest('"messages" must be an array of message objects');
    if (params.messages.length > ctx.host.maxMessagesPerRequest) {
      throw badRequest(`"messages" holds ${params.messages.length} messages; at most ${ctx.host.maxMessagesPerRequest} per request`);
    }
    messages = params.messages;
  } else {
    messages = [params.message];
  }
  // Events are numbered like the lines of `switchboard ingest`: from "line" (default 1) on.
  const first = optionalCountParam(params, 'line', 1) ?? 1;
  const lines = messages.map((message, i) => messageLine(first + i, message));
  const events = await ctx.host.ingest(ctx.engine, lines);
  for (const event of events) ctx.host.publish(event);
  return { events };
}

function routeInputOf(params: Record<string, unknown>) {
  if (params.input === undefined) throw badRequest('"input" is required: {channel, accountId?, peer?, parentPeer?, guildId?, teamId?, memberRoleIds?, threadId?}');
  // Error messages quote bad values: one nested thousands of levels deep would overflow the stack.
  if (jsonDepthExceeds(params.input)) throw badRequest(`"input" nests objects/arrays deeper than ${MAX_JSON_DEPTH} levels`);
  return normalizeRouteInput(params.input);
}

function routeResolve(params: Record<string, unknown>, ctx: OpContext): ResolvedRoute {
  return resolveRoute(ctx.engine.table, routeInputOf(params)).route;
}

/** The same object as `switchboard route explain --json`. */
async function routeExplain(params: Record<string, unknown>, ctx: OpContext): Promise<Record<string, unknown>> {
  const input = routeInputOf(params);
  return explanationJson(input, await explainFully(ctx.engine, input));
}

/** Options named as the CLI flags: agent, allAgents, store, active (minutes), limit. */
async function sessionsList(params: Record<string, unknown>, ctx: OpContext): Promise<SessionListing> {
  const agent = optionalStringParam(params, 'agent');
  const allAgents = optionalBooleanParam(params, 'allAgents');
  const store = optionalStringParam(params, 'store');
  // The server's working directory is no place the client knows of, and a NUL is no path.
  if (store !== undefined && (!path.isAbsolute(store) || store.includes('\u0000'))) throw badRequest('"store" must be an absolute path to a sessions.json');
  if ([agent !== undefined, allAgents === true, store !== undefined].filter(Boolean).length > 1) {
    throw badRequest('"agent", "allAgents" and "store" exclude each other');
  }
  return listSessions(ctx.engine, {
    agent,
    allAgents,
    storePath: store,
    activeMinutes: optionalCountParam(params, 'active'),
    limit: optionalCountParam(params, 'limit'),
  });
}

/** `{session?}` (key or sessionId) → `{items, active}` as `switchboard queue --json`. */
function queueList(params: Record<string, unknown>, ctx: OpContext) {
  return listQueue(ctx.engine, { session: optionalStringParam(params, 'session') });
}

/** `{runId}` → the queued item with all its fields, or the active run. */
function queueShow(params: Record<string, unknown>, ctx: OpContext) {
  return showQueued(ctx.engine, requiredStringParam(params, 'runId'));
}

/**
 * `{reason?, by?: {pid, hostname, user}}` of queue.cancel/queue.abort: who asked (the client's
 * process, e.g. `top`; without `by`, the server itself) and why.
 */
function cancelRequestOf(params: Record<string, unknown>): CancelRequest {
  const request: CancelRequest = { reason: optionalStringParam(params, 'reason') };
  const by = params.by;
  if (by === undefined) return request;
  const fields = by as { pid?: unknown; hostname?: unknown; user?: unknown } | null;
  if (typeof fields !== 'object' || fields === null || !Number.isSafeInteger(fields.pid) || typeof fields.hostname !== 'string' || !(fields.user === null || typeof fields.user === 'string')) {
    throw badRequest('"by" must be {pid: integer, hostname: string, user: string|null}');
  }
  request.by = { pid: fields.pid as number, hostname: fields.hostname, user: fields.user };
  return request;
}

/** `{runId, reason?, by?}` → removes that queued item only; the active run continues. */
function queueCancel(params: Record<string, unknown>, ctx: OpContext) {
  return cancelQueued(ctx.engine, requiredStringParam(params, 'runId'), cancelRequestOf(params));
}

/** `{session, reason?, by?}` → cancels the session's queued items first, then aborts its active run. */
function queueAbort(params: Record<string, unknown>, ctx: OpContext) {
  return abortSession(ctx.engine, requiredStringParam(params, 'session'), cancelRequestOf(params));
}

function subscriptionOf(client: ClientConnection): 'all' | string[] | null {
  const current = client.subscription;
  return current === null || current === 'all' ? current : [...current].sort();
}

/** `{sessionKey?}`: events of that session from now on, or of every session without one. */
function subscribe(params: Record<string, unknown>, ctx: OpContext): { subscribed: 'all' | string[] | null } {
  // Without a key is every session: a mistyped one must not quietly mean that.
  onlyParams(params, ['sessionKey']);
  const raw = optionalStringParam(params, 'sessionKey');
  if (raw === undefined) {
    ctx.client.subscription = 'all';
  } else if (ctx.client.subscription !== 'all') {
    const key = normalizeExplicitSessionKey(raw, ctx.engine.table.owner);
    ctx.client.subscription = new Set([...(ctx.client.subscription ?? []), key]);
  }
  return { subscribed: subscriptionOf(ctx.client) };
}

/** `{sessionKey?}`: stop that session's events, or all of them. */
function unsubscribe(params: Record<string, unknown>, ctx: OpContext): { subscribed: 'all' | string[] | null } {
  onlyParams(params, ['sessionKey']);
  const raw = optionalStringParam(params, 'sessionKey');
  const current = ctx.client.subscription;
  if (raw === undefined || current === null) {
    ctx.client.subscription = null;
  } else if (current !== 'all') {
    current.delete(normalizeExplicitSessionKey(raw, ctx.engine.table.owner));
    if (current.size === 0) ctx.client.subscription = null;
  } else {
    throw badRequest('subscribed to every session: unsubscribe without "sessionKey" to stop');
  }
  return { subscribed: subscriptionOf(ctx.client) };
}

export const OP_HANDLERS: Record<Op, OpHandler> = {
  ingest,
  'route.resolve': routeResolve,
  'route.explain': routeExplain,
  'sessions.list': sessionsList,
  'queue.list': queueList,
  'queue.show': queueShow,
  'queue.cancel': queueCancel,
  'queue.abort': queueAbort,
  subscribe,
  unsubscribe,
  status: (_params, ctx) => ctx.host.status(),
};

/** A pushed engine event: `{event: <type>, …the event's fields}`; the sender's line number is dropped. */
export function pushOf(event: IngestEvent | QueueEvent): Push {
  const { type, ...fields } = event as unknown as { type: string; line?: number } & Record<string, unknown>;
  delete fields.line;
  return { event: type, ...fields };
}
