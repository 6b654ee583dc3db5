// Session operations shared by the CLI and the server: find, list, show, reset, pin, delete.
// Every change goes through the store's one update path; removals archive first.

import { randomUUID } from 'node:crypto';
import fs, { promises as fsp } from 'node:fs';
import path from 'node:path';
import { SwitchboardError, normalizeAgentId } from '../core/index.js';
import { evaluateFreshness, resetPolicyFor, rotateEntry, type Freshness, type PlannedEntry } from '../policy/index.js';
import { normalizeExplicitSessionKey, parseSessionKey } from '../routing/index.js';
import {
  appendToTranscript,
  archiveFile,
  lockPathFor,
  readLockOwner,
  readSessionStore,
  transcriptStats,
  updateSessionStore,
  withLock,
  type LockOwnerRecord,
  type SessionEntry,
  type StoreLocation,
  type TranscriptReadStats,
} from '../store/index.js';
import { knownAgentIds, sessionLockOptions, storeFor, transcriptNameFor, transcriptPathIn, type EngineContext } from './context.js';

export interface StoreSelection {
  agent?: string;
  allAgents?: boolean;
  /** An explicit sessions.json path (`--store`). */
  storePath?: string;
}

/** The stores a command works on: one agent's (default agent by default), all, or a given file. */
export function selectStores(ctx: EngineContext, selection: StoreSelection = {}): StoreLocation[] {
  if (selection.storePath) {
    const storePath = path.resolve(selection.storePath);
    return [{ agentId: normalizeAgentId(path.basename(path.dirname(path.dirname(storePath)))), sessionsDir: path.dirname(storePath), storePath }];
  }
  if (selection.allAgents) return knownAgentIds(ctx).map((id) => storeFor(ctx, id));
  return [storeFor(ctx, selection.agent ? normalizeAgentId(selection.agent) : ctx.table.defaultAgentId)];
}

export function transcriptFileOf(location: StoreLocation, entry: SessionEntry): string {
  const name = typeof entry.sessionFile === 'string' ? entry.sessionFile : `${entry.sessionId}.jsonl`;
  return transcriptPathIn(location, name);
}

export interface SessionRow {
  agentId: string;
  key: string;
  sessionId: string;
  kind: string;
  chatType: string | null;
  updatedAt: number;
  ageMs: number;
  sessionStartedAt: number | null;
  lastInteractionAt: number | null;
  model: string | null;
  pinned: boolean;
  transcriptBytes: number | null;
}

export interface SessionListing {
  stores: { agentId: string; path: string }[];
  count: number;
  sessions: SessionRow[];
}

function kindOf(key: string): string {
  try {
    return parseSessionKey(key).kind;
  } catch {
    return 'other';
  }
}

/** Rows of the selected stores, newest first; `activeMinutes` keeps rows updated that recently. */
export async function listSessions(ctx: EngineContext, selection: StoreSelection & { activeMinutes?: number; limit?: number } = {}): Promise<SessionListing> {
  const stores = selectStores(ctx, selection);
  const now = ctx.clock.now();
  const rows: (SessionRow & { file: string })[] = [];
  for (const location of stores) {
    const store = await readSessionStore(location.storePath);
    for (const [key, entry] of Object.entries(store)) {
      const updatedAt = typeof entry.updatedAt === 'number' ? entry.updatedAt : 0;
      if (selection.activeMinutes !== undefined && now - updatedAt > selection.activeMinutes * 60_000) continue;
      rows.push({
        agentId: location.agentId,
        key,
        sessionId: entry.sessionId,
        kind: kindOf(key),
        chatType: entry.chatType ?? null,
        updatedAt,
        ageMs: Math.max(0, now - updatedAt),
        sessionStartedAt: entry.sessionStartedAt ?? null,
        lastInteractionAt: entry.lastInteractionAt ?? null,
        model: entry.modelOverride ?? entry.model ?? null,
        pinned: entry.pinned === true,
        transcriptBytes: null,
        file: transcriptFileOf(location, entry),
      });
    }
  }
  rows.sort((a, b) => b.updatedAt - a.updatedAt || (a.key < b.key ? -1 : 1));
  const limited = selection.limit !== undefined ? rows.slice(0, selection.limit) : rows;
  // Synchronous on purpose: a stat of a file whose metadata is cached costs microseconds, while
  // the thread-pool round trip of fs.promises.stat costs several times more (measured 57 ms vs
  // 340 ms for 10 000 transcripts). Listing is not on the message path of a server.
  for (const row of limited) row.transcriptBytes = fs.statSync(row.file, { throwIfNoEntry: false })?.size ?? null;
  return {
    stores: stores.map((s) => ({ agentId: s.agentId, path: s.storePath })),
    count: limited.length,
    sessions: limited.map(({ file: _file, ...row }) => row),
  };
}

export interface FoundSession {
  location: StoreLocation;
  key: string;
  entry: SessionEntry;
}

/** Finds a session by key (explicit-key rules: a bare `foo` is the default agent's) or by sessionId. */
export async function findSession(ctx: EngineContext, keyOrId: string, selection: StoreSelection = {}): Promise<FoundSession> {
  const wanted = keyOrId.trim();
  if (wanted === '') throw new SwitchboardError('USAGE', 'a session key or session id is required');
  let key: string | undefined;
  try {
    key = normalizeExplicitSessionKey(wanted, ctx.table.defaultAgentId);
  } catch {
    key = undefined;
  }
  const stores =
    selection.storePath || selection.agent
      ? selectStores(ctx, selection)
      : key
        ? [storeFor(ctx, parseSessionKey(key).agentId), ...selectStores(ctx, { allAgents: true })]
        : selectStores(ctx, { allAgents: true });
  const seen = new Set<string>();
  for (const location of stores) {
    if (seen.has(location.storePath)) continue;
    seen.add(location.storePath);
    const store = await readSessionStore(location.storePath);
    if (key && Object.hasOwn(store, key)) return { location, key, entry: store[key] };
    for (const [candidate, entry] of Object.entries(store)) {
      if (entry.sessionId === wanted) return { location, key: candidate, entry };
    }
  }
  throw new SwitchboardError('NOT_FOUND', `no session "${wanted}"`, { hint: 'list sessions with `switchboard sessions --all-agents`' });
}

export interface SessionDetails extends FoundSession {
  transcriptPath: string;
  freshness: Freshness;
  lock: { path: string; owner: LockOwnerRecord | null } | null;
  transcript: TranscriptReadStats | null;
}

export async function showSession(ctx: EngineContext, keyOrId: string, selection: StoreSelection = {}): Promise<SessionDetails> {
  const found = await findSession(ctx, keyOrId, selection);
  const transcriptPath = transcriptFileOf(found.location, found.entry);
  const origin = (found.entry.origin ?? {}) as { channel?: string; peer?: { kind: string; id: string }; threadId?: string };
  const policy = resetPolicyFor(ctx.config.session, found.key, { channel: origin.channel ?? found.entry.channel ?? '', threadId: origin.threadId, peer: origin.peer });
  const freshness = evaluateFreshness(found.entry, policy, ctx.clock.now());
  const lockPath = lockPathFor(transcriptPath);
  const lockExists = await fsp.stat(lockPath).then(
    () => true,
    () => false,
  );
  const transcript = await transcriptStats(transcriptPath).catch((err: unknown) => {
    if (err instanceof SwitchboardError && err.code === 'NOT_FOUND') return null;
    throw err;
  });
  return { ...found, transcriptPath, freshness, lock: lockExists ? { path: lockPath, owner: await readLockOwner(lockPath) } : null, transcript };
}


export interface ResetOutcome {
  sessionKey: string;
  previousSessionId: string;
  sessionId: string;
  archivedTo: string | null;
}

/**
 * Rotates a session now (`sessions reset`): the old transcript is archived as `.reset.<ts>` under
 * its write lock — so an append or run in progress finishes first — and the new one starts
 * with a reset_notice.
 */
export async function resetSession(ctx: EngineContext, keyOrId: string, options: { reason?: string; model?: string } & StoreSelection = {}): Promise<ResetOutcome> {
  const found = await findSession(ctx, keyOrId, options);
  const { location, key } = found;
  const oldFile = transcriptFileOf(location, found.entry);
  const lockOptions = sessionLockOptions(ctx, { sessionKey: key });
  return withLock(oldFile, lockOptions, async () => {
    const now = ctx.clock.now();
    const rotated = await updateSessionStore(location.storePath, (store) => {
      const current = store[key];
      if (!current) throw new SwitchboardError('NOT_FOUND', `session "${key}" was deleted meanwhile`);
      if (current.sessionId !== found.entry.sessionId) {
        throw new SwitchboardError('SESSION_BUSY', `session "${key}" was rotated by someone else meanwhile`, { hint: 'run the command again' });
      }
      const threadId = (current.origin as { threadId?: string } | undefined)?.threadId;
      const next = rotateEntry(current as PlannedEntry, { now, newSessionId: randomUUID, transcriptName: (id, thread) => transcriptNameFor(location, id, thread) }, threadId) as SessionEntry;
      if (options.model) next.model = next.modelOverride = options.model;
      store[key] = next;
      return next;
    });
    const archivedTo = await archiveFile(oldFile, 'reset', now);
    const notice: Record<string, unknown> = { type: 'reset_notice', reason: 'command', previousSessionId: found.entry.sessionId };
    if (options.reason) notice.note = options.reason;
    if (options.model) notice.model = options.model;
    await appendToTranscript(transcriptFileOf(location, rotated), notice as { type: string }, {
      session: { sessionId: rotated.sessionId, sessionKey: key, agentId: location.agentId },
      clock: ctx.clock,
      lockOptions,
    });
    return { sessionKey: key, previousSessionId: found.entry.sessionId, sessionId: rotated.sessionId, archivedTo };
  });
}

/** Sets or clears `pinned` (pinned sessions are never pruned, capped or evicted). */
export async function setPinned(ctx: EngineContext, keyOrId: string, pinned: boolean, selection: StoreSelection = {}): Promise<{ sessionKey: string; pinned: boolean }> {
  const found = await findSession(ctx, keyOrId, selection);
  await updateSessionStore(found.location.storePath, (store) => {
    const entry = store[found.key];
    if (!entry) throw new SwitchboardError('NOT_FOUND', `session "${found.key}" was deleted meanwhile`);
    if (pinned) entry.pinned = true;
    else delete entry.pinned;
    entry.updatedAt = ctx.clock.now();
  });
  return { sessionKey: found.key, pinned };
}

/** Removes a session: its transcript is archived as `.deleted.<ts>` first, then the entry goes. */
export async function deleteSession(ctx: EngineContext, keyOrId: string, selection: StoreSelection = {}): Promise<{ sessionKey: string; sessionId: string; archivedTo: string | null }> {
  const found = await findSession(ctx, keyOrId, selection);
  const file = transcriptFileOf(found.location, found.entry);
  return withLock(file, sessionLockOptions(ctx, { sessionKey: found.key }), async () => {
    const archivedTo = await archiveFile(file, 'deleted', ctx.clock.now());
    await updateSessionStore(found.location.storePath, (store) => {
      if (store[found.key]?.sessionId === found.entry.sessionId) delete store[found.key];
    });
    return { sessionKey: found.key, sessionId: found.entry.sessionId, archivedTo };
  });
}
