// OpenClaw's side files in a sessions folder — a run's trajectory capture (`<stem>.trajectory.jsonl`,
// on by default), its pointer (`<stem>.trajectory-path.json`) and compaction checkpoints
// (`<sessionId>.checkpoint.<uuid>.jsonl`) — and the one rule every part of switchboard applies to
// them (doctor, the orphan and leftover finders, `sessions cleanup`, `maintain`, the upkeep on write).
//
// They are artifacts of a session instance, not transcripts: nothing of ours reads or writes
// them, so doctor never checks them as transcripts and never calls them orphans. While an entry
// names their instance (or lists the file in its `compactionCheckpoints`) they are kept, as
// OpenClaw's own disk budget keeps them (resolveReferencedSessionArtifactPaths: the entry's
// transcript, its trajectory and pointer, and every checkpoint's pre/post `sessionFile`).
// OpenClaw's reset, delete and prune archive only the transcript and leave these under their
// names; once nothing references them, its disk budget (and its `sessions cleanup --enforce`)
// deletes them like orphaned transcripts. switchboard does the same: its archiving leaves them
// alone, and its disk budget may remove those of an instance no entry names — and, like OpenClaw's
// (resolveSessionArtifactPathsForEntry), deletes an evicted entry's trajectory and pointer with
// its transcript.

import { promises as fsp } from 'node:fs';
import path from 'node:path';
import { errnoOf, ioError } from '../core/index.js';
import {
  THREAD_INFIX,
  TRANSCRIPT_SUFFIX,
  entryTranscriptName,
  parseSessionArtifactName,
  readSessionStore,
  sessionEntryProblem,
  transcriptFileNameIn,
  trajectoryArtifactNames,
  type SessionEntry,
  type SessionStore,
  type StoreLocation,
} from '../store/index.js';
import { transcriptPathIn } from './context.js';

/**
 * The transcript file name an entry refers to, or null when the entry is of the wrong shape (its
 * names cannot be trusted: archiving "its" file could move sessions.json or another session's).
 */
export function transcriptNameOf(location: StoreLocation, entry: SessionEntry): string | null {
  if (sessionEntryProblem(entry, location.sessionsDir) !== null) return null;
  try {
    return path.basename(transcriptPathIn(location, entryTranscriptName(entry)));
  } catch {
    return null;
  }
}

/** The transcript names the store's entries name (entries of the wrong shape name none). */
export function namedTranscripts(location: StoreLocation, store: SessionStore): Set<string> {
  const names = new Set<string>();
  for (const entry of Object.values(store)) {
    const name = transcriptNameOf(location, entry);
    if (name !== null) names.add(name);
  }
  return names;
}

/** What a store references in its folder: the transcripts its entries name, and OpenClaw's artifacts they keep. */
export interface StoreReferences {
  /** Transcript names the entries name (entries of the wrong shape name none). */
  readonly transcripts: ReadonlySet<string>;
  /** Whether the store keeps the file `name`: a named transcript, or an artifact of a named instance or checkpoint. */
  isReferenced(name: string): boolean;
}

/**
 * The file names an entry's `compactionCheckpoints` list (pre- and post-compaction
 * `sessionFile`). OpenClaw writes absolute paths and keeps only those inside the sessions folder;
 * the base name is taken here whatever the folder: keeping one file too many costs bytes, deleting
 * a checkpoint OpenClaw restores from costs the history.
 */
export function compactionCheckpointFiles(entry: SessionEntry): string[] {
  const checkpoints: unknown = (entry as { compactionCheckpoints?: unknown }).compactionCheckpoints;
  if (!Array.isArray(checkpoints)) return [];
  const names: string[] = [];
  for (const checkpoint of checkpoints) {
    if (checkpoint === null || typeof checkpoint !== 'object') continue;
    for (const side of ['preCompaction', 'postCompaction'] as const) {
      const file: unknown = (checkpoint as Record<string, { sessionFile?: unknown } | null | undefined>)[side]?.sessionFile;
      if (typeof file === 'string' && file.trim() !== '') names.push(path.basename(file.trim()));
    }
  }
  return names;
}

/**
 * Whether an artifact stem leads to one of `ids`: `<id>` itself, or a thread transcript's stem
 * `<id>-topic-<thread>` (an id may itself hold `-topic-`, so every cut is tried).
 */
function stemOfInstance(stem: string, ids: ReadonlySet<string>): boolean {
  if (ids.has(stem)) return true;
  for (let at = stem.indexOf(THREAD_INFIX); at > 0; at = stem.indexOf(THREAD_INFIX, at + 1)) {
    if (ids.has(stem.slice(0, at))) return true;
  }
  return false;
}

/**
 * The rule: a named transcript is referenced; so is any file a compaction checkpoint lists (a
 * checkpoint copy, or the successor transcript a compaction rotated to); so is whatever file an
 * entry's sessionFile names, whatever the entry's shape (an unusable row, a field of the wrong
 * type or the name of an archive, is left for the user to fix or `sessions delete`: until then
 * that file is the conversation, never an orphan or an archive retention may delete); and an
 * artifact whose instance an entry names — by its transcript, or by its sessionId (also an entry
 * of the wrong shape, whose sessionId is all there is to go by: keeping is the safe side).
 */
export function storeReferences(location: StoreLocation, store: SessionStore): StoreReferences {
  const transcripts = namedTranscripts(location, store);
  const listed = new Set<string>();
  const ids = new Set<string>();
  for (const entry of Object.values(store)) {
    if (typeof entry.sessionId === 'string') ids.add(entry.sessionId);
    for (const name of compactionCheckpointFiles(entry)) listed.add(name);
    const sessionFile: unknown = (entry as { sessionFile?: unknown } | null)?.sessionFile;
    const named = typeof sessionFile === 'string' ? transcriptFileNameIn(sessionFile, location.sessionsDir) : null;
    if (named !== null) listed.add(named);
  }
  const stems = new Set<string>();
  for (const name of transcripts) stems.add(path.basename(name, TRANSCRIPT_SUFFIX));
  return {
    transcripts,
    isReferenced(name: string): boolean {
      if (transcripts.has(name) || listed.has(name)) return true;
      const artifact = parseSessionArtifactName(name);
      if (artifact === null) return false;
      return stems.has(artifact.stem) || stemOfInstance(artifact.stem, ids);
    },
  };
}

/**
 * Whether the file `name` is one of OpenClaw's session artifacts and no transcript. A name can
 * look like both: a thread id ending in `.trajectory` gives the transcript
 * `<id>-topic-1700.trajectory.jsonl`, also the name of thread 1700's trajectory capture. A
 * transcript an entry names (`named`: the store's namedTranscripts) is a transcript; so is every
 * archive (only transcripts are archived, and an archive's name does not end in `.jsonl`).
 */
export function isSessionArtifact(name: string, named: ReadonlySet<string>): boolean {
  return parseSessionArtifactName(name) !== null && !named.has(name);
}

/**
 * The transcripts the store names, for telling artifact-shaped names apart (isSessionArtifact),
 * read only when `names` holds one: most folders have none, and this runs before the store is
 * checked (an unreadable store names none).
 */
export async function namedAmong(location: StoreLocation, store: SessionStore | null, names: readonly string[]): Promise<ReadonlySet<string>> {
  if (!names.some((name) => parseSessionArtifactName(name) !== null)) return new Set();
  const current = store ?? (await readSessionStore(location.storePath).catch(() => null));
  return current === null ? new Set() : namedTranscripts(location, current);
}

/**
 * Deletes the trajectory capture and pointer of the transcript `transcriptName`, as OpenClaw's
 * disk budget does when it evicts that entry; returns what went. A file already gone is no error.
 * A name another entry names as its transcript (`named`, see isSessionArtifact) is that entry's,
 * never deleted as an artifact.
 */
export async function removeTrajectoryArtifacts(sessionsDir: string, transcriptName: string, named: ReadonlySet<string>): Promise<{ files: number; bytes: number }> {
  const removed = { files: 0, bytes: 0 };
  for (const name of trajectoryArtifactNames(transcriptName)) {
    if (named.has(name)) continue;
    const file = path.join(sessionsDir, name);
    try {
      const stats = await fsp.lstat(file);
      if (!stats.isFile()) continue; // a link or folder there is not OpenClaw's capture: left alone
      await fsp.unlink(file);
      removed.files += 1;
      removed.bytes += stats.size;
    } catch (err) {
      if (errnoOf(err) !== 'ENOENT') throw ioError(`cannot delete ${file}`, err, { path: file });
    }
  }
  return removed;
}
