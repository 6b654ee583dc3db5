// `switchboard doctor`: checks the config, every store file against store-format's schemas, each
// transcript line by line, references between them, locks and leftovers; `repair` fixes what it
// can — never losing a complete record, always keeping the original bytes next to the file.
//
// Checking writes nothing. Repairs run in this order per store, each one under the lock that
// guards its file, so that they are safe against a running `ingest`/`serve`:
//   1. stale locks (stale, dead holder, past max hold) are released through releaseLock(), which
//      refuses a live in-time holder; tombstones left by a killed releaser are removed;
//   2. leftover temp files (sessions.json.<n> of write-file-atomic, sessions.json.bak.tmp, our own
//      <transcript>.doctor-<pid>-<hex>.tmp) older than a minute whose lock is free are removed:
//      they never held committed data (the committed copy is the file they were meant to replace);
//   3. a corrupt sessions.json: its bytes are kept as sessions.json.corrupt-<ts> (hard link), then
//      it is restored from sessions.json.bak if that parses and validates, else rebuilt from the
//      transcript headers, and written through the store's atomic-replace seam under the store lock;
//   4. a damaged transcript (torn tail, malformed lines) is rewritten under its session write lock
//      through temp + fsync + rename with every line that parses as a record, byte for byte; the
//      original is kept as <file>.bak-<ts> (hard link to the old inode);
//   5. orphaned transcripts with a usable header are adopted (their key has no entry), become the
//      current instance again (their key's entry names a transcript that is gone and is older), or
//      are archived as <file>.reset.<ts> (an older instance a rotation left behind);
//   0. a symlink, FIFO or socket where a store file belongs is never followed or opened: a link's
//      target bytes (when it is a regular file) are COPIED to <file>.bak-<ts> (sessions.json:
//      .corrupt-<ts>), then the name is removed — sessions.json is replaced by its restored copy
//      in one rename — so nothing outside the state dir is ever written; folders are reported only;
//   6. an entry whose transcript is missing (or empty) gets a new transcript: the header and one
//      `custom` entry (customType "doctor") saying that the history was lost — exactly what the
//      next message would create, plus a visible note. A transcript archived as `.deleted.<ts>`
//      means a deletion was interrupted: reported only, `sessions delete KEY` finishes it.

import { randomBytes } from 'node:crypto';
import { constants as fsConstants, promises as fsp } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import path from 'node:path';
import { SwitchboardError, errnoOf, normalizeAgentId, systemClock, toSwitchboardError, type ErrorCode } from '../core/index.js';
import { describeSchemaErrors, findUnknownKeys, schemaValidator } from '../config/index.js';
import {
  FILE_MODE,
  THREAD_INFIX,
  TRANSCRIPT_SUFFIX,
  appendEntries,
  archiveFile,
  copyRegularFile,
  describeFileKind,
  fileKindOf,
  formatArchiveTimestamp,
  listLocks,
  journalPathFor,
  lockPathFor,
  lstatKind,
  openRegularFile,
  nodeStoreFileSystem,
  parseArchiveName,
  parseSessionStore,
  readJournal,
  readRegularFile,
  readSessionStore,
  releaseLock,
  resolveInside,
  serializeSessionStore,
  sessionEntryProblem,
  updateSessionStore,
  withLock,
  type FileKind,
  type LockHandle,
  type LockInfo,
  type LockOptions,
  type SessionEntry,
  type SessionStore,
  type StoreLocation,
  type TranscriptHeader,
} from '../store/index.js';
import { knownAgentIds, sessionLockOptions, storeFor, type EngineContext } from './context.js';
import { selectStores, transcriptFileOf, type StoreSelection } from './sessions.js';
import { sharedDmWarnings } from './shared-dm.js';

// ---------------------------------------------------------------------------------------------
// The report

export type DoctorProblemKind =
  /** sessions.json is empty, truncated, not JSON, has NUL bytes or is not an object of objects. */
  | 'store-corrupt'
  /** sessions.json is gone although the folder has transcripts or sessions.json.bak. */
  | 'store-missing'
  /** sessions.json parses but does not match sessions.schema.json. */
  | 'store-invalid'
  /** The last line of a transcript is incomplete (a writer died mid-append). */
  | 'torn-tail'
  /** Complete lines that are not a record (garbage, NUL bytes, a cut record followed by more). */
  | 'malformed-lines'
  /** A transcript of 0 bytes (a writer died between creating and writing it). */
  | 'empty-transcript'
  /** The first record is not a valid header, or the header does not match the file or its entry. */
  | 'invalid-header'
  /** Records that do not match transcript-entry.schema.json. */
  | 'invalid-entries'
  /** An entry names a transcript that does not exist. */
  | 'missing-transcript'
  /** A `*.jsonl` that no entry names. */
  | 'orphan-transcript'
  /** A lock whose holder is dead, that went stale, or that is past its max hold. */
  | 'stale-lock'
  /** A live lock whose owner.json does not match lock-owner.schema.json. */
  | 'invalid-lock-owner'
  /** `<lock>-gone-<pid>-<hex>` left by a process killed while releasing a lock. */
  | 'lock-tombstone'
  /** A temp file of an interrupted write, older than a minute, its lock free. */
  | 'temp-file'
  /** sessions.json.journal names records of a batch whose writer died before sessions.json was written. */
  | 'journal-pending'
  /** A symlink, FIFO, socket, device or folder where a store file belongs (never followed or opened). */
  | 'not-regular-file'
  /** An entry of the wrong shape (sessionFile, sessionId, timestamps…): unusable, STORE_CORRUPT for that session. */
  | 'invalid-entry'
  /** The check itself failed (e.g. a permission error); the error says why. */
  | 'check-failed';

export interface DoctorProblem {
  kind: DoctorProblemKind;
  /** Absolute path of the file (or lock folder) concerned. */
  file: string;
  /** First line concerned (1-based, every `\n`-terminated line counts). */
  line?: number;
  /** Lines concerned, at most MAX_LINES_LISTED of them; `count` has the total. */
  lines?: number[];
  count?: number;
  sessionKey?: string;
  message: string;
  /** Whether `--repair` can fix it. */
  repairable: boolean;
  /** With --repair only: whether it is fixed now. */
  repaired?: boolean;
  /** With --repair only: what was done (for people; `changes` lists the files). */
  action?: string;
  /** Where the original bytes were kept. */
  backup?: string;
  /** With --repair only: why the repair failed. */
  error?: { code: ErrorCode; message: string };
}

export type DoctorChangeAction =
  | 'released'
  | 'removed'
  | 'kept'
  | 'restored'
  | 'rebuilt'
  | 'rewrote'
  | 'moved'
  | 'created'
  | 'adopted'
  | 'repointed'
  | 'archived';

/** One change to the disk made by --repair. */
export interface DoctorChange {
  action: DoctorChangeAction;
  file: string;
  /** `kept`: the file whose bytes were kept; `moved`/`archived`: the old name. */
  from?: string;
  sessionKey?: string;
}

export interface DoctorStoreReport {
  agentId: string;
  storePath: string;
  sessionsDir: string;
  /** The sessions folder exists (a store nobody wrote to yet is healthy). */
  exists: boolean;
  /** Entries in sessions.json after any repair; null when it could not be read. */
  sessions: number | null;
  /** Transcripts (`*.jsonl`) checked. */
  transcripts: number;
  problems: DoctorProblem[];
  changes: DoctorChange[];
}

export interface DoctorReport {
  /** No problem, or every problem repaired. */
  ok: boolean;
  repair: boolean;
  config: { path: string | null; warnings: string[] };
  stores: DoctorStoreReport[];
  summary: {
    stores: number;
    problems: number;
    repairable: number;
    repaired: number;
    unrepaired: number;
    byKind: Partial<Record<DoctorProblemKind, number>>;
  };
}

export interface DoctorOptions extends StoreSelection {
  repair?: boolean;
  /** The config file in use (for the report); null when running on built-in defaults. */
  configPath?: string | null;
}

// ---------------------------------------------------------------------------------------------
// Settings

/** A temp file or tombstone younger than this may belong to a write in progress. */
const LEFTOVER_AGE_MS = 60_000;
/** Line numbers listed per problem; `count` has the total. */
const MAX_LINES_LISTED = 20;
/** Longer lines are kept by a repair without being parsed (and reported as unverifiable). */
const MAX_PARSE_BYTES = 256 * 1024 * 1024;
const READ_CHUNK_BYTES = 1024 * 1024;
const WRITE_CHUNK_BYTES = 1024 * 1024;
/** Same-millisecond backups of one file (a pinned `--now`) move on by 1 ms, like archives. */
const MAX_NAME_ATTEMPTS = 1000;
const NEWLINE = 0x0a;
/** The store lock is only ever held for a read-modify-write (as in sessions-store.ts). */
const STORE_LOCK_STALE_MS = 10_000;
const STORE_LOCK_MAX_HOLD_MS = 60_000;
const STORE_LOCK_ACQUIRE_MS = 30_000;
const FOLDER_FSYNC_UNSUPPORTED = new Set(['EINVAL', 'ENOTSUP', 'EOPNOTSUPP', 'EISDIR']);
const TOMBSTONE_NAME = /\.lock-gone-(\d+)-[0-9a-f]+$/;
const DOCTOR_TEMP_NAME = /^(.+\.jsonl)\.doctor-(\d+)-[0-9a-f]+\.tmp$/;

// ---------------------------------------------------------------------------------------------
// Entry point

/** Checks (and with `repair`, fixes) the selected stores; never throws for a damaged store. */
export async function runDoctor(ctx: EngineContext, options: DoctorOptions = {}): Promise<DoctorReport> {
  const repair = options.repair === true;
  const warnings = [...findUnknownKeys(ctx.config).map((p) => `unknown key ${p} (ignored)`), ...ctx.table.warnings];
  const stores: DoctorStoreReport[] = [];
  for (const location of await doctorStores(ctx, options)) {
    stores.push(await new StoreDoctor(ctx, location, repair).run());
  }
  warnings.push(...(await sharedDmWarnings(ctx, stores)));
  const problems = stores.flatMap((store) => store.problems);
  const byKind: Partial<Record<DoctorProblemKind, number>> = {};
  for (const problem of problems) byKind[problem.kind] = (byKind[problem.kind] ?? 0) + 1;
  const repaired = problems.filter((p) => p.repaired === true).length;
  return {
    ok: problems.length === repaired,
    repair,
    config: { path: options.configPath ?? null, warnings },
    stores,
    summary: {
      stores: stores.length,
      problems: problems.length,
      repairable: problems.filter((p) => p.repairable).length,
      repaired,
      unrepaired: problems.length - repaired,
      byKind,
    },
  };
}

/**
 * `--store`/`--agent` as for `sessions`; otherwise every configured agent plus every agent folder
 * found under `<state>/agents/` (a store left behind by an agent removed from the config is
 * still checked). Folders are only discovered in the default layout: with `session.store` the
 * stores live wherever the template puts them.
 */
async function doctorStores(ctx: EngineContext, selection: StoreSelection): Promise<StoreLocation[]> {
  if (selection.storePath) {
    const located = selectStores(ctx, selection);
    for (const location of located) {
      if ((await statOrNull(location.storePath)) === null && (await statOrNull(location.sessionsDir)) === null) {
        throw new SwitchboardError('NOT_FOUND', `no store at ${location.storePath}`, { hint: 'give the path of a sessions.json file' });
      }
    }
    return located;
  }
  if (selection.agent) return selectStores(ctx, selection);
  const ids = new Set(knownAgentIds(ctx));
  const template = ctx.config.session?.store;
  if (template === undefined || template.trim() === '') {
    let names: string[] = [];
    try {
      names = (await fsp.readdir(path.join(ctx.stateDir, 'agents'), { withFileTypes: true })).filter((d) => d.isDirectory()).map((d) => d.name);
    } catch {
      // no agents folder yet: nothing was ever written
    }
    for (const name of names.sort()) if (normalizeAgentId(name) === name) ids.add(name);
  }
  const seen = new Set<string>();
  const locations: StoreLocation[] = [];
  for (const id of ids) {
    const location = storeFor(ctx, id);
    if (seen.has(location.storePath)) continue;
    seen.add(location.storePath);
    locations.push(location);
  }
  return locations;
}

// ---------------------------------------------------------------------------------------------
// One store

interface RepairOutcome {
  action: string;
  backup?: string;
  changes: DoctorChange[];
}

interface FolderListing {
  files: string[];
  dirs: string[];
  /** Everything else: symlinks, FIFOs, sockets, devices (from the directory entry: never followed). */
  others: { name: string; kind: FileKind }[];
}

interface UsableHeader {
  key: string;
  sessionId: string;
  startedAt: number | null;
}

interface OrphanPlan {
  scan: TranscriptScan;
  usable: UsableHeader | null;
  /** Why the header cannot be used, when it cannot. */
  unusable?: string;
  decision: 'adopt' | 'repoint' | 'archive' | 'none';
  /** repoint: the entry's sessionId when judged. archive: the current sessionId of the key. */
  currentSessionId?: string;
  /** repoint: the transcript the entry named until now. */
  replacedFile?: string;
  problem?: DoctorProblem;
}

class StoreDoctor {
  private readonly report: DoctorStoreReport;
  private readonly staleMs: number | undefined;
  /** Lock folders held by a live, in-time holder: their files may be mid-write. */
  private readonly liveLocks = new Set<string>();
  private listing: FolderListing = { files: [], dirs: [], others: [] };
  /** Names reported as not-regular-file: other checks leave them to that problem. */
  private readonly nonRegular = new Set<string>();
  private readonly scans = new Map<string, TranscriptScan>();
  /** sessions.json as it is now; null while it cannot be read. */
  private store: SessionStore | null = null;
  /** sessions.json was restored or rebuilt in this run, so its entries may be one write behind. */
  private storeRestored = false;
  /** Keys whose entry a check-only run would repoint to an orphan (their missing transcript is not reported twice). */
  private plannedRepoints = new Set<string>();

  constructor(
    private readonly ctx: EngineContext,
    private readonly location: StoreLocation,
    private readonly repair: boolean,
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
    };
    this.staleMs = ctx.config.session?.writeLock?.staleMs;
  }

  async run(): Promise<DoctorStoreReport> {
    const listed = await this.step('list the sessions folder', async () => {
      const listing = await listFolder(this.location.sessionsDir);
      if (listing === null) return false;
      this.report.exists = true;
      this.listing = listing;
      return true;
    });
    if (listed !== true) return this.report;
    // Each step on its own: one that fails (a permission error, say) does not hide the others.
    await this.step('check for links and other non-regular files', () => this.checkNonRegular());
    await this.step('check the locks', () => this.checkLocks());
    await this.step('check for lock tombstones', () => this.checkTombstones());
    await this.step('check for temp files', () => this.checkTempFiles());
    await this.step('read the transcripts', () => this.scanTranscripts());
    await this.step('check sessions.json', () => this.checkStoreFile());
    if (this.store !== null) await this.step('check the journal', () => this.checkJournal());
    await this.step('check the transcripts', () => this.checkTranscripts());
    if (this.store !== null) await this.step('check for orphaned transcripts', () => this.checkOrphans());
    if (this.store !== null) await this.step('check the entries', () => this.checkEntries());
    if (this.store !== null) this.report.sessions = Object.keys(this.store).length;
    return this.report;
  }

  private async step<T>(what: string, run: () => Promise<T>): Promise<T | undefined> {
    try {
      return await run();
    } catch (err) {
      this.problem({ kind: 'check-failed', file: this.location.sessionsDir, message: `could not ${what}: ${describeError(err)}`, repairable: false });
      return undefined;
    }
  }

  // -------------------------------------------------------------------------------------------
  // Bookkeeping

  private problem(problem: DoctorProblem): DoctorProblem {
    if (this.repair) problem.repaired = false;
    this.report.problems.push(problem);
    return problem;
  }

  /** Runs one repair for one or more problems and records its outcome on each. */
  private async attempt(problems: DoctorProblem[], fix: () => Promise<RepairOutcome>): Promise<boolean> {
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

  private now(): number {
    return this.ctx.clock.now();
  }

  private transcriptLock(sessionKey: string | undefined): LockOptions {
    return sessionLockOptions(this.ctx, { sessionKey, runId: 'doctor' });
  }

  /**
   * A transcript's write lock, then its store's lock: an ingest batch appends to an idle
   * transcript under the store lock alone (docs/write-path.md), so a repair that rewrites,
   * archives or judges a transcript holds both.
   */
  private withTranscript<T>(file: string, sessionKey: string | undefined, fn: (handle: LockHandle) => Promise<T>): Promise<T> {
    return withLock(file, this.transcriptLock(sessionKey), (handle) => withLock(this.location.storePath, this.storeLock(), () => fn(handle)));
  }

  private storeLock(): LockOptions {
    return {
      busyCode: 'STORE_BUSY',
      takeover: 'dead', // the registry lock, like updateSessionStore's: never from a live holder
      acquireTimeoutMs: this.ctx.config.session?.writeLock?.acquireTimeoutMs ?? STORE_LOCK_ACQUIRE_MS,
      staleMs: STORE_LOCK_STALE_MS,
      maxHoldMs: STORE_LOCK_MAX_HOLD_MS,
      owner: { runId: 'doctor' },
    };
  }

  private inside(name: string): string {
    return resolveInside(this.location.sessionsDir, name);
  }

  // -------------------------------------------------------------------------------------------
  // Links, FIFOs and other non-regular files

  /** Names the store reads or writes (sessions.json and its copies, transcripts and theirs), not locks. */
  private isStoreFileName(name: string): boolean {
    const storeBase = path.basename(this.location.storePath);
    if (name.endsWith('.lock') || TOMBSTONE_NAME.test(name)) return false;
    return name === storeBase || name.startsWith(`${storeBase}.`) || name.endsWith(TRANSCRIPT_SUFFIX) || name.includes(`${TRANSCRIPT_SUFFIX}.`);
  }

  /**
   * Reports every store name that is not a regular file. sessions.json itself is repaired with
   * the store (checkStoreFile); the others are moved aside here, before the transcripts are read,
   * so that an entry whose transcript was a link gets a fresh one below (checkEntries).
   */
  private async checkNonRegular(): Promise<void> {
    const storeBase = path.basename(this.location.storePath);
    const found = [
      ...this.listing.others,
      ...this.listing.dirs.filter((name) => name === storeBase || name.endsWith(TRANSCRIPT_SUFFIX)).map((name) => ({ name, kind: 'directory' as FileKind })),
    ].filter(({ name }) => this.isStoreFileName(name));
    for (const { name, kind } of found) {
      this.nonRegular.add(name);
      if (name === storeBase) continue; // checkStoreFile reports and repairs it
      const file = this.inside(name);
      const target = kind === 'symlink' ? await fsp.readlink(file).catch(() => null) : null;
      const problem = this.problem({
        kind: 'not-regular-file',
        file,
        message: `${name} is ${describeFileKind(kind)}${target !== null ? ` to ${target}` : ''}, not a regular file: never followed or opened${kind === 'directory' ? '; move it away by hand' : '; --repair removes it, keeping a copy of the bytes a link points at'}`,
        repairable: kind !== 'directory',
      });
      if (this.repair && kind !== 'directory') await this.attempt([problem], () => this.removeNonRegular(name));
    }
  }

  /** Under the lock that guards the name: a copy of a link's target bytes is kept, then the name goes (never its target). */
  private removeNonRegular(name: string): Promise<RepairOutcome> {
    const file = this.inside(name);
    const guardedByStore = name.startsWith(`${path.basename(this.location.storePath)}.`);
    const work = async (): Promise<RepairOutcome> => {
      const kind = await lstatKind(file);
      if (kind === null || kind === 'file') return { action: `nothing to do: it is ${kind === null ? 'gone' : 'a regular file now'}`, changes: [] };
      if (kind === 'directory') throw new SwitchboardError('STORE_CORRUPT', `${file} is a folder now; left it alone`, { hint: 'move it away by hand' });
      const changes: DoctorChange[] = [];
      const backup = kind === 'symlink' ? await keepLinkTarget(file, 'bak', this.now()) : null;
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
    if (guardedByStore) return withLock(this.location.storePath, this.storeLock(), work);
    if (name.endsWith(TRANSCRIPT_SUFFIX)) return this.withTranscript(file, undefined, work);
    return work(); // archives and kept copies: nobody writes them
  }

  // -------------------------------------------------------------------------------------------
  // Locks and tombstones

  private async checkLocks(): Promise<void> {
    const locks = await listLocks(this.location.sessionsDir, { staleMs: this.staleMs });
    for (const info of locks) {
      if (info.heldByThisProcess) continue;
      const reasons = lockReasons(info);
      if (reasons.length === 0) {
        this.liveLocks.add(info.lockPath);
        const ownerProblem = await ownerRecordProblem(info.lockPath);
        if (ownerProblem !== null) {
          this.problem({ kind: 'invalid-lock-owner', file: path.join(info.lockPath, 'owner.json'), message: `owner record of a live lock: ${ownerProblem}`, repairable: false });
        }
        continue;
      }
      const holder = info.owner === null ? 'no owner record' : `pid ${info.owner.pid} on ${info.owner.hostname}${info.owner.runId ? `, run ${info.owner.runId}` : ''}`;
      const problem = this.problem({
        kind: 'stale-lock',
        file: info.lockPath,
        ...(info.owner?.sessionKey !== undefined ? { sessionKey: info.owner.sessionKey } : {}),
        message: `lock on ${path.basename(info.targetPath)} is ${reasons.join(', ')} (${holder})`,
        repairable: true,
      });
      if (!this.repair) continue;
      const released = await this.attempt([problem], async () => {
        try {
          await releaseLock(info.lockPath, { staleMs: this.staleMs });
        } catch (err) {
          if (!(err instanceof SwitchboardError && err.code === 'NOT_FOUND')) throw err;
          return { action: 'already gone', changes: [] };
        }
        return { action: 'released', changes: [{ action: 'released', file: info.lockPath }] };
      });
      if (!released) this.liveLocks.add(info.lockPath);
    }
  }

  private async checkTombstones(): Promise<void> {
    for (const name of this.listing.dirs) {
      const match = TOMBSTONE_NAME.exec(name);
      if (match === null) continue;
      const pid = Number(match[1]);
      if (pid === process.pid) continue;
      const full = this.inside(name);
      const stats = await statOrNull(full);
      if (stats === null) continue;
      // ctime, not mtime: the rename that made the tombstone sets ctime; mtime is the lock's last refresh.
      const old = systemClock.now() - stats.ctimeMs > LEFTOVER_AGE_MS;
      if (!old && isProcessAlive(pid)) continue; // a release in progress
      const problem = this.problem({ kind: 'lock-tombstone', file: full, message: `leftover of a lock release by process ${pid}, which died before it finished`, repairable: true });
      if (!this.repair) continue;
      await this.attempt([problem], async () => {
        await fsp.rm(full, { recursive: true, force: true });
        return { action: 'removed', changes: [{ action: 'removed', file: full }] };
      });
    }
  }

  // -------------------------------------------------------------------------------------------
  // Temp files

  /** The lock that guards the write a temp file belongs to, or null when the name is no temp of ours. */
  private tempGuard(name: string): { lockPath: string; pid: number | null } | null {
    const storeBase = path.basename(this.location.storePath);
    if (name === `${storeBase}.bak.tmp` || (name.startsWith(`${storeBase}.`) && /^\d{1,10}$/.test(name.slice(storeBase.length + 1)))) {
      // write-file-atomic names its temp `<file>.<uint32>`; .bak.tmp is the store's backup link
      return { lockPath: lockPathFor(this.location.storePath), pid: null };
    }
    const doctorTemp = DOCTOR_TEMP_NAME.exec(name);
    if (doctorTemp !== null) return { lockPath: lockPathFor(this.inside(doctorTemp[1]!)), pid: Number(doctorTemp[2]) };
    return null;
  }

  private async checkTempFiles(): Promise<void> {
    for (const name of this.listing.files) {
      const guard = this.tempGuard(name);
      if (guard === null) continue;
      if (guard.pid === process.pid || (guard.pid !== null && isProcessAlive(guard.pid))) continue;
      const full = this.inside(name);
      const stats = await statOrNull(full);
      if (stats === null) continue;
      const ageMs = systemClock.now() - stats.mtimeMs;
      // Young, or its lock is held: the write it belongs to may still be going on.
      if (ageMs < LEFTOVER_AGE_MS || this.liveLocks.has(guard.lockPath)) continue;
      const problem = this.problem({
        kind: 'temp-file',
        file: full,
        message: `temp file of an interrupted write (${stats.size} bytes, ${Math.round(ageMs / 1000)} s old)`,
        repairable: true,
      });
      if (!this.repair) continue;
      await this.attempt([problem], async () => {
        if ((await statOrNull(guard.lockPath)) !== null) {
          throw new SwitchboardError('STORE_BUSY', `${path.basename(guard.lockPath)} is held now; left ${name} alone`, { hint: 'run doctor again later' });
        }
        await fsp.unlink(full).catch((err: unknown) => {
          if (errnoOf(err) !== 'ENOENT') throw err;
        });
        return { action: 'removed (it never held committed data)', changes: [{ action: 'removed', file: full }] };
      });
    }
  }

  // -------------------------------------------------------------------------------------------
  // The journal (docs/write-path.md)

  /**
   * A non-empty journal with a free store lock is a batch whose writer died after (maybe) writing
   * its records: the next store write completes it, and --repair makes that write now.
   */
  private async checkJournal(): Promise<void> {
    const storePath = this.location.storePath;
    if (this.liveLocks.has(lockPathFor(storePath))) return; // a batch is being written right now
    const pending = await readJournal(storePath);
    if (pending === null) return;
    const problem = this.problem({
      kind: 'journal-pending',
      file: journalPathFor(storePath),
      message: `a writer died during a batch of ${pending.length} session(s): records it wrote are not yet in ${path.basename(storePath)}`,
      repairable: true,
    });
    if (!this.repair) return;
    await this.attempt([problem], async () => {
      // The one update path completes the journal before anything else; nothing more to change.
      await updateSessionStore(storePath, () => undefined, { lock: { acquireTimeoutMs: this.storeLock().acquireTimeoutMs } });
      this.store = await readSessionStore(storePath);
      return { action: 'completed: sessions.json now names the records that reached the transcripts', changes: [{ action: 'rewrote', file: storePath }] };
    });
  }

  // -------------------------------------------------------------------------------------------
  // sessions.json

  private async checkStoreFile(): Promise<void> {
    const storePath = this.location.storePath;
    const kind = await lstatKind(storePath);
    if (kind !== null && kind !== 'file') {
      // Never opened: a FIFO would block the read, a link would be read (and written) through.
      const target = kind === 'symlink' ? await fsp.readlink(storePath).catch(() => null) : null;
      const problem = this.problem({
        kind: 'not-regular-file',
        file: storePath,
        message: `it is ${describeFileKind(kind)}${target !== null ? ` to ${target}` : ''}, not a regular file: every command refuses it (STORE_CORRUPT)${kind === 'directory' ? '; move it away by hand' : '; --repair keeps a copy of the bytes a link points at and restores the store from sessions.json.bak or the transcript headers'}`,
        repairable: kind !== 'directory',
      });
      if (this.repair && kind !== 'directory') await this.attempt([problem], () => this.restoreStore());
      return;
    }
    const bytes = await readOrNull(storePath);
    if (bytes === null) {
      const hasBackup = (await statOrNull(`${storePath}.bak`)) !== null;
      if (!hasBackup && this.scans.size === 0) {
        this.store = {}; // a store nobody wrote to yet
        return;
      }
      // ingest writes sessions.json before the first transcript, so this file was lost.
      const problem = this.problem({
        kind: 'store-missing',
        file: storePath,
        message: `it does not exist, although the folder has ${this.scans.size} transcript(s)${hasBackup ? ` and ${path.basename(storePath)}.bak` : ''}; orphaned and missing transcripts are checked once it is back`,
        repairable: true,
      });
      if (this.repair) await this.attempt([problem], () => this.restoreStore());
      return;
    }
    let store: SessionStore;
    try {
      store = parseSessionStore(bytes, storePath);
    } catch (err) {
      if (!(err instanceof SwitchboardError && err.code === 'STORE_CORRUPT')) throw err;
      const reason = typeof err.details?.reason === 'string' ? err.details.reason : err.message;
      const problem = this.problem({
        kind: 'store-corrupt',
        file: storePath,
        message: `${reason} (${bytes.length} bytes); orphaned and missing transcripts are checked once it is readable`,
        repairable: true,
      });
      if (this.repair) await this.attempt([problem], () => this.restoreStore());
      return;
    }
    this.store = store;
    this.checkStoreSchema(store, storePath);
  }

  private checkStoreSchema(store: SessionStore, storePath: string): void {
    const validate = schemaValidator('sessions');
    if (validate(store)) return;
    const errors = describeSchemaErrors(validate.errors);
    this.problem({
      kind: 'store-invalid',
      file: storePath,
      count: errors.length,
      message: `does not match sessions.schema.json: ${errors.slice(0, 5).join('; ')}${errors.length > 5 ? ` (and ${errors.length - 5} more)` : ''}`,
      repairable: false,
    });
  }

  /** sessions.json.bak, when it parses and matches the schema. */
  private async goodBackup(): Promise<SessionStore | null> {
    const backupPath = `${this.location.storePath}.bak`;
    const bytes = await readOrNull(backupPath).catch((err: unknown) => {
      if (err instanceof SwitchboardError && err.code === 'STORE_CORRUPT') return null; // a link or FIFO: not a backup
      throw err;
    });
    if (bytes === null) return null;
    try {
      const store = parseSessionStore(bytes, backupPath);
      return schemaValidator('sessions')(store) ? store : null;
    } catch {
      return null;
    }
  }

  /**
   * Restores a corrupt (or lost) sessions.json. updateSessionStore() refuses a corrupt file on
   * purpose (it must never take damage for `{}`), so this holds the same store lock itself and
   * writes through the store's atomic-replace seam (write-file-atomic: temp in the folder, fsync,
   * rename), then fsyncs the folder. The damaged file stays in place until the good one replaces
   * it, so no reader ever sees the store missing or empty.
   */
  private restoreStore(): Promise<RepairOutcome> {
    const storePath = this.location.storePath;
    const base = path.basename(storePath);
    return withLock(storePath, this.storeLock(), async (handle) => {
      const kind = await lstatKind(storePath);
      if (kind === 'directory') throw new SwitchboardError('STORE_CORRUPT', `${storePath} is a folder; left it alone`, { hint: 'move it away by hand' });
      // A link or FIFO is never opened as the store: only a link's target bytes are copied aside.
      const current = kind === 'file' ? await readOrNull(storePath) : null;
      if (current !== null) {
        try {
          this.store = parseSessionStore(current, storePath);
          return { action: 'nothing to do: it was repaired meanwhile', changes: [] };
        } catch {
          // still damaged
        }
      }
      const changes: DoctorChange[] = [];
      let backup: string | undefined;
      if (current !== null) {
        backup = await keepOriginal(storePath, 'corrupt', this.now());
        changes.push({ action: 'kept', file: backup, from: storePath });
      } else if (kind === 'symlink') {
        backup = (await keepLinkTarget(storePath, 'corrupt', this.now())) ?? undefined;
        if (backup !== undefined) changes.push({ action: 'kept', file: backup, from: storePath });
      }
      const fromBackup = await this.goodBackup();
      const store = fromBackup ?? this.rebuildFromHeaders();
      await handle.verifyHeld();
      await replaceWholeFile(storePath, serializeSessionStore(store));
      this.store = store;
      this.storeRestored = true;
      changes.push({ action: fromBackup ? 'restored' : 'rebuilt', file: storePath });
      const entries = `${Object.keys(store).length} ${Object.keys(store).length === 1 ? 'entry' : 'entries'}`;
      const how = fromBackup ? `restored from ${base}.bak (${entries})` : `rebuilt ${entries} from transcript headers (no usable ${base}.bak)`;
      const replaced = kind !== null && kind !== 'file' ? `; the ${describeFileKind(kind).replace(/^an? /, '')} in its place was replaced (never followed)` : '';
      return { action: `${how}${replaced}${backup ? `; ${kind === 'symlink' ? 'the bytes the link pointed at' : 'damaged bytes'} kept as ${path.basename(backup)}` : ''}`, backup, changes };
    });
  }

  /** One entry per session key: the newest instance (header time, then file time) wins. */
  private rebuildFromHeaders(): SessionStore {
    const store: SessionStore = {};
    const newest = new Map<string, { scan: TranscriptScan; usable: UsableHeader }>();
    for (const scan of this.scans.values()) {
      const usable = this.usableHeader(scan);
      if (typeof usable === 'string') continue;
      const known = newest.get(usable.key);
      if (known === undefined || isNewer(scan, usable, known.scan, known.usable)) newest.set(usable.key, { scan, usable });
    }
    for (const key of [...newest.keys()].sort()) {
      const { scan, usable } = newest.get(key)!;
      store[key] = entryFromHeader(scan, usable);
    }
    return store;
  }

  // -------------------------------------------------------------------------------------------
  // Transcripts

  private async scanTranscripts(): Promise<void> {
    for (const name of this.listing.files) {
      if (!name.endsWith(TRANSCRIPT_SUFFIX)) continue;
      const file = this.inside(name);
      try {
        const scan = await scanTranscript(file);
        if (scan !== null) this.scans.set(name, scan);
      } catch (err) {
        this.problem({ kind: 'check-failed', file, message: `could not read: ${describeError(err)}`, repairable: false });
      }
    }
    this.report.transcripts = this.scans.size;
  }

  private async checkTranscripts(): Promise<void> {
    for (const scan of this.scans.values()) {
      const key = scan.header?.sessionKey;
      const withKey = typeof key === 'string' ? { sessionKey: key } : {};
      // While a live holder has the write lock, the last line may be an append in progress.
      const beingWritten = this.liveLocks.has(lockPathFor(scan.file));
      const damage: DoctorProblem[] = [];
      if (scan.malformed.count > 0) {
        damage.push(
          this.problem({
            kind: 'malformed-lines',
            file: scan.file,
            line: scan.malformed.lines[0],
            lines: scan.malformed.lines,
            count: scan.malformed.count,
            ...withKey,
            message: `${scan.malformed.count} line(s) are not records (garbage, NUL bytes or a cut record)`,
            repairable: true,
          }),
        );
      }
      if (scan.torn !== null && !beingWritten) {
        damage.push(
          this.problem({
            kind: 'torn-tail',
            file: scan.file,
            line: scan.torn.line,
            ...withKey,
            message: `the last line is incomplete (${scan.torn.bytes} bytes without a newline): a writer died mid-append`,
            repairable: true,
          }),
        );
      }
      if (scan.headerProblem !== null) {
        this.problem({ kind: 'invalid-header', file: scan.file, ...(scan.headerLine !== null ? { line: scan.headerLine } : {}), ...withKey, message: scan.headerProblem, repairable: false });
      }
      if (scan.invalid.count > 0) {
        this.problem({
          kind: 'invalid-entries',
          file: scan.file,
          line: scan.invalid.lines[0],
          lines: scan.invalid.lines,
          count: scan.invalid.count,
          ...withKey,
          message: `${scan.invalid.count} record(s) do not match transcript-entry.schema.json; first: ${scan.invalid.first ?? '?'}`,
          repairable: false,
        });
      }
      if (damage.length > 0 && this.repair) await this.attempt(damage, () => this.repairTranscript(scan));
    }
  }

  /**
   * Rewrites a damaged transcript under its session write lock: every line that parses as a
   * record is copied byte for byte into a temp file (a parseable last line gets its newline),
   * the temp is fsynced, the original is kept as `<file>.bak-<ts>` (a hard link to its inode),
   * and the temp is renamed over the file. The file is re-read inside the lock, so lines an
   * appender added since the check are kept too.
   */
  private repairTranscript(scan: TranscriptScan): Promise<RepairOutcome> {
    const file = scan.file;
    return this.withTranscript(file, scan.header?.sessionKey, async (handle) => {
      const temp = `${file}.doctor-${process.pid}-${randomBytes(4).toString('hex')}.tmp`;
      let fresh: TranscriptScan | null;
      try {
        const fh = await fsp.open(temp, 'wx', FILE_MODE);
        try {
          const writer = new ChunkedWriter(fh);
          fresh = await scanTranscript(file, (line) => writer.line(line));
          await writer.flush();
          await fh.sync();
        } finally {
          await fh.close();
        }
        if (fresh === null || (fresh.torn === null && fresh.malformed.count === 0)) {
          await fsp.unlink(temp);
          return { action: fresh === null ? 'nothing to do: the file is gone' : 'nothing to do: it was repaired meanwhile', changes: [] };
        }
        await handle.verifyHeld(); // a lock taken over (past max hold) must not be written through
        const backup = await keepOriginal(file, 'bak', this.now());
        const dropped = `${fresh.malformed.count} malformed line(s)${fresh.torn !== null ? ' and the torn tail' : ''}`;
        if (fresh.records === 0) {
          // Nothing complete to keep: the file goes (its bytes stay in the backup); an entry that
          // names it gets a fresh transcript below, like any missing one.
          await fsp.unlink(temp);
          await fsp.unlink(file);
          await fsyncFolder(path.dirname(file));
          scan.removed = true;
          return {
            action: `moved aside: no complete record in it; original kept as ${path.basename(backup)}`,
            backup,
            changes: [{ action: 'moved', file: backup, from: file }],
          };
        }
        await fsp.rename(temp, file);
        await fsyncFolder(path.dirname(file));
        scan.torn = null;
        scan.malformed = { count: 0, lines: [] };
        return {
          action: `rewrote with its ${fresh.records} complete record(s), dropped ${dropped}; original kept as ${path.basename(backup)}`,
          backup,
          changes: [
            { action: 'kept', file: backup, from: file },
            { action: 'rewrote', file },
          ],
        };
      } catch (err) {
        await fsp.unlink(temp).catch(() => undefined);
        throw err;
      }
    });
  }

  // -------------------------------------------------------------------------------------------
  // References between sessions.json and the transcripts

  /** File names entries point at (their sessionFile, and `<sessionId>.jsonl`). */
  private referencedNames(store: SessionStore): Map<string, string> {
    const names = new Map<string, string>();
    for (const [key, entry] of Object.entries(store)) {
      const file = this.entryFile(entry);
      if (file !== null) names.set(path.basename(file), key);
      if (typeof entry.sessionId === 'string') names.set(`${entry.sessionId}${TRANSCRIPT_SUFFIX}`, key);
    }
    return names;
  }

  private entryFile(entry: SessionEntry): string | null {
    try {
      return transcriptFileOf(this.location, entry);
    } catch {
      return null; // an unusable sessionFile/sessionId: store-invalid says so
    }
  }

  /** The header's address, if it can be trusted to re-register this file; else why not. */
  private usableHeader(scan: TranscriptScan): UsableHeader | string {
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

  private async checkOrphans(): Promise<void> {
    const store = this.store!;
    const referenced = this.referencedNames(store);
    const plans: OrphanPlan[] = [];
    for (const [name, scan] of this.scans) {
      if (scan.removed || referenced.has(name)) continue;
      // Nothing but damage: the torn-tail / malformed-lines problems cover it (a repair moves it aside).
      if (scan.size > 0 && scan.records === 0) continue;
      if (scan.size === 0) {
        const problem = this.problem({ kind: 'empty-transcript', file: scan.file, message: 'an empty file that no entry names (a writer died right after creating it)', repairable: true });
        if (this.repair) await this.attempt([problem], () => this.removeEmptyOrphan(scan));
        continue;
      }
      const usable = this.usableHeader(scan);
      plans.push(typeof usable === 'string' ? { scan, usable: null, unusable: usable, decision: 'none' } : { scan, usable, decision: 'none' });
    }
    // Per key, the newest instance is the candidate for the entry; the others were replaced.
    const byKey = new Map<string, OrphanPlan[]>();
    for (const plan of plans) if (plan.usable !== null) byKey.set(plan.usable.key, [...(byKey.get(plan.usable.key) ?? []), plan]);
    for (const [key, group] of byKey) {
      group.sort((a, b) => (isNewer(a.scan, a.usable!, b.scan, b.usable!) ? -1 : 1));
      const entry = Object.hasOwn(store, key) ? store[key] : undefined;
      const [newest, ...older] = group as [OrphanPlan, ...OrphanPlan[]];
      if (entry === undefined) newest.decision = 'adopt';
      else if (await this.shouldRepoint(entry, newest.usable!)) {
        newest.decision = 'repoint';
        newest.currentSessionId = entry.sessionId;
        newest.replacedFile = this.entryFile(entry) ?? undefined;
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
          ? `no entry names this transcript${what}; its key has no entry: --repair adopts it`
          : plan.decision === 'repoint'
            ? `no entry names this transcript${what}; it is newer than the instance the entry names, whose transcript is ${plan.replacedFile && (await statOrNull(plan.replacedFile)) !== null ? 'older' : 'gone'}: --repair makes it the current instance again`
            : plan.decision === 'archive'
              ? `no entry names this transcript${what}; it is an older instance (the key's current session is ${plan.currentSessionId ?? '?'}): --repair archives it as .reset.<ts>`
              : `no entry names this transcript and ${plan.unusable ?? 'its header cannot be used'}: left as it is`;
      plan.problem = this.problem({ kind: 'orphan-transcript', file: scan.file, ...(usable ? { sessionKey: usable.key } : {}), message, repairable: plan.decision !== 'none' });
    }
    if (!this.repair) {
      this.plannedRepoints = new Set(plans.filter((p) => p.decision === 'repoint').map((p) => p.usable!.key));
      return;
    }
    const repointed = await this.registerOrphans(plans.filter((p) => p.decision === 'adopt' || p.decision === 'repoint'));
    for (const plan of plans.filter((p) => p.decision === 'archive')) {
      await this.attempt([plan.problem!], () => this.archiveOrphan(plan.scan.file, plan.usable?.key));
    }
    // The instance a repoint replaced is now what a rotation would have archived.
    for (const plan of repointed) {
      if (plan.replacedFile === undefined || (await statOrNull(plan.replacedFile)) === null) continue;
      try {
        const outcome = await this.archiveOrphan(plan.replacedFile, plan.usable!.key);
        this.report.changes.push(...outcome.changes);
        plan.problem!.action += `; the replaced instance was ${outcome.action}`;
      } catch (err) {
        plan.problem!.action += `; the replaced instance ${path.basename(plan.replacedFile)} could not be archived (${describeError(err)})`;
      }
    }
    this.store = await readSessionStore(this.location.storePath);
  }

  /**
   * Whether an orphan should become its key's current instance again: it is strictly newer than
   * the instance the entry names, and that instance's transcript is gone — or sessions.json was
   * just restored from a copy that may be one write (one rotation) behind.
   */
  private async shouldRepoint(entry: SessionEntry, orphan: UsableHeader): Promise<boolean> {
    if (orphan.startedAt === null) return false;
    const entryStart = typeof entry.sessionStartedAt === 'number' ? entry.sessionStartedAt : undefined;
    if (await this.transcriptMissing(entry)) return entryStart === undefined || orphan.startedAt > entryStart;
    return this.storeRestored && entryStart !== undefined && orphan.startedAt > entryStart;
  }

  private async transcriptMissing(entry: SessionEntry): Promise<boolean> {
    const file = this.entryFile(entry);
    return file !== null && (await statOrNull(file)) === null;
  }

  /** Adoptions and repoints in ONE store update; each re-checked against the file read in the lock. */
  private async registerOrphans(plans: OrphanPlan[]): Promise<OrphanPlan[]> {
    if (plans.length === 0) return [];
    let applied: Set<OrphanPlan>;
    try {
      applied = await updateSessionStore(
        this.location.storePath,
        (store) => {
          const done = new Set<OrphanPlan>();
          for (const plan of plans) {
            const { key } = plan.usable!;
            const entry = Object.hasOwn(store, key) ? store[key] : undefined;
            if (plan.decision === 'adopt' && entry === undefined) {
              store[key] = entryFromHeader(plan.scan, plan.usable!);
              done.add(plan);
            } else if (plan.decision === 'repoint' && entry !== undefined && entry.sessionId === plan.currentSessionId) {
              const fresh = entryFromHeader(plan.scan, plan.usable!);
              store[key] = { ...entry, ...fresh, updatedAt: Math.max(numberOr(entry.updatedAt, 0), fresh.updatedAt) };
              done.add(plan);
            }
          }
          return done;
        },
        { lock: { acquireTimeoutMs: this.ctx.config.session?.writeLock?.acquireTimeoutMs } },
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
        this.report.changes.push({ action, file: plan.scan.file, sessionKey: plan.usable!.key });
      } else {
        problem.repaired = false;
        problem.error = { code: 'SESSION_BUSY', message: `the entry of ${plan.usable!.key} changed meanwhile; run doctor again` };
      }
    }
    return plans.filter((plan) => plan.decision === 'repoint' && applied.has(plan));
  }

  /** An older instance left behind: archived as `.reset.<ts>` under its lock, if still unnamed. */
  private archiveOrphan(file: string, sessionKey: string | undefined): Promise<RepairOutcome> {
    const name = path.basename(file);
    return this.withTranscript(file, sessionKey, async () => {
      const referenced = this.referencedNames(await readSessionStore(this.location.storePath));
      if (referenced.has(name)) {
        throw new SwitchboardError('SESSION_BUSY', `${referenced.get(name)} names ${name} now; left it alone`, { hint: 'run doctor again' });
      }
      const archived = await archiveFile(file, 'reset', this.now());
      if (archived === null) return { action: 'nothing to do: it is gone', changes: [] };
      return { action: `archived as ${path.basename(archived)}`, changes: [{ action: 'archived', file: archived, from: file }] };
    });
  }

  private removeEmptyOrphan(scan: TranscriptScan): Promise<RepairOutcome> {
    return this.withTranscript(scan.file, undefined, async () => {
      const stats = await statOrNull(scan.file);
      const referenced = this.referencedNames(await readSessionStore(this.location.storePath));
      if (stats === null) return { action: 'nothing to do: it is gone', changes: [] };
      if (stats.size !== 0 || referenced.has(scan.name)) {
        throw new SwitchboardError('SESSION_BUSY', `${scan.name} is in use now; left it alone`, { hint: 'run doctor again' });
      }
      await fsp.unlink(scan.file);
      await fsyncFolder(path.dirname(scan.file));
      return { action: 'removed (it held no bytes)', changes: [{ action: 'removed', file: scan.file }] };
    });
  }

  /** Entries whose transcript is missing or empty, and headers that contradict their entry. */
  private async checkEntries(): Promise<void> {
    const store = this.store!;
    const archives = new Map<string, string[]>();
    for (const name of this.listing.files) {
      const parsed = parseArchiveName(name);
      if (parsed !== null) archives.set(parsed.originalName, [...(archives.get(parsed.originalName) ?? []), `${parsed.reason}:${name}`]);
    }
    for (const [key, entry] of Object.entries(store)) {
      const shape = sessionEntryProblem(entry, this.location.sessionsDir);
      if (shape !== null) {
        // Every command refuses this row (STORE_CORRUPT for this session); only a person knows the fix.
        this.problem({
          kind: 'invalid-entry',
          file: this.location.storePath,
          sessionKey: key,
          message: `the entry of ${key} cannot be used: ${shape.reason}; fix it by hand, or remove it with \`switchboard sessions delete ${key}\` (a transcript it had is then adopted again by --repair)`,
          repairable: false,
        });
        continue;
      }
      const file = this.entryFile(entry);
      if (file === null || typeof entry.sessionId !== 'string') continue;
      const name = path.basename(file);
      if (this.nonRegular.has(name) && (await lstatKind(file)) !== null) continue; // not-regular-file covers it
      const stats = await statOrNull(file);
      if (stats !== null && stats.size > 0) {
        this.checkHeaderAgainstEntry(key, entry, this.scans.get(name));
        continue;
      }
      if (stats === null && this.plannedRepoints.has(key)) continue; // the orphan problem covers it
      if (stats !== null && this.liveLocks.has(lockPathFor(file))) continue; // being created right now
      const deleted = (archives.get(name) ?? []).filter((a) => a.startsWith('deleted:')).map((a) => a.slice('deleted:'.length));
      const kind: DoctorProblemKind = stats === null ? 'missing-transcript' : 'empty-transcript';
      const what = stats === null ? `the transcript ${name} of ${key} does not exist` : `the transcript ${name} of ${key} is empty`;
      const problem = this.problem({
        kind,
        file,
        sessionKey: key,
        message:
          deleted.length > 0
            ? `${what}; it was archived as ${deleted[0]} (an interrupted deletion): finish it with \`switchboard sessions delete ${key}\``
            : `${what}: --repair starts it again with a header and a note that the history was lost`,
        repairable: deleted.length === 0,
      });
      if (this.repair && deleted.length === 0) await this.attempt([problem], () => this.recreateTranscript(key, entry, file));
    }
  }

  private checkHeaderAgainstEntry(key: string, entry: SessionEntry, scan: TranscriptScan | undefined): void {
    const header = scan?.header;
    if (scan === undefined || header == null || scan.headerProblem !== null) return;
    const mismatch: string[] = [];
    if (header.id !== entry.sessionId) mismatch.push(`its header is for session ${header.id}, the entry's is ${entry.sessionId}`);
    if (typeof header.sessionKey === 'string' && header.sessionKey !== key) mismatch.push(`its header names ${header.sessionKey}`);
    if (mismatch.length === 0) return;
    this.problem({ kind: 'invalid-header', file: scan.file, line: scan.headerLine ?? 1, sessionKey: key, message: `${key} names this transcript but ${mismatch.join(' and ')}`, repairable: false });
  }

  /** A new transcript for an entry that has none: header + a `custom` doctor note, one append. */
  private recreateTranscript(key: string, judged: SessionEntry, file: string): Promise<RepairOutcome> {
    return this.withTranscript(file, key, async (handle) => {
      const entry = (await readSessionStore(this.location.storePath))[key];
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
        { session: { sessionId: entry.sessionId, sessionKey: key, agentId: this.location.agentId }, clock: this.ctx.clock, handle },
      );
      return { action: 'started again with a header and a doctor note', changes: [{ action: 'created', file, sessionKey: key }] };
    });
  }
}

// ---------------------------------------------------------------------------------------------
// Transcript scanning

interface TranscriptScan {
  file: string;
  name: string;
  size: number;
  mtimeMs: number;
  /** The first record, when it is a header (valid or not). */
  header: TranscriptHeader | null;
  headerLine: number | null;
  /** Why the header is not right; null when it is. */
  headerProblem: string | null;
  /** Lines that parse as records (the header included). */
  records: number;
  malformed: { count: number; lines: number[] };
  torn: { line: number; bytes: number } | null;
  invalid: { count: number; lines: number[]; first: string | null };
  /** Set when a repair moved the file aside. */
  removed?: boolean;
}

/**
 * Streams a transcript line by line, keeping every line's exact bytes (readTranscript decodes
 * lines and does not number them; a repair must copy records byte for byte and name the lines it
 * drops). `keep` receives every line that parses as a record. Null when the file is gone.
 */
async function scanTranscript(file: string, keep?: (line: Buffer) => Promise<void>): Promise<TranscriptScan | null> {
  let fh: FileHandle;
  try {
    fh = await openRegularFile(file, fsConstants.O_RDONLY); // a name swapped for a link or FIFO since the listing: refused
  } catch (err) {
    if (errnoOf(err) === 'ENOENT') return null;
    throw err;
  }
  const headerValidator = schemaValidator('transcript-header');
  const entryValidator = schemaValidator('transcript-entry');
  try {
    const stats = await fh.stat();
    const name = path.basename(file);
    const scan: TranscriptScan = {
      file,
      name,
      size: stats.size,
      mtimeMs: stats.mtimeMs,
      header: null,
      headerLine: null,
      headerProblem: null,
      records: 0,
      malformed: { count: 0, lines: [] },
      torn: null,
      invalid: { count: 0, lines: [], first: null },
    };
    let sawRecord = false;
    for await (const { number, bytes, terminated } of splitLines(fh)) {
      if (bytes.length > MAX_PARSE_BYTES) {
        // Too long to judge: kept (never drop what might be a record), reported as unverifiable.
        scan.records += 1;
        if (!sawRecord) scan.headerProblem = `line ${number}: the first record is too long to check`;
        sawRecord = true;
        addLine(scan.invalid, number);
        scan.invalid.first ??= `line ${number}: too long to check (${bytes.length} bytes)`;
        if (keep) await keep(bytes);
        continue;
      }
      const text = bytes.toString('utf8');
      if (text.trim() === '') continue;
      const record = parseRecordText(text);
      if (record === null) {
        if (terminated) addLine(scan.malformed, number);
        else scan.torn = { line: number, bytes: bytes.length };
        continue;
      }
      scan.records += 1;
      if (keep) await keep(bytes);
      if (!sawRecord) {
        sawRecord = true;
        if (record.type === 'session') {
          scan.header = record as unknown as TranscriptHeader;
          scan.headerLine = number;
          scan.headerProblem = headerProblemOf(record, name, headerValidator);
          continue;
        }
        scan.headerLine = number;
        scan.headerProblem = `line ${number}: the first record is a "${String(record.type)}" entry, not the session header`;
      }
      if (!entryValidator(record)) {
        addLine(scan.invalid, number);
        scan.invalid.first ??= `line ${number}: ${describeSchemaErrors(entryValidator.errors)[0] ?? 'invalid'}`;
      }
    }
    return scan;
  } finally {
    await fh.close();
  }
}

function headerProblemOf(record: Record<string, unknown>, fileName: string, validate: ReturnType<typeof schemaValidator>): string | null {
  if (!validate(record)) return `the header does not match transcript-header.schema.json: ${describeSchemaErrors(validate.errors).slice(0, 3).join('; ')}`;
  const id = String(record.id);
  const matches = fileName === `${id}${TRANSCRIPT_SUFFIX}` || (fileName.startsWith(`${id}${THREAD_INFIX}`) && fileName.endsWith(TRANSCRIPT_SUFFIX));
  return matches ? null : `the header is for session ${id}, which does not match the file name`;
}

/** What transcript readers count as a record: a JSON object with a string `type`. */
function parseRecordText(text: string): Record<string, unknown> | null {
  try {
    const value: unknown = JSON.parse(text.trim());
    if (typeof value !== 'object' || value === null || Array.isArray(value)) return null;
    return typeof (value as { type?: unknown }).type === 'string' ? (value as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

function addLine(list: { count: number; lines: number[] }, line: number): void {
  list.count += 1;
  if (list.lines.length < MAX_LINES_LISTED) list.lines.push(line);
}

/** Lines as exact bytes without their `\n`; the last one may be unterminated (a torn tail). */
async function* splitLines(fh: FileHandle): AsyncGenerator<{ number: number; bytes: Buffer; terminated: boolean }> {
  let pending: Buffer[] = [];
  let number = 0;
  for await (const chunk of fh.createReadStream({ highWaterMark: READ_CHUNK_BYTES, autoClose: false }) as AsyncIterable<Buffer>) {
    let start = 0;
    for (let newline = chunk.indexOf(NEWLINE, start); newline !== -1; newline = chunk.indexOf(NEWLINE, start)) {
      pending.push(chunk.subarray(start, newline));
      number += 1;
      yield { number, bytes: Buffer.concat(pending), terminated: true };
      pending = [];
      start = newline + 1;
    }
    if (start < chunk.length) pending.push(Buffer.from(chunk.subarray(start)));
  }
  if (pending.length > 0) yield { number: number + 1, bytes: Buffer.concat(pending), terminated: false };
}

/** Gathers record lines and writes them in large chunks. */
class ChunkedWriter {
  private parts: Buffer[] = [];
  private size = 0;
  private static readonly NEWLINE_BYTES = Buffer.from('\n');

  constructor(private readonly fh: FileHandle) {}

  async line(bytes: Buffer): Promise<void> {
    this.parts.push(bytes, ChunkedWriter.NEWLINE_BYTES);
    this.size += bytes.length + 1;
    if (this.size >= WRITE_CHUNK_BYTES) await this.flush();
  }

  async flush(): Promise<void> {
    if (this.parts.length === 0) return;
    const data = Buffer.concat(this.parts);
    this.parts = [];
    this.size = 0;
    let offset = 0;
    while (offset < data.length) {
      const { bytesWritten } = await this.fh.write(data, offset, data.length - offset);
      if (bytesWritten <= 0) throw Object.assign(new Error('write made no progress'), { code: 'EIO' });
      offset += bytesWritten;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Helpers

function entryFromHeader(scan: TranscriptScan, usable: UsableHeader): SessionEntry {
  const entry: SessionEntry = { sessionId: usable.sessionId, sessionFile: scan.name, updatedAt: Math.max(0, Math.floor(scan.mtimeMs)) };
  if (usable.startedAt !== null && usable.startedAt >= 0) entry.sessionStartedAt = usable.startedAt;
  return entry;
}

/** Header time first (the instance's start), file time to break ties, then the name. */
function isNewer(a: TranscriptScan, aHeader: UsableHeader, b: TranscriptScan, bHeader: UsableHeader): boolean {
  const at = aHeader.startedAt ?? -1;
  const bt = bHeader.startedAt ?? -1;
  if (at !== bt) return at > bt;
  if (a.mtimeMs !== b.mtimeMs) return a.mtimeMs > b.mtimeMs;
  return a.name > b.name;
}

function numberOr(value: unknown, fallback: number): number {
  return typeof value === 'number' && Number.isFinite(value) ? value : fallback;
}

function lockReasons(info: LockInfo): string[] {
  const reasons: string[] = [];
  if (info.holderAlive === false) reasons.push('held by a dead process');
  if (info.stale) reasons.push('stale (not refreshed)');
  if (info.overHeld) reasons.push('past its max hold');
  return reasons;
}

async function ownerRecordProblem(lockPath: string): Promise<string | null> {
  let bytes: Buffer | null;
  try {
    bytes = await readOrNull(path.join(lockPath, 'owner.json'));
  } catch (err) {
    if (err instanceof SwitchboardError && err.code === 'STORE_CORRUPT') return 'not a regular file';
    throw err;
  }
  if (bytes === null) return null; // between mkdir and writing the record: normal
  let value: unknown;
  try {
    value = JSON.parse(bytes.toString('utf8'));
  } catch {
    return 'not JSON';
  }
  const validate = schemaValidator('lock-owner');
  return validate(value) ? null : describeSchemaErrors(validate.errors).slice(0, 3).join('; ');
}

async function listFolder(dir: string): Promise<FolderListing | null> {
  let entries;
  try {
    entries = await fsp.readdir(dir, { withFileTypes: true });
  } catch (err) {
    if (errnoOf(err) === 'ENOENT') return null;
    throw err;
  }
  const files = entries.filter((e) => e.isFile()).map((e) => e.name).sort();
  const dirs = entries.filter((e) => e.isDirectory()).map((e) => e.name).sort();
  const others = entries.filter((e) => !e.isFile() && !e.isDirectory()).map((e) => ({ name: e.name, kind: fileKindOf(e) })).sort((a, b) => (a.name < b.name ? -1 : 1));
  return { files, dirs, others };
}

async function statOrNull(file: string): Promise<{ size: number; mtimeMs: number; ctimeMs: number } | null> {
  try {
    return await fsp.stat(file);
  } catch (err) {
    if (errnoOf(err) === 'ENOENT') return null;
    throw err;
  }
}

/** A regular file's bytes (never through a link, never waiting on a FIFO: STORE_CORRUPT), null when missing. */
async function readOrNull(file: string): Promise<Buffer | null> {
  try {
    return await readRegularFile(file);
  } catch (err) {
    if (errnoOf(err) === 'ENOENT') return null;
    throw err;
  }
}

/**
 * Keeps the current bytes of `file` as `<file>.<tag>-<ts>` (ts as in archive names): a COPY into
 * a new regular file (fsynced), never a hard link, so a kept original can never be a link to
 * something else. `file` must be a regular file (opened without following a link). An existing
 * name is never overwritten (the time moves on by 1 ms).
 */
async function keepOriginal(file: string, tag: 'bak' | 'corrupt', now: number, options: { throughLink?: boolean } = {}): Promise<string> {
  const dir = path.dirname(file);
  const base = path.basename(file);
  for (let attempt = 0; attempt < MAX_NAME_ATTEMPTS; attempt += 1) {
    const target = resolveInside(dir, `${base}.${tag}-${formatArchiveTimestamp(now + attempt)}`);
    try {
      await copyRegularFile(file, target, FILE_MODE, options);
    } catch (err) {
      if (errnoOf(err) === 'EEXIST' && (await lstatKind(target)) !== null) continue;
      throw err;
    }
    await fsyncFolder(dir);
    return target;
  }
  throw new SwitchboardError('IO', `no free name to keep ${file} near ${new Date(now).toISOString()}`, { hint: 'check the clock (--now)' });
}

/**
 * A copy of what a symlink points at, when that is a regular file (read only: a FIFO or device
 * target is not opened for long, a dangling link has nothing to keep); null when there is nothing.
 */
async function keepLinkTarget(link: string, tag: 'bak' | 'corrupt', now: number): Promise<string | null> {
  try {
    return await keepOriginal(link, tag, now, { throughLink: true });
  } catch (err) {
    if (errnoOf(err) === 'ENOENT' || (err instanceof SwitchboardError && err.code === 'STORE_CORRUPT') || errnoOf(err) === 'ELOOP') return null;
    throw err;
  }
}

/**
 * Temp in the folder (named like write-file-atomic's, so a leftover is a known temp), fsync,
 * rename over the target, fsync the folder. Not write-file-atomic itself: that one resolves a
 * symlink at the target and replaces what it points at; rename(2) replaces the name itself.
 */
async function replaceWholeFile(target: string, text: string): Promise<void> {
  const dir = path.dirname(target);
  for (let attempt = 1; ; attempt += 1) {
    const temp = resolveInside(dir, `${path.basename(target)}.${randomBytes(4).readUInt32BE(0)}`);
    let fh: FileHandle;
    try {
      fh = await fsp.open(temp, fsConstants.O_WRONLY | fsConstants.O_CREAT | fsConstants.O_EXCL | fsConstants.O_NOFOLLOW, FILE_MODE);
    } catch (err) {
      if (errnoOf(err) === 'EEXIST' && attempt < 10) continue;
      throw err;
    }
    try {
      try {
        await fh.writeFile(text, 'utf8'); // loops until every byte is written (a short write is not success)
        await fh.sync();
      } finally {
        await fh.close();
      }
      await fsp.rename(temp, target);
    } catch (err) {
      await fsp.unlink(temp).catch(() => undefined);
      throw err;
    }
    await fsyncFolder(dir);
    return;
  }
}

async function fsyncFolder(dir: string): Promise<void> {
  try {
    await nodeStoreFileSystem.fsyncPath(dir);
  } catch (err) {
    if (!FOLDER_FSYNC_UNSUPPORTED.has(errnoOf(err) ?? '')) throw err;
  }
}

function isProcessAlive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return errnoOf(err) === 'EPERM';
  }
}


/** File-system errors are IO (exit 74), not bugs. */
function asSwitchboardError(err: unknown): SwitchboardError {
  if (err instanceof SwitchboardError) return err;
  const errno = errnoOf(err);
  if (errno !== undefined) return new SwitchboardError('IO', `${err instanceof Error ? err.message : String(err)}`, { cause: err, details: { errno } });
  return toSwitchboardError(err);
}

function describeError(err: unknown): string {
  const error = asSwitchboardError(err);
  return `${error.code}: ${error.message}`;
}
