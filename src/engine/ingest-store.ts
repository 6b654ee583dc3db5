// One agent store's part of an ingest batch, in rounds: each round is one store transaction —
// plan (every line alone), journal, append the records (fsync), keep the entries of the sessions
// whose records are down (docs/write-path.md). Used by ingestBatch in ingest.ts.

import { setTimeout as sleep } from 'node:timers/promises';
import { SwitchboardError, inPool, isSwitchboardError, newUuid, systemClock } from '../core/index.js';
import { forgetDuplicateKey } from '../policy/index.js';
import {
  archiveFile,
  asStoredEntry,
  checkNotShared,
  checkSessionEntry,
  duplicateKeyOfRecord,
  busyAfterWaiting,
  entryTextHash,
  journalledEntry,
  findInstanceTranscript,
  readRemovedMemories,
  transactSessionStore,
  transcriptSharing,
  withLock,
  type JournalSession,
  type NewTranscriptEntry,
  type SessionStore,
  type StoreLocation,
  type StoreTransaction,
} from '../store/index.js';
import { admitItem, snapshotObserved } from './admission.js';
import type { AdmitEnv, Addressed, BatchEffects } from './admission-types.js';
import { messageRecord } from './addressed.js';
import { sessionLockOptions, storeWriteOptions, transcriptPathIn, type EngineContext } from './context.js';
import { appendInStore, busyRetryDelayMs } from './store-append.js';
import { learnRecordedOrphans } from './orphans.js';
import { learnLiveness, runnerFor, sessionRefKey, unknownHolders, type Liveness, type QueuedEntry } from './queue-state.js';
import type { QueueRuntime } from './runtime.js';
import { transcriptStartedAtOf } from './session-list.js';

const APPEND_CONCURRENCY = 32;

interface SessionWork {
  location: StoreLocation;
  agentId: string;
  sessionKey: string;
  sessionId: string;
  file: string;
  entries: NewTranscriptEntry[];
  items: Addressed[];
  /** Records of messages pinned to an older instance, written to its file: not journalled, no entry. */
  rebind?: true;
  /** The entry recorded into this file before this batch (store-append.ts AppendTarget). */
  resumesFile?: boolean;
}

/** Groups planned messages by the transcript they append to, in arrival order. */
function collectWork(ctx: EngineContext, location: StoreLocation, items: Addressed[]): { work: SessionWork[]; rotations: { file: string; sessionKey: string }[] } {
  const bySession = new Map<string, SessionWork>();
  const rotations: { file: string; sessionKey: string }[] = [];
  const paths = new Map<string, string>();
  const now = ctx.clock.now();
  for (const item of items) {
    if (item.rebind !== undefined) {
      if (item.rebind.file === null) continue; // nothing left of that instance: reported, not recorded
      const file = item.rebind.file;
      let work = bySession.get(file);
      if (!work) {
        work = { location, agentId: item.agentId, sessionKey: item.sessionKey, sessionId: item.rebind.sessionId, file, entries: [], items: [], rebind: true };
        bySession.set(file, work);
      }
      work.entries.push(messageRecord(item, item.message.text, now));
      work.items.push(item);
      continue;
    }
    const plan = item.plan!;
    if (plan.duplicate) continue;
    const outcome = item.outcome;
    // Queued, parked, dropped or outboxed messages are not written now (rotations still are).
    // A bare reset trigger as an address's first message starts an instance that replaced nothing:
    // its notice says so (the session must begin with a record, and the trigger word is none).
    const firstCommand = plan.created && plan.commandOnly;
    if (outcome && !outcome.record && outcome.before.length === 0 && outcome.after.length === 0 && !plan.rotation && !firstCommand) continue;
    const sessionFile = plan.entry.sessionFile ?? `${plan.entry.sessionId}.jsonl`;
    let file = paths.get(sessionFile);
    if (file === undefined) paths.set(sessionFile, (file = transcriptPathIn(location, sessionFile)));
    let work = bySession.get(file);
    if (!work) {
      work = { location, agentId: item.agentId, sessionKey: item.sessionKey, sessionId: plan.entry.sessionId, file, entries: [], items: [], resumesFile: !plan.created && !plan.rotation };
      bySession.set(file, work);
    }
    if (plan.rotation) {
      if (plan.rotation.previousSessionFile) rotations.push({ file: transcriptPathIn(location, plan.rotation.previousSessionFile), sessionKey: item.sessionKey });
      if (plan.rotation.reason !== 'cron') {
        work.entries.push({ type: 'reset_notice', reason: plan.rotation.reason, previousSessionId: plan.rotation.previousSessionId });
      }
    } else if (firstCommand) {
      work.entries.push({ type: 'reset_notice', reason: 'command' });
    }
    if (outcome) {
      work.entries.push(...outcome.before);
      if (!plan.commandOnly && outcome.record) work.entries.push(messageRecord(item, outcome.text, now));
      work.entries.push(...outcome.after);
    } else if (!plan.commandOnly) work.entries.push(messageRecord(item, plan.text, now));
    work.items.push(item);
  }
  // Ids are fixed now so that the journal can name the records before they are written.
  for (const work of bySession.values()) for (const entry of work.entries) entry.id ??= newUuid();
  return { work: [...bySession.values()], rotations };
}

/**
 * The works of a round in the chains they are appended in: a session's files in the order its
 * lines reached them (a rotation's old instance before the new one), one after the other; every
 * chain alongside the others. A message pinned to an older instance is a chain of its own.
 */
function appendChains(works: SessionWork[]): SessionWork[][] {
  const chains = new Map<string, SessionWork[]>();
  for (const work of works) {
    const key = work.rebind ? `file ${work.file}` : `key ${work.sessionKey}`;
    const chain = chains.get(key);
    if (chain === undefined) chains.set(key, [work]);
    else chain.push(work);
  }
  return [...chains.values()];
}

/** Archives the transcript of a rotated instance under its own write lock. */
async function archiveRotated(ctx: EngineContext, rotation: { file: string; sessionKey: string }): Promise<void> {
  await withLock(rotation.file, sessionLockOptions(ctx, { sessionKey: rotation.sessionKey }), () => archiveFile(rotation.file, 'reset', ctx.clock.now()));
}

/**
 * A key's entry as the round found it, restored when the key's work is taken back: its JSON text
 * (undefined: no entry), which the journal's content hash is made from anyway — one stringify
 * serves both, where a structured clone of every entry a batch touches cost as much again.
 */
interface Snapshot {
  text: string | undefined;
  hash: string | null;
  /** The entry's duplicate memory as it was (the journal names only what the plan adds to it). */
  memory: unknown;
}

/** What one round (one store transaction) did with its items. */
interface Round {
  committed: Addressed[];
  failed: Map<Addressed, unknown>;
  /** Items whose transcript lock was busy: planned again in the next round. */
  deferred: Addressed[];
  busy: SwitchboardError | undefined;
  rotations: { file: string; sessionKey: string }[];
  effects: BatchEffects;
}

function restoreKey(store: SessionStore, key: string, snapshot: Snapshot): void {
  if (snapshot.text === undefined) delete store[key];
  // An entry the plan left alone stays the object it was: one read back from its JSON text would
  // have lost what JSON cannot say (a 1e999 in an unusable entry becomes null).
  else if (!Object.hasOwn(store, key) || JSON.stringify(store[key]) !== snapshot.text) store[key] = asStoredEntry(JSON.parse(snapshot.text));
}

/**
 * The header's time of each addressed entry that has no usable sessionStartedAt (OpenClaw's own
 * reset writes none): the start its reset check is measured from, as OpenClaw measures it. Such
 * rows are rare (switchboard writes the start on every instance), so this reads almost nothing.
 */
async function headerTimesOf(location: StoreLocation, store: SessionStore, items: readonly Addressed[]): Promise<AdmitEnv['headerTimes']> {
  const times: AdmitEnv['headerTimes'] = new Map();
  const asked = new Set<string>();
  for (const item of items) {
    const key = item.sessionKey;
    if (asked.has(key) || !Object.hasOwn(store, key)) continue;
    asked.add(key);
    const entry = store[key]!;
    const at = await transcriptStartedAtOf(location, entry);
    if (at !== undefined) times.set(key, { sessionId: entry.sessionId, at });
  }
  return times;
}

/**
 * Plans every item on the store; an item whose plan throws is taken out and the others are planned
 * again from the entries as they were, so one bad line never changes what its neighbours get.
 */
async function planRound(
  ctx: EngineContext,
  runtime: QueueRuntime,
  location: StoreLocation,
  store: SessionStore,
  items: Addressed[],
  snapshots: Map<string, Snapshot>,
): Promise<{ effects: BatchEffects; failed: Map<Addressed, unknown> }> {
  const liveness: Liveness = new Map();
  if (items.some((item) => runnerFor(ctx, item.agentId) !== undefined)) {
    const entries = new Set<QueuedEntry>();
    for (const item of items) {
      const entry = store[item.sessionKey] as QueuedEntry | undefined;
      if (entry !== undefined) entries.add(entry);
    }
    const unknown = [...entries].filter((entry) => unknownHolders(entry, liveness));
    if (unknown.length > 0) await learnLiveness(ctx, location, unknown, liveness);
    // Then what the dead runs among them left: recorded or not (a reset or an interrupt may take it out).
    for (const entry of entries) await learnRecordedOrphans(location, entry, liveness);
  }
  const failed = new Map<Addressed, unknown>();
  const now = ctx.clock.now();
  const nowWall = systemClock.now();
  // Each stored row is shape-checked once per round, not once per message (the hot path); which
  // rows share a transcript is known from one pass over the store as this round read it.
  const checked = new Set<string>();
  const sharing = transcriptSharing(store);
  const removed = readRemovedMemories(location.storePath);
  const headerTimes = await headerTimesOf(location, store, items);
  for (;;) {
    const effects: BatchEffects = { starts: [], aborts: [], observe: new Map(), drains: new Map() };
    const env: AdmitEnv = { ctx, location, liveness, effects, now, nowWall, noWait: runtime.noWait, planned: new Set(), removed, headerTimes };
    let retry = false;
    for (const item of items) {
      if (failed.has(item)) continue;
      try {
        // A hand-edited or foreign row of the wrong shape fails the lines addressed to it (STORE_CORRUPT), not the batch.
        // So is a row that names another key's transcript: its lines would land in that conversation.
        if (!checked.has(item.sessionKey) && Object.hasOwn(store, item.sessionKey)) {
          checkSessionEntry(location.storePath, item.sessionKey, store[item.sessionKey]);
          checkNotShared(location.storePath, store, item.sessionKey, sharing);
        }
        checked.add(item.sessionKey);
        admitItem(store, item, env);
      } catch (err) {
        failed.set(item, err);
        for (const [key, snapshot] of snapshots) restoreKey(store, key, snapshot);
        retry = true;
        break;
      }
    }
    if (!retry) {
      snapshotObserved(effects);
      return { effects, failed };
    }
  }
}

/** What the journal says about this round: per session, the entry to install and its records. */
function journalOf(store: SessionStore, works: SessionWork[], snapshots: Map<string, Snapshot>): JournalSession[] {
  const byKey = new Map<string, JournalSession>();
  for (const work of works) {
    if (work.rebind) continue;
    let session = byKey.get(work.sessionKey);
    if (session === undefined) {
      const snapshot = snapshots.get(work.sessionKey);
      session = { sessionKey: work.sessionKey, base: snapshot?.hash ?? null, ...journalledEntry(store[work.sessionKey]!, snapshot?.memory), files: [], records: [] };
      byKey.set(work.sessionKey, session);
    }
    const file = session.files.push(work.file.slice(work.file.lastIndexOf('/') + 1)) - 1;
    for (const entry of work.entries) {
      const key = duplicateKeyOfRecord(entry);
      session.records.push(key === undefined ? [entry.id!, file] : [entry.id!, file, key]);
    }
  }
  return [...byKey.values()];
}

/**
 * One round inside the store transaction: plan → journal → append (fsync) → the entries of the
 * sessions whose records are down stay in the store, which the caller's transaction then writes.
 */
async function commitRound(
  ctx: EngineContext,
  runtime: QueueRuntime,
  location: StoreLocation,
  store: SessionStore,
  tx: StoreTransaction,
  items: Addressed[],
): Promise<Round> {
  const snapshots = new Map<string, Snapshot>();
  for (const { sessionKey } of items) {
    if (snapshots.has(sessionKey)) continue;
    const entry = Object.hasOwn(store, sessionKey) ? store[sessionKey] : undefined;
    const text = entry === undefined ? undefined : JSON.stringify(entry);
    snapshots.set(sessionKey, { text, hash: text === undefined ? null : entryTextHash(text), memory: entry?.recentMessageIds });
  }
  const { effects, failed } = await planRound(ctx, runtime, location, store, items, snapshots);
  const planned = items.filter((item) => !failed.has(item));
  for (const item of planned) {
    if (item.rebind !== undefined) item.rebind.file = await findInstanceTranscript(location.sessionsDir, item.rebind.sessionId);
  }
  const { work: works, rotations } = collectWork(ctx, location, planned);
  await tx.writeJournal(journalOf(store, works, snapshots), ctx.clock.now());

  const troubles = new Map<SessionWork, unknown>();
  await inPool(appendChains(works), APPEND_CONCURRENCY, async (chain) => {
    for (let i = 0; i < chain.length; i++) {
      try {
        await appendInStore(ctx, tx, chain[i]!, chain[i]!.entries);
      } catch (err) {
        // The files after it are not tried: a session whose first file fails is taken back whole.
        for (const work of chain.slice(i)) troubles.set(work, err);
        return;
      }
    }
  });

  const round: Round = { committed: [], failed, deferred: [], busy: undefined, rotations: [], effects };
  const worksByKey = new Map<string, SessionWork[]>();
  const takenBack = new Set<string>();
  const lostItems = new Set<Addressed>();
  for (const work of works) {
    if (!work.rebind) {
      const keyWorks = worksByKey.get(work.sessionKey);
      if (keyWorks === undefined) worksByKey.set(work.sessionKey, [work]);
      else keyWorks.push(work);
    }
    else if (troubles.has(work)) {
      // An older instance's file that cannot be written fails its lines, nothing else (its
      // records change no entry); a busy one is waited for like any other, in the next round.
      const trouble = troubles.get(work);
      for (const item of work.items) {
        lostItems.add(item);
        if (isSwitchboardError(trouble, 'SESSION_BUSY')) {
          round.deferred.push(item);
          round.busy = trouble;
        } else failed.set(item, trouble);
      }
    }
  }
  /** Per session taken back in part: the duplicate keys of messages whose records are not down, and why. */
  const unrecorded = new Map<string, Map<string, unknown>>();
  for (const [key, keyWorks] of worksByKey) {
    const bad = keyWorks.filter((work) => troubles.has(work));
    if (bad.length === 0) continue;
    if (bad.length === keyWorks.length) {
      // Nothing of this session reached its transcript: its entry goes back as it was.
      restoreKey(store, key, snapshots.get(key)!);
      takenBack.add(key);
      continue;
    }
    // A rotation split the session over two files, and the old one was written but not the new:
    // keep the entry, forget what was not recorded (so a resend is not taken for a duplicate),
    // fail those lines — and the lines planned as their duplicates, which would otherwise be
    // answered `duplicate, persisted` for a message that is nowhere.
    const entry = store[key] as QueuedEntry;
    const lost = new Map<string, unknown>();
    for (const work of bad) {
      for (const item of work.items) {
        lostItems.add(item);
        failed.set(item, troubles.get(work));
        const key = item.plan?.duplicateKey;
        if (key !== undefined) {
          forgetDuplicateKey(entry, key);
          lost.set(key, troubles.get(work));
        }
        if (entry.activeRun?.runId === item.runId) delete entry.activeRun;
      }
    }
    unrecorded.set(key, lost);
  }
  const troubleOfKey = new Map<string, unknown>();
  for (const [work, err] of troubles) if (takenBack.has(work.sessionKey) && !troubleOfKey.has(work.sessionKey)) troubleOfKey.set(work.sessionKey, err);
  for (const item of planned) {
    if (lostItems.has(item)) continue;
    const key = item.plan?.duplicateKey;
    const duplicateOfLost = key === undefined ? undefined : unrecorded.get(item.sessionKey)?.get(key);
    if (duplicateOfLost !== undefined) {
      failed.set(item, duplicateOfLost);
      continue;
    }
    const trouble = troubleOfKey.get(item.sessionKey);
    if (trouble === undefined) round.committed.push(item);
    else if (isSwitchboardError(trouble, 'SESSION_BUSY')) {
      round.deferred.push(item);
      round.busy = trouble;
    } else failed.set(item, trouble);
  }
  const committedKeys = new Set(round.committed.map((item) => item.sessionKey));
  round.rotations = rotations.filter((rotation) => committedKeys.has(rotation.sessionKey));
  const kept = new Set(round.committed);
  effects.starts = effects.starts.filter((claim) => kept.has(claim.item));
  effects.aborts = effects.aborts.filter((abort) => !takenBack.has(abort.sessionKey));
  for (const key of takenBack) {
    const refKey = sessionRefKey({ location, sessionKey: key });
    effects.observe.delete(refKey);
    effects.drains.delete(refKey);
  }
  return round;
}

/**
 * One store's part of a batch, in rounds: each round is one store transaction; lines whose
 * transcript lock was busy wait for the next round (no lock is waited for while the store lock is
 * held), until `session.writeLock.acquireTimeoutMs` has passed.
 */
export async function ingestStore(
  ctx: EngineContext,
  runtime: QueueRuntime,
  location: StoreLocation,
  items: Addressed[],
): Promise<{ committed: Addressed[]; failed: Map<Addressed, unknown>; effects: BatchEffects[] }> {
  const writeLock = ctx.config.session?.writeLock;
  const waitLimitMs = writeLock?.acquireTimeoutMs ?? 60_000;
  const startedAt = systemClock.now();
  const result = { committed: [] as Addressed[], failed: new Map<Addressed, unknown>(), effects: [] as BatchEffects[] };
  let pending = items;
  for (let round = 0; pending.length > 0; round++) {
    let outcome: Round;
    try {
      outcome = await transactSessionStore(location.storePath, (store, tx) => commitRound(ctx, runtime, location, store, tx, pending), storeWriteOptions(ctx));
    } catch (err) {
      // The store itself failed (busy, corrupt, disk): no line of this round was acknowledged.
      for (const item of pending) result.failed.set(item, err);
      break;
    }
    result.committed.push(...outcome.committed);
    for (const [item, err] of outcome.failed) result.failed.set(item, err);
    result.effects.push(outcome.effects);
    // Archived after the registry names the new instance; a failure leaves a file doctor reports.
    await inPool(outcome.rotations, APPEND_CONCURRENCY, (rotation) => archiveRotated(ctx, rotation).catch(() => undefined));
    pending = outcome.deferred;
    if (pending.length === 0) break;
    if (systemClock.now() - startedAt >= waitLimitMs) {
      const busy = isSwitchboardError(outcome.busy) ? busyAfterWaiting(outcome.busy, systemClock.now() - startedAt) : outcome.busy;
      for (const item of pending) result.failed.set(item, busy);
      break;
    }
    await sleep(busyRetryDelayMs(round));
  }
  return result;
}
