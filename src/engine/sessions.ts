// Session operations shared by the CLI and the server: find, show, reset, pin, delete (the listing is
// in session-list.ts). Every change goes through the store's one update path; removals archive first.

import { randomUUID } from 'node:crypto';
import { promises as fsp } from 'node:fs';
import { SwitchboardError, normalizeAgentId, systemClock, toSwitchboardError } from '../core/index.js';
import { evaluateFreshness, resetPolicyFor, resetRouteOf, rotateEntry, type Freshness, type PlannedEntry, type ResetPolicy } from '../policy/index.js';
import { explicitSessionKeyAsTyped, normalizeExplicitSessionKey, parseSessionKey } from '../routing/index.js';
import {
  DEFAULT_ACQUIRE_TIMEOUT_MS,
  appendEntries,
  archiveFile,
  checkNotShared,
  checkSessionEntry,
  sessionEntryProblem,
  lockPathFor,
  readLockOwner,
  readSessionStore,
  transactSessionStore,
  transcriptSharing,
  transcriptStats,
  updateSessionStore,
  withLock,
  type LockOwnerRecord,
  type SessionEntry,
  type StoreLocation,
  type TranscriptReadStats,
} from '../store/index.js';
import { beforeResetFor, beforeResetTurnSpec } from './before-reset.js';
import { noCommandAgent, noSuchSession, sessionLockOptions, storeFor, storeWriteOptions, transcriptNameFor, type EngineContext } from './context.js';
import {
  THIS_PROCESS,
  clearDeadHolders,
  droppedEventOf,
  expiredEventOf,
  isThisProcess,
  learnLiveness,
  orphanFailure,
  ownerAlive,
  peekOutbox,
  queueOf,
  removalRecords,
  runAlive,
  setQueue,
  unknownHolders,
  type DroppedEvent,
  type ExpiredEvent,
  type Liveness,
  type QueuedEntry,
  type SessionRef,
} from './queue-state.js';
import { learnRecordedOrphans, reportLeaving, type LeavingReports } from './orphans.js';
import { updateStore } from './run-store.js';
import { executeTurn, type RunHost } from './runs.js';
import { queueRuntimeFor } from './runtime.js';
import { selectStores, transcriptFileOf, transcriptStartedAtOf, type StoreSelection } from './session-list.js';

export interface FoundSession {
  location: StoreLocation;
  key: string;
  entry: SessionEntry;
}

/** Finds a session by key (explicit-key rules: a bare `foo` is the default agent's) or by sessionId. */
export async function findSession(ctx: EngineContext, keyOrId: string, selection: StoreSelection = {}): Promise<FoundSession> {
  const wanted = keyOrId.trim();
  if (wanted === '') throw new SwitchboardError('USAGE', 'a session key or session id is required');
  let key: string | undefined;
  let noOwner: unknown;
  try {
    key = normalizeExplicitSessionKey(wanted, selection.agent ? normalizeAgentId(selection.agent) : ctx.table.owner);
  } catch (err) {
    // A bare key with no owner to give it to: still found as a session id, else NO_OWNER below.
    if (err instanceof SwitchboardError && err.code === 'NO_OWNER') noOwner = noCommandAgent(ctx, `session key "${wanted}"`);
    key = undefined;
  }
  // A key that keeps its case in the store (a Signal group's, a Matrix room's), given as listed.
  const typedKey = key === undefined ? undefined : explicitSessionKeyAsTyped(wanted, key);
  const stores =
    selection.storePath || selection.agent
      ? selectStores(ctx, selection)
      : key
        ? [storeFor(ctx, parseSessionKey(key).agentId), ...selectStores(ctx, { allAgents: true })]
        : selectStores(ctx, { allAgents: true });
  const seen = new Set<string>();
  for (const location of stores) {
    if (seen.has(location.storePath)) continue;
    seen.add(location.storePath);
    const store = await readSessionStore(location.storePath);
    if (key && Object.hasOwn(store, key)) return { location, key, entry: store[key] };
    if (typedKey !== undefined && Object.hasOwn(store, typedKey)) return { location, key: typedKey, entry: store[typedKey] };
    for (const [candidate, entry] of Object.entries(store)) {
      if (entry.sessionId === wanted) return { location, key: candidate, entry };
    }
  }
  if (noOwner !== undefined) throw noOwner;
  throw noSuchSession(wanted);
}

export interface SessionDetails extends FoundSession {
  transcriptPath: string;
  /** The reset policy that applies to the session (what freshness was judged by). */
  resetPolicy: ResetPolicy;
  freshness: Freshness;
  lock: { path: string; owner: LockOwnerRecord | null } | null;
  transcript: TranscriptReadStats | null;
}

export async function showSession(ctx: EngineContext, keyOrId: string, selection: StoreSelection = {}): Promise<SessionDetails> {
  const found = await findSession(ctx, keyOrId, selection);
  const transcriptPath = transcriptFileOf(found.location, found.entry, found.key);
  const policy = resetPolicyFor(ctx.config.session, found.key, resetRouteOf(found.entry));
  const transcriptStartedAt = await transcriptStartedAtOf(found.location, found.entry);
  const freshness = evaluateFreshness({ ...found.entry, transcriptStartedAt }, policy, ctx.clock.now());
  const lockPath = lockPathFor(transcriptPath);
  const lockExists = await fsp.stat(lockPath).then(
    () => true,
    () => false,
  );
  const transcript = await transcriptStats(transcriptPath).catch((err: unknown) => {
    if (err instanceof SwitchboardError && err.code === 'NOT_FOUND') return null;
    throw err;
  });
  return { ...found, transcriptPath, resetPolicy: policy, freshness, lock: lockExists ? { path: lockPath, owner: await readLockOwner(lockPath) } : null, transcript };
}


export interface ResetOutcome {
  sessionKey: string;
  previousSessionId: string;
  sessionId: string;
  archivedTo: string | null;
  /** The agent's turn before the reset (`session.reset.beforeReset`); null when none is configured. */
  beforeReset: BeforeResetReport | null;
  /** What waited for the old instance and expired with it (empty when a live process drains the queue: it reports them). */
  expired: ExpiredEvent[];
}

/**
 * How the turn before a reset went. `skipped`: it could not be had (the session was busy with a
 * run or a queue, or changed meanwhile) — the reset went on without it. Any other status but
 * `done` is a run_failed, recorded in the old transcript as well.
 */
export interface BeforeResetReport {
  runId: string | null;
  status: 'done' | 'failed' | 'timeout' | 'aborted' | 'skipped';
  reason?: string;
  message?: string;
}

/**
 * The agent's turn on an idle session's current instance before a command rotates it (`sessions
 * reset`, `maintain`): claimed in the store like any run (so ingest queues behind it), run to its
 * end here, released. It never throws and never blocks the reset: whatever became of it is in the
 * report. Messages that came in meanwhile wait in the queue; `handOffQueue` runs them afterwards.
 */
export async function turnBeforeReset(ctx: EngineContext, location: StoreLocation, key: string, sessionId: string, reason: string): Promise<BeforeResetReport | null> {
  const plan = beforeResetFor(ctx, location.agentId);
  if (plan === undefined) return null;
  const runId = randomUUID();
  const ref: SessionRef = { location, agentId: location.agentId, sessionKey: key };
  let transcript: string | 'busy' | 'changed';
  try {
    transcript = await updateStore(ctx, location, (store) => {
      const entry = (Object.hasOwn(store, key) ? store[key] : undefined) as QueuedEntry | undefined;
      if (entry === undefined || entry.sessionId !== sessionId || sessionEntryProblem(entry, location.sessionsDir) !== null) return 'changed';
      // A row sharing its transcript gets no turn in it; the rotation that follows refuses it.
      if (transcriptSharing(store).sharedWith(key).length > 0) return 'changed';
      if (entry.activeRun || entry.pendingReset || queueOf(entry).length > 0 || (entry.queueOwner && !isThisProcess(entry.queueOwner))) return 'busy';
      const now = ctx.clock.now();
      entry.activeRun = { ...THIS_PROCESS, runId, sessionId, startedAt: now, lane: 'main', messages: [{ runId }] };
      return transcriptFileOf(location, entry, key);
    });
  } catch (err) {
    return { runId: null, status: 'skipped', reason: 'store', message: toSwitchboardError(err).message };
  }
  if (transcript === 'busy') return { runId: null, status: 'skipped', reason: 'busy', message: 'the session had a run or waiting messages; reset without the turn' };
  if (transcript === 'changed') return { runId: null, status: 'skipped', reason: 'changed', message: 'the session changed meanwhile' };
  const runtime = queueRuntimeFor(ctx);
  const report: BeforeResetReport = { runId, status: 'done' };
  const host: RunHost = {
    emit: (event) => {
      if (event.type === 'run_failed' && event.runId === runId) Object.assign(report, { status: event.status, reason: event.reason, message: event.message });
      runtime.emit(event);
    },
    register: (run) => runtime.register(run),
    unregister: (run) => runtime.unregister(run),
    takePendingAbort: (id) => runtime.takePendingAbort(id),
    suppressDrain: () => undefined,
  };
  await executeTurn(ctx, host, beforeResetTurnSpec(plan, { ref, runId, sessionId, transcript, reason }));
  return report;
}

/** After a command's rotation: what came in during its turn is drained by this process (the run's holder). */
export async function handOffQueue(ctx: EngineContext, location: StoreLocation, key: string): Promise<void> {
  const entry = (await readSessionStore(location.storePath).catch(() => ({}) as Record<string, SessionEntry>))[key] as QueuedEntry | undefined;
  if (entry === undefined || entry.activeRun || !entry.queueOwner || !isThisProcess(entry.queueOwner)) return;
  queueRuntimeFor(ctx).scheduleDrain({ location, agentId: location.agentId, sessionKey: key }, 0);
}

export interface RotationRequest {
  location: StoreLocation;
  key: string;
  /** The instance the caller means to rotate; another current instance skips (`changed`). */
  sessionId: string;
  /** Its transcript, whose write lock guards the rotation (null: nothing could be writing). */
  file: string | null;
  /** Wait for the lock (an append or run in progress finishes first), or try it once (`busy`). */
  wait: boolean;
  /** Decided inside the store update on the current entry: the notice's reason, or a skip. */
  decide: (current: SessionEntry, now: number) => { reason: string } | { skip: string };
  note?: string;
  model?: string;
  runId?: string;
  /**
   * doctor --repair only: the key shares its transcript with this one, which keeps it; the
   * rotation gives the key its own (otherwise a shared entry is refused, see checkNotShared).
   */
  separatingFrom?: string;
  /** No enforce upkeep in the write (doctor: its later steps judge the folder as it was scanned). */
  skipUpkeep?: boolean;
}

export type RotationOutcome =
  | { kind: 'rotated'; entry: SessionEntry; reason: string; archivedTo: string | null; expired: ExpiredEvent[] }
  | { kind: 'skipped'; reason: 'gone' | 'changed' | string }
  | { kind: 'busy'; holder: { pid: number | null; runId: string | null; ageMs: number | null } };

/**
 * The one rotation shell (`sessions reset`, `maintain`): under the old transcript's write lock,
 * the store update re-checks the entry and applies rotateEntry; then the old transcript is
 * archived as `.reset.<ts>` and a reset_notice opens the new one. What waited for the old
 * instance expires in the same write, reported in the outcome and recorded after the notice —
 * unless a live process drains the queue, which reports them to whoever waits on them. Left in
 * the queue, they were reported by nobody until some later message made a process drain it.
 */
export async function rotateInstance(ctx: EngineContext, request: RotationRequest): Promise<RotationOutcome> {
  const { location, key } = request;
  const lockOptions = sessionLockOptions(ctx, { sessionKey: key, runId: request.runId });
  const rotate = async (): Promise<RotationOutcome> => {
    const now = ctx.clock.now();
    type Decision = { skip: string } | { entry: SessionEntry; reason: string; expired: ExpiredEvent[] };
    const decision = await transactSessionStore(location.storePath, async (store, tx): Promise<Decision> => {
      const current = Object.hasOwn(store, key) ? store[key] : undefined;
      if (current === undefined) return { skip: 'gone' };
      if (current.sessionId !== request.sessionId) return { skip: 'changed' };
      // Archiving "its" transcript would take another key's history away. Separating archives
      // nothing (file is null): it only stops the key from naming the keeper's transcript.
      if (request.separatingFrom === undefined) checkNotShared(location.storePath, store, key);
      else if (!transcriptSharing(store).sharedWith(key).includes(request.separatingFrom)) return { skip: 'changed' };
      const decided = request.decide(current, now);
      if ('skip' in decided) return decided;
      const threadId = (current.origin as { threadId?: string } | undefined)?.threadId;
      const next = rotateEntry(current as PlannedEntry, { sessionKey: key, now, newSessionId: randomUUID, transcriptName: (id, thread) => transcriptNameFor(location, id, thread) }, { reason: decided.reason, threadId }) as SessionEntry;
      if (request.model) next.model = next.modelOverride = request.model;
      const notice: Record<string, unknown> = { type: 'reset_notice', reason: decided.reason, previousSessionId: request.sessionId };
      if (request.note) notice.note = request.note;
      if (request.model) notice.model = request.model;
      const leaving = await expireOldInstance(ctx, location, key, next as QueuedEntry, request.sessionId, current.sessionFile);
      const expired = leaving.plain as ExpiredEvent[];
      // Record first: the new instance's transcript exists before sessions.json names it. Under
      // the store lock, so no append of an ingest batch can come in between.
      await appendEntries(transcriptFileOf(location, next), [notice as { type: string }, ...removalRecords(expired), ...leaving.failures], {
        session: { sessionId: next.sessionId, sessionKey: key, agentId: location.agentId },
        clock: ctx.clock,
        coveredBy: tx.handle,
      });
      store[key] = next;
      return { entry: next, reason: decided.reason, expired };
    }, storeWriteOptions(ctx, { skipUpkeep: request.skipUpkeep }));
    if ('skip' in decision) return { kind: 'skipped', reason: decision.skip };
    // After the store names the new instance, nothing appends to the old file any more.
    const archivedTo = request.file === null ? null : await archiveFile(request.file, 'reset', now);
    return { kind: 'rotated', entry: decision.entry, reason: decision.reason, archivedTo, expired: decision.expired };
  };
  if (request.file === null) return rotate();
  let acquired = false;
  try {
    return await withLock(request.file, request.wait ? lockOptions : { ...lockOptions, acquireTimeoutMs: 0 }, () => {
      acquired = true;
      return rotate();
    });
  } catch (err) {
    if (!request.wait && !acquired && err instanceof SwitchboardError && err.code === 'SESSION_BUSY') {
      const owner = (err.details?.owner ?? null) as { pid?: number; runId?: string } | null;
      const ageMs = typeof err.details?.ageMs === 'number' ? err.details.ageMs : null;
      return { kind: 'busy', holder: { pid: owner?.pid ?? null, runId: owner?.runId ?? null, ageMs } };
    }
    throw err;
  }
}

/**
 * Takes the items pinned to the rotated-away instance out of the rotated entry's queue, as the
 * `expired` events to report; none while a live process drains the queue (this one included: a
 * `serve` whose maintenance resets a session it drains) or its owner's liveness is unknown, since
 * that drain reports them to the clients waiting on them.
 */
async function expireOldInstance(ctx: EngineContext, location: StoreLocation, key: string, entry: QueuedEntry, oldSessionId: string, oldTranscriptName: unknown): Promise<LeavingReports> {
  const none: LeavingReports = { events: [], plain: [], failures: [] };
  const queue = queueOf(entry);
  if (!queue.some((item) => item.sessionId === oldSessionId)) return none;
  // Only now, inside the store update, and only for a queue that has such items: a rotation of an idle session reads nothing more.
  const liveness: Liveness = new Map();
  await learnLiveness(ctx, location, [entry], liveness);
  if (entry.queueOwner !== undefined && (isThisProcess(entry.queueOwner) || ownerAlive(entry.queueOwner, liveness) !== false)) return none;
  // What a dead run took under the old instance may be recorded there (orphans.ts); the run
  // itself is over, reported here with its turn (left in the entry, a later drain reported it again).
  await learnRecordedOrphans(location, entry, liveness, oldTranscriptName);
  const orphan = clearDeadHolders(entry, liveness);
  const waiting = queueOf(entry);
  const expired = waiting.filter((item) => item.sessionId === oldSessionId);
  setQueue(entry, waiting.filter((item) => item.sessionId !== oldSessionId));
  if (queueOf(entry).length === 0 && entry.pendingReset === undefined) delete entry.queueOwner;
  const current = entry.sessionId;
  const leaving = reportLeaving(expired, key, liveness, (item) => expiredEventOf(item, current));
  if (orphan) {
    const failure = orphanFailure(orphan, key);
    leaving.events.push(failure.event);
    leaving.failures.push(failure.record);
  }
  return leaving;
}

/** Rotates a session now (`sessions reset`), waiting for an append or run in progress to finish. */
export async function resetSession(ctx: EngineContext, keyOrId: string, options: { reason?: string; model?: string } & StoreSelection = {}): Promise<ResetOutcome> {
  const found = await findSession(ctx, keyOrId, options);
  const beforeReset = await turnBeforeReset(ctx, found.location, found.key, found.entry.sessionId, 'command');
  const outcome = await rotateInstance(ctx, {
    location: found.location,
    key: found.key,
    sessionId: found.entry.sessionId,
    file: transcriptFileOf(found.location, found.entry, found.key),
    wait: true,
    decide: () => ({ reason: 'command' }),
    note: options.reason,
    model: options.model,
  });
  if (outcome.kind === 'skipped' && outcome.reason === 'gone') throw new SwitchboardError('NOT_FOUND', `session "${found.key}" was deleted meanwhile`);
  if (outcome.kind !== 'rotated') {
    throw new SwitchboardError('SESSION_BUSY', `session "${found.key}" was rotated by someone else meanwhile`, { hint: 'run the command again' });
  }
  if (beforeReset !== null) await handOffQueue(ctx, found.location, found.key);
  return { sessionKey: found.key, previousSessionId: found.entry.sessionId, sessionId: outcome.entry.sessionId, archivedTo: outcome.archivedTo, beforeReset, expired: outcome.expired };
}

/** Sets or clears `pinned` (pinned sessions are never pruned, capped or evicted). */
export async function setPinned(ctx: EngineContext, keyOrId: string, pinned: boolean, selection: StoreSelection = {}): Promise<{ sessionKey: string; pinned: boolean }> {
  const found = await findSession(ctx, keyOrId, selection);
  await updateSessionStore(found.location.storePath, (store) => {
    const entry = store[found.key];
    if (!entry) throw new SwitchboardError('NOT_FOUND', `session "${found.key}" was deleted meanwhile`);
    checkSessionEntry(found.location.storePath, found.key, entry);
    checkNotShared(found.location.storePath, store, found.key);
    if (pinned) entry.pinned = true;
    else delete entry.pinned;
    entry.updatedAt = ctx.clock.now();
  }, storeWriteOptions(ctx));
  return { sessionKey: found.key, pinned };
}

export interface DeleteOutcome {
  sessionKey: string;
  sessionId: string;
  archivedTo: string | null;
  /** What waited in the session's queue: dropped with it (reason `deleted`), each also recorded in the archive. */
  dropped: DroppedEvent[];
}

/** How long a delete polls for a live process to finish the session's run or queue. */
const DELETE_POLL_MS = 50;

/**
 * Removes a session: its transcript is archived as `.deleted.<ts>` first, then the entry goes.
 * A live process running or draining the session is waited for (as the write lock is) so that
 * its work ends first. What is still waiting after that (queued with `--no-wait`, or left by a
 * process that died) is dropped with the session and reported: a `dropped` event per item in
 * the outcome and a `custom` `dropped` record per item in the archive, together with the
 * outbox's records and the report of a dead run, which would otherwise go with the row.
 */
export async function deleteSession(ctx: EngineContext, keyOrId: string, selection: StoreSelection = {}): Promise<DeleteOutcome> {
  const found = await findSession(ctx, keyOrId, selection);
  if (sessionEntryProblem(found.entry, found.location.sessionsDir) !== null) {
    // No file it names can be trusted: the row goes (if unchanged), nothing is archived; a
    // transcript it had is then an orphan that `doctor --repair` adopts again under a good row.
    const row = JSON.stringify(found.entry);
    await updateSessionStore(found.location.storePath, (store, tx) => {
      if (Object.hasOwn(store, found.key) && JSON.stringify(store[found.key]) === row) tx.removeEntry(store, found.key, ctx.clock.now());
    }, storeWriteOptions(ctx));
    const id = found.entry.sessionId as unknown;
    // A row that is not even an object has no sessionId to show (as in the listing).
    return { sessionKey: found.key, sessionId: typeof id === 'string' ? id : id === undefined ? '' : String(id), archivedTo: null, dropped: [] };
  }
  const { location, key } = found;
  const file = transcriptFileOf(location, found.entry, key);
  const lockOptions = sessionLockOptions(ctx, { sessionKey: key });
  // Real time: the command's clock may be pinned (--now) and would never reach the deadline.
  const deadline = systemClock.now() + (lockOptions.acquireTimeoutMs ?? DEFAULT_ACQUIRE_TIMEOUT_MS);
  for (;;) {
    const liveness: Liveness = new Map();
    await learnLiveness(ctx, location, [(await readSessionStore(location.storePath))[key] as QueuedEntry | undefined], liveness);
    const outcome = await withLock(file, lockOptions, async () =>
      // One store transaction: an ingest batch (which may append to an idle transcript under the
      // store lock alone) cannot append between the archive and the removal of the row.
      transactSessionStore(location.storePath, async (store, tx): Promise<DeleteOutcome | 'live' | 'unknown'> => {
        const entry = (Object.hasOwn(store, key) ? store[key] : undefined) as QueuedEntry | undefined;
        if (entry?.sessionId !== found.entry.sessionId) {
          throw new SwitchboardError('SESSION_BUSY', `session "${key}" was rotated by someone else meanwhile`, { hint: 'run the command again' });
        }
        checkNotShared(location.storePath, store, key);
        if (unknownHolders(entry, liveness)) return 'unknown';
        const liveRun = entry.activeRun !== undefined && runAlive(entry.activeRun, liveness) === true;
        const liveOwner = entry.queueOwner !== undefined && !isThisProcess(entry.queueOwner) && ownerAlive(entry.queueOwner, liveness) === true;
        if (liveRun || (liveOwner && queueOf(entry).length > 0)) return 'live';
        const records = [...peekOutbox(entry).records];
        const orphan = clearDeadHolders(entry, liveness);
        if (orphan) records.push(orphanFailure(orphan, key).record);
        const dropped = queueOf(entry).map((item) => droppedEventOf(item, 'deleted'));
        records.push(...removalRecords(dropped));
        // Recorded first: the archive keeps the report of what went with the row.
        await appendEntries(file, records, { session: { sessionId: entry.sessionId, sessionKey: key, agentId: location.agentId }, clock: ctx.clock, coveredBy: tx.handle });
        const now = ctx.clock.now();
        const archivedTo = await archiveFile(file, 'deleted', now);
        tx.removeEntry(store, key, now);
        return { sessionKey: key, sessionId: entry.sessionId, archivedTo, dropped };
      }, storeWriteOptions(ctx)),
    );
    if (typeof outcome === 'object') return outcome;
    if (outcome === 'live' && systemClock.now() >= deadline) {
      throw new SwitchboardError('SESSION_BUSY', `session "${key}" still has a run or waiting messages of a live process`, {
        hint: 'wait for its work to end (switchboard queue list), or stop it with switchboard queue abort, then run the command again',
      });
    }
    if (outcome === 'live') await new Promise((resolve) => setTimeout(resolve, DELETE_POLL_MS));
  }
}
