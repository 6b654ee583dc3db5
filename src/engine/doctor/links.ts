// Step: symlinks, FIFOs, sockets and folders where a store file belongs. A check never follows or
// opens them; --repair reads a link's target (a regular file of at most 64 MiB) to keep a copy of
// its bytes, then removes the name (never its target).

import { promises as fsp } from 'node:fs';
import path from 'node:path';
import { SwitchboardError } from '../../core/index.js';
import { TRANSCRIPT_SUFFIX, describeFileKind, fsyncFolder, lstatKind, withLock, type FileKind } from '../../store/index.js';
import { TOMBSTONE_NAME } from '../leftovers.js';
import { isSessionArtifact, namedAmong } from '../session-artifacts.js';
import { keepLinkTarget } from './files.js';
import type { DoctorChange, RepairOutcome } from './report.js';
import type { StoreCheck } from './store-check.js';

/**
 * Names the store reads or writes (sessions.json and its copies, transcripts and theirs), not
 * locks, and not OpenClaw's session artifacts: nothing of ours opens those (OpenClaw itself
 * refuses to write its trajectory pointer through a link). `named`: the transcripts the store names.
 */
function isStoreFileName(doc: StoreCheck, name: string, named: ReadonlySet<string>): boolean {
  const storeBase = path.basename(doc.location.storePath);
  if (name.endsWith('.lock') || TOMBSTONE_NAME.test(name) || isSessionArtifact(name, named)) return false;
  return name === storeBase || name.startsWith(`${storeBase}.`) || name.endsWith(TRANSCRIPT_SUFFIX) || name.includes(`${TRANSCRIPT_SUFFIX}.`);
}

/**
 * Reports every store name that is not a regular file. sessions.json itself is repaired with
 * the store (checkStoreFile); the others are moved aside here, before the transcripts are read,
 * so that an entry whose transcript was a link gets a fresh one below (checkEntries).
 */
export async function checkNonRegular(doc: StoreCheck): Promise<void> {
  const storeBase = path.basename(doc.location.storePath);
  const named = await namedAmong(doc.location, doc.store, [...doc.listing.others.map(({ name }) => name), ...doc.listing.dirs]);
  const found = [
    ...doc.listing.others,
    ...doc.listing.dirs.filter((name) => name === storeBase || name.endsWith(TRANSCRIPT_SUFFIX)).map((name) => ({ name, kind: 'directory' as FileKind })),
  ].filter(({ name }) => isStoreFileName(doc, name, named));
  for (const { name, kind } of found) {
    doc.nonRegular.add(name);
    if (name === storeBase) continue; // checkStoreFile reports and repairs it
    const file = doc.inside(name);
    const target = kind === 'symlink' ? await fsp.readlink(file).catch(() => null) : null;
    const problem = doc.problem({
      kind: 'not-regular-file',
      file,
      message: `${name} is ${describeFileKind(kind)}${target !== null ? ` to ${target}` : ''}, not a regular file: never followed or opened${kind === 'directory' ? '; move it away by hand' : '; --repair removes it, keeping a copy of the bytes a link points at'}`,
      repairable: kind !== 'directory',
    });
    if (doc.repair && kind !== 'directory') await doc.attempt([problem], () => removeNonRegular(doc, name));
  }
  await checkLockNames(doc);
}

/**
 * A lock is a folder (switchboard's) or a regular file (OpenClaw's lock file: a lock held by
 * another program, judged by the locks step). A link, FIFO or socket at the lock name of a store
 * file makes every write of that file STORE_CORRUPT until it goes. Nobody can hold such a "lock"
 * (the mkdir that takes one fails, and it is never read), so --repair removes the name (never what
 * a link points at) without waiting for anyone.
 */
async function checkLockNames(doc: StoreCheck): Promise<void> {
  const named = await namedAmong(doc.location, doc.store, doc.listing.others.map(({ name }) => name.slice(0, -'.lock'.length)));
  const found = doc.listing.others.filter(({ name }) => name.endsWith('.lock') && isStoreFileName(doc, name.slice(0, -'.lock'.length), named));
  for (const { name, kind } of found) {
    const file = doc.inside(name);
    const problem = doc.problem({
      kind: 'not-regular-file',
      file,
      message: `${name} is ${describeFileKind(kind)}, not a lock (a folder, or OpenClaw's lock file): writes of ${name.slice(0, -'.lock'.length)} fail until it is gone; --repair removes it`,
      repairable: true,
    });
    if (!doc.repair) continue;
    await doc.attempt([problem], async () => {
      const now = await lstatKind(file);
      if (now === null || now === 'directory' || now === 'file') return { action: `nothing to do: it is ${now === null ? 'gone' : now === 'file' ? 'a lock file now' : 'a lock folder now'}`, changes: [] };
      await fsp.unlink(file);
      await fsyncFolder(path.dirname(file));
      return { action: `removed the ${describeFileKind(now).replace(/^an? /, '')}`, changes: [{ action: 'removed', file }] };
    });
  }
}

/** Under the lock that guards the name: a copy of a link's target bytes is kept, then the name goes (never its target). */
function removeNonRegular(doc: StoreCheck, name: string): Promise<RepairOutcome> {
  const file = doc.inside(name);
  const guardedByStore = name.startsWith(`${path.basename(doc.location.storePath)}.`);
  const work = async (): Promise<RepairOutcome> => {
    const kind = await lstatKind(file);
    if (kind === null || kind === 'file') return { action: `nothing to do: it is ${kind === null ? 'gone' : 'a regular file now'}`, changes: [] };
    if (kind === 'directory') throw new SwitchboardError('STORE_CORRUPT', `${file} is a folder now; left it alone`, { hint: 'move it away by hand' });
    const changes: DoctorChange[] = [];
    const backup = kind === 'symlink' ? await keepLinkTarget(file, 'bak', doc.now()) : null;
    if (backup !== null) changes.push({ action: 'kept', file: backup, from: file });
    await fsp.unlink(file);
    await fsyncFolder(path.dirname(file));
    changes.push({ action: 'removed', file });
    return {
      action: `removed the ${describeFileKind(kind).replace(/^an? /, '')}${backup !== null ? `; the bytes it pointed at are kept as ${path.basename(backup)}` : ' (it held no bytes of its own)'}`,
      ...(backup !== null ? { backup } : {}),
      changes,
    };
  };
  if (guardedByStore) return withLock(doc.location.storePath, doc.storeLock(), work);
  if (name.endsWith(TRANSCRIPT_SUFFIX)) return doc.withTranscript(file, undefined, work);
  return work(); // archives and kept copies: nobody writes them
}
