// One turn of one session, run to its end: the session write lock (the session lane) is held for
// the whole run and a global lane slot while the runner works; runner events are recorded in
// order (what each writes, replies through sendPolicy: turn-writer.ts), parked steering is
// injected at boundaries.

import { randomUUID } from 'node:crypto';
import { toSwitchboardError } from '../core/index.js';
import { carriedOf, parkedPrefix, type CarriedMessage, type QueueItem } from '../policy/index.js';
import { startRun, type RunEndEvent, type RunHandle } from '../runner/index.js';
import { isInMemory, withLock, type LockHandle, type NewTranscriptEntry, type StoreLocation } from '../store/index.js';
import { sessionLockOptions, type EngineContext } from './context.js';
import { acquireLaneSlot, type LaneSlot } from './lanes.js';
import {
  droppedEventOf,
  isThisProcess,
  queueOf,
  recordOfItem,
  runFailedRecord,
  runMessageOf,
  sessionRefKey,
  setQueue,
  type QueueEvent,
  type QueuedEntry,
  type RunFailedEvent,
  type SessionRef,
} from './queue-state.js';
import { claimOf, commitClaim, commitSteer, giveBackClaim, recordKeyOfItem, recordedItems, releaseSession, releaseUnstarted, updateStore, type ClaimCommit } from './run-store.js';
import type { TurnSpec } from './turn-spec.js';
import { TurnWriter } from './turn-writer.js';

/** Runner events queued for recording before the reading of the runner waits for the writes. */
const RECORD_BACKLOG = 256;

/** A wait for a lane slot at least this long gives the session lock its max hold again (shorter ones need no write). */
const LANE_WAIT_RESTARTS_HOLD_MS = 1_000;

/** The abort reason of a run whose claim another process cleared (or took) while it was held. */
const TAKEN_OVER = 'the session was taken over';

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
  /** Records queued on `chain` since the reading last waited for it. */
  private unwritten = 0;
  private writer: TurnWriter | undefined;
  private finished = false;
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
    this.writer?.seeEntry(entry);
    if (entry.abortRequested === this.runId) this.abort('abort requested');
    else if (entry.activeRun?.runId !== this.runId || !isThisProcess(entry.activeRun)) this.abort(TAKEN_OVER);
    const unleased = parkedPrefix(queueOf(entry), this.turn.sessionId).some((item) => item.leasedBy !== this.runId);
    if (unleased && this.abortReason === undefined) void this.lease();
    // Before the run has its lock, the outbox is taken when it starts.
    if (this.writer !== undefined && Array.isArray(entry.outbox) && entry.outbox.length > 0) this.enqueue(() => this.writer!.flushOutbox());
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

  /** Set when the session no longer named this run's instance and claim once the lock was had. */
  superseded = false;
  /** Set when the run lost its claim before its runner started: the turn goes back to the queue, unreported. */
  givenBack = false;
  /** The session write lock the run holds (set by execute). */
  private lock: LockHandle | undefined;

  /** Runs the turn while holding the session write lock (handle). Never throws. */
  async execute(handle: LockHandle): Promise<void> {
    const turn = this.turn;
    this.lock = handle;
    this.writer = new TurnWriter(this.ctx, turn, handle, (event) => this.emit(event), (err) => this.abort(`transcript write failed: ${toSwitchboardError(err).message}`));
    const onLost = (): void => this.abort('the session write lock was lost');
    handle.signal.addEventListener('abort', onLost, { once: true });
    let end: RunEndEvent | undefined;
    let committed: Promise<unknown> | undefined;
    try {
      const pending = this.host.takePendingAbort(turn.runId);
      if (pending !== undefined) this.abort(pending);
      // The entry as it is now: parked items and abort requests that came before the run did.
      const { records: outbox, ids: outboxIds, entry, unreadable } = await this.writer.readOutbox();
      // Claimed in the store, then the lock waited for: whoever held it may have reset or deleted
      // the session meanwhile. Its file is then an archive's old name, and writing would make it
      // again as an orphan holding this turn: the turn is given back instead. Or, frozen past
      // the lock's max hold, the run was judged dead and its claim cleared: given back too,
      // unreported, for the takeover (givesBack).
      const claim = unreadable === true ? 'held' : claimOf(entry, turn.sessionId, turn.runId);
      if (claim !== 'held') {
        if (claim === 'lost' && turn.items.length > 0) this.givenBack = true;
        else this.superseded = true;
        this.finished = true;
        await this.leasing;
        return;
      }
      this.observe(entry);
      await this.leasing;
      // A turn taken over from a dead run: what of it is already recorded is not recorded again.
      // Items the dead run had claimed never reached a runner (claimed items leave the queue only
      // right before one starts), so they run now. Items it had leased for steering and recorded
      // were injected into its runner: they are not run a second time, the run is reported.
      const recordedBefore = turn.recheck === true ? await recordedItems(turn.transcript, turn.items) : new Set<string>();
      if (turn.items.some((item) => recordedBefore.has(recordKeyOfItem(item)) && item.orphanedFrom !== item.claimedBy)) {
        if (await this.writer.append(outbox)) committed = commitClaim(this.ctx, turn.ref, undefined, outboxIds);
        const dead = [...new Set(turn.items.map((item) => item.orphanedFrom).filter((id) => id !== undefined))].join(', ');
        this.orphaned = `run ${turn.runId} was abandoned after its messages were recorded: the process that ran it (run ${dead}) is gone; not run again`;
        end = { type: 'end', status: 'failed', exitCode: null, signal: null };
      } else {
        // Record first. The outbox leaves the entry as soon as it is appended (a crash in between
        // repeats a note, never loses one); the items leave the queue (commitClaim) only once a
        // lane slot is had, right before the runner starts: a crash before that leaves them
        // claimed, and the next owner runs them — never lost, and never run twice.
        const records = recordedBefore.size > 0 ? outbox : [...(turn.opening ?? []), ...outbox, ...turn.startRecords];
        const recorded = await this.writer.append(records);
        if (recorded && outboxIds.length > 0) committed = commitClaim(this.ctx, turn.ref, undefined, outboxIds);
        if (turn.shape === 'overflow' && turn.overflow && recordedBefore.size === 0) {
          this.emit({ type: 'overflow', runId: turn.runId, sessionKey: turn.ref.sessionKey, sessionId: turn.sessionId, reason: 'cap', dropped: turn.overflow.dropped, summary: turn.overflow.summary });
        }
        const claim = recorded && turn.items.length > 0 ? () => commitClaim(this.ctx, turn.ref, turn.runId) : undefined;
        const ran = await this.runOnLane(claim);
        if (ran === 'given-back') this.givenBack = true;
        else end = ran;
      }
    } catch (err) {
      end = { type: 'end', status: 'failed', exitCode: null, signal: null, error: { reason: 'internal', message: toSwitchboardError(err).message } };
    } finally {
      handle.signal.removeEventListener('abort', onLost);
    }
    await committed;
    await this.chain;
    if (end === undefined) {
      // Given back (executeTurn hands the claim to the takeover): nothing to report, nothing to release.
      this.finished = true;
      await this.leasing;
      return;
    }
    await this.finish(end);
  }

  /**
   * Whether a run stopped before its runner started gives its turn back instead of failing it:
   * when it was stopped because its claim was cleared — its process frozen past the lock's max
   * hold, and judged dead by another one, which left the claimed items for the queue's owner
   * (this process, alive). No runner saw the turn, so it is not reported; the takeover runs it.
   */
  private givesBack(): boolean {
    return this.abortReason === TAKEN_OVER && this.turn.items.length > 0;
  }

  /** LockHandle.restartMaxHold of the session lock; a lock already lost is left to its abort signal. */
  private restartLockHold(): void {
    try {
      this.lock?.restartMaxHold();
    } catch {
      // lost meanwhile (taken over, or its max hold passed): the lock's signal aborts the run
    }
  }

  /**
   * Waits for a lane slot (holding the session lock), takes the turn's items out of the queue
   * (`claim`: `failed` when that store write failed — then no runner starts, so a claimed item
   * always means one never did), runs the runner, releases the slot. `given-back` when the claim
   * was lost before the runner started (givesBack): no runner starts, nothing is reported.
   */
  private async runOnLane(claim?: () => Promise<ClaimCommit>): Promise<RunEndEvent | 'given-back'> {
    const turn = this.turn;
    const stopped = (): RunEndEvent | 'given-back' => {
      if (this.givesBack()) return 'given-back';
      const message = `run aborted before it started: ${this.abortReason ?? 'transcript write failed'}`;
      return { type: 'end', status: 'aborted', exitCode: null, signal: null, error: { reason: 'aborted', message } };
    };
    if (this.abortReason !== undefined || this.writer!.failed) return stopped();
    const incognito = isInMemory(turn.transcript);
    // The session lock's max hold is the run's timeout plus a grace: the wait for a slot, behind
    // other runs bounded by timeouts of their own, must not eat into it. Its clock starts again
    // while the run waits and once more when the slot is had; a frozen waiter, which cannot
    // restart it, loses the lock at its max hold, as any frozen holder does.
    const waitStarted = Date.now();
    const holdRestart = this.lock === undefined ? undefined : setInterval(() => this.restartLockHold(), Math.max(250, Math.floor(this.lock.owner.maxHoldMs / 3)));
    let slot: LaneSlot | null;
    try {
      slot = await acquireLaneSlot(this.ctx, turn.lane, {
        // Lane slots are files: an incognito run's holds one without naming itself.
        owner: incognito ? {} : { sessionKey: turn.ref.sessionKey, runId: turn.runId },
        runTimeoutMs: turn.spec.timeoutMs,
        staleMs: this.ctx.config.session?.writeLock?.staleMs,
        maxHoldMs: this.ctx.config.session?.writeLock?.maxHoldMs,
        shouldStop: () => this.abortReason !== undefined || this.writer!.failed,
      });
    } finally {
      clearInterval(holdRestart);
    }
    if (slot === null) return stopped();
    if (Date.now() - waitStarted >= LANE_WAIT_RESTARTS_HOLD_MS) this.restartLockHold();
    const onSlotLost = (): void => this.abort('the lane slot was lost');
    slot.signal.addEventListener('abort', onSlotLost, { once: true });
    try {
      const claimed = claim === undefined ? 'committed' : await claim();
      if (claimed === 'lost') {
        // Got the slot before it saw the takeover (its poll had not come yet): the same case.
        this.abort(TAKEN_OVER);
        return stopped();
      }
      if (claimed === 'failed') {
        return { type: 'end', status: 'failed', exitCode: null, signal: null, error: { reason: 'internal', message: 'could not take its messages out of the queue (sessions.json could not be written); not started' } };
      }
      this.emit({
        type: 'run_started',
        runId: turn.runId,
        sessionKey: turn.ref.sessionKey,
        sessionId: turn.sessionId,
        agentId: turn.ref.agentId,
        lane: turn.lane,
        messages: turn.shape === 'collect' ? turn.items.length : 1,
        ...(turn.shape === 'before-reset' ? { beforeReset: true } : {}),
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
      // If this process dies, whoever takes the session lock over stops the runner it left.
      if (handle.pid !== undefined) this.lock?.noteChild(handle.pid);
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
        const steer = this.steerAtBoundary(handle);
        if (steer !== undefined) this.enqueue(() => this.recordSteer(steer.items, steer.delivered, at));
      } else {
        this.enqueue(() => this.writer!.record(event, at));
        // Records are written in order behind the reading; past a backlog the reading waits for
        // them, so a runner flooding its output is slowed to the disk's pace (its pipes pause).
        if (++this.unwritten >= RECORD_BACKLOG) {
          await this.chain;
          this.unwritten = 0;
        }
      }
    }
    return end ?? (await handle.ended);
  }

  private steerAtBoundary(handle: RunHandle): { items: QueueItem[]; delivered: Promise<boolean> } | undefined {
    if (this.leased.length === 0 || !handle.canSteer || this.abortReason !== undefined) return undefined;
    const items = this.leased;
    const delivered = handle.steer(items.map(runMessageOf));
    if (delivered === false) return undefined;
    this.leased = [];
    for (const item of items) this.steeredIds.add(item.runId);
    this.carried.push(...items.map(carriedOf));
    return { items, delivered };
  }

  /**
   * The boundary's injection, recorded at that point (`at`): a steer record, then the messages —
   * and only once they are on disk are the items taken out of the queue (a crash in between
   * leaves them leased by a dead run: the next owner finds their records and reports them).
   * A steer line the runner's stdin refused reached nobody: the items are the run's leased ones
   * again, and become followups when it ends (the spec's "if the runner cannot steer").
   */
  private async recordSteer(items: QueueItem[], delivered: Promise<boolean>, at: number): Promise<void> {
    if (!(await delivered)) {
      const ids = new Set(items.map((item) => item.runId));
      for (const id of ids) this.steeredIds.delete(id);
      for (let i = this.carried.length - 1; i >= 0; i--) if (ids.has(this.carried[i]!.runId)) this.carried.splice(i, 1);
      this.leased = [...items, ...this.leased.filter((item) => !ids.has(item.runId))];
      return;
    }
    const timestamp = new Date(at).toISOString();
    const recorded = await this.writer!.append([
      { type: 'steer', timestamp, runId: this.turn.runId, items: items.map((item) => ({ runId: item.runId, messageId: item.messageId ?? null })) },
      ...items.map((item) => ({ ...recordOfItem(item), timestamp })),
    ]);
    // Not recorded (the run stops): the run's end still removes them (steeredIds) — the runner
    // has them, so they are not run a second time — and its run_failed names them.
    if (recorded) await commitSteer(this.ctx, this.turn.ref, this.turn.runId, items, [...this.carried]);
  }

  /** run_failed when it did not end `done`, then the session goes back to its queue. */
  private async finish(end: RunEndEvent): Promise<void> {
    const turn = this.turn;
    const writeFailure = this.writer?.failure;
    let failure: RunFailedEvent | undefined;
    const owed: NewTranscriptEntry[] = [];
    if (end.status !== 'done' || writeFailure !== undefined) {
      const status = end.status === 'done' ? 'failed' : end.status;
      const reason = this.orphaned !== undefined ? 'orphaned' : writeFailure !== undefined && end.status !== 'aborted' ? 'write' : (end.error?.reason ?? status);
      const message = this.orphaned ?? (writeFailure !== undefined ? toSwitchboardError(writeFailure).message : (end.error?.message ?? `run ended ${status}`));
      const messages = [...this.carried];
      failure = { type: 'run_failed', runId: turn.runId, sessionKey: turn.ref.sessionKey, sessionId: turn.sessionId, status, reason, message, messages };
      const record = runFailedRecord(turn.runId, status, reason, message, messages);
      // A run that lost its lock (max hold, a takeover) or its disk cannot append it: the outbox
      // takes it, under the store lock, for the session's next writer.
      if (this.writer !== undefined && !(await this.writer.append([record]))) owed.push(record);
    }
    this.finished = true;
    await this.leasing;
    if (this.writer !== undefined) await this.writer.flushOutbox();
    // Reported only once the store says the run is still this process's: one frozen past its
    // max hold was ended and reported by the process that took the session over, and says
    // nothing more (its writes are fenced by the lost lock, and the store is left alone).
    const { dropped, reason, cancelled, takenOver } = await releaseSession(this.ctx, turn.ref, turn.runId, this.steeredIds, owed);
    if (takenOver) return;
    if (failure !== undefined) this.emit(failure);
    for (const item of dropped) this.emit(droppedEventOf(item, reason));
    for (const event of cancelled) this.emit(event);
    this.emit({ type: 'run_ended', runId: turn.runId, sessionKey: turn.ref.sessionKey, sessionId: turn.sessionId, status: failure?.status ?? 'done' });
  }
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
    await withLock(turn.transcript, { ...sessionLockOptions(ctx, { sessionKey: turn.ref.sessionKey, runId: turn.runId }), runTimeoutMs: turn.spec.timeoutMs, startsRunner: true }, async (handle) => {
      entered = true;
      await run.execute(handle);
    });
    if (run.superseded) {
      await releaseUnstarted(ctx, turn.ref, unstartedOf(run), 'changed', 'the session was reset or removed while this run waited for its lock; nothing of it was written', (event) => host.emit(event));
    }
    // The drain this process runs next (after every turn) takes the claim over and runs the turn.
    if (run.givenBack) await giveBackClaim(ctx, turn.ref, turn.runId);
  } catch (err) {
    if (!entered) await lockFailed(ctx, host, run, err);
  } finally {
    host.unregister(run);
  }
}

async function lockFailed(ctx: EngineContext, host: RunHost, run: LocalRun, err: unknown): Promise<void> {
  host.suppressDrain(run.turn.ref);
  await releaseUnstarted(ctx, run.turn.ref, unstartedOf(run), 'lock', toSwitchboardError(err).message, (event) => host.emit(event));
}

function unstartedOf(run: LocalRun): { runId: string; sessionId: string; items: readonly QueueItem[]; carried: CarriedMessage[]; recorded: boolean } {
  const { turn } = run;
  // A turn ingest started has no records of its own to write: the batch recorded its message.
  return { runId: turn.runId, sessionId: turn.sessionId, items: turn.items, carried: run.carriedMessages(), recorded: turn.shape === 'start' };
}

/** A fresh id for items switchboard creates itself (the overflow summary). */
export function newRunId(): string {
  return randomUUID();
}
