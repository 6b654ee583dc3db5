// The client side of the socket: one connection, requests matched to answers by id, pushes handed
// to listeners (`ingest --socket` streams through it: socket-ingest.ts).

import net from 'node:net';
import {
  EXIT_CODES,
  LineSplitter,
  SwitchboardError,
  describeLineError,
  type ErrorCode,
  type NdjsonLine,
} from '../core/index.js';
import type { Push } from './protocol.js';
import { probeSocket } from './socket-file.js';

export interface SwitchboardClient {
  readonly socketPath: string;
  /** Sends `{id, op, …params}`; resolves with `result`, rejects with a SwitchboardError built from `error`. */
  request<T = unknown>(op: string, params?: Record<string, unknown>): Promise<T>;
  /** Server-initiated lines (`{event, …}`), e.g. after `subscribe`. */
  onPush(listener: (push: Push) => void): void;
  /** Requests sent and not yet answered. */
  readonly pending: number;
  /** Closes the connection once the server has answered every request sent (pushes after that are not read). */
  close(): Promise<void>;
  /** Cuts the connection at once; requests still waiting are rejected (UNAVAILABLE). For a server that stopped answering. */
  destroy(): void;
  /** Settles when the connection is gone (for whatever reason). */
  readonly closed: Promise<void>;
}

/** Answers can be large (a long sessions listing); the cap only guards against a runaway peer. */
const MAX_ANSWER_BYTES = 512 * 1024 * 1024;

/**
 * Answers may legitimately take long (a batch waiting for a busy session's lock), so a request has
 * no deadline of its own. Instead, once nothing has come back for ANSWER_QUIET_MS while requests
 * wait, a second connection asks `status` (which a switchboard server answers at once, whatever
 * the first connection is waiting for); no answer within STATUS_PROBE_MS means the peer accepts
 * connections but does not answer — a frozen process or not a switchboard server — and the
 * waiting requests fail with UNAVAILABLE instead of hanging for ever.
 */
const ANSWER_QUIET_MS = 2_000;
const STATUS_PROBE_MS = 5_000;

const START_HINT = 'start it with `switchboard serve` (same --state-dir), or give the right path with --socket';

function unreachable(socketPath: string, err: NodeJS.ErrnoException): SwitchboardError {
  if (err.code === 'EACCES' || err.code === 'EPERM') {
    return new SwitchboardError('IO', `no permission to connect to ${socketPath}`, { cause: err, hint: 'the socket is private to the user who started the server' });
  }
  const why = err.code === 'ENOENT' ? 'no socket there' : err.code === 'ECONNREFUSED' ? 'nothing is listening' : err.message;
  return new SwitchboardError('UNAVAILABLE', `no switchboard server at ${socketPath} (${why})`, { cause: err, hint: START_HINT, details: { socketPath, errno: err.code } });
}

/** An `{code, message, hint?}` from the wire as the error the CLI reports (unknown codes are INTERNAL). */
export function errorFromWire(body: unknown): SwitchboardError {
  const b = (body ?? {}) as { code?: unknown; message?: unknown; hint?: unknown };
  const code = typeof b.code === 'string' && Object.hasOwn(EXIT_CODES, b.code) ? (b.code as ErrorCode) : 'INTERNAL';
  const message = typeof b.message === 'string' ? b.message : 'the server answered with an error';
  return new SwitchboardError(code, message, typeof b.hint === 'string' ? { hint: b.hint } : {});
}

/** Opens a connection. Nothing listening (ENOENT/ECONNREFUSED) → UNAVAILABLE (exit 69). */
export function connectClient(socketPath: string): Promise<SwitchboardClient> {
  return new Promise((resolve, reject) => {
    const socket = net.createConnection(socketPath);
    const onConnectError = (err: NodeJS.ErrnoException): void => reject(unreachable(socketPath, err));
    socket.once('error', onConnectError);
    socket.once('connect', () => {
      socket.off('error', onConnectError);
      resolve(new Client(socketPath, socket));
    });
  });
}

interface Waiting {
  resolve: (value: unknown) => void;
  reject: (reason: unknown) => void;
}

/**
 * Which waiting request an answer is for. Answers come in the order of the requests, and
 * `{id: null, error}` stands in the place of the answer to a line the server could not read as a
 * request (over its size cap, say), so it is the oldest waiting request's: left unmatched, that
 * request would wait for ever. (An `{id: null}` line sent before hanging up rejects the oldest
 * with the reason every waiting request gets anyway.)
 */
function answeredId(message: Record<string, unknown>, waiting: ReadonlyMap<number, Waiting>): number | undefined {
  if (typeof message.id === 'number') return message.id;
  if (message.id === null && message.error !== undefined) return waiting.keys().next().value;
  return undefined;
}

class Client implements SwitchboardClient {
  private nextId = 1;
  private readonly waiting = new Map<number, Waiting>();
  private readonly listeners: ((push: Push) => void)[] = [];
  private readonly splitter = new LineSplitter(MAX_ANSWER_BYTES);
  /** Why the connection ended, when the server said (an `{id: null, error}` line). */
  private lastError?: SwitchboardError;
  private isClosed = false;
  /** When the server last sent anything (for the silence check). */
  private lastHeardAt = Date.now();
  private watchdog?: NodeJS.Timeout;
  private probing = false;
  /** Called once the last waiting request is answered (set by close()). */
  private drained?: () => void;
  readonly closed: Promise<void>;

  constructor(
    readonly socketPath: string,
    private readonly socket: net.Socket,
  ) {
    socket.on('data', (chunk: Buffer) => {
      this.lastHeardAt = Date.now();
      this.take(this.splitter.push(chunk));
    });
    socket.on('end', () => {
      this.take(this.splitter.end());
      socket.end();
    });
    socket.on('error', (err: NodeJS.ErrnoException) => {
      this.lastError ??= new SwitchboardError('UNAVAILABLE', `connection to ${socketPath} failed: ${err.message}`, { cause: err, hint: START_HINT });
    });
    this.closed = new Promise((resolve) => {
      socket.on('close', () => {
        this.isClosed = true;
        clearInterval(this.watchdog);
        const reason =
          this.lastError ??
          new SwitchboardError('UNAVAILABLE', `the server at ${socketPath} closed the connection before answering`, { hint: 'it may have stopped; check it and send again' });
        for (const waiting of this.waiting.values()) waiting.reject(reason);
        this.waiting.clear();
        resolve();
      });
    });
  }

  get pending(): number {
    return this.waiting.size;
  }

  private take(lines: NdjsonLine[]): void {
    for (const line of lines) {
      if ('error' in line) {
        this.lastError = new SwitchboardError('UNAVAILABLE', `unreadable answer from the server: ${describeLineError(line.error, line.bytes, MAX_ANSWER_BYTES)}`);
        this.socket.destroy();
        return;
      }
      if (line.text.trim() === '') continue;
      let message: Record<string, unknown>;
      try {
        message = JSON.parse(line.text) as Record<string, unknown>;
      } catch {
        this.lastError = new SwitchboardError('UNAVAILABLE', 'the server sent a line that is not JSON; is this a switchboard socket?');
        this.socket.destroy();
        return;
      }
      if (typeof message.event === 'string' && !('id' in message)) {
        for (const listener of this.listeners) listener(message as Push);
        continue;
      }
      // `{id: null, error}` UNAVAILABLE: the server is telling us why it is about to hang up.
      if (message.id === null && message.error !== undefined) {
        const error = errorFromWire(message.error);
        if (error.code === 'UNAVAILABLE') this.lastError = error;
      }
      const id = answeredId(message, this.waiting);
      const waiting = id === undefined ? undefined : this.waiting.get(id);
      if (waiting === undefined) continue;
      this.waiting.delete(id!);
      if (message.error !== undefined) waiting.reject(errorFromWire(message.error));
      else waiting.resolve(message.result);
      if (this.waiting.size === 0) this.drained?.();
    }
  }

  request<T = unknown>(op: string, params: Record<string, unknown> = {}): Promise<T> {
    if (this.isClosed) {
      return Promise.reject(this.lastError ?? new SwitchboardError('UNAVAILABLE', `the connection to ${this.socketPath} is closed`, { hint: START_HINT }));
    }
    const id = this.nextId++;
    return new Promise<T>((resolve, reject) => {
      if (this.waiting.size === 0) this.lastHeardAt = Date.now();
      this.waiting.set(id, { resolve: resolve as (value: unknown) => void, reject });
      this.socket.write(`${JSON.stringify({ ...params, id, op })}\n`);
      this.watch();
    });
  }

  /** Starts the silence check (see ANSWER_QUIET_MS); it idles while nothing is waiting. */
  private watch(): void {
    if (this.watchdog !== undefined) return;
    this.watchdog = setInterval(() => void this.checkSilence(), ANSWER_QUIET_MS / 4);
    this.watchdog.unref();
  }

  private async checkSilence(): Promise<void> {
    if (this.probing || this.isClosed || this.waiting.size === 0 || Date.now() - this.lastHeardAt < ANSWER_QUIET_MS) return;
    this.probing = true;
    try {
      const probe = await probeSocket(this.socketPath, STATUS_PROBE_MS).catch(() => undefined);
      if (probe?.state === 'live' && probe.answered === true) {
        this.lastHeardAt = Date.now(); // alive and answering others: this connection's answers are just slow
        return;
      }
      if (this.isClosed) return;
      this.lastError ??= new SwitchboardError(
        'UNAVAILABLE',
        `the server at ${this.socketPath} accepted the connection but did not answer (no answer for ${(ANSWER_QUIET_MS + STATUS_PROBE_MS) / 1000} s, not even to a status request)`,
        { hint: 'it may be stopped (kill -STOP) or not a switchboard server; what got no answer may or may not be stored; resending is safe for messages with a messageId (one already recorded is answered as a duplicate)' },
      );
      this.socket.destroy();
    } finally {
      this.probing = false;
    }
  }

  onPush(listener: (push: Push) => void): void {
    this.listeners.push(listener);
  }

  async close(): Promise<void> {
    if (!this.isClosed) {
      this.socket.end();
      // The server keeps a subscriber's connection open after it stops sending, so do not wait
      // for the server's end: once every request is answered, the connection is ours to cut.
      if (this.waiting.size === 0) this.socket.destroy();
      else this.drained = () => this.socket.destroy();
    }
    await this.closed;
  }

  destroy(): void {
    this.lastError ??= new SwitchboardError('UNAVAILABLE', `the connection to ${this.socketPath} was cut by this client`);
    this.socket.destroy();
  }
}
