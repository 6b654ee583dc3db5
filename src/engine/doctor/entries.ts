// Step: the entries of sessions.json. An entry whose transcript is missing (or empty) gets a new
// one: the header and a `custom` entry (customType "doctor") saying that the history was lost. A
// transcript archived as `.deleted.<ts>` means a deletion was interrupted: reported only. Entries
// of the wrong shape are reported, never changed; keys that share one transcript are separated
// when its header tells whose it is (shared.ts).

import path from 'node:path';
import { SwitchboardError, readRecentIds } from '../../core/index.js';
import { appendEntries, lockPathFor, lstatKind, parseArchiveName, readSessionStore, sessionEntryProblem, type SessionEntry } from '../../store/index.js';
import { parseSessionKey } from '../../routing/index.js';
import { statOrNull } from './files.js';
import { separateShared, sharedGroups } from './shared.js';
import type { DoctorProblemKind, RepairOutcome } from './report.js';
import type { StoreCheck } from './store-check.js';
import type { TranscriptScan } from './transcript-scan.js';

/** Entries whose transcript is missing or empty, and headers that contradict their entry. */
export async function checkEntries(doc: StoreCheck): Promise<void> {
  const store = doc.store!;
  const archives = new Map<string, string[]>();
  for (const name of doc.listing.files) {
    const parsed = parseArchiveName(name);
    if (parsed !== null) archives.set(parsed.originalName, [...(archives.get(parsed.originalName) ?? []), `${parsed.reason}:${name}`]);
  }
  // Keys that name one transcript: one finding per file, as the store was before this run's
  // repairs (the orphan step may already have given a key its own transcript again). Nothing
  // below is done for them: a new transcript for one would be written into a file the other
  // names too.
  const shared = new Set<string>();
  for (const group of doc.sharedGroups ?? sharedGroups(doc, store)) {
    for (const key of group.keys) shared.add(key);
    const problem = doc.problem({
      kind: 'shared-transcript',
      file: doc.inside(group.name),
      sessionKey: group.keys[0]!,
      sessionKeys: group.keys,
      message:
        `${group.keys.join(' and ')} name the same transcript (sessionId or sessionFile): every write of them is refused (STORE_CORRUPT) so that neither writes into, resets or archives the other's conversation; ` +
        (group.keeper !== null
          ? `--repair leaves it with ${group.keeper} (its header names it) and gives ${group.others.join(', ')} a transcript of its own (its own newest earlier transcript where one is left, else a new instance)`
          : 'which key it belongs to cannot be told from its header, so give one of them its own sessionId and sessionFile, or remove one of the rows, by hand'),
      repairable: group.keeper !== null,
    });
    if (doc.repair && group.keeper !== null) await doc.attempt([problem], () => separateShared(doc, group));
  }
  for (const [key, entry] of Object.entries(store)) {
    if (shared.has(key)) continue;
    const shape = sessionEntryProblem(entry, doc.location.sessionsDir);
    if (shape !== null) {
      // Every command refuses this row (STORE_CORRUPT for this session); only a person knows the
      // fix — unless it is not even an object and a transcript names its key: that is adopted.
      const adopted = doc.plannedAdoptions.has(key);
      doc.problem({
        kind: 'invalid-entry',
        file: doc.location.storePath,
        sessionKey: key,
        message: adopted
          ? `the entry of ${key} cannot be used: ${shape.reason}; --repair replaces it with an entry for the transcript whose header names ${key}`
          : `the entry of ${key} cannot be used: ${shape.reason}; fix it by hand, or remove it with \`switchboard sessions delete ${key}\` (a transcript it had is then adopted again by --repair)`,
        repairable: adopted,
      });
      continue;
    }
    const file = doc.entryFile(entry);
    if (file === null || typeof entry.sessionId !== 'string') continue;
    const name = path.basename(file);
    if (doc.nonRegular.has(name) && (await lstatKind(file)) !== null) continue; // not-regular-file covers it
    const stats = await statOrNull(file);
    if (stats !== null && stats.size > 0) {
      checkHeaderAgainstEntry(doc, key, entry, doc.scans.get(name));
      continue;
    }
    if (stats === null && doc.plannedRepoints.has(key)) continue; // the orphan problem covers it
    if (stats === null && nothingRecordedYet(entry)) continue;
    if (stats !== null && doc.liveLocks.has(lockPathFor(file))) continue; // being created right now
    const deleted = (archives.get(name) ?? []).filter((a) => a.startsWith('deleted:')).map((a) => a.slice('deleted:'.length));
    const kind: DoctorProblemKind = stats === null ? 'missing-transcript' : 'empty-transcript';
    const what = stats === null ? `the transcript ${name} of ${key} does not exist` : `the transcript ${name} of ${key} is empty`;
    // A header must name a well-formed key (transcript-header.schema.json): for a key that is not
    // one (`AGENT:MAIN:MAIN`, a store-invalid finding of its own) a new transcript would be a new
    // problem that no repair can fix.
    const wellFormed = isWellFormedKey(key);
    const problem = doc.problem({
      kind,
      file,
      sessionKey: key,
      message:
        deleted.length > 0
          ? `${what}; it was archived as ${deleted[0]} (an interrupted deletion): finish it with \`switchboard sessions delete ${key}\`, or the session's next message puts it back`
          : wellFormed
            ? `${what}: --repair starts it again with a header and a note that the history was lost`
            : `${what}, and its key is not a session key (agent:<agentId>:<rest>): remove the entry with \`switchboard sessions delete '${key}'\` or fix the key by hand`,
      repairable: deleted.length === 0 && wellFormed,
    });
    if (doc.repair && deleted.length === 0 && wellFormed) await doc.attempt([problem], () => recreateTranscript(doc, key, entry, file));
  }
}

/**
 * A session whose every message still waits in its queue (or for the run that has just claimed
 * it), or was taken out of it with a report still in the outbox (a cancel), has no transcript
 * yet: its first record is written when its next drain or turn comes. That is no lost history —
 * unless the duplicate memory holds more ids than the queue and the outbox account for (a message
 * was recorded besides them: its transcript is gone).
 */
function nothingRecordedYet(entry: SessionEntry): boolean {
  const queue = Array.isArray(entry.queue) ? entry.queue : [];
  const reported = (Array.isArray(entry.outbox) ? entry.outbox : []).flatMap((item) => (Array.isArray(item.records) ? item.records : []));
  if (queue.length === 0 && reported.length === 0 && entry.activeRun === undefined) return false;
  const remembered = readRecentIds(entry.recentMessageIds).length;
  const accounted =
    queue.filter((item) => typeof item.messageId === 'string').length +
    reported.filter((record) => typeof (record as { data?: { messageId?: unknown } }).data?.messageId === 'string').length;
  return remembered <= accounted;
}

function isWellFormedKey(key: string): boolean {
  try {
    parseSessionKey(key);
    return true;
  } catch {
    return false;
  }
}

export function checkHeaderAgainstEntry(doc: StoreCheck, key: string, entry: SessionEntry, scan: TranscriptScan | undefined): void {
  const header = scan?.header;
  if (scan === undefined || header == null || scan.headerProblem !== null) return;
  const mismatch: string[] = [];
  if (header.id !== entry.sessionId) mismatch.push(`its header is for session ${header.id}, the entry's is ${entry.sessionId}`);
  if (typeof header.sessionKey === 'string' && header.sessionKey !== key) mismatch.push(`its header names ${header.sessionKey}`);
  if (mismatch.length === 0) return;
  doc.problem({ kind: 'invalid-header', file: scan.file, line: scan.headerLine ?? 1, sessionKey: key, message: `${key} names this transcript but ${mismatch.join(' and ')}`, repairable: false });
}

/** A new transcript for an entry that has none: header + a `custom` doctor note, one append. */
function recreateTranscript(doc: StoreCheck, key: string, judged: SessionEntry, file: string): Promise<RepairOutcome> {
  return doc.withTranscript(file, key, async (handle) => {
    const entry = (await readSessionStore(doc.location.storePath))[key];
    if (entry === undefined || entry.sessionId !== judged.sessionId) {
      throw new SwitchboardError('SESSION_BUSY', `the entry of ${key} changed meanwhile; run doctor again`);
    }
    const stats = await statOrNull(file);
    if (stats !== null && stats.size > 0) return { action: 'nothing to do: it exists now', changes: [] };
    const reason = stats === null ? 'missing' : 'empty';
    await appendEntries(
      file,
      [
        {
          type: 'custom',
          customType: 'doctor',
          data: { text: `the transcript of this session was ${reason}; switchboard doctor --repair started it again`, reason: `transcript-${reason}` },
        },
      ],
      { session: { sessionId: entry.sessionId, sessionKey: key, agentId: doc.location.agentId }, clock: doc.ctx.clock, handle },
    );
    return { action: 'started again with a header and a doctor note', changes: [{ action: 'created', file, sessionKey: key }] };
  });
}
