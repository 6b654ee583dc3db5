// Incognito storage: a folder tree that exists only in this process's memory. While a volume is
// mounted, the store's own functions — sessions.json updates, locks, transcript appends, archives,
// readers — serve every path under its root from here. So an incognito session runs through
// exactly the code a stored one does (one update path, one lock helper, one append path), and
// everything it left vanishes with the volume: at unmount, or when the process ends.

import { statSync } from 'node:fs';
import path from 'node:path';
import { Readable } from 'node:stream';
import type { FileIdentity, StoreFileSystem } from './store-fs.js';

interface MemoryFile {
  data: Buffer;
  ino: number;
  mtimeMs: number;
  ctimeMs: number;
}

/** The part of a node FileHandle the transcript appender uses; a memory file offers the same. */
export interface AppendableFile {
  stat(): Promise<{ dev: number; ino: number; size: number }>;
  read(buffer: Buffer, offset: number, length: number, position: number): Promise<{ bytesRead: number }>;
  /** Appends (the file is open for appending). */
  write(buffer: Buffer, offset: number, length: number): Promise<{ bytesWritten: number }>;
  sync(): Promise<void>;
  truncate(length: number): Promise<void>;
  close(): Promise<void>;
}

const REASONS = { ENOENT: 'no such file or directory', EEXIST: 'file already exists', EROFS: 'the memory volume was unmounted' };

/** An error shaped like the one node's fs gives, so callers' errno checks work unchanged. */
function fsError(code: keyof typeof REASONS, syscall: string, filePath: string): NodeJS.ErrnoException {
  return Object.assign(new Error(`${code}: ${REASONS[code]} (in memory), ${syscall} '${filePath}'`), { code, syscall, path: filePath });
}

export class MemoryVolume {
  readonly root: string;
  private readonly rootName: string;
  private readonly files = new Map<string, MemoryFile>();
  private nextIno = 1;
  private tempCounter = 0;
  private closed = false;
  /** The StoreFileSystem seam (sessions.json, archives) over this volume. */
  readonly fileSystem: StoreFileSystem;

  constructor(root: string) {
    this.root = path.resolve(root);
    this.rootName = path.basename(this.root);
    this.fileSystem = {
      readFile: async (filePath) => Buffer.from(this.get(filePath, 'open').data),
      stat: async (filePath) => this.identity(this.get(filePath, 'stat')),
      mkdir: async () => undefined, // folders are implied by the paths of their files
      link: async (existingPath, newPath) => {
        const source = this.get(existingPath, 'link');
        if (this.files.has(path.resolve(newPath))) throw fsError('EEXIST', 'link', newPath);
        this.files.set(path.resolve(newPath), source); // a second name for the same file, as a hard link
      },
      copyFile: async (sourcePath, destinationPath) => this.put(destinationPath, Buffer.from(this.get(sourcePath, 'copyfile').data)),
      rename: async (oldPath, newPath) => {
        const file = this.get(oldPath, 'rename');
        this.files.delete(path.resolve(oldPath));
        this.files.set(path.resolve(newPath), file);
      },
      unlink: async (filePath) => this.unlink(filePath),
      fsyncPath: async () => undefined,
      createExclusive: async (filePath) => {
        if (this.files.has(path.resolve(filePath))) throw fsError('EEXIST', 'open', filePath);
        this.put(filePath, Buffer.alloc(0));
      },
      writeWholeFile: async (filePath, data) => {
        const file = this.get(filePath, 'open');
        file.data = Buffer.from(data);
        file.mtimeMs = Date.now();
      },
      replaceAtomically: async (targetPath, _mode, fillTemp) => {
        const tempPath = `${path.resolve(targetPath)}.${process.pid}.${++this.tempCounter}.tmp`;
        this.put(tempPath, Buffer.alloc(0));
        try {
          await fillTemp(tempPath);
          await this.fileSystem.rename(tempPath, targetPath);
        } finally {
          this.files.delete(tempPath);
        }
      },
    };
  }

  contains(filePath: string): boolean {
    // Every store file call asks this while serve has its volume mounted, and resolving costs
    // more than the rest: an absolute path without the root's last segment in it cannot lie
    // under the root (resolving only drops segments; it adds the working directory only to a
    // relative path).
    if (path.isAbsolute(filePath) && !filePath.includes(this.rootName)) return false;
    const resolved = path.resolve(filePath);
    return resolved === this.root || resolved.startsWith(`${this.root}${path.sep}`);
  }

  /** Size of a file, or null when there is none. */
  sizeOf(filePath: string): number | null {
    return this.files.get(path.resolve(filePath))?.data.length ?? null;
  }

  /** Every file path held, sorted (for tests and diagnostics). */
  paths(): string[] {
    return [...this.files.keys()].sort();
  }

  unlink(filePath: string): void {
    if (!this.files.delete(path.resolve(filePath))) throw fsError('ENOENT', 'unlink', filePath);
  }

  /** Opens for appending like O_RDWR|O_APPEND, creating the file only when `create` (O_CREAT|O_EXCL). */
  openForAppend(filePath: string, create: boolean): AppendableFile {
    const resolved = path.resolve(filePath);
    if (create) {
      if (this.files.has(resolved)) throw fsError('EEXIST', 'open', filePath);
      this.put(resolved, Buffer.alloc(0));
    }
    const file = this.get(resolved, 'open');
    return {
      stat: async () => ({ dev: 0, ino: file.ino, size: file.data.length }),
      read: async (buffer, offset, length, position) => {
        const bytesRead = Math.max(0, Math.min(length, file.data.length - position));
        file.data.copy(buffer, offset, position, position + bytesRead);
        return { bytesRead };
      },
      write: async (buffer, offset, length) => {
        file.data = Buffer.concat([file.data, buffer.subarray(offset, offset + length)]);
        file.mtimeMs = Date.now();
        return { bytesWritten: length };
      },
      sync: async () => undefined,
      truncate: async (length) => {
        file.data = file.data.subarray(0, length);
      },
      close: async () => undefined,
    };
  }

  /** A stream of the file's bytes (what a reader would get from disk). */
  createReadStream(filePath: string): Readable {
    return Readable.from([Buffer.from(this.get(filePath, 'open').data)]);
  }

  /** Forgets every file; later writes fail (EROFS) rather than reach the disk under this root. */
  close(): void {
    this.closed = true;
    this.files.clear();
  }

  private get(filePath: string, syscall: string): MemoryFile {
    if (this.closed) throw fsError('EROFS', syscall, filePath);
    const file = this.files.get(path.resolve(filePath));
    if (file === undefined) throw fsError('ENOENT', syscall, filePath);
    return file;
  }

  private put(filePath: string, data: Buffer): void {
    if (this.closed) throw fsError('EROFS', 'open', filePath);
    const now = Date.now();
    this.files.set(path.resolve(filePath), { data, ino: this.nextIno++, mtimeMs: now, ctimeMs: now });
  }

  private identity(file: MemoryFile): FileIdentity {
    return { size: file.data.length, mtimeMs: file.mtimeMs, ctimeMs: file.ctimeMs, ino: file.ino };
  }
}

const mounted = new Set<MemoryVolume>();

/** Serves `root` (which should not exist on disk) from memory until unmounted. */
export function mountMemoryVolume(root: string): MemoryVolume {
  const volume = new MemoryVolume(root);
  for (const other of mounted) {
    if (other.contains(volume.root) || volume.contains(other.root)) throw new Error(`memory volume ${volume.root} overlaps ${other.root}`);
  }
  mounted.add(volume);
  return volume;
}

/**
 * Drops everything in the volume. Its root stays claimed (every access fails with EROFS), so a
 * late write — a run still finishing — can never fall through to the disk under that path.
 */
export function unmountMemoryVolume(volume: MemoryVolume): void {
  volume.close();
}

/** The mounted volume a path lies in, if any (no mounts: one set lookup, no path work). */
export function memoryVolumeFor(filePath: string): MemoryVolume | undefined {
  if (mounted.size === 0) return undefined;
  for (const volume of mounted) if (volume.contains(filePath)) return volume;
  return undefined;
}

/** True for a path served from memory (an incognito session's files), false for one on disk. */
export function isInMemory(filePath: string): boolean {
  return memoryVolumeFor(filePath) !== undefined;
}

/**
 * Size of a stored file wherever it lives; null when there is none. Synchronous on purpose: a
 * stat of a file whose metadata is cached costs microseconds, while the thread-pool round trip of
 * fs.promises.stat costs several times more (57 ms vs 340 ms for 10 000 transcripts; bounded
 * batches of 4–16 in flight: 50–75 ms vs 140–195 ms).
 */
export function storedFileSizeSync(filePath: string): number | null {
  const volume = memoryVolumeFor(filePath);
  return volume ? volume.sizeOf(filePath) : (statSync(filePath, { throwIfNoEntry: false })?.size ?? null);
}
