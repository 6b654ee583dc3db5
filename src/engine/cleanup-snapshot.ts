// The stat-only snapshot of a store that policy/ plans cleanup on, shared by `sessions cleanup`,
// maintain and the cleanup on write: one readdir and a stat per file (contents are never read).

import { promises as fsp, type Dirent } from 'node:fs';
import path from 'node:path';
import { errnoOf, inPool, ioError } from '../core/index.js';
import type { EntrySnapshot, MaintenanceSnapshot, ProtectedKey } from '../policy/index.js';
import {
  LOCK_SUFFIX,
  TRANSCRIPT_SUFFIX,
  parseArchiveName,
  parseKeptCopyName,
  readSessionStore,
  transcriptSharing,
  type SessionEntry,
  type SessionStore,
  type StoreLocation,
} from '../store/index.js';
import { queueBusyKeys } from './queue.js';
import { isSessionArtifact, storeReferences, transcriptNameOf } from './session-artifacts.js';

/** Files stat-ed at once while building a snapshot: enough to hide latency, few file handles. */
const STAT_CONCURRENCY = 64;

/**
 * Keys that have a run in progress or queued work; by default the durable queue's
 * `queueBusyKeys` (held transcript locks are found by the snapshot itself).
 */
export type BusyKeysProvider = (location: StoreLocation) => Promise<readonly ProtectedKey[]>;

/** The raw entry values the apply step compares against to see that a row did not change. */
export interface EntryIdentity {
  sessionId: unknown;
  updatedAt: unknown;
}

export interface BuiltSnapshot {
  snapshot: MaintenanceSnapshot;
  /** key → sessionId/updatedAt exactly as read. */
  identities: Map<string, EntryIdentity>;
}

export interface SnapshotOptions {
  busyKeys?: BusyKeysProvider;
  /** The store as it stands (the write path's upkeep, under the store lock); read from disk when absent. */
  store?: SessionStore;
  onProgress?: (done: number, total: number) => void;
}

/**
 * The transcripts among a folder's file names that no entry names: archives aside, and OpenClaw's
 * session artifacts aside (a trajectory or checkpoint file is no transcript), and a file a
 * compaction checkpoint lists aside (OpenClaw restores from it).
 */
export function unnamedTranscripts(location: StoreLocation, store: SessionStore, fileNames: readonly string[]): string[] {
  const references = storeReferences(location, store);
  return fileNames.filter((name) => name.endsWith(TRANSCRIPT_SUFFIX) && parseArchiveName(name) === null && !isSessionArtifact(name, references.transcripts) && !references.isReferenced(name));
}

/**
 * Keys whose entry shares its transcript with another key (not a cron run alias): `unusable`,
 * never removed — the file they name is another session's too.
 */
export function sharedKeysIn(store: SessionStore): ProtectedKey[] {
  return transcriptSharing(store).groups().flatMap((group) => group.keys.map((key): ProtectedKey => ({ key, reason: 'unusable' })));
}

function modelOf(entry: SessionEntry): string | null {
  const model = entry.modelOverride ?? entry.model;
  return typeof model === 'string' ? model : null;
}

/**
 * One readdir of the sessions folder plus a stat per transcript/archive (bounded concurrency):
 * what exists, how big it is, which transcripts are locked and which files nobody references.
 */
export async function buildMaintenanceSnapshot(location: StoreLocation, options: SnapshotOptions = {}): Promise<BuiltSnapshot> {
  const store = options.store ?? (await readSessionStore(location.storePath));
  const storeFileName = path.basename(location.storePath);
  let dirents: Dirent[] = [];
  try {
    dirents = await fsp.readdir(location.sessionsDir, { withFileTypes: true });
  } catch (err) {
    if (errnoOf(err) !== 'ENOENT') throw ioError(`cannot list ${location.sessionsDir}`, err, { path: location.sessionsDir });
  }
  const files = new Set<string>();
  const locked = new Set<string>();
  for (const dirent of dirents) {
    // A folder is switchboard's lock, a regular file OpenClaw's (store/lock-owner.ts): either way held.
    if ((dirent.isDirectory() || dirent.isFile()) && dirent.name.endsWith(LOCK_SUFFIX)) locked.add(dirent.name.slice(0, -LOCK_SUFFIX.length));
    else if (dirent.isFile()) files.add(dirent.name);
  }

  const identities = new Map<string, EntryIdentity>();
  const entries: EntrySnapshot[] = [];
  const references = storeReferences(location, store);
  for (const [key, entry] of Object.entries(store)) {
    const name = transcriptNameOf(location, entry);
    identities.set(key, { sessionId: entry.sessionId, updatedAt: entry.updatedAt });
    entries.push({
      key,
      sessionId: String(entry.sessionId),
      updatedAt: typeof entry.updatedAt === 'number' && Number.isFinite(entry.updatedAt) ? entry.updatedAt : null,
      pinned: entry.pinned === true,
      model: modelOf(entry),
      transcript: { name, exists: name !== null && files.has(name), bytes: 0 },
    });
  }

  const archives: MaintenanceSnapshot['archives'][number][] = [];
  const unreferenced: MaintenanceSnapshot['unreferenced'][number][] = [];
  const storeBackups: MaintenanceSnapshot['storeBackups'][number][] = [];
  const backupPattern = new RegExp(`^${storeFileName.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\\.bak\\.(\\d+)$`);
  const toStat: { name: string; apply: (size: number, mtimeMs: number) => void }[] = [];
  for (const name of files) {
    const archive = parseArchiveName(name);
    // An archive- or copy-shaped name that an entry names is that entry's file: kept, not counted.
    if ((archive !== null || parseKeptCopyName(name) !== null) && references.isReferenced(name)) continue;
    if (archive !== null) {
      toStat.push({ name, apply: (bytes) => archives.push({ name, reason: archive.reason, archivedAt: archive.archivedAt, bytes }) });
      continue;
    }
    // doctor's kept originals fall under the same retention (and disk budget) as archives.
    const kept = parseKeptCopyName(name);
    if (kept !== null) {
      toStat.push({ name, apply: (bytes) => archives.push({ name, reason: kept.tag, archivedAt: kept.keptAt, bytes }) });
      continue;
    }
    const backup = backupPattern.exec(name);
    if (backup !== null) {
      toStat.push({ name, apply: (bytes) => storeBackups.push({ name, createdAt: Number(backup[1]), bytes }) });
      continue;
    }
    // A transcript nobody references and nobody holds: an orphan only the disk budget removes. So
    // is an OpenClaw artifact (trajectory, checkpoint) of an instance no entry names: OpenClaw's
    // own budget removes those too; one of a live entry is kept (session-artifacts.ts).
    // An unusable entry's file is its own too (storeReferences), not an orphan.
    if ((name.endsWith(TRANSCRIPT_SUFFIX) || isSessionArtifact(name, references.transcripts)) && !references.isReferenced(name) && !locked.has(name)) {
      toStat.push({ name, apply: (bytes, mtimeMs) => unreferenced.push({ name, bytes, mtimeMs }) });
    }
  }
  const byName = new Map<string, EntrySnapshot[]>();
  for (const entry of entries) {
    if (entry.transcript.exists) {
      const list = byName.get(entry.transcript.name!) ?? [];
      list.push(entry);
      byName.set(entry.transcript.name!, list);
    }
  }
  for (const [name, list] of byName) {
    toStat.push({
      name,
      apply: (bytes) => {
        for (const entry of list) entry.transcript.bytes = bytes;
      },
    });
  }

  let done = 0;
  // The start counts too: a display decides from the total whether there is much to do.
  options.onProgress?.(0, toStat.length);
  await inPool(toStat, STAT_CONCURRENCY, async (item) => {
    const file = path.join(location.sessionsDir, item.name);
    try {
      const stats = await fsp.stat(file);
      item.apply(stats.size, stats.mtimeMs);
    } catch (err) {
      // Gone between readdir and stat (archived or removed by someone else): treat as missing.
      if (errnoOf(err) !== 'ENOENT') throw ioError(`cannot stat ${file}`, err, { path: file });
      for (const entry of byName.get(item.name) ?? []) entry.transcript.exists = false;
    }
    done += 1;
    if (done % 500 === 0) options.onProgress?.(done, toStat.length);
  });

  let storeBytes = 0;
  try {
    storeBytes = (await fsp.stat(location.storePath)).size;
  } catch (err) {
    if (errnoOf(err) !== 'ENOENT') throw ioError(`cannot stat ${location.storePath}`, err, { path: location.storePath });
  }

  const protectedKeys: ProtectedKey[] = [];
  for (const entry of entries) {
    if (entry.transcript.name !== null && locked.has(entry.transcript.name)) protectedKeys.push({ key: entry.key, reason: 'locked' });
  }
  // Running and queued sessions (the durable queue in the entries) are protected like locked ones.
  protectedKeys.push(...(await (options.busyKeys ?? queueBusyKeys)(location)));
  protectedKeys.push(...sharedKeysIn(store));

  // Sorted so that the plan (and its JSON) does not depend on readdir order.
  archives.sort((a, b) => (a.name < b.name ? -1 : 1));
  unreferenced.sort((a, b) => (a.name < b.name ? -1 : 1));
  storeBackups.sort((a, b) => (a.name < b.name ? -1 : 1));
  return { snapshot: { storeFileName, storeBytes, entries, archives, unreferenced, storeBackups, protectedKeys }, identities };
}

