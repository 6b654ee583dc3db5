// THE one sessions.json update path (lock → re-read → mutate → atomic replace → fsync folder, with
// a .bak of the previous good file) and the strict readers that never mistake a damaged store for {}.

import { AsyncLocalStorage } from 'node:async_hooks';
import { randomBytes } from 'node:crypto';
import { copyFile, link, lstat, mkdir, open, realpath, rename, unlink } from 'node:fs/promises';
import path from 'node:path';
import writeFileAtomic from 'write-file-atomic';
import { SwitchboardError, errnoOf, toSwitchboardError } from '../core/index.js';
import { clearJournal, recoverJournal, writeJournal, type JournalSession } from './journal.js';
import { withLock, type LockHandle } from './lock.js';
import { memoryVolumeFor } from './memory-volume.js';
import { DIR_MODE, FILE_MODE, resolveInside } from './paths.js';
import { fileKindOf, notRegularFileError, readRegularFile, type FileKind } from './regular-file.js';
import type { SessionStore } from './session-entry.js';

// ---------------------------------------------------------------------------------------------
// File-system seam

/** What the store needs to know of a file: it exists, and what it is. */
export interface FileIdentity {
  size: number;
  mtimeMs: number;
  ctimeMs: number;
  ino: number;
  /** What the name itself is (never a link's target); absent means a regular file. */
  kind?: FileKind;
}

/**
 * The minimal file-system interface the store uses for every disk touch. Production uses
 * `nodeStoreFileSystem`; fault tests wrap it to place a fault at one exact step (e.g. turn the
 * folder read-only just for the replace step) or to inject errors the kernel cannot be made to
 * produce on demand (EIO). write-file-atomic takes no fs parameter, so the seam sits around it:
 * `replaceAtomically` is the library, `writeWholeFile` is the data write it performs through us.
 */
export interface StoreFileSystem {
  /** A regular file's bytes; a link, FIFO or other non-regular file is STORE_CORRUPT, never followed or waited on. */
  readFile(filePath: string): Promise<Buffer>;
  /** Of the name itself (lstat): a link is reported as a link, not as what it points at. */
  stat(filePath: string): Promise<FileIdentity>;
  /** mkdir -p with `mode` for created folders. */
  mkdir(dirPath: string, mode: number): Promise<void>;
  link(existingPath: string, newPath: string): Promise<void>;
  copyFile(sourcePath: string, destinationPath: string): Promise<void>;
  rename(oldPath: string, newPath: string): Promise<void>;
  unlink(filePath: string): Promise<void>;
  /** fsync a file or a folder (so renames in it are durable). */
  fsyncPath(fileOrDirPath: string): Promise<void>;
  /** Creates an empty file with `mode`; EEXIST if the name is taken (never follows a link). */
  createExclusive(filePath: string, mode: number): Promise<void>;
  /** Writes all of `data` into the existing, empty file at `filePath`; a short write is an error. */
  writeWholeFile(filePath: string, data: Buffer): Promise<void>;
  /**
   * Temp file next to `targetPath` (created with `mode`), filled by `fillTemp`, fsynced, renamed
   * over the target. On failure the temp file is removed and the target is untouched.
   */
  replaceAtomically(targetPath: string, mode: number, fillTemp: (tempPath: string) => Promise<void>): Promise<void>;
}

export const nodeStoreFileSystem: StoreFileSystem = {
  readFile: (filePath) => readRegularFile(filePath),
  stat: async (filePath) => {
    const stats = await lstat(filePath);
    return { size: stats.size, mtimeMs: stats.mtimeMs, ctimeMs: stats.ctimeMs, ino: stats.ino, kind: fileKindOf(stats) };
  },
  mkdir: async (dirPath, mode) => {
    await mkdir(dirPath, { recursive: true, mode });
  },
  link: (existingPath, newPath) => link(existingPath, newPath),
  copyFile: (sourcePath, destinationPath) => copyFile(sourcePath, destinationPath),
  rename: (oldPath, newPath) => rename(oldPath, newPath),
  unlink: (filePath) => unlink(filePath),
  fsyncPath: async (fileOrDirPath) => {
    const handle = await open(fileOrDirPath, 'r');
    try {
      await handle.sync();
    } finally {
      await handle.close();
    }
  },
  createExclusive: async (filePath, mode) => {
    await (await open(filePath, 'wx', mode)).close();
  },
  writeWholeFile: async (filePath, data) => {
    const handle = await open(filePath, 'r+');
    try {
      // write(2) may write fewer bytes than asked when the disk fills up; only the next call
      // reports ENOSPC. Looping until every byte is down is what turns that into an error.
      let offset = 0;
      while (offset < data.length) {
        const { bytesWritten } = await handle.write(data, offset, data.length - offset, offset);
        if (bytesWritten <= 0) {
          throw Object.assign(new Error(`no progress writing ${filePath}`), { code: 'ENOSPC' });
        }
        offset += bytesWritten;
      }
    } finally {
      await handle.close();
    }
  },
  replaceAtomically: async (targetPath, mode, fillTemp) => {
    // write-file-atomic 7.0.1 writes its data with ONE fs.write() and ignores a short count: on a
    // nearly full disk it fsyncs and renames a truncated temp over the good file (reproduced on a
    // size-limited tmpfs). So it gets empty data and we fill the temp in its `tmpfileCreated`
    // hook, which it awaits after opening the temp and before its (no-op) write, fsync, chmod
    // and rename; its finally-block still removes the temp on any failure.
    //
    // write-file-atomic also resolves the target with realpath() and renames over what a symlink
    // points at, so a link must be refused here: before (lstat of the name), and again in the
    // hook, where a temp that is not next to the name means realpath() went somewhere else
    // (a link swapped in meanwhile); throwing there leaves the target untouched.
    const kind = await lstat(targetPath).then(fileKindOf, (err: unknown) => {
      if (errnoOf(err) === 'ENOENT') return null;
      throw err;
    });
    if (kind !== null && kind !== 'file') throw notRegularFileError(targetPath, kind);
    // Its temp is `<realpath of the target>.<uint32>`, or `<target>.<uint32>` for a new file.
    const dirs = new Set([path.dirname(path.resolve(targetPath)), await realpath(path.dirname(targetPath))]);
    const baseName = path.basename(targetPath);
    await writeFileAtomic(targetPath, '', {
      mode,
      fsync: true,
      tmpfileCreated: async (tempPath: string) => {
        const tempName = path.basename(tempPath);
        if (!dirs.has(path.dirname(tempPath)) || !tempName.startsWith(`${baseName}.`) || !/^\d+$/.test(tempName.slice(baseName.length + 1))) {
          throw notRegularFileError(targetPath, 'symlink');
        }
        await fillTemp(tempPath);
      },
    });
  },
};

/** The file system a path lives on: a mounted memory volume (incognito) or the disk. */
export function fileSystemFor(filePath: string): StoreFileSystem {
  return memoryVolumeFor(filePath)?.fileSystem ?? nodeStoreFileSystem;
}

// ---------------------------------------------------------------------------------------------
// Errors

const REPAIR_HINT =
  'run `switchboard doctor --repair` to restore the last good copy (sessions.json.bak) or rebuild the entries from transcript headers';

function storeCorrupt(storePath: string, reason: string, sizeBytes: number): SwitchboardError {
  return new SwitchboardError('STORE_CORRUPT', `session store ${storePath} is damaged: ${reason}; it was left untouched`, {
    hint: REPAIR_HINT,
    details: { path: storePath, reason, sizeBytes },
  });
}

function ioHint(errno: string | undefined): string {
  switch (errno) {
    case 'ENOSPC':
    case 'EDQUOT':
      return 'the disk (or quota) is full: free some space and retry; the store was left as it was';
    case 'EROFS':
      return 'the file system is mounted read-only; the store was left as it was';
    case 'EACCES':
    case 'EPERM':
      return 'permission denied: check the owner, mode and immutable flags of the store folder and files';
    case 'EIO':
      return 'the device reported an I/O error: check the disk; the store was left as it was';
    default:
      return 'the store was left as it was; retry once the cause is fixed';
  }
}

function ioError(err: unknown, action: string, filePath: string): SwitchboardError {
  if (err instanceof SwitchboardError) return err;
  const errno = (err as NodeJS.ErrnoException | undefined)?.code;
  const reason = errno ?? (err instanceof Error ? err.message : String(err));
  return new SwitchboardError('IO', `cannot ${action} ${filePath}: ${reason}`, {
    cause: err,
    hint: ioHint(errno),
    details: { path: filePath, errno },
  });
}


// ---------------------------------------------------------------------------------------------
// Parsing and serialising

const strictUtf8 = new TextDecoder('utf-8', { fatal: true });

interface ParsedStoreFile {
  /** Decoded text, BOM stripped; compared with the next serialisation to skip identical writes. */
  text: string;
  store: SessionStore;
}

function decodeAndParse(bytes: Uint8Array, storePath: string): ParsedStoreFile {
  if (bytes.length === 0) throw storeCorrupt(storePath, 'the file is empty', 0);
  if (bytes.includes(0)) throw storeCorrupt(storePath, 'the file contains NUL bytes', bytes.length);
  let text: string;
  try {
    text = strictUtf8.decode(bytes);
  } catch {
    throw storeCorrupt(storePath, 'the file is not valid UTF-8', bytes.length);
  }
  if (text.trim() === '') throw storeCorrupt(storePath, 'the file holds only whitespace', bytes.length);
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    throw storeCorrupt(storePath, `the file is not JSON (${(err as Error).message})`, bytes.length);
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
    throw storeCorrupt(storePath, 'the top level is not a JSON object', bytes.length);
  }
  for (const [sessionKey, entry] of Object.entries(parsed)) {
    if (entry === null || typeof entry !== 'object' || Array.isArray(entry)) {
      throw storeCorrupt(storePath, `entry "${sessionKey.slice(0, 200)}" is not an object`, bytes.length);
    }
  }
  return { text, store: parsed as SessionStore };
}

/** Validates sessions.json bytes; anything but an object of objects is STORE_CORRUPT. */
export function parseSessionStore(bytes: Uint8Array, storePath: string): SessionStore {
  return decodeAndParse(bytes, storePath).store;
}

/** The on-disk form: 2-space JSON with a final newline. */
export function serializeSessionStore(store: SessionStore): string {
  return `${JSON.stringify(store, null, 2)}\n`;
}

// ---------------------------------------------------------------------------------------------
// Readers

export interface ReadSessionStoreOptions {
  fs?: StoreFileSystem;
}

/** Raw bytes of the store, or null when it does not exist yet (a new store). */
async function readStoreBytes(fs: StoreFileSystem, storePath: string): Promise<Buffer | null> {
  try {
    return await fs.readFile(storePath);
  } catch (err) {
    if (errnoOf(err) === 'ENOENT') return null;
    throw ioError(err, 'read', storePath);
  }
}

/**
 * Reads sessions.json for decisions. Missing → `{}` (a new store); empty, truncated, garbage,
 * NULs or not an object → STORE_CORRUPT. No lock needed: writers only ever rename whole files.
 */
export async function readSessionStore(storePath: string, options: ReadSessionStoreOptions = {}): Promise<SessionStore> {
  const absolutePath = path.resolve(storePath);
  const bytes = await readStoreBytes(options.fs ?? fileSystemFor(absolutePath), absolutePath);
  return bytes === null ? {} : decodeAndParse(bytes, absolutePath).store;
}

// ---------------------------------------------------------------------------------------------
// The update path

export type SessionStoreMutator<T> = (store: SessionStore, tx: StoreTransaction) => T | Promise<T>;

/**
 * What a mutator run by transactSessionStore() may use besides the store: the held store lock and
 * the write-ahead journal (write it before appending the records the new entries describe).
 */
export interface StoreTransaction {
  readonly storePath: string;
  readonly handle: LockHandle;
  writeJournal(sessions: JournalSession[], now: number): Promise<void>;
}

export interface SessionStoreLockOptions {
  acquireTimeoutMs?: number;
  staleMs?: number;
  maxHoldMs?: number;
}

export interface UpdateSessionStoreOptions {
  lock?: SessionStoreLockOptions;
  fs?: StoreFileSystem;
  /** Most mutators applied by one lock+read+write (default 500). */
  maxBatchSize?: number;
  /**
   * No store upkeep on this write: for maintenance's own removals, which follow a plan of their
   * own (with its --active-key sessions) and must not have it changed under them.
   */
  skipUpkeep?: boolean;
}

/** Per-process counters of one store, for tests, benchmarks and `--verbose`. */
export interface SessionStoreStats {
  /** Calls of updateSessionStore(). */
  updates: number;
  /** Lock+read(+write) cycles that applied a batch of mutators. */
  batches: number;
  /** Batches that replaced the file. */
  writes: number;
  /** Batches whose result was byte-identical, so nothing was written. */
  unchangedBatches: number;
  /** Batches that failed as a whole (corrupt store, busy lock, I/O error). */
  failedBatches: number;
}

/** The store lock is held only for read-mutate-write; a holder stuck for a minute is broken. */
const DEFAULT_STORE_LOCK: Required<SessionStoreLockOptions> = { acquireTimeoutMs: 30_000, staleMs: 10_000, maxHoldMs: 60_000 };
const DEFAULT_MAX_BATCH_SIZE = 500;

interface PendingUpdate {
  mutate: SessionStoreMutator<unknown>;
  resolve: (value: unknown) => void;
  reject: (reason: unknown) => void;
  fs: StoreFileSystem;
  lock: Required<SessionStoreLockOptions>;
  maxBatchSize: number;
  /** A transaction: runs in a batch of its own, may have side effects, is never re-run. */
  alone: boolean;
  skipUpkeep: boolean;
}

interface StoreQueue {
  pending: PendingUpdate[];
  draining: boolean;
}

type Outcome = { ok: true; value: unknown } | { ok: false; error: unknown };

/**
 * Work the owner of a store does on every write of it, inside the same lock+read+write, on the
 * batch's result: maintenance in enforce mode removes entries here (as OpenClaw does on every
 * store save). It returns what to do once the write is over (archive what it removed, let go of
 * the locks it took) — `written` says whether its removals reached the file — or null.
 */
export type StoreUpkeep = (store: SessionStore, tx: StoreTransaction) => Promise<StoreUpkeepFinish | null>;
export type StoreUpkeepFinish = (written: boolean) => Promise<void>;

/** Which upkeep (if any) a store gets: set once by the engine; store/ knows no policy. */
let upkeepProvider: ((storePath: string) => StoreUpkeep | null) | null = null;

export function setStoreUpkeepProvider(provider: ((storePath: string) => StoreUpkeep | null) | null): void {
  upkeepProvider = provider;
}

/** Upkeep is best effort: a failure leaves the batch as its callers made it (the schedule catches up). */
async function startUpkeep(storePath: string, store: SessionStore, tx: StoreTransaction): Promise<StoreUpkeepFinish | null> {
  const upkeep = upkeepProvider?.(storePath) ?? null;
  if (upkeep === null) return null;
  try {
    return await upkeep(store, tx);
  } catch {
    return null;
  }
}

const queues = new Map<string, StoreQueue>();
const statsByStore = new Map<string, SessionStoreStats>();
/** Which store a mutator is running for: a nested update of the same store would wait forever. */
const mutatingStore = new AsyncLocalStorage<string>();

function statsFor(storePath: string): SessionStoreStats {
  let stats = statsByStore.get(storePath);
  if (stats === undefined) {
    stats = { updates: 0, batches: 0, writes: 0, unchangedBatches: 0, failedBatches: 0 };
    statsByStore.set(storePath, stats);
  }
  return stats;
}

/** A snapshot of this process's counters for one store. */
export function getSessionStoreStats(storePath: string): SessionStoreStats {
  return { ...statsFor(path.resolve(storePath)) };
}

/**
 * Applies `mutate` to sessions.json and returns what it returned. The mutator edits the store
 * object in place. Inside one process, calls for the same store are queued and applied in
 * order, several per lock+read+write; a mutator that throws gets its own error and its changes
 * are discarded, the others still land. Mutators must not have side effects outside the store:
 * when a sibling in the batch throws, the others are re-run on a fresh copy of the file.
 * Errors: STORE_CORRUPT (file unreadable, nothing written), STORE_BUSY (lock wait timed out),
 * IO (disk full, EIO, read-only…: the previous file is intact and no temp file is left).
 */
export function updateSessionStore<T>(
  storePath: string,
  mutate: SessionStoreMutator<T>,
  options: UpdateSessionStoreOptions = {},
): Promise<T> {
  return enqueueUpdate(storePath, mutate, options, false);
}

/**
 * The same update path for work with side effects under the store lock (ingest: plan → journal →
 * append records → commit). `work` runs alone in its lock+read+write and is never re-run; if it
 * throws, nothing is written and the journal it wrote is completed by the next writer.
 */
export function transactSessionStore<T>(
  storePath: string,
  work: SessionStoreMutator<T>,
  options: UpdateSessionStoreOptions = {},
): Promise<T> {
  return enqueueUpdate(storePath, work, options, true);
}

function enqueueUpdate<T>(storePath: string, mutate: SessionStoreMutator<T>, options: UpdateSessionStoreOptions, alone: boolean): Promise<T> {
  const absolutePath = path.resolve(storePath);
  if (mutatingStore.getStore() === absolutePath) {
    return Promise.reject(
      new SwitchboardError('INTERNAL', `nested updateSessionStore() on ${absolutePath} from inside a mutator would deadlock`, {
        hint: 'this is a bug in switchboard: do the whole change in the outer mutator',
      }),
    );
  }
  return new Promise<T>((resolve, reject) => {
    let queue = queues.get(absolutePath);
    if (queue === undefined) {
      queue = { pending: [], draining: false };
      queues.set(absolutePath, queue);
    }
    queue.pending.push({
      mutate,
      resolve: resolve as (value: unknown) => void,
      reject,
      fs: options.fs ?? fileSystemFor(absolutePath),
      lock: { ...DEFAULT_STORE_LOCK, ...definedOnly(options.lock ?? {}) },
      maxBatchSize: Math.max(1, Math.floor(options.maxBatchSize ?? DEFAULT_MAX_BATCH_SIZE)),
      alone,
      skipUpkeep: options.skipUpkeep === true,
    });
    statsFor(absolutePath).updates += 1;
    if (!queue.draining) {
      queue.draining = true;
      const started = queue;
      // Start on the next turn so every caller of this turn joins the first batch; outside any
      // mutator's context, since this drain also serves callers that come later.
      mutatingStore.exit(() => setImmediate(() => void drainQueue(absolutePath, started)));
    }
  });
}

function definedOnly(lock: SessionStoreLockOptions): SessionStoreLockOptions {
  return Object.fromEntries(Object.entries(lock).filter(([, value]) => value !== undefined));
}

function sameSettings(a: PendingUpdate, b: PendingUpdate): boolean {
  return (
    a.fs === b.fs &&
    a.skipUpkeep === b.skipUpkeep &&
    a.lock.acquireTimeoutMs === b.lock.acquireTimeoutMs &&
    a.lock.staleMs === b.lock.staleMs &&
    a.lock.maxHoldMs === b.lock.maxHoldMs
  );
}

/** The oldest pending update plus those right behind it that share its settings. */
function takeBatch(queue: StoreQueue): PendingUpdate[] {
  const first = queue.pending[0]!;
  let count = 1;
  if (!first.alone) {
    while (count < queue.pending.length && count < first.maxBatchSize && !queue.pending[count]!.alone && sameSettings(first, queue.pending[count]!)) count += 1;
  }
  return queue.pending.splice(0, count);
}

async function drainQueue(storePath: string, queue: StoreQueue): Promise<void> {
  while (queue.pending.length > 0) {
    await applyBatch(storePath, takeBatch(queue));
  }
  // No await since the emptiness check above, so no caller can have slipped in.
  queue.draining = false;
  queues.delete(storePath);
}

/** One lock+read+write for a batch; settles every caller and never throws. */
async function applyBatch(storePath: string, batch: PendingUpdate[]): Promise<void> {
  const first = batch[0]!;
  const fs = first.fs;
  const stats = statsFor(storePath);
  stats.batches += 1;
  let outcomes: Outcome[];
  try {
    try {
      await fs.mkdir(path.dirname(storePath), DIR_MODE);
    } catch (err) {
      throw ioError(err, 'create the folder of', storePath);
    }
    // takeover 'dead': never from a live (e.g. stopped) holder, see lock.ts "Takeover policies".
    outcomes = await withReplaceRetries(batch, () => withLock(storePath, { ...first.lock, busyCode: 'STORE_BUSY', takeover: 'dead' }, async (handle) => {
      // Re-read inside the lock: another process may have replaced the file since we last saw it.
      // The identity of what was read is pinned: the replace checks it is still the file in place.
      const { bytes, pin } = await readPinned(fs, storePath, handle);
      let original = bytes === null ? null : decodeAndParse(bytes, storePath);
      // First complete what a writer that died after its appends left in the journal, and commit
      // that on its own: this batch's journal will overwrite the old one.
      const recoveredStore = original === null ? {} : original.store;
      const recovery = await recoverJournal(storePath, recoveredStore);
      if (recovery !== null && recovery.recovered.length > 0) {
        const recoveredText = serializeSessionStore(recoveredStore);
        await handle.verifyHeld();
        await replaceStoreFile(fs, storePath, recoveredText, original !== null, pin);
        stats.writes += 1;
        original = { text: recoveredText, store: recoveredStore };
      }
      let journalToClear = recovery !== null;
      const tx: StoreTransaction = {
        storePath,
        handle,
        writeJournal: async (sessions, now) => {
          await writeJournal(storePath, sessions, now);
          journalToClear = journalToClear || sessions.length > 0;
        },
      };
      const { store, outcomes: batchOutcomes } = await applyMutators(storePath, original, batch, tx);
      const finishUpkeep = first.skipUpkeep ? null : await startUpkeep(storePath, store, tx);
      let written = false;
      try {
        const nextText = serializeSessionStore(store);
        const unchanged = original === null ? Object.keys(store).length === 0 : nextText === original.text;
        if (unchanged) {
          stats.unchangedBatches += 1;
          if (journalToClear) await clearJournal(storePath);
          return batchOutcomes;
        }
        // A lock taken over by a waiter (we overran maxHoldMs) must not be written through.
        await handle.verifyHeld();
        await replaceStoreFile(fs, storePath, nextText, original !== null, pin);
        written = true;
        stats.writes += 1;
        // A transaction that threw leaves its journal for the next writer (its records may be down).
        if (journalToClear && batchOutcomes.every((outcome) => outcome.ok)) await clearJournal(storePath);
        return batchOutcomes;
      } finally {
        await finishUpkeep?.(written).catch(() => undefined);
      }
    }));
  } catch (err) {
    stats.failedBatches += 1;
    const error = toSwitchboardError(err);
    for (const update of batch) update.reject(error);
    return;
  }
  // Settled after the lock is released, so callers that chain another update never wait on us.
  batch.forEach((update, index) => {
    const outcome = outcomes[index]!;
    if (outcome.ok) update.resolve(outcome.value);
    else update.reject(outcome.error);
  });
}

/**
 * Runs the batch's mutators in order on one working copy. When one throws, its partial edits
 * cannot be picked out, so the copy is rebuilt from the file text and the mutators before it are
 * replayed without it. Cost is zero in the common case and bounded by the batch size otherwise.
 */
async function applyMutators(
  storePath: string,
  original: ParsedStoreFile | null,
  batch: PendingUpdate[],
  tx: StoreTransaction,
): Promise<{ store: SessionStore; outcomes: Outcome[] }> {
  const failures = new Map<number, unknown>();
  let store: SessionStore = original === null ? {} : original.store;
  for (;;) {
    const values = new Map<number, unknown>();
    let failedNow = false;
    for (let index = 0; index < batch.length; index += 1) {
      if (failures.has(index)) continue;
      const mutate = batch[index]!.mutate;
      const working = store;
      try {
        values.set(index, await mutatingStore.run(storePath, () => mutate(working, tx)));
      } catch (err) {
        failures.set(index, err);
        failedNow = true;
        break;
      }
    }
    if (!failedNow) {
      const outcomes = batch.map((_, index): Outcome =>
        failures.has(index) ? { ok: false, error: failures.get(index) } : { ok: true, value: values.get(index) },
      );
      return { store, outcomes };
    }
    store = original === null ? {} : (JSON.parse(original.text) as SessionStore);
  }
}

/**
 * What one lock holding knows about the sessions.json in place: the file it read (identity, or
 * null for "none yet"), updated after each of its own replaces. A replace goes ahead only while
 * that is still the file in place.
 */
export interface StorePin {
  readonly handle: LockHandle;
  identity: FileIdentity | null;
}

/** Same file: inode, size and mtime (ctime is left out: taking the .bak link changes it). */
function sameFile(a: FileIdentity | null, b: FileIdentity | null): boolean {
  if (a === null || b === null) return a === b;
  return a.ino === b.ino && a.size === b.size && a.mtimeMs === b.mtimeMs;
}

async function identityOrNull(fs: StoreFileSystem, filePath: string): Promise<FileIdentity | null> {
  try {
    return await fs.stat(filePath);
  } catch (err) {
    if (errnoOf(err) === 'ENOENT') return null;
    throw ioError(err, 'inspect', filePath);
  }
}

/**
 * Reads the store under the lock and pins the identity of the file read: stat, read, stat again
 * until both stats agree (a rename between them would pair the bytes with the wrong file).
 */
async function readPinned(fs: StoreFileSystem, storePath: string, handle: LockHandle): Promise<{ bytes: Buffer | null; pin: StorePin }> {
  for (let attempt = 1; ; attempt += 1) {
    const before = await identityOrNull(fs, storePath);
    const bytes = await readStoreBytes(fs, storePath);
    const after = await identityOrNull(fs, storePath);
    if ((bytes === null) === (after === null) && sameFile(before, after)) return { bytes, pin: { handle, identity: after } };
    if (attempt >= MAX_REPLACE_ATTEMPTS) throw replacedUnderUs(storePath, 'while it was being read');
  }
}

/** Attempts of one batch whose sessions.json changed under its lock (see replaceStoreFile). */
const MAX_REPLACE_ATTEMPTS = 5;

/**
 * sessions.json was replaced by someone who does not hold the lock (a writer that lost it, an
 * operator), or this writer lost the lock around its rename. Nothing it wrote is acknowledged;
 * the batch is retried from the read (see withReplaceRetries).
 */
function replacedUnderUs(storePath: string, when: string): SwitchboardError {
  return new SwitchboardError('STORE_BUSY', `session store ${storePath} was replaced by another writer ${when}`, {
    hint: 'another process wrote without holding the store lock (or the lock was released by force); retry',
    details: { path: storePath, reason: 'replaced', retry: true },
  });
}

function isRetryableConflict(err: unknown): boolean {
  if (!(err instanceof SwitchboardError) || err.code !== 'STORE_BUSY') return false;
  return err.details?.retry === true || err.details?.reason === 'lost';
}

/**
 * Runs one lock+read+mutate+write attempt again (lock released and taken anew) when its replace
 * found sessions.json changed under it or its lock lost: the mutators re-run on what is there,
 * so what the other writer committed stays and this batch's changes land on top. A batch with a
 * transaction (side effects, never re-run) fails instead; its journal is completed later.
 */
async function withReplaceRetries<T>(batch: PendingUpdate[], attempt: () => Promise<T>): Promise<T> {
  for (let tries = 1; ; tries += 1) {
    try {
      return await attempt();
    } catch (err) {
      if (!isRetryableConflict(err) || tries >= MAX_REPLACE_ATTEMPTS || batch.some((update) => update.alone)) throw err;
    }
  }
}

/**
 * Keeps `<store>.bak` = the previous good file, then replaces the store and fsyncs the folder.
 * The backup is a hard link to the current inode (no copy: the store is only ever replaced by
 * rename, never edited in place, so that inode keeps the old bytes), made under a temp name and
 * renamed over the old .bak: at every instant both names hold a complete, parseable file.
 *
 * Our own temp + write + fsync + rename (not write-file-atomic) so that the file in place can be
 * checked between the steps, and each step goes through the StoreFileSystem seam (tests record
 * their order). The replace verifies that the file it read is the file it replaces: the .bak
 * link, taken from the file in place, must be the pinned one (so .bak keeps what was there), and
 * right before the rename (fenced: this process cannot give the lock up during it) the target is
 * checked again; right after the rename and the folder fsync the lock must still be ours (owner
 * record on disk) and the target our file. Any mismatch is STORE_BUSY/replaced and the batch is
 * retried from the read; a mismatch before the rename leaves the other writer's file in place.
 */
async function replaceStoreFile(fs: StoreFileSystem, storePath: string, text: string, hasPrevious: boolean, pin: StorePin): Promise<void> {
  const dir = path.dirname(storePath);
  const baseName = path.basename(storePath);
  // The backup link and the durable temp file do not depend on each other: done side by side,
  // they cost one round of file operations (and one fsync wait) instead of two.
  const backup = hasPrevious
    ? refreshBackup(fs, storePath, resolveInside(dir, `${baseName}.bak`), resolveInside(dir, `${baseName}.bak.tmp`), pin.identity)
    : Promise.resolve();
  const temp = createTempNextTo(fs, storePath).then(async (tempPath) => {
    try {
      await fs.writeWholeFile(tempPath, Buffer.from(text, 'utf8'));
      await fs.fsyncPath(tempPath);
      return { tempPath, written: await fs.stat(tempPath) };
    } catch (err) {
      await fs.unlink(tempPath).catch(() => undefined);
      throw ioError(err, 'write', storePath);
    }
  });
  const [kept, prepared] = await Promise.allSettled([backup, temp]);
  if (kept.status === 'rejected') {
    if (prepared.status === 'fulfilled') await fs.unlink(prepared.value.tempPath).catch(() => undefined);
    throw kept.reason;
  }
  if (prepared.status === 'rejected') throw prepared.reason;
  const { tempPath, written } = prepared.value;
  try {
    if (!sameFile(await identityOrNull(fs, storePath), pin.identity)) throw replacedUnderUs(storePath, 'before the rename');
    await pin.handle.fence(() => fs.rename(tempPath, storePath));
  } catch (err) {
    await fs.unlink(tempPath).catch(() => undefined);
    throw ioError(err, 'write', storePath);
  }
  await fsyncFolder(fs, dir);
  try {
    await pin.handle.verifyHeld();
  } catch (err) {
    if (!(err instanceof SwitchboardError)) throw err;
    throw new SwitchboardError('STORE_BUSY', `lost the lock of ${storePath} around its rename: ${err.message}`, {
      cause: err,
      hint: 'the update is retried under a fresh lock',
      details: { path: storePath, reason: 'replaced', retry: true },
    });
  }
  const inPlace = await identityOrNull(fs, storePath);
  if (inPlace === null || inPlace.ino !== written.ino) throw replacedUnderUs(storePath, 'right after the rename');
  pin.identity = inPlace;
}

/** An empty temp file next to the store, named `<store>.<uint32>` like write-file-atomic's (doctor knows the shape). */
async function createTempNextTo(fs: StoreFileSystem, storePath: string): Promise<string> {
  const dir = path.dirname(storePath);
  for (let attempt = 1; ; attempt += 1) {
    const tempPath = resolveInside(dir, `${path.basename(storePath)}.${randomBytes(4).readUInt32BE(0)}`);
    try {
      await fs.createExclusive(tempPath, FILE_MODE);
      return tempPath;
    } catch (err) {
      if (errnoOf(err) === 'EEXIST' && attempt < 10) continue;
      throw ioError(err, 'write', storePath);
    }
  }
}

/** Hard links are refused on some file systems and for immutable files: copy instead. */
const LINK_UNSUPPORTED = new Set(['EPERM', 'ENOTSUP', 'EOPNOTSUPP', 'EXDEV', 'EMLINK', 'ENOSYS']);

async function refreshBackup(
  fs: StoreFileSystem,
  storePath: string,
  backupPath: string,
  backupTempPath: string,
  pinned: FileIdentity | null,
): Promise<void> {
  // Only the store-lock holder uses this temp name, so a leftover is from a crashed writer.
  await fs.unlink(backupTempPath).catch(() => undefined);
  try {
    let linked = true;
    try {
      await fs.link(storePath, backupTempPath);
    } catch (err) {
      // removed behind our back: the check before the rename reports it
      if (errnoOf(err) === 'ENOENT') return;
      if (!LINK_UNSUPPORTED.has(errnoOf(err) ?? '')) throw err;
      await fs.copyFile(storePath, backupTempPath);
      await fs.fsyncPath(backupTempPath);
      linked = false;
    }
    // The link holds whatever file was in place when it was taken: if that is not the file we
    // read, another writer replaced it, and the old .bak is kept instead of a copy of theirs.
    if (linked && !sameFile(await fs.stat(backupTempPath), pinned)) throw replacedUnderUs(storePath, 'before its backup was kept');
    await fs.rename(backupTempPath, backupPath);
  } catch (err) {
    await fs.unlink(backupTempPath).catch(() => undefined);
    throw ioError(err, 'keep the backup copy of', storePath);
  }
}

/** Folders that cannot be fsynced on this platform/file system are not an error. */
const FOLDER_FSYNC_UNSUPPORTED = new Set(['EINVAL', 'ENOTSUP', 'EOPNOTSUPP', 'EISDIR']);

async function fsyncFolder(fs: StoreFileSystem, dir: string): Promise<void> {
  try {
    await fs.fsyncPath(dir);
  } catch (err) {
    if (FOLDER_FSYNC_UNSUPPORTED.has(errnoOf(err) ?? '')) return;
    // The new file is already in place; what is uncertain is whether it survives a power loss.
    throw new SwitchboardError('IO', `cannot fsync the folder ${dir}: ${errnoOf(err) ?? String(err)}`, {
      cause: err,
      hint: 'the change is visible but may not be durable; check the disk',
      details: { path: dir, errno: errnoOf(err), replaced: true },
    });
  }
}
