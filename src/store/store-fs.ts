// The file-system seam of the sessions.json store: the StoreFileSystem interface every disk touch
// of the store goes through, nodeStoreFileSystem (the real one, including the safe use of
// write-file-atomic), and fileSystemFor() (a memory volume's or the disk's).

import { closeSync, copyFileSync, fsync, linkSync, lstatSync, openSync, renameSync, unlinkSync, writeSync } from 'node:fs';
import { makeDirectories } from './paths.js';
import { lstat, realpath } from 'node:fs/promises';
import path from 'node:path';
import { errnoOf } from '../core/index.js';
import { memoryVolumeFor } from './memory-volume.js';
import { fileKindOf, notRegularFileError, readRegularFile, type FileKind } from './regular-file.js';

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

/** fsync of an open descriptor, off the main thread: the one call here that waits for the disk. */
export function fsyncDescriptor(fd: number): Promise<void> {
  return new Promise((resolve, reject) => fsync(fd, (err) => (err ? reject(err) : resolve())));
}

/** Folders that cannot be fsynced on this platform/file system are not an error. */
export const FOLDER_FSYNC_UNSUPPORTED: ReadonlySet<string> = new Set(['EINVAL', 'ENOTSUP', 'EOPNOTSUPP', 'EISDIR']);

/**
 * fsync of a folder, so that a name created or renamed in it survives a power loss: the one folder
 * fsync of the store's journal and transcripts (sessions.json goes through StoreFileSystem.fsyncPath).
 */
export async function fsyncFolder(dir: string): Promise<void> {
  const fd = openSync(dir, 'r');
  try {
    await fsyncDescriptor(fd);
  } catch (err) {
    if (!FOLDER_FSYNC_UNSUPPORTED.has(errnoOf(err) ?? '')) throw err;
  } finally {
    closeSync(fd);
  }
}

/**
 * The real file system. Every call but fsync is synchronous: names, links and small writes take
 * microseconds on a local disk, while a trip through libuv's thread pool costs far more and
 * queues behind other work; a store update makes some twenty of them in a row (see
 * DescriptorFile in regular-file.ts for the same choice on transcripts).
 */
export const nodeStoreFileSystem: StoreFileSystem = {
  readFile: (filePath) => readRegularFile(filePath),
  stat: async (filePath) => {
    const stats = lstatSync(filePath);
    return { size: stats.size, mtimeMs: stats.mtimeMs, ctimeMs: stats.ctimeMs, ino: stats.ino, kind: fileKindOf(stats) };
  },
  mkdir: async (dirPath, mode) => {
    makeDirectories(dirPath, mode);
  },
  link: async (existingPath, newPath) => linkSync(existingPath, newPath),
  copyFile: async (sourcePath, destinationPath) => copyFileSync(sourcePath, destinationPath),
  rename: async (oldPath, newPath) => renameSync(oldPath, newPath),
  unlink: async (filePath) => unlinkSync(filePath),
  fsyncPath: async (fileOrDirPath) => {
    const fd = openSync(fileOrDirPath, 'r');
    try {
      await fsyncDescriptor(fd);
    } finally {
      closeSync(fd);
    }
  },
  createExclusive: async (filePath, mode) => {
    closeSync(openSync(filePath, 'wx', mode));
  },
  writeWholeFile: async (filePath, data) => {
    const fd = openSync(filePath, 'r+');
    try {
      // write(2) may write fewer bytes than asked when the disk fills up; only the next call
      // reports ENOSPC. Looping until every byte is down is what turns that into an error.
      let offset = 0;
      while (offset < data.length) {
        const bytesWritten = writeSync(fd, data, offset, data.length - offset, offset);
        if (bytesWritten <= 0) {
          throw Object.assign(new Error(`no progress writing ${filePath}`), { code: 'ENOSPC' });
        }
        offset += bytesWritten;
      }
    } finally {
      closeSync(fd);
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
    // Loaded at the first replace: commands that only read the store (a listing) never load it.
    const { default: writeFileAtomic } = await import('write-file-atomic');
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
