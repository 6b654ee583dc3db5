// `maintain` finishes rotations a killed process left half done. A rotation (`/new`, `/reset`,
// `sessions reset`, a due reset) writes the new instance's record and then sessions.json, and only
// after that archives the old transcript as `.reset.<ts>`: killed in between, the old instance
// stays under its live name with no entry naming it. Nothing is lost (the entry names the new
// instance, whose transcript exists), but the old file is an orphan that the history, retention
// and the disk budget do not count as an archive. The archive is derived from the entry, so the
// next maintenance pass makes it, as doctor --repair would, for the plain case only: an orphan
// whose header names a key whose entry names a newer instance that exists. Anything less clear
// (no header, an unknown key, a missing current transcript, a newer orphan) is left to doctor.

import { promises as fsp } from 'node:fs';
import path from 'node:path';
import { errnoOf, ioError } from '../core/index.js';
import {
  LOCK_SUFFIX,
  archiveFile,
  isUsableEntry,
  lockPathFor,
  parseArchiveName,
  readSessionStore,
  readFirstLineRecord,
  transcriptSharing,
  type SessionStore,
  type StoreLocation,
  type TranscriptHeader,
  type TranscriptSharing,
} from '../store/index.js';
import { sessionLockOptions, type EngineContext } from './context.js';
import { holdTranscriptLocks } from './cleanup-files.js';
import { transcriptNameOf } from './cleanup-snapshot.js';
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

const TRANSCRIPT_SUFFIX = '.jsonl';

function namedTranscripts(location: StoreLocation, store: SessionStore): Set<string> {
  const names = new Set<string>();
  for (const entry of Object.values(store)) {
    const name = transcriptNameOf(location, entry);
    if (name !== null) names.add(name);
  }
  return names;
}

/** The transcripts of the folder (not archives, not locked unless `released` has the lock) that no entry names. */
async function unnamedTranscripts(location: StoreLocation, store: SessionStore, released: ReadonlySet<string>): Promise<string[]> {
  let dirents;
  try {
    dirents = await fsp.readdir(location.sessionsDir, { withFileTypes: true });
  } catch (err) {
    if (errnoOf(err) === 'ENOENT') return [];
    throw ioError(`cannot list ${location.sessionsDir}`, err, { path: location.sessionsDir });
  }
  const names = namedTranscripts(location, store);
  const present = new Set(dirents.map((dirent) => dirent.name));
  return dirents
    .filter((dirent) => dirent.isFile() && dirent.name.endsWith(TRANSCRIPT_SUFFIX) && parseArchiveName(dirent.name) === null)
    .map((dirent) => dirent.name)
    .filter((name) => !names.has(name) && (!present.has(`${name}${LOCK_SUFFIX}`) || released.has(lockPathFor(path.join(location.sessionsDir, name)))))
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

/**
 * The key whose rotation left `name` behind, when that is plain: the header names a key of this
 * agent whose entry is usable, names another instance, that instance's transcript is there, and
 * it started after this one. Otherwise undefined.
 */
async function replacedBy(location: StoreLocation, store: SessionStore, sharing: TranscriptSharing, name: string, header: TranscriptHeader): Promise<string | undefined> {
  const key = header.sessionKey;
  if (typeof key !== 'string' || !key.startsWith(`agent:${location.agentId}:`) || !Object.hasOwn(store, key)) return undefined;
  if (!isUsableEntry(store, key, location.sessionsDir, sharing)) return undefined;
  const entry = store[key]!;
  const current = transcriptNameOf(location, entry);
  if (entry.sessionId === header.id || current === null || current === name) return undefined;
  const startedAt = Date.parse(header.timestamp);
  if (typeof entry.sessionStartedAt !== 'number' || Number.isNaN(startedAt) || entry.sessionStartedAt <= startedAt) return undefined;
  try {
    await fsp.lstat(path.join(location.sessionsDir, current));
  } catch {
    return undefined;
  }
  return key;
}

/**
 * Archives, as `.reset.<ts>`, every transcript of the store a rotation replaced but did not get
 * to archive. Under their locks, taken together without waiting (a held one is left for the next
 * pass), each judged again from sessions.json read once under them.
 */
export async function finishInterruptedRotations(
  ctx: EngineContext,
  location: StoreLocation,
  options: { dryRun: boolean; /** Lock paths this pass released (or, in a dry run, would release): they protect nothing. */ releasedLocks: ReadonlySet<string> },
): Promise<FinishedRotation[]> {
  const store = await readSessionStore(location.storePath);
  const sharing = transcriptSharing(store);
  const candidates: { done: FinishedRotation; name: string; header: TranscriptHeader }[] = [];
  for (const name of await unnamedTranscripts(location, store, options.releasedLocks)) {
    const file = path.join(location.sessionsDir, name);
    const header = await headerOf(file);
    if (header === null) continue;
    const key = await replacedBy(location, store, sharing, name, header);
    if (key !== undefined) candidates.push({ done: { agentId: location.agentId, sessionKey: key, sessionId: header.id, file, archivedTo: null }, name, header });
  }
  if (options.dryRun || candidates.length === 0) return candidates.map(({ done }) => done);
  const locks = await holdTranscriptLocks(
    candidates.map(({ name, done }) => ({ id: name, file: done.file, sessionKey: done.sessionKey })),
    (sessionKey) => sessionLockOptions(ctx, { sessionKey, runId: 'maintenance' }),
  );
  try {
    const current = await readSessionStore(location.storePath);
    const named = namedTranscripts(location, current);
    const currentSharing = transcriptSharing(current);
    for (const { done, name, header } of candidates) {
      if (!locks.held.has(name) || named.has(name)) continue;
      if ((await replacedBy(location, current, currentSharing, name, header)) !== done.sessionKey) continue;
      done.archivedTo = await archiveFile(done.file, 'reset', ctx.clock.now());
    }
  } finally {
    await locks.release();
  }
  return candidates.filter(({ done }) => done.archivedTo !== null).map(({ done }) => done);
}
