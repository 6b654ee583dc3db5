// The duplicate memory of removed sessions: `sessions.json.removed` next to the store.
//
// A session's duplicate memory lives in its entry (`recentMessageIds`), so it used to leave with
// the entry: a message recorded a minute before `maintenance` capped its session away, or before
// `sessions delete`, was recorded again when its sender resent it. Every removal of an entry
// (tx.removeEntry) therefore carries the ids it recorded within the window here, in the same
// store write and before sessions.json is replaced; a new entry for the same key starts with
// them, and a resend is answered `duplicate` (with the removed instance's sessionId).
//
// Derived and bounded: only ids within DUPLICATE_WINDOW_MS are kept (older ones are dropped on
// the next removal; the reader ignores them), so the file holds what the removals of the last
// five minutes carried. A crash between this write and the registry's leaves both holding the
// same ids, which says nothing wrong. An unreadable file (malformed, not a regular file) is read
// as empty — the cost is the protection it gave — `doctor` reports it, and the next removal
// replaces it.
//
//   {"version": 1, "sessions": {"<sessionKey>": {"sessionId": "…", "recentMessageIds": "<ms> <id>\n…"}}}

import { closeSync, constants as fsConstants, fstatSync, lstatSync, openSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { DUPLICATE_WINDOW_MS, errnoOf, ioError, mergeRecentIds, nodeCrypto, readRecentIds } from '../core/index.js';
import { isInMemory } from './memory-volume.js';
import { FILE_MODE } from './paths.js';
import { notRegularFileError, tooLargeProblem } from './regular-file.js';
import type { SessionEntry } from './session-entry.js';
import { FOLDER_FSYNC_UNSUPPORTED, type StoreFileSystem } from './store-fs.js';

export const REMOVED_MEMORY_SUFFIX = '.removed';
const VERSION = 1;

/** What a removed session left: the instance it was, and the ids recorded on it lately. */
export interface RemovedMemory {
  sessionId: string;
  recentMessageIds: string;
}

export type RemovedMemories = ReadonlyMap<string, RemovedMemory>;

const NONE: RemovedMemories = new Map();

export function removedMemoryPathFor(storePath: string): string {
  return `${storePath}${REMOVED_MEMORY_SUFFIX}`;
}

/** The last file read, by identity: a batch reads it once, and most batches find it unchanged or absent. */
const cache = new Map<string, { ino: number; size: number; mtimeMs: number; memories: RemovedMemories }>();

/**
 * The memories in the file (synchronous: one lstat per store write when there is none). Malformed
 * content, a link or a FIFO read as none; readRemovedMemoryFile says why, for doctor.
 */
export function readRemovedMemories(storePath: string): RemovedMemories {
  if (isInMemory(storePath)) return NONE;
  let stats;
  try {
    stats = lstatSync(removedMemoryPathFor(storePath));
  } catch {
    cache.delete(storePath);
    return NONE;
  }
  const cached = cache.get(storePath);
  if (cached !== undefined && cached.ino === stats.ino && cached.size === stats.size && cached.mtimeMs === stats.mtimeMs) return cached.memories;
  const read = readRemovedMemoryFile(removedMemoryPathFor(storePath));
  const memories = read.ok ? read.memories : NONE;
  cache.set(storePath, { ino: stats.ino, size: stats.size, mtimeMs: stats.mtimeMs, memories });
  return memories;
}

export type RemovedMemoryRead = { ok: true; memories: RemovedMemories } | { ok: false; problem: string };

/** Reads and checks the file (a missing one is empty); never follows a link or waits on a FIFO. */
export function readRemovedMemoryFile(file: string): RemovedMemoryRead {
  let text: string;
  try {
    const fd = openSync(file, fsConstants.O_RDONLY | fsConstants.O_NOFOLLOW | fsConstants.O_NONBLOCK);
    try {
      const stats = fstatSync(fd);
      if (!stats.isFile()) return { ok: false, problem: 'it is not a regular file' };
      const tooLarge = tooLargeProblem(stats.size);
      if (tooLarge !== null) return { ok: false, problem: `it ${tooLarge}` };
      text = readFileSync(fd, 'utf8');
    } finally {
      closeSync(fd);
    }
  } catch (err) {
    const code = errnoOf(err);
    if (code === 'ENOENT') return { ok: true, memories: NONE };
    return { ok: false, problem: code === 'ELOOP' ? 'it is a symbolic link' : `it cannot be read (${code ?? String(err)})` };
  }
  let parsed: { version?: unknown; sessions?: unknown } | null;
  try {
    parsed = JSON.parse(text) as { version?: unknown; sessions?: unknown } | null;
  } catch {
    return { ok: false, problem: 'it is not JSON' };
  }
  const sessions = parsed?.sessions;
  if (parsed?.version !== VERSION || sessions === null || typeof sessions !== 'object' || Array.isArray(sessions)) {
    return { ok: false, problem: `it is not a version ${VERSION} file of removed sessions' message ids` };
  }
  const memories = new Map<string, RemovedMemory>();
  for (const [key, value] of Object.entries(sessions as Record<string, unknown>)) {
    const { sessionId, recentMessageIds } = (value ?? {}) as { sessionId?: unknown; recentMessageIds?: unknown };
    if (typeof sessionId !== 'string' || typeof recentMessageIds !== 'string') return { ok: false, problem: `the memory of "${key}" is not {sessionId, recentMessageIds}` };
    memories.set(key, { sessionId, recentMessageIds });
  }
  return { ok: true, memories };
}

/**
 * Adds the recent ids of removed entries to the file (replaced through `fs`: temp, fsync, rename,
 * folder fsync), dropping what has left the window; removes the file when nothing is left.
 * Called by the store update path under the store lock, before sessions.json is replaced.
 */
export async function keepRemovedMemories(fs: StoreFileSystem, storePath: string, removed: ReadonlyMap<string, SessionEntry>, now: number): Promise<void> {
  if (isInMemory(storePath)) return;
  const since = now - DUPLICATE_WINDOW_MS;
  const carried = [...removed].filter(([, entry]) => typeof entry?.sessionId === 'string' && readRecentIds(entry.recentMessageIds).some(({ at }) => at >= since));
  const current = readRemovedMemories(storePath);
  const next = new Map<string, RemovedMemory>();
  for (const [key, memory] of current) {
    const recentMessageIds = mergeRecentIds([memory.recentMessageIds], since);
    if (recentMessageIds !== '') next.set(key, { sessionId: memory.sessionId, recentMessageIds });
  }
  if (carried.length === 0 && next.size === current.size) return;
  for (const [key, entry] of carried) {
    next.set(key, { sessionId: entry.sessionId, recentMessageIds: mergeRecentIds([next.get(key)?.recentMessageIds, entry.recentMessageIds], since) });
  }
  const file = removedMemoryPathFor(storePath);
  if (next.size === 0) {
    await fs.unlink(file).catch(() => undefined);
    return;
  }
  const body = { version: VERSION, sessions: Object.fromEntries(next) };
  // A temp renamed over the name, which replaces whatever is there — a link or FIFO put in its
  // place included — without opening or following it: a derived file that cannot be written
  // would fail a batch after its records are down.
  const temp = `${file}.${nodeCrypto().randomBytes(4).readUInt32BE(0)}`;
  try {
    await fs.createExclusive(temp, FILE_MODE);
    await fs.writeWholeFile(temp, Buffer.from(`${JSON.stringify(body)}\n`, 'utf8'));
    await fs.fsyncPath(temp);
    await fs.rename(temp, file);
  } catch (err) {
    await fs.unlink(temp).catch(() => undefined);
    const errno = errnoOf(err);
    if (errno === 'EISDIR' || errno === 'ENOTEMPTY' || errno === 'EEXIST') throw notRegularFileError(file, 'directory');
    throw ioError(`could not write ${file}`, err);
  }
  await fs.fsyncPath(path.dirname(file)).catch((err: unknown) => {
    if (!FOLDER_FSYNC_UNSUPPORTED.has(errnoOf(err) ?? '')) throw err;
  });
}
