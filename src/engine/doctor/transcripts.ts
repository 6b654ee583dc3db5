// Step: each transcript, line by line. A damaged one (torn tail, malformed lines) is rewritten
// under its session write lock with every line that parses as a record, byte for byte; the
// original is kept as <file>.bak-<ts>.

import { randomBytes } from 'node:crypto';
import { promises as fsp } from 'node:fs';
import path from 'node:path';
import { asSwitchboardError } from '../../core/index.js';
import { FILE_MODE, TRANSCRIPT_SUFFIX, fsyncFolder, lockPathFor } from '../../store/index.js';
import { isSessionArtifact, namedAmong } from '../session-artifacts.js';
import { describeError, keepOriginal } from './files.js';
import type { DoctorProblem, RepairOutcome } from './report.js';
import type { StoreCheck } from './store-check.js';
import { ChunkedWriter, scanTranscript, type TranscriptScan } from './transcript-scan.js';

export async function scanTranscripts(doc: StoreCheck): Promise<void> {
  // OpenClaw's trajectory captures and checkpoint copies end in .jsonl too, but are no transcripts:
  // not checked line by line, never orphans (session-artifacts.ts).
  const named = await namedAmong(doc.location, doc.store, doc.listing.files);
  const names = doc.listing.files.filter((name) => name.endsWith(TRANSCRIPT_SUFFIX) && !isSessionArtifact(name, named));
  for (const [index, name] of names.entries()) {
    if (index % 50 === 0) doc.progress(index, names.length);
    const file = doc.inside(name);
    try {
      const scan = await scanTranscript(file);
      if (scan !== null) doc.scans.set(name, scan);
    } catch (err) {
      const error = asSwitchboardError(err);
      doc.problem({ kind: 'check-failed', file, message: `could not read: ${describeError(err)}`, repairable: false, error: { code: error.code, message: error.message } });
    }
  }
  doc.report.transcripts = doc.scans.size;
}

export async function checkTranscripts(doc: StoreCheck): Promise<void> {
  for (const scan of doc.scans.values()) {
    const key = scan.header?.sessionKey;
    const withKey = typeof key === 'string' ? { sessionKey: key } : {};
    // While a live holder has the write lock, the last line may be an append in progress.
    const beingWritten = doc.liveLocks.has(lockPathFor(scan.file));
    const damage: DoctorProblem[] = [];
    if (scan.malformed.count > 0) {
      damage.push(
        doc.problem({
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
        doc.problem({
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
      doc.problem({ kind: 'invalid-header', file: scan.file, ...(scan.headerLine !== null ? { line: scan.headerLine } : {}), ...withKey, message: scan.headerProblem, repairable: false });
    }
    if (scan.invalid.count > 0) {
      doc.problem({
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
    if (damage.length > 0 && doc.repair) await doc.attempt(damage, () => repairTranscript(doc, scan));
  }
}

/**
 * Rewrites a damaged transcript under its session write lock: every line that parses as a
 * record is copied byte for byte into a temp file (a parseable last line gets its newline),
 * the temp is fsynced, the original is kept as `<file>.bak-<ts>` (a hard link to its inode),
 * and the temp is renamed over the file. The file is re-read inside the lock, so lines an
 * appender added since the check are kept too.
 */
function repairTranscript(doc: StoreCheck, scan: TranscriptScan): Promise<RepairOutcome> {
  const file = scan.file;
  return doc.withTranscript(file, scan.header?.sessionKey, async (handle) => {
    const temp = `${file}.doctor-${process.pid}-${randomBytes(4).toString('hex')}.tmp`;
    let fresh: TranscriptScan | null;
    try {
      const fh = await fsp.open(temp, 'wx', FILE_MODE);
      try {
        const writer = new ChunkedWriter(fh);
        fresh = await scanTranscript(file, writer);
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
      const backup = await keepOriginal(file, 'bak', doc.now());
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
