// The durable queue as commands see it, across every agent's store: list, show, cancel a queued
// item, abort a session (queued items first, then the active run), and busy keys for maintenance.

import { randomUUID } from 'node:crypto';
import { SwitchboardError } from '../core/index.js';
import type { ProtectedKey } from '../policy/index.js';
import { explicitSessionKeyAsTyped, normalizeExplicitSessionKey } from '../routing/index.js';
import { checkSessionEntry, isInMemory, readSessionStore, sessionEntryProblem, updateSessionStore, type SessionStore, type StoreLocation } from '../store/index.js';
import { incognitoStoreFor, knownAgentIds, noCommandAgent, noSuchSession, storeWriteOptions, type EngineContext } from './context.js';
import { userInfo } from 'node:os';
import type { QueueItem } from '../policy/index.js';
import {
  THIS_PROCESS,
  claimedByActiveRun,
  droppedEventOf,
  learnLiveness,
  noteRemoved,
  ownerAlive,
  queueOf,
  runAlive,
  setQueue,
  type CancelledBy,
  type DroppedEvent,
  type Liveness,
  type QueuedEntry,
} from './queue-state.js';
import { queueRuntimeFor } from './runtime.js';
import { listedAgentId, selectStores } from './session-list.js';
import { findSession } from './sessions.js';

/** One waiting item (cli.md `queue list --json`, plus agentId, kind and position). */
export interface QueueListItem {
  runId: string;
  messageId: string | null;
  requester: string;
  sessionKey: string;
  sessionId: string;
  mode: string;
  state: 'queued' | 'parked';
  enqueuedAt: number;
  text: string;
  agentId: string;
  kind: string;
  /** 1 = next in its session's queue. */
  position: number;
  /** The process that drains this session's queue (alive: false = gone, null = another host), or null when none has claimed it yet. */
  owner: { pid: number; hostname: string; alive: boolean | null } | null;
  /** A server's incognito session: kept in its memory only. */
  incognito: boolean;
}

/** One active run (cli.md, plus agentId, hostname, lane and whether its process is alive). */
export interface QueueActiveRun {
  runId: string;
  sessionKey: string;
  sessionId: string;
  pid: number;
  startedAt: number;
  agentId: string;
  hostname: string;
  lane: string;
  /** false: its process is gone (the next ingest takes the session over); null: another host. */
  alive: boolean | null;
  abortRequested: boolean;
  /** A server's incognito session: kept in its memory only. */
  incognito: boolean;
}

export interface QueueListing {
  items: QueueListItem[];
  active: QueueActiveRun[];
}

/** Every agent's store once (agents may share one), a server's incognito stores included. */
function stores(ctx: EngineContext): StoreLocation[] {
  return selectStores(ctx, { allAgents: true });
}

interface SessionFilter {
  /** The key or session id asked for. */
  wanted: string;
  matches: (key: string, entry: QueuedEntry) => boolean;
  /** A bare key with no owner to give it to: the error, unless it turns out to be a session id. */
  noOwner?: SwitchboardError;
}

function sessionFilter(ctx: EngineContext, session: string | undefined): SessionFilter | undefined {
  if (session === undefined) return undefined;
  const wanted = session.trim();
  let key: string | undefined;
  let noOwner: SwitchboardError | undefined;
  try {
    key = normalizeExplicitSessionKey(wanted, ctx.table.owner);
  } catch (err) {
    if (err instanceof SwitchboardError && err.code === 'NO_OWNER') noOwner = noCommandAgent(ctx, `session key "${wanted}"`);
    key = undefined;
  }
  // A key that keeps its case in the store (a Signal group's, a Matrix room's), given as listed.
  const typedKey = key === undefined ? undefined : explicitSessionKeyAsTyped(wanted, key);
  return { wanted, matches: (candidate, entry) => candidate === key || candidate === typedKey || entry.sessionId === wanted, noOwner };
}

/** Whether the entry holds any queue state at all (most do not: they need no shape check here). */
function hasQueueState(entry: QueuedEntry): boolean {
  return entry.queue !== undefined || entry.activeRun !== undefined || entry.queueOwner !== undefined || entry.outbox !== undefined;
}

/** An entry of the wrong shape (`invalid-entry` for doctor) is never read or changed as a queue. */
function usable(location: StoreLocation, entry: QueuedEntry): boolean {
  return sessionEntryProblem(entry, location.sessionsDir) === null;
}

/** Liveness as listings show it: null for a process on another host (it cannot be checked from here). */
function listedAlive(hostname: string, known: boolean | undefined): boolean | null {
  return hostname === THIS_PROCESS.hostname ? (known ?? null) : null;
}

/**
 * The queue's items that wait, in order, with their position: not those the active run has
 * claimed, which are its own messages until its runner starts (the run is listed instead).
 */
function waitingItemsOf(location: StoreLocation, sessionKey: string, entry: QueuedEntry, liveness?: Liveness): QueueListItem[] {
  const queue = queueOf(entry);
  return itemsOf(location, sessionKey, entry, liveness)
    .filter((_, index) => !claimedByActiveRun(entry, queue[index]!))
    .map((item, index) => ({ ...item, position: index + 1 }));
}

function itemsOf(location: StoreLocation, sessionKey: string, entry: QueuedEntry, liveness: Liveness = new Map()): QueueListItem[] {
  const incognito = isInMemory(location.storePath);
  const claimed = entry.queueOwner;
  const owner = claimed ? { pid: claimed.pid, hostname: claimed.hostname, alive: listedAlive(claimed.hostname, ownerAlive(claimed, liveness)) } : null;
  return queueOf(entry).map((item, index) => ({
    runId: item.runId,
    messageId: item.messageId ?? null,
    requester: item.requester,
    sessionKey,
    sessionId: item.sessionId,
    mode: item.mode,
    state: item.state,
    enqueuedAt: item.enqueuedAt,
    text: item.text,
    agentId: listedAgentId(sessionKey, location),
    kind: item.kind,
    position: index + 1,
    owner,
    incognito,
  }));
}

/** Waiting items and active runs of every agent's store (optionally of one session, by key or id). */
export async function listQueue(ctx: EngineContext, options: { session?: string } = {}): Promise<QueueListing> {
  const filter = sessionFilter(ctx, options.session);
  const listing: QueueListing = { items: [], active: [] };
  let matched = false;
  for (const location of stores(ctx)) {
    const store = await readSessionStore(location.storePath);
    const entries = Object.entries(store as Record<string, QueuedEntry>).filter(([key, entry]) => (filter ? filter.matches(key, entry) : true));
    if (entries.length > 0 && filter !== undefined) matched = true;
    // An entry of the wrong shape has no queue anyone can read or drain (doctor lists it).
    for (let i = entries.length - 1; i >= 0; i--) if (hasQueueState(entries[i]![1]) && !usable(location, entries[i]![1])) entries.splice(i, 1);
    const liveness: Liveness = new Map();
    const incognito = isInMemory(location.storePath);
    await learnLiveness(ctx, location, entries.filter(([, entry]) => entry.activeRun || entry.queueOwner).map(([, entry]) => entry), liveness);
    for (const [key, entry] of entries) {
      listing.items.push(...waitingItemsOf(location, key, entry, liveness));
      const run = entry.activeRun;
      if (run) {
        listing.active.push({
          runId: run.runId,
          sessionKey: key,
          sessionId: run.sessionId,
          pid: run.pid,
          startedAt: run.startedAt,
          agentId: listedAgentId(key, location),
          hostname: run.hostname,
          lane: run.lane,
          alive: listedAlive(run.hostname, runAlive(run, liveness)),
          abortRequested: entry.abortRequested === run.runId,
          incognito,
        });
      }
    }
  }
  // A session that is not there is NOT_FOUND, as for `queue abort` and `sessions show`; one that
  // is there with nothing queued lists nothing.
  if (!matched && filter !== undefined) {
    throw filter.noOwner ?? noSuchSession(filter.wanted);
  }
  listing.items.sort((a, b) => a.enqueuedAt - b.enqueuedAt || (a.sessionKey < b.sessionKey ? -1 : a.sessionKey > b.sessionKey ? 1 : a.position - b.position));
  listing.active.sort((a, b) => a.startedAt - b.startedAt || (a.sessionKey < b.sessionKey ? -1 : 1));
  return listing;
}

export type QueueLookup =
  | { kind: 'item'; item: QueueListItem & Record<string, unknown> }
  | { kind: 'active'; active: QueueActiveRun };

/** A queued item (all its stored fields) or an active run, by runId; NOT_FOUND otherwise. */
export async function showQueued(ctx: EngineContext, runId: string): Promise<QueueLookup> {
  for (const location of stores(ctx)) {
    const store = await readSessionStore(location.storePath);
    for (const [key, value] of Object.entries(store)) {
      const entry = value as QueuedEntry;
      if (queueOf(entry).length === 0 || !usable(location, entry)) continue;
      const index = queueOf(entry).findIndex((item) => item.runId === runId);
      if (index >= 0 && !claimedByActiveRun(entry, queueOf(entry)[index]!)) return { kind: 'item', item: { ...queueOf(entry)[index], ...itemsOf(location, key, entry)[index] } };
    }
  }
  const listing = await listQueue(ctx);
  const active = listing.active.find((run) => run.runId === runId);
  if (active) return { kind: 'active', active };
  throw new SwitchboardError('NOT_FOUND', `no queued item or active run with runId "${runId}"`, { hint: 'list them with `switchboard queue`' });
}

export interface CancelOutcome {
  cancelled: QueueListItem;
  cancelledBy: CancelledBy;
}

/** Who is cancelling: a process (by default this one) and, if given, why. */
export interface CancelRequest {
  by?: { pid: number; hostname: string; user: string | null };
  reason?: string;
}

function currentUser(): string | null {
  try {
    return userInfo().username;
  } catch {
    return null; // no passwd entry for this uid (a container): the pid still says who
  }
}

/** This process as the one who cancels (what a client such as `top` hands a server as `by`). */
export function thisCanceller(): NonNullable<CancelRequest['by']> {
  return { pid: THIS_PROCESS.pid, hostname: THIS_PROCESS.hostname, user: currentUser() };
}

function cancelledByOf(ctx: EngineContext, request: CancelRequest): CancelledBy {
  const by: CancelledBy = { ...(request.by ?? thisCanceller()), at: ctx.clock.now() };
  if (request.reason !== undefined && request.reason.trim() !== '') by.reason = request.reason.trim();
  return by;
}

/**
 * Records what `queue cancel`/`abort` took out, in the same store write that takes it out: a
 * `custom` record per item (customType `dropped`, who cancelled it and why) goes into the entry's
 * outbox, which the session's next drain appends to its transcript. A drainer (another process
 * with a stream waiting on the session) is also left the items, to report them on that stream.
 * Before, without a drainer, this command's own output was the only report, and a cancel killed
 * after its write and before its output left a message that had been acknowledged nowhere.
 */
function noteCancelled(entry: QueuedEntry, items: QueueItem[], reason: 'cancelled' | 'stopped', by: CancelledBy): void {
  if (items.length === 0) return;
  noteRemoved(entry, items.map((item) => ({ ...droppedEventOf(item, reason), cancelledBy: by })), randomUUID);
  if (entry.queueOwner === undefined && entry.activeRun === undefined) return;
  const left = items.map((item) => ({ runId: item.runId, sessionId: item.sessionId, requester: item.requester, messageId: item.messageId ?? null, kind: item.kind, reason, by }));
  entry.cancelledItems = [...(Array.isArray(entry.cancelledItems) ? entry.cancelledItems : []), ...left];
}

/** Removes one queued (or parked) item; the session's active run continues. */
export async function cancelQueued(ctx: EngineContext, runId: string, request: CancelRequest = {}): Promise<CancelOutcome> {
  const cancelledBy = cancelledByOf(ctx, request);
  let activeHere: string | undefined;
  for (const location of stores(ctx)) {
    const cancelled = await updateSessionStore(location.storePath, (store: SessionStore) => {
      for (const [key, value] of Object.entries(store)) {
        const entry = value as QueuedEntry;
        if (!hasQueueState(entry) || !usable(location, entry)) continue;
        const queue = queueOf(entry);
        const index = queue.findIndex((item) => item.runId === runId);
        // The active run's own message is still in the queue, claimed, until its runner starts:
        // it is the run, not a queued item.
        if (index < 0 || (entry.activeRun?.runId === runId && claimedByActiveRun(entry, queue[index]!))) {
          if (entry.activeRun?.runId === runId) activeHere = key;
          continue;
        }
        const listed = itemsOf(location, key, entry)[index];
        const { leasedBy, claimedBy } = queue[index];
        if (claimedByActiveRun(entry, queue[index]!)) {
          throw new SwitchboardError('SESSION_BUSY', `"${runId}" is being started as run ${claimedBy} and can no longer be cancelled`, {
            hint: `\`switchboard queue abort --session ${key}\` stops the run`,
          });
        }
        if (leasedBy !== undefined) {
          throw new SwitchboardError('SESSION_BUSY', `"${runId}" is being injected into run ${leasedBy} at its next boundary and can no longer be cancelled`, {
            hint: `\`switchboard queue abort --session ${key}\` stops the run, and it with it`,
          });
        }
        setQueue(entry, queue.filter((_, i) => i !== index));
        noteCancelled(entry, [queue[index]], 'cancelled', cancelledBy);
        entry.updatedAt = ctx.clock.now();
        return listed;
      }
      return undefined;
    }, storeWriteOptions(ctx));
    if (cancelled) return { cancelled, cancelledBy };
  }
  if (activeHere !== undefined) {
    throw new SwitchboardError('NOT_FOUND', `"${runId}" is the active run of ${activeHere}, not a queued item`, {
      hint: `to stop it, run \`switchboard queue abort --session ${activeHere}\``,
    });
  }
  throw new SwitchboardError('NOT_FOUND', `no queued item with runId "${runId}"`, { hint: 'list them with `switchboard queue`' });
}

export interface AbortOutcome {
  sessionKey: string;
  /** Queued items removed first, oldest first. */
  cancelled: QueueListItem[];
  /** The active run asked to stop (its owner aborts it within about 250 ms), or null. */
  aborted: string | null;
  /**
   * Only when there are any: items the run had already taken for its next boundary, injected if
   * that boundary comes first, else dropped with the run (reported as dropped, reason stopped).
   */
  withRun?: string[];
  cancelledBy: CancelledBy;
}

/**
 * Stops a session: its queued items are cancelled FIRST, then the active run is asked to abort
 * (entry.abortRequested, polled by the run's owner), so the drain cannot promote queued work into
 * a session being stopped.
 */
export async function abortSession(ctx: EngineContext, keyOrId: string, request: CancelRequest = {}): Promise<AbortOutcome> {
  const found = await findSession(ctx, keyOrId);
  const cancelledBy = cancelledByOf(ctx, request);
  const outcome = await updateSessionStore(found.location.storePath, (store: SessionStore) => {
    const entry = store[found.key] as QueuedEntry | undefined;
    if (!entry) throw new SwitchboardError('NOT_FOUND', `session "${found.key}" was deleted meanwhile`);
    checkSessionEntry(found.location.storePath, found.key, entry);
    const queue = queueOf(entry);
    const listed = itemsOf(found.location, found.key, entry);
    // Items the active run has leased or claimed go with the run (recorded, or dropped with it).
    const withTheRun = (item: (typeof queue)[number]): boolean => item.leasedBy !== undefined || claimedByActiveRun(entry, item);
    const cancelled = listed.filter((_, index) => !withTheRun(queue[index]));
    const withRun = queue.filter(withTheRun);
    setQueue(entry, withRun);
    noteCancelled(entry, queue.filter((item) => !withTheRun(item)), 'stopped', cancelledBy);
    let aborted: string | null = null;
    if (entry.activeRun) {
      aborted = entry.activeRun.runId;
      entry.abortRequested = aborted;
      entry.stopRequested = aborted;
    }
    if (cancelled.length > 0 || aborted !== null) entry.updatedAt = ctx.clock.now();
    const outcome: AbortOutcome = { sessionKey: found.key, cancelled, aborted, cancelledBy };
    if (withRun.length > 0) outcome.withRun = withRun.map((item) => item.runId);
    return outcome;
  }, storeWriteOptions(ctx));
  if (outcome.aborted !== null) queueRuntimeFor(ctx).requestAbort(outcome.aborted, 'queue abort');
  return outcome;
}

/**
 * A stopping server's incognito sessions vanish with it: what still waits in them (the grace period
 * ran out) is taken out and returned as `dropped` events (reason `shutdown`) to report.
 */
export async function dropIncognitoQueues(ctx: EngineContext): Promise<DroppedEvent[]> {
  const { incognitoRoot } = ctx;
  if (incognitoRoot === undefined) return [];
  const events: DroppedEvent[] = [];
  for (const agentId of knownAgentIds(ctx)) {
    const location = incognitoStoreFor(incognitoRoot, agentId);
    const dropped = await updateSessionStore(location.storePath, (store: SessionStore) =>
      Object.values(store).flatMap((value) => {
        const entry = value as QueuedEntry;
        if (!hasQueueState(entry) || !usable(location, entry)) return [];
        const waiting = queueOf(entry);
        setQueue(entry, []);
        return waiting.map((item) => droppedEventOf(item, 'shutdown'));
      }),
      storeWriteOptions(ctx),
    );
    events.push(...dropped);
  }
  return events;
}

/** For maintenance: sessions with a run (`running`) or waiting work or notes (`queued`) are never removed. */
export async function queueBusyKeys(location: StoreLocation): Promise<ProtectedKey[]> {
  return busyKeysIn(await readSessionStore(location.storePath));
}

/** The same rule on a store already in memory (the write path's upkeep). */
export function busyKeysIn(store: SessionStore): ProtectedKey[] {
  const keys: ProtectedKey[] = [];
  for (const [key, value] of Object.entries(store)) {
    const entry = value as QueuedEntry;
    if (entry.activeRun) keys.push({ key, reason: 'running' });
    // Records still owed to its transcript (the outbox: a dead run's failure, drops, expiries)
    // are queued work too: removing the entry would lose them, or have them written into an
    // archived file's name afterwards, where nothing names them.
    else if (queueOf(entry).length > 0 || entry.pendingReset || (Array.isArray(entry.outbox) && entry.outbox.length > 0)) keys.push({ key, reason: 'queued' });
  }
  return keys;
}
