// The shape of one sessions.json row (store.md "SessionEntry") and of the whole registry.
// Unknown fields are kept as they are: a newer or OpenClaw-written row survives our writes.
// sessionEntryProblem() is the one check of the shape the code relies on before it uses a row.

import { realpathSync } from 'node:fs';
import path from 'node:path';
import { SwitchboardError } from '../core/index.js';
import { MAX_FILE_NAME_BYTES, THREAD_INFIX, TRANSCRIPT_SUFFIX, isSessionId } from './paths.js';

export type SessionChatType = 'direct' | 'group' | 'channel';

/** A peer as routing sees it; kept structural so store/ needs no routing import. */
export interface SessionPeer {
  kind: string;
  id: string;
  [extra: string]: unknown;
}

/** Where the first message of this session came from. */
export interface SessionOrigin {
  /** switchboard writes it; an origin written by OpenClaw names the channel `provider` instead. */
  channel?: string;
  accountId?: string;
  peer?: SessionPeer;
  parentPeer?: SessionPeer;
  /** OpenClaw keeps a channel's numeric thread ids as numbers. */
  threadId?: string | number;
  sender?: string;
  [extra: string]: unknown;
}

/** The session's address for proactive output; its owner's latest message moves it (policy/session-plan.ts planDelivery). */
export interface SessionDeliveryContext {
  channel: string;
  /** switchboard always writes it; OpenClaw leaves it out until it has a target (e.g. a Telegram group it only recorded). */
  to?: string;
  accountId?: string;
  /** switchboard writes strings; a row written by OpenClaw may hold a number here (Telegram topics). */
  threadId?: string;
  [extra: string]: unknown;
}

export interface SessionEntry {
  /** Current instance at this address (UUID v4); rotated by resets. */
  sessionId: string;
  /** Epoch ms of the last change of the row: listing, pruning, capping — never freshness. */
  updatedAt: number;
  /** Epoch ms when this sessionId began; daily-reset anchor. */
  sessionStartedAt?: number;
  /** Epoch ms of the last real user/channel message; idle-reset anchor. */
  lastInteractionAt?: number;
  chatType?: SessionChatType;
  channel?: string;
  accountId?: string;
  displayName?: string;
  subject?: string;
  origin?: SessionOrigin;
  deliveryContext?: SessionDeliveryContext;
  /** Whose messages move `deliveryContext` (first DM peer of a shared session, or `sessions pin-route`). */
  deliveryOwner?: { channel: string; peer: SessionPeer; accountId?: string; pinned?: boolean };
  queueMode?: string;
  queueDebounceMs?: number;
  queueCap?: number;
  queueDrop?: string;
  sendPolicy?: 'allow' | 'deny';
  model?: string;
  modelOverride?: string;
  parentSessionKey?: string;
  spawnDepth?: number;
  /** Never pruned or capped by maintenance. */
  pinned?: boolean;
  incognito?: boolean;
  /** Fields this version does not know are preserved on every write. */
  [extra: string]: unknown;
}

/**
 * sessions.json: sessionKey → SessionEntry. A value that is not an object is held as a
 * NotAnObjectEntry (below): typed as an entry, it is one of the wrong shape, like any other.
 */
export type SessionStore = Record<string, SessionEntry>;


// ---------------------------------------------------------------------------------------------
// Entries that are not objects

const RAW_VALUE = Symbol('the value in sessions.json');

/**
 * Stands in for a sessions.json entry that is not a JSON object (null, a list, a string, a
 * number, a boolean). The parser puts it in the entry's place, so that every reader finds an
 * object without the fields it needs — an entry of the wrong shape, which sessionEntryProblem()
 * reports and every command already handles per entry — instead of a value that throws on the
 * first property read or is taken for "no entry" and overwritten. Serialised, it is the value it
 * replaced (toJSON), so other sessions' writes keep it as it was, and a change made to it by
 * mistake never reaches the file.
 */
class NotAnObjectEntry {
  declare readonly [RAW_VALUE]: unknown;
  constructor(value: unknown) {
    Object.defineProperty(this, RAW_VALUE, { value });
  }
  toJSON(): unknown {
    return this[RAW_VALUE];
  }
}

/** An object as it is; anything else wrapped (see NotAnObjectEntry). */
export function asStoredEntry(value: unknown): SessionEntry {
  return (isObject(value) ? value : new NotAnObjectEntry(value)) as SessionEntry;
}

/** Whether the entry stands for a value that is not an object. */
export function isNotAnObject(entry: unknown): boolean {
  return entry instanceof NotAnObjectEntry;
}


// ---------------------------------------------------------------------------------------------
// The shape the code relies on

/** Why an entry cannot be used, field by field; the first problem found. */
export interface SessionEntryProblem {
  field: string;
  reason: string;
}

/** Transcript names: `<sessionId>.jsonl` or `<sessionId>-topic-<encodeURIComponent(threadId)>.jsonl` (sessions.schema.json). */
const THREAD_PART = /^[A-Za-z0-9_.!~*'()%-]+$/;

function describeValue(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'string') return `"${value.length > 60 ? `${value.slice(0, 57)}...` : value}"`;
  if (typeof value === 'object') return 'an object';
  return `${typeof value} ${String(value)}`;
}

/**
 * Why `name` is not the transcript file of session `sessionId` (null when it is): a plain file
 * name in the sessions folder, `<sessionId>.jsonl` or its thread form — never sessions.json, a
 * lock, an archive, a temp file, a path, or another session's transcript.
 */
export function transcriptNameProblem(name: unknown, sessionId: string): string | null {
  if (typeof name !== 'string') return `is ${describeValue(name)}, not a file name`;
  if (Buffer.byteLength(name, 'utf8') > MAX_FILE_NAME_BYTES) return `is longer than ${MAX_FILE_NAME_BYTES} bytes`;
  if (name === `${sessionId}${TRANSCRIPT_SUFFIX}`) return null;
  const prefix = `${sessionId}${THREAD_INFIX}`;
  if (name.startsWith(prefix) && name.endsWith(TRANSCRIPT_SUFFIX)) {
    const thread = name.slice(prefix.length, name.length - TRANSCRIPT_SUFFIX.length);
    if (thread !== '' && THREAD_PART.test(thread)) return null;
  }
  return `${describeValue(name)} is not a transcript of session ${sessionId} (${sessionId}${TRANSCRIPT_SUFFIX} or ${sessionId}${THREAD_INFIX}<thread>${TRANSCRIPT_SUFFIX})`;
}

/**
 * The plain file name inside `sessionsDir` that a sessionFile value names, or null when it names
 * nothing there. switchboard writes bare names; OpenClaw writes absolute paths of the same folder
 * (resolved through symlinks: it realpaths the folder), so an absolute path counts when its
 * folder is the sessions folder as given or as resolved. Anything else — another folder, a
 * relative path with separators — names no file of this store.
 */
export function transcriptFileNameIn(sessionFile: string, sessionsDir: string): string | null {
  if (!path.isAbsolute(sessionFile)) return sessionFile.includes('/') || sessionFile.includes('\\') ? null : sessionFile;
  if (sessionFile.includes('\0')) return null;
  const folder = path.dirname(path.resolve(sessionFile));
  const name = path.basename(sessionFile);
  if (name === '' || name === '.' || name === '..' || path.resolve(folder, name) !== path.resolve(sessionFile)) return null;
  const wanted = path.resolve(sessionsDir);
  if (folder === wanted || realFolder(folder) === realFolder(wanted)) return name;
  return null;
}

/** realpath of a folder, cached per process (entries of one store all name the same folder). */
const realFolders = new Map<string, string | null>();
function realFolder(folder: string): string | null {
  let real = realFolders.get(folder);
  if (real === undefined) {
    try {
      real = realpathSync(folder);
    } catch {
      real = null;
    }
    if (realFolders.size > 256) realFolders.clear();
    realFolders.set(folder, real);
  }
  return real ?? folder;
}

const isObject = (value: unknown): boolean => typeof value === 'object' && value !== null && !Array.isArray(value);
const isTime = (value: unknown): boolean => typeof value === 'number' && Number.isFinite(value);

/**
 * The queue's records in an entry (switchboard's own, policy/queue-records.ts): the fields that
 * drains, listings, liveness checks and recovery read without a fallback must be there with
 * their type; the optional ones, when present, must have theirs. A time is checked by name
 * because a writer turns an infinite number into null, and null would pass a check for infinite
 * numbers alone. Before, `activeRun: {}` passed (it is an object), and `sessions delete` waited
 * for that "run" of no process to end; a queued `text: 7` made `queue` fail as an internal error.
 */
type FieldType = 'id' | 'text' | 'time' | 'pid' | 'list';
interface RecordShape {
  required: readonly (readonly [string, FieldType])[];
  optional: readonly (readonly [string, FieldType])[];
}
const ACTIVE_RUN_SHAPE: RecordShape = {
  required: [['runId', 'id'], ['pid', 'pid'], ['hostname', 'text'], ['startedAt', 'time']],
  optional: [['sessionId', 'id'], ['processStartTime', 'time'], ['lane', 'text'], ['messages', 'list']],
};
const QUEUE_OWNER_SHAPE: RecordShape = {
  required: [['pid', 'pid'], ['hostname', 'text']],
  optional: [['since', 'time'], ['processStartTime', 'time']],
};
const PENDING_RESET_SHAPE: RecordShape = { required: [], optional: [['requestedAt', 'time'], ['previousSessionId', 'text'], ['reason', 'text']] };
const QUEUE_ITEM_SHAPE: RecordShape = {
  required: [['runId', 'id'], ['sessionId', 'id'], ['text', 'text'], ['enqueuedAt', 'time']],
  optional: [
    ['wallAt', 'time'], ['mode', 'text'], ['state', 'text'], ['kind', 'text'], ['requester', 'text'], ['channel', 'text'],
    ['messageId', 'text'], ['debounceMs', 'time'], ['maxWaitMs', 'time'], ['claimedBy', 'text'], ['leasedBy', 'text'], ['orphanedFrom', 'text'],
  ],
};
const OUTBOX_ITEM_SHAPE: RecordShape = { required: [['id', 'id'], ['sessionId', 'id'], ['records', 'list']], optional: [] };
const ENTRY_RECORDS = [
  ['activeRun', ACTIVE_RUN_SHAPE],
  ['queueOwner', QUEUE_OWNER_SHAPE],
  ['pendingReset', PENDING_RESET_SHAPE],
] as const;
const ENTRY_RECORD_LISTS = [
  ['queue', QUEUE_ITEM_SHAPE],
  ['outbox', OUTBOX_ITEM_SHAPE],
] as const;
const NO_ITEMS: readonly Record<string, unknown>[] = [];

const FIELD_TYPE_NAMES: Record<FieldType, string> = {
  id: 'a non-empty string',
  text: 'a string',
  time: 'a time in epoch ms',
  pid: 'a process id',
  list: 'a list',
};

function hasType(value: unknown, type: FieldType): boolean {
  switch (type) {
    case 'id':
      return typeof value === 'string' && value !== '';
    case 'text':
      return typeof value === 'string';
    case 'time':
      return isTime(value);
    case 'pid':
      return Number.isSafeInteger(value) && (value as number) > 0;
    case 'list':
      return Array.isArray(value);
  }
}

function recordProblem(record: Record<string, unknown>, shape: RecordShape, at: string): SessionEntryProblem | null {
  for (let i = 0; i < shape.required.length; i++) {
    const [name, type] = shape.required[i]!;
    const value = record[name];
    if (!hasType(value, type)) {
      const field = `${at}.${name}`;
      return { field, reason: value === undefined ? `${field} is missing` : `${field} is ${describeValue(value)}, not ${FIELD_TYPE_NAMES[type]}` };
    }
  }
  for (let i = 0; i < shape.optional.length; i++) {
    const [name, type] = shape.optional[i]!;
    const value = record[name];
    if (value !== undefined && !hasType(value, type)) {
      const field = `${at}.${name}`;
      return { field, reason: `${field} is ${describeValue(value)}, not ${FIELD_TYPE_NAMES[type]}` };
    }
  }
  return null;
}

/*
 * The checks below run once per entry, 10 000 times in a listing, mostly before V8 has optimised
 * them: indexed loops over constant lists, because a for…of there (and array destructuring)
 * allocates an iterator and a result object per step in unoptimised code, which made the shape
 * check allocate ~2 KB per entry and run several times slower.
 */

/** The queue's records of an entry whose fields are already known to be objects and lists of objects. */
function queueStateProblem(row: Record<string, unknown>): SessionEntryProblem | null {
  for (let i = 0; i < ENTRY_RECORDS.length; i++) {
    const field = ENTRY_RECORDS[i]![0];
    const value = row[field] as Record<string, unknown> | undefined;
    if (value === undefined) continue;
    const problem = recordProblem(value, ENTRY_RECORDS[i]![1], field);
    if (problem !== null) return problem;
  }
  const messages = (row.activeRun as Record<string, unknown> | undefined)?.messages as unknown[] | undefined;
  if (messages !== undefined) {
    const at = messages.findIndex((message) => !isObject(message) || typeof (message as Record<string, unknown>).runId !== 'string');
    if (at >= 0) return { field: `activeRun.messages[${at}]`, reason: `activeRun.messages[${at}] is ${describeValue(messages[at])}, not a message carried by the run ({runId, messageId})` };
  }
  for (let i = 0; i < ENTRY_RECORD_LISTS.length; i++) {
    const field = ENTRY_RECORD_LISTS[i]![0];
    const items = (row[field] ?? NO_ITEMS) as readonly Record<string, unknown>[];
    for (let at = 0; at < items.length; at++) {
      const problem = recordProblem(items[at]!, ENTRY_RECORD_LISTS[i]![1], `${field}[${at}]`);
      if (problem !== null) return problem;
    }
  }
  return null;
}

/**
 * The path of the first number anywhere in `value` that is not finite, or null. JSON cannot hold
 * one, so no JSON writer wrote it, and writing it back would silently make it null. Iterative (a
 * deeply nested hand-made value must not overflow the stack); paths are only spelled out for the
 * one found, so walking a long list of legacy pairs builds no strings.
 */
function nonFinitePath(value: unknown): string | null {
  if (!hasNonFiniteNumber(value)) return null;
  const nodes: unknown[] = [value];
  const parents: number[] = [-1];
  const keys: (string | number)[] = [''];
  for (let at = 0; at < nodes.length; at++) {
    const node = nodes[at];
    if (typeof node === 'number') {
      if (Number.isFinite(node)) continue;
      const parts: string[] = [];
      for (let i = at; parents[i]! >= 0; i = parents[i]!) parts.push(typeof keys[i] === 'number' ? `[${keys[i]}]` : `.${keys[i]}`);
      return parts.reverse().join('').replace(/^\./, '');
    }
    if (typeof node !== 'object' || node === null) continue;
    const record = node as Record<string, unknown>;
    const names: (string | number)[] = Array.isArray(node) ? node.map((_, i) => i) : Object.keys(node);
    for (const name of names) {
      const child = record[name as string];
      if (typeof child === 'number' || (typeof child === 'object' && child !== null)) {
        nodes.push(child);
        parents.push(at);
        keys.push(name);
      }
    }
  }
  return null;
}

/**
 * Whether nonFinitePath would find a number: the same walk without the bookkeeping for a path
 * (three lists per entry), which only the rare entry that has one needs.
 */
function hasNonFiniteNumber(value: unknown): boolean {
  const pending: unknown[] = [value];
  while (pending.length > 0) {
    const node = pending.pop();
    if (typeof node === 'number') {
      if (!Number.isFinite(node)) return true;
    } else if (typeof node === 'object' && node !== null) {
      if (Array.isArray(node)) {
        for (let i = 0; i < node.length; i++) {
          const child: unknown = node[i];
          if (typeof child === 'number' || (typeof child === 'object' && child !== null)) pending.push(child);
        }
      } else {
        const record = node as Record<string, unknown>;
        const names = Object.keys(record);
        for (let i = 0; i < names.length; i++) {
          const child = record[names[i]!];
          if (typeof child === 'number' || (typeof child === 'object' && child !== null)) pending.push(child);
        }
      }
    }
  }
  return false;
}

/** Optional fields of an entry by the type they must have. */
const ENTRY_TIMES = ['sessionStartedAt', 'lastInteractionAt'] as const;
const ENTRY_OBJECTS = ['origin', 'deliveryContext', 'activeRun', 'queueOwner', 'pendingReset'] as const;
const ENTRY_LISTS = ['queue', 'outbox'] as const;

/**
 * THE shape check of one sessions.json entry: what every reader relies on before it uses an
 * entry (file names it resolves, numbers it compares, objects and lists it walks). Unknown fields
 * and labels are not judged here: the schema (doctor) covers those and nothing breaks on them.
 * `sessionsDir` is the folder of the store the entry is in: an absolute sessionFile (OpenClaw
 * writes those) must name a file in it.
 */
export function sessionEntryProblem(entry: unknown, sessionsDir: string): SessionEntryProblem | null {
  if (entry instanceof NotAnObjectEntry) return { field: '', reason: `the entry is ${describeValue(entry[RAW_VALUE])}, not an object` };
  if (!isObject(entry)) return { field: '', reason: `the entry is ${describeValue(entry)}, not an object` };
  const row = entry as Record<string, unknown>;
  const sessionId = row.sessionId;
  if (!isSessionId(sessionId)) {
    return { field: 'sessionId', reason: sessionId === undefined ? 'sessionId is missing' : `sessionId ${describeValue(sessionId)} is not a valid session id` };
  }
  if (row.sessionFile !== undefined) {
    const name = typeof row.sessionFile === 'string' ? transcriptFileNameIn(row.sessionFile, sessionsDir) : row.sessionFile;
    if (name === null) return { field: 'sessionFile', reason: `sessionFile ${describeValue(row.sessionFile)} is not a file in the sessions folder ${sessionsDir}` };
    const problem = transcriptNameProblem(name, sessionId);
    if (problem !== null) return { field: 'sessionFile', reason: `sessionFile ${problem}` };
  }
  if (!isTime(row.updatedAt)) return { field: 'updatedAt', reason: row.updatedAt === undefined ? 'updatedAt is missing' : `updatedAt is ${describeValue(row.updatedAt)}, not a time in epoch ms` };
  for (let i = 0; i < ENTRY_TIMES.length; i++) {
    const field = ENTRY_TIMES[i]!;
    const value = row[field];
    if (value !== undefined && value !== null && !isTime(value)) return { field, reason: `${field} is ${describeValue(value)}, not a time in epoch ms` };
  }
  for (let i = 0; i < ENTRY_OBJECTS.length; i++) {
    const field = ENTRY_OBJECTS[i]!;
    if (row[field] !== undefined && !isObject(row[field])) return { field, reason: `${field} is ${describeValue(row[field])}, not an object` };
  }
  for (let i = 0; i < ENTRY_LISTS.length; i++) {
    const field = ENTRY_LISTS[i]!;
    const list = row[field];
    if (list === undefined) continue;
    if (!Array.isArray(list)) return { field, reason: `${field} is ${describeValue(list)}, not a list` };
    // Drains, listings and recovery read fields of every item.
    const at = list.findIndex((item) => !isObject(item));
    if (at >= 0) return { field: `${field}[${at}]`, reason: `${field}[${at}] is ${describeValue(list[at])}, not an object` };
  }
  const queueProblem = queueStateProblem(row);
  if (queueProblem !== null) return queueProblem;
  const ids = row.recentMessageIds;
  // The duplicate memory: a string, or the [messageId, epoch ms] pairs of older versions. Read
  // any other way it would be forgotten (and overwritten) without a word.
  if (ids !== undefined && ids !== null && typeof ids !== 'string') {
    if (!Array.isArray(ids)) return { field: 'recentMessageIds', reason: `recentMessageIds is ${describeValue(ids)}, not a string or a list of [messageId, epoch ms] pairs` };
    const at = ids.findIndex((pair) => !Array.isArray(pair) || pair.length !== 2 || typeof pair[0] !== 'string' || pair[0] === '' || !isTime(pair[1]));
    if (at >= 0) return { field: `recentMessageIds[${at}]`, reason: `recentMessageIds[${at}] is ${describeValue(ids[at])}, not a [messageId, epoch ms] pair` };
  }
  if (row.pendingReset !== undefined) {
    // A deferred rotation installs these as the entry's sessionId/sessionFile later.
    const pending = row.pendingReset as Record<string, unknown>;
    if (!isSessionId(pending.newSessionId)) {
      return { field: 'pendingReset.newSessionId', reason: `pendingReset.newSessionId ${describeValue(pending.newSessionId)} is not a valid session id` };
    }
    const problem = transcriptNameProblem(pending.newSessionFile, pending.newSessionId);
    if (problem !== null) return { field: 'pendingReset.newSessionFile', reason: `pendingReset.newSessionFile ${problem}` };
  }
  const infinite = nonFinitePath(row);
  if (infinite !== null) return { field: infinite, reason: `${infinite} is not a finite number (JSON has none: a value like 1e400 reads as Infinity, and writing it back would make it null)` };
  return null;
}

/** A bad entry is STORE_CORRUPT for that entry only (exit 65); the rest of the store is usable. */
export function unusableEntryError(storePath: string, sessionKey: string, problem: SessionEntryProblem): SwitchboardError {
  const shownKey = sessionKey.length > 200 ? `${sessionKey.slice(0, 197)}...` : sessionKey;
  return new SwitchboardError('STORE_CORRUPT', `the entry of ${shownKey} in ${storePath} cannot be used: ${problem.reason}; it was left as it is`, {
    hint: 'run `switchboard doctor` to see every such entry; fix or remove it by hand (`switchboard sessions delete KEY` archives its transcript)',
    details: { path: storePath, sessionKey, field: problem.field, reason: problem.reason },
  });
}

/** The entry, checked: returns it typed, or throws STORE_CORRUPT for this entry. */
export function checkSessionEntry(storePath: string, sessionKey: string, entry: unknown): SessionEntry {
  const problem = sessionEntryProblem(entry, path.dirname(storePath));
  if (problem !== null) throw unusableEntryError(storePath, sessionKey, problem);
  return entry as SessionEntry;
}

/** What path.basename reads as path syntax (separators, and a drive's colon on Windows). */
const PATH_SYNTAX = /[/\\:]/;

/**
 * The transcript file name (in the sessions folder) of a checked entry: its sessionFile — the
 * name itself, or the last part of OpenClaw's absolute path, which the check proved is in that
 * folder — else `<sessionId>.jsonl` (entries of other tools).
 */
export function entryTranscriptName(entry: SessionEntry): string {
  const file = entry.sessionFile;
  if (typeof file !== 'string') return `${entry.sessionId}${TRANSCRIPT_SUFFIX}`;
  // A bare name (what switchboard writes) is its own basename; path.basename would walk it.
  return PATH_SYNTAX.test(file) ? path.basename(file) : file;
}

/**
 * Whether `name` may be a transcript at all (of any session): `<sessionId>.jsonl` or
 * `<sessionId>-topic-<thread>.jsonl` (sessions.schema.json's sessionFile grammar). An id may hold
 * `-topic-` itself, so every split is tried.
 */
export function isTranscriptFileName(name: unknown): name is string {
  if (typeof name !== 'string' || !name.endsWith(TRANSCRIPT_SUFFIX) || Buffer.byteLength(name, 'utf8') > MAX_FILE_NAME_BYTES) return false;
  const stem = name.slice(0, -TRANSCRIPT_SUFFIX.length);
  // The whole stem, then the part before each `-topic-`, from the last one back.
  for (let at = stem.length; at > 0; at = stem.lastIndexOf(THREAD_INFIX, at - 1)) {
    const thread = at === stem.length ? undefined : stem.slice(at + THREAD_INFIX.length);
    if ((thread === undefined || THREAD_PART.test(thread)) && isSessionId(stem.slice(0, at))) return true;
  }
  return false;
}
