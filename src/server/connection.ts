// One client on the socket: splits its bytes into request lines, answers them strictly in order,
// and applies back-pressure so a client that does not read can only ever fill its own buffers.

import type net from 'node:net';
import { LineSplitter, type NdjsonLine } from '../core/index.js';
import { encodeLine, parseRequestLine, type Push, type Request, type Response } from './protocol.js';

export interface ConnectionLimits {
  /** Longest request line accepted (bytes). */
  maxRequestBytes: number;
  /** Above this many bytes waiting to be sent, the client's requests wait and reading stops. */
  highWaterBytes: number;
  /** A push that would take the unsent bytes over this drops the client (a final error is sent). */
  maxQueuedBytes: number;
  /** Requests read but not yet answered before reading from the client pauses… */
  maxPendingRequests: number;
  /** …or bytes of them (a few huge lines must not add up to gigabytes). */
  maxPendingBytes: number;
  /**
   * Bytes read and not yet answered, all clients together: past it, a client that already has
   * something waiting is not read from until the total falls (many clients, each within its own
   * limit, must not add up to gigabytes either). A client with nothing waiting is still read, so
   * every client keeps being served.
   */
  maxPendingBytesTotal: number;
}

export interface ConnectionHost {
  readonly limits: ConnectionLimits;
  /** Runs one request to its answer; never throws. */
  handle(request: Request, client: ClientConnection): Promise<Response>;
  /** A line that was not a valid request (answered with an error by the connection itself). */
  rejected(response: Response): void;
  /** Bytes read and not yet answered changed by `delta` for one client (maxPendingBytesTotal). */
  notePending(delta: number): void;
  /** Whether all clients together hold maxPendingBytesTotal or more. */
  readonly overPendingBudget: boolean;
  closed(client: ClientConnection): void;
}

const NO_BYTES = Buffer.alloc(0);

/** How long a dropped or closing client may take to read its final lines before it is cut off. */
const CLOSE_TIMEOUT_MS = 10_000;

/** Memory a read line holds (its text as UTF-16 is about twice this; the cap is a rough bound). */
function sizeOf(line: NdjsonLine): number {
  return 'text' in line ? line.text.length : 0;
}

export class ClientConnection {
  /** `all` = every session; a set = those session keys; null = not subscribed. */
  subscription: 'all' | Set<string> | null = null;
  readonly connectedAt = Date.now();
  /** When its last complete request line arrived (its connection time before the first). */
  private lastRequestAt = this.connectedAt;
  private readonly splitter: LineSplitter;
  private readonly queue: NdjsonLine[] = [];
  private queuedBytes = 0;
  private pumping = false;
  private readEnded = false;
  private frozen = false;
  private dropped = false;
  private isClosed = false;
  private drainWaiters: (() => void)[] = [];
  private readonly closedPromise: Promise<void>;
  private markClosed!: () => void;
  private idleWaiters: (() => void)[] = [];
  /** A request is in host.handle() (its answer not written yet). */
  private handling = false;
  private answeredWaiters: (() => void)[] = [];

  constructor(
    readonly socket: net.Socket,
    readonly id: number,
    private readonly host: ConnectionHost,
  ) {
    this.splitter = new LineSplitter(host.limits.maxRequestBytes);
    this.closedPromise = new Promise((resolve) => (this.markClosed = resolve));
    socket.on('data', (chunk: Buffer) => {
      this.enqueue(this.splitter.push(chunk));
    });
    socket.on('end', () => {
      this.readEnded = true;
      this.enqueue(this.splitter.end());
    });
    socket.on('drain', () => this.wakeDrain());
    // 'close' always follows an error; nothing else to do with it here.
    socket.on('error', () => undefined);
    socket.on('close', () => {
      this.isClosed = true;
      this.forgetQueue();
      this.wakeDrain();
      this.wakeIdle();
      this.markClosed();
      this.host.closed(this);
    });
  }

  get closed(): boolean {
    return this.isClosed;
  }

  /** Requests read and not yet answered (the one running included). */
  get pending(): number {
    return this.queue.length + (this.pumping ? 1 : 0);
  }

  /**
   * When it last asked for something, if it may be let go to make room for a new client: nothing
   * of it is waiting or being answered and it has not subscribed to events (null otherwise). A
   * client that only connects, or trickles a line byte by byte, is idle however long it stays.
   */
  idleSince(): number | null {
    if (this.isClosed || this.dropped || this.pending > 0 || this.handling || this.subscription !== null) return null;
    return this.lastRequestAt;
  }

  private enqueue(lines: NdjsonLine[]): void {
    if (this.dropped) return;
    if (lines.length > 0) this.lastRequestAt = Date.now();
    let bytes = 0;
    for (const line of lines) {
      this.queue.push(line);
      bytes += sizeOf(line);
    }
    this.queuedBytes += bytes;
    this.host.notePending(bytes);
    this.updateReading();
    void this.pump();
  }

  /** Drops what waits unanswered (the client is gone or let go), and its share of the server's budget. */
  private forgetQueue(): void {
    this.queue.length = 0;
    this.host.notePending(-this.queuedBytes);
    this.queuedBytes = 0;
  }

  /**
   * Reading pauses while answers pile up or requests wait — its own, or all clients' together
   * past maxPendingBytesTotal (the server calls this again once they are below); it never
   * resumes once frozen.
   */
  updateReading(): void {
    if (this.isClosed) return;
    const { maxPendingRequests, maxPendingBytes, highWaterBytes } = this.host.limits;
    const pause =
      this.frozen ||
      this.dropped ||
      this.queue.length >= maxPendingRequests ||
      this.queuedBytes >= maxPendingBytes ||
      (this.queuedBytes > 0 && this.host.overPendingBudget) ||
      this.socket.writableLength > highWaterBytes;
    if (pause && !this.socket.isPaused()) this.socket.pause();
    else if (!pause && this.socket.isPaused()) this.socket.resume();
  }

  private async pump(): Promise<void> {
    if (this.pumping) return;
    this.pumping = true;
    try {
      while (!this.isClosed && !this.dropped && this.queue.length > 0) {
        // Back-pressure: the next answer waits until the client has read the previous ones.
        if (this.socket.writableLength > this.host.limits.highWaterBytes) {
          await this.waitForDrain();
          continue;
        }
        const item = this.queue.shift()!;
        this.queuedBytes -= sizeOf(item);
        this.host.notePending(-sizeOf(item));
        this.updateReading();
        const parsed = parseRequestLine(item);
        if ('blank' in parsed) continue;
        let response: Response;
        if ('answer' in parsed) {
          response = parsed.answer;
          this.host.rejected(response);
        } else {
          this.handling = true;
          response = await this.host.handle(parsed.request, this);
        }
        this.write(encodeLine(response));
        this.wakeAnswered();
      }
    } finally {
      this.pumping = false;
    }
    this.updateReading();
    // A client that is done sending gets its answers, then our end too — unless it subscribed:
    // `printf '{"id":1,"op":"subscribe"}\n' | socat - UNIX-CONNECT:…` keeps receiving events.
    if (this.readEnded && this.queue.length === 0 && this.subscription === null && !this.isClosed && !this.dropped) this.socket.end();
    this.wakeIdle();
  }

  private write(line: string): void {
    if (this.isClosed || this.socket.destroyed || this.socket.writableEnded) return;
    this.socket.write(line);
  }

  private waitForDrain(): Promise<void> {
    if (this.isClosed) return Promise.resolve();
    return new Promise((resolve) => this.drainWaiters.push(resolve));
  }

  private wakeDrain(): void {
    const waiters = this.drainWaiters;
    this.drainWaiters = [];
    for (const wake of waiters) wake();
    this.updateReading();
  }

  private wakeIdle(): void {
    if (this.pending > 0 && !this.isClosed) return;
    const waiters = this.idleWaiters;
    this.idleWaiters = [];
    for (const wake of waiters) wake();
  }

  private wakeAnswered(): void {
    this.handling = false;
    const waiters = this.answeredWaiters;
    this.answeredWaiters = [];
    for (const wake of waiters) wake();
  }

  /**
   * Resolves once the request being handled (if any) has its answer written — even when the client
   * is gone meanwhile, so a stop can wait for work already started to finish.
   */
  whenAnswered(): Promise<void> {
    if (!this.handling) return Promise.resolve();
    return new Promise((resolve) => this.answeredWaiters.push(resolve));
  }

  /** Resolves once every request read so far has been answered (or the client is gone). */
  whenIdle(): Promise<void> {
    if (this.pending === 0 || this.isClosed || this.dropped) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  whenClosed(): Promise<void> {
    return this.closedPromise;
  }

  /** Stops reading for good: what was read is still answered, nothing new is taken. */
  freeze(): void {
    this.frozen = true;
    this.updateReading();
  }

  /** Queues a server-initiated line (`push`, or the same already encoded); a client too slow to take it is dropped. */
  push(push: Push, encoded?: string): void {
    if (this.isClosed || this.dropped) return;
    const line = encoded ?? encodeLine(push);
    if (this.socket.writableLength + line.length > this.host.limits.maxQueuedBytes) {
      this.drop(`client too slow: over ${this.host.limits.maxQueuedBytes} bytes of events waiting to be read; disconnecting`);
      return;
    }
    this.write(line);
    this.updateReading();
  }

  /**
   * A client that has stopped sending but stays connected (a subscriber: the connection is kept
   * half-open for its events) is found gone only by a write, and events may never come: a client
   * that subscribed, got an error and exited kept its socket here for good. Under a fault that
   * fails every batch (disk full, EMFILE) nothing is pushed, so such sockets piled up to the fd
   * limit and the server could never accept again. A write of no bytes fails with EPIPE once the
   * peer has closed (the socket then closes) and sends nothing to one that is still there.
   */
  checkPeer(): void {
    if (this.readEnded && !this.isClosed && !this.socket.destroyed && !this.socket.writableEnded) this.socket.write(NO_BYTES);
  }

  /** Disconnects the client with a final error line (id null); its unanswered requests are dropped. */
  drop(message: string): void {
    if (this.isClosed || this.dropped) return;
    this.dropped = true;
    this.forgetQueue();
    this.write(encodeLine({ id: null, error: { code: 'UNAVAILABLE', message } }));
    this.closeSoon();
    // No longer served: it gets no more events and no longer counts as a client.
    this.host.closed(this);
  }

  /** Answers every request still waiting with `answer(request id)`, then closes after `push`. */
  close(finalPush?: Push, answerWaiting?: (item: NdjsonLine) => Response | null): void {
    if (this.isClosed) return;
    if (answerWaiting) {
      for (const item of this.queue) {
        const response = answerWaiting(item);
        if (response) this.write(encodeLine(response));
      }
      this.forgetQueue();
    }
    if (finalPush) this.write(encodeLine(finalPush));
    this.dropped = true;
    this.closeSoon();
  }

  private closeSoon(): void {
    this.socket.end();
    // A client that never reads would keep the connection half-open forever.
    setTimeout(() => this.socket.destroy(), CLOSE_TIMEOUT_MS).unref();
    this.wakeIdle();
  }

  /** Cuts the connection now. */
  destroy(): void {
    this.socket.destroy();
  }
}
