// What `switchboard doctor` reports: one problem per damaged thing, one change per file touched by
// --repair, grouped per store. The JSON shape is the public contract of `doctor --json`.

import type { ErrorCode } from '../../core/index.js';
import type { StoreSelection } from '../session-list.js';

export type DoctorProblemKind =
  /** sessions.json is empty, truncated, not JSON, has NUL bytes or its top level is not an object. */
  | 'store-corrupt'
  /** sessions.json is gone although the folder has transcripts or sessions.json.bak. */
  | 'store-missing'
  /** sessions.json parses but does not match sessions.schema.json. */
  | 'store-invalid'
  /** sessions.json writes a session key twice: readers take the last, the next write drops the others. */
  | 'repeated-key'
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
  /** A symlink, FIFO, socket, device or folder where a store file belongs, or anything but a folder at a lock's name (never followed or opened). */
  | 'not-regular-file'
  /** An entry of the wrong shape (not an object, sessionFile, sessionId, timestamps…): unusable, STORE_CORRUPT for that session. */
  | 'invalid-entry'
  /** Two or more keys name one transcript (sessionId or sessionFile), other than a cron job and its run alias: STORE_CORRUPT for each. */
  | 'shared-transcript'
  /** sessions.json.removed (the duplicate memory of removed sessions) is not JSON of its shape: read as empty. */
  | 'removed-memory-invalid'
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
  /** shared-transcript: every key that names the file. */
  sessionKeys?: string[];
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
  /** Findings that are not problems and leave the exit status alone (sessions several DM senders share under dmScope "main"). */
  warnings: string[];
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

/** Where doctor is: the store, the step, and how many of its items are done (for a progress display). */
export interface DoctorProgress {
  agentId: string;
  step: string;
  done: number;
  total: number;
}

export interface DoctorOptions extends StoreSelection {
  repair?: boolean;
  /** Called as steps start and as the long ones (reading every transcript) go. */
  onProgress?: (progress: DoctorProgress) => void;
  /** The config file in use (for the report); null when running on built-in defaults. */
  configPath?: string | null;
}

/** What one repair did: for the problem(s) it fixed, and the files it changed. */
export interface RepairOutcome {
  action: string;
  backup?: string;
  changes: DoctorChange[];
}
