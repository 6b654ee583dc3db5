// Where every store file lives: state dir, per-agent sessions folder, sessions.json, transcripts
// and archives. Ids from outside never leave their folder: each name goes through resolveInside().

import { mkdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { SwitchboardError, expandHome, normalizeAgentId, previewValue as preview, resolveStateDir, type StateDirOptions } from '../core/index.js';

// Where the state dir is lives in core (the CLI needs it before it loads the store); part of store's face.
export { DEFAULT_STATE_DIR_NAME, STATE_DIR_ENV, expandHome, resolveStateDir, type StateDirOptions } from '../core/index.js';

/** Folders the store creates are private to the user… */
export const DIR_MODE = 0o700;
/** …and so are the files it writes. */
export const FILE_MODE = 0o600;

export const SESSIONS_FILE_NAME = 'sessions.json';
export const TRANSCRIPT_SUFFIX = '.jsonl';
export const THREAD_INFIX = '-topic-';

/**
 * `sessionId` grammar, OpenClaw 2026.9.6's (validateSessionId's SAFE_SESSION_ID_RE; 2026.7.1's
 * ASCII one is part of it): a letter or digit of any script, then letters, digits, combining
 * marks, `.`, `_`, `-`, at most 128 code points. No separator, no leading dot, never `..`, no
 * space, control or format character: one plain file-name segment. isSessionId adds what a
 * pattern cannot say. switchboard itself creates lower-case UUID v4 ids.
 */
export const SESSION_ID_PATTERN = /^[\p{L}\p{N}][\p{L}\p{N}\p{M}._-]{0,127}$/u;

/** Most file systems refuse names longer than 255 bytes; we refuse them first, as bad input. */
export const MAX_FILE_NAME_BYTES = 255;

/**
 * Whether `value` is a session id: the one rule every reader of a stored or given id applies,
 * exactly OpenClaw 2026.9.6's for an id it accepts and writes — SESSION_ID_PATTERN; in Unicode
 * normal form C (one spelling per name: `é` as one code point, not `e` + accent, which OpenClaw
 * refuses and some file systems would turn into the other); `<id>.jsonl` at most 255 bytes (the
 * transcript must be a valid file name: 128 code points of another script can be 512 bytes); and
 * `<id>.jsonl` not the name of a compaction checkpoint's copy (`<x>.checkpoint.<uuid>.jsonl`),
 * which would make the transcript an artifact of another session. OpenClaw trims an id given to
 * it first; a stored id is taken as it is, so one with spaces around it is not an id here.
 */
export function isSessionId(value: unknown): value is string {
  if (typeof value !== 'string') return false;
  // Nearly every id is ASCII (the ids switchboard mints, most of OpenClaw's), and an ASCII one
  // that fits the pattern is in NFC with a short file name: only the checkpoint test is left.
  // (Every listing and write checks every entry's id; the full test is several times slower.)
  const ascii = ASCII_SESSION_ID.test(value);
  if (!ascii && !SESSION_ID_PATTERN.test(value)) return false;
  const transcript = `${value}${TRANSCRIPT_SUFFIX}`;
  if (value.includes('.checkpoint.') && CHECKPOINT_NAME.test(transcript)) return false;
  return ascii || (value === value.normalize('NFC') && Buffer.byteLength(transcript, 'utf8') <= MAX_FILE_NAME_BYTES);
}

/** SESSION_ID_PATTERN for ASCII ids alone. */
const ASCII_SESSION_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

export type ArchiveReason = 'reset' | 'deleted';
const ARCHIVE_REASONS: readonly ArchiveReason[] = ['reset', 'deleted'];

export interface StoreLocationOptions {
  /** `session.store` from the config: a sessions.json path that may contain `{agentId}`. */
  storeTemplate?: string;
  homeDir?: string;
}

export interface StoreLocation {
  /** The normalised agent id the location was built for. */
  agentId: string;
  /** Folder holding sessions.json, transcripts, archives and locks of this agent. */
  sessionsDir: string;
  /** Absolute path of sessions.json. */
  storePath: string;
}

function badInput(message: string, details: Record<string, unknown>): SwitchboardError {
  return new SwitchboardError('BAD_INPUT', message, { details });
}

/** A name that is one path segment exactly as written: it starts alphanumeric and holds no separator. */
const PLAIN_NAME = /^[A-Za-z0-9][A-Za-z0-9._~@+,=-]*$/;

/** path.resolve(dir), remembered for the folder asked last (every name of a store is in one folder). */
let lastFolder: { dir: string; resolved: string } | undefined;
function resolvedFolder(dir: string): string {
  if (lastFolder?.dir === dir) return lastFolder.resolved;
  const resolved = path.resolve(dir);
  // A relative folder depends on the working directory, which may change: not remembered.
  if (path.isAbsolute(dir)) lastFolder = { dir, resolved };
  return resolved;
}

/**
 * Joins ONE file-name segment onto `dir` and proves the result is a direct child of `dir`.
 * Every store path built from outside input goes through here, so a single function decides
 * what may not escape: separators, `.`/`..`, NUL, absolute names, over-long names.
 */
export function resolveInside(dir: string, name: string): string {
  const base = resolvedFolder(dir);
  // A plain name (no separator, no leading dot, nothing but ASCII letters, digits and -_.~@+,=:
  // a transcript, a lock, an archive) joins as it is; the checks below would come to the same
  // path by normalising and comparing (10 000 transcripts of a listing: ~40 ms of path work).
  if (typeof name === 'string' && name.length <= MAX_FILE_NAME_BYTES && PLAIN_NAME.test(name)) return base.endsWith(path.sep) ? `${base}${name}` : `${base}${path.sep}${name}`;
  if (typeof name !== 'string' || name === '') {
    throw badInput('empty file name in a store path', { dir: base });
  }
  if (name.includes('\0')) {
    throw badInput(`file name "${preview(name)}" contains a NUL byte`, { dir: base, name: preview(name) });
  }
  if (name === '.' || name === '..' || name.includes('/') || name.includes('\\') || path.isAbsolute(name)) {
    throw badInput(`file name "${preview(name)}" would leave ${base}`, { dir: base, name: preview(name) });
  }
  if (Buffer.byteLength(name, 'utf8') > MAX_FILE_NAME_BYTES) {
    throw badInput(`file name of ${Buffer.byteLength(name, 'utf8')} bytes is too long (max ${MAX_FILE_NAME_BYTES})`, {
      dir: base,
      name: preview(name),
    });
  }
  const resolved = path.join(base, name);
  // Belt and braces: whatever the checks above missed, the relative path must be the name itself.
  const relative = path.relative(base, resolved);
  if (relative !== name || relative.split(path.sep)[0] === '..' || path.isAbsolute(relative)) {
    throw badInput(`file name "${preview(name)}" would leave ${base}`, { dir: base, name: preview(name) });
  }
  return resolved;
}

/**
 * `mkdir -p` that always ends: Node's recursive mkdir retries for ever (synchronously, deaf to
 * signals) where a parent exists but the folder cannot be made in it and the kernel says ENOENT
 * — a state dir under /proc did that. Here each level is made once, parents first, and the
 * second ENOENT is the error. An existing folder is left as it is; an existing other file is EEXIST.
 */
export function makeDirectories(dir: string, mode: number = DIR_MODE): void {
  try {
    mkdirSync(dir, { mode });
    return;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EEXIST' && isDirectory(dir)) return;
    const parent = path.dirname(dir);
    if (code !== 'ENOENT' || parent === dir) throw err;
    makeDirectories(parent, mode);
  }
  try {
    mkdirSync(dir, { mode });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST' && isDirectory(dir)) return;
    throw err;
  }
}

function isDirectory(dir: string): boolean {
  try {
    return statSync(dir).isDirectory();
  } catch {
    return false;
  }
}

/** Creates a folder (and missing parents) private to the user; existing folders are left as they are. */
export async function ensureDirectory(dir: string): Promise<string> {
  try {
    makeDirectories(dir);
  } catch (err) {
    throw new SwitchboardError('IO', `cannot create folder ${dir}: ${(err as Error).message}`, {
      cause: err,
      details: { path: dir, errno: (err as NodeJS.ErrnoException).code },
    });
  }
  return dir;
}

/** Resolves and creates (0700) the state dir. */
export async function ensureStateDir(options: StateDirOptions = {}): Promise<string> {
  return ensureDirectory(resolveStateDir(options));
}

/** `<state>/agents/<agentId>/sessions`, the agent id normalised and each segment checked. */
export function resolveAgentSessionsDir(stateDir: string, agentId: unknown): string {
  const agentsDir = resolveInside(path.resolve(stateDir), 'agents');
  return resolveInside(resolveInside(agentsDir, normalizeAgentId(agentId)), 'sessions');
}

/**
 * Where an agent's store lives. `session.store` (OpenClaw-compatible) names the sessions.json
 * file; `{agentId}` is replaced by the normalised id, `~` is expanded and relative paths are
 * taken from the state dir. A template ending in a separator names the folder instead.
 */
export function resolveStoreLocation(stateDir: string, agentId: unknown, options: StoreLocationOptions = {}): StoreLocation {
  const normalisedAgentId = normalizeAgentId(agentId);
  const template = options.storeTemplate;
  if (template === undefined || template.trim() === '') {
    const sessionsDir = resolveAgentSessionsDir(stateDir, normalisedAgentId);
    return { agentId: normalisedAgentId, sessionsDir, storePath: resolveInside(sessionsDir, SESSIONS_FILE_NAME) };
  }
  if (template.includes('\0')) {
    throw badInput('session.store contains a NUL byte', { storeTemplate: preview(template) });
  }
  // The normalised id cannot contain separators or dots-only names, so substituting it cannot
  // climb out of what the (trusted) config author wrote.
  const substituted = expandHome(template.trim().split('{agentId}').join(normalisedAgentId), options.homeDir);
  const namesFolder = substituted.endsWith('/') || substituted.endsWith(path.sep);
  const absolute = path.resolve(path.resolve(stateDir), substituted);
  const sessionsDir = namesFolder ? absolute : path.dirname(absolute);
  const fileName = namesFolder ? SESSIONS_FILE_NAME : path.basename(absolute);
  return { agentId: normalisedAgentId, sessionsDir, storePath: resolveInside(sessionsDir, fileName) };
}

/** Returns the id if it is a session id (isSessionId), else throws BAD_INPUT. */
export function validateSessionId(sessionId: unknown): string {
  if (!isSessionId(sessionId)) {
    const shown = typeof sessionId === 'string' ? preview(sessionId) : typeof sessionId;
    throw badInput(`invalid sessionId "${shown}" (expected ${SESSION_ID_PATTERN.source}, in NFC, at most ${MAX_FILE_NAME_BYTES - TRANSCRIPT_SUFFIX.length} bytes, not a checkpoint name)`, { sessionId: shown });
  }
  return sessionId;
}

/** URI-encodes a thread/topic id for a file name; empty or unencodable ids are BAD_INPUT. */
export function encodeThreadId(threadId: unknown): string {
  if ((typeof threadId !== 'string' && typeof threadId !== 'number') || String(threadId) === '') {
    throw badInput('thread id must be a non-empty string or number', { threadId: typeof threadId });
  }
  try {
    return encodeURIComponent(String(threadId));
  } catch (err) {
    // Lone UTF-16 surrogates cannot be encoded.
    throw new SwitchboardError('BAD_INPUT', 'thread id is not valid Unicode', { cause: err });
  }
}

/** `<sessionsDir>/<sessionId>.jsonl` */
export function resolveTranscriptPath(sessionsDir: string, sessionId: string): string {
  return resolveInside(sessionsDir, `${validateSessionId(sessionId)}${TRANSCRIPT_SUFFIX}`);
}

/** `<sessionsDir>/<sessionId>-topic-<encodeURIComponent(threadId)>.jsonl` */
export function resolveThreadTranscriptPath(sessionsDir: string, sessionId: string, threadId: string | number): string {
  const name = `${validateSessionId(sessionId)}${THREAD_INFIX}${encodeThreadId(threadId)}${TRANSCRIPT_SUFFIX}`;
  return resolveInside(sessionsDir, name);
}

/** ISO-8601 UTC with `:` → `-` (file-name safe everywhere), e.g. `2026-01-02T03-04-05.678Z`. */
export function formatArchiveTimestamp(epochMs: number): string {
  const date = new Date(epochMs);
  if (!Number.isFinite(epochMs) || Number.isNaN(date.getTime())) {
    throw badInput(`invalid archive time ${String(epochMs)}`, { now: String(epochMs) });
  }
  return date.toISOString().replace(/:/g, '-');
}

/** `<file>.reset.<ts>` / `<file>.deleted.<ts>` in the same folder as `filePath`. */
export function archivePathFor(filePath: string, reason: ArchiveReason, epochMs: number): string {
  if (!ARCHIVE_REASONS.includes(reason)) {
    throw badInput(`invalid archive reason "${String(reason)}"`, { reason: String(reason) });
  }
  const absolute = path.resolve(filePath);
  return resolveInside(path.dirname(absolute), `${path.basename(absolute)}.${reason}.${formatArchiveTimestamp(epochMs)}`);
}

export interface ParsedArchiveName {
  /** Name of the file before it was archived. */
  originalName: string;
  reason: ArchiveReason;
  /** Epoch ms of the archive timestamp. */
  archivedAt: number;
}

const ARCHIVE_NAME = /^(.+)\.(reset|deleted)\.(\d{4}-\d{2}-\d{2}T\d{2})-(\d{2})-(\d{2}(?:\.\d{1,3})?Z)$/;

/** What doctor keeps of a file before repairing it: `<file>.bak-<ts>`, `sessions.json.corrupt-<ts>`. */
export type KeptCopyTag = 'bak' | 'corrupt';

/** The name of a copy doctor keeps (same timestamp format as archives). */
export function keptCopyName(fileName: string, tag: KeptCopyTag, epochMs: number): string {
  return `${fileName}.${tag}-${formatArchiveTimestamp(epochMs)}`;
}

const KEPT_COPY_NAME = /^(.+)\.(bak|corrupt)-(\d{4}-\d{2}-\d{2}T\d{2})-(\d{2})-(\d{2}(?:\.\d{1,3})?Z)$/;

/** Recognises keptCopyName() names (retention purges them like archives); null for anything else. */
export function parseKeptCopyName(fileName: string): { originalName: string; tag: KeptCopyTag; keptAt: number } | null {
  const match = KEPT_COPY_NAME.exec(fileName);
  if (match === null) return null;
  const keptAt = Date.parse(`${match[3]}:${match[4]}:${match[5]}`);
  if (Number.isNaN(keptAt)) return null;
  return { originalName: match[1]!, tag: match[2] as KeptCopyTag, keptAt };
}

/** Recognises archive names written by archivePathFor(); null for anything else. */
export function parseArchiveName(fileName: string): ParsedArchiveName | null {
  const match = ARCHIVE_NAME.exec(fileName);
  if (match === null) return null;
  const archivedAt = Date.parse(`${match[3]}:${match[4]}:${match[5]}`);
  if (Number.isNaN(archivedAt)) return null;
  return { originalName: match[1]!, reason: match[2] as ArchiveReason, archivedAt };
}

// OpenClaw's side files of a session instance (its own names, from its sessions/artifacts.ts
// and trajectory/paths.ts): not transcripts, and no store file of ours. The rule for keeping and
// removing them, which needs the store, is engine/session-artifacts.ts; here only the names.

/** `<transcript stem>.trajectory.jsonl`: OpenClaw's trajectory capture of a run (on by default). */
export const TRAJECTORY_SUFFIX = '.trajectory.jsonl';
/** `<transcript stem>.trajectory-path.json`: OpenClaw's pointer to that capture. */
export const TRAJECTORY_POINTER_SUFFIX = '.trajectory-path.json';
/** `<sessionId>.checkpoint.<uuid>.jsonl`: a compaction checkpoint's copy of the transcript (OpenClaw's COMPACTION_CHECKPOINT_TRANSCRIPT_RE). */
const CHECKPOINT_NAME = /^(.+)\.checkpoint\.([0-9a-f]{8}-[0-9a-f]{4}-[1-5][0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12})\.jsonl$/i;

export type SessionArtifactKind = 'trajectory' | 'trajectory-pointer' | 'checkpoint';

export interface SessionArtifactName {
  kind: SessionArtifactKind;
  /**
   * What the name leads back to: for a trajectory file and its pointer the transcript's stem
   * (`<sessionId>` or `<sessionId>-topic-<thread>`: OpenClaw derives both names from the
   * transcript's), for a checkpoint the sessionId of the instance it was taken from.
   */
  stem: string;
}

/**
 * Recognises OpenClaw's session artifact names; null for any other name (a transcript, an
 * archive, a lock …). An archived name (`….deleted.<ts>`) is an archive, not an artifact:
 * OpenClaw never archives these, it removes them once no entry references them.
 */
export function parseSessionArtifactName(name: string): SessionArtifactName | null {
  if (name.endsWith(TRAJECTORY_SUFFIX) && name.length > TRAJECTORY_SUFFIX.length) return { kind: 'trajectory', stem: name.slice(0, -TRAJECTORY_SUFFIX.length) };
  if (name.endsWith(TRAJECTORY_POINTER_SUFFIX) && name.length > TRAJECTORY_POINTER_SUFFIX.length) {
    return { kind: 'trajectory-pointer', stem: name.slice(0, -TRAJECTORY_POINTER_SUFFIX.length) };
  }
  const checkpoint = CHECKPOINT_NAME.exec(name);
  return checkpoint === null ? null : { kind: 'checkpoint', stem: checkpoint[1]! };
}

/** The trajectory capture and its pointer OpenClaw keeps next to transcript `transcriptName` (`<stem>.jsonl`). */
export function trajectoryArtifactNames(transcriptName: string): string[] {
  const stem = transcriptName.endsWith(TRANSCRIPT_SUFFIX) ? transcriptName.slice(0, -TRANSCRIPT_SUFFIX.length) : transcriptName;
  return [`${stem}${TRAJECTORY_SUFFIX}`, `${stem}${TRAJECTORY_POINTER_SUFFIX}`];
}
