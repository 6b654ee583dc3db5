// File helpers the doctor's steps share: reads that never follow a link or wait on a FIFO, kept
// copies of original bytes, whole-file replacement by rename, and error wording for the report.

import { randomBytes } from 'node:crypto';
import { constants as fsConstants, promises as fsp } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import path from 'node:path';
import { SwitchboardError, asSwitchboardError, errnoOf } from '../../core/index.js';
import { FILE_MODE, copyRegularFile, fileKindOf, fsyncFolder, keptCopyName, lstatKind, readRegularFile, resolveInside, type FileKind } from '../../store/index.js';

/** Same-millisecond backups of one file (a pinned `--now`) move on by 1 ms, like archives. */
const MAX_NAME_ATTEMPTS = 1000;

export interface FolderListing {
  files: string[];
  dirs: string[];
  /** Everything else: symlinks, FIFOs, sockets, devices (from the directory entry: never followed). */
  others: { name: string; kind: FileKind }[];
}

export async function listFolder(dir: string): Promise<FolderListing | null> {
  let entries;
  try {
    entries = await fsp.readdir(dir, { withFileTypes: true });
  } catch (err) {
    if (errnoOf(err) === 'ENOENT') return null;
    throw err;
  }
  const files = entries.filter((e) => e.isFile()).map((e) => e.name).sort();
  const dirs = entries.filter((e) => e.isDirectory()).map((e) => e.name).sort();
  const others = entries.filter((e) => !e.isFile() && !e.isDirectory()).map((e) => ({ name: e.name, kind: fileKindOf(e) })).sort((a, b) => (a.name < b.name ? -1 : 1));
  return { files, dirs, others };
}

export async function statOrNull(file: string): Promise<{ size: number; mtimeMs: number; ctimeMs: number } | null> {
  try {
    return await fsp.stat(file);
  } catch (err) {
    if (errnoOf(err) === 'ENOENT') return null;
    throw err;
  }
}

/** A regular file's bytes (never through a link, never waiting on a FIFO: STORE_CORRUPT), null when missing. */
export async function readOrNull(file: string): Promise<Buffer | null> {
  try {
    return await readRegularFile(file);
  } catch (err) {
    if (errnoOf(err) === 'ENOENT') return null;
    throw err;
  }
}

/**
 * Keeps the current bytes of `file` as `<file>.<tag>-<ts>` (ts as in archive names): a COPY into
 * a new regular file (fsynced), never a hard link, so a kept original can never be a link to
 * something else. `file` must be a regular file (opened without following a link). An existing
 * name is never overwritten (the time moves on by 1 ms).
 */
export async function keepOriginal(file: string, tag: 'bak' | 'corrupt', now: number, options: { throughLink?: boolean } = {}): Promise<string> {
  const dir = path.dirname(file);
  const base = path.basename(file);
  for (let attempt = 0; attempt < MAX_NAME_ATTEMPTS; attempt += 1) {
    const target = resolveInside(dir, keptCopyName(base, tag, now + attempt));
    try {
      await copyRegularFile(file, target, FILE_MODE, options);
    } catch (err) {
      if (errnoOf(err) === 'EEXIST' && (await lstatKind(target)) !== null) continue;
      throw err;
    }
    await fsyncFolder(dir);
    return target;
  }
  throw new SwitchboardError('IO', `no free name to keep ${file} near ${new Date(now).toISOString()}`, { hint: 'check the clock (--now)' });
}

/**
 * The most bytes doctor copies from a link's target. A link has no place in the store, and what it
 * points at may be anything the user can read: a sparse 3 GB file was copied dense into the state
 * dir. Larger targets are left alone, link and all, for a person to move.
 */
export const MAX_KEPT_LINK_BYTES = 64 * 1024 * 1024;

/**
 * A copy of what a symlink points at, when that is a regular file (read only: a FIFO or device
 * target is not opened for long, a dangling link has nothing to keep); null when there is nothing.
 * A target over MAX_KEPT_LINK_BYTES is STORE_CORRUPT (not repaired).
 */
export async function keepLinkTarget(link: string, tag: 'bak' | 'corrupt', now: number): Promise<string | null> {
  const target = await fsp.stat(link).catch(() => null);
  if (target !== null && target.isFile() && target.size > MAX_KEPT_LINK_BYTES) {
    throw new SwitchboardError('STORE_CORRUPT', `${link} is a link to ${target.size} bytes, more than doctor copies (${MAX_KEPT_LINK_BYTES}); left it alone`, {
      hint: 'move the link (and, if it is yours, what it points at) out of the state dir by hand',
    });
  }
  try {
    return await keepOriginal(link, tag, now, { throughLink: true });
  } catch (err) {
    if (errnoOf(err) === 'ENOENT' || (err instanceof SwitchboardError && err.code === 'STORE_CORRUPT') || errnoOf(err) === 'ELOOP') return null;
    throw err;
  }
}

/**
 * Temp in the folder (named like write-file-atomic's, so a leftover is a known temp), fsync,
 * rename over the target, fsync the folder. Not write-file-atomic itself: that one resolves a
 * symlink at the target and replaces what it points at; rename(2) replaces the name itself.
 */
export async function replaceWholeFile(target: string, text: string): Promise<void> {
  const dir = path.dirname(target);
  for (let attempt = 1; ; attempt += 1) {
    const temp = resolveInside(dir, `${path.basename(target)}.${randomBytes(4).readUInt32BE(0)}`);
    let fh: FileHandle;
    try {
      fh = await fsp.open(temp, fsConstants.O_WRONLY | fsConstants.O_CREAT | fsConstants.O_EXCL | fsConstants.O_NOFOLLOW, FILE_MODE);
    } catch (err) {
      if (errnoOf(err) === 'EEXIST' && attempt < 10) continue;
      throw err;
    }
    try {
      try {
        await fh.writeFile(text, 'utf8'); // loops until every byte is written (a short write is not success)
        await fh.sync();
      } finally {
        await fh.close();
      }
      await fsp.rename(temp, target);
    } catch (err) {
      await fsp.unlink(temp).catch(() => undefined);
      throw err;
    }
    await fsyncFolder(dir);
    return;
  }
}

export function describeError(err: unknown): string {
  const error = asSwitchboardError(err);
  return `${error.code}: ${error.message}`;
}
