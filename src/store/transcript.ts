// Session transcripts: one JSONL file per session instance — a header line, then entries chained
// by parentId — appended as whole lines under the session write lock, fsynced before returning.
// Readers (transcript-read.ts) stream line by line, skip what does not parse and count it; a torn
// tail never throws.

import { constants as fsConstants, promises as fsp, type Stats } from 'node:fs';
import { makeDirectories } from './paths.js';
import { restoreInterruptedDeletion } from './archive.js';
import path from 'node:path';
import { SwitchboardError, errnoOf, ioError, newUuid, systemClock, type Clock } from '../core/index.js';
import { heldLockFor, withLock, type LockHandle, type LockOptions } from './lock.js';
import { isInMemory, memoryVolumeFor, type AppendableFile } from './memory-volume.js';
import { openRegularDescriptor } from './regular-file.js';
import { fsyncFolder } from './store-fs.js';
import { forgetTail, rememberTail, transcriptTail } from './transcript-tail.js';

export const TRANSCRIPT_VERSION = 3;

/**
 * The marks of an assistant message that is a record, not model output: OpenClaw 2026.7.1 keeps
 * `provider: "openclaw"` with model `delivery-mirror` (the text a user received) or
 * `gateway-injected` (text put into the conversation from outside) out of what it replays to the
 * model, and only those. switchboard's mirrors and command replies carry the same marks, with
 * OpenClaw's zero usage, so a store handed to OpenClaw is not replayed twice.
 */
export const TRANSCRIPT_ONLY_PROVIDER = 'openclaw';
export const DELIVERY_MIRROR_MODEL = 'delivery-mirror';
export const INJECTED_MODEL = 'gateway-injected';

/** The fields of a transcript-only assistant message (see TRANSCRIPT_ONLY_PROVIDER). */
export function transcriptOnlyMarks(model: typeof DELIVERY_MIRROR_MODEL | typeof INJECTED_MODEL): Record<string, unknown> {
  const zero = { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 };
  return {
    api: 'openclaw-transcript',
    provider: TRANSCRIPT_ONLY_PROVIDER,
    model,
    usage: { ...zero, totalTokens: 0, cost: { ...zero, total: 0 } },
    stopReason: 'stop',
  };
}

/** Line 1 of every transcript. */
export interface TranscriptHeader {
  type: 'session';
  version: number;
  /** The sessionId. */
  id: string;
  timestamp: string;
  cwd: string;
  sessionKey?: string;
  agentId?: string;
}

/** Every later line. `parentId` is the id of the entry before it (null for the first). */
export interface TranscriptEntry {
  type: string;
  id: string;
  parentId: string | null;
  timestamp: string;
  [field: string]: unknown;
}

/** What a reader yields: the header or an entry (any JSON object with a string `type`). */
export interface TranscriptRecord {
  type: string;
  [field: string]: unknown;
}

/** An entry to append; id and timestamp are filled in when missing, parentId is always ours. */
export interface NewTranscriptEntry {
  type: string;
  id?: string;
  timestamp?: string;
  [field: string]: unknown;
}

/** What the header needs when the append creates the file. */
export interface TranscriptSessionInfo {
  sessionId: string;
  sessionKey?: string;
  agentId?: string;
  cwd?: string;
}

export interface AppendOptions {
  /** Required when the file does not exist yet (or holds no complete record). */
  session?: TranscriptSessionInfo;
  /** For timestamps; `--now` pins it. */
  clock?: Clock;
  /** The session write lock; defaults to the one the calling async chain holds. */
  handle?: LockHandle;
  /**
   * Instead of the session write lock: the store lock of the transcript's sessions.json, held by
   * a writer that has checked that no session lock exists on this file (docs/write-path.md:
   * every other writer of an idle session's transcript holds the store lock too).
   */
  coveredBy?: LockHandle;
  /**
   * The caller's entry has recorded into this file before (it is not a new instance): a missing
   * file with a `.deleted.` archive is an interrupted `sessions delete`, put back before the
   * append (restoreInterruptedDeletion) instead of starting the file again without its history.
   */
  resumesFile?: boolean;
}

export interface AppendResult {
  entries: TranscriptEntry[];
  createdFile: boolean;
  wroteHeader: boolean;
  /** The file ended in a torn line (crash) and this append started on a fresh line. */
  startedFreshLine: boolean;
  bytesWritten: number;
}

export interface TranscriptReadStats {
  bytes: number;
  /** Non-blank lines seen, the torn tail included. */
  lines: number;
  records: number;
  /** Lines that did not parse as a record (torn tail, garbage). */
  skipped: number;
  /** The file does not end with a newline. */
  tornTail: boolean;
}

export interface TranscriptReader extends AsyncIterable<TranscriptRecord> {
  /** Filled in while iterating; final once the iteration has ended. */
  readonly stats: TranscriptReadStats;
}

// ---------------------------------------------------------------------------------------------
// Appending

/**
 * Appends entries under the session write lock (taken here, re-entrant for a run that holds it),
 * then fsyncs: when this resolves, the entries are on disk.
 */
export async function appendToTranscript(
  transcriptPath: string,
  entries: NewTranscriptEntry | readonly NewTranscriptEntry[],
  options: Omit<AppendOptions, 'handle'> & { lockOptions?: LockOptions } = {},
): Promise<AppendResult> {
  const { lockOptions, ...appendOptions } = options;
  const lockSettings: LockOptions = {
    busyCode: 'SESSION_BUSY',
    ...lockOptions,
    owner: lockOptions?.owner ?? { sessionKey: options.session?.sessionKey },
  };
  const list = Array.isArray(entries) ? entries : [entries as NewTranscriptEntry];
  return withLock(transcriptPath, lockSettings, (handle) => appendEntries(transcriptPath, list, { ...appendOptions, handle }));
}

/**
 * Appends a batch as whole lines in one write and one fsync (group commit). Must run under the
 * session write lock of this transcript (options.handle, or held by the calling async chain).
 */
export async function appendEntries(
  transcriptPath: string,
  entries: readonly NewTranscriptEntry[],
  options: AppendOptions = {},
): Promise<AppendResult> {
  const file = path.resolve(transcriptPath);
  const handle = options.coveredBy ?? options.handle ?? heldLockFor(file);
  if (handle === undefined) {
    throw new SwitchboardError('INTERNAL', `transcript append outside the session write lock: ${file}`, {
      hint: 'use appendToTranscript(), or call appendEntries() inside withLock(transcriptPath, …)',
    });
  }
  // A session lock covers its own file; a store lock covers the transcripts of its folder.
  const target = path.resolve(handle.targetPath);
  const covers = options.coveredBy === undefined ? target === file : path.dirname(target) === path.dirname(file);
  if (!covers) {
    throw new SwitchboardError('INTERNAL', `lock handle for ${handle.targetPath} used to append to ${file}`);
  }
  const prepared = entries.map(validateEntry);
  if (prepared.length === 0) {
    // the header is only ever written together with a first entry
    return { entries: [], createdFile: false, wroteHeader: false, startedFreshLine: false, bytesWritten: 0 };
  }
  // Nested (re-entrant) callers in one process share the lock; this keeps their appends in order
  // so that each one reads the tail the previous one left.
  return serialisePerFile(file, () => appendUnderLock(file, prepared, options, handle));
}

const appendChains = new Map<string, Promise<unknown>>();

function serialisePerFile<T>(file: string, task: () => Promise<T>): Promise<T> {
  const previous = appendChains.get(file) ?? Promise.resolve();
  const result = previous.then(task, task);
  const settled = result.then(
    () => undefined,
    () => undefined,
  );
  appendChains.set(file, settled);
  void settled.then(() => {
    if (appendChains.get(file) === settled) appendChains.delete(file);
  });
  return result;
}

function validateEntry(entry: NewTranscriptEntry, index: number): NewTranscriptEntry {
  if (typeof entry !== 'object' || entry === null || Array.isArray(entry)) {
    throw new SwitchboardError('BAD_INPUT', `transcript entry ${index} is not an object`);
  }
  if (typeof entry.type !== 'string' || entry.type === '' || entry.type === 'session') {
    throw new SwitchboardError('BAD_INPUT', `transcript entry ${index} needs a "type" other than "session"`, {
      details: { index, type: entry.type },
    });
  }
  if (entry.id !== undefined && (typeof entry.id !== 'string' || entry.id === '')) {
    throw new SwitchboardError('BAD_INPUT', `transcript entry ${index} has an invalid "id"`, { details: { index } });
  }
  return entry;
}

async function appendUnderLock(
  file: string,
  entries: readonly NewTranscriptEntry[],
  options: AppendOptions,
  handle: LockHandle,
): Promise<AppendResult> {
  const clock = options.clock ?? systemClock;
  let fh: AppendableFile;
  let createdFile = false;
  let openedAs: Stats | undefined;
  // A holder that lost its lock creates nothing either: a run frozen past staleMs whose session
  // was reset meanwhile would make an empty file under the archived transcript's name.
  const checkHeld = async (): Promise<void> => (options.coveredBy !== undefined ? handle.assertHeld() : handle.verifyHeld());
  try {
    ({ fh, createdFile, openedAs } = await openForAppend(file, options.resumesFile === true, checkHeld));
  } catch (err) {
    throw ioError(`could not open transcript ${file}`, err);
  }
  let sizeBefore = -1;
  let wroteSomething = false;
  try {
    // We hold the lock that covers this file, so what fstat said at open still holds.
    const stat = openedAs ?? (await fh.stat());
    sizeBefore = stat.size;
    const tail = await transcriptTail(file, fh, stat);

    const startedFreshLine = stat.size > 0 && !tail.endsWithNewline;
    const wroteHeader = !tail.hasRecord;
    const lines: string[] = [];
    if (wroteHeader) lines.push(headerLine(file, options.session, clock));
    const written: TranscriptEntry[] = [];
    let parentId = wroteHeader ? null : tail.lastEntryId;
    // One time for the records of one write that carry none (they are written together).
    let stamp: string | undefined;
    const timestamp = (): string => (stamp ??= new Date(clock.now()).toISOString());
    for (const entry of entries) {
      const record = toEntry(entry, parentId, timestamp);
      lines.push(serialise(record, written.length));
      written.push(record);
      parentId = record.id;
    }
    // One join makes the whole payload (a leading '' starts a fresh line, a trailing '' ends the last).
    if (startedFreshLine) lines.unshift('');
    lines.push('');
    const payload = Buffer.from(lines.join('\n'), 'utf8');

    // Last check before the write: a holder that lost its lock writes nothing. A covering store
    // lock is never taken from a live holder, so its in-memory state is enough (its holder checks
    // the lock on disk once, before it writes sessions.json); a session lock can be taken over.
    await checkHeld();
    wroteSomething = true;
    // Fenced: this process's own max-hold release waits for the write and fsync to finish, so
    // the lock cannot change hands under them. A record written after the check above is on
    // disk and is reported as written: failing it would invite a resend that doubles it.
    await handle.fence(async () => {
      await writeFully(fh, payload);
      await fh.sync();
    });
    if (createdFile) await fsyncDirectory(path.dirname(file));

    rememberTail(file, { dev: stat.dev, ino: stat.ino, size: stat.size + payload.length, lastEntryId: parentId });
    return { entries: written, createdFile, wroteHeader, startedFreshLine, bytesWritten: payload.length };
  } catch (err) {
    forgetTail(file);
    // After losing the lock the file may already be someone else's to write: leave it alone.
    const lockLost = err instanceof SwitchboardError && (err.code === 'SESSION_BUSY' || err.code === 'STORE_BUSY');
    if (!lockLost && (wroteSomething || createdFile)) await rollBack(fh, file, sizeBefore, createdFile);
    if (err instanceof SwitchboardError) throw err;
    throw ioError(`could not append to transcript ${file}`, err);
  } finally {
    await fh.close().catch(() => undefined);
  }
}

/** Read-write (the tail is read through the same descriptor) and O_APPEND. A new file is created
 *  exclusively, so that we know it was us: a failed first append removes it again. Before a file
 *  is made (created, or an interrupted deletion put back), `checkHeld` confirms the lock. */
async function openForAppend(file: string, resumesFile: boolean, checkHeld: () => Promise<void>): Promise<{ fh: AppendableFile; createdFile: boolean; openedAs?: Stats }> {
  const volume = memoryVolumeFor(file);
  if (volume !== undefined) {
    const createdFile = volume.sizeOf(file) === null;
    return { fh: volume.openForAppend(file, createdFile), createdFile };
  }
  // openRegularFile: never through a symlink (even one pointing inside the state dir), never a
  // FIFO or device (STORE_CORRUPT for this session's file, not a hang or a write elsewhere).
  try {
    const fh = openRegularDescriptor(file, fsConstants.O_RDWR | fsConstants.O_APPEND);
    return { fh, createdFile: false, openedAs: fh.openedAs };
  } catch (err) {
    if (errnoOf(err) !== 'ENOENT') throw err;
  }
  await checkHeld();
  if (resumesFile && (await restoreInterruptedDeletion(file))) {
    const fh = openRegularDescriptor(file, fsConstants.O_RDWR | fsConstants.O_APPEND);
    return { fh, createdFile: false, openedAs: fh.openedAs };
  }
  const flags = fsConstants.O_RDWR | fsConstants.O_APPEND | fsConstants.O_CREAT | fsConstants.O_EXCL;
  try {
    const fh = openRegularDescriptor(file, flags, 0o600);
    return { fh, createdFile: true, openedAs: fh.openedAs };
  } catch (err) {
    if (errnoOf(err) !== 'ENOENT') throw err;
    makeDirectories(path.dirname(file), 0o700);
    const fh = openRegularDescriptor(file, flags, 0o600);
    return { fh, createdFile: true, openedAs: fh.openedAs };
  }
}

/** Undo a failed append (we hold the lock, so nobody appended after us): nothing unacknowledged
 *  stays behind, and the next append does not have to work around our partial line. */
async function rollBack(fh: AppendableFile, file: string, sizeBefore: number, createdFile: boolean): Promise<void> {
  try {
    const volume = memoryVolumeFor(file);
    if (createdFile && volume !== undefined) volume.unlink(file);
    else if (createdFile) await fsp.unlink(file);
    else if (sizeBefore >= 0) await fh.truncate(sizeBefore);
  } catch {
    // best effort (e.g. a device that cannot be truncated): readers skip a torn line anyway
  }
}

async function writeFully(fh: AppendableFile, payload: Buffer): Promise<void> {
  let offset = 0;
  while (offset < payload.length) {
    const { bytesWritten } = await fh.write(payload, offset, payload.length - offset);
    if (bytesWritten <= 0) throw Object.assign(new Error('write made no progress'), { code: 'EIO' });
    offset += bytesWritten;
  }
}

/**
 * Makes the new directory entry durable, not only the file's data. Appends that created files in
 * one folder share the folder's fsyncs: a caller joins the next fsync that starts after it asked
 * (one already running may have started before its file existed), so a batch that creates a
 * thousand transcripts makes a few fsyncs of their folder instead of a thousand in a row.
 */
function fsyncDirectory(dir: string): Promise<void> {
  if (isInMemory(dir)) return Promise.resolve();
  let state = directorySyncs.get(dir);
  if (state === undefined) directorySyncs.set(dir, (state = { running: null, queued: null }));
  if (state.queued !== null) return state.queued;
  if (state.running === null) return startDirectorySync(dir, state);
  const after = state.running.catch(() => undefined);
  const queued = after.then(() => {
    state.queued = null;
    return startDirectorySync(dir, state);
  });
  state.queued = queued;
  return queued;
}

interface DirectorySync {
  running: Promise<void> | null;
  /** Starts when `running` has ended; everyone who asks meanwhile waits for it. */
  queued: Promise<void> | null;
}

const directorySyncs = new Map<string, DirectorySync>();

function startDirectorySync(dir: string, state: DirectorySync): Promise<void> {
  const running = fsyncFolder(dir).finally(() => {
    if (state.running === running) state.running = null;
    if (state.running === null && state.queued === null && directorySyncs.get(dir) === state) directorySyncs.delete(dir);
  });
  state.running = running;
  return running;
}

function headerLine(file: string, session: TranscriptSessionInfo | undefined, clock: Clock): string {
  if (session === undefined || typeof session.sessionId !== 'string' || session.sessionId === '') {
    throw new SwitchboardError('INTERNAL', `transcript ${file} has no header yet and no session info was given to create it`, {
      hint: 'pass options.session ({sessionId, sessionKey, agentId}) with the first append',
    });
  }
  const header: TranscriptHeader = {
    type: 'session',
    version: TRANSCRIPT_VERSION,
    id: session.sessionId,
    timestamp: new Date(clock.now()).toISOString(),
    cwd: session.cwd ?? process.cwd(),
    ...(session.sessionKey !== undefined ? { sessionKey: session.sessionKey } : {}),
    ...(session.agentId !== undefined ? { agentId: session.agentId } : {}),
  };
  return JSON.stringify(header);
}

/** The fields every entry starts with, in this order; the entry's other fields follow in theirs. */
const LEADING_FIELDS = new Set(['type', 'id', 'parentId', 'timestamp']);

/**
 * `{type, id, parentId, timestamp, ...rest}`, copied field by field: a rest pattern that leaves
 * out named keys goes through a slow generic copy in V8, and an ingest batch makes one per record.
 * `Object.keys` lists the same own enumerable string keys in the same order as the spread (and
 * JSON.stringify writes no symbol keys).
 */
function toEntry(entry: NewTranscriptEntry, parentId: string | null, timestamp: () => string): TranscriptEntry {
  const record: TranscriptEntry = { type: entry.type, id: entry.id ?? newUuid(), parentId, timestamp: entry.timestamp ?? timestamp() };
  for (const key of Object.keys(entry)) {
    if (!LEADING_FIELDS.has(key)) record[key] = entry[key];
  }
  return record;
}

function serialise(record: TranscriptEntry, index: number): string {
  try {
    // JSON.stringify escapes newlines inside strings, so one record is always one line
    return JSON.stringify(record);
  } catch (err) {
    throw new SwitchboardError('BAD_INPUT', `transcript entry ${index} cannot be written as JSON`, { cause: err });
  }
}
