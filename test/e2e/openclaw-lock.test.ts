// The real CLI next to OpenClaw's transcript write lock: a regular FILE `<transcript>.lock`
// holding `{pid, createdAt, maxHoldMs, starttime}`, made with open(…, "wx") by a live child
// process (fixtures/openclaw-lock.ts; no OpenClaw needed). ingest waits for it and answers
// SESSION_BUSY (75) for that session only, never STORE_CORRUPT; `locks` lists it as OpenClaw's;
// doctor reports it as held by OpenClaw (a warning, not not-regular-file) and --repair never
// removes it while its holder lives; once the holder is dead, doctor --repair and the next writer
// reclaim it, as OpenClaw itself would.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import { holdOpenClawLock } from '../fixtures/openclaw-lock.js';
import type { ChildRun } from '../fixtures/store-child-process.js';
import { ingestAsOneBatch, jsonLines, runCli, seedPeers, tempDir, writeJson, type CliResult } from '../helpers.js';

const holders: ChildRun[] = [];
const roots: string[] = [];
after(() => {
  for (const run of holders) if (run.child.exitCode === null && run.child.signalCode === null) run.child.kill('SIGKILL');
  for (const dir of roots) fs.rmSync(dir, { recursive: true, force: true });
});

interface State {
  state: string;
  config: string;
  dir: string;
}

function newState(): State {
  const state = tempDir('sb-oclock-e2e-');
  roots.push(state);
  const config = writeJson(path.join(state, 'c.json'), { session: { dmScope: 'per-peer', writeLock: { acquireTimeoutMs: 1_000 } } });
  return { state, config, dir: path.join(state, 'agents', 'main', 'sessions') };
}

const cli = (s: State, ...args: string[]): Promise<CliResult> => runCli([...args, '--state-dir', s.state, '--config', s.config], { timeoutMs: 20_000 });
const ingest = (s: State, messages: Record<string, unknown>[]) => ingestAsOneBatch((...args) => cli(s, ...args), s.state, messages);
const say = (peer: string, text: string) => ({ channel: 'telegram', peer: `direct:${peer}`, text });
const keyOf = (peer: string) => `agent:main:direct:${peer}`;

function transcriptOf(s: State, peer: string): string {
  const store = JSON.parse(fs.readFileSync(path.join(s.dir, 'sessions.json'), 'utf8'));
  return path.join(s.dir, store[keyOf(peer)].sessionFile);
}

async function doctor(s: State, ...args: string[]): Promise<{ code: number | null; report: any }> {
  const r = await cli(s, 'doctor', '--json', ...args);
  assert.ok(r.stdout.trim() !== '', `doctor printed a report (exit ${r.code}): ${r.stderr}`);
  return { code: r.code, report: jsonLines(r.stdout)[0] };
}

const problemsOf = (report: any): any[] => report.stores.flatMap((store: any) => store.problems);
const warningsOf = (report: any): string[] => report.stores.flatMap((store: any) => store.warnings);

describe('OpenClaw holds a transcript lock', () => {
  test('ingest waits and answers SESSION_BUSY for that session only; locks lists it; doctor --repair leaves it alone', async () => {
    const s = newState();
    await seedPeers((messages) => ingest(s, messages), ['a', 'b'], say);
    const transcript = transcriptOf(s, 'a');
    const lockPath = `${transcript}.lock`;
    const run = await holdOpenClawLock(lockPath);
    holders.push(run);
    const lockBytes = fs.readFileSync(lockPath, 'utf8');
    const transcriptBytes = fs.readFileSync(transcript, 'utf8');

    const started = Date.now();
    const r = await ingest(s, [say('a', 'while OpenClaw runs'), say('b', 'another session')]);
    assert.equal(r.code, 75, r.stderr);
    assert.deepEqual(r.events.map((e) => e.code ?? e.disposition), ['SESSION_BUSY', 'recorded'], r.stderr);
    assert.ok(Date.now() - started >= 900, 'it waited for session.writeLock.acquireTimeoutMs');
    // and says so: the wait in all, not the last zero-wait try's 0 ms
    const busy = r.events.find((e) => e.code === 'SESSION_BUSY');
    assert.match(busy.message, /gave up after (?:[1-9]\d* ms|\d+\.\d s)/, busy.message);
    assert.doesNotMatch(busy.message, /gave up after [0-9] ms/);
    assert.equal(fs.readFileSync(transcript, 'utf8'), transcriptBytes, 'nothing written beside OpenClaw');

    const listed = await cli(s, 'locks', '--json');
    assert.equal(listed.code, 0, listed.stderr);
    const [lock] = jsonLines(listed.stdout)[0].locks;
    assert.equal(lock.lockPath, lockPath);
    assert.equal(lock.kind, 'openclaw');
    assert.equal(lock.fileLock.pid, run.pid);
    assert.equal(lock.holderAlive, true);
    const text = await cli(s, 'locks');
    assert.match(text.stdout, new RegExp(`${path.basename(transcript)}\\s.*${run.pid}.*openclaw`));

    const refused = await cli(s, 'locks', 'release', keyOf('a'), '--json');
    assert.equal(refused.code, 75, refused.stderr);

    const checked = await doctor(s);
    assert.equal(checked.code, 0, JSON.stringify(problemsOf(checked.report)));
    assert.deepEqual(problemsOf(checked.report), []);
    assert.ok(warningsOf(checked.report).some((w) => w.includes(path.basename(lockPath)) && w.includes('OpenClaw') && w.includes(String(run.pid))), warningsOf(checked.report).join(' | '));
    const repaired = await doctor(s, '--repair');
    assert.equal(repaired.code, 0, JSON.stringify(problemsOf(repaired.report)));
    assert.equal(fs.readFileSync(lockPath, 'utf8'), lockBytes, 'doctor --repair left the live lock as it was');

    run.send('release');
    await run.waitForLine((line) => line === 'released', 5_000, 'the release');
    const after = await ingest(s, [say('a', 'after OpenClaw')]);
    assert.equal(after.code, 0, after.stderr);
  });

  test('a dead OpenClaw holder: doctor reports a stale lock, --repair removes the file, ingest goes through', async () => {
    const s = newState();
    await seedPeers((messages) => ingest(s, messages), ['a'], say);
    const lockPath = `${transcriptOf(s, 'a')}.lock`;
    const run = await holdOpenClawLock(lockPath);
    holders.push(run);
    run.child.kill('SIGKILL');
    await run.exited;

    const checked = await doctor(s);
    assert.equal(checked.code, 65);
    assert.deepEqual(problemsOf(checked.report).map((p) => [p.kind, p.file, p.repairable]), [['stale-lock', lockPath, true]]);
    const repaired = await doctor(s, '--repair');
    assert.equal(repaired.code, 0, JSON.stringify(problemsOf(repaired.report)));
    assert.equal(fs.existsSync(lockPath), false);

    // and without doctor: the next writer reclaims a dead holder's file at once
    const again = await holdOpenClawLock(lockPath);
    holders.push(again);
    again.child.kill('SIGKILL');
    await again.exited;
    const r = await ingest(s, [say('a', 'after the crash')]);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(fs.existsSync(lockPath), false);
  });
});
