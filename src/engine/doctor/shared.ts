// Keys that name one transcript (`shared-transcript`). The file stays with the key its header
// names; every other key of the group gets a transcript of its own: its own newest earlier
// transcript where one is left (the orphan step repoints it, see orphans.ts), else a new
// instance opened with a reset notice. Nothing is moved out of the shared file: which of its
// lines came from which key cannot be told, so they stay with the keeper.

import path from 'node:path';
import { SwitchboardError } from '../../core/index.js';
import { readSessionStore, sessionEntryProblem, transcriptSharing, type SessionStore } from '../../store/index.js';
import { rotateInstance } from '../sessions.js';
import type { DoctorChange, RepairOutcome } from './report.js';
import type { StoreCheck } from './store-check.js';

export interface SharedGroup {
  keys: string[];
  /** The transcript file name the group shares. */
  name: string;
  /**
   * The one key whose transcript's header names it (and its sessionId); null when no key or
   * more than one can claim the file, or another key's row is not usable: then only a person
   * can tell, and --repair leaves the group alone.
   */
  keeper: string | null;
  /** The keys that get a transcript of their own (empty without a keeper). */
  others: string[];
}

/** The groups of keys sharing a transcript in `store`, each with the key that keeps the file. */
export function sharedGroups(doc: StoreCheck, store: SessionStore): SharedGroup[] {
  return transcriptSharing(store)
    .groups()
    .map(({ keys, name }) => {
      const claimants = keys.filter((key) => headerNames(doc, store, key));
      const keeper = claimants.length === 1 ? claimants[0]! : null;
      const others = keeper === null ? [] : keys.filter((key) => key !== keeper);
      // A row of the wrong shape cannot be given a new instance: the person who fixes it decides.
      if (others.some((key) => sessionEntryProblem(store[key], doc.location.sessionsDir) !== null)) return { keys, name, keeper: null, others: [] };
      return { keys, name, keeper, others };
    });
}

/** Whether the transcript `key`'s entry names exists with a header naming `key` and the entry's sessionId. */
function headerNames(doc: StoreCheck, store: SessionStore, key: string): boolean {
  const entry = store[key]!;
  const file = doc.entryFile(entry);
  if (file === null) return false;
  const scan = doc.scans.get(path.basename(file));
  const header = scan?.header;
  return scan !== undefined && scan.headerProblem === null && header != null && header.sessionKey === key && header.id === entry.sessionId;
}

/**
 * Gives each other key of a group a transcript of its own, through the one rotation shell (the
 * record first: the new transcript with its notice exists before sessions.json names it). A key
 * that no longer shares (the orphan step gave it its own transcript again, or someone fixed the
 * row) is left as it is.
 */
export async function separateShared(doc: StoreCheck, group: SharedGroup): Promise<RepairOutcome> {
  const changes: DoctorChange[] = [];
  const done: string[] = [];
  for (const key of group.others) {
    const store = await readSessionStore(doc.location.storePath);
    const entry = Object.hasOwn(store, key) ? store[key] : undefined;
    if (entry === undefined || transcriptSharing(store).sharedWith(key).length === 0) continue;
    const outcome = await rotateInstance(doc.ctx, {
      location: doc.location,
      key,
      sessionId: entry.sessionId,
      file: null,
      wait: true,
      separatingFrom: group.keeper!,
      decide: () => ({ reason: 'shared-transcript' }),
      note: `this session's entry named the transcript of ${group.keeper}; switchboard doctor --repair gave it one of its own`,
      runId: 'doctor',
      skipUpkeep: true,
    });
    if (outcome.kind !== 'rotated') throw new SwitchboardError('SESSION_BUSY', `the entry of ${key} changed meanwhile; left it alone`, { hint: 'run doctor again' });
    const file = doc.entryFile(outcome.entry);
    if (file !== null) changes.push({ action: 'created', file, sessionKey: key });
    done.push(key);
  }
  const action =
    done.length === 0
      ? `nothing left to do: every key but ${group.keeper} has a transcript of its own now`
      : `${group.name} stays with ${group.keeper} (its header names it); ${done.join(', ')} started on a transcript of its own`;
  return { action, changes };
}
