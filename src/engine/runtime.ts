// The queue machinery of one process: runs in flight, sessions whose queue it drains (quiet
// windows, deferred rotations, rebind checks), a poll of the store for requests from other
// processes, orphaned queues taken over, and the event sink run events are written to.

import { systemClock, timerDelay, toSwitchboardError } from '../core/index.js';

import { isUsableEntry, readSessionStore, storeFileVersion, transcriptSharing, type SessionStore } from '../store/index.js';

import { knownAgentIds, storeFor, type EngineContext } from './context.js';
import { learnLiveness, ownerAlive, queueOf, runAlive, runnerFor, sessionRefKey, type Liveness, type QueueEvent, type QueuedEntry, type SessionRef } from './queue-state.js';
import { LocalRun, executeTurn, type RunHost } from './runs.js';
import type { TurnSpec } from './turn-spec.js';
import { drainOnce } from './drain.js';

const POLL_INTERVAL_MS = 250;
/** How long a poll may go without reading a store whose file did not change. */
const UNCHANGED_REREAD_MS = 2_000;
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
  /** Cleared by stopStartingQueuedTurns(): drains still write notes and expiries, but start no queued turn. */
  startsQueuedTurns = true;
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
  /** storeFileVersion of each store as the last poll read it, and when. */
  private readonly polled = new Map<string, { version: string; at: number }>();

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

  /**
   * A graceful stop (serve's SIGTERM): runs in flight may finish, but nothing waiting in a queue
   * starts — it would only be cut off when the grace period ends. Each queue is given up (owner
   * cleared) at its next drain, and stays on disk for the next ingest or serve.
   */
  stopStartingQueuedTurns(): void {
    this.startsQueuedTurns = false;
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
    // A longer wait wakes early and plans again: the drain waits on until the item is due.
    state.timer = setTimeout(() => void this.runDrain(ref, key, current), timerDelay(delay));
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
      state.timer = setTimeout(() => void this.runDrain(ref, key, state), timerDelay(next.waitMs));
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
        // Unchanged since the last poll: the runs have seen it (a run that began since read its
        // entry under its lock). Parsing a large registry four times a second was most of what
        // an idle run cost. Still read every few seconds, so that what a run retries on seeing
        // its entry (a lease that failed) is retried even when nothing else writes.
        const version = storeFileVersion(storePath);
        const last = this.polled.get(storePath);
        if (version !== undefined && last?.version === version && Date.now() - last.at < UNCHANGED_REREAD_MS) continue;
        const generations = runs.map((run) => run.generation);
        let store: SessionStore;
        try {
          store = await readSessionStore(storePath);
        } catch {
          continue; // a damaged store is reported by the commands that need it
        }
        if (version !== undefined) this.polled.set(storePath, { version, at: Date.now() });
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
    const sharing = transcriptSharing(store);
    for (const [key, value] of Object.entries(store)) {
      const entry = value as QueuedEntry;
      const owed = (Array.isArray(entry.outbox) && entry.outbox.length > 0) || (Array.isArray(entry.cancelledItems) && entry.cancelledItems.length > 0);
      if (!(entry.activeRun || queueOf(entry).length > 0 || entry.pendingReset || owed)) continue;
      // An entry of the wrong shape (or sharing its transcript) is never drained: nothing it names can be trusted.
      if (isUsableEntry(store, key, location.sessionsDir, sharing)) candidates.push([key, entry]);
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
