// What `switchboard top` shows, as plain data: the sources build a TopSnapshot, the view renders
// one. Nothing here does I/O, so the view can be tested with a fixed snapshot.

export type SourceKind = 'server' | 'store';

export interface TopRun {
  runId: string;
  sessionKey: string;
  agentId: string;
  lane: string;
  startedAt: number;
  pid: number;
  hostname: string;
  /** running, aborting (abort asked for), holder-dead (its process is gone). */
  state: 'running' | 'aborting' | 'holder-dead';
  /** A server's incognito session (kept in its memory only). */
  incognito?: boolean;
}

export interface TopLane {
  lane: string;
  /** Slot locks held now (by any process). */
  used: number;
  capacity: number;
}

export interface TopOwner {
  pid: number;
  hostname: string;
  /** false: that process is gone (the next ingest or serve takes the queue over); null: unknown. */
  alive: boolean | null;
}

export interface TopQueued {
  runId: string;
  sessionKey: string;
  agentId: string;
  mode: string;
  kind: string;
  state: string;
  /** Who sent the message. */
  requester: string;
  /** The process that drains the session's queue, when one has claimed it. */
  owner: TopOwner | null;
  enqueuedAt: number;
  position: number;
  /** A server's incognito session (kept in its memory only). */
  incognito?: boolean;
}

export interface TopLock {
  /** Relative to the state dir when inside it. */
  path: string;
  pid: number | null;
  hostname: string | null;
  sessionKey: string | null;
  ageMs: number | null;
  maxHoldMs: number | null;
  /** held, stale, over-held, holder-dead (comma-separated when several apply). */
  state: string;
}

export interface TopEvent {
  at: number;
  type: string;
  sessionKey: string | null;
  runId: string | null;
  detail: string;
}

export interface TopSnapshot {
  source: SourceKind;
  /** One line on where the data comes from (socket and server pid, or the state dir). */
  sourceLabel: string;
  stateDir: string;
  takenAt: number;
  active: TopRun[];
  lanes: TopLane[];
  queued: TopQueued[];
  locks: TopLock[];
  /** Newest first. */
  events: TopEvent[];
  /** Why the last refresh failed, if it did (the rest is the previous data). */
  error?: string;
}

/** How many events a source keeps; the view shows as many as fit. */
export const EVENT_HISTORY = 50;

/** A row the keyboard can select: an active run or a queued item. */
export interface SelectableRow {
  kind: 'active' | 'queued';
  runId: string;
  sessionKey: string;
}

export function selectableRows(snapshot: TopSnapshot | null): SelectableRow[] {
  if (snapshot === null) return [];
  return [
    ...snapshot.active.map((run) => ({ kind: 'active' as const, runId: run.runId, sessionKey: run.sessionKey })),
    ...snapshot.queued.map((item) => ({ kind: 'queued' as const, runId: item.runId, sessionKey: item.sessionKey })),
  ];
}

export function rowId(row: SelectableRow): string {
  return `${row.kind}:${row.runId}`;
}

function clip(text: string, width: number): string {
  const line = text.replace(/\s+/g, ' ').trim();
  return line.length <= width ? line : `${line.slice(0, Math.max(0, width - 1))}…`;
}

function stringField(value: unknown): string | null {
  return typeof value === 'string' && value !== '' ? value : null;
}

/** A server push (`{event, …}`) as an event line: its type, session, run and the one detail that matters. */
export function eventFromPush(push: Record<string, unknown>, at: number): TopEvent {
  let type = typeof push.event === 'string' ? push.event : 'event';
  // A run someone stopped (queue abort, top's a, /stop, an interrupt) did not fail: it was aborted.
  if (type === 'run_failed' && push.status === 'aborted') type = 'aborted';
  const details: string[] = [];
  const add = (label: string, value: unknown): void => {
    let text: string | undefined;
    if (typeof value === 'string' && value !== '') text = `${label}${clip(value, 60)}`;
    else if (typeof value === 'number' || typeof value === 'boolean') text = `${label}${value}`;
    if (text !== undefined && !details.includes(text)) details.push(text);
  };
  switch (type) {
    case 'result':
      add('', push.disposition);
      add('from ', push.requester);
      break;
    case 'run_started':
      add('lane ', push.lane);
      add('messages ', push.messages);
      break;
    case 'run_ended':
      add('', push.status);
      break;
    case 'reply':
      add('', push.text);
      if (push.delivered === false) details.push('(not delivered)');
      break;
    case 'dropped':
    case 'expired': {
      add('', push.reason);
      add('from ', push.requester);
      const by = push.cancelledBy as { pid?: unknown; user?: unknown } | undefined;
      if (by && typeof by === 'object') add('by pid ', by.pid);
      break;
    }
    case 'run_failed':
      add('', push.reason);
      add('', push.message);
      break;
    case 'aborted':
      add('', push.message);
      break;
    case 'overflow':
      add('dropped ', push.dropped);
      break;
    case 'shutdown':
      add('', push.reason);
      break;
    default:
      break;
  }
  return { at, type, sessionKey: stringField(push.sessionKey), runId: stringField(push.runId), detail: details.join(' ') };
}

/**
 * Without a server nothing is pushed, so the store source reports what changed between two
 * polls: runs that appeared or went away, items that were queued or left the queue.
 */
export function eventsBetween(before: TopSnapshot | null, after: Pick<TopSnapshot, 'active' | 'queued'>, at: number): TopEvent[] {
  if (before === null) return [];
  const events: TopEvent[] = [];
  const runsBefore = new Map(before.active.map((run) => [run.runId, run]));
  const runsAfter = new Map(after.active.map((run) => [run.runId, run]));
  const queuedBefore = new Map(before.queued.map((item) => [item.runId, item]));
  const queuedAfter = new Map(after.queued.map((item) => [item.runId, item]));
  for (const [runId, item] of queuedBefore) {
    if (!queuedAfter.has(runId)) {
      events.push({ at, type: 'dequeued', sessionKey: item.sessionKey, runId, detail: runsAfter.has(runId) ? 'now running' : 'left the queue' });
    }
  }
  for (const [runId, run] of runsBefore) {
    if (!runsAfter.has(runId)) events.push({ at, type: 'run_gone', sessionKey: run.sessionKey, runId, detail: 'no longer active' });
  }
  for (const [runId, item] of queuedAfter) {
    if (!queuedBefore.has(runId)) events.push({ at, type: 'queued', sessionKey: item.sessionKey, runId, detail: `${item.mode}/${item.kind} from ${clip(item.requester, 30)}` });
  }
  for (const [runId, run] of runsAfter) {
    if (!runsBefore.has(runId)) events.push({ at, type: 'run_seen', sessionKey: run.sessionKey, runId, detail: `lane ${run.lane}` });
  }
  return events;
}

/** Adds events (oldest first in `fresh`) to a newest-first history, keeping EVENT_HISTORY. */
export function pushEvents(history: TopEvent[], fresh: TopEvent[]): TopEvent[] {
  if (fresh.length === 0) return history;
  return [...[...fresh].reverse(), ...history].slice(0, EVENT_HISTORY);
}
