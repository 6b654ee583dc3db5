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
//   5. orphaned transcripts with a usable header are adopted (their key has no entry, or one that
//      is not an object), become the current instance again (their key's entry names a transcript
//      that is gone and is older), or are archived as <file>.reset.<ts> (an older instance a
//      rotation left behind);
//   0. a symlink, FIFO or socket where a store file belongs is never followed or opened: a link's
//      target bytes (when it is a regular file) are COPIED to <file>.bak-<ts> (sessions.json:
//      .corrupt-<ts>), then the name is removed — sessions.json is replaced by its restored copy
//      in one rename — so nothing outside the state dir is ever written; folders are reported only;
//   6. an entry whose transcript is missing (or empty) gets a new transcript: the header and one
//      `custom` entry (customType "doctor") saying that the history was lost — exactly what the
//      next message would create, plus a visible note. A transcript archived as `.deleted.<ts>`
//      means a deletion was interrupted: reported only, `sessions delete KEY` finishes it.
//
// Like cacache's `verify`, the check is a list of named steps (one module per kind of file), each
// adding its part of the report for one store; this file is the driver.

import { promises as fsp } from 'node:fs';
import path from 'node:path';
import { SwitchboardError, asSwitchboardError, normalizeAgentId } from '../../core/index.js';
import { findUnknownKeys } from '../../config/index.js';
import { queueConfigWarnings } from '../../policy/index.js';
import { journalPathFor, type StoreLocation } from '../../store/index.js';
import { knownAgentIds, storeFor, type EngineContext } from '../context.js';
import { selectStores, type StoreSelection } from '../session-list.js';
import { checkEntries } from './entries.js';
import { describeError, listFolder, statOrNull } from './files.js';
import { checkJournal } from './journal.js';
import { checkRemovedMemory } from './removed-memory.js';
import { checkNonRegular } from './links.js';
import { checkLocks } from './locks.js';
import { checkOrphans } from './orphans.js';
import { checkStoreFile, checkStoreSchema } from './registry.js';
import { checkSharedDm } from './shared-dm.js';
import type { DoctorOptions, DoctorProblemKind, DoctorReport, DoctorStoreReport } from './report.js';
import { StoreCheck } from './store-check.js';
import { checkLeftovers } from './leftovers.js';
import { checkTranscripts, scanTranscripts } from './transcripts.js';

export type { DoctorChange, DoctorChangeAction, DoctorOptions, DoctorProgress, DoctorProblem, DoctorProblemKind, DoctorReport, DoctorStoreReport } from './report.js';

interface DoctorStep {
  /** For the report when the step itself fails: "could not <what>". */
  what: string;
  /** Steps that judge references need a readable sessions.json. */
  needsStore?: boolean;
  run: (doc: StoreCheck) => Promise<void>;
}

/** In this order: each repair runs under the lock that guards its file, and later steps build on earlier ones. */
const STEPS: readonly DoctorStep[] = [
  { what: 'check for links and other non-regular files', run: checkNonRegular },
  { what: 'check the locks', run: checkLocks },
  { what: 'check for leftovers of interrupted writes', run: checkLeftovers },
  { what: 'read the transcripts', run: scanTranscripts },
  { what: 'check sessions.json', run: checkStoreFile },
  { what: 'check the journal', needsStore: true, run: checkJournal },
  { what: 'check the duplicate memory of removed sessions', run: checkRemovedMemory },
  { what: 'check the transcripts', run: checkTranscripts },
  { what: 'check for orphaned transcripts', needsStore: true, run: checkOrphans },
  { what: 'check the entries', needsStore: true, run: checkEntries },
  { what: 'check sessions.json against its schema', needsStore: true, run: checkStoreSchema },
  { what: 'check for DM sessions several senders share', needsStore: true, run: checkSharedDm },
];

/** Checks (and with `repair`, fixes) the selected stores; never throws for a damaged store. */
export async function runDoctor(ctx: EngineContext, options: DoctorOptions = {}): Promise<DoctorReport> {
  const repair = options.repair === true;
  const warnings = [...findUnknownKeys(ctx.config).map((p) => `unknown key ${p} (ignored)`), ...ctx.table.warnings, ...queueConfigWarnings(ctx.config.messages?.queue)];
  const stores: DoctorStoreReport[] = [];
  for (const location of await doctorStores(ctx, options)) {
    stores.push(await checkStoreSettled(ctx, location, repair, options.onProgress));
  }
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

/** How often a check is made again while the store keeps changing under it. */
const CHECK_ATTEMPTS = 3;

/**
 * A check (without --repair) that found problems while sessions.json or its journal changed under
 * it has judged files of two moments: a writer's batch, or a `sessions delete` between its
 * archive and its store write, caught half-way (each is whole a moment later). It is made again,
 * up to CHECK_ATTEMPTS times, and the last one is reported. Before, a doctor from cron next to
 * busy writers now and then exited 65 with a missing or orphaned transcript that was not one.
 * A repair is not repeated: each of its steps re-checks what it changes under the store lock.
 */
async function checkStoreSettled(ctx: EngineContext, location: StoreLocation, repair: boolean, onProgress?: DoctorOptions['onProgress']): Promise<DoctorStoreReport> {
  for (let attempt = 1; ; attempt++) {
    const before = await storeIdentity(location);
    const report = await checkStore(ctx, location, repair, onProgress);
    if (repair || report.problems.length === 0 || attempt >= CHECK_ATTEMPTS) return report;
    if ((await storeIdentity(location)) === before) return report;
  }
}

/** Which sessions.json and journal are there (a replace or a batch changes them): for checkStoreSettled. */
async function storeIdentity(location: StoreLocation): Promise<string> {
  const parts: string[] = [];
  for (const file of [location.storePath, journalPathFor(location.storePath)]) {
    try {
      const stat = await fsp.lstat(file);
      parts.push(`${stat.ino}:${stat.size}:${stat.mtimeMs}:${stat.ctimeMs}`);
    } catch {
      parts.push('-');
    }
  }
  return parts.join(' ');
}

async function checkStore(ctx: EngineContext, location: StoreLocation, repair: boolean, onProgress?: DoctorOptions['onProgress']): Promise<DoctorStoreReport> {
  const doc = new StoreCheck(ctx, location, repair);
  const listed = await step(doc, 'list the sessions folder', async () => {
    const listing = await listFolder(location.sessionsDir);
    if (listing === null) return false;
    doc.report.exists = true;
    doc.listing = listing;
    return true;
  });
  if (listed !== true) return doc.report;
  // Each step on its own: one that fails (a permission error, say) does not hide the others.
  for (const [index, { what, needsStore, run }] of STEPS.entries()) {
    if (needsStore === true && doc.store === null) continue;
    if (onProgress !== undefined) {
      // A step that goes item by item reports its own count; the others count as steps.
      doc.progress = (done, total) => onProgress({ agentId: location.agentId, step: what, done, total });
      onProgress({ agentId: location.agentId, step: what, done: index, total: STEPS.length });
    }
    await step(doc, what, () => run(doc));
  }
  if (doc.store !== null) doc.report.sessions = Object.keys(doc.store).length;
  return doc.report;
}

async function step<T>(doc: StoreCheck, what: string, run: () => Promise<T>): Promise<T | undefined> {
  try {
    return await run();
  } catch (err) {
    const error = asSwitchboardError(err);
    doc.problem({ kind: 'check-failed', file: doc.location.sessionsDir, message: `could not ${what}: ${describeError(err)}`, repairable: false, error: { code: error.code, message: error.message } });
    return undefined;
  }
}
