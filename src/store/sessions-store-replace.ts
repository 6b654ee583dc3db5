// Replacing sessions.json under the store lock: the read that pins the identity of the file in
// place, the checked replace (temp file, .bak hard link, fenced rename, folder fsync, re-checks
// that the lock and the file are still ours), and the STORE_BUSY "replaced" conflict that makes
// the update path retry a batch. sessions-store.ts drives it; nothing else writes the file.

import path from 'node:path';
import { SwitchboardError, errnoOf, nodeCrypto } from '../core/index.js';
import type { LockHandle } from './lock.js';
import { FILE_MODE, resolveInside } from './paths.js';
import { ioError, readStoreBytes } from './sessions-store-read.js';
import { FOLDER_FSYNC_UNSUPPORTED, type FileIdentity, type StoreFileSystem } from './store-fs.js';

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
export async function readPinned(fs: StoreFileSystem, storePath: string, handle: LockHandle): Promise<{ bytes: Buffer | null; pin: StorePin }> {
  for (let attempt = 1; ; attempt += 1) {
    const before = await identityOrNull(fs, storePath);
    const bytes = await readStoreBytes(fs, storePath);
    const after = await identityOrNull(fs, storePath);
    if ((bytes === null) === (after === null) && sameFile(before, after)) return { bytes, pin: { handle, identity: after } };
    if (attempt >= MAX_REPLACE_ATTEMPTS) throw replacedUnderUs(storePath, 'while it was being read');
  }
}

/** Attempts of one batch whose sessions.json changed under its lock (see replaceStoreFile). */
export const MAX_REPLACE_ATTEMPTS = 5;

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

export function isRetryableConflict(err: unknown): boolean {
  if (!(err instanceof SwitchboardError) || err.code !== 'STORE_BUSY') return false;
  return err.details?.retry === true || err.details?.reason === 'lost';
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
export async function replaceStoreFile(fs: StoreFileSystem, storePath: string, text: string, hasPrevious: boolean, pin: StorePin): Promise<void> {
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
    const tempPath = resolveInside(dir, `${path.basename(storePath)}.${nodeCrypto().randomBytes(4).readUInt32BE(0)}`);
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
