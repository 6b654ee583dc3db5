// Reading session transcripts: streamed line by line (never a whole-file read); what does not
// parse is skipped and counted, and a torn tail never throws. The writing side is transcript.ts.

import { constants as fsConstants } from 'node:fs';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { SwitchboardError, errnoOf, ioError, jsonDepthExceeds, mayNestDeeperThan } from '../core/index.js';
import { memoryVolumeFor } from './memory-volume.js';
import { openRegularFile } from './regular-file.js';
import type { TranscriptHeader, TranscriptReadStats, TranscriptReader, TranscriptRecord } from './transcript.js';

const NEWLINE = 0x0a;
const CARRIAGE_RETURN = 0x0d;

/**
 * A line longer than this is not a record anyone wrote (the largest runner output would be far
 * smaller): readers skip and count it without holding or decoding it. Decoded, a line of over
 * ~512 MiB passes V8's string limit and the read failed outright (a RangeError, exit 1), and
 * one below that still cost readers and appends its size in memory several times over.
 */
export const MAX_RECORD_BYTES = 256 * 1024 * 1024;

/**
 * One line as a record, or null when it is not one (readers skip and count such lines). A line
 * nesting deeper than a message may is not one either: printing it (`transcript --raw`) or any
 * walk of it overflowed the stack, an INTERNAL error; no runner or channel line gets that deep
 * (both are refused past the same bound when they arrive).
 */
export function parseRecord(line: Buffer | string): TranscriptRecord | null {
  const text = (typeof line === 'string' ? line : line.toString('utf8')).trim();
  if (text === '') return null;
  try {
    const value: unknown = JSON.parse(text);
    if (typeof value !== 'object' || value === null || Array.isArray(value)) return null;
    if (mayNestDeeperThan(text) && jsonDepthExceeds(value)) return null;
    return typeof (value as { type?: unknown }).type === 'string' ? (value as TranscriptRecord) : null;
  } catch {
    return null;
  }
}

/**
 * The readable text of a message's `content`, whichever form it has: switchboard and OpenClaw's
 * embedded runs write a list of blocks, OpenClaw's CLI backends, webchat and `openclaw agent` a
 * plain string. Non-text blocks show as `[type]` (`[?]` without a type); anything else yields ''
 * (a reader never throws on what another writer put there).
 */
export function messageContentText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content
    .map((part: unknown) => {
      if (typeof part === 'string') return part;
      if (typeof part !== 'object' || part === null) return '';
      const block = part as { type?: unknown; text?: unknown };
      if (block.type === 'text' && typeof block.text === 'string') return block.text;
      // A block of no (string) type, such as a nested list another writer put there, is still shown as one.
      return typeof block.type === 'string' && block.type !== '' ? `[${block.type}]` : '[?]';
    })
    .filter((text) => text !== '')
    .join(' ');
}

/**
 * Streams a transcript record by record (never a whole-file read). Unparseable lines are skipped
 * and counted in `stats`; a torn tail never throws. A missing file throws NOT_FOUND.
 */
export function readTranscript(transcriptPath: string): TranscriptReader {
  const stats: TranscriptReadStats = { bytes: 0, lines: 0, records: 0, skipped: 0, tornTail: false };
  return {
    stats,
    [Symbol.asyncIterator]: () => streamRecords(path.resolve(transcriptPath), stats),
  };
}

async function* streamRecords(file: string, stats: TranscriptReadStats): AsyncGenerator<TranscriptRecord> {
  Object.assign(stats, { bytes: 0, lines: 0, records: 0, skipped: 0, tornTail: false }); // a second pass recounts
  let stream: Readable; // bytes, split into lines before they are decoded (a UTF-8 sequence never holds a newline byte)
  try {
    const volume = memoryVolumeFor(file);
    stream = volume !== undefined ? volume.createReadStream(file) : (await openRegularFile(file, fsConstants.O_RDONLY)).createReadStream();
  } catch (err) {
    if (errnoOf(err) === 'ENOENT') throw new SwitchboardError('NOT_FOUND', `no transcript at ${file}`, { details: { path: file } });
    throw ioError(`could not open transcript ${file}`, err);
  }
  try {
    for await (const line of byteLines(stream as AsyncIterable<Buffer>, stats)) {
      if (line === TOO_LONG) {
        stats.lines += 1;
        stats.skipped += 1;
        continue;
      }
      const text = line.toString('utf8');
      if (text.trim() === '') continue;
      stats.lines += 1;
      const record = parseRecord(text);
      if (record === null) {
        stats.skipped += 1;
        continue;
      }
      stats.records += 1;
      yield record;
    }
  } catch (err) {
    throw ioError(`could not read transcript ${file}`, err);
  } finally {
    stream.destroy();
  }
}

/** Stands for a line over MAX_RECORD_BYTES, whose bytes were not kept. */
const TOO_LONG = Symbol('too long');

/**
 * The file's lines as bytes (a CRLF ending loses its CR), counting bytes and noting a torn tail
 * in `stats`; a line over MAX_RECORD_BYTES comes as TOO_LONG, its bytes dropped as they are read.
 */
async function* byteLines(chunks: AsyncIterable<Buffer>, stats: TranscriptReadStats): AsyncGenerator<Buffer | typeof TOO_LONG> {
  let pending: Buffer[] = [];
  let pendingBytes = 0;
  let oversized = false;
  let lastByte = NEWLINE;
  const finish = (): Buffer | typeof TOO_LONG => {
    const line = oversized ? TOO_LONG : pending.length === 1 ? pending[0]! : Buffer.concat(pending, pendingBytes);
    pending = [];
    pendingBytes = 0;
    oversized = false;
    if (line === TOO_LONG || line[line.length - 1] !== CARRIAGE_RETURN) return line;
    return line.subarray(0, line.length - 1);
  };
  const take = (part: Buffer): void => {
    if (oversized || part.length === 0) return;
    if (pendingBytes + part.length > MAX_RECORD_BYTES) {
      oversized = true;
      pending = [];
      pendingBytes = 0;
      return;
    }
    pending.push(part);
    pendingBytes += part.length;
  };
  for await (const chunk of chunks) {
    stats.bytes += chunk.length;
    if (chunk.length === 0) continue;
    lastByte = chunk[chunk.length - 1]!;
    let start = 0;
    for (let newline = chunk.indexOf(NEWLINE); newline !== -1; newline = chunk.indexOf(NEWLINE, start)) {
      take(chunk.subarray(start, newline));
      yield finish();
      start = newline + 1;
    }
    // Copied: the stream may reuse its chunk's memory for the next read.
    if (start < chunk.length) take(Buffer.from(chunk.subarray(start)));
  }
  if (pendingBytes > 0 || oversized) yield finish();
  stats.tornTail = stats.bytes > 0 && lastByte !== NEWLINE;
}

/** Whole transcript in memory: for tests, small files and repairs. Big files: readTranscript. */
export async function loadTranscript(
  transcriptPath: string,
): Promise<{ header: TranscriptHeader | null; entries: TranscriptRecord[]; stats: TranscriptReadStats }> {
  const reader = readTranscript(transcriptPath);
  let header: TranscriptHeader | null = null;
  const entries: TranscriptRecord[] = [];
  for await (const record of reader) {
    if (record.type === 'session' && header === null && entries.length === 0) header = record as unknown as TranscriptHeader;
    else entries.push(record);
  }
  return { header, entries, stats: reader.stats };
}

/** Size, line and skipped counts of a transcript, streamed (memory does not grow with the file). */
export async function transcriptStats(transcriptPath: string): Promise<TranscriptReadStats> {
  const reader = readTranscript(transcriptPath);
  for await (const _record of reader) {
    // counting happens in the reader
  }
  return reader.stats;
}

