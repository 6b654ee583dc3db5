// Step: transcripts no entry names. One with a usable header is adopted (its key has no entry, or
// one that is not an object),
// becomes its key's current instance again (the entry names a transcript that is gone and is
// older), or is archived as <file>.reset.<ts> (an older instance a rotation left behind).

import { promises as fsp } from 'node:fs';
import path from 'node:path';
import { SwitchboardError, asSwitchboardError } from '../../core/index.js';
import { archiveFile, fsyncFolder, isNotAnObject, readRemovedMemories, readSessionStore, transcriptSharing, updateSessionStore, type SessionEntry } from '../../store/index.js';
import { storeWriteOptions } from '../context.js';
import { describeError, statOrNull } from './files.js';
import type { DoctorChangeAction, DoctorProblem, RepairOutcome } from './report.js';
import { recentIdsRecordedIn, withRecorded } from './recorded-ids.js';
import { entryFromHeader, isNewer, numberOr, type StoreCheck, type UsableHeader } from './store-check.js';
import { sharedGroups } from './shared.js';
import type { TranscriptScan } from './transcript-scan.js';

interface OrphanPlan {
  scan: TranscriptScan;
  usable: UsableHeader | null;
  /** Why the header cannot be used, when it cannot. */
  unusable?: string;
  decision: 'adopt' | 'repoint' | 'archive' | 'none';
  /** repoint: the entry's sessionId when judged. archive: the current sessionId of the key. */
  currentSessionId?: string;
  /** repoint: the transcript the entry named until now (none when that is another key's, see separatesFrom). */
  replacedFile?: string;
  /** repoint: the key's entry names this key's transcript (shared-transcript); the orphan becomes its own again. */
  separatesFrom?: string;
  problem?: DoctorProblem;
}

export async function checkOrphans(doc: StoreCheck): Promise<void> {
  const store = doc.store!;
  const referenced = doc.referencedNames(store);
  const plans: OrphanPlan[] = [];
  for (const [name, scan] of doc.scans) {
    if (scan.removed || referenced.has(name)) continue;
    // Nothing but damage: the torn-tail / malformed-lines problems cover it (a repair moves it aside).
    if (scan.size > 0 && scan.records === 0) continue;
    if (scan.size === 0) {
      const problem = doc.problem({ kind: 'empty-transcript', file: scan.file, message: 'an empty file that no entry names (a writer died right after creating it)', repairable: true });
      if (doc.repair) await doc.attempt([problem], () => removeEmptyOrphan(doc, scan));
      continue;
    }
    const usable = doc.usableHeader(scan);
    plans.push(typeof usable === 'string' ? { scan, usable: null, unusable: usable, decision: 'none' } : { scan, usable, decision: 'none' });
  }
  // Per key, the newest instance is the candidate for the entry; the others were replaced.
  const byKey = new Map<string, OrphanPlan[]>();
  for (const plan of plans) if (plan.usable !== null) byKey.set(plan.usable.key, [...(byKey.get(plan.usable.key) ?? []), plan]);
  const sharing = transcriptSharing(store);
  doc.sharedGroups = sharedGroups(doc, store);
  const keeperOf = new Map<string, string>();
  for (const shared of doc.sharedGroups) for (const other of shared.others) keeperOf.set(other, shared.keeper!);
  for (const [key, group] of byKey) {
    group.sort((a, b) => (isNewer(a.scan, a.usable!, b.scan, b.usable!) ? -1 : 1));
    const entry = Object.hasOwn(store, key) ? store[key] : undefined;
    const [newest, ...older] = group as [OrphanPlan, ...OrphanPlan[]];
    const keeper = keeperOf.get(key);
    if (keeper !== undefined && entry !== undefined) {
      // Its entry names the transcript of the key that keeps it (shared-transcript); its own
      // newest transcript is what it should name again. The keeper's file is not archived.
      newest.decision = 'repoint';
      newest.currentSessionId = entry.sessionId;
      newest.separatesFrom = keeper;
      for (const plan of older) Object.assign(plan, { decision: 'archive', currentSessionId: newest.usable!.sessionId });
      continue;
    }
    if (sharing.sharedWith(key).length > 0) {
      // Its key's entry names another key's transcript, and which key the shared file is for
      // cannot be told: this file may well be the one it should name. Only a person can tell;
      // archiving it now could hide the right answer.
      for (const plan of group) plan.unusable = `its key's entry shares a transcript with ${sharing.sharedWith(key).join(', ')} (shared-transcript)`;
      continue;
    }
    // An entry that is not even an object holds nothing to keep: adopting replaces it.
    if (entry === undefined || isNotAnObject(entry)) {
      newest.decision = 'adopt';
      if (entry !== undefined) doc.plannedAdoptions.add(key);
    }
    else if (await shouldRepoint(doc, entry, newest.usable!)) {
      newest.decision = 'repoint';
      newest.currentSessionId = entry.sessionId;
      newest.replacedFile = doc.entryFile(entry) ?? undefined;
    } else {
      newest.decision = 'archive';
      newest.currentSessionId = entry.sessionId;
    }
    for (const plan of older) {
      plan.decision = 'archive';
      plan.currentSessionId = newest.decision === 'archive' ? entry?.sessionId : newest.usable!.sessionId;
    }
  }
  for (const plan of plans) {
    const { scan, usable } = plan;
    const what = usable === null ? '' : ` (header: ${usable.key}, session ${usable.sessionId})`;
    const message =
      plan.decision === 'adopt'
        ? `no entry names this transcript${what}; its key has ${usable !== null && doc.plannedAdoptions.has(usable.key) ? 'an entry that is not an object' : 'no entry'}: --repair adopts it`
        : plan.decision === 'repoint' && plan.separatesFrom !== undefined
          ? `no entry names this transcript${what}; its key's entry names the transcript of ${plan.separatesFrom} (shared-transcript): --repair makes this, its own newest transcript, its current instance again`
        : plan.decision === 'repoint'
          ? `no entry names this transcript${what}; it is newer than the instance the entry names, whose transcript is ${plan.replacedFile && (await statOrNull(plan.replacedFile)) !== null ? 'older' : 'gone'}: --repair makes it the current instance again`
          : plan.decision === 'archive'
            ? `no entry names this transcript${what}; it is not the key's current instance (that is ${plan.currentSessionId ?? '?'}): --repair archives it as .reset.<ts>`
            : `no entry names this transcript and ${plan.unusable ?? 'its header cannot be used'}: left as it is`;
    plan.problem = doc.problem({ kind: 'orphan-transcript', file: scan.file, ...(usable ? { sessionKey: usable.key } : {}), message, repairable: plan.decision !== 'none' });
  }
  if (!doc.repair) {
    doc.plannedRepoints = new Set(plans.filter((p) => p.decision === 'repoint').map((p) => p.usable!.key));
    return;
  }
  const repointed = await registerOrphans(doc, plans.filter((p) => p.decision === 'adopt' || p.decision === 'repoint'));
  for (const plan of plans.filter((p) => p.decision === 'archive')) {
    await doc.attempt([plan.problem!], () => archiveOrphan(doc, plan.scan.file, plan.usable?.key));
  }
  // The instance a repoint replaced is now what a rotation would have archived.
  for (const plan of repointed) {
    if (plan.replacedFile === undefined || (await statOrNull(plan.replacedFile)) === null) continue;
    try {
      const outcome = await archiveOrphan(doc, plan.replacedFile, plan.usable!.key);
      doc.report.changes.push(...outcome.changes);
      plan.problem!.action += `; the replaced instance was ${outcome.action}`;
    } catch (err) {
      plan.problem!.action += `; the replaced instance ${path.basename(plan.replacedFile)} could not be archived (${describeError(err)})`;
    }
  }
  doc.store = await readSessionStore(doc.location.storePath);
}

/**
 * Whether an orphan should become its key's current instance again: it is strictly newer than
 * the instance the entry names, and that instance's transcript is gone — or sessions.json was
 * just restored from a copy that may be one write (one rotation) behind.
 */
async function shouldRepoint(doc: StoreCheck, entry: SessionEntry, orphan: UsableHeader): Promise<boolean> {
  if (orphan.startedAt === null) return false;
  const entryStart = typeof entry.sessionStartedAt === 'number' ? entry.sessionStartedAt : undefined;
  if (await transcriptMissing(doc, entry)) return entryStart === undefined || orphan.startedAt > entryStart;
  return doc.storeRestored && entryStart !== undefined && orphan.startedAt > entryStart;
}

async function transcriptMissing(doc: StoreCheck, entry: SessionEntry): Promise<boolean> {
  const file = doc.entryFile(entry);
  return file !== null && (await statOrNull(file)) === null;
}

/** Adoptions and repoints in ONE store update; each re-checked against the file read in the lock. */
async function registerOrphans(doc: StoreCheck, plans: OrphanPlan[]): Promise<OrphanPlan[]> {
  if (plans.length === 0) return [];
  // Read before the store lock is taken: the new entry remembers what its transcript recorded
  // lately, and what a removed entry of its key left in sessions.json.removed.
  const removed = readRemovedMemories(doc.location.storePath);
  const recorded = new Map<OrphanPlan, string>();
  for (const plan of plans) {
    const ids = [await recentIdsRecordedIn(doc, plan.scan), removed.get(plan.usable!.key)?.recentMessageIds ?? ''].filter((part) => part !== '');
    recorded.set(plan, ids.join('\n'));
  }
  const withMemory = (plan: OrphanPlan, entry: SessionEntry): SessionEntry => {
    const ids = recorded.get(plan)!;
    return ids === '' ? entry : { ...entry, recentMessageIds: withRecorded(entry.recentMessageIds, ids, doc.now()) };
  };
  let applied: Set<OrphanPlan>;
  try {
    applied = await updateSessionStore(
      doc.location.storePath,
      (store) => {
        const done = new Set<OrphanPlan>();
        for (const plan of plans) {
          const { key } = plan.usable!;
          const entry = Object.hasOwn(store, key) ? store[key] : undefined;
          if (plan.decision === 'adopt' && (entry === undefined || isNotAnObject(entry))) {
            store[key] = withMemory(plan, entryFromHeader(plan.scan, plan.usable!));
            done.add(plan);
          } else if (plan.decision === 'repoint' && entry !== undefined && entry.sessionId === plan.currentSessionId) {
            const fresh = entryFromHeader(plan.scan, plan.usable!);
            store[key] = withMemory(plan, { ...entry, ...fresh, updatedAt: Math.max(numberOr(entry.updatedAt, 0), fresh.updatedAt) });
            done.add(plan);
          }
        }
        return done;
      },
      // No enforce upkeep in this write (as for `sessions cleanup`): it would cap the adopted
      // entry away again at once, without archiving its file, and the repair would never
      // converge. The next ordinary write applies the cap and archives what it removes.
      storeWriteOptions(doc.ctx, { skipUpkeep: true }),
    );
  } catch (err) {
    const error = asSwitchboardError(err);
    for (const plan of plans) Object.assign(plan.problem!, { repaired: false, error: { code: error.code, message: error.message } });
    return [];
  }
  for (const plan of plans) {
    const problem = plan.problem!;
    if (applied.has(plan)) {
      const action: DoctorChangeAction = plan.decision === 'adopt' ? 'adopted' : 'repointed';
      problem.repaired = true;
      problem.action = plan.decision === 'adopt' ? `adopted: ${plan.usable!.key} now names it` : `${plan.usable!.key} names it again`;
      doc.report.changes.push({ action, file: plan.scan.file, sessionKey: plan.usable!.key });
    } else {
      problem.repaired = false;
      problem.error = { code: 'SESSION_BUSY', message: `the entry of ${plan.usable!.key} changed meanwhile; run doctor again` };
    }
  }
  return plans.filter((plan) => plan.decision === 'repoint' && applied.has(plan));
}

/** An older instance left behind: archived as `.reset.<ts>` under its lock, if still unnamed. */
function archiveOrphan(doc: StoreCheck, file: string, sessionKey: string | undefined): Promise<RepairOutcome> {
  const name = path.basename(file);
  return doc.withTranscript(file, sessionKey, async () => {
    const referenced = doc.referencedNames(await readSessionStore(doc.location.storePath));
    if (referenced.has(name)) {
      throw new SwitchboardError('SESSION_BUSY', `${referenced.get(name)} names ${name} now; left it alone`, { hint: 'run doctor again' });
    }
    const archived = await archiveFile(file, 'reset', doc.now());
    if (archived === null) return { action: 'nothing to do: it is gone', changes: [] };
    return { action: `archived as ${path.basename(archived)}`, changes: [{ action: 'archived', file: archived, from: file }] };
  });
}

function removeEmptyOrphan(doc: StoreCheck, scan: TranscriptScan): Promise<RepairOutcome> {
  return doc.withTranscript(scan.file, undefined, async () => {
    const stats = await statOrNull(scan.file);
    const referenced = doc.referencedNames(await readSessionStore(doc.location.storePath));
    if (stats === null) return { action: 'nothing to do: it is gone', changes: [] };
    if (stats.size !== 0 || referenced.has(scan.name)) {
      throw new SwitchboardError('SESSION_BUSY', `${scan.name} is in use now; left it alone`, { hint: 'run doctor again' });
    }
    await fsp.unlink(scan.file);
    await fsyncFolder(path.dirname(scan.file));
    return { action: 'removed (it held no bytes)', changes: [{ action: 'removed', file: scan.file }] };
  });
}
