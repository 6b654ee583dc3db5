// Step: sessions.json, the registry of sessions. A corrupt or lost one is restored from
// sessions.json.bak (when that parses and validates) or rebuilt from the transcript headers; the
// damaged bytes are kept as sessions.json.corrupt-<ts>.

import { promises as fsp } from 'node:fs';
import path from 'node:path';
import { SwitchboardError } from '../../core/index.js';
import { describeSchemaErrors, schemaValidator } from '../../config/index.js';
import { describeFileKind, isTooLargeToRead, lstatKind, parseSessionStore, repeatedTopLevelKeys, serializeSessionStore, withLock, type SessionStore } from '../../store/index.js';
import { rememberRecordedIds } from './recorded-ids.js';
import { keepLinkTarget, keepOriginal, readOrNull, replaceWholeFile, statOrNull } from './files.js';
import type { DoctorChange, RepairOutcome } from './report.js';
import { entryFromHeader, isNewer, type StoreCheck, type UsableHeader } from './store-check.js';
import type { TranscriptScan } from './transcript-scan.js';

export async function checkStoreFile(doc: StoreCheck): Promise<void> {
  const storePath = doc.location.storePath;
  const kind = await lstatKind(storePath);
  if (kind !== null && kind !== 'file') {
    // Never opened: a FIFO would block the read, a link would be read (and written) through.
    const target = kind === 'symlink' ? await fsp.readlink(storePath).catch(() => null) : null;
    const problem = doc.problem({
      kind: 'not-regular-file',
      file: storePath,
      message: `it is ${describeFileKind(kind)}${target !== null ? ` to ${target}` : ''}, not a regular file: every command refuses it (STORE_CORRUPT)${kind === 'directory' ? '; move it away by hand' : '; --repair keeps a copy of the bytes a link points at and restores the store from sessions.json.bak or the transcript headers'}`,
      repairable: kind !== 'directory',
    });
    if (doc.repair && kind !== 'directory') await doc.attempt([problem], () => restoreStore(doc));
    return;
  }
  let bytes: Buffer | null;
  try {
    bytes = await readOrNull(storePath);
  } catch (err) {
    if (!isTooLargeToRead(err)) throw err;
    const problem = doc.problem({ kind: 'store-corrupt', file: storePath, message: `${String(err.details!.reason)}; orphaned and missing transcripts are checked once it is readable`, repairable: true });
    if (doc.repair) await doc.attempt([problem], () => restoreStore(doc));
    return;
  }
  if (bytes === null) {
    const hasBackup = (await statOrNull(`${storePath}.bak`)) !== null;
    if (!hasBackup && doc.scans.size === 0) {
      doc.store = {}; // a store nobody wrote to yet
      return;
    }
    // ingest writes sessions.json before the first transcript, so this file was lost.
    const problem = doc.problem({
      kind: 'store-missing',
      file: storePath,
      message: `it does not exist, although the folder has ${doc.scans.size} transcript(s)${hasBackup ? ` and ${path.basename(storePath)}.bak` : ''}; orphaned and missing transcripts are checked once it is back`,
      repairable: true,
    });
    if (doc.repair) await doc.attempt([problem], () => restoreStore(doc));
    return;
  }
  let store: SessionStore;
  try {
    store = parseSessionStore(bytes, storePath);
  } catch (err) {
    if (!(err instanceof SwitchboardError && err.code === 'STORE_CORRUPT')) throw err;
    const reason = typeof err.details?.reason === 'string' ? err.details.reason : err.message;
    const problem = doc.problem({
      kind: 'store-corrupt',
      file: storePath,
      message: `${reason} (${bytes.length} bytes); orphaned and missing transcripts are checked once it is readable`,
      repairable: true,
    });
    if (doc.repair) await doc.attempt([problem], () => restoreStore(doc));
    return;
  }
  doc.store = store;
  await checkRepeatedKeys(doc, bytes);
}

/**
 * A key written twice: every reader takes its last entry, and the next write of the store drops
 * the others, so what a hand edit pasted twice (or a foreign writer wrote) is lost silently.
 * --repair keeps the file's bytes as sessions.json.bak-<ts> and writes the store as readers see it.
 */
async function checkRepeatedKeys(doc: StoreCheck, bytes: Buffer): Promise<void> {
  const repeated = repeatedTopLevelKeys(bytes.toString('utf8'));
  if (repeated.length === 0) return;
  const storePath = doc.location.storePath;
  const problems = repeated.map(({ key, lines }) =>
    doc.problem({
      kind: 'repeated-key',
      file: storePath,
      sessionKey: key,
      line: lines[0],
      lines,
      message: `"${key}" is written ${lines.length} times (lines ${lines.join(', ')}): every reader takes the one on line ${lines[lines.length - 1]}, and the next write of the store drops the others`,
      repairable: true,
    }),
  );
  if (!doc.repair) return;
  await doc.attempt(problems, () =>
    withLock(storePath, doc.storeLock(), async (handle) => {
      const current = await readOrNull(storePath);
      if (current === null || repeatedTopLevelKeys(current.toString('utf8')).length === 0) return { action: 'nothing to do: it was rewritten meanwhile', changes: [] };
      const store = parseSessionStore(current, storePath);
      const backup = await keepOriginal(storePath, 'bak', doc.now());
      await handle.verifyHeld();
      await replaceWholeFile(storePath, serializeSessionStore(store, true));
      doc.store = store;
      return {
        action: `rewritten with the entry readers use for each key; the file as it was is kept as ${path.basename(backup)}`,
        backup,
        changes: [{ action: 'kept', file: backup, from: storePath }, { action: 'rewrote', file: storePath }],
      };
    }),
  );
}

/**
 * Step (after the repairs): sessions.json against sessions.schema.json. Last, so that with
 * --repair it reports what is left — an entry that was not an object and has been replaced by an
 * adopted transcript's is no longer a finding.
 */
export async function checkStoreSchema(doc: StoreCheck): Promise<void> {
  const store = doc.store!;
  const storePath = doc.location.storePath;
  const validate = schemaValidator('sessions');
  // The JSON as it is in the file: an entry that is not an object is held in memory as one.
  if (validate(JSON.parse(JSON.stringify(store)))) return;
  const errors = describeSchemaErrors(validate.errors);
  doc.problem({
    kind: 'store-invalid',
    file: storePath,
    count: errors.length,
    message: `does not match sessions.schema.json: ${errors.slice(0, 5).join('; ')}${errors.length > 5 ? ` (and ${errors.length - 5} more)` : ''}`,
    repairable: false,
  });
}

/** sessions.json.bak, when it parses and matches the schema. */
async function goodBackup(doc: StoreCheck): Promise<SessionStore | null> {
  const backupPath = `${doc.location.storePath}.bak`;
  const bytes = await readOrNull(backupPath).catch((err: unknown) => {
    if (err instanceof SwitchboardError && err.code === 'STORE_CORRUPT') return null; // a link, a FIFO or too large: not a backup
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
export function restoreStore(doc: StoreCheck): Promise<RepairOutcome> {
  const storePath = doc.location.storePath;
  const base = path.basename(storePath);
  return withLock(storePath, doc.storeLock(), async (handle) => {
    const kind = await lstatKind(storePath);
    if (kind === 'directory') throw new SwitchboardError('STORE_CORRUPT', `${storePath} is a folder; left it alone`, { hint: 'move it away by hand' });
    // A link or FIFO is never opened as the store: only a link's target bytes are copied aside.
    // A file too large to read whole is damaged as it is, and its bytes are copied aside too.
    let tooLarge = false;
    const current =
      kind === 'file'
        ? await readOrNull(storePath).catch((err: unknown) => {
            if (!isTooLargeToRead(err)) throw err;
            tooLarge = true;
            return null;
          })
        : null;
    if (current !== null) {
      try {
        doc.store = parseSessionStore(current, storePath);
        return { action: 'nothing to do: it was repaired meanwhile', changes: [] };
      } catch {
        // still damaged
      }
    }
    const changes: DoctorChange[] = [];
    let backup: string | undefined;
    if (current !== null || tooLarge) {
      backup = await keepOriginal(storePath, 'corrupt', doc.now());
      changes.push({ action: 'kept', file: backup, from: storePath });
    } else if (kind === 'symlink') {
      backup = (await keepLinkTarget(storePath, 'corrupt', doc.now())) ?? undefined;
      if (backup !== undefined) changes.push({ action: 'kept', file: backup, from: storePath });
    }
    const fromBackup = await goodBackup(doc);
    const store = fromBackup ?? rebuildFromHeaders(doc);
    const remembered = await rememberRecordedIds(doc, store);
    await handle.verifyHeld();
    await replaceWholeFile(storePath, serializeSessionStore(store, true)); // rare: always keeps ±1e999 of a restored .bak
    doc.store = store;
    doc.storeRestored = true;
    changes.push({ action: fromBackup ? 'restored' : 'rebuilt', file: storePath });
    const entries = `${Object.keys(store).length} ${Object.keys(store).length === 1 ? 'entry' : 'entries'}`;
    // The backup is one write behind: what only the registry held (messages waiting in a queue) is
    // not in it, and cannot be had back from the damaged bytes. Said, not hidden.
    const how = fromBackup ? `restored from ${base}.bak (${entries}; it is one write behind: messages the last write queued are not in it)` : `rebuilt ${entries} from transcript headers (no usable ${base}.bak)`;
    const replaced = kind !== null && kind !== 'file' ? `; the ${describeFileKind(kind).replace(/^an? /, '')} in its place was replaced (never followed)` : '';
    const ids = remembered > 0 ? `; ${remembered} message id(s) recorded in the last five minutes are remembered again from the transcripts` : '';
    return { action: `${how}${ids}${replaced}${backup ? `; ${kind === 'symlink' ? 'the bytes the link pointed at' : 'damaged bytes'} kept as ${path.basename(backup)}` : ''}`, backup, changes };
  });
}

/** One entry per session key: the newest instance (header time, then file time) wins. */
export function rebuildFromHeaders(doc: StoreCheck): SessionStore {
  const store: SessionStore = {};
  const newest = new Map<string, { scan: TranscriptScan; usable: UsableHeader }>();
  for (const scan of doc.scans.values()) {
    const usable = doc.usableHeader(scan);
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
