// Where `switchboard top` gets its data: a running server (status, queue.list, subscribe) or the
// store itself (the engine's queue functions); locks and lane slots are read from the state dir.

import path from 'node:path';
import { SwitchboardError, isSwitchboardError, type Clock } from '../../core/index.js';
import {
  abortSession,
  cancelQueued,
  thisCanceller,
  laneCapacity,
  laneDir,
  listQueue,
  type AbortOutcome,
  type CancelOutcome,
  type EngineContext,
  type QueueListing,
} from '../../engine/index.js';
import type { LaneName } from '../../policy/index.js';
import { connectClient, type Push, type SwitchboardClient } from '../../server/index.js';
import { listLocks, mayTakeOver, type LockInfo } from '../../store/index.js';
import { eventFromPush, type SourceKind, type TopEvent, type TopLane, type TopLock, type TopQueued, type TopRun } from './snapshot.js';

/** One reading of a source: everything of a snapshot but the event history. */
export interface SourceReading {
  sourceLabel: string;
  stateDir: string;
  active: TopRun[];
  lanes: TopLane[];
  queued: TopQueued[];
  locks: TopLock[];
}

export interface TopSource {
  readonly kind: SourceKind;
  read(): Promise<SourceReading>;
  /** Events pushed since the last call (oldest first); the store source has none. */
  takeEvents(): TopEvent[];
  /** Called when something was pushed between two reads. */
  onPush(listener: () => void): void;
  /** Removes one queued item; resolves with a line for the status bar. */
  cancel(runId: string): Promise<string>;
  /** Cancels a session's queued items, then aborts its active run; resolves with a line for the status bar. */
  abort(sessionKey: string): Promise<string>;
  close(): Promise<void>;
}

const LANES: LaneName[] = ['main', 'cron'];

function relativeToState(stateDir: string, file: string): string {
  const relative = path.relative(stateDir, file);
  return relative === '' || relative.startsWith('..') || path.isAbsolute(relative) ? file : relative;
}

function lockState(lock: LockInfo): string {
  return [lock.stale ? 'stale' : '', lock.overHeld ? 'over-held' : '', lock.holderAlive === false ? 'holder-dead' : ''].filter(Boolean).join(',') || 'held';
}

/** Every lock under the state dir, and the lanes' occupancy counted from their slot locks. */
export async function readLocksAndLanes(engine: EngineContext): Promise<{ locks: TopLock[]; lanes: TopLane[] }> {
  const found = await listLocks(engine.stateDir, { staleMs: engine.config.session?.writeLock?.staleMs });
  const locks: TopLock[] = found.map((lock) => ({
    path: relativeToState(engine.stateDir, lock.lockPath),
    pid: lock.owner?.pid ?? null,
    hostname: lock.owner?.hostname ?? null,
    sessionKey: lock.owner?.sessionKey ?? null,
    ageMs: lock.ageMs,
    maxHoldMs: lock.owner?.maxHoldMs ?? null,
    state: lockState(lock),
  }));
  const lanes = LANES.map((lane) => {
    const dir = path.resolve(laneDir(engine.stateDir, lane)) + path.sep;
    // A slot the next run may take over (its holder died, is past its max hold, or is stale and
    // not known alive) is free; a stopped holder's is not.
    const used = found.filter((lock) => lock.lockPath.startsWith(dir) && !mayTakeOver(lock, 'stale')).length;
    return { lane, used, capacity: laneCapacity(engine, lane) };
  });
  return { locks, lanes };
}

/** The queue listing (of the engine or of `queue.list`) as the snapshot's rows. */
export function rowsOfListing(listing: QueueListing): { active: TopRun[]; queued: TopQueued[] } {
  const active: TopRun[] = listing.active.map((run) => ({
    runId: run.runId,
    sessionKey: run.sessionKey,
    agentId: run.agentId,
    lane: run.lane,
    startedAt: run.startedAt,
    pid: run.pid,
    hostname: run.hostname,
    state: run.alive === false ? 'holder-dead' : run.abortRequested ? 'aborting' : 'running',
    incognito: run.incognito === true,
  }));
  const queued: TopQueued[] = listing.items.map((item) => ({
    runId: item.runId,
    sessionKey: item.sessionKey,
    agentId: item.agentId,
    mode: item.mode,
    kind: item.kind,
    state: item.state,
    requester: item.requester,
    owner: item.owner ?? null,
    enqueuedAt: item.enqueuedAt,
    position: item.position,
    incognito: item.incognito === true,
  }));
  return { active, queued };
}

/** What top's c and a record as the reason (the process is top's own). */
const TOP_REQUEST = { reason: 'switchboard top' };

export function cancelMessage(outcome: CancelOutcome): string {
  return `cancelled ${outcome.cancelled.runId} (${outcome.cancelled.sessionKey})`;
}

export function abortMessage(outcome: AbortOutcome): string {
  const run = outcome.aborted === null ? 'no active run' : `run ${outcome.aborted} asked to abort`;
  return `aborted ${outcome.sessionKey}: ${outcome.cancelled.length} queued item(s) cancelled, ${run}`;
}

// ---------------------------------------------------------------------------------------------
// the store

/** Reads the store directly, as `switchboard queue` and `switchboard locks` do. */
export class StoreSource implements TopSource {
  readonly kind = 'store' as const;

  constructor(private readonly engine: EngineContext) {}

  async read(): Promise<SourceReading> {
    const [listing, { locks, lanes }] = await Promise.all([listQueue(this.engine), readLocksAndLanes(this.engine)]);
    return {
      sourceLabel: `store ${this.engine.stateDir}`,
      stateDir: this.engine.stateDir,
      ...rowsOfListing(listing),
      lanes,
      locks,
    };
  }

  takeEvents(): TopEvent[] {
    return [];
  }

  onPush(): void {
    // nothing is pushed: the feed compares readings instead
  }

  async cancel(runId: string): Promise<string> {
    return cancelMessage(await cancelQueued(this.engine, runId, TOP_REQUEST));
  }

  async abort(sessionKey: string): Promise<string> {
    return abortMessage(await abortSession(this.engine, sessionKey, TOP_REQUEST));
  }

  async close(): Promise<void> {}
}

// ---------------------------------------------------------------------------------------------
// a running server

/** What `top` needs of the server's `status` answer. */
export interface ServerStatus {
  pid: number;
  stateDir: string;
  config: string | null;
  stores: { agentId: string; path: string }[];
  uptimeMs: number;
  clients: number;
  activeRuns: number;
}

/** Builds the engine context for the store-side reads, given the server's state dir and config. */
export type EngineForServer = (status: ServerStatus) => Promise<EngineContext>;

/** How long a server may take to answer before top shows the store instead (it is then seen as gone). */
const ANSWER_TIMEOUT_MS = 5_000;

function answerWithin<T>(socketPath: string, work: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new SwitchboardError('UNAVAILABLE', `the server at ${socketPath} did not answer within ${ANSWER_TIMEOUT_MS / 1000} s`)),
      ANSWER_TIMEOUT_MS,
    );
  });
  return Promise.race([work, late]).finally(() => clearTimeout(timer));
}

/** Talks to `switchboard serve`: one connection, subscribed to every session. */
export class ServerSource implements TopSource {
  readonly kind = 'server' as const;
  private pending: TopEvent[] = [];
  private readonly listeners: (() => void)[] = [];

  private constructor(
    private readonly client: SwitchboardClient,
    private readonly engine: EngineContext,
    private readonly clock: Clock,
  ) {
    client.onPush((push: Push) => {
      this.pending.push(eventFromPush(push, this.clock.now()));
      for (const listener of this.listeners) listener();
    });
  }

  /** Connects and subscribes; throws UNAVAILABLE when no server answers on the socket. */
  static async connect(socketPath: string, engineFor: EngineForServer, clock: Clock): Promise<ServerSource> {
    const client = await connectClient(socketPath);
    try {
      const status = await answerWithin(socketPath, client.request<ServerStatus>('status'));
      const engine = await engineFor(status);
      const source = new ServerSource(client, engine, clock);
      await answerWithin(socketPath, client.request('subscribe', {}));
      return source;
    } catch (err) {
      client.destroy(); // a server that does not answer would hold a graceful close forever
      throw err;
    }
  }

  get socketPath(): string {
    return this.client.socketPath;
  }

  async read(): Promise<SourceReading> {
    const [status, listing] = await answerWithin(
      this.client.socketPath,
      Promise.all([this.client.request<ServerStatus>('status'), this.client.request<QueueListing>('queue.list', {})]),
    );
    const { locks, lanes } = await readLocksAndLanes(this.engine);
    return {
      sourceLabel: `server pid ${status.pid} on ${this.client.socketPath} (${status.clients} client(s), ${status.activeRuns} run(s) in it)`,
      stateDir: status.stateDir,
      ...rowsOfListing(listing),
      lanes,
      locks,
    };
  }

  takeEvents(): TopEvent[] {
    const events = this.pending;
    this.pending = [];
    return events;
  }

  onPush(listener: () => void): void {
    this.listeners.push(listener);
  }

  async cancel(runId: string): Promise<string> {
    return cancelMessage(await this.client.request<CancelOutcome>('queue.cancel', { runId, ...TOP_REQUEST, by: thisCanceller() }));
  }

  async abort(sessionKey: string): Promise<string> {
    return abortMessage(await this.client.request<AbortOutcome>('queue.abort', { session: sessionKey, ...TOP_REQUEST, by: thisCanceller() }));
  }

  /** Cut, not drained: nothing top still waits for is worth waiting on a server that may hang. */
  close(): Promise<void> {
    this.client.destroy();
    return this.client.closed;
  }
}

/** True for the errors that mean "no server there (any more)": fall back to the store. */
export function meansNoServer(err: unknown): boolean {
  return isSwitchboardError(err, 'UNAVAILABLE') || isSwitchboardError(err, 'IO');
}
