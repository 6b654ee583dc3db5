// `ingest --socket` and `send --socket`: NDJSON lines streamed to a running server as `ingest`
// requests over one client connection, answers handed on in line order, and (unless --no-wait)
// the run and queue events of the sessions they went to, until those sessions are idle.

import { hostname as osHostname } from 'node:os';
import {
  SwitchboardError,
  describeLineError,
  isSwitchboardError,
  holdsNonFiniteNumber,
  jsonDepthExceeds,
  readNdjson,
} from '../core/index.js';
import { exitCodeFor, parseMessageLine, type ErrorEvent, type IngestEvent } from '../engine/index.js';
import { connectClient, type SwitchboardClient } from './client.js';
import { messageLine } from './protocol.js';

export interface SocketIngestSummary {
  exitCode: number;
  results: number;
  errors: number;
  sessions: Set<string>;
  resets: number;
  /** The server stopped (or the connection dropped) while runs of these sessions were still going. */
  cutShort?: boolean;
  /**
   * Set when `shouldStop` ended the input early: the last line handed to the server. It and every
   * line before it were answered (so are on disk); nothing after it was sent.
   */
  stoppedAfterLine?: number;
}

export interface SocketIngestOptions {
  /**
   * Given: like a local `ingest` without --no-wait, the run and queue events of the sessions these
   * messages went to (reply, dropped, expired, run_failed, overflow, run_started, run_ended) are
   * handed here as they happen, and the call returns only once those sessions have no run and
   * nothing queued any more (or the server stops: then `cutShort` is set).
   */
  onRunEvent?: (event: Record<string, unknown>) => void | Promise<void>;
  /** Requests in flight at once (default 4); answers still come back in line order. */
  window?: number;
  /** Most messages per `ingest` request (default 500). */
  batchMessages?: number;
  /** Most message bytes per request (default 256 KiB; a single larger message goes alone). */
  batchBytes?: number;
  /**
   * Asked after each answer is delivered: true stops taking input (nothing more is sent, the
   * requests in flight are still answered, runs are not waited for) — e.g. once nobody reads the
   * events any more.
   */
  shouldStop?: () => boolean;
}

/** The error event `switchboard ingest` prints for a line, built from the engine's own parser. */
function localErrorEvent(line: number, err: unknown): ErrorEvent {
  const error = isSwitchboardError(err) ? err : new SwitchboardError('BAD_MESSAGE', String(err));
  const event: ErrorEvent = { type: 'error', line, code: error.code, message: `line ${line}: ${error.message}` };
  const jsonPath = error.details?.path;
  if (typeof jsonPath === 'string') event.path = jsonPath;
  return event;
}

/**
 * Streams NDJSON lines to a server as `ingest` requests, numbered by input line, and hands the
 * events to `onEvents` in line order, one call per answer, as soon as each arrives — the same
 * events `switchboard ingest` prints. Lines that cannot be sent (over the cap, invalid UTF-8, not
 * JSON) get their error event locally. Throws UNAVAILABLE when no server answers (nothing was
 * taken then) or the connection drops (what was printed was taken; the rest was not).
 */
export async function ingestViaSocket(
  socketPath: string,
  input: AsyncIterable<Buffer | string>,
  onEvents: (events: IngestEvent[]) => void | Promise<void>,
  options: SocketIngestOptions = {},
): Promise<SocketIngestSummary> {
  const window = Math.max(1, options.window ?? 4);
  const batchMessages = Math.max(1, options.batchMessages ?? 500);
  const batchBytes = Math.max(1, options.batchBytes ?? 256 * 1024);
  const client = await connectClient(socketPath);
  const summary: SocketIngestSummary = { exitCode: 0, results: 0, errors: 0, sessions: new Set(), resets: 0 };
  let batch: { first: number; messages: unknown[]; bytes: number } | undefined;
  // Answer slots (sent requests and local error events), counted so that a pushed event of an
  // unknown session can be dropped once every answer that could have made it ours has arrived.
  let slotsAdded = 0;
  let slotsDelivered = 0;
  const follower = options.onRunEvent ? await followRuns(client, summary.sessions, options.onRunEvent, () => slotsAdded) : undefined;
  // Stopping early: the reader may be waiting for input that never comes, so the stop is a
  // promise of its own that the reading is raced against.
  let stopped = false;
  let lastSentLine = 0;
  let onStop = (): void => undefined;
  const stopping = new Promise<void>((resolve) => (onStop = resolve));

  const deliver = async (events: IngestEvent[]): Promise<void> => {
    for (const event of events) {
      if (event.type === 'error') summary.errors++;
      else {
        summary.results++;
        summary.sessions.add(event.sessionKey);
        if (event.reset) summary.resets++;
      }
    }
    summary.exitCode = exitCodeFor(events, summary.exitCode);
    await onEvents(events);
    await follower?.sessionsGrew(++slotsDelivered);
    if (!stopped && options.shouldStop?.() === true) {
      stopped = true;
      onStop();
    }
  };
  // Answers are delivered in line order as they come; at most `window` wait undelivered. After a
  // failure nothing more is delivered (the chain stays rejected) and the failure is thrown.
  let tail: Promise<void> = Promise.resolve();
  const undelivered: Promise<void>[] = [];
  const addSlot = async (slot: Promise<IngestEvent[]>, lastLine: number): Promise<void> => {
    if (stopped) throw STOP_READING;
    slotsAdded++;
    lastSentLine = lastLine;
    slot.catch(() => undefined);
    tail = tail.then(async () => deliver(await slot));
    tail.catch(() => undefined);
    undelivered.push(tail);
    while (undelivered.length > window) await undelivered.shift();
  };
  const flush = async (): Promise<void> => {
    if (batch === undefined || stopped) return;
    const { first, messages } = batch;
    batch = undefined;
    await addSlot(
      client.request<{ events: IngestEvent[] }>('ingest', { line: first, messages }).then((result) => result.events),
      first + messages.length - 1,
    );
  };

  try {
    const reading = readNdjson(input, async (lines) => {
      for (const item of lines) {
        if (stopped) throw STOP_READING;
        if ('error' in item) {
          await flush();
          await addSlot(Promise.resolve([localErrorEvent(item.line, new SwitchboardError('BAD_MESSAGE', describeLineError(item.error, item.bytes)))]), item.line);
          continue;
        }
        if (item.text.trim() === '') {
          await flush(); // a blank line keeps its number but breaks the run of consecutive lines
          continue;
        }
        let message: unknown;
        try {
          message = JSON.parse(item.text);
          // Too deep to send (stringifying it would overflow the stack): the engine's parser names it.
          if (jsonDepthExceeds(message)) throw new Error('too deep');
          // A number read as Infinity (1e400) would reach the server as null and the message be taken
          // with the field gone: the engine's parser judges the line as the direct path does.
          if (holdsNonFiniteNumber(message)) parseMessageLine(item.text);
        } catch {
          await flush();
          let event: IngestEvent;
          try {
            parseMessageLine(item.text);
            event = localErrorEvent(item.line, new SwitchboardError('BAD_MESSAGE', 'not JSON'));
          } catch (err) {
            event = localErrorEvent(item.line, err);
          }
          await addSlot(Promise.resolve([event]), item.line);
          continue;
        }
        // What is sent is the message as JSON.stringify writes it, which can be longer than the line
        // read (1e20 becomes 21 digits): it is judged as the server will judge it, and counted so
        // against the batch, or a request could pass the server's cap and never be answered.
        const sent = messageLine(item.line, message);
        if ('error' in sent) {
          await flush();
          await addSlot(Promise.resolve([localErrorEvent(item.line, new SwitchboardError('BAD_MESSAGE', describeLineError(sent.error, sent.bytes)))]), item.line);
          continue;
        }
        const bytes = Buffer.byteLength(sent.text);
        if (batch !== undefined && (item.line !== batch.first + batch.messages.length || batch.messages.length >= batchMessages || batch.bytes + bytes > batchBytes)) {
          await flush();
        }
        batch ??= { first: item.line, messages: [], bytes: 0 };
        batch.messages.push(message);
        batch.bytes += bytes;
      }
      await flush();
    });
    reading.catch(() => undefined);
    await Promise.race([reading, stopping]);
    if (!stopped) {
      await reading;
      await flush();
    }
    await tail;
    if (stopped) {
      // Everything sent was answered (and so is on disk); the rest of the input stays unread.
      (input as { destroy?: () => void }).destroy?.();
      summary.stoppedAfterLine = lastSentLine;
    } else if (follower) summary.cutShort = !(await follower.untilIdle());
  } catch (err) {
    if (!isSwitchboardError(err)) {
      throw new SwitchboardError('IO', `reading input failed: ${(err as Error).message}`, { cause: err });
    }
    throw err;
  } finally {
    await client.close();
  }
  return summary;
}

/** Thrown into the reader to end it once the input is no longer taken. */
const STOP_READING = new Error('ingest stopped taking input');

/** How often a waiting `ingest --socket` asks whether its sessions are idle. */
const IDLE_POLL_MS = 50;

/**
 * Subscribes (before anything is sent, so no event is missed) and forwards the run and queue
 * events of `sessions` — a set the caller fills from its results. An event of a session not known
 * yet waits until every answer slot added before it arrived has been delivered: then it is either
 * ours or another client's, and dropped. So other clients' traffic cannot pile up here.
 */
async function followRuns(
  client: SwitchboardClient,
  sessions: ReadonlySet<string>,
  onRunEvent: (event: Record<string, unknown>) => void | Promise<void>,
  slotsAdded: () => number,
) {
  const early: { event: Record<string, unknown>; slotsBefore: number }[] = [];
  /**
   * Set by untilIdle: every answer is in, so the sessions are known for good and an event of
   * another session is dropped at once. It used to be kept: a wait for a long run on a busy server
   * piled up every other session's events (80 000 of them: 58 MiB) until the run ended.
   */
  let settled = false;
  const running = new Set<string>();
  const ended = new Set<string>();
  let forwarding: Promise<void> = Promise.resolve();
  const forward = (event: Record<string, unknown>): void => {
    if (event.type === 'run_started') running.add(event.runId as string);
    else if (event.type === 'run_ended') {
      running.delete(event.runId as string);
      ended.add(event.runId as string);
    }
    forwarding = forwarding.then(() => onRunEvent(event));
  };
  client.onPush(({ event: type, ...fields }) => {
    // Results come with the answers; `shutdown` ends the connection (seen by untilIdle).
    if (type === 'result' || type === 'error' || type === 'shutdown') return;
    const event = { type, ...fields };
    if (sessions.has(fields.sessionKey as string)) forward(event);
    else if (!settled) early.push({ event, slotsBefore: slotsAdded() });
  });
  await client.request('subscribe', {});
  const sessionsGrew = async (slotsDelivered: number): Promise<void> => {
    const waiting = early.splice(0);
    for (const entry of waiting) {
      if (sessions.has(entry.event.sessionKey as string)) forward(entry.event);
      else if (entry.slotsBefore > slotsDelivered) early.push(entry);
    }
    await forwarding;
  };
  /** True once no session of ours has a run or waiting work and every run seen to start has ended. */
  const untilIdle = async (): Promise<boolean> => {
    settled = true;
    early.length = 0;
    try {
      // A run of the server's that was already going when these messages came (so its run_started
      // was never seen here) is waited for too, up to its run_ended: what it reports on ending
      // (the cancels of its session, say) comes before that event.
      const server = await client.request<{ pid: number }>('status', {});
      const here = osHostname();
      for (;;) {
        const listing = await client.request<{ items: { sessionKey: string }[]; active: { sessionKey: string; runId: string; pid: number; hostname: string }[] }>('queue.list', {});
        for (const run of listing.active) {
          if (sessions.has(run.sessionKey) && run.pid === server.pid && run.hostname === here && !ended.has(run.runId)) running.add(run.runId);
        }
        const busy = [...listing.items, ...listing.active].some((entry) => sessions.has(entry.sessionKey));
        if (!busy && running.size === 0) return true;
        await new Promise((resolve) => setTimeout(resolve, IDLE_POLL_MS));
      }
    } catch (err) {
      if (isSwitchboardError(err) && err.code === 'UNAVAILABLE') return false;
      throw err;
    } finally {
      await forwarding;
    }
  };
  return { sessionsGrew, untilIdle };
}
