// Entries that name one transcript: two keys with the same sessionId (or the same sessionFile)
// would append into each other's conversation, and a reset or delete of one would archive the
// other's history. Such an entry is STORE_CORRUPT for every write of it (and doctor's
// `shared-transcript`), like an entry of the wrong shape.
//
// One sharing is by design: OpenClaw runs an isolated cron job as `<job key>:run:<sessionId>`, a
// second key for the run whose entry is a copy of the job's entry — same sessionId, same file
// (test/fixtures/openclaw-store). That pair shares legitimately and keeps working as it always did.

import { SwitchboardError } from '../core/index.js';
import { THREAD_INFIX, TRANSCRIPT_SUFFIX } from './paths.js';
import { sessionEntryProblem, type SessionStore } from './session-entry.js';

/** `agent:<id>:cron:<job>:run:<sessionId>`: the job key and the run's sessionId. */
const CRON_RUN_ALIAS = /^(agent:[^:]+:cron:.+):run:([^:]+)$/;

/**
 * The other key of an OpenClaw cron job/run pair that `key` (at instance `sessionId`) belongs
 * to, or null: a run alias's job key, or a job key's run alias for its current instance.
 */
function cronRunPartner(key: string, sessionId: string): string | null {
  const alias = CRON_RUN_ALIAS.exec(key);
  if (alias !== null) return alias[2] === sessionId ? alias[1]! : null;
  return /^agent:[^:]+:cron:./.test(key) ? `${key}:run:${sessionId}` : null;
}

/** The transcript file name an entry names, without the full shape check (the one entryTranscriptName gives a checked entry). */
function nameOf(sessionId: string, sessionFile: unknown): string {
  if (typeof sessionFile !== 'string') return `${sessionId}${TRANSCRIPT_SUFFIX}`;
  const slash = sessionFile.lastIndexOf('/');
  return slash < 0 ? sessionFile : sessionFile.slice(slash + 1);
}

/** Which keys of one store share a transcript or a sessionId with which others. */
export interface TranscriptSharing {
  /** The keys `key` shares its transcript or sessionId with, its cron run partner aside (usually none). */
  sharedWith(key: string): string[];
  /** Every group of keys that share, each once (doctor). */
  groups(): { keys: string[]; name: string }[];
}

/** A map value: one key (the usual case, no list allocated) or several. */
type Keys = string | string[];

function add(map: Map<string, Keys>, value: string, key: string): void {
  const keys = map.get(value);
  if (keys === undefined) map.set(value, key);
  else if (typeof keys === 'string') map.set(value, [keys, key]);
  else keys.push(key);
}

function listOf(keys: Keys | undefined): readonly string[] {
  return keys === undefined ? [] : typeof keys === 'string' ? [keys] : keys;
}

/**
 * The index of one store as read: one pass, built once per read (ingest builds it once per round,
 * not per message). Only entries with a string sessionId take part; a row of any other shape is
 * refused by the shape check anyway. Every entry is filed by sessionId; by file name only those
 * whose sessionFile is a thread transcript (`-topic-`): a usable entry's file is `<id>.jsonl` or
 * `<id>-topic-<t>.jsonl`, so two of them can only name one file under different sessionIds when
 * one is a thread name — and the usual entry costs one map insert.
 */
export function transcriptSharing(store: SessionStore): TranscriptSharing {
  const byId = new Map<string, Keys>();
  const byThreadName = new Map<string, Keys>();
  for (const key of Object.keys(store)) {
    const entry = store[key]!;
    const sessionId = entry.sessionId;
    if (typeof sessionId !== 'string') continue;
    add(byId, sessionId, key);
    const file = entry.sessionFile;
    if (typeof file === 'string' && file.includes(THREAD_INFIX)) add(byThreadName, nameOf(sessionId, file), key);
  }
  const sharedWith = (key: string): string[] => {
    const entry = Object.hasOwn(store, key) ? store[key] : undefined;
    const sessionId = entry?.sessionId;
    if (entry === undefined || typeof sessionId !== 'string') return [];
    const sameId = byId.get(sessionId);
    if (typeof sameId === 'string' && byThreadName.size === 0) return []; // the common case: only itself
    const name = nameOf(sessionId, entry.sessionFile);
    // The same sessionId; a thread file of the same name; entries whose own `<id>.jsonl` it is.
    const candidates = [...listOf(sameId), ...listOf(byThreadName.get(name))];
    if (name.endsWith(TRANSCRIPT_SUFFIX)) candidates.push(...listOf(byId.get(name.slice(0, -TRANSCRIPT_SUFFIX.length))));
    const partner = cronRunPartner(key, sessionId);
    const others = new Set<string>();
    for (const other of candidates) if (other !== key && other !== partner) others.add(other);
    return [...others].sort();
  };
  return {
    sharedWith,
    groups: () => {
      const seen = new Set<string>();
      const groups: { keys: string[]; name: string }[] = [];
      for (const key of Object.keys(store)) {
        if (seen.has(key)) continue;
        const others = sharedWith(key);
        if (others.length === 0) continue;
        const keys = [key, ...others].sort();
        for (const member of keys) seen.add(member);
        const entry = store[key]!;
        groups.push({ keys, name: nameOf(entry.sessionId, entry.sessionFile) });
      }
      return groups;
    },
  };
}

/** STORE_CORRUPT for an entry that shares its transcript: nothing is written or archived for it. */
export function sharedTranscriptError(storePath: string, sessionKey: string, sharedWith: readonly string[]): SwitchboardError {
  const shown = (key: string): string => (key.length > 200 ? `${key.slice(0, 197)}...` : key);
  return new SwitchboardError(
    'STORE_CORRUPT',
    `the entry of ${shown(sessionKey)} in ${storePath} cannot be used: it names the same transcript (sessionId or sessionFile) as ${sharedWith.map(shown).join(', ')}; nothing was written, and it was left as it is`,
    {
      hint: 'run `switchboard doctor` to see every such pair; give one of them its own sessionId and sessionFile in sessions.json, or remove one of the rows by hand',
      details: { path: storePath, sessionKey, sharedWith: [...sharedWith] },
    },
  );
}

/** Throws STORE_CORRUPT when `key` shares its transcript with another key (the cron run alias aside). */
export function checkNotShared(storePath: string, store: SessionStore, key: string, sharing: TranscriptSharing = transcriptSharing(store)): void {
  const others = sharing.sharedWith(key);
  if (others.length > 0) throw sharedTranscriptError(storePath, key, others);
}

/**
 * Whether the entry of `key` can be used at all: it has the shape the code relies on and names a
 * transcript of its own. The one test behind every reader that skips unusable rows (drains,
 * resumed queues, due resets); writers throw instead (checkSessionEntry, checkNotShared).
 */
export function isUsableEntry(store: SessionStore, key: string, sessionsDir: string, sharing: TranscriptSharing = transcriptSharing(store)): boolean {
  return sessionEntryProblem(store[key], sessionsDir) === null && sharing.sharedWith(key).length === 0;
}
