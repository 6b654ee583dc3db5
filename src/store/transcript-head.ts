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
 * The first `count` records of a transcript (the header, then the first entry): one small read,
 * so a listing of many instances does not read whole files; a longer first record is streamed.
 * Lines that do not parse are skipped as readTranscript skips them. A missing file is NOT_FOUND.
 * `firstReadOnly`: what that first read holds and no more (a file whose head is not in it gives
 * what is there), for callers that must not read a hostile file's huge first line whole.
 */
export async function readTranscriptHead(transcriptPath: string, count = 2, firstReadOnly = false): Promise<TranscriptRecord[]> {
  const file = path.resolve(transcriptPath);
  if (memoryVolumeFor(file) === undefined) {
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
      const text = buffer.subarray(0, bytesRead).toString('utf8');
      const lines = text.split('\n');
      const complete = bytesRead < HEAD_BYTES ? lines : lines.slice(0, -1); // the last piece may be cut
      const records: TranscriptRecord[] = [];
      for (const line of complete) {
        const record = parseRecord(line);
        if (record !== null) records.push(record);
        if (records.length === count) return records;
      }
      if (bytesRead < HEAD_BYTES || firstReadOnly) return records;
    } finally {
      await handle.close().catch(() => undefined);
    }
  }
  const records: TranscriptRecord[] = [];
  for await (const record of readTranscript(file)) {
    records.push(record);
    if (records.length === count) break;
  }
  return records;
}
