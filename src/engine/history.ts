// Instance history of a session key, derived from what is on disk: the current entry, the
// transcripts in the sessions folder (live and archived `.reset.<ts>` / `.deleted.<ts>`), their
// headers (sessionId, key, start) and reset notices (why the previous instance ended). No index
// is kept, so nothing can drift: the files are the history.

import { promises as fsp } from 'node:fs';
import path from 'node:path';
import { SwitchboardError, errnoOf } from '../core/index.js';
import { normalizeExplicitSessionKey, parseSessionKey } from '../routing/index.js';
import {
  THREAD_INFIX,
  TRANSCRIPT_SUFFIX,
  entryTranscriptName,
  findInstanceTranscript,
  isSessionId,
  parseArchiveName,
  readSessionStore,
  readTranscriptHead,
  resolveInside,
  sessionEntryProblem,
  type SessionEntry,
  type StoreLocation,
  type TranscriptRecord,
} from '../store/index.js';
import { storeFor, type EngineContext } from './context.js';
import { selectStores, type StoreSelection } from './session-list.js';
import { findSession } from './sessions.js';

/** Why an instance ended: a reset notice's reason, `cron` (every cron run), `deleted`, or `reset` when no notice says more. */
export type InstanceEndReason = 'command' | 'daily' | 'idle' | 'cron' | 'deleted' | 'reset' | string;

export interface InstanceRecord {
  sessionId: string;
  /** The instance the key's entry names now. */
  current: boolean;
  /** When it began: the entry's sessionStartedAt for the current one, else its header's time. */
  startedAt: number | null;
  /** When it was archived (the archive name's time); null while current or not archived. */
  endedAt: number | null;
  reason: InstanceEndReason | null;
  /** `archived` (a `.reset.`/`.deleted.` file), `current`, or `detached`: a live file the entry no longer names. */
  state: 'current' | 'archived' | 'detached';
  file: string;
  bytes: number;
}

export interface SessionHistory {
  agentId: string;
  sessionKey: string;
  storePath: string;
  /** Oldest first. */
  instances: InstanceRecord[];
}

interface Candidate {
  name: string;
  file: string;
  /** The sessionId the file name gives. */
  nameId: string;
  archive: { reason: 'reset' | 'deleted'; archivedAt: number } | null;
  header: TranscriptRecord | null;
  first: TranscriptRecord | null;
  bytes: number;
}

/** `<id>.jsonl` / `<id>-topic-<t>.jsonl` → id; null for any other name. */
function sessionIdOfTranscriptName(name: string): string | null {
  if (!name.endsWith(TRANSCRIPT_SUFFIX)) return null;
  const stem = name.slice(0, -TRANSCRIPT_SUFFIX.length);
  const at = stem.indexOf(THREAD_INFIX);
  const id = at > 0 ? stem.slice(0, at) : stem;
  return isSessionId(id) ? id : null;
}

async function candidateOf(dir: string, name: string): Promise<Candidate | null> {
  const archive = parseArchiveName(name);
  const nameId = sessionIdOfTranscriptName(archive === null ? name : archive.originalName);
  if (nameId === null) return null;
  const file = resolveInside(dir, name);
  let records: TranscriptRecord[] = [];
  let bytes = 0;
  try {
    bytes = (await fsp.lstat(file)).size;
    records = await readTranscriptHead(file, 2);
  } catch {
    // unreadable (a link, a FIFO, gone meanwhile): doctor reports it; history lists what it can read
    return null;
  }
  const header = records[0]?.type === 'session' ? records[0] : null;
  return {
    name,
    file,
    nameId,
    archive: archive === null ? null : { reason: archive.reason, archivedAt: archive.archivedAt },
    header,
    first: header === null ? (records[0] ?? null) : (records[1] ?? null),
    bytes,
  };
}

const idOf = (c: Candidate): string => (c.header !== null && typeof c.header.id === 'string' ? c.header.id : c.nameId);

/** The instances of `key` in one sessions folder (see the module comment for what counts). */
export async function instanceHistory(location: StoreLocation, key: string): Promise<SessionHistory> {
  let store: Record<string, SessionEntry> = {};
  try {
    store = await readSessionStore(location.storePath);
  } catch (err) {
    if (!(err instanceof SwitchboardError && err.code === 'NOT_FOUND')) throw err;
  }
  const entry = Object.hasOwn(store, key) ? store[key] : undefined;
  const usable = entry !== undefined && sessionEntryProblem(entry, location.sessionsDir) === null ? entry : undefined;
  // Live files other entries name belong to those keys: no need to open them.
  const ownedElsewhere = new Set<string>();
  for (const [other, e] of Object.entries(store)) {
    if (other !== key && sessionEntryProblem(e, location.sessionsDir) === null) ownedElsewhere.add(entryTranscriptName(e));
  }
  let names: string[] = [];
  try {
    names = await fsp.readdir(location.sessionsDir);
  } catch (err) {
    if (errnoOf(err) !== 'ENOENT') throw err;
  }
  const candidates: Candidate[] = [];
  for (const name of names.sort()) {
    if (ownedElsewhere.has(name)) continue;
    const candidate = await candidateOf(location.sessionsDir, name);
    if (candidate !== null) candidates.push(candidate);
  }

  // Members: files whose header names the key, the current entry's file, and — for headers
  // without a key (OpenClaw's) — instances a member's reset notice names as its predecessor.
  const members = new Set<Candidate>();
  const currentName = usable !== undefined ? entryTranscriptName(usable) : undefined;
  for (const c of candidates) {
    if (c.header?.sessionKey === key || (c.archive === null && c.name === currentName)) members.add(c);
  }
  const previousOf = (c: Candidate): string | null =>
    c.first?.type === 'reset_notice' && typeof c.first.previousSessionId === 'string' ? c.first.previousSessionId : null;
  for (let grew = true; grew; ) {
    grew = false;
    const wanted = new Set([...members].map(previousOf).filter((id): id is string => id !== null));
    for (const c of candidates) {
      if (!members.has(c) && wanted.has(idOf(c)) && (c.header?.sessionKey === undefined || c.header.sessionKey === key)) {
        members.add(c);
        grew = true;
      }
    }
  }

  // Why each instance ended: the reset notice of its successor names it.
  const endReason = new Map<string, string>();
  for (const c of members) {
    const previous = previousOf(c);
    if (previous !== null && typeof c.first?.reason === 'string') endReason.set(previous, c.first.reason);
  }
  let cron = false;
  try {
    cron = parseSessionKey(key).kind === 'cron';
  } catch {
    cron = false;
  }
  const instances = [...members].map((c): InstanceRecord => {
    const sessionId = idOf(c);
    const current = c.archive === null && c.name === currentName;
    const headerTime = c.header !== null && typeof c.header.timestamp === 'string' ? Date.parse(c.header.timestamp) : NaN;
    const startedAt = current && typeof usable?.sessionStartedAt === 'number' ? usable.sessionStartedAt : Number.isNaN(headerTime) ? null : headerTime;
    let reason: InstanceEndReason | null = null;
    if (c.archive?.reason === 'deleted') reason = 'deleted';
    else if (c.archive !== null) reason = endReason.get(sessionId) ?? (cron ? 'cron' : 'reset');
    return {
      sessionId,
      current,
      startedAt,
      endedAt: c.archive?.archivedAt ?? null,
      reason,
      state: current ? 'current' : c.archive !== null ? 'archived' : 'detached',
      file: c.file,
      bytes: c.bytes,
    };
  });
  const time = (i: InstanceRecord): number => i.startedAt ?? i.endedAt ?? Number.MAX_SAFE_INTEGER;
  instances.sort((a, b) => (a.current === b.current ? time(a) - time(b) || (a.endedAt ?? Infinity) - (b.endedAt ?? Infinity) : a.current ? 1 : -1));
  return { agentId: location.agentId, sessionKey: key, storePath: location.storePath, instances };
}

/**
 * `sessions history KEY|SESSION_ID`: a current key or session id as `sessions show` finds it; a
 * key with no entry any more (deleted: its archives remain); or the id of an archived instance.
 */
export async function sessionHistory(ctx: EngineContext, keyOrId: string, selection: StoreSelection = {}): Promise<SessionHistory> {
  let target: { location: StoreLocation; key: string } | null = null;
  try {
    const found = await findSession(ctx, keyOrId, selection);
    target = { location: found.location, key: found.key };
  } catch (err) {
    if (!(err instanceof SwitchboardError && err.code === 'NOT_FOUND')) throw err;
  }
  if (target === null) {
    const archived = await findInstance(ctx, keyOrId.trim(), selection);
    if (archived !== null && typeof archived.sessionKey === 'string') target = { location: archived.location, key: archived.sessionKey };
  }
  if (target === null) {
    let key: string | undefined;
    try {
      key = normalizeExplicitSessionKey(keyOrId, ctx.table.defaultAgentId);
    } catch {
      key = undefined;
    }
    if (key !== undefined) {
      const location = selection.storePath || selection.agent ? selectStores(ctx, selection)[0]! : storeFor(ctx, parseSessionKey(key).agentId);
      const history = await instanceHistory(location, key);
      if (history.instances.length > 0) return history;
    }
    throw new SwitchboardError('NOT_FOUND', `no session or instance "${keyOrId.trim()}"`, { hint: 'list sessions with `switchboard sessions --all-agents`' });
  }
  return instanceHistory(target.location, target.key);
}

export interface FoundInstance {
  location: StoreLocation;
  sessionId: string;
  /** The instance's transcript: still under its own name, else its newest archive. */
  file: string;
  /** The key its header names (absent in transcripts OpenClaw wrote). */
  sessionKey?: string;
}

/** Any instance by sessionId — current or archived — in the selected stores (all agents by default). */
export async function findInstance(ctx: EngineContext, sessionId: string, selection: StoreSelection = {}): Promise<FoundInstance | null> {
  if (!isSessionId(sessionId)) return null;
  const stores = selection.storePath || selection.agent ? selectStores(ctx, selection) : selectStores(ctx, { allAgents: true });
  for (const location of stores) {
    const file = await findInstanceTranscript(location.sessionsDir, sessionId);
    if (file === null) continue;
    const [header] = await readTranscriptHead(file, 1).catch(() => [] as TranscriptRecord[]);
    const sessionKey = header?.type === 'session' && typeof header.sessionKey === 'string' ? header.sessionKey : undefined;
    return { location, sessionId, file: path.resolve(file), ...(sessionKey !== undefined ? { sessionKey } : {}) };
  }
  return null;
}
