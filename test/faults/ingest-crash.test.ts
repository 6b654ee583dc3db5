// Issue 10's crash matrix for `ingest`: real processes SIGKILLed at random moments while they take
// a live stream (and a file), the sender resending everything not acknowledged, as a client does.
// At the end every message is in its session's transcripts exactly once: nothing acknowledged is
// missing, nothing is doubled. Also: a resent batch of 40 ids is 40 duplicates, and a poison line
// never costs its neighbours their place.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { test } from 'node:test';
import { SOAK_FACTOR, killWhen, recordedCounts as countsIn, storeIdentity, transcriptBytes, type KillPlan } from '../fixtures/crash-lib.js';
import { BIN, jsonLines, runCli, tempDir } from '../helpers.js';

const recordedCounts = (stateDir: string): Map<string, number> => countsIn(path.join(stateDir, 'agents', 'main', 'sessions'));

const SESSIONS = 8;

interface Message {
  id: string;
  line: string;
}

function messagesFor(count: number, tag: string): Message[] {
  return Array.from({ length: count }, (_, i) => {
    const id = `${tag}-${i}`;
    const line = JSON.stringify({ channel: 'telegram', peer: { kind: 'group', id: `room-${i % SESSIONS}` }, text: `message ${id}`, messageId: id });
    return { id, line };
  });
}

interface RoundResult {
  acked: Set<string>;
}

/**
 * One `ingest` taking `pending` as a live stream in small chunks, killed after `killAfterMs`
 * (or left to finish when null). Returns the messageIds it acknowledged.
 */
async function ingestRound(stateDir: string, pending: Message[], kill: KillPlan, asFile: boolean): Promise<RoundResult> {
  const sessionsDir = path.join(stateDir, 'agents', 'main', 'sessions');
  const env: Record<string, string | undefined> = { ...process.env, NO_COLOR: '1' };
  for (const key of Object.keys(env)) if (key.startsWith('SWITCHBOARD_')) delete env[key];
  const args = [BIN, 'ingest', '--state-dir', stateDir];
  let file: string | undefined;
  if (asFile) {
    file = path.join(stateDir, `input-${process.hrtime.bigint()}.ndjson`);
    fs.writeFileSync(file, pending.map((m) => m.line).join('\n') + '\n');
    args.push(file);
  }
  const child = spawn(process.execPath, args, { env, stdio: ['pipe', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString('utf8')));
  child.stderr.resume();
  child.stdin.on('error', () => undefined);
  const exited = new Promise<void>((resolve) => child.on('close', () => resolve()));
  const alive = (): boolean => child.exitCode === null && child.signalCode === null;
  const killChild = (): void => void child.kill('SIGKILL');
  let killer: NodeJS.Timeout | undefined;
  let watcher: Promise<void> = Promise.resolve();
  if (kill?.at === 'time') killer = setTimeout(() => child.kill('SIGKILL'), kill.ms);
  else if (kill?.at === 'store-replaced') {
    const before = storeIdentity(sessionsDir);
    watcher = killWhen(alive, killChild, () => storeIdentity(sessionsDir) !== before);
  } else if (kill?.at === 'transcript-grew') {
    const before = transcriptBytes(sessionsDir);
    watcher = killWhen(alive, killChild, () => transcriptBytes(sessionsDir) > before);
  }
  if (!asFile) {
    // A live stream: small chunks, so batches are small and kills land between every step.
    for (let i = 0; i < pending.length && child.exitCode === null && child.signalCode === null; i += 3) {
      child.stdin.write(pending.slice(i, i + 3).map((m) => `${m.line}\n`).join(''));
      await sleep(1);
    }
  }
  child.stdin.end();
  await exited;
  await watcher;
  if (killer) clearTimeout(killer);
  if (file) fs.rmSync(file, { force: true });
  const acked = new Set<string>();
  for (const raw of out.split('\n')) {
    if (!raw.endsWith('}')) continue; // the last line may be cut by the kill
    let event: { type?: string; messageId?: string; disposition?: string; persisted?: boolean };
    try {
      event = JSON.parse(raw);
    } catch {
      continue;
    }
    if (event.type === 'result' && event.persisted === true && typeof event.messageId === 'string') acked.add(event.messageId);
  }
  return { acked };
}

async function crashLoop(asFile: boolean, tag: string): Promise<void> {
  const stateDir = tempDir();
  const messages = messagesFor((asFile ? 300 : 240) * SOAK_FACTOR, tag);
  const acked = new Set<string>();
  const ackedEver: string[] = [];
  const killedRounds = 36 * SOAK_FACTOR;
  for (let round = 0; round < killedRounds + 24 && acked.size < messages.length; round++) {
    const pending = messages.filter((m) => !acked.has(m.id));
    // Early rounds are killed at the moments that matter or at random; later ones are let finish.
    const plans: KillPlan[] = [{ at: 'store-replaced' }, { at: 'transcript-grew' }, { at: 'time', ms: 60 + Math.floor(Math.random() * 260) }];
    const kill = round < killedRounds ? plans[round % plans.length]! : null;
    const { acked: now } = await ingestRound(stateDir, pending, kill, asFile);
    for (const id of now) {
      if (!acked.has(id)) ackedEver.push(id);
      acked.add(id);
    }
    // Everything acknowledged so far must be on disk right now, whatever the kill hit.
    const counts = recordedCounts(stateDir);
    const missing = [...acked].filter((id) => (counts.get(id) ?? 0) === 0);
    assert.deepEqual(missing, [], `round ${round}: acknowledged but not recorded`);
  }
  assert.equal(acked.size, messages.length, 'every message was acknowledged in the end');
  const counts = recordedCounts(stateDir);
  const doubled = [...counts].filter(([, n]) => n > 1).map(([id]) => id);
  assert.deepEqual(doubled, [], 'no message recorded twice');
  const missing = messages.filter((m) => (counts.get(m.id) ?? 0) !== 1).map((m) => m.id);
  assert.deepEqual(missing, [], 'every message recorded exactly once');
  // The store is consistent afterwards: doctor may find only what a kill is documented to leave
  // behind (a dead holder's lock or release tombstone, a temp file, a pending journal, and the
  // torn tail of an append the kill cut short — Linux ends a write of several pages early when
  // the writer is killed, and the next append starts on a fresh line after it), repairs it, and
  // changes no record doing so.
  const check = await runCli(['doctor', '--json', '--state-dir', stateDir]);
  for (const problem of JSON.parse(check.stdout).stores[0].problems as { kind: string; file: string; lines?: number[] }[]) {
    if (problem.kind !== 'malformed-lines') continue;
    // A cut-short append, never two writers' bytes mixed: each bad line is the start of one record.
    // A record begins `{"type":"<kind>","id":"` (a content block inside one, `{"type":"text"`, has
    // no id next): a second such start in the line would be another record's bytes.
    const recordStart = /\{"type":"[a-z_]+","id":"/;
    const lines = fs.readFileSync(problem.file, 'utf8').split('\n');
    for (const n of problem.lines ?? []) {
      const line = lines[n - 1]!;
      assert.ok(recordStart.test(line) && line.search(recordStart) === 0 && !recordStart.test(line.slice(1)), `line ${n} of ${problem.file} is the start of one record: ${line.slice(0, 200)}`);
    }
  }
  const repair = await runCli(['doctor', '--repair', '--json', '--state-dir', stateDir]);
  assert.equal(repair.code, 0, repair.stdout + repair.stderr);
  for (const problem of JSON.parse(repair.stdout).stores[0].problems as { kind: string }[]) {
    assert.ok(['stale-lock', 'lock-tombstone', 'temp-file', 'journal-pending', 'malformed-lines'].includes(problem.kind), problem.kind);
  }
  const doctor = await runCli(['doctor', '--json', '--state-dir', stateDir]);
  assert.equal(doctor.code, 0, doctor.stdout + doctor.stderr);
  assert.deepEqual(recordedCounts(stateDir), counts, 'the repair changed no record');
}

test('SIGKILL loop over a live ingest stream, resending what was not acknowledged: 0 missing, 0 doubled', async () => {
  await crashLoop(false, 'live');
});

test('SIGKILL loop over ingest of a file, resending what was not acknowledged: 0 missing, 0 doubled', async () => {
  await crashLoop(true, 'file');
});

/** Sends `count` messages with ids to one session, then all of them again: the second time every one is a duplicate. */
async function resendAll(count: number): Promise<void> {
  const stateDir = tempDir();
  const lines = Array.from({ length: count }, (_, i) =>
    JSON.stringify({ channel: 'telegram', peer: { kind: 'direct', id: 'alice' }, text: `hello ${i}`, messageId: `m-${i}` }),
  ).join('\n');
  const first = await runCli(['ingest', '--state-dir', stateDir], { input: `${lines}\n` });
  assert.equal(first.code, 0, first.stderr);
  assert.deepEqual(jsonLines(first.stdout).map((e) => e.disposition), Array(count).fill('recorded'));
  const again = await runCli(['ingest', '--state-dir', stateDir], { input: `${lines}\n` });
  assert.equal(again.code, 0, again.stderr);
  const dispositions = jsonLines(again.stdout).map((e) => e.disposition);
  assert.equal(dispositions.filter((d) => d === 'duplicate').length, count, `${dispositions.filter((d) => d !== 'duplicate').length} of ${count} resent ids were not duplicates`);
  const counts = recordedCounts(stateDir);
  assert.equal(counts.size, count);
  assert.ok([...counts.values()].every((n) => n === 1));
}

test('a resent batch of 40 messageIds is 40 duplicates (the duplicate memory is not capped at 32)', async () => {
  await resendAll(40);
});

test('a resent batch of 3 000 messageIds to one session is 3 000 duplicates (once, past 1 024, every one was recorded again)', async () => {
  await resendAll(3_000);
});

test('poison lines (a thread id that is no Unicode or names too long a file) fail alone; every good line of the batch is stored', async () => {
  const stateDir = tempDir();
  const good = messagesFor(30, 'good');
  const poison = [
    // A lone surrogate: JSON allows it, a file name cannot hold it.
    '{"channel":"telegram","peer":{"kind":"group","id":"g1"},"threadId":"\\ud800","text":"x","messageId":"p1"}',
    JSON.stringify({ channel: 'telegram', peer: { kind: 'group', id: 'g1' }, threadId: 'é'.repeat(120), text: 'x', messageId: 'p2' }),
    JSON.stringify({ channel: 'telegram', peer: { kind: 'group', id: 'g1' }, threadId: 't'.repeat(300), text: 'x', messageId: 'p3' }),
  ];
  const lines = [...good.slice(0, 10).map((m) => m.line), poison[0], ...good.slice(10, 20).map((m) => m.line), poison[1], poison[2], ...good.slice(20).map((m) => m.line)];
  const result = await runCli(['ingest', '--state-dir', stateDir], { input: `${lines.join('\n')}\n` });
  assert.equal(result.code, 65, result.stderr);
  const events = jsonLines(result.stdout);
  assert.equal(events.length, lines.length);
  const errors = events.filter((e) => e.type === 'error');
  assert.deepEqual(errors.map((e) => [e.line, e.code, e.path]), [
    [11, 'BAD_MESSAGE', 'threadId'],
    [22, 'BAD_MESSAGE', 'threadId'],
    [23, 'BAD_MESSAGE', 'threadId'],
  ]);
  const counts = recordedCounts(stateDir);
  for (const m of good) assert.equal(counts.get(m.id), 1, `${m.id} recorded once`);
  assert.equal(counts.size, good.length);
});
