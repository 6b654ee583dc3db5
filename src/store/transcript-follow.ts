// `sessions transcript --follow`: reads records appended after a byte offset as they arrive,
// keeping a partial last line until it is complete.

import { constants as fsConstants, promises as fsp } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { openRegularFile } from './regular-file.js';
import { parseRecord } from './transcript-read.js';
import type { TranscriptRecord } from './transcript.js';

const POLL_MS = 200;

/** Calls onRecord for every complete record appended after `offset`, until `signal` aborts. */
export async function followTranscript(file: string, offset: number, onRecord: (record: TranscriptRecord) => void, signal: AbortSignal): Promise<void> {
  let position = offset;
  let partial = '';
  while (!signal.aborted) {
    const stat = await fsp.stat(file).catch(() => null);
    if (stat === null) return; // rotated or deleted: this instance is over (the caller may follow the next)
    if (stat.size > position) {
      const handle = await openRegularFile(file, fsConstants.O_RDONLY); // never through a link
      try {
        const buffer = Buffer.alloc(stat.size - position);
        const { bytesRead } = await handle.read(buffer, 0, buffer.length, position);
        position += bytesRead;
        const lines = (partial + buffer.subarray(0, bytesRead).toString('utf8')).split('\n');
        partial = lines.pop() ?? '';
        for (const line of lines) {
          // A damaged line is skipped, as every reader does (and by the same rule).
          const record = parseRecord(line);
          if (record !== null) onRecord(record);
        }
      } finally {
        await handle.close();
      }
    }
    await pause(POLL_MS, signal);
  }
}

/** Waits `ms`, or less when `signal` aborts; leaves no listener behind on the signal. */
export async function pause(ms: number, signal: AbortSignal): Promise<void> {
  await sleep(ms, undefined, { signal }).catch(() => undefined);
}
