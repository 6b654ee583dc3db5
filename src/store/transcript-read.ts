// Reading session transcripts: streamed line by line (never a whole-file read); what does not
// parse is skipped and counted, and a torn tail never throws. The writing side is transcript.ts.

import { constants as fsConstants } from 'node:fs';
import path from 'node:path';
import { createInterface } from 'node:readline';
import type { Readable } from 'node:stream';
import { SwitchboardError, errnoOf, ioError } from '../core/index.js';
import { memoryVolumeFor } from './memory-volume.js';
import { openRegularFile } from './regular-file.js';
import type { TranscriptHeader, TranscriptReadStats, TranscriptReader, TranscriptRecord } from './transcript.js';

const NEWLINE = 0x0a;

/** One line as a record, or null when it is not one (readers skip and count such lines). */
export function parseRecord(line: Buffer | string): TranscriptRecord | null {
  const text = (typeof line === 'string' ? line : line.toString('utf8')).trim();
  if (text === '') return null;
  try {
    const value: unknown = JSON.parse(text);
    if (typeof value !== 'object' || value === null || Array.isArray(value)) return null;
    return typeof (value as { type?: unknown }).type === 'string' ? (value as TranscriptRecord) : null;
  } catch {
    return null;
  }
}

/**
 * The readable text of a message's `content`, whichever form it has: switchboard and OpenClaw's
 * embedded runs write a list of blocks, OpenClaw's CLI backends, webchat and `openclaw agent` a
 * plain string. Non-text blocks show as `[type]`; anything else yields '' (a reader never throws
 * on what another writer put there).
 */
export function messageContentText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content
    .map((part: unknown) => {
      if (typeof part === 'string') return part;
      if (typeof part !== 'object' || part === null) return '';
      const block = part as { type?: unknown; text?: unknown };
      return block.type === 'text' && typeof block.text === 'string' ? block.text : `[${String(block.type)}]`;
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
  let stream: Readable; // bytes: readline decodes UTF-8 across chunk borders
  try {
    const volume = memoryVolumeFor(file);
    stream = volume !== undefined ? volume.createReadStream(file) : (await openRegularFile(file, fsConstants.O_RDONLY)).createReadStream();
  } catch (err) {
    if (errnoOf(err) === 'ENOENT') throw new SwitchboardError('NOT_FOUND', `no transcript at ${file}`, { details: { path: file } });
    throw ioError(`could not open transcript ${file}`, err);
  }
  let lastByte = NEWLINE;
  let streamError: unknown;
  stream.on('data', (chunk: Buffer | string) => {
    const bytes = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
    stats.bytes += bytes.length;
    if (bytes.length > 0) lastByte = bytes[bytes.length - 1] ?? lastByte;
  });
  const lines = createInterface({ input: stream, crlfDelay: Infinity });
  stream.on('error', (err) => {
    streamError = err;
    lines.close();
  });
  try {
    for await (const line of lines) {
      if (line.trim() === '') continue;
      stats.lines += 1;
      const record = parseRecord(line);
      if (record === null) {
        stats.skipped += 1;
        continue;
      }
      stats.records += 1;
      yield record;
    }
    if (streamError !== undefined) throw ioError(`could not read transcript ${file}`, streamError);
    stats.tornTail = stats.bytes > 0 && lastByte !== NEWLINE;
  } finally {
    lines.close();
    stream.destroy();
  }
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

