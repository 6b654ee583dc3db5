// A transcript's first records (header and first entry) from one small read: what listings of
// many instances (`sessions history`) need, without streaming whole files.

import { constants as fsConstants } from 'node:fs';
import path from 'node:path';
import { SwitchboardError, errnoOf, ioError } from '../core/index.js';
import { memoryVolumeFor } from './memory-volume.js';
import { openRegularFile } from './regular-file.js';
import { parseRecord, readTranscript } from './transcript-read.js';
import type { TranscriptRecord } from './transcript.js';

/** Bytes read at first for a transcript's head: a header and a first record fit many times over. */
const HEAD_BYTES = 16 * 1024;

/**
 * The complete lines within the first HEAD_BYTES of a transcript on disk (the last piece of a
 * full read may be cut, and is left out), and whether that read held the whole file. A missing
 * file is NOT_FOUND; a link, FIFO or folder is refused (openRegularFile).
 */
async function headLines(file: string): Promise<{ lines: string[]; wholeFile: boolean }> {
  let handle;
  try {
    handle = await openRegularFile(file, fsConstants.O_RDONLY);
  } catch (err) {
    if (errnoOf(err) === 'ENOENT') throw new SwitchboardError('NOT_FOUND', `no transcript at ${file}`, { details: { path: file } });
    if (err instanceof SwitchboardError) throw err;
    throw ioError(`could not open transcript ${file}`, err);
  }
  try {
    const buffer = Buffer.alloc(HEAD_BYTES);
    const { bytesRead } = await handle.read(buffer, 0, HEAD_BYTES, 0);
    const lines = buffer.subarray(0, bytesRead).toString('utf8').split('\n');
    return bytesRead < HEAD_BYTES ? { lines, wholeFile: true } : { lines: lines.slice(0, -1), wholeFile: false };
  } finally {
    await handle.close().catch(() => undefined);
  }
}

/**
 * The first `count` records of a transcript (the header, then the first entry): one small read,
 * so a listing of many instances does not read whole files; a longer first record is streamed.
 * Lines that do not parse are skipped as readTranscript skips them. A missing file is NOT_FOUND.
 */
export async function readTranscriptHead(transcriptPath: string, count = 2): Promise<TranscriptRecord[]> {
  const file = path.resolve(transcriptPath);
  if (memoryVolumeFor(file) === undefined) {
    const { lines, wholeFile } = await headLines(file);
    const records: TranscriptRecord[] = [];
    for (const line of lines) {
      const record = parseRecord(line);
      if (record !== null) records.push(record);
      if (records.length === count) return records;
    }
    if (wholeFile) return records;
  }
  const records: TranscriptRecord[] = [];
  for await (const record of readTranscript(file)) {
    records.push(record);
    if (records.length === count) break;
  }
  return records;
}

/**
 * The record on a transcript's first non-blank line, when that line is complete within one small
 * read; null when it is not a record, or longer than the read, or the file is empty. What judges
 * a header must look at line 1 itself (readTranscriptHead skips lines that do not parse) and must
 * never read a hostile file's huge first line whole. A missing file is NOT_FOUND.
 */
export async function readFirstLineRecord(transcriptPath: string): Promise<TranscriptRecord | null> {
  const file = path.resolve(transcriptPath);
  if (memoryVolumeFor(file) !== undefined) {
    for await (const record of readTranscript(file)) return record;
    return null;
  }
  const first = (await headLines(file)).lines.find((line) => line.trim() !== '');
  return first === undefined ? null : parseRecord(first);
}
