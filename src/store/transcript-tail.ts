// Where the next append to a transcript goes on: whether the file ends on a fresh line and which
// entry the next one chains to. Found by reading backwards from the end (cost: the last lines,
// not the file), or from what this process itself wrote last while the file is unchanged.

import type { Stats } from 'node:fs';
import type { AppendableFile } from './memory-volume.js';
import { MAX_RECORD_BYTES, parseRecord } from './transcript-read.js';
import type { TranscriptRecord } from './transcript.js';

const NEWLINE = 0x0a;
/** First backwards read when looking for the last record; doubles while a line is longer. */
const TAIL_CHUNK_BYTES = 64 * 1024;
/** Backwards reads through a line too long to be a record: only its start is looked for. */
const SKIP_CHUNK_BYTES = 16 * 1024 * 1024;
/** Bounds the per-process cache of (file identity, size) → last entry id. */
const TAIL_CACHE_LIMIT = 10_000;

export interface TailInfo {
  endsWithNewline: boolean;
  /** Some complete record (at least the header) exists. */
  hasRecord: boolean;
  lastEntryId: string | null;
}

export interface CachedTail {
  dev: number;
  ino: number;
  size: number;
  lastEntryId: string | null;
}

/** What this process last wrote per file; valid only while identity and size still match. */
const tailCache = new Map<string, CachedTail>();

/** The tail of `file` (open as `fh`, `stat` its fstat taken under the lock that covers it). */
export async function transcriptTail(file: string, fh: AppendableFile, stat: Pick<Stats, 'dev' | 'ino' | 'size'>): Promise<TailInfo> {
  const cached = tailCache.get(file);
  if (cached !== undefined && cached.dev === stat.dev && cached.ino === stat.ino && cached.size === stat.size) {
    return { endsWithNewline: true, hasRecord: true, lastEntryId: cached.lastEntryId };
  }
  return inspectTail(fh, stat.size);
}

/** After a failed append nothing is known about the file any more. */
export function forgetTail(file: string): void {
  tailCache.delete(file);
}

/** What an append just left at the end of `file`: this process's next append need not read it back. */
export function rememberTail(file: string, tail: CachedTail): void {
  if (tailCache.size >= TAIL_CACHE_LIMIT && !tailCache.has(file)) tailCache.clear();
  tailCache.set(file, tail);
}

/**
 * Reads backwards from the end until the last complete record: whether the file ends with a
 * newline, and the id of the last entry. Cost is the size of the last line(s), not of the file.
 */
async function inspectTail(fh: AppendableFile, size: number): Promise<TailInfo> {
  if (size === 0) return { endsWithNewline: true, hasRecord: false, lastEntryId: null };
  let buffer = Buffer.alloc(0);
  let bufferStart = size; // buffer holds file bytes [bufferStart, bufferStart + buffer.length)
  let chunk = TAIL_CHUNK_BYTES;
  const readEarlier = async (): Promise<boolean> => {
    if (bufferStart === 0) return false;
    const length = Math.min(chunk, bufferStart);
    const bytes = Buffer.alloc(length);
    const start = bufferStart - length;
    let read = 0;
    while (read < length) {
      const { bytesRead } = await fh.read(bytes, read, length - read, start + read);
      if (bytesRead === 0) break;
      read += bytesRead;
    }
    buffer = Buffer.concat([bytes.subarray(0, read), buffer]);
    bufferStart = start;
    // Doubling, so a long line takes few reads; capped, so that what is held past
    // MAX_RECORD_BYTES, before such a line is known to be too long, is one chunk more.
    chunk = Math.min(chunk * 2, SKIP_CHUNK_BYTES);
    return true;
  };
  /** Absolute offset of the last newline before `end`, -1 when not in the buffer (yet). */
  const newlineBefore = (end: number): number => {
    const relative = end - 1 - bufferStart;
    if (relative < 0) return -1;
    const found = buffer.lastIndexOf(NEWLINE, relative);
    return found < 0 ? -1 : found + bufferStart;
  };

  await readEarlier();
  const endsWithNewline = buffer[buffer.length - 1] === NEWLINE;
  let sawRecord = false;
  // A torn final segment is still a candidate: if it parses, the fresh-line rule makes it a
  // complete line, so it counts as the last record (readers count it too).
  let end = endsWithNewline ? size - 1 : size;
  for (;;) {
    let start: number;
    // A line longer than any record is not one (readers skip it too): its bytes are dropped as
    // they are read, and only where it starts is looked for. Decoded, a line of over ~512 MiB
    // failed every append to the session (ERR_STRING_TOO_LONG, reported as IO).
    let tooLong = false;
    for (;;) {
      const newline = newlineBefore(end);
      if (newline >= 0) {
        start = newline + 1;
        break;
      }
      if (end - bufferStart > MAX_RECORD_BYTES) tooLong = true;
      if (tooLong) buffer = Buffer.alloc(0);
      if (!(await readEarlier())) {
        start = 0;
        break;
      }
    }
    const record = tooLong ? null : parseRecord(buffer.subarray(start - bufferStart, end - bufferStart));
    if (record !== null) {
      if (record.type === 'session') return { endsWithNewline, hasRecord: true, lastEntryId: null };
      const parent = chainParentAfter(record);
      if (parent !== undefined) return { endsWithNewline, hasRecord: true, lastEntryId: parent };
      sawRecord = true; // a record outside the chain (no id): the chain goes on from the one before it
    }
    if (start === 0) return { endsWithNewline, hasRecord: sawRecord, lastEntryId: null };
    end = start - 1;
    // drop what has been examined so memory stays at the unexamined part
    buffer = buffer.subarray(0, end - bufferStart);
  }
}

/**
 * The parentId the next entry gets after `record`, the last record of a file; undefined when the
 * record is not part of the chain (no id). OpenClaw's `leaf` record moves its tree to `targetId`
 * and says where appends continue (`appendParentId`, else `targetId`), so an entry after a leaf
 * continues from there, exactly as OpenClaw's own next append would.
 */
function chainParentAfter(record: TranscriptRecord): string | null | undefined {
  if (typeof record.id !== 'string' || record.id === '') return undefined;
  if (record.type === 'leaf') {
    const next = record.appendParentId !== undefined ? record.appendParentId : record.targetId;
    if (next === null || (typeof next === 'string' && next !== '')) return next;
  }
  return record.id;
}
