// `maintain` finishes rotations a killed process left half done. A rotation (`/new`, `/reset`,
// `sessions reset`, a due reset) writes the new instance's record and then sessions.json, and only
// after that archives the old transcript as `.reset.<ts>`: killed in between, the old instance
// stays under its live name with no entry naming it. Nothing is lost (the entry names the new
// instance, whose transcript exists), but the old file is an orphan that the history, retention
// and the disk budget do not count as an archive. The archive is derived from the entry, so the
// next maintenance pass makes it, as doctor --repair would, for the plain case only: an orphan
// whose header names a key whose entry names an instance that exists and replaced it (its reset
// notices lead back to the orphan). Anything less clear (no header, an unknown key, a missing
// current transcript, a newer orphan) is left to doctor.

import { promises as fsp } from 'node:fs';
import path from 'node:path';
import { errnoOf, ioError } from '../core/index.js';
import {
  LOCK_SUFFIX,
  archiveFile,
  isUsableEntry,
  lockPathFor,
  readSessionStore,
  readFirstLineRecord,
  readTranscriptHead,
  transcriptSharing,
  type SessionEntry,
  type SessionStore,
  type StoreLocation,
  type TranscriptHeader,
  type TranscriptSharing,
} from '../store/index.js';
import { sessionLockOptions, type EngineContext } from './context.js';
import { holdTranscriptLocks } from './cleanup-files.js';
import { unnamedTranscripts } from './cleanup-snapshot.js';
import { storeReferences, transcriptNameOf } from './session-artifacts.js';
import { transcriptHeaderProblem } from './doctor/transcript-scan.js';

export interface FinishedRotation {
  agentId: string;
  sessionKey: string;
  /** The old instance whose transcript was left under its live name. */
  sessionId: string;
  file: string;
  /** Where it went; null in a dry run. */
  archivedTo: string | null;
}

/** The transcripts of the folder (not archives, not locked unless `released` has the lock) that no entry names. */
async function unlockedUnnamedTranscripts(location: StoreLocation, store: SessionStore, released: ReadonlySet<string>): Promise<string[]> {
  let dirents;
  try {
    dirents = await fsp.readdir(location.sessionsDir, { withFileTypes: true });
  } catch (err) {
    if (errnoOf(err) === 'ENOENT') return [];
    throw ioError(`cannot list ${location.sessionsDir}`, err, { path: location.sessionsDir });
  }
  const present = new Set(dirents.map((dirent) => dirent.name));
  const files = dirents.filter((dirent) => dirent.isFile()).map((dirent) => dirent.name);
  return unnamedTranscripts(location, store, files)
    .filter((name) => !present.has(`${name}${LOCK_SUFFIX}`) || released.has(lockPathFor(path.join(location.sessionsDir, name))))
    .sort();
}

/**
 * The file's header when its first line is one doctor would accept for this file (the schema, and
 * an id its name is made of), from one small read; null for anything else.
 */
async function headerOf(file: string): Promise<TranscriptHeader | null> {
  try {
    const first = await readFirstLineRecord(file);
    if (first?.type !== 'session' || transcriptHeaderProblem(first, path.basename(file)) !== null) return null;
    return first as unknown as TranscriptHeader;
  } catch {
    // Unreadable (gone, a link, a folder): not this step's to judge; doctor reports it.
    return null;
  }
}

/** The key's entry and its transcript, when the entry is usable and that transcript exists. */
async function currentInstance(location: StoreLocation, store: SessionStore, sharing: TranscriptSharing, key: string): Promise<{ entry: SessionEntry; file: string } | undefined> {
  if (!key.startsWith(`agent:${location.agentId}:`) || !Object.hasOwn(store, key) || !isUsableEntry(store, key, location.sessionsDir, sharing)) return undefined;
  const entry = store[key]!;
  const name = transcriptNameOf(location, entry);
  if (name === null) return undefined;
  const file = path.join(location.sessionsDir, name);
  try {
    await fsp.lstat(file);
  } catch {
    return undefined;
  }
  return { entry, file };
}

/** Rotations one instance replaces at most in a row (`/new` twice in a batch is two). */
const MAX_CHAIN = 16;

/**
 * The instances the current one replaced, as the transcripts say: a rotated instance's first
 * record is a reset notice naming the one before it. Followed through the unnamed files (`unnamed`:
 * id → file name), so `/new` twice in one batch, interrupted, names both older instances.
 */
async function replacedChain(location: StoreLocation, currentFile: string, unnamed: Map<string, string>): Promise<Set<string>> {
  const ids = new Set<string>();
  let file = currentFile;
  for (let step = 0; step < MAX_CHAIN; step++) {
    let previous: unknown;
    try {
      const [, first] = await readTranscriptHead(file, 2);
      previous = first?.type === 'reset_notice' ? first.previousSessionId : undefined;
    } catch {
      break;
    }
    const name = typeof previous === 'string' && !ids.has(previous) ? unnamed.get(previous) : undefined;
    if (name === undefined) break;
    ids.add(previous as string);
    file = path.join(location.sessionsDir, name);
  }
  return ids;
}

interface Candidate {
  done: FinishedRotation;
  name: string;
  /** The sessionId the key's entry had when this was judged. */
  currentSessionId: string;
}

/**
 * The unnamed transcripts a rotation plainly replaced: their header names a key of this agent
 * whose usable entry names another instance, whose transcript is there, and which replaced them —
 * its reset notices lead back to them, or (a rotation that writes no notice, such as a cron run's)
 * it started after them. Anything less plain is left to doctor.
 */
async function replacedInstances(location: StoreLocation, store: SessionStore, unnamed: { name: string; header: TranscriptHeader }[]): Promise<Candidate[]> {
  const sharing = transcriptSharing(store);
  const byKey = new Map<string, { name: string; header: TranscriptHeader }[]>();
  for (const item of unnamed) {
    const key = item.header.sessionKey;
    if (typeof key !== 'string') continue;
    const group = byKey.get(key);
    if (group === undefined) byKey.set(key, [item]);
    else group.push(item);
  }
  const candidates: Candidate[] = [];
  for (const [key, group] of byKey) {
    const current = await currentInstance(location, store, sharing, key);
    if (current === undefined) continue;
    const chain = await replacedChain(location, current.file, new Map(group.map(({ name, header }) => [header.id, name])));
    for (const { name, header } of group) {
      if (header.id === current.entry.sessionId) continue;
      const startedAt = Date.parse(header.timestamp);
      const startedBefore = typeof current.entry.sessionStartedAt === 'number' && !Number.isNaN(startedAt) && current.entry.sessionStartedAt > startedAt;
      if (!chain.has(header.id) && !startedBefore) continue;
      const done = { agentId: location.agentId, sessionKey: key, sessionId: header.id, file: path.join(location.sessionsDir, name), archivedTo: null };
      candidates.push({ done, name, currentSessionId: String(current.entry.sessionId) });
    }
  }
  return candidates;
}

/**
 * Archives, as `.reset.<ts>`, every transcript of the store a rotation replaced but did not get
 * to archive. Under their locks, taken together without waiting (a held one is left for the next
 * pass), each judged again from sessions.json read once under them: still unnamed, and its key's
 * entry still the instance it was judged against.
 */
export async function finishInterruptedRotations(
  ctx: EngineContext,
  location: StoreLocation,
  options: { dryRun: boolean; /** Lock paths this pass released (or, in a dry run, would release): they protect nothing. */ releasedLocks: ReadonlySet<string> },
): Promise<FinishedRotation[]> {
  const store = await readSessionStore(location.storePath);
  const unnamed: { name: string; header: TranscriptHeader }[] = [];
  for (const name of await unlockedUnnamedTranscripts(location, store, options.releasedLocks)) {
    const header = await headerOf(path.join(location.sessionsDir, name));
    if (header !== null) unnamed.push({ name, header });
  }
  const candidates = await replacedInstances(location, store, unnamed);
  if (options.dryRun || candidates.length === 0) return candidates.map(({ done }) => done);
  const locks = await holdTranscriptLocks(
    candidates.map(({ name, done }) => ({ id: name, file: done.file, sessionKey: done.sessionKey })),
    (sessionKey) => sessionLockOptions(ctx, { sessionKey, runId: 'maintenance' }),
  );
  try {
    const current = await readSessionStore(location.storePath);
    const references = storeReferences(location, current);
    const sharing = transcriptSharing(current);
    for (const { done, name, currentSessionId } of candidates) {
      if (!locks.held.has(name) || references.isReferenced(name)) continue;
      const now = await currentInstance(location, current, sharing, done.sessionKey);
      if (now === undefined || String(now.entry.sessionId) !== currentSessionId) continue;
      done.archivedTo = await archiveFile(done.file, 'reset', ctx.clock.now());
    }
  } finally {
    await locks.release();
  }
  return candidates.filter(({ done }) => done.archivedTo !== null).map(({ done }) => done);
}
