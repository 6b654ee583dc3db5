// Archiving a transcript (or any store file) on reset or deletion: a rename to
// `<file>.reset.<ts>` / `<file>.deleted.<ts>` in the same folder. Nothing is ever deleted here.

import { promises as fsp } from 'node:fs';
import path from 'node:path';
import { SwitchboardError, errnoOf } from '../core/index.js';
import { archivePathFor, parseArchiveName, parseSessionArtifactName, resolveInside, type ArchiveReason, type ParsedArchiveName } from './paths.js';
import { fileSystemFor, fsyncFolder, type StoreFileSystem } from './store-fs.js';

export interface ArchiveFileOptions {
  fs?: StoreFileSystem;
}

/** Same-millisecond archives of one file (a pinned `--now`, two resets in a row) get +1 ms each. */
const MAX_NAME_ATTEMPTS = 1000;


async function exists(fs: StoreFileSystem, filePath: string): Promise<boolean> {
  try {
    await fs.stat(filePath);
    return true;
  } catch (err) {
    if (errnoOf(err) === 'ENOENT') return false;
    throw err;
  }
}

/**
 * Renames `filePath` to its archive name and returns that path, or null when there was no file
 * to archive. An existing archive is never overwritten: the timestamp moves on by 1 ms instead.
 * The caller holds the lock that guards `filePath` (the session write lock for transcripts), so
 * the free-name check and the rename cannot race with another archiver.
 */
export async function archiveFile(
  filePath: string,
  reason: ArchiveReason,
  now: number,
  options: ArchiveFileOptions = {},
): Promise<string | null> {
  const sourcePath = path.resolve(filePath);
  const fs = options.fs ?? fileSystemFor(sourcePath);
  try {
    if (!(await exists(fs, sourcePath))) return null;
    for (let attempt = 0; attempt < MAX_NAME_ATTEMPTS; attempt += 1) {
      const archivePath = archivePathFor(sourcePath, reason, now + attempt);
      if (await exists(fs, archivePath)) continue;
      try {
        await fs.rename(sourcePath, archivePath);
      } catch (err) {
        if (errnoOf(err) === 'ENOENT') return null; // archived or removed by someone else meanwhile
        throw err;
      }
      await fs.fsyncPath(path.dirname(sourcePath)).catch((err: unknown) => {
        if (!['EINVAL', 'ENOTSUP', 'EOPNOTSUPP', 'EISDIR'].includes(errnoOf(err) ?? '')) throw err;
      });
      return archivePath;
    }
    throw new SwitchboardError('IO', `no free archive name for ${sourcePath} near ${new Date(now).toISOString()}`, {
      hint: 'too many archives of this file share one timestamp; check the clock (--now)',
      details: { path: sourcePath },
    });
  } catch (err) {
    if (err instanceof SwitchboardError) throw err;
    throw new SwitchboardError('IO', `cannot archive ${sourcePath}: ${errnoOf(err) ?? String(err)}`, {
      cause: err,
      hint: 'the file was left where it was',
      details: { path: sourcePath, errno: errnoOf(err), reason },
    });
  }
}

/**
 * The transcript of an instance that is no longer current: still under its own name (its
 * archive may be pending), else its newest archive; null when neither exists (or the folder
 * cannot be listed, e.g. a memory volume).
 */
export async function findInstanceTranscript(sessionsDir: string, sessionId: string): Promise<string | null> {
  let names: string[];
  try {
    names = await fsp.readdir(sessionsDir);
  } catch {
    return null;
  }
  // A live name shaped like an OpenClaw artifact of a thread transcript (`<id>-topic-<t>.trajectory.jsonl`)
  // is that artifact when the transcript it belongs to is here too (live or archived); otherwise it
  // is the transcript of a thread whose id ends so (`1700.trajectory`). An archive is always a
  // transcript: nobody archives anything else.
  const transcripts = new Set(names.map((name) => parseArchiveName(name)?.originalName ?? name).filter((name) => name.endsWith('.jsonl')));
  const artifactBesideItsTranscript = (name: string): boolean => {
    const artifact = parseSessionArtifactName(name);
    return artifact !== null && transcripts.has(`${artifact.stem}.jsonl`);
  };
  const isOwn = (name: string): boolean => name === `${sessionId}.jsonl` || (name.startsWith(`${sessionId}-topic-`) && name.endsWith('.jsonl'));
  const live = names.find((name) => isOwn(name) && !artifactBesideItsTranscript(name));
  if (live !== undefined) return resolveInside(sessionsDir, live);
  const newest = newestArchive(names, (archive) => isOwn(archive.originalName));
  return newest === null ? null : resolveInside(sessionsDir, newest);
}

/** The name of the newest archive among `names` that `wanted` accepts, or null. */
function newestArchive(names: readonly string[], wanted: (archive: ParsedArchiveName) => boolean): string | null {
  let newest: { name: string; at: number } | null = null;
  for (const name of names) {
    const archive = parseArchiveName(name);
    if (archive !== null && wanted(archive) && (newest === null || archive.archivedAt > newest.at)) newest = { name, at: archive.archivedAt };
  }
  return newest?.name ?? null;
}

/**
 * Puts back the newest `.deleted.` archive of `filePath`, a transcript that is missing while its
 * session's entry still names it: the `sessions delete` that archived it died before it removed
 * the entry (it does both under the locks the caller holds now, so it is not running any more).
 * The deletion never completed, and the session goes on with its history; without this, the next
 * append started an empty file under the same name. Returns whether an archive was put back.
 * (Files on disk only: a memory volume keeps no such archives.)
 */
export async function restoreInterruptedDeletion(filePath: string): Promise<boolean> {
  const file = path.resolve(filePath);
  const dir = path.dirname(file);
  const own = path.basename(file);
  let names: string[];
  try {
    names = await fsp.readdir(dir);
  } catch {
    return false;
  }
  const newest = newestArchive(names, (archive) => archive.reason === 'deleted' && archive.originalName === own);
  if (newest === null) return false;
  const archivePath = resolveInside(dir, newest);
  try {
    // link, not rename, so that a name that appeared meanwhile is never replaced (EEXIST); then the archive name goes.
    await fsp.link(archivePath, file);
  } catch (err) {
    if (errnoOf(err) === 'EEXIST') return false;
    throw err;
  }
  await fsp.unlink(archivePath);
  await fsyncFolder(dir);
  return true;
}
