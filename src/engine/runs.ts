// One turn of one session, run to its end: the session write lock (the session lane) is held for
// the whole run and a global lane slot while the runner works; runner events are recorded in
// order, parked steering is injected at boundaries, replies pass sendPolicy and are mirrored.

import { randomUUID } from 'node:crypto';
import { toSwitchboardError } from '../core/index.js';
import { evaluateSendPolicy, parkedPrefix, unparkAll, type LaneName, type QueueDeliveryContext, type QueueItem } from '../policy/index.js';
import { startRun, type RunEndEvent, type RunEvent, type RunHandle, type RunMessage, type RunnerSpec } from '../runner/index.js';
import {
  appendEntries,
  isInMemory,
  readSessionStore,
  updateSessionStore,
  withLock,
  type LockHandle,
  type NewTranscriptEntry,
  type SessionStore,
  type StoreLocation,
  type TranscriptSessionInfo,
} from '../store/index.js';
import { sessionLockOptions, type EngineContext } from './context.js';
import { acquireLaneSlot, type LaneSlot } from './lanes.js';
import {
  droppedEventOf,
  isThisProcess,
  ownerRecord,
  queueOf,
  recordOfItem,
  runFailedRecord,
  runMessageOf,
  sessionRefKey,
  setQueue,
  takeOutbox,
  type QueueEvent,
  type QueuedEntry,
  type RunFailedEvent,
  type SessionRef,
} from './queue-state.js';

/** What the process-wide queue runtime offers a run. */
export interface RunHost {
  emit(event: QueueEvent): void;
  register(run: LocalRun): void;
  unregister(run: LocalRun): void;
  /** An abort asked for before the run existed (same batch, same process). */
  takePendingAbort(runId: string): string | undefined;
  /** After a failure to get the session lock: stop draining this session in this process. */
  suppressDrain(ref: SessionRef): void;
}

export interface TurnSpec {
  ref: SessionRef;
  sessionId: string;
  transcript: string;
  runId: string;
  lane: LaneName;
  spec: RunnerSpec;
  /** What the runner gets. */
  messages: RunMessage[];
  /** Written under the run's lock before the runner starts (the consumed queue items). */
  startRecords: NewTranscriptEntry[];
  /** The queue items this turn consumed (put back if the session lock cannot be had). */
  items: QueueItem[];
  deliveryContext?: QueueDeliveryContext;
  shape: 'start' | 'single' | 'collect' | 'overflow';
  /** overflow turns: what the overflow event reports. */
  overflow?: { dropped: number; summary: string[] };
}

/** A store update with the configured store-lock wait. */
export function updateStore<T>(ctx: EngineContext, location: StoreLocation, mutate: (store: SessionStore) => T): Promise<T> {
  return updateSessionStore(location.storePath, mutate, { lock: { acquireTimeoutMs: ctx.config.session?.writeLock?.acquireTimeoutMs } });
}

/** Appends under the run's lock; the first failure (lock lost, disk) stops every later write. */
class TurnWriter {
  failure: unknown;

  constructor(
    private readonly file: string,
    private readonly handle: LockHandle,
    private readonly session: TranscriptSessionInfo,
    private readonly ctx: EngineContext,
    private readonly onFailure: (err: unknown) => void,
  ) {}

  get failed(): boolean {
    return this.failure !== undefined;
  }

  async append(entries: readonly NewTranscriptEntry[]): Promise<boolean> {
    if (this.failed) return false;
    if (entries.length === 0) return true;
    try {
      await appendEntries(this.file, entries, { handle: this.handle, session: this.session, clock: this.ctx.clock });
      return true;
    } catch (err) {
      this.failure = err;
      this.onFailure(err);
      return false;
    }
  }
}

export class LocalRun {
  readonly key: string;
  handle: RunHandle | undefined;
  abortReason: string | undefined;
  /** Bumped by every in-process view of the entry; a poll that started before is stale. */
  generation = 0;
  /** Parked items this run has leased in the store: the only ones it may inject. */
  private leased: QueueItem[] = [];
  private readonly steeredIds = new Set<string>();
  private leasing: Promise<void> | undefined;
  private leaseAgain = false;
  private chain: Promise<void> = Promise.resolve();
  private writer: TurnWriter | undefined;
  private lastAssistant: string | undefined;
  private finished = false;

  constructor(
    private readonly ctx: EngineContext,
    private readonly host: RunHost,
    readonly turn: TurnSpec,
  ) {
    this.key = sessionRefKey(turn.ref);
  }

  get runId(): string {
    return this.turn.runId;
  }

  get location(): StoreLocation {
    return this.turn.ref.location;
  }

  abort(reason: string): void {
    this.abortReason ??= reason;
    this.handle?.abort(reason);
  }

  /**
   * The newest view of the session entry. From an in-process update it is authoritative; from a
   * poll (generationAtRead given) it is dropped when an in-process view arrived meanwhile.
   */
  observe(entry: QueuedEntry | undefined, generationAtRead?: number): void {
    if (this.finished) return;
    if (generationAtRead !== undefined && generationAtRead !== this.generation) return;
    if (generationAtRead === undefined) this.generation += 1;
    if (entry === undefined) return;
    if (entry.abortRequested === this.runId) this.abort('abort requested');
    else if (entry.activeRun?.runId !== this.runId) this.abort('the session was taken over');
    const unleased = parkedPrefix(queueOf(entry), this.turn.sessionId).some((item) => item.leasedBy !== this.runId);
    if (unleased && this.abortReason === undefined) void this.lease();
    // Before the run has its lock, the outbox is taken when it starts.
    if (this.writer !== undefined && Array.isArray(entry.outbox) && entry.outbox.length > 0) this.enqueue(() => this.flushOutbox());
  }

  /**
   * Takes the parked items at the head of the queue for this run (store update): from then on
   * nothing else drops or cancels them, so an injection at the boundary is never also reported
   * as dropped. One lease at a time; a request meanwhile runs another afterwards.
   */
  lease(): Promise<void> {
    if (this.leasing !== undefined) {
      this.leaseAgain = true;
      return this.leasing;
    }
    this.leasing = (async () => {
      do {
        this.leaseAgain = false;
        try {
          const leased = await updateStore(this.ctx, this.location, (store) => {
            const entry = store[this.turn.ref.sessionKey] as QueuedEntry | undefined;
            if (!entry || entry.activeRun?.runId !== this.runId || entry.abortRequested === this.runId) return [];
            const queue = queueOf(entry);
            const prefix = new Set(parkedPrefix(queue, this.turn.sessionId).map((item) => item.runId));
            let changed = false;
            const next = queue.map((item) => {
              if (!prefix.has(item.runId) || item.leasedBy !== undefined) return item;
              changed = true;
              return { ...item, leasedBy: this.runId };
            });
            if (changed) setQueue(entry, next);
            return next.filter((item) => item.leasedBy === this.runId);
          });
          this.leased = leased.filter((item) => !this.steeredIds.has(item.runId));
        } catch {
          // Not leased now: the next poll tries again; unleased items simply wait for a later boundary.
        }
      } while (this.leaseAgain && !this.finished);
      this.leasing = undefined;
    })();
    return this.leasing;
  }

  private enqueue(task: () => Promise<void>): void {
    this.chain = this.chain.then(task).catch((err: unknown) => {
      // A write task never throws (TurnWriter catches); anything else is a bug worth stopping for.
      this.abort(`internal error: ${toSwitchboardError(err).message}`);
    });
  }

  private emit(event: QueueEvent): void {
    this.host.emit(event);
  }

  /** Runs the turn while holding the session write lock (handle). Never throws. */
  async execute(handle: LockHandle): Promise<void> {
    const turn = this.turn;
    const session = { sessionId: turn.sessionId, sessionKey: turn.ref.sessionKey, agentId: turn.ref.agentId };
    this.writer = new TurnWriter(turn.transcript, handle, session, this.ctx, (err) => this.abort(`transcript write failed: ${toSwitchboardError(err).message}`));
    const onLost = (): void => this.abort('the session write lock was lost');
    handle.signal.addEventListener('abort', onLost, { once: true });
    let end: RunEndEvent | undefined;
    try {
      const pending = this.host.takePendingAbort(turn.runId);
      if (pending !== undefined) this.abort(pending);
      // The entry as it is now: parked items and abort requests that came before the run did.
      const { records: outbox, entry } = await this.takeOutboxRecords();
      this.observe(entry);
      await this.leasing;
      await this.writer.append([...outbox, ...turn.startRecords]);
      if (turn.shape === 'overflow' && turn.overflow) {
        this.emit({ type: 'overflow', runId: turn.runId, sessionKey: turn.ref.sessionKey, sessionId: turn.sessionId, reason: 'cap', dropped: turn.overflow.dropped, summary: turn.overflow.summary });
      }
      end = await this.runOnLane();
    } catch (err) {
      end = { type: 'end', status: 'failed', exitCode: null, signal: null, error: { reason: 'internal', message: toSwitchboardError(err).message } };
    } finally {
      handle.signal.removeEventListener('abort', onLost);
    }
    await this.chain;
    await this.finish(end);
  }

  /** Waits for a lane slot (holding the session lock), runs the runner, releases the slot. */
  private async runOnLane(): Promise<RunEndEvent> {
    const turn = this.turn;
    const stopped = (): RunEndEvent => ({
      type: 'end',
      status: 'aborted',
      exitCode: null,
      signal: null,
      error: { reason: 'aborted', message: `run aborted before it started: ${this.abortReason ?? 'transcript write failed'}` },
    });
    if (this.abortReason !== undefined || this.writer!.failed) return stopped();
    const incognito = isInMemory(turn.transcript);
    const slot: LaneSlot | null = await acquireLaneSlot(this.ctx, turn.lane, {
      // Lane slots are files: an incognito run's holds one without naming itself.
      owner: incognito ? {} : { sessionKey: turn.ref.sessionKey, runId: turn.runId },
      runTimeoutMs: turn.spec.timeoutMs,
      staleMs: this.ctx.config.session?.writeLock?.staleMs,
      shouldStop: () => this.abortReason !== undefined || this.writer!.failed,
    });
    if (slot === null) return stopped();
    const onSlotLost = (): void => this.abort('the lane slot was lost');
    slot.signal.addEventListener('abort', onSlotLost, { once: true });
    try {
      this.emit({
        type: 'run_started',
        runId: turn.runId,
        sessionKey: turn.ref.sessionKey,
        sessionId: turn.sessionId,
        agentId: turn.ref.agentId,
        lane: turn.lane,
        messages: turn.shape === 'collect' ? turn.items.length : 1,
      });
      const handle = startRun(turn.spec, {
        runId: turn.runId,
        sessionKey: turn.ref.sessionKey,
        sessionId: turn.sessionId,
        agentId: turn.ref.agentId,
        transcriptPath: incognito ? '' : turn.transcript, // an incognito transcript is not a file
        messages: turn.messages,
      });
      this.handle = handle;
      if (this.abortReason !== undefined) handle.abort(this.abortReason);
      return await this.consume(handle);
    } finally {
      slot.signal.removeEventListener('abort', onSlotLost);
      await slot.release();
    }
  }

  /**
   * Takes the runner's events as soon as they are emitted (decisions that must be made at the
   * boundary itself — steering — happen here, synchronously) and queues their recording in order.
   */
  private async consume(handle: RunHandle): Promise<RunEndEvent> {
    let end: RunEndEvent | undefined;
    for await (const event of handle) {
      // Records carry the time their event happened, not the later time their write completed.
      const at = this.ctx.clock.now();
      if (event.type === 'end') {
        end = event;
      } else if (event.type === 'boundary') {
        const steered = this.steerAtBoundary(handle);
        if (steered.length > 0) this.enqueue(() => this.recordSteer(steered, at));
      } else {
        this.enqueue(() => this.record(event, at));
      }
    }
    return end ?? (await handle.ended);
  }

  private steerAtBoundary(handle: RunHandle): QueueItem[] {
    if (this.leased.length === 0 || !handle.canSteer || this.abortReason !== undefined) return [];
    const items = this.leased;
    if (!handle.steer(items.map(runMessageOf))) return [];
    this.leased = [];
    for (const item of items) this.steeredIds.add(item.runId);
    return items;
  }

  private async record(event: Exclude<RunEvent, RunEndEvent | { type: 'boundary' }>, at: number): Promise<void> {
    const runId = this.turn.runId;
    const timestamp = new Date(at).toISOString();
    switch (event.type) {
      case 'tool_call':
        await this.writer!.append([{ type: 'tool_call', timestamp, runId, toolCallId: event.id, name: event.name, args: event.args ?? null }]);
        return;
      case 'tool_result': {
        const record: NewTranscriptEntry = { type: 'tool_result', timestamp, runId, toolCallId: event.id, output: event.output ?? null };
        if (event.isError !== undefined) record.isError = event.isError;
        await this.writer!.append([record]);
        return;
      }
      case 'assistant':
        this.lastAssistant = event.text;
        await this.writer!.append([assistantRecord(event.text, at, { runId })]);
        return;
      case 'reply':
        await this.deliver(event.text, at);
        return;
      default:
        return; // hello, stderr: nothing to record
    }
  }

  /** The boundary's injection, recorded at that point (`at`): a steer record, then the messages. */
  private async recordSteer(items: QueueItem[], at: number): Promise<void> {
    const runIds = new Set(items.map((item) => item.runId));
    try {
      await updateStore(this.ctx, this.location, (store) => {
        const entry = store[this.turn.ref.sessionKey] as QueuedEntry | undefined;
        if (!entry) return;
        const queue = queueOf(entry);
        const rest = queue.filter((item) => !runIds.has(item.runId));
        if (rest.length !== queue.length) {
          setQueue(entry, rest);
          entry.updatedAt = this.ctx.clock.now();
        }
      });
    } catch {
      // The runner already has them; if the store cannot be updated now, the end of the run
      // removes them (steeredIds) so that they are not run a second time.
    }
    const timestamp = new Date(at).toISOString();
    await this.writer!.append([
      { type: 'steer', timestamp, runId: this.turn.runId, items: items.map((item) => ({ runId: item.runId, messageId: item.messageId ?? null })) },
      ...items.map((item) => ({ ...recordOfItem(item), timestamp })),
    ]);
  }

  /** sendPolicy, the reply record, the delivery mirror, then the reply event. */
  /** `at`: when the runner produced the reply (its record's time; the mirror is stamped when delivered). */
  private async deliver(text: string, at: number): Promise<void> {
    const turn = this.turn;
    let entry: QueuedEntry | undefined;
    try {
      entry = (await readSessionStore(this.location.storePath))[turn.ref.sessionKey] as QueuedEntry | undefined;
    } catch {
      entry = undefined;
    }
    const deliveryContext = (turn.deliveryContext ?? entry?.deliveryContext ?? null) as Record<string, unknown> | null;
    const policy = evaluateSendPolicy(
      {
        sessionKey: turn.ref.sessionKey,
        channel: entry?.channel ?? (deliveryContext?.channel as string | undefined) ?? null,
        chatType: entry?.chatType ?? null,
        entryOverride: entry?.sendPolicy ?? null,
      },
      this.ctx.config.session?.sendPolicy ?? null,
    );
    const delivered = policy.decision === 'allow';
    const now = this.ctx.clock.now();
    const records: NewTranscriptEntry[] = [];
    if (!delivered) {
      records.push(assistantRecord(text, at, { runId: turn.runId, reply: true, delivered: false, policy: { decision: policy.decision, rule: policy.rule, source: policy.source } }));
    } else {
      if (text !== this.lastAssistant) records.push(assistantRecord(text, at, { runId: turn.runId, reply: true }));
      records.push(assistantRecord(text, now, { runId: turn.runId, provider: 'switchboard', model: 'delivery-mirror', deliveryContext }));
    }
    if (!(await this.writer!.append(records))) return;
    this.emit({
      type: 'reply',
      runId: turn.runId,
      sessionKey: turn.ref.sessionKey,
      sessionId: turn.sessionId,
      text,
      deliveryContext,
      delivered,
      policy: { decision: policy.decision, rule: policy.rule },
    });
  }

  /** Takes the outbox's records (the caller appends them) and returns a copy of the entry. */
  private async takeOutboxRecords(): Promise<{ records: NewTranscriptEntry[]; entry: QueuedEntry | undefined }> {
    try {
      return await updateStore(this.ctx, this.location, (store) => {
        const entry = store[this.turn.ref.sessionKey] as QueuedEntry | undefined;
        const records = entry && Array.isArray(entry.outbox) && entry.outbox.length > 0 ? takeOutbox(entry) : [];
        return { records, entry: entry === undefined ? undefined : structuredClone(entry) };
      });
    } catch {
      return { records: [], entry: undefined }; // they stay in the outbox for the next holder
    }
  }

  private async flushOutbox(): Promise<void> {
    const { records } = await this.takeOutboxRecords();
    await this.writer!.append(records);
  }

  /** run_failed when it did not end `done`, then the session goes back to its queue. */
  private async finish(end: RunEndEvent): Promise<void> {
    const turn = this.turn;
    const writeFailure = this.writer?.failure;
    let failure: RunFailedEvent | undefined;
    if (end.status !== 'done' || writeFailure !== undefined) {
      const status = end.status === 'done' ? 'failed' : end.status;
      const reason = writeFailure !== undefined && end.status !== 'aborted' ? 'write' : (end.error?.reason ?? status);
      const message = writeFailure !== undefined ? toSwitchboardError(writeFailure).message : (end.error?.message ?? `run ended ${status}`);
      failure = { type: 'run_failed', runId: turn.runId, sessionKey: turn.ref.sessionKey, sessionId: turn.sessionId, status, reason, message };
      await this.writer?.append([runFailedRecord(turn.runId, status, reason, message)]);
      this.emit(failure);
    }
    this.finished = true;
    await this.leasing;
    const { outbox, dropped } = await releaseSession(this.ctx, turn.ref, turn.runId, this.steeredIds);
    await this.writer?.append(outbox);
    for (const item of dropped) this.emit(droppedEventOf(item, 'stopped'));
    this.emit({ type: 'run_ended', runId: turn.runId, sessionKey: turn.ref.sessionKey, sessionId: turn.sessionId, status: failure?.status ?? 'done' });
  }
}

function assistantRecord(text: string, at: number, extra: Record<string, unknown>): NewTranscriptEntry {
  return { type: 'message', timestamp: new Date(at).toISOString(), message: { role: 'assistant', content: [{ type: 'text', text }], timestamp: at, ...extra } };
}

/**
 * The end of a run in the store: activeRun and its abort request go, parked items that were not
 * injected become followups, the queue stays owned by this process while anything waits.
 * Retried a few times: a session left marked active would stay busy until this process exits.
 */
async function releaseSession(
  ctx: EngineContext,
  ref: SessionRef,
  runId: string,
  steered: ReadonlySet<string>,
): Promise<{ outbox: NewTranscriptEntry[]; dropped: QueueItem[] }> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await updateStore(ctx, ref.location, (store) => {
        const entry = store[ref.sessionKey] as QueuedEntry | undefined;
        if (!entry) return { outbox: [], dropped: [] };
        const now = ctx.clock.now();
        const stopped = entry.stopRequested === runId;
        if (entry.activeRun?.runId === runId) delete entry.activeRun;
        if (entry.abortRequested === runId) delete entry.abortRequested;
        if (stopped) delete entry.stopRequested;
        const remaining = queueOf(entry).filter((item) => !steered.has(item.runId));
        // A stopped run takes what it had leased with it; otherwise they become followups.
        const dropped = stopped ? remaining.filter((item) => item.leasedBy === runId) : [];
        const queue = unparkAll(remaining.filter((item) => !(stopped && item.leasedBy === runId)));
        setQueue(entry, queue);
        const outbox = takeOutbox(entry);
        if (!entry.activeRun) {
          if (queue.length === 0 && !entry.pendingReset) {
            if (!entry.queueOwner || isThisProcess(entry.queueOwner)) delete entry.queueOwner;
          } else {
            entry.queueOwner = ownerRecord(now);
          }
        }
        entry.updatedAt = now;
        return { outbox, dropped };
      });
    } catch (err) {
      if (attempt >= 4) {
        process.emitWarning(`switchboard: could not release session ${ref.sessionKey} after run ${runId}: ${toSwitchboardError(err).message}`);
        return { outbox: [], dropped: [] };
      }
      await new Promise((resolve) => setTimeout(resolve, 200 * (attempt + 1)));
    }
  }
}

/**
 * Runs one turn to its end, holding the session write lock throughout. If the lock cannot be had
 * (a holder that does not let go), the turn's queue items go back to the head of the queue, the
 * session is left for a later process, and a run_failed event says why. Never throws.
 */
export async function executeTurn(ctx: EngineContext, host: RunHost, turn: TurnSpec): Promise<void> {
  const run = new LocalRun(ctx, host, turn);
  host.register(run);
  let entered = false;
  try {
    await withLock(turn.transcript, { ...sessionLockOptions(ctx, { sessionKey: turn.ref.sessionKey, runId: turn.runId }), runTimeoutMs: turn.spec.timeoutMs }, async (handle) => {
      entered = true;
      await run.execute(handle);
    });
  } catch (err) {
    if (!entered) await lockFailed(ctx, host, turn, err);
  } finally {
    host.unregister(run);
  }
}

async function lockFailed(ctx: EngineContext, host: RunHost, turn: TurnSpec, err: unknown): Promise<void> {
  const error = toSwitchboardError(err);
  host.suppressDrain(turn.ref);
  try {
    await updateStore(ctx, turn.ref.location, (store) => {
      const entry = store[turn.ref.sessionKey] as QueuedEntry | undefined;
      if (!entry) return;
      if (entry.activeRun?.runId === turn.runId) delete entry.activeRun;
      if (entry.abortRequested === turn.runId) delete entry.abortRequested;
      setQueue(entry, [...turn.items, ...queueOf(entry)]);
      if (entry.queueOwner && isThisProcess(entry.queueOwner)) delete entry.queueOwner;
      entry.updatedAt = ctx.clock.now();
    });
  } catch {
    // Nothing more to do here; the run_failed event below still reports it.
  }
  const requeued = turn.items.length > 0 ? `; its ${turn.items.length} queued message(s) stay queued for a later ingest` : '';
  host.emit({
    type: 'run_failed',
    runId: turn.runId,
    sessionKey: turn.ref.sessionKey,
    sessionId: turn.sessionId,
    status: 'failed',
    reason: 'lock',
    message: `${error.message}${requeued}`,
  });
}

/** A fresh id for items switchboard creates itself (the overflow summary). */
export function newRunId(): string {
  return randomUUID();
}
