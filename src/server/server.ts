// `switchboard serve`: one process owning a Unix socket, answering NDJSON requests with the same
// engine the CLI uses, pushing events to subscribers, reloading config and draining on stop.

import { randomBytes } from 'node:crypto';
import net from 'node:net';
import path from 'node:path';
import { DEFAULT_MAX_BATCH_BYTES, SwitchboardError, timerDelay, type NdjsonLine } from '../core/index.js';
import {
  configureQueue,
  dropIncognitoQueues,
  knownAgentIds,
  queueRuntimeFor,
  resumeOrphanedQueues,
  storeFor,
  waitForQueueWork,
  type EngineContext,
  type IngestEvent,
  type QueueEvent,
} from '../engine/index.js';
import { mountMemoryVolume, unmountMemoryVolume, type MemoryVolume } from '../store/index.js';
import { ClientConnection, type ConnectionHost, type ConnectionLimits } from './connection.js';
import { IngestQueue } from './ingest-queue.js';
import { MaintainSchedule } from './maintain-schedule.js';
import { OP_HANDLERS, engineIngest, pushOf, type OpHost } from './ops.js';
import { MAX_REQUEST_BYTES, encodeLine, errorBody, parseRequestLine, type Push, type Request, type Response } from './protocol.js';
import { removeOwnSocket, type SocketIdentity } from './socket-file.js';

/** An engine context and the config file it was built from (null = built-in defaults). */
export interface LoadedEngine {
  engine: EngineContext;
  configPath: string | null;
}

export interface ServerLimits extends ConnectionLimits {
  /** Connections beyond this are answered with UNAVAILABLE and closed. */
  maxClients: number;
  /** Messages in one `ingest` request. */
  maxMessagesPerRequest: number;
  /** Message text in one combined store batch (see DEFAULT_MAX_BATCH_BYTES in core). */
  maxBatchBytes: number;
}

export const DEFAULT_LIMITS: ServerLimits = {
  maxRequestBytes: MAX_REQUEST_BYTES,
  highWaterBytes: 1024 * 1024,
  maxQueuedBytes: 16 * 1024 * 1024,
  maxPendingRequests: 1_024,
  maxPendingBytes: 8 * 1024 * 1024,
  maxPendingBytesTotal: 64 * 1024 * 1024,
  maxClients: 1_024,
  maxMessagesPerRequest: 10_000,
  maxBatchBytes: DEFAULT_MAX_BATCH_BYTES,
};

export const DEFAULT_GRACE_MS = 10_000;

/** How often connections that stopped sending are checked for a peer that has gone. */
const PEER_CHECK_MS = 2_000;

export interface StartServerOptions {
  /** Builds the engine context from the config; called at start and on every reload. */
  loadEngine: () => Promise<LoadedEngine>;
  /** Default: `<state>/switchboard.sock` of the first loaded engine. */
  socketPath?: string;
  /** Reported by `status`. */
  version?: string;
  /** Start, stop and reload lines (the caller decides about --quiet). */
  log?: (line: string) => void;
  /** Failures worth a line even under --quiet: a rejected reload, an internal error. */
  warn?: (line: string) => void;
  limits?: Partial<ServerLimits>;
}

export interface StopOptions {
  /** How long in-flight requests may take before they are aborted (default 10 s). */
  graceMs?: number;
  /** Named in the log line and the `shutdown` push (for example the signal). */
  reason?: string;
}

export interface StopSummary {
  reason: string;
  /** Runs of this process still going when the grace period ran out (asked to abort). */
  runsAborted: number;
  /** Clients connected when the stop began. */
  clients: number;
  /** Requests answered normally after the stop began. */
  finished: number;
  /** Requests answered with UNAVAILABLE because the grace period ran out. */
  aborted: number;
}

export interface SwitchboardServer {
  readonly socketPath: string;
  status(): Record<string, unknown>;
  /** Loads the config again; a bad config is reported and the running one kept (false). */
  reload(): Promise<boolean>;
  /** Stops accepting, answers what was received within the grace period, closes clients, removes the socket. */
  stop(options?: StopOptions): Promise<StopSummary>;
  /** Ends the grace period of a running stop now (a second SIGTERM). */
  abortNow(): void;
  /** Settles when the server has stopped. */
  readonly stopped: Promise<StopSummary>;
}

export class Server implements ConnectionHost, OpHost, SwitchboardServer {
  readonly limits: ServerLimits;
  readonly clients = new Set<ClientConnection>();
  readonly stopped: Promise<StopSummary>;
  private resolveStopped!: (summary: StopSummary) => void;
  private readonly startedAt = Date.now();
  private nextClientId = 1;
  private draining = false;
  /** Bytes read and not yet answered, all clients together (maxPendingBytesTotal). */
  private pendingBytes = 0;
  private stopping?: Promise<StopSummary>;
  private endGrace?: () => void;
  private aborted = false;
  private readonly abortWaiters = new Set<() => void>();
  private readonly ingestQueue: IngestQueue;
  /** Every engine context this server has used (a reload adds one; runs of the old one go on). */
  private readonly engines = new Set<EngineContext>();
  /** Runs started in this process and not ended yet, with the engine that runs them. */
  private readonly activeRuns = new Map<string, EngineContext>();
  private reloading: Promise<boolean> = Promise.resolve(true);
  /**
   * Incognito sessions (rows and transcripts) live here, in this process's memory only, and go
   * with it. The root names no real folder: it only routes the store's paths to memory.
   */
  private readonly incognito: MemoryVolume;
  /** `maintain` every session.maintenance.maintainEvery, so no cron is needed. */
  private readonly maintainSchedule: MaintainSchedule;
  /** Finds clients that went away while the server had nothing to send them (ClientConnection.checkPeer). */
  private readonly peerCheck: NodeJS.Timeout;
  private readonly counters = {
    connections: 0,
    requests: 0,
    answered: 0,
    errors: 0,
    badRequests: 0,
    inFlight: 0,
    aborted: 0,
    results: 0,
    messageErrors: 0,
    pushes: 0,
    reloads: 0,
    failedReloads: 0,
  };

  constructor(
    private current: LoadedEngine,
    readonly socketPath: string,
    private readonly netServer: net.Server,
    private readonly identity: SocketIdentity,
    private readonly options: StartServerOptions,
    early: net.Socket[],
  ) {
    this.limits = { ...DEFAULT_LIMITS, ...definedOnly(options.limits ?? {}) };
    this.ingestQueue = new IngestQueue(engineIngest, undefined, this.limits.maxBatchBytes);
    this.incognito = mountMemoryVolume(path.join(path.resolve(current.engine.stateDir), `incognito-memory-${randomBytes(6).toString('hex')}`));
    this.attach(current.engine);
    this.maintainSchedule = new MaintainSchedule(() => this.current.engine, (line) => this.log(line), (line) => this.warn(line));
    this.maintainSchedule.arm();
    this.peerCheck = setInterval(() => {
      for (const client of this.clients) client.checkPeer();
    }, PEER_CHECK_MS).unref();
    this.stopped = new Promise((resolve) => (this.resolveStopped = resolve));
    netServer.on('connection', (socket) => this.accept(socket));
    for (const socket of early) this.accept(socket);
    netServer.on('error', (err) => this.warn(`switchboard serve: socket error: ${err.message}`));
  }

  /** Runs and queue drains of this engine report to the server, which pushes them to subscribers. */
  private attach(engine: EngineContext): void {
    this.engines.add(engine);
    engine.incognitoRoot = this.incognito.root; // every engine of this server shares its incognito sessions
    configureQueue(engine, {
      noWait: false,
      sink: (event: QueueEvent) => {
        if (event.type === 'run_started') this.activeRuns.set(event.runId, engine);
        else if (event.type === 'run_ended') this.activeRuns.delete(event.runId);
        this.publish(event);
      },
    });
  }

  /**
   * An engine replaced by a reload is forgotten once its runs, drains and quiet windows are over
   * (no new work reaches it: requests use the current one). Kept for ever, every SIGHUP leaked a
   * whole engine context — config, routing table, queue runtime — for the life of the server.
   */
  private retireWhenIdle(engine: EngineContext): void {
    void waitForQueueWork(engine).then(() => {
      if (engine !== this.current.engine) this.engines.delete(engine);
    });
  }

  /** Takes over queues whose owner died (a killed server, a crashed ingest): they run here now. */
  async resumeQueues(): Promise<number> {
    try {
      return await resumeOrphanedQueues(this.current.engine);
    } catch (err) {
      this.warn(`switchboard serve: could not resume waiting queues: ${errorBody(err).message}`);
      return 0;
    }
  }

  private queuesIdle(): Promise<unknown> {
    return Promise.all([...this.engines].map((engine) => waitForQueueWork(engine)));
  }

  get maxMessagesPerRequest(): number {
    return this.limits.maxMessagesPerRequest;
  }

  private log(line: string): void {
    this.options.log?.(line);
  }

  private warn(line: string): void {
    (this.options.warn ?? this.options.log)?.(line);
  }

  private accept(socket: net.Socket): void {
    const refuse = (message: string, hint: string): void => {
      socket.on('error', () => undefined);
      socket.end(encodeLine({ id: null, error: { code: 'UNAVAILABLE', message, hint } }));
      setTimeout(() => socket.destroy(), 1_000).unref();
    };
    if (this.draining) return refuse('the server is stopping', 'try again once it has been restarted');
    if (this.clients.size >= this.limits.maxClients && !this.letIdleClientGo()) {
      return refuse(`too many clients (${this.limits.maxClients}), none of them idle`, 'try again later');
    }
    this.counters.connections++;
    this.clients.add(new ClientConnection(socket, this.nextClientId++, this));
  }

  /**
   * At the client cap, the connection that has been idle longest (nothing waiting, nothing being
   * answered, no subscription) is let go with a final UNAVAILABLE line, so that a new client gets
   * in: one process holding every connection open and silent (a leak, a slowloris) used to lock
   * every other client out, `status` included. False when every client is busy.
   */
  private letIdleClientGo(): boolean {
    let idlest: ClientConnection | undefined;
    let since = Infinity;
    for (const client of this.clients) {
      const idle = client.idleSince();
      if (idle !== null && idle < since) {
        idlest = client;
        since = idle;
      }
    }
    if (idlest === undefined) return false;
    idlest.drop(`idle connection closed: the server is at its limit of ${this.limits.maxClients} clients; reconnect to send more`);
    return true;
  }

  // ConnectionHost

  async handle(request: Request, client: ClientConnection): Promise<Response> {
    this.counters.requests++;
    this.counters.inFlight++;
    const engine = this.current.engine;
    try {
      // Once the grace period is over no new work starts: the answer below is then true.
      if (this.aborted) throw this.notStarted();
      const work = Promise.resolve().then(() => OP_HANDLERS[request.op](request.params, { engine, client, host: this }));
      // An ingest is never cut short: lines not yet handed to the store are refused by the ingest
      // queue when the grace period ends (nothing of them stored), and a batch being stored is
      // finished and answered with its real events, so UNAVAILABLE always means "not stored".
      const result = request.op === 'ingest' ? await work : await this.unlessAborted(work);
      return { id: request.id, result: result ?? null };
    } catch (err) {
      this.counters.errors++;
      const body = errorBody(err);
      if (body.code === 'INTERNAL') {
        const cause = err instanceof SwitchboardError && err.cause instanceof Error ? err.cause : err;
        this.warn(`switchboard serve: internal error in op ${request.op}: ${cause instanceof Error ? cause.stack : String(cause)}`);
      }
      return { id: request.id, error: body };
    } finally {
      this.counters.inFlight--;
      this.counters.answered++;
    }
  }

  /** The answer to a request whose work was not started (and now will not be) because the server is stopping. */
  private notStarted(): SwitchboardError {
    this.counters.aborted++;
    return new SwitchboardError('UNAVAILABLE', 'the server is stopping and did not handle this request; nothing of it was stored', {
      hint: 'send it again to a running server',
    });
  }

  /** Once the grace period is over, a request still running is answered at once (its work may still land). */
  private unlessAborted<T>(work: Promise<T>): Promise<T> {
    const aborted = (): SwitchboardError => {
      this.counters.aborted++;
      return new SwitchboardError('UNAVAILABLE', 'the server stopped before this request finished (grace period over); its outcome is unknown', {
        hint: 'send it again to a running server; a repeated messageId is recognised as a duplicate',
      });
    };
    if (this.aborted) {
      work.catch(() => undefined);
      return Promise.reject(aborted());
    }
    return new Promise<T>((resolve, reject) => {
      const onAbort = (): void => reject(aborted());
      this.abortWaiters.add(onAbort);
      work.then(
        (value) => {
          this.abortWaiters.delete(onAbort);
          resolve(value);
        },
        (err) => {
          this.abortWaiters.delete(onAbort);
          reject(err);
        },
      );
    });
  }

  rejected(): void {
    this.counters.badRequests++;
  }

  notePending(delta: number): void {
    const wasOver = this.overPendingBudget;
    this.pendingBytes += delta;
    if (wasOver && !this.overPendingBudget) for (const client of this.clients) client.updateReading();
  }

  get overPendingBudget(): boolean {
    return this.pendingBytes >= this.limits.maxPendingBytesTotal;
  }

  closed(client: ClientConnection): void {
    this.clients.delete(client);
  }

  // OpHost

  ingest(engine: EngineContext, lines: NdjsonLine[]): Promise<IngestEvent[]> {
    return this.ingestQueue.submit(engine, lines);
  }

  publish(event: IngestEvent | QueueEvent): void {
    if (event.type === 'result') this.counters.results++;
    else if (event.type === 'error') {
      // A bad line is the sender's business: it gets the error in its answer, nobody else does.
      this.counters.messageErrors++;
      return;
    }
    const key = (event as { sessionKey?: unknown }).sessionKey;
    if (typeof key !== 'string') return;
    let push: Push | undefined;
    let line: string | undefined;
    for (const client of this.clients) {
      const subscription = client.subscription;
      if (subscription === null || (subscription !== 'all' && !subscription.has(key))) continue;
      push ??= pushOf(event);
      line ??= encodeLine(push);
      this.counters.pushes++;
      client.push(push, line);
    }
  }

  status(): Record<string, unknown> {
    const engine = this.current.engine;
    let subscribers = 0;
    for (const client of this.clients) if (client.subscription !== null) subscribers++;
    return {
      pid: process.pid,
      version: this.options.version ?? null,
      socket: this.socketPath,
      stateDir: engine.stateDir,
      config: this.current.configPath,
      startedAt: new Date(this.startedAt).toISOString(),
      uptimeMs: Date.now() - this.startedAt,
      draining: this.draining,
      stores: knownAgentIds(engine).map((agentId) => ({ agentId, path: storeFor(engine, agentId).storePath })),
      clients: this.clients.size,
      subscribers,
      connections: this.counters.connections,
      requests: {
        total: this.counters.requests + this.counters.badRequests,
        inFlight: this.counters.inFlight,
        errors: this.counters.errors,
        badRequests: this.counters.badRequests,
        pendingBytes: this.pendingBytes,
      },
      messages: { results: this.counters.results, errors: this.counters.messageErrors, queued: this.ingestQueue.queued, batches: this.ingestQueue.batches },
      pushes: this.counters.pushes,
      activeRuns: this.activeRuns.size,
      reloads: { applied: this.counters.reloads, rejected: this.counters.failedReloads, retained: this.engines.size },
      maintain: this.maintainSchedule.status(),
    };
  }

  reload(): Promise<boolean> {
    // One reload at a time, in the order asked for.
    this.reloading = this.reloading.then(async () => {
      try {
        const next = await this.options.loadEngine();
        const previous = this.current.engine;
        this.attach(next.engine);
        this.current = next;
        this.retireWhenIdle(previous);
        this.maintainSchedule.arm(); // the interval may have changed
        this.counters.reloads++;
        this.log(`switchboard serve: config reloaded from ${next.configPath ?? '(built-in defaults)'}`);
        return true;
      } catch (err) {
        this.counters.failedReloads++;
        this.warn(`switchboard serve: config reload rejected, keeping the running config: ${errorBody(err).message}`);
        return false;
      }
    });
    return this.reloading;
  }

  abortNow(): void {
    this.endGrace?.();
  }

  stop(options: StopOptions = {}): Promise<StopSummary> {
    this.stopping ??= this.drainAndClose(options.graceMs ?? DEFAULT_GRACE_MS, options.reason ?? 'stop');
    return this.stopping;
  }

  private async drainAndClose(graceMs: number, reason: string): Promise<StopSummary> {
    this.draining = true;
    const maintainStopped = this.maintainSchedule.stop(); // no new pass; one in progress ends below
    clearInterval(this.peerCheck);
    // Runs in flight may finish; queued turns stay queued for the next process (they would only be cut off).
    for (const engine of this.engines) queueRuntimeFor(engine).stopStartingQueuedTurns();
    const clients = [...this.clients];
    const answeredBefore = this.counters.answered;
    for (const client of clients) client.freeze();
    const allIdle = (): Promise<unknown> => Promise.all(clients.map((client) => client.whenIdle()));
    let timer: NodeJS.Timeout | undefined;
    const graceOver = new Promise<'timeout'>((resolve) => {
      this.endGrace = () => resolve('timeout');
      timer = setTimeout(() => resolve('timeout'), timerDelay(graceMs));
    });
    // Received requests are answered and this process's runs finish; queued work stays in the store.
    const outcome = await Promise.race([Promise.all([allIdle(), this.queuesIdle()]).then(() => 'idle' as const), graceOver]);
    clearTimeout(timer);
    let runsAborted = 0;
    if (outcome === 'timeout') {
      runsAborted = this.activeRuns.size;
      this.aborted = true;
      for (const abort of [...this.abortWaiters]) abort();
      this.abortWaiters.clear();
      this.ingestQueue.close(() => this.notStarted());
      // No queued turn may start now: it would be cut off by the exit without a report.
      for (const engine of this.engines) queueRuntimeFor(engine).shutdown('server stopping');
      // A batch being stored is finished and its requests answered before any client is closed:
      // its messages are on disk, so their senders must hear so (not "resend"). This waits as
      // long as the store takes, which its own lock timeouts bound.
      await this.ingestQueue.whenIdle();
      await Promise.all(clients.map((client) => client.whenAnswered()));
      // Aborted and waiting requests are answered at once; a client that reads nothing is not waited
      // for; aborted runs get a moment to report their end to subscribers.
      await Promise.race([Promise.all([allIdle(), this.queuesIdle()]), delay(this.activeRuns.size > 0 ? 3_000 : 500)]);
    }
    await maintainStopped;
    // Incognito work still waiting cannot outlive this process: it is reported, then forgotten.
    for (const engine of this.engines) {
      for (const event of await dropIncognitoQueues(engine).catch(() => [])) this.publish(event);
    }
    const notice: Push = { event: 'shutdown', reason };
    // Every line read gets its answer, as it would have running: a request UNAVAILABLE (nothing of
    // it was done), an unreadable line its own error; a blank line none.
    const answerWaiting = (item: NdjsonLine): Response | null => {
      const parsed = parseRequestLine(item);
      if ('request' in parsed) return { id: parsed.request.id, error: { code: 'UNAVAILABLE', message: 'the server stopped before handling this request' } };
      if ('answer' in parsed) {
        this.rejected();
        return parsed.answer;
      }
      return null;
    };
    for (const client of clients) client.close(notice, answerWaiting);
    await Promise.race([Promise.all(clients.map((client) => client.whenClosed())), delay(1_500)]);
    for (const client of this.clients) client.destroy();
    // The listener was bound under a temporary name (see bindSocket): closing it leaves the path alone.
    await Promise.race([new Promise<void>((resolve) => this.netServer.close(() => resolve())), delay(1_000)]);
    await removeOwnSocket(this.socketPath, this.identity);
    unmountMemoryVolume(this.incognito);
    const summary: StopSummary = {
      reason,
      clients: clients.length,
      finished: this.counters.answered - answeredBefore - this.counters.aborted,
      aborted: this.counters.aborted,
      runsAborted,
    };
    this.log(
      `switchboard serve: stopped (${reason}): ${summary.finished} request(s) finished, ${summary.aborted} aborted, ${summary.clients} client(s) closed${runsAborted > 0 ? `, ${runsAborted} run(s) aborted` : ''}`,
    );
    this.resolveStopped(summary);
    return summary;
  }
}

function definedOnly<T extends object>(value: T): Partial<T> {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as Partial<T>;
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}
