// Fault test of issue 10 item 4, with real processes and real signals: a process holding the
// sessions.json lock is stopped (SIGSTOP) inside its replace, after its lock checks; other writer
// processes try to add entries meanwhile; then the frozen one is resumed (SIGCONT). Every entry
// acknowledged by any writer must be in the final sessions.json, and a writer that gave up must
// have been told who holds the lock.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { after, test } from 'node:test';
import { updateSessionStore } from '../../src/store/index.js';
import { killChildren, startChild, waitUntil, type ChildRun } from '../fixtures/store-child-process.js';
import { tempDir } from '../helpers.js';

const ROUNDS = 4;
/** proper-lockfile's floor: the frozen holder's lock looks stale this long after its last refresh. */
const STALE_MS = 2_000;

const children: ChildRun[] = [];
after(() => killChildren(children));

function writer(config: Record<string, unknown>): ChildRun {
  const run = startChild('frozen-store-child.js', [JSON.stringify(config)]);
  children.push(run);
  return run;
}

/** Process state letter from /proc (T = stopped); null where there is no /proc. */
function procState(pid: number): string | null {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return text.slice(text.lastIndexOf(')') + 2).split(' ')[0] ?? null;
  } catch {
    return null;
  }
}

function acked(run: ChildRun): string[] {
  return run.lines.filter((line) => line.startsWith('acked ')).map((line) => line.slice('acked '.length));
}

interface RoundResult {
  round: number;
  lost: string[];
  ackedCount: number;
  /** STORE_BUSY reports of the writer that gave up. */
  busyReports: BusyReport[];
  /** The writers that could have held the lock while it waited. */
  holderPids: number[];
}

async function oneRound(round: number): Promise<RoundResult> {
  const storePath = path.join(tempDir('sb-frozen-'), 'sessions.json');
  await updateSessionStore(storePath, (store) => {
    store['agent:main:seed'] = { sessionId: 'seed', updatedAt: 1 };
  });

  // A: takes the lock, reads, mutates, and announces itself inside the replace, after its lock
  // checks: stopped there, at its temp file's data write or right at its rename over the store.
  const freezeAt = round % 2 === 1 ? 'write' : 'rename';
  const frozen = writer({ mode: 'freeze', freezeAt, storePath, writer: `a${round}`, entries: 3, staleMs: STALE_MS });
  await frozen.waitForLine((line) => line === 'in-write', 15_000, 'the holder to be inside its replace');
  process.kill(frozen.pid, 'SIGSTOP');
  if (procState(frozen.pid) !== null) await waitUntil(() => procState(frozen.pid) === 'T', 10_000, 'the holder to be stopped');

  // B gives up while A is still frozen (its wait ends after A's lock has gone stale by mtime);
  // C is willing to wait until A has finished.
  const impatient = writer({ mode: 'write', storePath, writer: `b${round}`, entries: 3, staleMs: STALE_MS, acquireTimeoutMs: STALE_MS + 500 });
  const patient = writer({ mode: 'write', storePath, writer: `c${round}`, entries: 3, staleMs: STALE_MS, acquireTimeoutMs: 60_000 });
  await impatient.waitForLine((line) => line === 'done', 30_000, 'the impatient writer to finish or give up');

  process.kill(frozen.pid, 'SIGCONT');
  frozen.send('go');
  await frozen.waitForLine((line) => line === 'done', 30_000, 'the resumed holder to finish');
  await patient.waitForLine((line) => line === 'done', 60_000, 'the patient writer to finish');
  await Promise.all([frozen.exited, impatient.exited, patient.exited]);

  const everyone = [frozen, impatient, patient];
  for (const run of everyone) {
    const unexpected = run.lines.filter((line) => line.startsWith('error '));
    assert.deepEqual(unexpected, [], `round ${round}: no writer fails other than busy; stderr: ${run.stderr()}`);
  }

  const final = JSON.parse(readFileSync(storePath, 'utf8')) as Record<string, unknown>;
  const ackedKeys = everyone.flatMap(acked);
  const lost = ackedKeys.filter((key) => !(key in final));
  assert.deepEqual(lost, [], `round ${round} (frozen at ${freezeAt}): ${lost.length} of ${ackedKeys.length} acked entries lost`);
  const busyReports = impatient.lines
    .filter((line) => line.startsWith('busy '))
    .map((line) => JSON.parse(line.slice('busy '.length)) as BusyReport);
  return { round, lost, ackedCount: ackedKeys.length, busyReports, holderPids: [frozen.pid, patient.pid] };
}

interface BusyReport {
  message: string;
  details: { owner: { pid: number } | null; ageMs: number | null };
}

test(`a frozen sessions.json holder resumed after other writers tried: 0 acked entries lost (${ROUNDS} rounds)`, async (t) => {
  const results: RoundResult[] = [];
  for (let round = 1; round <= ROUNDS; round += 1) results.push(await oneRound(round));
  const lost = results.flatMap((result) => result.lost);
  const roundsWithLoss = results.filter((result) => result.lost.length > 0).length;
  const acknowledged = results.reduce((sum, result) => sum + result.ackedCount, 0);
  const busy = results.reduce((sum, result) => sum + result.busyReports.length, 0);
  t.diagnostic(`${acknowledged} entries acked, ${lost.length} lost, ${busy} writers gave up with STORE_BUSY`);
  assert.deepEqual(lost, [], `${lost.length} of ${acknowledged} acked entries lost, in ${roundsWithLoss} of ${ROUNDS} rounds`);
  assert.ok(acknowledged > 0);
  // A writer that timed out was told who holds the lock: its pid and how long it has held it.
  for (const { round, busyReports, holderPids } of results) {
    for (const report of busyReports) {
      const pid = report.details.owner?.pid;
      assert.ok(pid !== undefined && holderPids.includes(pid), `round ${round}: STORE_BUSY names a holder: ${report.message}`);
      assert.equal(typeof report.details.ageMs, 'number', `round ${round}: STORE_BUSY gives the holder's age`);
      assert.match(report.message, new RegExp(`pid ${pid}\\b.* for \\d`), `round ${round}: the message names pid and age`);
    }
  }
});
