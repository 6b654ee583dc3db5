// Which stores a command works on, and the session listing (`sessions --json`, the server's
// sessions.list). Read-only: nothing here writes, so a listing loads none of the write paths.

import fs from 'node:fs';
import path from 'node:path';
import { SwitchboardError, normalizeAgentId } from '../core/index.js';
import { parseSessionKey } from '../routing/index.js';
import {
  checkSessionEntry,
  entryTranscriptName,
  isInMemory,
  readFirstLineRecord,
  readSessionStore,
  sessionEntryProblem,
  storedFileSizeSync,
  transcriptSharing,
  type SessionEntry,
  type TranscriptSharing,
  type StoreLocation,
} from '../store/index.js';
import { commandAgentId, incognitoStoreFor, knownAgentIds, storeFor, transcriptPathIn, type EngineContext } from './context.js';

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
    // As doctor's: a file that is not there in a folder that is not there is a wrong path, not an empty store.
    if (!fs.existsSync(storePath) && !fs.existsSync(path.dirname(storePath))) {
      throw new SwitchboardError('NOT_FOUND', `no store at ${storePath}`, { hint: 'give the path of a sessions.json file', details: { path: storePath } });
    }
    return [{ agentId: storeAgentId(ctx, storePath), sessionsDir: path.dirname(storePath), storePath }];
  }
  const agentIds = selection.allAgents ? knownAgentIds(ctx) : [selection.agent ? normalizeAgentId(selection.agent) : commandAgentId(ctx, 'the command')];
  // Agents may share one file (a `session.store` without `{agentId}`): each store once, the first
  // agent's, as OpenClaw's CLI dedupes its targets by path. Its rows name their own agents.
  const seen = new Set<string>();
  const stored = agentIds.map((id) => storeFor(ctx, id)).filter((location) => !seen.has(location.storePath) && seen.add(location.storePath));
  if (selection.agent) checkNamedAgent(ctx, stored[0]!, selection.agent);
  // A server's incognito sessions are part of what it shows (they exist nowhere else).
  const { incognitoRoot } = ctx;
  return incognitoRoot === undefined ? stored : [...stored, ...agentIds.map((id) => incognitoStoreFor(incognitoRoot, id))];
}

/**
 * The agent a `--store` file belongs to: the configured agent whose store it is, else the `<id>`
 * of a `…/agents/<id>/sessions/` folder (an agent removed from the config, another state dir),
 * else the default agent, as OpenClaw's CLI takes it for `--store`. The folder's parent's name
 * (what any other path would give) is no agent at all.
 */
function storeAgentId(ctx: EngineContext, storePath: string): string {
  const configured = knownAgentIds(ctx).find((id) => path.resolve(storeFor(ctx, id).storePath) === storePath);
  if (configured !== undefined) return configured;
  const sessionsDir = path.dirname(storePath);
  const agentDir = path.dirname(sessionsDir);
  if (path.basename(sessionsDir) === 'sessions' && path.basename(path.dirname(agentDir)) === 'agents') return normalizeAgentId(path.basename(agentDir));
  return ctx.table.defaultAgentId;
}

/**
 * `--agent X` names a configured agent, or one whose store is still on disk (an agent removed from
 * the config keeps its sessions): anything else is a typo, and an empty listing would hide it.
 */
function checkNamedAgent(ctx: EngineContext, location: StoreLocation, asGiven: string): void {
  const known = knownAgentIds(ctx);
  if (known.includes(location.agentId) || fs.existsSync(location.storePath)) return;
  // Ids are normalised (`../x` is read as `x`): the message says what was typed too.
  const named = asGiven === location.agentId ? `"${asGiven}"` : `${JSON.stringify(asGiven)} (read as "${location.agentId}")`;
  throw new SwitchboardError('NOT_FOUND', `no agent ${named}: not configured (known: ${known.join(', ')}) and no store at ${location.storePath}`, {
    hint: 'see the configured agents with `switchboard config show`, or list every store with `switchboard sessions --all-agents`',
    details: { agentId: location.agentId, known },
  });
}

/**
 * When the instance's transcript began, by its header — asked only for an entry without a usable
 * `sessionStartedAt` (OpenClaw's own reset writes none; OpenClaw then takes the header's time as
 * the start of the daily check). Undefined when the entry has a start, or the header is missing,
 * unreadable, of another sessionId or without a time: the check then goes on without it.
 */
export async function transcriptStartedAtOf(location: StoreLocation, entry: SessionEntry): Promise<number | undefined> {
  const started = entry.sessionStartedAt;
  if (typeof started === 'number' && Number.isFinite(started) && started >= 0) return undefined;
  try {
    const header = await readFirstLineRecord(transcriptFileOf(location, entry));
    if (header === null || header.type !== 'session') return undefined;
    const { id, timestamp } = header as { id?: unknown; timestamp?: unknown };
    if (typeof id === 'string' && id !== entry.sessionId) return undefined;
    const at = typeof timestamp === 'string' ? Date.parse(timestamp) : Number.NaN;
    return Number.isFinite(at) && at >= 0 ? at : undefined;
  } catch {
    return undefined;
  }
}

/** The transcript of an entry; an entry of the wrong shape is STORE_CORRUPT (for that entry only). */
export function transcriptFileOf(location: StoreLocation, entry: SessionEntry, key = '(unknown key)'): string {
  return transcriptPathIn(location, entryTranscriptName(checkSessionEntry(location.storePath, key, entry)));
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
  /** Token counts as the runner last reported them (OpenClaw's fields); null when never reported. */
  inputTokens: number | null;
  outputTokens: number | null;
  /** The context in use after the latest call. */
  totalTokens: number | null;
  /** The model's context window. */
  contextTokens: number | null;
  pinned: boolean;
  transcriptBytes: number | null;
  /** Kept only in the memory of the running `serve` (gone when it stops); never on disk. */
  incognito: boolean;
  /** Only on a row of the wrong shape: why no command can use it (`switchboard doctor` lists it too). */
  problem?: string;
}

export interface SessionListing {
  stores: { agentId: string; path: string }[];
  /** Rows listed (after --limit). */
  count: number;
  /** Rows that matched before --limit cut the list. */
  total: number;
  sessions: SessionRow[];
}

function kindOf(key: string): string {
  try {
    return parseSessionKey(key).kind;
  } catch {
    return 'other';
  }
}

/**
 * The agent a listed session belongs to (`sessions`, `queue`): the one its key names
 * (`agent:<id>:…`), else its store's — as OpenClaw lists them; agents may share one store.
 */
export function listedAgentId(key: string, location: StoreLocation): string {
  try {
    return parseSessionKey(key).agentId;
  } catch {
    return location.agentId;
  }
}

function countOf(value: unknown): number | null {
  return typeof value === 'number' && Number.isFinite(value) && value >= 0 ? value : null;
}

/** The token fields of an entry, as written by switchboard or OpenClaw (anything else is null). */
export function tokenCountsOf(entry: SessionEntry): Pick<SessionRow, 'inputTokens' | 'outputTokens' | 'totalTokens' | 'contextTokens'> {
  // OpenClaw marks a total that no longer describes the context (after a compaction) as not fresh.
  const total = entry.totalTokensFresh === false ? null : countOf(entry.totalTokens);
  return { inputTokens: countOf(entry.inputTokens), outputTokens: countOf(entry.outputTokens), totalTokens: total, contextTokens: countOf(entry.contextTokens) };
}

/** An entry that passed the filter: what sorting needs, and where the rest of its row comes from. */
interface Candidate {
  location: StoreLocation;
  incognito: boolean;
  key: string;
  entry: SessionEntry;
  updatedAt: number;
  /** Which keys of its store share a transcript: built once per store, when a row of it is built. */
  sharing: () => TranscriptSharing;
}

/** Rows of the selected stores, newest first; `activeMinutes` keeps rows updated that recently. */
export async function listSessions(ctx: EngineContext, selection: StoreSelection & { activeMinutes?: number; limit?: number } = {}): Promise<SessionListing> {
  const stores = selectStores(ctx, selection);
  const now = ctx.clock.now();
  const maxAgeMs = selection.activeMinutes !== undefined ? selection.activeMinutes * 60_000 : undefined;
  // Filtering and sorting need only a time and a key per entry; the row itself (shape check,
  // kind, transcript path and size) is built for the rows --limit keeps: the default listing of a
  // 10 000-session store builds 100 rows, not 10 000.
  const candidates: Candidate[] = [];
  for (const location of stores) {
    const store = await readSessionStore(location.storePath);
    const incognito = isInMemory(location.storePath);
    let index: TranscriptSharing | undefined;
    const sharing = (): TranscriptSharing => (index ??= transcriptSharing(store));
    for (const key of Object.keys(store)) {
      const entry = store[key]!;
      const updatedAt = typeof entry.updatedAt === 'number' && Number.isFinite(entry.updatedAt) ? entry.updatedAt : 0;
      if (maxAgeMs !== undefined && now - updatedAt > maxAgeMs) continue;
      candidates.push({ location, incognito, key, entry, updatedAt, sharing });
    }
  }
  candidates.sort((a, b) => b.updatedAt - a.updatedAt || (a.key < b.key ? -1 : 1));
  const limited = selection.limit !== undefined ? candidates.slice(0, selection.limit) : candidates;
  const sessions = limited.map((candidate) => rowOf(candidate, now));
  return {
    // Files only: a server's incognito rows carry their marker instead of a store path.
    stores: stores.filter((s) => !isInMemory(s.storePath)).map((s) => ({ agentId: s.agentId, path: s.storePath })),
    count: sessions.length,
    total: candidates.length,
    sessions,
  };
}

/** One listed row. A row of the wrong shape is listed (marked), not skipped and not a crash of the listing. */
function rowOf({ location, incognito, key, entry, updatedAt, sharing }: Candidate, now: number): SessionRow {
  const shape = sessionEntryProblem(entry, location.sessionsDir);
  const sharedWith = shape === null ? sharing().sharedWith(key) : [];
  const problem = shape ?? (sharedWith.length > 0 ? { reason: `it names the same transcript as ${sharedWith.join(', ')}` } : null);
  const model = entry.modelOverride ?? entry.model;
  const tokens = tokenCountsOf(entry);
  // Fields written out, not spread from tokenCountsOf: a spread in the literal copied through a
  // temporary object per row.
  const row: SessionRow = {
    agentId: listedAgentId(key, location),
    key,
    // A row with no sessionId at all (one that is not even an object) shows none.
    sessionId: typeof entry.sessionId === 'string' ? entry.sessionId : entry.sessionId === undefined ? '' : String(entry.sessionId),
    kind: kindOf(key),
    chatType: typeof entry.chatType === 'string' ? entry.chatType : null,
    updatedAt,
    ageMs: Math.max(0, now - updatedAt),
    sessionStartedAt: shape === null ? (entry.sessionStartedAt ?? null) : null,
    lastInteractionAt: shape === null ? (entry.lastInteractionAt ?? null) : null,
    model: typeof model === 'string' ? model : null,
    inputTokens: tokens.inputTokens,
    outputTokens: tokens.outputTokens,
    totalTokens: tokens.totalTokens,
    contextTokens: tokens.contextTokens,
    pinned: entry.pinned === true,
    // transcriptFileOf() would repeat the shape check just made; the name is still checked.
    transcriptBytes: shape === null ? storedFileSizeSync(transcriptPathIn(location, entryTranscriptName(entry))) : null,
    incognito,
  };
  if (problem !== null) row.problem = problem.reason;
  return row;
}
