// The queue machinery of one process: runs in flight, sessions whose queue it drains (quiet
// windows, deferred rotations, rebind checks), a poll of the store for requests from other
// processes, orphaned queues taken over, and the event sink run events are written to.

import { randomUUID } from 'node:crypto';
import { systemClock, toSwitchboardError } from '../core/index.js';
import {
  carriedOf,
  clearInstanceUsage,
  collectPrompt,
  planNextTurn,
  singleSender,
  senderLabel,
  splitByInstance,
  type LaneName,
  type QueueItem,
} from '../policy/index.js';
import type { RunMessage } from '../runner/index.js';
import { archiveFile, readSessionStore, withLock, type NewTranscriptEntry, type SessionStore } from '../store/index.js';
import { appendInStore, transactRetryingBusy } from './store-append.js';
import { knownAgentIds, sessionLockOptions, storeFor, transcriptPathIn, type EngineContext } from './context.js';
import {
  THIS_PROCESS,
  clearDeadHolders,
  dropOutbox,
  expiredEventOf,
  isThisProcess,
  learnLiveness,
  orphanFailure,
  ownerAlive,
  ownerRecord,
  pushOutbox,
  queueOf,
  recordOfItem,
  runAlive,
  runMessageOf,
  runnerFor,
  sessionRefKey,
  setQueue,
  peekOutbox,
  unknownHolders,
  type Liveness,
  type QueueEvent,
  type QueuedEntry,
  type SessionRef,
} from './queue-state.js';
import { LocalRun, executeTurn, updateStore, type RunHost, type TurnSpec } from './runs.js';

const POLL_INTERVAL_MS = 250;
const DRAIN_RETRY_MS = 1_000;
const DRAIN_MAX_RETRIES = 5;

interface DrainState {
  timer: NodeJS.Timeout | undefined;
  dueAt: number;
  running: boolean;
  rerun: boolean;
  failures: number;
  release: () => void;
}

export class QueueRuntime implements RunHost {
  noWait = false;
  /** Set by shutdown(): no new turn starts, runs in flight are aborted with this reason. */
  private stopping: string | undefined;
  private sink: (event: QueueEvent) => void = () => undefined;
  private work = 0;
  private idleWaiters: Array<() => void> = [];
  private readonly runs = new Map<string, LocalRun>();
  private readonly pendingAborts = new Map<string, string>();
  private readonly drains = new Map<string, DrainState>();
  private readonly suppressed = new Set<string>();
  private poller: NodeJS.Timeout | undefined;
  private polling = false;

  constructor(private readonly ctx: EngineContext) {}

  setSink(sink: (event: QueueEvent) => void): void {
    this.sink = sink;
  }

  emit(event: QueueEvent): void {
    try {
      this.sink(event);
    } catch (err) {
      process.emitWarning(`switchboard: could not write an event: ${String(err)}`);
    }
  }

  /** Counts one piece of work this process must finish before it may exit; returns its release. */
  private hold(): () => void {
    this.work += 1;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.work -= 1;
      if (this.work === 0) {
        const waiters = this.idleWaiters;
        this.idleWaiters = [];
        for (const resolve of waiters) resolve();
      }
    };
  }

  /** Resolves when no run, drain or quiet window of this process is left. */
  idle(): Promise<void> {
    if (this.work === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  hasLocalRun(key: string): boolean {
    return this.runs.has(key);
  }

  register(run: LocalRun): void {
    this.runs.set(run.key, run);
    if (this.poller === undefined) {
      this.poller = setInterval(() => void this.poll(), POLL_INTERVAL_MS);
      this.poller.unref();
    }
  }

  unregister(run: LocalRun): void {
    if (this.runs.get(run.key) === run) this.runs.delete(run.key);
    this.pendingAborts.delete(run.runId);
    if (this.runs.size === 0 && this.poller !== undefined) {
      clearInterval(this.poller);
      this.poller = undefined;
    }
  }

  takePendingAbort(runId: string): string | undefined {
    const reason = this.pendingAborts.get(runId);
    this.pendingAborts.delete(runId);
    return reason;
  }

  suppressDrain(ref: SessionRef): void {
    this.suppressed.add(sessionRefKey(ref));
  }

  /** Aborts a run of this process now, or as soon as it starts. */
  requestAbort(runId: string, reason: string): void {
    for (const run of this.runs.values()) {
      if (run.runId === runId) {
        run.abort(reason);
        return;
      }
    }
    this.pendingAborts.set(runId, reason);
  }

  /** Hands an in-process run the entry as an update of this process just left it. */
  observe(key: string, entry: QueuedEntry | undefined): void {
    this.runs.get(key)?.observe(entry);
  }

  /**
   * Stops taking on work (SIGTERM/SIGINT): quiet windows are dropped, runs in flight and runs
   * about to start are aborted (each recorded and reported as run_failed). What waits stays in
   * the durable queue; the next ingest or serve takes it over once this process is gone.
   */
  shutdown(reason: string): void {
    if (this.stopping !== undefined) return;
    this.stopping = reason;
    this.noWait = true;
    for (const [key, state] of this.drains) {
      if (state.timer === undefined || state.running) continue;
      clearTimeout(state.timer);
      state.timer = undefined;
      this.drains.delete(key);
      state.release();
    }
    for (const run of this.runs.values()) run.abort(reason);
  }

  /** Runs an idle session's message (its activeRun was claimed by the ingest that recorded it). */
  startTurn(turn: TurnSpec): void {
    const release = this.hold();
    setImmediate(() => {
      if (this.stopping !== undefined) this.pendingAborts.set(turn.runId, this.stopping);
      executeTurn(this.ctx, this, turn)
        .catch((err: unknown) => process.emitWarning(`switchboard: run ${turn.runId} failed unexpectedly: ${toSwitchboardError(err).message}`))
        .finally(() => {
          this.scheduleDrain(turn.ref, 0);
          release();
        });
    });
  }

  /** Looks at a session's queue after `delayMs` (sooner if already scheduled sooner). */
  scheduleDrain(ref: SessionRef, delayMs: number): void {
    const key = sessionRefKey(ref);
    if (this.suppressed.has(key) || this.noWait) return;
    const delay = Math.max(0, Math.ceil(delayMs));
    const dueAt = systemClock.now() + delay;
    let state = this.drains.get(key);
    if (state === undefined) {
      state = { timer: undefined, dueAt: Number.POSITIVE_INFINITY, running: false, rerun: false, failures: 0, release: this.hold() };
      this.drains.set(key, state);
    }
    if (state.running) {
      state.rerun = true;
      return;
    }
    if (state.timer !== undefined) {
      if (state.dueAt <= dueAt) return;
      clearTimeout(state.timer);
    }
    state.dueAt = dueAt;
    const current = state;
    state.timer = setTimeout(() => void this.runDrain(ref, key, current), delay);
  }

  private async runDrain(ref: SessionRef, key: string, state: DrainState): Promise<void> {
    state.timer = undefined;
    state.dueAt = Number.POSITIVE_INFINITY;
    state.running = true;
    let next: { waitMs: number } | undefined;
    let afterOverflow = false;
    try {
      for (;;) {
        state.rerun = false;
        if (this.stopping !== undefined) break;
        const outcome = await drainOnce(this.ctx, this, ref, afterOverflow);
        state.failures = 0;
        afterOverflow = outcome.kind === 'turn' && outcome.shape === 'overflow';
        if (outcome.kind === 'turn') continue;
        if (outcome.kind === 'wait') {
          next = { waitMs: outcome.waitMs };
          break;
        }
        if (state.rerun) continue;
        break;
      }
    } catch (err) {
      state.failures += 1;
      if (state.failures <= DRAIN_MAX_RETRIES) next = { waitMs: DRAIN_RETRY_MS * state.failures };
      else process.emitWarning(`switchboard: gave up draining the queue of ${ref.sessionKey}: ${toSwitchboardError(err).message}`);
    }
    state.running = false;
    if (next !== undefined && !this.suppressed.has(key) && this.stopping === undefined) {
      state.dueAt = systemClock.now() + next.waitMs;
      state.timer = setTimeout(() => void this.runDrain(ref, key, state), Math.max(0, next.waitMs));
      return;
    }
    if (state.rerun && this.stopping === undefined) {
      void this.runDrain(ref, key, state);
      return;
    }
    this.drains.delete(key);
    state.release();
  }

  /** Reads each store with runs of this process and lets the runs see requests from elsewhere. */
  private async poll(): Promise<void> {
    if (this.polling) return;
    this.polling = true;
    try {
      const byStore = new Map<string, LocalRun[]>();
      for (const run of this.runs.values()) {
        const list = byStore.get(run.location.storePath) ?? [];
        list.push(run);
        byStore.set(run.location.storePath, list);
      }
      for (const [storePath, runs] of byStore) {
        const generations = runs.map((run) => run.generation);
        let store: SessionStore;
        try {
          store = await readSessionStore(storePath);
        } catch {
          continue; // a damaged store is reported by the commands that need it
        }
        runs.forEach((run, index) => run.observe(store[run.turn.ref.sessionKey] as QueuedEntry | undefined, generations[index]));
      }
    } finally {
      this.polling = false;
    }
  }
}

const runtimes = new WeakMap<EngineContext, QueueRuntime>();

/** The queue runtime of an engine context (one per process in practice). */
export function queueRuntimeFor(ctx: EngineContext): QueueRuntime {
  let runtime = runtimes.get(ctx);
  if (!runtime) runtimes.set(ctx, (runtime = new QueueRuntime(ctx)));
  return runtime;
}

// ---------------------------------------------------------------------------------------------
// Draining one session

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
  /** The outbox's records (and their ids): they leave the outbox once appended. */
  records: NewTranscriptEntry[];
  outboxIds: string[];
  rotation?: { previousSessionId: string; previousSessionFile?: string; reason: string; model?: string };
  sessionId?: string;
  sessionFile?: string;
  waitMs: number;
  turn?: DrainTurn;
}

/**
 * One look at a session's queue inside the store update (pure given liveness and the clocks):
 * dead holders are cleared; a session with a live run or a live other owner is left alone;
 * otherwise this process owns it: a pending rotation is applied (a reset command at once, a
 * daily/idle/cron one when nothing of the old instance waits any more), items pinned to a
 * rotated instance expire, and the next turn is claimed when its quiet window has passed.
 */
function planDrain(store: SessionStore, ref: SessionRef, liveness: Liveness, hasRunner: boolean, now: number, nowWall: number, afterOverflow: boolean): DrainPlan {
  const plan: DrainPlan = { kind: 'stop', events: [], records: [], outboxIds: [], waitMs: 0 };
  const entry = store[ref.sessionKey] as QueuedEntry | undefined;
  if (!entry) return plan;
  if (unknownHolders(entry, liveness)) return { ...plan, kind: 'need-liveness' };
  let changed = false;
  const orphan = clearDeadHolders(entry, liveness);
  if (orphan) {
    const failure = orphanFailure(orphan, ref.sessionKey);
    plan.events.push(failure.event);
    pushOutbox(entry, { id: randomUUID(), sessionId: orphan.run.sessionId, records: [failure.record as Record<string, unknown>] });
    changed = true;
  }
  if (entry.activeRun) return finish(plan, entry, changed, now);
  if (entry.queueOwner && !isThisProcess(entry.queueOwner)) return finish(plan, entry, changed, now);
  if (!hasRunner) {
    if (entry.queueOwner) {
      delete entry.queueOwner;
      changed = true;
    }
    return finish(plan, entry, changed, now);
  }

  const pending = entry.pendingReset;
  if (pending) {
    const oldWaiting = queueOf(entry).some((item) => item.sessionId === entry.sessionId);
    if (pending.expireOld || !oldWaiting) {
      plan.rotation = { previousSessionId: entry.sessionId, previousSessionFile: entry.sessionFile as string | undefined, reason: pending.reason, model: pending.model };
      entry.sessionId = pending.newSessionId;
      entry.sessionFile = pending.newSessionFile;
      entry.sessionStartedAt = now;
      clearInstanceUsage(entry);
      if (pending.model) entry.model = entry.modelOverride = pending.model;
      delete entry.pendingReset;
      changed = true;
    }
  }
  const queue = queueOf(entry);
  const { keep, expired } = splitByInstance(queue, entry.sessionId, entry.pendingReset?.newSessionId);
  for (const item of expired) plan.events.push(expiredEventOf(item, entry.sessionId));
  if (expired.length > 0) {
    setQueue(entry, keep);
    changed = true;
  }
  const outbox = peekOutbox(entry);
  plan.records = outbox.records;
  plan.outboxIds = outbox.ids;
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

function finish(plan: DrainPlan, entry: QueuedEntry, changed: boolean, now: number): DrainPlan {
  if (changed) entry.updatedAt = now;
  return plan;
}

type DrainOutcome = { kind: 'stop' | 'done' } | { kind: 'turn'; shape: DrainTurn['shape'] } | { kind: 'wait'; waitMs: number };

/** One drain step: plan in the store, then the side effects (events, rotation, records, the turn). */
async function drainOnce(ctx: EngineContext, runtime: QueueRuntime, ref: SessionRef, afterOverflow: boolean): Promise<DrainOutcome> {
  const spec = runnerFor(ctx, ref.agentId);
  const liveness: Liveness = new Map();
  let plan: DrainPlan | undefined;
  for (let attempt = 0; attempt < 4; attempt++) {
    const now = ctx.clock.now();
    const nowWall = systemClock.now();
    plan = await updateStore(ctx, ref.location, (store) => planDrain(store, ref, liveness, spec !== undefined, now, nowWall, afterOverflow));
    if (plan.kind !== 'need-liveness') break;
    const store = await readSessionStore(ref.location.storePath);
    await learnLiveness(ctx, ref.location, [store[ref.sessionKey] as QueuedEntry | undefined], liveness);
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

  if (plan.kind === 'turn' && plan.turn && spec) {
    // The run reads the outbox itself once it holds the session lock (nothing is appended twice).
    await executeTurn(ctx, runtime, buildTurn(ctx, ref, plan.turn, sessionId, transcript, spec, preRecords));
    return { kind: 'turn', shape: plan.turn.shape };
  }
  preRecords.push(...plan.records);
  if (preRecords.length > 0) {
    const outboxIds = plan.outboxIds;
    try {
      // In a store transaction, like every append of an idle session's transcript; the notes
      // leave the outbox in the same sessions.json write that follows their fsync.
      await transactRetryingBusy(ctx, location, async (store, tx) => {
        await appendInStore(ctx, tx, { file: transcript, sessionKey: ref.sessionKey, sessionId, agentId: ref.agentId }, preRecords);
        const entry = store[ref.sessionKey] as QueuedEntry | undefined;
        if (entry !== undefined && outboxIds.length > 0 && dropOutbox(entry, outboxIds)) entry.updatedAt = ctx.clock.now();
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
  const base = { ref, sessionId, transcript, runId: turn.runId, lane: turn.lane, spec, items: turn.items, recheck: turn.recheck, deliveryContext: head.deliveryContext };
  if (turn.shape === 'overflow') {
    const summary = head.summaries ?? [];
    return {
      ...base,
      shape: 'overflow',
      overflow: { dropped: head.dropped ?? summary.length, summary },
      startRecords: [...preRecords, { type: 'queue_overflow', runId: head.runId, dropped: head.dropped ?? summary.length, summary, text: head.text }],
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
    return { ...base, shape: 'collect', startRecords: [...preRecords, { type: 'message', message: record }], messages: [message] };
  }
  return { ...base, shape: 'single', startRecords: [...preRecords, recordOfItem(head)], messages: [runMessageOf(head)] };
}

// ---------------------------------------------------------------------------------------------
// Taking over after a crash or restart

/**
 * Finds sessions whose queue nobody alive drains — their run's process died (SIGKILL, crash) or
 * an `ingest --no-wait` left them — and starts draining them here. Returns how many it took.
 */
export async function resumeOrphanedQueues(ctx: EngineContext): Promise<number> {
  const runtime = queueRuntimeFor(ctx);
  if (runtime.noWait) return 0;
  let resumed = 0;
  for (const agentId of knownAgentIds(ctx)) {
    if (runnerFor(ctx, agentId) === undefined) continue;
    const location = storeFor(ctx, agentId);
    let store: SessionStore;
    try {
      store = await readSessionStore(location.storePath);
    } catch {
      continue; // a damaged store is reported by the ingest itself
    }
    const candidates: [string, QueuedEntry][] = [];
    for (const [key, value] of Object.entries(store)) {
      const entry = value as QueuedEntry;
      if (entry.activeRun || queueOf(entry).length > 0 || entry.pendingReset || (Array.isArray(entry.outbox) && entry.outbox.length > 0)) candidates.push([key, entry]);
    }
    if (candidates.length === 0) continue;
    const liveness: Liveness = new Map();
    await learnLiveness(ctx, location, candidates.map(([, entry]) => entry), liveness);
    for (const [sessionKey, entry] of candidates) {
      const runDead = entry.activeRun !== undefined && runAlive(entry.activeRun, liveness) === false;
      const ownerGone = entry.queueOwner === undefined || ownerAlive(entry.queueOwner, liveness) === false;
      if (runDead || (entry.activeRun === undefined && ownerGone)) {
        runtime.scheduleDrain({ location, agentId, sessionKey }, 0);
        resumed += 1;
      }
    }
  }
  return resumed;
}

export interface QueueOptions {
  /** Record and admit only: no run starts in this process (idle work waits in the queue). */
  noWait?: boolean;
  /** Where run and queue events go (reply, dropped, expired, run_failed, overflow, run_started, run_ended). */
  sink?: (event: QueueEvent) => void;
}

/** Sets how this process's queue runtime behaves; call before the first ingest. */
export function configureQueue(ctx: EngineContext, options: QueueOptions): QueueRuntime {
  const runtime = queueRuntimeFor(ctx);
  if (options.noWait !== undefined) runtime.noWait = options.noWait;
  if (options.sink !== undefined) runtime.setSink(options.sink);
  return runtime;
}

/** Resolves when the runs this process started, and the drains they led to, are all over. */
export function waitForQueueWork(ctx: EngineContext): Promise<void> {
  return queueRuntimeFor(ctx).idle();
}
