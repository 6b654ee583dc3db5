// The write-ahead journal of a sessions.json: what a writer is about to record, so that a crash
// between "records on disk" and "registry written" leaves work the next writer completes.
//
// Write order of one batch (docs/write-path.md): journal (fsync) → transcript records (fsync) →
// sessions.json (fsync) → journal emptied. The journal is a hint, never an authority: recovery
// applies a planned entry only when (a) the registry still holds exactly the entry the plan was
// made from (same content hash), so a batch that committed, or anything written since, is never
// rolled back; and (b) at least one of the records the plan wrote is really in its transcript.
// Messages whose records are missing are taken out of the duplicate memory, so a resend of a
// message that never reached the disk is recorded, not answered "duplicate".

import { closeSync, constants as fsConstants, fstatSync, ftruncateSync, lstatSync, openSync, readFileSync, writeSync, type Stats } from 'node:fs';
import path from 'node:path';
import { SwitchboardError, ioError, legacyIdKey, sha256Base64url, withoutRecentIds } from '../core/index.js';
import { isInMemory } from './memory-volume.js';
import { resolveInside } from './paths.js';
import { checkWholeFileSize, openRegularDescriptor } from './regular-file.js';
import { fsyncDescriptor, fsyncFolder } from './store-fs.js';
import { entryTranscriptName, type SessionEntry, type SessionStore } from './session-entry.js';
import { readTranscript } from './transcript-read.js';
import { readFirstLineRecord } from './transcript-head.js';

export const JOURNAL_SUFFIX = '.journal';
const JOURNAL_VERSION = 4;

/** One record of a journalled session: its id, the index of its file in `files`, its duplicate-memory key (store record-route.ts). */
export type JournalRecord = [id: string, file: number, duplicateKey?: string];

/** One session a batch is about to append to. */
export interface JournalSession {
  sessionKey: string;
  /** Content hash of the entry the plan started from (null: the key had no entry). */
  base: string | null;
  /** The entry to install once the records are on disk (without `recentMessageIds` when `memory` is given). */
  entry: SessionEntry;
  /**
   * Since version 4: what the plan appended to the duplicate memory of the entry it started from.
   * The memory to install is that entry's (the one recovery finds, its hash being `base`) followed
   * by these lines. A busy session's memory is most of its entry, and journalling it whole cost
   * every batch as much as writing sessions.json once more.
   */
  memory?: string;
  /** Transcript file names (inside the sessions folder) the records go to: a rotation inside the batch writes to two. */
  files: string[];
  /**
   * The records to be appended, as tuples rather than objects: a batch journals every record it
   * writes, and this file is written (and fsynced) before them on every batch.
   */
  records: JournalRecord[];
}

/**
 * The entry and memory to journal for `planned`, made from an entry whose memory was `baseMemory`:
 * only the lines the plan appended when it appended some (its memory starts with the base's), the
 * whole entry otherwise (memory cut from the front, or stored as pairs by an older release).
 */
export function journalledEntry(planned: SessionEntry, baseMemory: unknown): Pick<JournalSession, 'entry' | 'memory'> {
  const memory = planned.recentMessageIds;
  if (typeof memory !== 'string' || (baseMemory !== undefined && typeof baseMemory !== 'string')) return { entry: planned };
  const before = baseMemory ?? '';
  if (!memory.startsWith(before)) return { entry: planned };
  const { recentMessageIds: _, ...entry } = planned;
  return { entry, memory: memory.slice(before.length) };
}

/** Version 1 (before tuples): one object per record, its file named in full. */
interface JournalSessionV1 {
  sessionKey: string;
  base: string | null;
  entry: SessionEntry;
  records: { id: string; sessionFile: string; messageId?: string }[];
}

interface JournalFile {
  version: number;
  pid: number;
  writtenAt: string;
  sessions: JournalSession[];
}

export function journalPathFor(storePath: string): string {
  return `${storePath}${JOURNAL_SUFFIX}`;
}

/** The hash that identifies an entry's content as read from sessions.json. */
export function entryHash(entry: unknown): string | null {
  return entry === undefined ? null : entryTextHash(JSON.stringify(entry));
}

/** entryHash() of an entry whose JSON text the caller already has. */
export function entryTextHash(text: string): string {
  return sha256Base64url(text);
}

const WRITE_FLAGS = fsConstants.O_WRONLY | fsConstants.O_CREAT | fsConstants.O_TRUNC;

/**
 * Writes and fsyncs the journal before any record of the batch is appended. Opened like every
 * store file (openRegularDescriptor: no link followed, no FIFO waited on — a FIFO put in its place
 * made a plain open wait forever for a reader, with the store lock held): a journal that is not
 * a regular file is STORE_CORRUPT, which doctor reports and --repair removes.
 */
export async function writeJournal(storePath: string, sessions: JournalSession[], now: number): Promise<void> {
  if (sessions.length === 0 || isInMemory(storePath)) return;
  const file = journalPathFor(storePath);
  const body: JournalFile = { version: JOURNAL_VERSION, pid: process.pid, writtenAt: new Date(now).toISOString(), sessions };
  // Synchronous but for the fsyncs (see nodeStoreFileSystem in store-fs.ts for why).
  const existed = lstatOrNull(file) !== null;
  try {
    const journal = openRegularDescriptor(file, WRITE_FLAGS, 0o600);
    try {
      writeAll(journal.fd, Buffer.from(`${JSON.stringify(body)}\n`, 'utf8'));
      await fsyncDescriptor(journal.fd);
    } finally {
      closeSync(journal.fd);
    }
    // A new name must be durable before the records it describes are.
    if (!existed) await fsyncFolder(path.dirname(file));
  } catch (err) {
    if (err instanceof SwitchboardError) throw err;
    throw ioError(`could not write the journal ${file}`, err);
  }
}

function writeAll(fd: number, bytes: Buffer): void {
  for (let offset = 0; offset < bytes.length; ) {
    const written = writeSync(fd, bytes, offset, bytes.length - offset);
    if (written <= 0) throw Object.assign(new Error('write made no progress'), { code: 'ENOSPC' });
    offset += written;
  }
}

function lstatOrNull(file: string): Stats | null {
  try {
    return lstatSync(file);
  } catch {
    return null;
  }
}

/** Empties the journal once the registry holds what it described (best effort: see recovery). */
export async function clearJournal(storePath: string): Promise<void> {
  if (isInMemory(storePath)) return;
  try {
    // Through a descriptor opened without following a link: truncate(path) would empty the file
    // a link put in the journal's place points at.
    const journal = openRegularDescriptor(journalPathFor(storePath), fsConstants.O_WRONLY);
    try {
      ftruncateSync(journal.fd, 0);
    } finally {
      closeSync(journal.fd);
    }
  } catch {
    // Missing, not a regular file, or not truncatable: recovery's hash rule makes a stale journal harmless.
  }
}

/** What recovery did: sessions completed from the journal (for doctor and tests). */
export interface JournalRecovery {
  recovered: string[];
  /** Message ids whose records were not found: dropped from the duplicate memory. */
  missingMessageIds: number;
}

/** Reads a journal; null when there is none, it is empty, or it was torn while being written. */
export async function readJournal(storePath: string): Promise<JournalSession[] | null> {
  if (isInMemory(storePath)) return null;
  // The common case, once per store write: no journal, or the empty one the last commit left.
  // One lstat answers it; only a journal with content is opened (never through a link or FIFO).
  const found = lstatOrNull(journalPathFor(storePath));
  if (found === null || !found.isFile() || found.size === 0) return null;
  let text: string;
  try {
    const fd = openSync(journalPathFor(storePath), fsConstants.O_RDONLY | fsConstants.O_NOFOLLOW | fsConstants.O_NONBLOCK);
    try {
      const stats = fstatSync(fd);
      if (!stats.isFile()) return null;
      // Too large to be a journal (a sparse file, say): no writer left it, like a torn one.
      checkWholeFileSize(journalPathFor(storePath), stats.size);
      text = readFileSync(fd, 'utf8');
    } finally {
      closeSync(fd);
    }
  } catch {
    return null;
  }
  if (text.trim() === '') return null;
  try {
    const parsed = JSON.parse(text) as { version?: unknown; sessions?: unknown };
    // Torn or foreign: it was written (and fsynced) before any record, so nothing was appended.
    if (!Array.isArray(parsed?.sessions)) return null;
    // Version 3 is version 4 without `memory` (every entry journalled whole).
    if (parsed.version === JOURNAL_VERSION || parsed.version === 3) return parsed.sessions as JournalSession[];
    if (parsed.version === 2) return (parsed.sessions as JournalSession[]).map(fromVersion2);
    if (parsed.version === 1) return (parsed.sessions as JournalSessionV1[]).map(fromVersion1);
    return null;
  } catch {
    return null;
  }
}

/**
 * A journal left by a switchboard before version 3 (an upgrade between crash and restart) names
 * messageIds, which that version's memory (the journalled entry's) held by the id alone.
 */
function fromVersion2(session: JournalSession): JournalSession {
  const records = Array.isArray(session?.records) ? session.records : [];
  return { ...session, records: records.map((record) => (Array.isArray(record) && typeof record[2] === 'string' ? [record[0], record[1], legacyIdKey(record[2])] : record)) };
}

/** A journal left by a switchboard before version 2: one object per record. */
function fromVersion1(session: JournalSessionV1): JournalSession {
  const files: string[] = [];
  const records: JournalRecord[] = [];
  for (const record of Array.isArray(session?.records) ? session.records : []) {
    let file = files.indexOf(record?.sessionFile);
    if (file < 0) file = files.push(record?.sessionFile) - 1;
    records.push(typeof record?.messageId !== 'string' ? [record?.id, file] : [record.id, file, legacyIdKey(record.messageId)]);
  }
  return { sessionKey: session?.sessionKey, base: session?.base, entry: session?.entry, files, records };
}

/**
 * Completes a batch that died between its appends and its registry write: called by the one
 * sessions.json update path under the store lock, on the store it has just read.
 */
export async function recoverJournal(storePath: string, store: SessionStore): Promise<JournalRecovery | null> {
  const sessions = await readJournal(storePath);
  if (sessions === null) return null;
  const recovery: JournalRecovery = { recovered: [], missingMessageIds: 0 };
  const sessionsDir = path.dirname(storePath);
  for (const session of sessions) {
    if (typeof session?.sessionKey !== 'string' || !Array.isArray(session.records) || !Array.isArray(session.files)) continue;
    // Only an entry object is ever journalled; anything else is a foreign or damaged journal.
    if (typeof session.entry !== 'object' || session.entry === null || Array.isArray(session.entry)) continue;
    const current = Object.hasOwn(store, session.sessionKey) ? store[session.sessionKey] : undefined;
    if (entryHash(current) !== session.base) continue; // committed, or changed since: never roll back
    const found = new Set<string>();
    for (const [index, sessionFile] of session.files.entries()) {
      const ids = new Set(session.records.filter((record) => Array.isArray(record) && record[1] === index).map((record) => record[0]));
      for (const id of await recordIdsIn(sessionsDir, sessionFile, ids)) found.add(id);
    }
    if (found.size === 0) continue; // nothing reached the disk: nothing was acknowledged
    const entry = { ...session.entry };
    if (typeof session.memory === 'string') {
      const before = (current as SessionEntry | undefined)?.recentMessageIds;
      entry.recentMessageIds = `${typeof before === 'string' ? before : ''}${session.memory}`;
    }
    const missing = new Set(session.records.filter((record) => !found.has(record[0]) && typeof record[2] === 'string').map((record) => record[2] as string));
    if (missing.size > 0 && entry.recentMessageIds !== undefined) {
      entry.recentMessageIds = withoutRecentIds(entry.recentMessageIds, missing);
      recovery.missingMessageIds += missing.size;
    }
    store[session.sessionKey] = await instanceWithRecords(sessionsDir, session, found, current, entry);
    recovery.recovered.push(session.sessionKey);
  }
  return recovery;
}

/**
 * The entry to install: the planned one, unless a rotation in the batch stopped before the planned
 * instance's file (written last) got any of its records. The entry then names the newest instance
 * that did get some — the one it was planned from, or one a first rotation of the batch began —
 * and keeps the memory of what is down: installing the planned entry named a transcript that was
 * never written, and its old instance was left unnamed.
 */
async function instanceWithRecords(sessionsDir: string, session: JournalSession, found: Set<string>, current: SessionEntry | undefined, planned: SessionEntry): Promise<SessionEntry> {
  const newest = Math.max(...session.records.filter((record) => found.has(record[0])).map((record) => record[1]));
  if (newest >= session.files.length - 1) return planned;
  const name = path.basename(String(session.files[newest]));
  const kept = (): SessionEntry => ({ ...current!, recentMessageIds: planned.recentMessageIds });
  // The instance the entry named already (its file is the first a batch appends to, when it does).
  if (current !== undefined && name === entryTranscriptName(current)) return kept();
  try {
    const header = await readFirstLineRecord(resolveInside(sessionsDir, name));
    if (header?.type === 'session' && typeof header.id === 'string') return { ...planned, sessionId: header.id, sessionFile: name };
  } catch {
    // Unreadable: as below.
  }
  // No header to name it by: keep what the entry was (its memory knows what is down), or the plan.
  return current !== undefined ? kept() : planned;
}

/** Which of `ids` are the ids of records in the transcript (streamed; a missing file has none). */
async function recordIdsIn(sessionsDir: string, sessionFile: unknown, ids: Set<string>): Promise<Set<string>> {
  const found = new Set<string>();
  if (typeof sessionFile !== 'string') return found;
  let file: string;
  try {
    file = resolveInside(sessionsDir, path.basename(sessionFile));
  } catch {
    return found;
  }
  try {
    for await (const record of readTranscript(file)) {
      if (typeof record.id === 'string' && ids.has(record.id)) found.add(record.id);
    }
  } catch {
    // Unreadable (missing, a link, I/O): treat as not recorded; doctor reports the file itself.
  }
  return found;
}
