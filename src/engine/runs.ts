// One turn of one session, run to its end: the session write lock (the session lane) is held for
// the whole run and a global lane slot while the runner works; runner events are recorded in
// order, parked steering is injected at boundaries, replies pass sendPolicy and are mirrored.

import { randomUUID } from 'node:crypto';
import { toSwitchboardError } from '../core/index.js';
import { applyUsageReport, carriedOf, evaluateSendPolicy, parkedPrefix, type UsageReport, type CarriedMessage, type LaneName, type QueueDeliveryContext, type QueueItem } from '../policy/index.js';
import { startRun, type RunEndEvent, type RunEvent, type RunHandle, type RunMessage, type RunnerSpec } from '../runner/index.js';
import {
  DELIVERY_MIRROR_MODEL,
  appendEntries,
  isInMemory,
  readSessionStore,
  withLock,
  type LockHandle,
  type NewTranscriptEntry,
  type StoreLocation,
  type TranscriptSessionInfo,
  transcriptOnlyMarks,
} from '../store/index.js';
import { sessionLockOptions, type EngineContext } from './context.js';
import { acquireLaneSlot, type LaneSlot } from './lanes.js';
import {
  droppedEventOf,
  queueOf,
  recordOfItem,
  runFailedRecord,
  runMessageOf,
  sessionRefKey,
  setQueue,
  peekOutbox,
  type QueueEvent,
  type QueuedEntry,
  type RunFailedEvent,
  type SessionRef,
} from './queue-state.js';
import { commitClaim, commitSteer, recordedRunIds, releaseSession, releaseUnstarted, updateStore } from './run-store.js';

export { updateStore };

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
  /** The queue items this turn claimed (left queued if the session lock cannot be had). */
  items: QueueItem[];
  /** Taken over from a run that died: its items may be recorded already (checked first). */
  recheck?: boolean;
  deliveryContext?: QueueDeliveryContext;
  shape: 'start' | 'single' | 'collect' | 'overflow';
  /** overflow turns: what the overflow event reports. */
  overflow?: { dropped: number; summary: string[] };
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
  /** What the run carries: its turn's messages, then each one steered into it. */
  private readonly carried: CarriedMessage[];
  private leasing: Promise<void> | undefined;
  private leaseAgain = false;
  private chain: Promise<void> = Promise.resolve();
  private writer: TurnWriter | undefined;
  private lastAssistant: string | undefined;
  private finished = false;
  /** Outbox items this run has taken to append (ids): never appended twice by it. */
  private readonly outboxAppended = new Set<string>();
  /** Set when the turn was taken over from a dead run that had recorded it: the run_failed message. */
  private orphaned: string | undefined;

  constructor(
    private readonly ctx: EngineContext,
    private readonly host: RunHost,
    readonly turn: TurnSpec,
  ) {
    this.key = sessionRefKey(turn.ref);
    // A run started by ingest carries the one message it was started for (same runId).
    const first = turn.messages[0];
    this.carried =
      turn.items.length > 0 ? turn.items.map(carriedOf) : [first?.messageId === undefined ? { runId: turn.runId } : { runId: turn.runId, messageId: first.messageId }];
  }

  get runId(): string {
    return this.turn.runId;
  }

  get location(): StoreLocation {
    return this.turn.ref.location;
  }

  /** The messages this run carries so far (what a run_failed of it names). */
  carriedMessages(): CarriedMessage[] {
    return [...this.carried];
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
    let committed: Promise<void> | undefined;
    try {
      const pending = this.host.takePendingAbort(turn.runId);
      if (pending !== undefined) this.abort(pending);
      // The entry as it is now: parked items and abort requests that came before the run did.
      const { records: outbox, ids: outboxIds, entry } = await this.readOutbox();
      this.observe(entry);
      await this.leasing;
      // A turn taken over from a dead run whose records made it to disk is not run a second
      // time: the records stay as they are and the run is reported, naming what it carried.
      if (turn.recheck === true && (await recordedRunIds(turn.transcript, turn.items)).size > 0) {
        if (await this.writer.append(outbox)) committed = commitClaim(this.ctx, turn.ref, undefined, outboxIds);
        const dead = [...new Set(turn.items.map((item) => item.orphanedFrom).filter((id) => id !== undefined))].join(', ');
        this.orphaned = `run ${turn.runId} was abandoned after its messages were recorded: the process that ran it (run ${dead}) is gone; not run again`;
        end = { type: 'end', status: 'failed', exitCode: null, signal: null };
      } else {
        // Record first, then take the items out of the queue: a crash in between leaves them
        // claimed, never lost. The runner need not wait for that store write (it never throws).
        const recorded = await this.writer.append([...outbox, ...turn.startRecords]);
        if (recorded && (turn.items.length > 0 || outboxIds.length > 0)) committed = commitClaim(this.ctx, turn.ref, turn.runId, outboxIds);
        if (turn.shape === 'overflow' && turn.overflow) {
          this.emit({ type: 'overflow', runId: turn.runId, sessionKey: turn.ref.sessionKey, sessionId: turn.sessionId, reason: 'cap', dropped: turn.overflow.dropped, summary: turn.overflow.summary });
        }
        end = await this.runOnLane();
      }
    } catch (err) {
      end = { type: 'end', status: 'failed', exitCode: null, signal: null, error: { reason: 'internal', message: toSwitchboardError(err).message } };
    } finally {
      handle.signal.removeEventListener('abort', onLost);
    }
    await committed;
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
        deliveryContext: turn.deliveryContext ?? null,
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
    this.carried.push(...items.map(carriedOf));
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
      case 'usage':
        await this.recordUsage(event.usage, timestamp);
        return;
      default:
        return; // hello, stderr: nothing to record
    }
  }

  /**
   * A usage report: recorded first (a `custom` record, customType `usage`), then copied onto the
   * entry (model, token counts) if the entry still names this run's instance.
   */
  private async recordUsage(usage: UsageReport, timestamp: string): Promise<void> {
    const turn = this.turn;
    if (!(await this.writer!.append([{ type: 'custom', timestamp, customType: 'usage', data: { runId: turn.runId, ...usage } }]))) return;
    try {
      await updateStore(this.ctx, this.location, (store) => {
        const entry = store[turn.ref.sessionKey];
        if (entry !== undefined && entry.sessionId === turn.sessionId && applyUsageReport(entry, usage)) entry.updatedAt = this.ctx.clock.now();
      });
    } catch {
      // The record is on disk; the entry's copy is only a summary, refreshed by the next report.
    }
  }

  /**
   * The boundary's injection, recorded at that point (`at`): a steer record, then the messages —
   * and only once they are on disk are the items taken out of the queue (a crash in between
   * leaves them leased by a dead run: the next owner finds their records and reports them).
   */
  private async recordSteer(items: QueueItem[], at: number): Promise<void> {
    const timestamp = new Date(at).toISOString();
    const recorded = await this.writer!.append([
      { type: 'steer', timestamp, runId: this.turn.runId, items: items.map((item) => ({ runId: item.runId, messageId: item.messageId ?? null })) },
      ...items.map((item) => ({ ...recordOfItem(item), timestamp })),
    ]);
    // Not recorded (the run stops): the run's end still removes them (steeredIds) — the runner
    // has them, so they are not run a second time — and its run_failed names them.
    if (recorded) await commitSteer(this.ctx, this.turn.ref, this.turn.runId, items, [...this.carried]);
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
        // The channel the reply goes out on: a rule denying Slack stops a Slack reply of a linked session.
        channel: (deliveryContext?.channel as string | undefined) ?? entry?.channel ?? null,
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
      records.push(assistantRecord(text, now, { runId: turn.runId, ...transcriptOnlyMarks(DELIVERY_MIRROR_MODEL), deliveryContext }));
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

  /**
   * The entry as stored now and its outbox's records (left in the outbox until appended), but
   * none this run has appended already: their removal from the store may still be under way.
   */
  private async readOutbox(): Promise<{ records: NewTranscriptEntry[]; ids: string[]; entry: QueuedEntry | undefined }> {
    try {
      const entry = (await readSessionStore(this.location.storePath))[this.turn.ref.sessionKey] as QueuedEntry | undefined;
      const fresh = entry && Array.isArray(entry.outbox) ? { ...entry, outbox: entry.outbox.filter((item) => !this.outboxAppended.has(item.id)) } : entry;
      const peeked = peekOutbox(fresh);
      for (const id of peeked.ids) this.outboxAppended.add(id);
      return { ...peeked, entry };
    } catch {
      return { records: [], ids: [], entry: undefined }; // they stay in the outbox for the next holder
    }
  }

  /** Appends what waits in the outbox, then takes it out of the outbox (in that order). */
  private async flushOutbox(): Promise<void> {
    const { records, ids } = await this.readOutbox();
    if (records.length > 0 && (await this.writer!.append(records))) await commitClaim(this.ctx, this.turn.ref, undefined, ids);
  }

  /** run_failed when it did not end `done`, then the session goes back to its queue. */
  private async finish(end: RunEndEvent): Promise<void> {
    const turn = this.turn;
    const writeFailure = this.writer?.failure;
    let failure: RunFailedEvent | undefined;
    if (end.status !== 'done' || writeFailure !== undefined) {
      const status = end.status === 'done' ? 'failed' : end.status;
      const reason = this.orphaned !== undefined ? 'orphaned' : writeFailure !== undefined && end.status !== 'aborted' ? 'write' : (end.error?.reason ?? status);
      const message = this.orphaned ?? (writeFailure !== undefined ? toSwitchboardError(writeFailure).message : (end.error?.message ?? `run ended ${status}`));
      const messages = [...this.carried];
      failure = { type: 'run_failed', runId: turn.runId, sessionKey: turn.ref.sessionKey, sessionId: turn.sessionId, status, reason, message, messages };
      await this.writer?.append([runFailedRecord(turn.runId, status, reason, message, messages)]);
      this.emit(failure);
    }
    this.finished = true;
    await this.leasing;
    if (this.writer !== undefined) await this.flushOutbox();
    const { dropped, reason } = await releaseSession(this.ctx, turn.ref, turn.runId, this.steeredIds);
    for (const item of dropped) this.emit(droppedEventOf(item, reason));
    this.emit({ type: 'run_ended', runId: turn.runId, sessionKey: turn.ref.sessionKey, sessionId: turn.sessionId, status: failure?.status ?? 'done' });
  }
}

function assistantRecord(text: string, at: number, extra: Record<string, unknown>): NewTranscriptEntry {
  return { type: 'message', timestamp: new Date(at).toISOString(), message: { role: 'assistant', content: [{ type: 'text', text }], timestamp: at, ...extra } };
}

/**
 * Runs one turn to its end, holding the session write lock throughout. If the lock cannot be had
 * (a holder that does not let go), the turn's claimed items stay queued (unclaimed), the session
 * is left for a later process, and a run_failed event says why. Never throws.
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
    if (!entered) await lockFailed(ctx, host, run, err);
  } finally {
    host.unregister(run);
  }
}

async function lockFailed(ctx: EngineContext, host: RunHost, run: LocalRun, err: unknown): Promise<void> {
  host.suppressDrain(run.turn.ref);
  const { turn } = run;
  await releaseUnstarted(ctx, turn.ref, { runId: turn.runId, sessionId: turn.sessionId, items: turn.items, carried: run.carriedMessages() }, toSwitchboardError(err), (event) => host.emit(event));
}

/** A fresh id for items switchboard creates itself (the overflow summary). */
export function newRunId(): string {
  return randomUUID();
}
