// What the doctor's steps share while they check one store: the report they add to, what earlier
// steps found (the folder listing, live locks, transcript scans, sessions.json as it is now), the
// locks a repair takes, and how a repair's outcome is recorded on its problems.

import path from 'node:path';
import { asSwitchboardError } from '../../core/index.js';
import {
  TRANSCRIPT_SUFFIX,
  resolveInside,
  withLock,
  type LockHandle,
  type LockOptions,
  type SessionEntry,
  type SessionStore,
  type StoreLocation,
} from '../../store/index.js';
import { sessionLockOptions, type EngineContext } from '../context.js';
import { compactionCheckpointFiles } from '../session-artifacts.js';
import { transcriptFileOf } from '../session-list.js';
import type { FolderListing } from './files.js';
import type { DoctorProblem, DoctorStoreReport, RepairOutcome } from './report.js';
import type { SharedGroup } from './shared.js';
import type { TranscriptScan } from './transcript-scan.js';

/** The store lock is only ever held for a read-modify-write (as in sessions-store.ts). */
const STORE_LOCK_STALE_MS = 10_000;
const STORE_LOCK_MAX_HOLD_MS = 60_000;
const STORE_LOCK_ACQUIRE_MS = 30_000;

/** A transcript header that can be trusted to re-register its file. */
export interface UsableHeader {
  key: string;
  sessionId: string;
  startedAt: number | null;
}

export class StoreCheck {
  readonly report: DoctorStoreReport;
  readonly staleMs: number | undefined;
  /** Lock folders held by a live, in-time holder: their files may be mid-write. */
  readonly liveLocks = new Set<string>();
  listing: FolderListing = { files: [], dirs: [], others: [] };
  /** Names reported as not-regular-file: other checks leave them to that problem. */
  readonly nonRegular = new Set<string>();
  readonly scans = new Map<string, TranscriptScan>();
  /** sessions.json as it is now; null while it cannot be read. */
  store: SessionStore | null = null;
  /** sessions.json was restored or rebuilt in this run, so its entries may be one write behind. */
  storeRestored = false;
  /** Keys whose entry a check-only run would repoint to an orphan (their missing transcript is not reported twice). */
  plannedRepoints = new Set<string>();
  /** Keys whose entry is not an object and which an orphan's adoption replaces (their invalid-entry is repairable). */
  plannedAdoptions = new Set<string>();
  /** Keys sharing a transcript, as sessions.json was before any repair of this run (set by the orphan step). */
  sharedGroups: SharedGroup[] | null = null;
  /** How far the current step is (items done of total); the driver sets where it goes. */
  progress: (done: number, total: number) => void = () => undefined;

  constructor(
    readonly ctx: EngineContext,
    readonly location: StoreLocation,
    readonly repair: boolean,
  ) {
    this.report = {
      agentId: location.agentId,
      storePath: location.storePath,
      sessionsDir: location.sessionsDir,
      exists: false,
      sessions: null,
      transcripts: 0,
      problems: [],
      changes: [],
      warnings: [],
    };
    this.staleMs = ctx.config.session?.writeLock?.staleMs;
  }

  problem(problem: DoctorProblem): DoctorProblem {
    if (this.repair) problem.repaired = false;
    this.report.problems.push(problem);
    return problem;
  }

  /** Runs one repair for one or more problems and records its outcome on each. */
  async attempt(problems: DoctorProblem[], fix: () => Promise<RepairOutcome>): Promise<boolean> {
    try {
      const outcome = await fix();
      for (const problem of problems) {
        problem.repaired = true;
        problem.action = outcome.action;
        if (outcome.backup !== undefined) problem.backup = outcome.backup;
      }
      this.report.changes.push(...outcome.changes);
      return true;
    } catch (err) {
      const error = asSwitchboardError(err);
      for (const problem of problems) {
        problem.repaired = false;
        problem.error = { code: error.code, message: error.message };
      }
      return false;
    }
  }

  now(): number {
    return this.ctx.clock.now();
  }

  transcriptLock(sessionKey: string | undefined): LockOptions {
    return sessionLockOptions(this.ctx, { sessionKey, runId: 'doctor' });
  }

  /**
   * A transcript's write lock, then its store's lock: an ingest batch appends to an idle
   * transcript under the store lock alone (docs/write-path.md), so a repair that rewrites,
   * archives or judges a transcript holds both.
   */
  withTranscript<T>(file: string, sessionKey: string | undefined, fn: (handle: LockHandle) => Promise<T>): Promise<T> {
    return withLock(file, this.transcriptLock(sessionKey), (handle) => withLock(this.location.storePath, this.storeLock(), () => fn(handle)));
  }

  storeLock(): LockOptions {
    return {
      busyCode: 'STORE_BUSY',
      takeover: 'dead', // the registry lock, like updateSessionStore's: never from a live holder
      acquireTimeoutMs: this.ctx.config.session?.writeLock?.acquireTimeoutMs ?? STORE_LOCK_ACQUIRE_MS,
      staleMs: STORE_LOCK_STALE_MS,
      maxHoldMs: STORE_LOCK_MAX_HOLD_MS,
      owner: { runId: 'doctor' },
    };
  }

  inside(name: string): string {
    return resolveInside(this.location.sessionsDir, name);
  }

  /**
   * File names entries point at (their sessionFile, and `<sessionId>.jsonl`), and the files their
   * compaction checkpoints list: OpenClaw restores from those, so none is an orphan to archive.
   */
  referencedNames(store: SessionStore): Map<string, string> {
    const names = new Map<string, string>();
    for (const [key, entry] of Object.entries(store)) {
      for (const name of compactionCheckpointFiles(entry)) names.set(name, key);
      const file = this.entryFile(entry);
      if (file !== null) names.set(path.basename(file), key);
      if (typeof entry.sessionId === 'string') names.set(`${entry.sessionId}${TRANSCRIPT_SUFFIX}`, key);
    }
    return names;
  }

  entryFile(entry: SessionEntry): string | null {
    try {
      return transcriptFileOf(this.location, entry);
    } catch {
      return null; // an unusable sessionFile/sessionId: store-invalid says so
    }
  }

  /** The header's address, if it can be trusted to re-register this file; else why not. */
  usableHeader(scan: TranscriptScan): UsableHeader | string {
    const header = scan.header;
    if (header === null || scan.headerProblem !== null) return 'it has no valid header';
    const key = header.sessionKey;
    if (typeof key !== 'string') return 'its header names no session key';
    const agentOfKey = /^agent:([^:]+):/.exec(key)?.[1];
    if (agentOfKey !== this.location.agentId) return `its header's key ${key} belongs to another agent`;
    if (header.agentId !== undefined && header.agentId !== this.location.agentId) return `its header names agent ${header.agentId}`;
    const startedAt = Date.parse(header.timestamp);
    return { key, sessionId: header.id, startedAt: Number.isNaN(startedAt) ? null : startedAt };
  }
}

export function entryFromHeader(scan: TranscriptScan, usable: UsableHeader): SessionEntry {
  const entry: SessionEntry = { sessionId: usable.sessionId, sessionFile: scan.name, updatedAt: Math.max(0, Math.floor(scan.mtimeMs)) };
  if (usable.startedAt !== null && usable.startedAt >= 0) entry.sessionStartedAt = usable.startedAt;
  return entry;
}

/** Header time first (the instance's start), file time to break ties, then the name. */
export function isNewer(a: TranscriptScan, aHeader: UsableHeader, b: TranscriptScan, bHeader: UsableHeader): boolean {
  const at = aHeader.startedAt ?? -1;
  const bt = bHeader.startedAt ?? -1;
  if (at !== bt) return at > bt;
  if (a.mtimeMs !== b.mtimeMs) return a.mtimeMs > b.mtimeMs;
  return a.name > b.name;
}

export function numberOr(value: unknown, fallback: number): number {
  return typeof value === 'number' && Number.isFinite(value) ? value : fallback;
}
