// quality.md case 1: SIGKILL a transcript writer at random points, 50+ rounds, real processes.
// Every acknowledged record must be on disk, the reader must load all complete lines, count the
// torn tails and never throw, and the next append after a torn tail must start on a fresh line.

import assert from 'node:assert/strict';
import { randomInt } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { after, test } from 'node:test';
import { appendToTranscript, loadTranscript, lockPathFor, releaseLock } from '../../src/store/index.js';
import { startChild, type ChildRun } from '../fixtures/store-child-process.js';

const ROUNDS = 50;
/** Rounds share a transcript in groups, so that re-reading it after every kill stays cheap. */
const ROUNDS_PER_FILE = 10;
/** Writers are started this many rounds ahead (they wait for "go"): node's start-up overlaps. */
const SPAWN_AHEAD = 2;

type KillPoint = 'first-growth' | 'random-offset' | 'random-time';
interface RoundPlan {
  file: string;
  writer: string;
  kill: KillPoint;
  /** Which append of the round carries a record of a few hundred KiB (-1: none). */
  bigAt: number;
  acksBeforeKill: number;
}

const roots: string[] = [];
const children: ChildRun[] = [];
after(() => {
  for (const run of children) if (run.child.exitCode === null && run.child.signalCode === null) run.child.kill('SIGKILL');
  for (const dir of roots) rmSync(dir, { recursive: true, force: true });
});

/** Independent of the reader under test: is this raw line a record? */
function isRecordLine(line: string): boolean {
  try {
    const value = JSON.parse(line) as unknown;
    return typeof value === 'object' && value !== null && typeof (value as { type?: unknown }).type === 'string';
  } catch {
    return false;
  }
}

function sizeOf(file: string): number {
  return statSync(file, { throwIfNoEntry: false })?.size ?? 0;
}

function lastSegment(file: string): string {
  if (!existsSync(file)) return '';
  const text = readFileSync(file, 'utf8');
  return text.slice(text.lastIndexOf('\n') + 1);
}

/** Picks the kill point. Large writes reach the page cache in folio-sized steps (the file size
 *  grows step by step), so killing right after the first step often cuts a record in half. */
async function killAtPlannedPoint(child: ChildRun, plan: RoundPlan): Promise<void> {
  if (plan.kill === 'random-time') {
    if (plan.acksBeforeKill > 0) {
      await child.waitForLine((l) => l.startsWith(`ack ${plan.acksBeforeKill - 1} `), 15_000, `ack ${plan.acksBeforeKill - 1}`);
    }
    const delayMs = randomInt(4);
    if (delayMs > 0) await new Promise((resolve) => setTimeout(resolve, delayMs)); // chooses the point; not a wait for correctness
    return;
  }
  const announced = await child.waitForLine((l) => l.startsWith(`appending ${plan.bigAt} `), 15_000, 'the big append');
  const [, , bytes, sizeAtStart] = announced.split(' ').map(Number) as [number, number, number, number];
  const killAt = sizeAtStart + (plan.kill === 'first-growth' ? 1 : randomInt(1, bytes));
  const giveUpAt = performance.now() + 200;
  while (sizeOf(plan.file) < killAt && performance.now() < giveUpAt) {
    // busy poll on purpose: the write itself takes about a millisecond
  }
}

test(`case 1: SIGKILL a writer mid-append, ${ROUNDS} rounds at random points`, async (t) => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'sb-killwriter-'));
  roots.push(dir);
  const killPoints: KillPoint[] = ['first-growth', 'random-offset', 'random-time'];
  const plans: RoundPlan[] = Array.from({ length: ROUNDS }, (_, round) => {
    const kill = killPoints[randomInt(killPoints.length)]!;
    return {
      file: path.join(dir, `session-${Math.floor(round / ROUNDS_PER_FILE)}.jsonl`),
      writer: `r${round}`,
      kill,
      bigAt: kill === 'random-time' ? -1 : randomInt(3),
      acksBeforeKill: randomInt(6),
    };
  });
  const files = [...new Set(plans.map((p) => p.file))];
  /** file → acknowledged record id → "writer/seq" */
  const acknowledged = new Map(files.map((f) => [f, new Map<string, string>()]));
  /** file → distinct torn tails (by the size at which they end) → parseable? */
  const tornTails = new Map(files.map((f) => [f, new Map<number, boolean>()]));
  let freshLineChecks = 0;

  const writers: ChildRun[] = [];
  const startWriter = (round: number): void => {
    const plan = plans[round]!;
    writers[round] = startChild('transcript-writer-child.js', ['loop', plan.file, plan.writer, String(plan.bigAt)]);
    children.push(writers[round]!);
  };
  for (let round = 0; round < Math.min(SPAWN_AHEAD, ROUNDS); round += 1) startWriter(round);

  for (let round = 0; round < ROUNDS; round += 1) {
    if (round + SPAWN_AHEAD < ROUNDS) startWriter(round + SPAWN_AHEAD);
    const plan = plans[round]!;
    const child = writers[round]!;
    const sizeBefore = sizeOf(plan.file);
    const endedTorn = lastSegment(plan.file) !== '';
    try {
      await child.waitForLine((l) => l === 'ready', 15_000, 'the writer to start');
      child.send('go');
      await killAtPlannedPoint(child, plan);
    } finally {
      child.child.kill('SIGKILL');
    }
    const { signal } = await child.exited;
    assert.equal(signal, 'SIGKILL', `round ${round}: ${child.stderr()}`);
    assert.ok(!child.lines.some((l) => l.startsWith('error ')), `round ${round}: ${child.lines.join(' | ')}`);

    const acked = acknowledged.get(plan.file)!;
    for (const line of child.lines.filter((l) => l.startsWith('ack '))) {
      const [, seq, id] = line.split(' ');
      acked.set(id!, `${plan.writer}/${seq}`);
    }
    const tail = lastSegment(plan.file);
    if (tail !== '') tornTails.get(plan.file)!.set(sizeOf(plan.file), isRecordLine(tail));
    if (endedTorn && sizeOf(plan.file) > sizeBefore) {
      // this round appended after a torn tail: its first byte must have ended that line
      freshLineChecks += 1;
      assert.equal(readFileSync(plan.file).subarray(sizeBefore, sizeBefore + 1).toString(), '\n', `round ${round}: fresh line`);
    }
    // The dead writer may have held the write lock: the operator's force release (otherwise the
    // next round would wait staleMs for it to go stale; that path is case 7's test).
    if (existsSync(lockPathFor(plan.file))) await releaseLock(plan.file, { force: true });

    // Whatever state the kill left, the reader does not throw and has every acknowledged record.
    if (existsSync(plan.file)) {
      const onDisk = new Set((await loadTranscript(plan.file)).entries.map((e) => e.id));
      for (const [id, what] of acked) assert.ok(onDisk.has(id), `round ${round}: acknowledged ${what} (${id}) is on disk`);
    }
  }

  let tornTotal = 0;
  for (const file of files) {
    if (!existsSync(file)) continue; // every writer of this file died before its first append
    // One more append after whatever the last kill left: after a torn tail, a fresh line.
    const endsTorn = lastSegment(file) !== '';
    const last = await appendToTranscript(file, { type: 'custom', writer: 'final' }, { session: { sessionId: 'kill-test-session' } });
    assert.equal(last.startedFreshLine, endsTorn);
    assert.equal(lastSegment(file), '', 'the file ends with a complete line');

    // Oracle: the raw lines. Each torn tail became one unparseable line (unless the cut fell
    // exactly before its newline), and the reader's counts agree with the raw file.
    const torn = tornTails.get(file)!;
    tornTotal += torn.size;
    const rawLines = readFileSync(file, 'utf8').split('\n').filter((line) => line.trim() !== '');
    const badRaw = rawLines.filter((line) => !isRecordLine(line)).length;
    const { header, entries, stats } = await loadTranscript(file);
    assert.equal(stats.skipped, badRaw);
    assert.equal(stats.skipped, [...torn.values()].filter((parseable) => !parseable).length);
    assert.equal(stats.records, rawLines.length - badRaw);
    assert.equal(stats.tornTail, false);
    assert.equal(header?.type, 'session');
    assert.equal(entries.filter((e) => e.type === 'session').length, 0, 'exactly one header');

    // parentId chains over the complete entries: torn records are skipped by the chain as well.
    entries.forEach((entry, i) => assert.equal(entry.parentId, i === 0 ? null : entries[i - 1]!.id, `entry ${i} chains`));
    const ids = entries.map((e) => e.id);
    assert.equal(new Set(ids).size, ids.length, 'no record twice');
    for (const [id, what] of acknowledged.get(file)!) assert.ok(ids.includes(id), `acknowledged ${what} is there`);
    for (const plan of plans.filter((p) => p.file === file)) {
      const seqs = entries.filter((e) => e.writer === plan.writer).map((e) => e.seq as number);
      assert.deepEqual(seqs, seqs.map((_, i) => i), `${plan.writer}: in order, without gaps`);
    }
  }
  const ackCount = [...acknowledged.values()].reduce((sum, m) => sum + m.size, 0);
  t.diagnostic(`${ackCount} acknowledged records; ${tornTotal} torn tails left by kills; ${freshLineChecks} appends right after a torn tail`);
});
