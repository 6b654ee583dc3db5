// A batch that rotates a session (`/new`, `/reset`) writes to two transcripts: the old instance's
// (lines before the command) and the new one's. When the old file cannot be written — its write
// lock held by a live process (a run, `sessions reset`, `sessions delete`), or the file unusable —
// no line of that session may be acknowledged for a record that is not on disk: a resend planned
// as the duplicate of a line that failed once answered `duplicate, persisted: true` while the
// message was recorded nowhere. A busy lock is waited for (store.md: an inbound message is never
// dropped because a lock was busy), also for a message pinned to an older instance.

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { after, test } from 'node:test';
import { killChildren, startChild, type ChildRun } from '../fixtures/store-child-process.js';
import { jsonLines, runCli, tempDir, writeJson } from '../helpers.js';

const children: ChildRun[] = [];
after(() => killChildren(children));

const say = (text: string, messageId: string, extra: Record<string, unknown> = {}): string =>
  JSON.stringify({ channel: 'telegram', peer: { kind: 'direct', id: 'p0' }, text, messageId, ...extra });

function setup(): { stateDir: string; config: string; sessionsDir: string; cli: (args: string[], input?: string) => ReturnType<typeof runCli> } {
  const stateDir = tempDir('sb-rotsplit-');
  const config = writeJson(path.join(stateDir, 'config.json'), { session: { dmScope: 'per-peer', writeLock: { acquireTimeoutMs: 30_000 } } });
  const sessionsDir = path.join(stateDir, 'agents', 'main', 'sessions');
  return { stateDir, config, sessionsDir, cli: (args, input) => runCli([...args, '--state-dir', stateDir, '--config', config], { input, timeoutMs: 60_000 }) };
}

/** How many user records carry `messageId`, over every transcript and archive of the folder. */
function recordedCount(sessionsDir: string, messageId: string): number {
  let count = 0;
  for (const name of fs.readdirSync(sessionsDir)) {
    const file = path.join(sessionsDir, name);
    // Regular files only: reading the FIFO one test puts in place would wait forever.
    if (!name.includes('.jsonl') || !fs.lstatSync(file).isFile()) continue;
    for (const line of fs.readFileSync(file, 'utf8').split('\n')) {
      if (line.trim() === '') continue;
      const record = JSON.parse(line);
      if (record.type === 'message' && record.message?.role === 'user' && record.message.messageId === messageId) count++;
    }
  }
  return count;
}

/** Holds the session write lock of `file` from another process until `release()`. */
async function holdLock(file: string): Promise<{ release: () => Promise<void> }> {
  const child = startChild('lock-holder-child.js', [JSON.stringify({ target: file, behaviour: 'hold', runId: 'someone-else' })]);
  children.push(child);
  await child.waitForLine((line) => line.startsWith('held '), 10_000, 'the child to hold the lock');
  return {
    release: async () => {
      child.send('release');
      await child.waitForLine((line) => line === 'done', 10_000, 'the child to let go');
    },
  };
}

test('x1, /new, x1 while another process holds the old transcript: ingest waits; x1 is recorded once and both copies are answered for it', async () => {
  const s = setup();
  const seeded = await s.cli(['ingest'], `${say('first', 'x0')}\n`);
  assert.equal(seeded.code, 0, seeded.stderr);
  const oldId = jsonLines(seeded.stdout)[0].sessionId as string;
  const held = await holdLock(path.join(s.sessionsDir, `${oldId}.jsonl`));

  const ingesting = s.cli(['ingest'], `${[say('a', 'x1'), say('/new', 'x2'), say('a', 'x1')].join('\n')}\n`);
  // Let ingest meet the busy lock (it retries in rounds), then let go.
  await new Promise((resolve) => setTimeout(resolve, 1_500));
  await held.release();
  const result = await ingesting;

  assert.equal(result.code, 0, `${result.stdout}\n${result.stderr}`);
  const events = jsonLines(result.stdout);
  assert.deepEqual(events.filter((e) => e.type === 'error'), [], 'no line gave up on a busy lock');
  const answers = events.filter((e) => e.type === 'result');
  assert.deepEqual(answers.map((e) => [e.line, e.messageId, e.persisted]), [[1, 'x1', true], [2, 'x2', true], [3, 'x1', true]]);
  assert.equal(recordedCount(s.sessionsDir, 'x1'), 1, 'x1 is on disk exactly once');
});

test('x1, /new, x1 when the old transcript cannot be written (a FIFO): no copy of x1 is answered persisted without a record', async () => {
  const s = setup();
  const seeded = await s.cli(['ingest'], `${say('first', 'x0')}\n`);
  assert.equal(seeded.code, 0, seeded.stderr);
  const oldFile = path.join(s.sessionsDir, `${jsonLines(seeded.stdout)[0].sessionId}.jsonl`);
  fs.unlinkSync(oldFile);
  execFileSync('mkfifo', [oldFile]);

  const result = await s.cli(['ingest'], `${[say('a', 'x1'), say('/new', 'x2'), say('a', 'x1')].join('\n')}\n`);
  const events = jsonLines(result.stdout);
  const ackedX1 = events.filter((e) => e.type === 'result' && e.messageId === 'x1' && e.persisted === true);
  if (ackedX1.length > 0) assert.ok(recordedCount(s.sessionsDir, 'x1') >= 1, `x1 was answered persisted but is in no transcript: ${result.stdout}`);
  assert.equal(events.filter((e) => e.type === 'result' || e.type === 'error').length, 3, 'every line is answered');
  assert.notEqual(result.code, 0, 'a line that failed makes the exit status say so');

  // A resend once the file is fixed records x1 (nothing claims it is already there).
  fs.unlinkSync(oldFile);
  const resent = await s.cli(['ingest'], `${say('a', 'x1')}\n`);
  assert.equal(resent.code, 0, resent.stderr);
  assert.equal(recordedCount(s.sessionsDir, 'x1'), 1);
});

test('a message pinned to an older instance whose file another process holds: ingest waits and records it there', async () => {
  const s = setup();
  const seeded = await s.cli(['ingest'], `${say('first', 'm1')}\n`);
  assert.equal(seeded.code, 0, seeded.stderr);
  const oldId = jsonLines(seeded.stdout)[0].sessionId as string;
  const reset = await s.cli(['sessions', 'reset', 'agent:main:direct:p0', '--json']);
  assert.equal(reset.code, 0, reset.stderr);
  const archive = fs.readdirSync(s.sessionsDir).find((name) => name.startsWith(`${oldId}.jsonl.reset.`));
  assert.ok(archive, fs.readdirSync(s.sessionsDir).join(', '));
  const held = await holdLock(path.join(s.sessionsDir, archive));

  const ingesting = s.cli(['ingest'], `${say('approval granted', 'late', { kind: 'system', sessionId: oldId })}\n`);
  await new Promise((resolve) => setTimeout(resolve, 1_500));
  await held.release();
  const result = await ingesting;

  assert.equal(result.code, 0, `${result.stdout}\n${result.stderr}`);
  const answer = jsonLines(result.stdout).find((e) => e.type === 'result');
  assert.deepEqual([answer?.messageId, answer?.sessionId, answer?.disposition], ['late', oldId, 'recorded']);
  assert.match(fs.readFileSync(path.join(s.sessionsDir, archive), 'utf8'), /approval granted/);
});
