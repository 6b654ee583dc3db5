// The duplicate memory of entries doctor writes anew. A store restored from sessions.json.bak is
// one write behind the transcripts, one rebuilt from the headers (or an adopted orphan's entry)
// has no memory at all: a resend of a message recorded in the last five minutes would be
// recorded again. The records are the truth, so the messages (route and messageId) of the records
// appended to the entry's transcript within the window are remembered again, at the records' times.

import path from 'node:path';
import { DUPLICATE_WINDOW_MS, mergeRecentIds, recentIdLine } from '../../core/index.js';
import { duplicateKeyOfRecord, readTranscript, sessionEntryProblem, type SessionStore } from '../../store/index.js';
import { transcriptFileOf } from '../session-list.js';
import type { StoreCheck } from './store-check.js';
import type { TranscriptScan } from './transcript-scan.js';

/** The stored form of the messages recorded in a transcript within the window ('' for none); only a file written to within it is read. */
export async function recentIdsRecordedIn(doc: StoreCheck, scan: TranscriptScan | undefined): Promise<string> {
  const now = doc.now();
  const since = now - DUPLICATE_WINDOW_MS;
  if (scan === undefined || scan.removed === true || scan.mtimeMs < since) return '';
  const lines: string[] = [];
  try {
    for await (const record of readTranscript(scan.file)) {
      const at = typeof record.timestamp === 'string' ? Date.parse(record.timestamp) : Number.NaN;
      const key = duplicateKeyOfRecord(record);
      if (key !== undefined && at >= since && at <= now) lines.push(recentIdLine(key, at));
    }
  } catch {
    return ''; // unreadable: the transcript step reports it
  }
  return lines.join('\n');
}

/** Adds what each entry's transcript recorded within the window to its memory; returns how many records. */
export async function rememberRecordedIds(doc: StoreCheck, store: SessionStore): Promise<number> {
  let remembered = 0;
  for (const [key, entry] of Object.entries(store)) {
    if (sessionEntryProblem(entry, doc.location.sessionsDir) !== null) continue;
    const recorded = await recentIdsRecordedIn(doc, doc.scans.get(path.basename(transcriptFileOf(doc.location, entry, key))));
    if (recorded === '') continue;
    entry.recentMessageIds = withRecorded(entry.recentMessageIds, recorded, doc.now());
    remembered += recorded.split('\n').length;
  }
  return remembered;
}

/** An entry's memory with the recorded ids added. */
export function withRecorded(memory: unknown, recorded: string, now: number): string {
  return mergeRecentIds([memory, recorded], now - DUPLICATE_WINDOW_MS);
}
