// A rotation (`sessions reset`, `/new`, a due reset) writes sessions.json with the new instance and
// then archives the old transcript as `.reset.<ts>`. A process killed in between leaves the old
// instance under its live name with no entry naming it: an orphan that history, archive retention
// and the disk budget do not count as an archive, which only `doctor --repair` used to archive.
// The cron job finishes it now. Real processes: a `sessions reset` SIGKILLed the moment
// sessions.json names the new instance while the old file is still there (rounds where it got
// further are counted, not failed), then the real `maintain`; and the same state made on purpose,
// for the rules that keep maintain's hands off what is not plainly a finished rotation.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { BIN, jsonLines, runCli, tempDir, writeJson } from '../helpers.js';
import { cleanEnv } from '../serve-process.js';
import { withLock } from '../../src/store/index.js';

const KEY = 'agent:main:direct:alice';
const say = (text: string, messageId: string) => JSON.stringify({ channel: 'telegram', peer: 'direct:alice', text, messageId });

function entryOf(dir: string): { sessionId: string; sessionFile: string } | undefined {
  try {
    return JSON.parse(fs.readFileSync(path.join(dir, 'sessions.json'), 'utf8'))[KEY];
  } catch {
    return undefined; // mid-rename
  }
}

async function setUp(): Promise<{ state: string; config: string; dir: string; old: { sessionId: string; sessionFile: string } }> {
  const state = tempDir('sb-rotation-kill-');
  const config = writeJson(path.join(state, 'c.json'), { session: { dmScope: 'per-peer' } });
  const dir = path.join(state, 'agents', 'main', 'sessions');
  const r = await runCli(['ingest', '--state-dir', state, '--config', config], { input: `${say('one', 'a1')}\n${say('two', 'a2')}\n` });
  assert.equal(r.code, 0, r.stderr);
  return { state, config, dir, old: entryOf(dir)! };
}

/** Runs `sessions reset` and SIGKILLs it once sessions.json names another instance; true when the old file was still unarchived then. */
async function resetKilledBeforeArchive(state: string, config: string, dir: string, oldFile: string): Promise<boolean> {
  const child = spawn(process.execPath, [BIN, 'sessions', 'reset', KEY, '--yes', '--state-dir', state, '--config', config], { env: cleanEnv(), stdio: 'ignore' });
  const closed = new Promise<void>((resolve) => child.on('close', () => resolve()));
  let interrupted = false;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) break;
    const entry = entryOf(dir);
    if (entry !== undefined && entry.sessionFile !== oldFile) {
      child.kill('SIGKILL');
      await closed;
      interrupted = fs.existsSync(path.join(dir, oldFile));
      break;
    }
    await new Promise((resolve) => setImmediate(resolve));
  }
  await closed;
  return interrupted;
}

async function maintain(state: string, config: string): Promise<any> {
  const r = await runCli(['maintain', '--json', '--state-dir', state, '--config', config]);
  assert.equal(r.code, 0, r.stderr);
  return JSON.parse(r.stdout);
}

/** What maintain must make of a rotation that stopped after its store write: the old file archived, once. */
async function assertFinishedByMaintain(state: string, config: string, dir: string, old: { sessionId: string; sessionFile: string }): Promise<void> {
  const dry = await runCli(['maintain', '--dry-run', '--json', '--state-dir', state, '--config', config]);
  assert.deepEqual(JSON.parse(dry.stdout).rotations.finished.map((f: any) => [f.sessionKey, f.sessionId, f.archivedTo]), [[KEY, old.sessionId, null]]);
  assert.ok(fs.existsSync(path.join(dir, old.sessionFile)), 'a dry run changes nothing');

  const report = await maintain(state, config);
  assert.deepEqual(report.rotations.finished.map((f: any) => [f.sessionKey, f.sessionId]), [[KEY, old.sessionId]]);
  const archivedTo: string = report.rotations.finished[0].archivedTo;
  assert.match(path.basename(archivedTo), new RegExp(`^${old.sessionFile.replace('.', '\\.')}\\.reset\\.`));
  assert.equal(fs.existsSync(path.join(dir, old.sessionFile)), false);
  const texts = jsonLines(fs.readFileSync(archivedTo, 'utf8')).filter((r) => r.type === 'message').map((r) => r.message.content[0].text);
  assert.deepEqual(texts, ['one', 'two'], 'the old instance is whole in its archive');

  const doctor = await runCli(['doctor', '--json', '--state-dir', state, '--config', config]);
  assert.equal(doctor.code, 0, doctor.stdout);
  const history = JSON.parse((await runCli(['sessions', 'history', KEY, '--json', '--state-dir', state, '--config', config])).stdout);
  const ids: string[] = history.instances.map((i: any) => i.sessionId);
  assert.deepEqual([...ids].sort(), [old.sessionId, entryOf(dir)!.sessionId].sort(), 'each instance listed once');
  assert.equal((await maintain(state, config)).rotations.finished.length, 0, 'a second pass finds nothing');
}

test('a reset killed after its store write, before archiving: maintain archives the old instance, history lists it once', async () => {
  let interruptedRounds = 0;
  for (let round = 0; round < 12 && interruptedRounds < 2; round++) {
    const { state, config, dir, old } = await setUp();
    if (!(await resetKilledBeforeArchive(state, config, dir, old.sessionFile))) continue;
    interruptedRounds++;
    await assertFinishedByMaintain(state, config, dir, old);
  }
  if (interruptedRounds === 0) {
    // The kill never fell in the window (a file system whose fsyncs cost nothing, such as tmpfs,
    // makes it tiny): the same state made by hand, a finished reset with its archive put back
    // under the live name.
    const { state, config, dir, old } = await setUp();
    assert.equal((await runCli(['sessions', 'reset', KEY, '--yes', '--state-dir', state, '--config', config])).code, 0);
    const archive = fs.readdirSync(dir).find((name) => name.startsWith(`${old.sessionFile}.reset.`))!;
    fs.renameSync(path.join(dir, archive), path.join(dir, old.sessionFile));
    await assertFinishedByMaintain(state, config, dir, old);
  }
});

test('maintain leaves alone an unnamed transcript that is not plainly an older instance of a live entry', async () => {
  const { state, config, dir, old } = await setUp();
  const reset = await runCli(['sessions', 'reset', KEY, '--yes', '--state-dir', state, '--config', config]);
  assert.equal(reset.code, 0, reset.stderr);
  const archive = fs.readdirSync(dir).find((name) => name.startsWith(`${old.sessionFile}.reset.`))!;
  const header = JSON.parse(fs.readFileSync(path.join(dir, archive), 'utf8').split('\n')[0]);
  const write = (name: string, firstLine: object) => fs.writeFileSync(path.join(dir, name), `${JSON.stringify(firstLine)}\n`);
  // Newer than the current instance (a store restored one write behind looks like this): doctor's to judge.
  write('newer.jsonl', { ...header, id: 'newer', timestamp: new Date(Date.now() + 60_000).toISOString() });
  // A key nobody has, another agent's key, no header at all.
  write('unknown-key.jsonl', { ...header, id: 'unknown-key', sessionKey: 'agent:main:direct:nobody' });
  write('other-agent.jsonl', { ...header, id: 'other-agent', sessionKey: 'agent:work:direct:alice' });
  write('no-header.jsonl', { type: 'message', id: 'm1', parentId: null, timestamp: header.timestamp });
  // Headers doctor calls invalid: an id the file is not named after, one the schema refuses, a
  // time that is not a string, and a header on line 2 behind a line that is not a record.
  write('mismatch.jsonl', { ...header, id: 'other' });
  write('id%2F..%2Fx.jsonl', { ...header, id: 'id/../x' });
  write('ts-num.jsonl', { ...header, id: 'ts-num', timestamp: 5 });
  fs.writeFileSync(path.join(dir, 'line-two.jsonl'), `not a record\n${JSON.stringify({ ...header, id: 'line-two' })}\n`);
  // A first line longer than one small read is no header switchboard wrote, and is not read whole.
  write('huge-header.jsonl', { ...header, id: 'huge-header', pad: 'x'.repeat(64 * 1024) });
  // Older, but held by a live lock: left for a later pass.
  write('locked.jsonl', { ...header, id: 'locked' });
  let letGo!: () => void;
  const holding = new Promise<void>((resolve) => (letGo = resolve));
  const acquired = new Promise<void>((resolve) => void withLock(path.join(dir, 'locked.jsonl'), { staleMs: 60_000 }, () => (resolve(), holding)));
  await acquired;
  // The plain case, next to them: an older instance of the key.
  write('older.jsonl', { ...header, id: 'older' });

  const report = await maintain(state, config);
  letGo();
  assert.deepEqual(report.rotations.finished.map((f: any) => path.basename(f.file)), ['older.jsonl']);
  for (const name of ['newer.jsonl', 'unknown-key.jsonl', 'other-agent.jsonl', 'no-header.jsonl', 'mismatch.jsonl', 'id%2F..%2Fx.jsonl', 'ts-num.jsonl', 'line-two.jsonl', 'huge-header.jsonl', 'locked.jsonl']) assert.ok(fs.existsSync(path.join(dir, name)), name);
});

test('an instance made in the same batch as the /new that replaced it (its header stamped after the new one started), and two /new in a row: maintain follows the reset notices back', async () => {
  const state = tempDir('sb-rotation-batch-');
  const config = writeJson(path.join(state, 'c.json'), { session: { dmScope: 'per-peer' } });
  const dir = path.join(state, 'agents', 'main', 'sessions');
  const r = await runCli(['ingest', '--state-dir', state, '--config', config], { input: [say('hi', 'b1'), say('/new', 'b2'), say('there', 'b3'), say('/new', 'b4'), say('again', 'b5')].join('\n') + '\n' });
  assert.equal(r.code, 0, r.stderr);
  // Both archives put back under their live names: what a kill right before the renames leaves.
  const archives = fs.readdirSync(dir).filter((name) => name.includes('.jsonl.reset.'));
  assert.equal(archives.length, 2);
  for (const archive of archives) fs.renameSync(path.join(dir, archive), path.join(dir, archive.slice(0, archive.indexOf('.reset.'))));
  const report = await maintain(state, config);
  assert.deepEqual(report.rotations.finished.map((f: any) => path.basename(f.file)).sort(), archives.map((a) => a.slice(0, a.indexOf('.reset.'))).sort());
  const doctor = await runCli(['doctor', '--json', '--state-dir', state, '--config', config]);
  assert.equal(doctor.code, 0, doctor.stdout);
});

test("an older instance that an unusable row names is that row's file: maintain does not archive it", async () => {
  const { state, config, dir, old } = await setUp();
  const reset = await runCli(['sessions', 'reset', KEY, '--yes', '--state-dir', state, '--config', config]);
  assert.equal(reset.code, 0, reset.stderr);
  const archive = fs.readdirSync(dir).find((name) => name.startsWith(`${old.sessionFile}.reset.`))!;
  const header = JSON.parse(fs.readFileSync(path.join(dir, archive), 'utf8').split('\n')[0]);
  // Plainly an older instance of KEY by its header — but a row of the wrong shape (a time that is
  // no number) names it: until that row is fixed or deleted, the file is its conversation.
  fs.writeFileSync(path.join(dir, 'kept-by-row.jsonl'), `${JSON.stringify({ ...header, id: 'kept-by-row' })}\n`);
  const storePath = path.join(dir, 'sessions.json');
  const store = JSON.parse(fs.readFileSync(storePath, 'utf8'));
  store['agent:main:direct:bob'] = { sessionId: 'kept-by-row', sessionFile: 'kept-by-row.jsonl', updatedAt: 'yesterday' };
  fs.writeFileSync(storePath, JSON.stringify(store));
  const report = await maintain(state, config);
  assert.deepEqual(report.rotations.finished, []);
  assert.ok(fs.existsSync(path.join(dir, 'kept-by-row.jsonl')));
});
