// Group commit for the socket's `ingest` op: requests that arrive while a batch is being stored
// are combined into the next engine batch, so many clients cost one store update, not one each.

import { DEFAULT_MAX_BATCH_BYTES, lineChars, type NdjsonLine } from '../core/index.js';
import type { EngineContext, IngestEvent } from '../engine/index.js';

export type IngestFunction = (engine: EngineContext, lines: NdjsonLine[]) => Promise<IngestEvent[]>;

interface Waiting {
  engine: EngineContext;
  lines: NdjsonLine[];
  /** Characters of the request's lines (see DEFAULT_MAX_BATCH_BYTES). */
  bytes: number;
  resolve: (events: IngestEvent[]) => void;
  reject: (reason: unknown) => void;
}

/** Lines per combined batch: big enough to amortise, small enough to keep each answer prompt. */
const DEFAULT_MAX_BATCH_LINES = 5_000;

/**
 * Group commit across batches. Clients that were just answered usually send their next request
 * within a fraction of a millisecond, but the next batch would start at once with only what
 * arrived while the last one was stored. Under steady load the clients then split into two
 * halves that take turns, and every request waits for two batches, paying a whole batch's fixed
 * cost (lock, journal, fsyncs, registry) twice: with 50 clients, 25 requests per batch and a
 * median of 19 ms. So before the next batch the queue waits briefly for the requests of the batch
 * it just answered, until they have come again on top of those that were already waiting, for at
 * most a fifth of that batch's time and never over 2 ms (40–50 per batch, a median of 15 ms). A
 * lone client pays nothing: its next request ends the wait when it arrives. No wait when the
 * backlog already fills a batch, or when the last batch was so quick that the wait would be
 * under a millisecond (timers are no finer).
 */
const GATHER_SHARE_OF_LAST_BATCH = 0.2;
const MAX_GATHER_MS = 2;

export class IngestQueue {
  private waiting: Waiting[] = [];
  private running = false;
  /** Set by close(): why requests not yet handed to the engine are refused. */
  private refusal?: () => Error;
  private idleWaiters: (() => void)[] = [];
  /** While the queue gathers for the next batch: called on every arrival (and by close). */
  private gatherCheck?: () => void;

  constructor(
    private readonly ingest: IngestFunction,
    private readonly maxBatchLines = DEFAULT_MAX_BATCH_LINES,
    private readonly maxBatchBytes = DEFAULT_MAX_BATCH_BYTES,
  ) {}

  /** Batches handed to the engine so far (reported by `status`). */
  batches = 0;

  /** Lines waiting for the next batch (not counting the batch being stored). */
  get queued(): number {
    let count = 0;
    for (const item of this.waiting) count += item.lines.length;
    return count;
  }

  /**
   * Ingests one request's lines (each line non-blank, numbered as the request numbers them) and
   * resolves with exactly one event per line, in order, numbered back the request's way.
   */
  submit(engine: EngineContext, lines: NdjsonLine[]): Promise<IngestEvent[]> {
    if (lines.length === 0) return Promise.resolve([]);
    if (this.refusal) return Promise.reject(this.refusal());
    return new Promise((resolve, reject) => {
      let bytes = 0;
      for (const line of lines) bytes += lineChars(line);
      this.waiting.push({ engine, lines, bytes, resolve, reject });
      this.gatherCheck?.();
      if (!this.running) {
        this.running = true;
        // Let every request of this turn join the first batch.
        setImmediate(() => void this.drain());
      }
    });
  }

  private takeBatch(): Waiting[] {
    const first = this.waiting[0]!;
    let count = 0;
    let lines = 0;
    let bytes = 0;
    // One engine per batch (a reload in between starts a new batch), bounded in lines and bytes
    // (large messages from many clients become several batches); always at least one request.
    for (; count < this.waiting.length; count++) {
      const next = this.waiting[count]!;
      if (next.engine !== first.engine) break;
      if (count > 0 && (lines + next.lines.length > this.maxBatchLines || bytes + next.bytes > this.maxBatchBytes)) break;
      lines += next.lines.length;
      bytes += next.bytes;
    }
    return this.waiting.splice(0, count);
  }

  private async drain(): Promise<void> {
    for (;;) {
      if (this.waiting.length === 0) break;
      const batch = this.takeBatch();
      this.batches++;
      const startedAt = performance.now();
      await this.store(batch);
      // The requests that came in meanwhile are waiting; the batch's own clients are still to come.
      await this.gather(this.waiting.length + batch.length, performance.now() - startedAt);
    }
    this.running = false;
    const waiters = this.idleWaiters;
    this.idleWaiters = [];
    for (const wake of waiters) wake();
  }

  private backlogFillsBatch(): boolean {
    let lines = 0;
    let bytes = 0;
    for (const item of this.waiting) {
      lines += item.lines.length;
      bytes += item.bytes;
    }
    return lines >= this.maxBatchLines || bytes >= this.maxBatchBytes;
  }

  /** Waits (see GATHER_SHARE_OF_LAST_BATCH) until `requests` requests are waiting, or the time is up. */
  private gather(requests: number, lastBatchMs: number): Promise<void> {
    const limitMs = Math.min(MAX_GATHER_MS, lastBatchMs * GATHER_SHARE_OF_LAST_BATCH);
    if (this.waiting.length >= requests || this.refusal !== undefined || limitMs < 1 || this.backlogFillsBatch()) return Promise.resolve();
    return new Promise((resolve) => {
      const stop = (): void => {
        clearTimeout(timer);
        this.gatherCheck = undefined;
        resolve();
      };
      const timer = setTimeout(stop, limitMs);
      this.gatherCheck = () => {
        if (this.waiting.length >= requests || this.refusal !== undefined) stop();
      };
    });
  }

  /**
   * Stops taking work: requests still waiting for a batch (none of their lines handed to the
   * engine, so nothing of them stored) and any submitted later are rejected with `refusal()`. The
   * batch being stored is not cut short — its requests get their real events (see whenIdle).
   */
  close(refusal: () => Error): void {
    this.refusal = refusal;
    for (const item of this.waiting.splice(0)) item.reject(refusal());
    this.gatherCheck?.();
  }

  /** Settles once no batch is being stored. */
  whenIdle(): Promise<void> {
    if (!this.running) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  private async store(batch: Waiting[]): Promise<void> {
    // Renumber 1..n so the engine sees distinct lines; each event is mapped back by position.
    const combined: NdjsonLine[] = [];
    for (const item of batch) for (const line of item.lines) combined.push({ ...line, line: combined.length + 1 });
    let events: IngestEvent[];
    try {
      events = await this.ingest(batch[0]!.engine, combined);
      if (events.length !== combined.length) throw new Error(`the engine answered ${events.length} events for ${combined.length} lines`);
    } catch (err) {
      for (const item of batch) item.reject(err);
      return;
    }
    let next = 0;
    for (const item of batch) {
      item.resolve(item.lines.map((line) => renumber(events[next++]!, line.line)));
    }
  }
}

/** The event as the request numbered it: `line`, and the `line N: ` prefix the engine puts on error messages. */
function renumber(event: IngestEvent, line: number): IngestEvent {
  if (event.line === line) return event;
  if (event.type !== 'error') return { ...event, line };
  const prefix = `line ${event.line}: `;
  const message = event.message.startsWith(prefix) ? `line ${line}: ${event.message.slice(prefix.length)}` : event.message;
  return { ...event, line, message };
}
