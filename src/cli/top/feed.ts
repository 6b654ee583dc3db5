// The live data behind `switchboard top`: polls the current source, keeps the event history,
// switches between a server and the store as the server comes and goes, and runs the actions.

import { toSwitchboardError, type Clock } from '../../core/index.js';
import { meansNoServer, type TopSource } from './sources.js';
import { eventsBetween, pushEvents, type TopEvent, type TopSnapshot } from './snapshot.js';

export interface SourceOpeners {
  /** Connects to the server; throws (UNAVAILABLE, …) when none answers. */
  server(): Promise<TopSource>;
  /** The store of the state dir. */
  store(): Promise<TopSource>;
}

export type SnapshotListener = (snapshot: TopSnapshot) => void;

export class TopFeed {
  private source?: TopSource;
  private storeSource?: TopSource;
  private snapshot: TopSnapshot | null = null;
  private events: TopEvent[] = [];
  private readonly listeners = new Set<SnapshotListener>();
  private timer?: NodeJS.Timeout;
  private running: Promise<void> = Promise.resolve();
  private stopped = false;
  /** A refresh is queued and has not started yet. */
  private refreshWaiting = false;
  /** Why the store is shown: the server's connection error, e.g. "no server at … (no socket there)". */
  private noServer = '';

  constructor(
    private readonly openers: SourceOpeners,
    private readonly clock: Clock,
    private readonly intervalMs: number,
  ) {}

  get current(): TopSnapshot | null {
    return this.snapshot;
  }

  /** Listens for new snapshots; returns the function that stops listening. */
  subscribe(listener: SnapshotListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Reads once (errors reach the caller: a bad config, an unreadable store), then polls. */
  async start(): Promise<TopSnapshot> {
    await this.refreshNow(true);
    this.schedule();
    return this.snapshot!;
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      void this.refresh()
        .catch(() => undefined)
        .finally(() => this.schedule());
    }, this.intervalMs);
  }

  /** One refresh at a time; a refresh asked for while one runs waits for it. */
  refresh(): Promise<void> {
    const next = this.running
      .catch(() => undefined)
      .then(() => {
        this.refreshWaiting = false;
        return this.refreshNow(false);
      });
    this.running = next;
    return next;
  }

  private note(type: string, detail: string, sessionKey: string | null = null, runId: string | null = null): void {
    this.events = pushEvents(this.events, [{ at: this.clock.now(), type, sessionKey, runId, detail }]);
  }

  /** The server when one answers, else the store; a server source that failed is dropped first. */
  private async chooseSource(): Promise<TopSource> {
    if (this.source?.kind === 'server') return this.source;
    try {
      const server = await this.openers.server();
      server.onPush(() => this.publishEvents());
      if (this.source !== undefined) this.note('source', 'a server answers now: showing what it reports');
      this.source = server;
      return server;
    } catch (err) {
      if (!meansNoServer(err)) throw err;
      this.noServer = toSwitchboardError(err).message.replace(/^no switchboard server at /, 'no server at ');
    }
    this.storeSource ??= await this.openers.store();
    this.source = this.storeSource;
    return this.storeSource;
  }

  private async refreshNow(first: boolean, afterServerLoss = false): Promise<void> {
    if (this.stopped) return;
    let source: TopSource | undefined;
    try {
      source = await this.chooseSource();
      const reading = await source.read();
      const now = this.clock.now();
      const fresh = source.kind === 'store' && this.snapshot?.source === 'store' ? eventsBetween(this.snapshot, reading, now) : [];
      this.events = pushEvents(this.events, [...source.takeEvents(), ...fresh]);
      const sourceLabel = source.kind === 'store' ? `${reading.sourceLabel} (${this.noServer})` : reading.sourceLabel;
      this.publish({ source: source.kind, ...reading, sourceLabel, takenAt: now, events: this.events });
    } catch (err) {
      if (source?.kind === 'server' && meansNoServer(err) && !afterServerLoss) {
        // The server went away: say so and show the store from now on.
        this.source = undefined;
        await source.close().catch(() => undefined);
        this.events = pushEvents(this.events, source.takeEvents());
        this.note('source', 'the server is gone: reading the store');
        return this.refreshNow(first, true);
      }
      if (first || this.snapshot === null) throw err;
      this.publish({ ...this.snapshot, events: this.events, error: toSwitchboardError(err).message });
    }
  }

  /**
   * Pushed events show up at once, with the rest of the last snapshot; one that changes runs or
   * queues also asks for a refresh (at most one waiting), so the panels follow without a poll.
   */
  private publishEvents(): void {
    if (this.snapshot === null || this.source === undefined) return;
    const fresh = this.source.takeEvents();
    if (fresh.length === 0) return;
    this.events = pushEvents(this.events, fresh);
    this.publish({ ...this.snapshot, events: this.events });
    if (!this.refreshWaiting && fresh.some((event) => event.type !== 'reply')) {
      this.refreshWaiting = true;
      void this.refresh().catch(() => undefined);
    }
  }

  private publish(snapshot: TopSnapshot): void {
    this.snapshot = snapshot;
    for (const listener of this.listeners) listener(snapshot);
  }

  private async act(label: string, action: (source: TopSource) => Promise<string>, sessionKey: string, runId: string | null): Promise<string> {
    const source = this.source ?? (await this.chooseSource());
    try {
      const message = await action(source);
      this.note(label, message, sessionKey, runId);
      return message;
    } finally {
      await this.refresh().catch(() => undefined);
    }
  }

  /** Removes one queued item; resolves with what happened, rejects with the reason it could not. */
  cancel(runId: string, sessionKey: string): Promise<string> {
    return this.act('top_cancel', (source) => source.cancel(runId), sessionKey, runId);
  }

  /** Cancels the session's queued items, then aborts its active run. */
  abort(sessionKey: string): Promise<string> {
    return this.act('top_abort', (source) => source.abort(sessionKey), sessionKey, null);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    this.listeners.clear();
    await this.running.catch(() => undefined);
    const sources = new Set([this.source, this.storeSource].filter((source): source is TopSource => source !== undefined));
    await Promise.all([...sources].map((source) => source.close().catch(() => undefined)));
  }
}
