// Store files are regular files, opened without following links: a symlink (wherever it points),
// a FIFO, a socket or a device where a store file belongs is STORE_CORRUPT — never written through, never waited on.

import { closeSync, lstatSync, constants as fsConstants, fstatSync, fsync, ftruncateSync, openSync, promises as fsp, readSync, writeSync, type Stats } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import { SwitchboardError, describeFileKind, errnoOf, fileKindOf, type FileKind } from '../core/index.js';

export { describeFileKind, fileKindOf, type FileKind };

/**
 * Added to every open of a store file. O_NOFOLLOW: a symlink as the last component fails (ELOOP)
 * instead of being followed. O_NONBLOCK: opening a FIFO returns at once instead of waiting for a
 * writer, so the fstat check below can refuse it; it changes nothing for regular files.
 */
export const STORE_OPEN_FLAGS = (fsConstants.O_NOFOLLOW ?? 0) | (fsConstants.O_NONBLOCK ?? 0);

/** What a store file that is not a regular file is: STORE_CORRUPT for that file (exit 65). */
export function notRegularFileError(file: string, kind: FileKind): SwitchboardError {
  return new SwitchboardError('STORE_CORRUPT', `${file} is ${describeFileKind(kind)}, not a regular file; switchboard never follows links or waits on pipes in its store`, {
    // A folder may hold anything (a person's files): doctor never moves one, so the hint does not promise it.
    hint:
      kind === 'directory'
        ? 'a folder stands where a store file belongs: move it away by hand (`switchboard doctor` lists such files)'
        : 'run `switchboard doctor` to list such files; `switchboard doctor --repair` moves them aside, keeping a copy of their bytes',
    details: { path: file, fileKind: kind },
  });
}

/**
 * The most bytes a store file read whole may hold (sessions.json and its .bak, the journal, the
 * removed-ids file, lock owner records). Its text must fit in a V8 string, which ends near 512 Mi
 * characters, so a larger file could never be used; reading it anyway cost seconds and gigabytes
 * of memory (a sparse 3 GB journal: 15 s and 4 GB at every command), and past 2 GiB the read
 * itself failed with an opaque range error that left doctor unable to repair sessions.json.
 */
export const MAX_WHOLE_FILE_BYTES = 512 * 1024 * 1024;

/** Why a file of `size` bytes is not read whole ("is N bytes, more than …"), or null when it may be. */
export function tooLargeProblem(size: number): string | null {
  return size <= MAX_WHOLE_FILE_BYTES ? null : `is ${size} bytes, more than any store file holds (at most ${MAX_WHOLE_FILE_BYTES})`;
}

/** Refuses to read `file` whole when it holds more than MAX_WHOLE_FILE_BYTES: STORE_CORRUPT with reason "too-large". */
export function checkWholeFileSize(file: string, size: number): void {
  const problem = tooLargeProblem(size);
  if (problem === null) return;
  const reason = `the file ${problem}`;
  throw new SwitchboardError('STORE_CORRUPT', `${file}: ${reason}`, {
    hint: 'run `switchboard doctor` to see what is damaged; `switchboard doctor --repair` fixes it, keeping the original bytes',
    details: { path: file, reason, sizeBytes: size, tooLarge: true },
  });
}

/** Whether `err` is checkWholeFileSize's refusal. */
export function isTooLargeToRead(err: unknown): err is SwitchboardError {
  return err instanceof SwitchboardError && err.details?.tooLarge === true;
}

/** The kind of what is at `file` without following a link; null when nothing is there. */
export async function lstatKind(file: string): Promise<FileKind | null> {
  try {
    return fileKindOf(await fsp.lstat(file));
  } catch (err) {
    if (errnoOf(err) === 'ENOENT') return null;
    throw err;
  }
}

/**
 * Opens a store file that must be a regular file. Errors that are the kernel's view of a
 * non-regular file (ELOOP for a link under O_NOFOLLOW, EISDIR, ENXIO for a socket or a FIFO
 * without reader) are classified with lstat and become STORE_CORRUPT; ENOENT and the rest are
 * rethrown as they are, for the caller to map.
 */
export async function openRegularFile(file: string, flags: number, mode?: number, options: { throughLink?: boolean } = {}): Promise<FileHandle> {
  let fh: FileHandle;
  try {
    // throughLink: only doctor, to keep a copy of what a link points at; a FIFO is still refused.
    fh = await fsp.open(file, flags | (options.throughLink === true ? (fsConstants.O_NONBLOCK ?? 0) : STORE_OPEN_FLAGS), mode);
  } catch (err) {
    const errno = errnoOf(err);
    if (options.throughLink !== true && (errno === 'ELOOP' || errno === 'EISDIR' || errno === 'ENXIO' || errno === 'EEXIST')) {
      const kind = await lstatKind(file).catch(() => null);
      if (kind !== null && kind !== 'file') throw notRegularFileError(file, kind);
    }
    throw err;
  }
  try {
    const kind = fileKindOf(await fh.stat());
    if (kind !== 'file') throw notRegularFileError(file, kind);
  } catch (err) {
    await fh.close().catch(() => undefined);
    throw err;
  }
  return fh;
}

/**
 * A store file open for appending through its descriptor. Opening, fstat, reads and writes are
 * synchronous: on a local disk they take microseconds (a write lands in the page cache), far less
 * than a round trip through libuv's four-thread pool, which a batch touching hundreds of files
 * would otherwise queue on. fsync, the call that waits for the disk, stays asynchronous, so the
 * fsyncs of many files overlap.
 */
export class DescriptorFile {
  /**
   * @param openedAs what fstat said when the file was opened (openRegularDescriptor checks the
   * kind with it): callers that would fstat right after opening use it instead of a second call.
   */
  constructor(
    /** For callers that write with plain fd calls (the journal); the methods below are the usual way. */
    readonly fd: number,
    readonly openedAs: Stats,
    /** Its path, for the errors that name it. */
    readonly file: string = 'a store file',
  ) {}

  async stat(): Promise<Stats> {
    return fstatSync(this.fd);
  }

  async read(buffer: Buffer, offset: number, length: number, position: number): Promise<{ bytesRead: number }> {
    return { bytesRead: readSync(this.fd, buffer, offset, length, position) };
  }

  async write(buffer: Buffer, offset: number, length: number): Promise<{ bytesWritten: number }> {
    return { bytesWritten: writeSync(this.fd, buffer, offset, length) };
  }

  sync(): Promise<void> {
    return new Promise((resolve, reject) => fsync(this.fd, (err) => (err ? reject(err) : resolve())));
  }

  async truncate(length: number): Promise<void> {
    ftruncateSync(this.fd, length);
  }

  async close(): Promise<void> {
    closeSync(this.fd);
  }

  /** Everything from the start to the end as it is now (a file that grows meanwhile is read on). */
  async readAll(): Promise<Buffer> {
    const chunks: Buffer[] = [];
    let position = 0;
    // The size at open is only a first guess: reading goes on to the end.
    for (let size = Math.max(this.openedAs.size, 0) + 1; ; size = 64 * 1024) {
      checkWholeFileSize(this.file, Math.max(position, size - 1));
      const chunk = Buffer.allocUnsafe(size);
      const bytesRead = readSync(this.fd, chunk, 0, size, position);
      if (bytesRead === 0) break;
      chunks.push(bytesRead === size ? chunk : chunk.subarray(0, bytesRead));
      position += bytesRead;
    }
    return chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
  }
}

/** openRegularFile's rules (no link followed, no FIFO waited on, regular files only) for a DescriptorFile. */
export function openRegularDescriptor(file: string, flags: number, mode?: number): DescriptorFile {
  let fd: number;
  try {
    fd = openSync(file, flags | STORE_OPEN_FLAGS, mode);
  } catch (err) {
    const errno = errnoOf(err);
    if (errno === 'ELOOP' || errno === 'EISDIR' || errno === 'ENXIO' || errno === 'EEXIST') {
      const kind = lstatKindSync(file);
      if (kind !== null && kind !== 'file') throw notRegularFileError(file, kind);
    }
    throw err;
  }
  let openedAs: Stats;
  try {
    openedAs = fstatSync(fd);
    const kind = fileKindOf(openedAs);
    if (kind !== 'file') throw notRegularFileError(file, kind);
  } catch (err) {
    closeSync(fd);
    throw err;
  }
  return new DescriptorFile(fd, openedAs, file);
}

/** lstatKind() for synchronous callers; null also when the answer cannot be had. */
export function lstatKindSync(file: string): FileKind | null {
  try {
    const stats = lstatSync(file, { throwIfNoEntry: false });
    return stats === undefined ? null : fileKindOf(stats);
  } catch {
    return null;
  }
}

/** Whole contents of a regular store file (small files: sessions.json and its copies). */
export async function readRegularFile(file: string): Promise<Buffer> {
  const fd = openRegularDescriptor(file, fsConstants.O_RDONLY);
  try {
    return await fd.readAll();
  } finally {
    await fd.close();
  }
}

/**
 * Copies a regular file's bytes into a new regular file (`O_EXCL`, never through a link at
 * `destination`) and fsyncs it. Used to keep originals: a copy, never a hard link, so a kept
 * "original" can never be a link to something else. EEXIST at the destination is rethrown.
 * `throughLink` reads what a symlink at `source` points at (doctor keeping a link's bytes); the
 * destination is never followed.
 */
export async function copyRegularFile(source: string, destination: string, mode: number, options: { throughLink?: boolean } = {}): Promise<void> {
  const input = await openRegularFile(source, fsConstants.O_RDONLY, undefined, options);
  try {
    const output = await fsp.open(destination, fsConstants.O_WRONLY | fsConstants.O_CREAT | fsConstants.O_EXCL | STORE_OPEN_FLAGS, mode);
    let done = false;
    try {
      const buffer = Buffer.alloc(1024 * 1024);
      for (;;) {
        const { bytesRead } = await input.read(buffer, 0, buffer.length, null);
        if (bytesRead === 0) break;
        let offset = 0;
        while (offset < bytesRead) {
          const { bytesWritten } = await output.write(buffer, offset, bytesRead - offset);
          if (bytesWritten <= 0) throw Object.assign(new Error(`no progress writing ${destination}`), { code: 'EIO' });
          offset += bytesWritten;
        }
      }
      await output.sync();
      done = true;
    } finally {
      await output.close().catch(() => undefined);
      if (!done) await fsp.unlink(destination).catch(() => undefined);
    }
  } finally {
    await input.close().catch(() => undefined);
  }
}
