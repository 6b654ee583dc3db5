// Group commit for the socket's `ingest` op: requests that arrive while a batch is being stored
// are combined into the next engine batch, so many clients cost one store update, not one each.

import type { NdjsonLine } from '../core/index.js';
import type { EngineContext, IngestEvent } from '../engine/index.js';

export type IngestFunction = (engine: EngineContext, lines: NdjsonLine[]) => Promise<IngestEvent[]>;

interface Waiting {
  engine: EngineContext;
  lines: NdjsonLine[];
  resolve: (events: IngestEvent[]) => void;
  reject: (reason: unknown) => void;
}

/** Lines per combined batch: big enough to amortise, small enough to keep each answer prompt. */
const DEFAULT_MAX_BATCH_LINES = 5_000;

export class IngestQueue {
  private waiting: Waiting[] = [];
  private running = false;

  constructor(
    private readonly ingest: IngestFunction,
    private readonly maxBatchLines = DEFAULT_MAX_BATCH_LINES,
  ) {}

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
    return new Promise((resolve, reject) => {
      this.waiting.push({ engine, lines, resolve, reject });
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
    // One engine per batch (a reload in between starts a new batch); always at least one request.
    while (count < this.waiting.length && this.waiting[count]!.engine === first.engine && (count === 0 || lines + this.waiting[count]!.lines.length <= this.maxBatchLines)) {
      lines += this.waiting[count]!.lines.length;
      count++;
    }
    return this.waiting.splice(0, count);
  }

  private async drain(): Promise<void> {
    while (this.waiting.length > 0) {
      const batch = this.takeBatch();
      await this.store(batch);
    }
    this.running = false;
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
