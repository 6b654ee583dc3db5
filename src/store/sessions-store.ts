// THE one sessions.json update path: lock → re-read → mutate → atomic replace → fsync folder, with
// a .bak of the previous good file. This module holds the per-store queue that batches callers
// into one lock+read+write, the batch itself (journal recovery, mutators, upkeep) and its retry
// on a conflicting replace. The strict readers are sessions-store-read.ts, the checked replace
// sessions-store-replace.ts, the file-system seam store-fs.ts.

import { AsyncLocalStorage } from 'node:async_hooks';
import path from 'node:path';
import { SwitchboardError, toSwitchboardError } from '../core/index.js';
import { clearJournal, recoverJournal, writeJournal, type JournalSession } from './journal.js';
import { withLock, type LockHandle } from './lock.js';
import { DIR_MODE } from './paths.js';
import type { SessionEntry, SessionStore } from './session-entry.js';
import { keepRemovedMemories } from './removed-memory.js';
import { decodeAndParse, ioError, mayHoldNonFinite, reparseStoreText, serializeSessionStore, type ParsedStoreFile } from './sessions-store-read.js';
import { MAX_REPLACE_ATTEMPTS, isRetryableConflict, readPinned, replaceStoreFile } from './sessions-store-replace.js';
import { fileSystemFor, type StoreFileSystem } from './store-fs.js';

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
  /**
   * THE way an entry leaves the store (delete, cleanup, upkeep): its recent message ids are kept
   * in sessions.json.removed by the same write, before the file is replaced, so that a resend to
   * the key is still a duplicate (removed-memory.ts). `now` is the caller's clock.
   */
  removeEntry(store: SessionStore, key: string, now: number): void;
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
 * `touched()`: the keys this batch's mutators added or whose updatedAt they changed — the sessions
 * being written right now, whose callers are answered once the file (and the upkeep) is done;
 * worked out on first call (most writes' upkeep has nothing to do and never asks).
 */
export type StoreUpkeep = (store: SessionStore, tx: StoreTransaction, touched: () => ReadonlySet<string>) => Promise<StoreUpkeepFinish | null>;
export type StoreUpkeepFinish = (written: boolean) => Promise<void>;

/** Which upkeep (if any) a store gets: set once by the engine; store/ knows no policy. */
let upkeepProvider: ((storePath: string) => StoreUpkeep | null) | null = null;

export function setStoreUpkeepProvider(provider: ((storePath: string) => StoreUpkeep | null) | null): void {
  upkeepProvider = provider;
}

/** Upkeep is best effort: a failure leaves the batch as its callers made it (the schedule catches up). */
async function startUpkeep(upkeep: StoreUpkeep, store: SessionStore, tx: StoreTransaction, updatedBefore: ReadonlyMap<string, unknown>): Promise<StoreUpkeepFinish | null> {
  let touched: Set<string> | undefined;
  try {
    return await upkeep(store, tx, () => (touched ??= touchedKeys(updatedBefore, store)));
  } catch {
    return null;
  }
}

/** Each key's updatedAt as read, before the batch's mutators run (they change the store in place). */
function updatedAtByKey(store: SessionStore | undefined): Map<string, unknown> {
  const byKey = new Map<string, unknown>();
  for (const key in store) if (Object.hasOwn(store, key)) byKey.set(key, (store[key] as { updatedAt?: unknown } | null)?.updatedAt);
  return byKey;
}

/** The keys the batch added, or whose updatedAt it changed. */
function touchedKeys(updatedBefore: ReadonlyMap<string, unknown>, store: SessionStore): Set<string> {
  const touched = new Set<string>();
  for (const key in store) {
    if (!Object.hasOwn(store, key)) continue;
    if (!updatedBefore.has(key) || !Object.is(updatedBefore.get(key), (store[key] as { updatedAt?: unknown } | null)?.updatedAt)) touched.add(key);
  }
  return touched;
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
  let settled = false;
  // Callers learn their outcome as soon as sessions.json holds it (durable, lock verified): the
  // journal truncate and the lock release that follow are not part of what they wait for.
  const settle = (outcomes: Outcome[]): void => {
    if (settled) return;
    settled = true;
    batch.forEach((update, index) => {
      const outcome = outcomes[index]!;
      if (outcome.ok) update.resolve(outcome.value);
      else update.reject(outcome.error);
    });
  };
  let outcomes: Outcome[];
  try {
    try {
      await fs.mkdir(path.dirname(storePath), DIR_MODE);
    } catch (err) {
      throw ioError(err, 'create the folder of', storePath);
    }
    // takeover 'dead': never from a live (e.g. stopped) holder, see lock-owner.ts "Takeover policies".
    outcomes = await withReplaceRetries(batch, () => settled, () => withLock(storePath, { ...first.lock, busyCode: 'STORE_BUSY', takeover: 'dead' }, async (handle) => {
      // Re-read inside the lock: another process may have replaced the file since we last saw it.
      // The identity of what was read is pinned: the replace checks it is still the file in place.
      const { bytes, pin } = await readPinned(fs, storePath, handle);
      let original = bytes === null ? null : decodeAndParse(bytes, storePath);
      // First complete what a writer that died after its appends left in the journal, and commit
      // that on its own: this batch's journal will overwrite the old one.
      const recoveredStore = original === null ? {} : original.store;
      const keepNonFinite = original !== null && mayHoldNonFinite(original.text);
      const recovery = await recoverJournal(storePath, recoveredStore);
      if (recovery !== null && recovery.recovered.length > 0) {
        const recoveredText = serializeSessionStore(recoveredStore, keepNonFinite);
        await handle.verifyHeld();
        await replaceStoreFile(fs, storePath, recoveredText, original !== null, pin);
        stats.writes += 1;
        original = { text: recoveredText, store: recoveredStore };
      }
      let journalToClear = recovery !== null;
      const removals = new Map<string, SessionEntry>();
      let removedAt = 0;
      const tx: StoreTransaction = {
        storePath,
        handle,
        writeJournal: async (sessions, now) => {
          await writeJournal(storePath, sessions, now);
          journalToClear = journalToClear || sessions.length > 0;
        },
        removeEntry: (working, key, now) => {
          if (!Object.hasOwn(working, key)) return;
          removals.set(key, working[key]!);
          removedAt = Math.max(removedAt, now);
          delete working[key];
        },
      };
      // Chosen before the mutators run: only a store with upkeep (enforce mode) needs the updatedAt
      // of every entry as read, to tell the sessions this batch writes.
      const upkeep = first.skipUpkeep ? null : (upkeepProvider?.(storePath) ?? null);
      const updatedBefore = upkeep === null ? undefined : updatedAtByKey(original?.store);
      const { store, outcomes: batchOutcomes } = await applyMutators(storePath, original, batch, tx);
      const finishUpkeep = upkeep === null ? null : await startUpkeep(upkeep, store, tx, updatedBefore!);
      let written = false;
      // The outcomes go out once the file is durable; with upkeep to finish, once it is finished
      // too (the archives and transcripts it removes are gone), so that a caller who is answered
      // finds the folder within its disk budget, as the answer's batch left it.
      let finished: Outcome[] | undefined;
      const handOut = (outcomes: Outcome[]): void => {
        if (finishUpkeep === null) settle(outcomes);
        else finished = outcomes;
      };
      try {
        const nextText = serializeSessionStore(store, keepNonFinite);
        const unchanged = original === null ? Object.keys(store).length === 0 : nextText === original.text;
        if (unchanged) {
          stats.unchangedBatches += 1;
          handOut(batchOutcomes);
          if (journalToClear) await clearJournal(storePath);
          return batchOutcomes;
        }
        // What the removed entries remembered goes down first (a mutator that failed and was
        // replayed away may have removed a key that is back: only the keys gone now count).
        const gone = new Map([...removals].filter(([key]) => !Object.hasOwn(store, key)));
        if (gone.size > 0) await keepRemovedMemories(fs, storePath, gone, removedAt);
        // A lock taken over by a waiter (we overran maxHoldMs) must not be written through.
        await handle.verifyHeld();
        await replaceStoreFile(fs, storePath, nextText, original !== null, pin);
        written = true;
        stats.writes += 1;
        handOut(batchOutcomes);
        // A transaction that threw leaves its journal for the next writer (its records may be down).
        if (journalToClear && batchOutcomes.every((outcome) => outcome.ok)) await clearJournal(storePath);
        return batchOutcomes;
      } finally {
        await finishUpkeep?.(written).catch(() => undefined);
        if (finished !== undefined) settle(finished);
      }
    }));
  } catch (err) {
    // After the outcomes were handed out only the release can fail: the file is written.
    if (settled) return;
    stats.failedBatches += 1;
    const error = toSwitchboardError(err);
    for (const update of batch) update.reject(error);
    return;
  }
  settle(outcomes);
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
    store = original === null ? {} : reparseStoreText(original.text);
  }
}

/**
 * Runs one lock+read+mutate+write attempt again (lock released and taken anew) when its replace
 * found sessions.json changed under it or its lock lost: the mutators re-run on what is there,
 * so what the other writer committed stays and this batch's changes land on top. A batch with a
 * transaction (side effects, never re-run) fails instead; its journal is completed later.
 */
async function withReplaceRetries<T>(batch: PendingUpdate[], settled: () => boolean, attempt: () => Promise<T>): Promise<T> {
  for (let tries = 1; ; tries += 1) {
    try {
      return await attempt();
    } catch (err) {
      // Once the outcomes are out (the file was written), a later failure is never re-run.
      if (settled() || !isRetryableConflict(err) || tries >= MAX_REPLACE_ATTEMPTS || batch.some((update) => update.alone)) throw err;
    }
  }
}
