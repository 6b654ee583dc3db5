// The main job: a batch of NDJSON lines in, one result or error event per line out. Messages are
// routed, planned against sessions.json in ONE store update per agent, appended to their
// transcripts (one lock + one fsync per session per batch), and acknowledged only afterwards.

import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { EXIT_CODES, SwitchboardError, describeLineError, toSwitchboardError, type ErrorCode, type NdjsonLine } from '../core/index.js';
import { forgetMessageId, planSessionMessage, type PlanMessage, type PlannedEntry, type RecentMessageIds, type SessionPlan } from '../policy/index.js';
import { cronSessionKey, normalizeExplicitSessionKey, parseSessionKey, resolveRoute } from '../routing/index.js';
import {
  appendEntries,
  archiveFile,
  readSessionStore,
  resolveThreadTranscriptPath,
  resolveTranscriptPath,
  updateSessionStore,
  withLock,
  type NewTranscriptEntry,
  type SessionEntry,
  type StoreLocation,
} from '../store/index.js';
import { sessionLockOptions, storeFor, transcriptPathIn, type EngineContext } from './context.js';
import { parseMessageLine, type InboundMessage } from './message.js';

export type Disposition = 'recorded' | 'duplicate' | 'command';

export interface ResultEvent {
  type: 'result';
  line: number;
  ok: true;
  messageId: string | null;
  runId: string;
  agentId: string;
  sessionKey: string;
  sessionId: string | null;
  matchedBy: string;
  reset: { reason: 'daily' | 'idle' | 'command'; previousSessionId: string } | null;
  disposition: Disposition;
  persisted: boolean;
}

export interface ErrorEvent {
  type: 'error';
  line: number;
  code: string;
  message: string;
  path?: string;
}

export type IngestEvent = ResultEvent | ErrorEvent;

/** A message with its address, between routing and storing. */
interface Addressed {
  line: number;
  message: InboundMessage;
  agentId: string;
  sessionKey: string;
  matchedBy: string;
  runId: string;
  incognito: boolean;
  plan?: SessionPlan;
}

const APPEND_CONCURRENCY = 32;

function errorEvent(line: number, err: unknown): ErrorEvent {
  const error = toSwitchboardError(err);
  const event: ErrorEvent = { type: 'error', line, code: error.code, message: `line ${line}: ${error.message}` };
  // For bad input, details.path is the JSON path of the offending field.
  const jsonPath = error.details?.path;
  if ((error.code === 'BAD_MESSAGE' || error.code === 'BAD_INPUT') && typeof jsonPath === 'string') event.path = jsonPath;
  return event;
}

/** Routing or the explicit/cron key families: where this message lives. */
function address(ctx: EngineContext, line: number, message: InboundMessage): Addressed {
  const runId = message.runId ?? randomUUID();
  if (message.sessionKey !== undefined) {
    const sessionKey = normalizeExplicitSessionKey(message.sessionKey, ctx.table.defaultAgentId);
    const { agentId } = parseSessionKey(sessionKey);
    const known = ctx.table.agents.length === 0 ? [ctx.table.defaultAgentId] : ctx.table.agents.map((a) => a.id);
    if (!known.includes(agentId)) {
      throw new SwitchboardError('BAD_MESSAGE', `"sessionKey" names agent "${agentId}", which is not configured (known: ${known.join(', ')})`, {
        details: { path: 'sessionKey' },
      });
    }
    return { line, message, agentId, sessionKey, matchedBy: 'explicit', runId, incognito: message.incognito };
  }
  const resolution = resolveRoute(ctx.table, message.route);
  const { agentId } = resolution.route;
  const sessionKey = message.cronJobId ? cronSessionKey(agentId, message.cronJobId) : resolution.route.sessionKey;
  return {
    line,
    message,
    agentId,
    sessionKey,
    matchedBy: resolution.route.matchedBy,
    runId,
    incognito: message.incognito || resolution.binding?.incognito === true,
  };
}

function planMessageOf(item: Addressed): PlanMessage {
  const { message } = item;
  return {
    kind: message.kind,
    text: message.text,
    messageId: message.messageId,
    sender: message.sender,
    channel: message.route.channel,
    accountId: message.route.accountId,
    peer: message.route.peer,
    parentPeer: message.route.parentPeer,
    threadId: message.route.threadId,
  };
}

/** The transcript record of one inbound message (user and cron turns are user messages). */
function messageRecord(item: Addressed, text: string | undefined, now: number): NewTranscriptEntry {
  const { message } = item;
  const meta: Record<string, unknown> = { channel: message.route.channel, runId: item.runId };
  if (message.messageId !== undefined) meta.messageId = message.messageId;
  if (message.sender) meta.sender = message.sender;
  if (message.route.threadId) meta.threadId = message.route.threadId;
  if (message.kind === 'heartbeat' || message.kind === 'system') {
    return { type: 'custom', customType: message.kind, data: { text: text ?? null, timestamp: message.timestamp ?? now, ...meta } };
  }
  const record: Record<string, unknown> = {
    role: 'user',
    content: [{ type: 'text', text: text ?? '' }],
    timestamp: message.timestamp ?? now,
    ...meta,
  };
  if (message.cronJobId) record.cron = { jobId: message.cronJobId };
  return { type: 'message', message: record };
}

function transcriptName(location: StoreLocation, sessionId: string, threadId?: string): string {
  return path.basename(threadId ? resolveThreadTranscriptPath(location.sessionsDir, sessionId, threadId) : resolveTranscriptPath(location.sessionsDir, sessionId));
}

/** Plans every message of one agent's store inside ONE locked read-modify-write of sessions.json. */
async function planStore(ctx: EngineContext, location: StoreLocation, items: Addressed[]): Promise<void> {
  const now = ctx.clock.now();
  await updateSessionStore(
    location.storePath,
    (store) => {
      // A mutator may be re-run (after a failing neighbour in the same write batch): start clean.
      for (const item of items) {
        const existing = Object.hasOwn(store, item.sessionKey) ? (store[item.sessionKey] as PlannedEntry) : undefined;
        const plan = planSessionMessage(existing, planMessageOf(item), {
          sessionKey: item.sessionKey,
          session: ctx.config.session,
          now,
          newSessionId: randomUUID,
          transcriptName: (sessionId, threadId) => transcriptName(location, sessionId, threadId),
        });
        item.plan = plan;
        if (!plan.duplicate) store[item.sessionKey] = plan.entry as SessionEntry;
      }
    },
    { lock: { acquireTimeoutMs: ctx.config.session?.writeLock?.acquireTimeoutMs } },
  );
}

interface SessionWork {
  location: StoreLocation;
  agentId: string;
  sessionKey: string;
  sessionId: string;
  file: string;
  /** The plan created this instance, so its transcript is expected not to exist yet. */
  expectNew: boolean;
  entries: NewTranscriptEntry[];
  items: Addressed[];
}

/** Groups planned messages by the transcript they append to, in arrival order. */
function collectWork(ctx: EngineContext, location: StoreLocation, items: Addressed[]): { work: SessionWork[]; rotations: { file: string; sessionKey: string }[] } {
  const bySession = new Map<string, SessionWork>();
  const rotations: { file: string; sessionKey: string }[] = [];
  const paths = new Map<string, string>();
  const now = ctx.clock.now();
  for (const item of items) {
    const plan = item.plan!;
    if (plan.duplicate) continue;
    const sessionFile = plan.entry.sessionFile ?? `${plan.entry.sessionId}.jsonl`;
    let file = paths.get(sessionFile);
    if (file === undefined) paths.set(sessionFile, (file = transcriptPathIn(location, sessionFile)));
    let work = bySession.get(file);
    if (!work) {
      work = { location, agentId: item.agentId, sessionKey: item.sessionKey, sessionId: plan.entry.sessionId, file, expectNew: false, entries: [], items: [] };
      bySession.set(file, work);
    }
    if (plan.created) work.expectNew = true;
    if (plan.rotation) {
      work.expectNew = true;
      if (plan.rotation.previousSessionFile) rotations.push({ file: transcriptPathIn(location, plan.rotation.previousSessionFile), sessionKey: item.sessionKey });
      if (plan.rotation.reason !== 'cron') {
        work.entries.push({ type: 'reset_notice', reason: plan.rotation.reason, previousSessionId: plan.rotation.previousSessionId });
      }
    }
    if (!plan.commandOnly) work.entries.push(messageRecord(item, plan.text, now));
    work.items.push(item);
  }
  return { work: [...bySession.values()], rotations };
}

/** Runs tasks with at most `limit` in flight. */
async function inPool<T>(items: T[], limit: number, task: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const workers = Array.from({ length: Math.min(limit, items.length) }, async () => {
    while (next < items.length) await task(items[next++]);
  });
  await Promise.all(workers);
}

/**
 * Appends one session's entries. If the transcript had to be created although the plan expected an
 * existing one, another process rotated this session in between: the records belong to the old
 * instance (they were admitted to it), so that stray file is archived like the rest of it.
 */
async function appendWork(ctx: EngineContext, work: SessionWork): Promise<void> {
  if (work.entries.length === 0) return;
  const lockOptions = sessionLockOptions(ctx, { sessionKey: work.sessionKey });
  await withLock(work.file, lockOptions, async (handle) => {
    const result = await appendEntries(work.file, work.entries, {
      session: { sessionId: work.sessionId, sessionKey: work.sessionKey, agentId: work.agentId },
      clock: ctx.clock,
      handle,
    });
    if (result.createdFile && !work.expectNew) {
      const store = await readSessionStore(work.location.storePath);
      if (store[work.sessionKey]?.sessionId !== work.sessionId) await archiveFile(work.file, 'reset', ctx.clock.now());
    }
  });
}

/** Archives the transcript of a rotated instance under its own write lock. */
async function archiveRotated(ctx: EngineContext, rotation: { file: string; sessionKey: string }): Promise<void> {
  await withLock(rotation.file, sessionLockOptions(ctx, { sessionKey: rotation.sessionKey }), () => archiveFile(rotation.file, 'reset', ctx.clock.now()));
}

function resultOf(item: Addressed, persisted: boolean): ResultEvent {
  const plan = item.plan;
  const rotation = plan?.rotation;
  return {
    type: 'result',
    line: item.line,
    ok: true,
    messageId: item.message.messageId ?? null,
    runId: item.runId,
    agentId: item.agentId,
    sessionKey: item.sessionKey,
    sessionId: plan ? plan.entry.sessionId : null,
    matchedBy: item.matchedBy,
    reset: rotation && rotation.reason !== 'cron' ? { reason: rotation.reason, previousSessionId: rotation.previousSessionId } : null,
    disposition: plan?.duplicate ? 'duplicate' : plan?.commandOnly ? 'command' : 'recorded',
    persisted,
  };
}

/** Ingests one batch of lines; returns one event per non-blank line, in line order. */
export async function ingestBatch(ctx: EngineContext, lines: NdjsonLine[]): Promise<IngestEvent[]> {
  const events = new Map<number, IngestEvent>();
  const byStore = new Map<string, { location: StoreLocation; items: Addressed[] }>();
  const locations = new Map<string, StoreLocation>();
  const order: number[] = [];

  for (const item of lines) {
    if ('error' in item) {
      order.push(item.line);
      events.set(item.line, { type: 'error', line: item.line, code: 'BAD_MESSAGE', message: `line ${item.line}: ${describeLineError(item.error, item.bytes)}` });
      continue;
    }
    if (item.text.trim() === '') continue;
    order.push(item.line);
    try {
      const addressed = address(ctx, item.line, parseMessageLine(item.text));
      if (addressed.incognito) {
        // Incognito: routed, never written by a one-shot ingest.
        events.set(item.line, resultOf(addressed, false));
        continue;
      }
      let location = locations.get(addressed.agentId);
      if (!location) locations.set(addressed.agentId, (location = storeFor(ctx, addressed.agentId)));
      let group = byStore.get(location.storePath);
      if (!group) byStore.set(location.storePath, (group = { location, items: [] }));
      group.items.push(addressed);
    } catch (err) {
      events.set(item.line, errorEvent(item.line, err));
    }
  }

  for (const { location, items } of byStore.values()) {
    try {
      await planStore(ctx, location, items);
    } catch (err) {
      for (const item of items) events.set(item.line, errorEvent(item.line, err));
      continue;
    }
    const { work, rotations } = collectWork(ctx, location, items);
    const failures = new Map<SessionWork, unknown>();
    await inPool(work, APPEND_CONCURRENCY, async (session) => {
      try {
        await appendWork(ctx, session);
      } catch (err) {
        failures.set(session, err);
      }
    });
    // Archive rotated instances only after the appends: an instance this very batch created
    // (then rotated, e.g. a cron job run twice) has its file only now.
    await inPool(rotations, APPEND_CONCURRENCY, async (rotation) => {
      try {
        await archiveRotated(ctx, rotation);
      } catch {
        // The new instance is already current; an unarchived old file is reported by doctor.
      }
    });
    for (const session of work) {
      const failure = failures.get(session);
      for (const item of session.items) events.set(item.line, failure === undefined ? resultOf(item, true) : errorEvent(item.line, failure));
    }
    for (const item of items) if (item.plan?.duplicate) events.set(item.line, resultOf(item, true));
    if (failures.size > 0) await forgetFailedMessageIds(location, [...failures.keys()].flatMap((s) => s.items));
  }
  return order.map((line) => events.get(line)!);
}

/**
 * A message whose append failed was not recorded, so a retry must not be taken for a duplicate:
 * its messageId is removed from the entry again (best effort — the store may be failing too).
 */
async function forgetFailedMessageIds(location: StoreLocation, items: Addressed[]): Promise<void> {
  const withIds = items.filter((item) => item.message.messageId !== undefined);
  if (withIds.length === 0) return;
  try {
    await updateSessionStore(location.storePath, (store) => {
      for (const item of withIds) {
        const entry = store[item.sessionKey];
        if (entry?.recentMessageIds) entry.recentMessageIds = forgetMessageId(entry.recentMessageIds as RecentMessageIds, item.message.messageId!);
      }
    });
  } catch {
    // Nothing more to do: the error events already tell the sender these lines were not taken.
  }
}

/**
 * The process exit code after some events, given the code so far: a failure that is not bad input
 * (I/O, busy, corrupt store) wins over bad lines (65), and the first such failure is kept.
 */
export function exitCodeFor(events: Iterable<IngestEvent>, soFar = 0): number {
  let code = soFar;
  for (const event of events) {
    if (event.type !== 'error') continue;
    const exit = event.code in EXIT_CODES ? EXIT_CODES[event.code as ErrorCode] : 1;
    const isInput = event.code === 'BAD_MESSAGE' || event.code === 'BAD_INPUT';
    if (isInput) code = code === 0 ? exit : code;
    else if (code === 0 || code === 65) code = exit;
  }
  return code;
}
