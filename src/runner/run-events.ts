// The event side of a run handle, shared by external and built-in runners: buffers events until
// the one consumer reads them, and guarantees exactly one `end`, always last.

import { SwitchboardError } from '../core/index.js';
import type { RunEndEvent, RunEvent } from './types.js';

/**
 * Back-pressure for a producer that can pause (a child's pipes): told `true` once `highWater`
 * events wait unread, `false` once the reader has taken them down to half of that.
 */
export interface RunEventsPressure {
  highWater: number;
  onPressure: (full: boolean) => void;
}

export class RunEvents implements AsyncIterable<RunEvent> {
  readonly ended: Promise<RunEndEvent>;
  private full = false;
  private readonly buffer: RunEvent[] = [];
  private head = 0;
  private waiting: ((result: IteratorResult<RunEvent>) => void) | undefined;
  private closed = false;
  private detached = false;
  private iterated = false;
  private resolveEnded!: (end: RunEndEvent) => void;
  private endEvent: RunEndEvent | undefined;

  constructor(private readonly pressure?: RunEventsPressure) {
    this.ended = new Promise((resolve) => {
      this.resolveEnded = resolve;
    });
  }

  get isEnded(): boolean {
    return this.endEvent !== undefined;
  }

  /** Queues an event; ignored once the run has ended. */
  emit(event: Exclude<RunEvent, RunEndEvent>): void {
    if (this.endEvent === undefined) this.push(event);
  }

  /** Queues the end event (first call wins) and closes the stream. */
  end(event: RunEndEvent): void {
    if (this.endEvent !== undefined) return;
    this.endEvent = event;
    this.push(event);
    this.closed = true;
    this.resolveEnded(event);
  }

  [Symbol.asyncIterator](): AsyncIterator<RunEvent> {
    if (this.iterated) {
      throw new SwitchboardError('INTERNAL', 'a run handle can be iterated only once');
    }
    this.iterated = true;
    return {
      next: () => this.next(),
      return: async () => {
        // The consumer left early: drop what is buffered and stop buffering more.
        this.detached = true;
        this.buffer.length = 0;
        this.head = 0;
        this.relieve();
        return { done: true, value: undefined };
      },
    };
  }

  private push(event: RunEvent): void {
    if (this.detached) return;
    if (this.waiting !== undefined) {
      const resolve = this.waiting;
      this.waiting = undefined;
      resolve({ done: false, value: event });
      return;
    }
    this.buffer.push(event);
    if (!this.full && this.pressure !== undefined && this.buffer.length - this.head >= this.pressure.highWater) {
      this.full = true;
      this.pressure.onPressure(true);
    }
  }

  private relieve(): void {
    if (!this.full) return;
    this.full = false;
    this.pressure?.onPressure(false);
  }

  private next(): Promise<IteratorResult<RunEvent>> {
    if (this.head < this.buffer.length) {
      const value = this.buffer[this.head++];
      if (this.head === this.buffer.length) {
        this.buffer.length = 0;
        this.head = 0;
      }
      if (this.full && this.buffer.length - this.head <= this.pressure!.highWater / 2) this.relieve();
      return Promise.resolve({ done: false, value });
    }
    if (this.closed || this.detached) return Promise.resolve({ done: true, value: undefined });
    if (this.waiting !== undefined) {
      return Promise.reject(new SwitchboardError('INTERNAL', 'run events: next() called again before the previous one settled'));
    }
    return new Promise((resolve) => {
      this.waiting = resolve;
    });
  }
}
