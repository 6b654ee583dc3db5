// Reading sessions.json strictly: the parser that never mistakes a damaged store for {} (empty,
// truncated, NULs, not UTF-8, not an object → STORE_CORRUPT; one entry that is not an object is
// that entry's problem, see NotAnObjectEntry), the serialiser, the
// lock-free reader, and the STORE_CORRUPT / IO errors the whole store path reports.

import { lstatSync } from 'node:fs';
import path from 'node:path';
import { MAX_JSON_DEPTH, SwitchboardError, errnoOf, jsonDepthExceeds, nodeCrypto } from '../core/index.js';
import { asStoredEntry, type SessionStore } from './session-entry.js';
import { isTooLargeToRead } from './regular-file.js';
import { fileSystemFor, type StoreFileSystem } from './store-fs.js';

// ---------------------------------------------------------------------------------------------
// Errors

const REPAIR_HINT =
  'run `switchboard doctor --repair` to restore the last good copy (sessions.json.bak) or rebuild the entries from transcript headers';

function storeCorrupt(storePath: string, reason: string, sizeBytes: number): SwitchboardError {
  return new SwitchboardError('STORE_CORRUPT', `session store ${storePath} is damaged: ${reason}; it was left untouched`, {
    hint: REPAIR_HINT,
    details: { path: storePath, reason, sizeBytes },
  });
}

/**
 * sessions.json itself is left as it was; a record a command wrote before it (a reset's first
 * line, an archive, a batch's records) may be down, and the next write or doctor completes it.
 */
const LEFT_AS_IT_WAS = 'sessions.json was left as it was; `switchboard doctor` shows anything written before it, which the next write or `doctor --repair` completes';

function ioHint(errno: string | undefined): string {
  switch (errno) {
    case 'ENOSPC':
    case 'EDQUOT':
      return `the disk (or quota) is full: free some space and retry; ${LEFT_AS_IT_WAS}`;
    case 'EFBIG':
      return `a file reached the process's file-size limit (ulimit -f) or the file system's largest file: raise it and retry; ${LEFT_AS_IT_WAS}`;
    case 'EROFS':
      return `the file system is mounted read-only; ${LEFT_AS_IT_WAS}`;
    case 'EACCES':
    case 'EPERM':
      return 'permission denied: check the owner, mode and immutable flags of the store folder and files';
    case 'EIO':
      return `the device reported an I/O error: check the disk; ${LEFT_AS_IT_WAS}`;
    default:
      return `retry once the cause is fixed; ${LEFT_AS_IT_WAS}`;
  }
}

export function ioError(err: unknown, action: string, filePath: string): SwitchboardError {
  if (err instanceof SwitchboardError) return err;
  const errno = (err as NodeJS.ErrnoException | undefined)?.code;
  const reason = errno ?? (err instanceof Error ? err.message : String(err));
  return new SwitchboardError('IO', `cannot ${action} ${filePath}: ${reason}`, {
    cause: err,
    hint: ioHint(errno),
    details: { path: filePath, errno },
  });
}

// ---------------------------------------------------------------------------------------------
// Parsing and serialising

const strictUtf8 = new TextDecoder('utf-8', { fatal: true });

export interface ParsedStoreFile {
  /** Decoded text, BOM stripped; compared with the next serialisation to skip identical writes. */
  text: string;
  store: SessionStore;
}

export function decodeAndParse(bytes: Uint8Array, storePath: string): ParsedStoreFile {
  if (bytes.length === 0) throw storeCorrupt(storePath, 'the file is empty', 0);
  if (bytes.includes(0)) throw storeCorrupt(storePath, 'the file contains NUL bytes', bytes.length);
  let text: string;
  try {
    text = strictUtf8.decode(bytes);
  } catch {
    throw storeCorrupt(storePath, 'the file is not valid UTF-8', bytes.length);
  }
  if (text.trim() === '') throw storeCorrupt(storePath, 'the file holds only whitespace', bytes.length);
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    throw storeCorrupt(storePath, `the file is not JSON (${(err as Error).message})`, bytes.length);
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
    throw storeCorrupt(storePath, 'the top level is not a JSON object', bytes.length);
  }
  // JSON.parse reads any depth, but every write of the store (and the entry hashes, copies and
  // schema checks before it) recurses and overflowed the stack: one such value made each command
  // that touched the store an INTERNAL error, and doctor could not check it. No entry switchboard
  // or OpenClaw writes comes near the bound messages and configs have.
  if (jsonDepthExceeds(parsed)) throw storeCorrupt(storePath, `values are nested more than ${MAX_JSON_DEPTH} levels deep`, bytes.length);
  return { text, store: withStoredEntries(parsed as Record<string, unknown>) };
}

/**
 * The parsed top level with every entry that is not an object held as a NotAnObjectEntry: one
 * such entry is STORE_CORRUPT for that session (sessionEntryProblem), never for the whole store,
 * and is written back as it was.
 */
function withStoredEntries(store: Record<string, unknown>): SessionStore {
  // Keys, not entries: a [key, value] pair per session (10 000 of them) was garbage to collect.
  for (const sessionKey of Object.keys(store)) {
    const entry = store[sessionKey];
    if (entry === null || typeof entry !== 'object' || Array.isArray(entry)) store[sessionKey] = asStoredEntry(entry);
  }
  return store as SessionStore;
}

/** The store a text this module parsed before holds, parsed again (a fresh working copy). */
export function reparseStoreText(text: string): SessionStore {
  return withStoredEntries(JSON.parse(text) as Record<string, unknown>);
}

/** Validates sessions.json bytes; anything but an object is STORE_CORRUPT. */
export function parseSessionStore(bytes: Uint8Array, storePath: string): SessionStore {
  return decodeAndParse(bytes, storePath).store;
}

/** The on-disk form: 2-space JSON with a final newline. */
/**
 * The text of a store. `keepNonFinite`: the store may hold numbers JSON.parse read as ±Infinity
 * (`1e999`, in an entry some other program wrote): JSON.stringify would write them as null, and an
 * unusable entry is written back as it was — so they are written as ±1e999 (the same value once
 * read). Only then is the slower replacer used (see mayHoldNonFinite).
 */
export function serializeSessionStore(store: SessionStore, keepNonFinite = false): string {
  if (!keepNonFinite) return `${JSON.stringify(store, null, 2)}\n`;
  const tag = `\u0000non-finite-${nodeCrypto().randomUUID()}`;
  const text = JSON.stringify(store, (_key, value: unknown) => (typeof value === 'number' && !Number.isFinite(value) ? `${tag}${value > 0 ? '+' : '-'}` : value), 2);
  return `${text.replaceAll(JSON.stringify(`${tag}+`), '1e999').replaceAll(JSON.stringify(`${tag}-`), '-1e999')}\n`;
}

/**
 * A number literal JSON.parse reads as ±Infinity has an exponent of three digits or more, ending
 * the token (so hex ids like `…5e123-…` do not match; a 309-digit literal without an exponent is
 * not looked for). A false match only costs the slower replacer.
 */
const NON_FINITE_HINT = /[eE]\+?\d{3,}[\s,}\]]/;

/** Whether a store text may hold numbers that parse as ±Infinity (a quick test of the text, for writers). */
export function mayHoldNonFinite(text: string): boolean {
  return NON_FINITE_HINT.test(text);
}

// ---------------------------------------------------------------------------------------------
// Readers

export interface ReadSessionStoreOptions {
  fs?: StoreFileSystem;
}

/** Raw bytes of the store, or null when it does not exist yet (a new store). */
export async function readStoreBytes(fs: StoreFileSystem, storePath: string): Promise<Buffer | null> {
  try {
    return await fs.readFile(storePath);
  } catch (err) {
    if (errnoOf(err) === 'ENOENT') return null;
    if (isTooLargeToRead(err)) throw storeCorrupt(storePath, String(err.details!.reason), Number(err.details!.sizeBytes));
    throw ioError(err, 'read', storePath);
  }
}

/**
 * Which version of sessions.json is on disk now (device, inode, size, change time), or undefined
 * when it cannot be told. Every writer replaces the file with a new one by rename, so an equal
 * version is the same content: a reader that polls can skip the read and parse of an unchanged
 * registry, which for a large store is most of its cost.
 */
export function storeFileVersion(storePath: string): string | undefined {
  try {
    const stat = lstatSync(storePath, { bigint: true });
    return `${stat.dev}:${stat.ino}:${stat.size}:${stat.ctimeNs}:${stat.mtimeNs}`;
  } catch {
    return undefined;
  }
}

/**
 * Reads sessions.json for decisions. Missing → `{}` (a new store); empty, truncated, garbage,
 * NULs or not an object → STORE_CORRUPT. No lock needed: writers only ever rename whole files.
 */
export async function readSessionStore(storePath: string, options: ReadSessionStoreOptions = {}): Promise<SessionStore> {
  const absolutePath = path.resolve(storePath);
  const bytes = await readStoreBytes(options.fs ?? fileSystemFor(absolutePath), absolutePath);
  return bytes === null ? {} : decodeAndParse(bytes, absolutePath).store;
}
