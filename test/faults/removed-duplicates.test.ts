// A session's duplicate memory used to leave with its entry: when maintenance capped a session
// away (maxEntries in enforce mode), or `sessions delete`/`sessions cleanup` removed it, a resend
// of a message it had recorded a moment before was recorded a second time. Now every removal
// keeps the ids of the window in sessions.json.removed, written before sessions.json, and a
// resend is `duplicate` — until the window has passed.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import { spawn } from 'node:child_process';
import { BIN, jsonLines, runCli, tempDir, writeJson } from '../helpers.js';

const T0 = Date.parse('2026-06-01T10:00:00.000Z');

function setup(session: Record<string, unknown> = {}): { state: string; config: string; dir: string } {
  const state = tempDir('sb-removed-dup-');
  const config = writeJson(path.join(state, 'config.json'), { session: { dmScope: 'per-peer', ...session } });
  return { state, config, dir: path.join(state, 'agents', 'main', 'sessions') };
}

const message = (peer: string, messageId: string) => ({ channel: 'telegram', peer: `direct:${peer}`, text: `text of ${messageId}`, messageId });

async function ingest(env: { state: string; config: string }, messages: Record<string, unknown>[], at: number): Promise<any[]> {
  const r = await runCli(['ingest', '--state-dir', env.state, '--config', env.config, '--now', new Date(at).toISOString()], { input: messages.map((m) => JSON.stringify(m)).join('\n') + '\n' });
  assert.equal(r.code, 0, r.stderr);
  return jsonLines(r.stdout).filter((e) => e.type === 'result');
}

/** Every transcript and archive of the folder (lock folders left by a killed process are not). */
function transcriptFiles(dir: string): string[] {
  return fs.readdirSync(dir).filter((n) => n.includes('.jsonl') && fs.statSync(path.join(dir, n)).isFile());
}

/** How many user records, in every transcript and archive of the folder, carry this messageId. */
function copiesOf(dir: string, messageId: string): number {
  let copies = 0;
  for (const name of transcriptFiles(dir)) {
    for (const line of fs.readFileSync(path.join(dir, name), 'utf8').split('\n')) {
      // A user record (a run_failed naming the message it carried is no copy of it).
      if (line.includes('"role":"user"') && line.includes(`"messageId":"${messageId}"`)) copies += 1;
    }
  }
  return copies;
}

describe('duplicates of removed sessions', () => {
  test('a session capped away by enforce maintenance: its resent message is a duplicate, not a second record', async () => {
    const env = setup({ maintenance: { mode: 'enforce', maxEntries: 2 } });
    const first = await ingest(env, [message('p1', 'm1')], T0);
    await ingest(env, [message('p2', 'm2')], T0 + 1_000);
    await ingest(env, [message('p3', 'm3')], T0 + 2_000);
    const store = JSON.parse(fs.readFileSync(path.join(env.dir, 'sessions.json'), 'utf8'));
    assert.deepEqual(Object.keys(store).sort(), ['agent:main:direct:p2', 'agent:main:direct:p3'], 'the cap removed the oldest');

    const resent = await ingest(env, [message('p1', 'm1'), message('p1', 'm1b')], T0 + 3_000);
    assert.deepEqual(resent.map((e) => [e.messageId, e.disposition]), [['m1', 'duplicate'], ['m1b', 'recorded']]);
    assert.equal(resent[0].sessionId, first[0].sessionId, 'answered with the instance that recorded it');
    assert.equal(copiesOf(env.dir, 'm1'), 1);
    // The new instance remembers it too: its own resends stay duplicates once the file has moved on.
    const again = await ingest(env, [message('p1', 'm1'), message('p1', 'm1b')], T0 + 4_000);
    assert.deepEqual(again.map((e) => e.disposition), ['duplicate', 'duplicate']);
  });

  test('sessions delete and sessions cleanup keep the memory; past the window a resend is a new message', async () => {
    const env = setup({ maintenance: { mode: 'warn', maxEntries: 1 } });
    await ingest(env, [message('d', 'md')], T0);
    await ingest(env, [message('c1', 'mc1')], T0 + 1_000);
    await ingest(env, [message('c2', 'mc2')], T0 + 2_000);
    const deleted = await runCli(['sessions', 'delete', 'agent:main:direct:d', '--yes', '--state-dir', env.state, '--config', env.config, '--now', new Date(T0 + 3_000).toISOString()]);
    assert.equal(deleted.code, 0, deleted.stderr);
    const cleanup = await runCli(['sessions', 'cleanup', '--enforce', '--json', '--state-dir', env.state, '--config', env.config, '--now', new Date(T0 + 3_000).toISOString()]);
    assert.equal(cleanup.code, 0, cleanup.stderr);
    assert.equal(JSON.parse(cleanup.stdout).capped, 1);
    const memory = JSON.parse(fs.readFileSync(path.join(env.dir, 'sessions.json.removed'), 'utf8'));
    assert.deepEqual(Object.keys(memory.sessions).sort(), ['agent:main:direct:c1', 'agent:main:direct:d']);

    const resent = await ingest(env, [message('d', 'md'), message('c1', 'mc1')], T0 + 60_000);
    assert.deepEqual(resent.map((e) => e.disposition), ['duplicate', 'duplicate']);
    assert.equal(copiesOf(env.dir, 'md') + copiesOf(env.dir, 'mc1'), 2);

    // Five minutes after it was recorded an id is no longer remembered anywhere (the window).
    const late = await ingest(env, [message('c1', 'mc1')], T0 + 1_000 + 5 * 60_000 + 1);
    assert.deepEqual(late.map((e) => e.disposition), ['recorded']);
  });

  test('the memory file is derived: unreadable, it is read as empty and doctor names it', async () => {
    const env = setup({ maintenance: { mode: 'enforce', maxEntries: 1 } });
    await ingest(env, [message('a', 'ma')], T0);
    await ingest(env, [message('b', 'mb')], T0 + 1_000);
    const file = path.join(env.dir, 'sessions.json.removed');
    assert.ok(fs.existsSync(file));
    fs.writeFileSync(file, '{not json');
    const doctor = await runCli(['doctor', '--json', '--state-dir', env.state, '--config', env.config, '--now', new Date(T0 + 2_000).toISOString()]);
    assert.equal(doctor.code, 65, 'a problem remains');
    const report = JSON.parse(doctor.stdout);
    const finding = report.stores.flatMap((s: { problems: any[] }) => s.problems).find((p: { file?: string; kind: string }) => p.file === file);
    assert.equal(finding?.kind, 'removed-memory-invalid', `doctor reports the file: ${doctor.stdout}`);
    const resent = await ingest(env, [message('a', 'ma')], T0 + 2_000);
    assert.deepEqual(resent.map((e) => e.disposition), ['recorded'], 'with the memory lost, the resend is recorded (nothing worse)');
    // That write capped "b" away: the file is written anew, with what it carries now.
    assert.deepEqual(Object.keys(JSON.parse(fs.readFileSync(file, 'utf8')).sessions), ['agent:main:direct:b']);

    fs.writeFileSync(file, '{not json');
    const repaired = await runCli(['doctor', '--repair', '--json', '--state-dir', env.state, '--config', env.config, '--now', new Date(T0 + 3_000).toISOString()]);
    assert.equal(repaired.code, 0, repaired.stdout + repaired.stderr);
    assert.equal(fs.existsSync(file), false, 'repair removes it');
    const kept = fs.readdirSync(env.dir).filter((n) => n.startsWith('sessions.json.removed.corrupt-'));
    assert.deepEqual(kept.map((n) => fs.readFileSync(path.join(env.dir, n), 'utf8')), ['{not json'], 'its bytes are kept');
  });
});

describe('duplicates after doctor restores sessions.json', () => {
  for (const from of ['bak', 'headers'] as const) {
    test(`restored from ${from === 'bak' ? 'sessions.json.bak' : 'the transcript headers'}: messages recorded since are remembered again from the transcripts`, async () => {
      const env = setup();
      await ingest(env, [message('p', 'old')], T0);
      await ingest(env, [message('p', 'new1'), message('q', 'new2')], T0 + 1_000);
      const storePath = path.join(env.dir, 'sessions.json');
      fs.writeFileSync(storePath, '{"agent:main:direct:p": {"sessionId": ');
      if (from === 'headers') fs.rmSync(`${storePath}.bak`);
      const repaired = await runCli(['doctor', '--repair', '--json', '--state-dir', env.state, '--config', env.config, '--now', new Date(T0 + 2_000).toISOString()]);
      assert.equal(repaired.code, 0, repaired.stdout + repaired.stderr);
      const action = JSON.parse(repaired.stdout).stores[0].problems.find((p: { kind: string }) => p.kind === 'store-corrupt').action;
      // From the backup, "q" (created by the last write) is not in it: its transcript is adopted as an orphan, memory and all.
      assert.match(action, new RegExp(`${from === 'bak' ? 2 : 3} message id\\(s\\) recorded in the last five minutes are remembered again`));
      if (from === 'bak') assert.match(action, /one write behind: messages the last write queued are not in it/);

      const resent = await ingest(env, [message('p', 'old'), message('p', 'new1'), message('q', 'new2')], T0 + 3_000);
      assert.deepEqual(resent.map((e) => e.disposition), ['duplicate', 'duplicate', 'duplicate']);
      for (const id of ['old', 'new1', 'new2']) assert.equal(copiesOf(env.dir, id), 1, id);
    });
  }
});

describe('duplicates are messages of one route', () => {
  test('restored from the transcript headers under dmScope main: each DM\'s ids are remembered with the route that sent them', async () => {
    const env = setup({ dmScope: 'main' });
    const alice = { ...message('alice', '1'), accountId: 'work' };
    const bob = message('bob', '1');
    assert.deepEqual((await ingest(env, [alice, bob], T0)).map((e) => e.disposition), ['recorded', 'recorded'], 'two chats that number their messages alike');
    const storePath = path.join(env.dir, 'sessions.json');
    fs.rmSync(storePath);
    fs.rmSync(`${storePath}.bak`, { force: true });
    const repaired = await runCli(['doctor', '--repair', '--json', '--state-dir', env.state, '--config', env.config, '--now', new Date(T0 + 1_000).toISOString()]);
    assert.equal(repaired.code, 0, repaired.stdout + repaired.stderr);
    const carol = message('carol', '1');
    const resent = await ingest(env, [alice, bob, carol, { ...bob, accountId: 'work' }], T0 + 2_000);
    assert.deepEqual(resent.map((e) => e.disposition), ['duplicate', 'duplicate', 'recorded', 'recorded']);
    assert.equal(copiesOf(env.dir, '1'), 4);
  });
});

describe('maintenance and doctor do not undo each other', () => {
  test('doctor --repair completing a journal in enforce mode caps nothing under its own later steps', async () => {
    const env = setup({ maintenance: { mode: 'enforce', maxEntries: 2 } });
    await ingest(env, [message('a1', 'a1'), message('a2', 'a2')], T0);
    // A batch that dies after its records are down and before sessions.json is written: a
    // folder where the store's backup link is made fails the replace, the journal stays.
    const blocker = path.join(env.dir, 'sessions.json.bak.tmp');
    fs.mkdirSync(blocker);
    const failed = await runCli(['ingest', '--state-dir', env.state, '--config', env.config, '--now', new Date(T0 + 1_000).toISOString()], {
      input: `${JSON.stringify(message('a3', 'a3'))}\n${JSON.stringify(message('a4', 'a4'))}\n`,
    });
    assert.notEqual(failed.code, 0, 'the batch failed');
    assert.ok(fs.statSync(path.join(env.dir, 'sessions.json.journal')).size > 0, 'its journal is pending');
    fs.rmdirSync(blocker);

    const repaired = await runCli(['doctor', '--repair', '--json', '--state-dir', env.state, '--config', env.config, '--now', new Date(T0 + 2_000).toISOString()]);
    assert.equal(repaired.code, 0, repaired.stdout + repaired.stderr);
    const kinds = JSON.parse(repaired.stdout).stores[0].problems.map((p: { kind: string }) => p.kind);
    assert.deepEqual(kinds, ['journal-pending'], 'nothing was removed and then "repaired" back as a session with its history lost');
    const check = await runCli(['doctor', '--state-dir', env.state, '--config', env.config, '--now', new Date(T0 + 2_000).toISOString()]);
    assert.equal(check.code, 0, check.stdout + check.stderr);

    const resent = await ingest(env, ['a1', 'a2', 'a3', 'a4'].map((id) => message(id, id)), T0 + 3_000);
    assert.deepEqual(resent.map((e) => e.disposition), ['duplicate', 'duplicate', 'duplicate', 'duplicate']);
    for (const id of ['a1', 'a2', 'a3', 'a4']) assert.equal(copiesOf(env.dir, id), 1, id);
  });

  test('a session owed the report of a killed run is not capped away before the report is in its transcript', async () => {
    const env = setup({ maintenance: { mode: 'enforce', maxEntries: 1 } });
    fs.writeFileSync(env.config, JSON.stringify({ session: { dmScope: 'per-peer', maintenance: { mode: 'enforce', maxEntries: 1 } }, agents: { defaults: { runner: { command: 'builtin:slow-echo', delayMs: 60_000 } } } }));
    // (rewritten below with a quick runner for the process that takes over)
    const first = spawn(process.execPath, [BIN, 'ingest', '--state-dir', env.state, '--config', env.config], { stdio: ['pipe', 'pipe', 'inherit'] });
    let out = '';
    first.stdout.on('data', (chunk: Buffer) => (out += chunk.toString('utf8')));
    first.stdin.write(`${JSON.stringify(message('p2', 'x1'))}\n`);
    const deadline = Date.now() + 20_000;
    while (!out.includes('"type":"run_started"')) {
      assert.ok(Date.now() < deadline, `no run started: ${out}`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    assert.match(out, /"messageId":"x1".*"persisted":true/);
    first.kill('SIGKILL');
    await new Promise((resolve) => first.on('close', resolve));

    // The next process takes the dead run over (its run_failed goes to the outbox) while its own
    // message makes the store one entry too many. (Its own run is quick.)
    const runner = (delayMs: number) => JSON.stringify({ session: { dmScope: 'per-peer', maintenance: { mode: 'enforce', maxEntries: 1 } }, agents: { defaults: { runner: { command: 'builtin:slow-echo', delayMs } } } });
    fs.writeFileSync(env.config, runner(10));
    const next = await runCli(['ingest', '--state-dir', env.state, '--config', env.config], { input: `${JSON.stringify(message('p3', 'y1'))}\n` });
    assert.equal(next.code, 0, next.stderr);
    const store = JSON.parse(fs.readFileSync(path.join(env.dir, 'sessions.json'), 'utf8'));
    const named = new Set(Object.values(store).map((entry: any) => entry.sessionFile));
    const transcripts = fs.readdirSync(env.dir).filter((n) => n.endsWith('.jsonl'));
    assert.deepEqual(transcripts.filter((n) => !named.has(n)), [], 'no transcript is left that no entry names (an archived name written again)');
    const failures = transcriptFiles(env.dir).flatMap((n) => fs.readFileSync(path.join(env.dir, n), 'utf8').split('\n').filter((l) => l.includes('"customType":"run_failed"')));
    assert.equal(failures.length, 1, 'the killed run is reported once, in the session it belonged to');
    const check = await runCli(['doctor', '--state-dir', env.state, '--config', env.config]);
    assert.equal(check.code, 0, check.stdout + check.stderr);
    const resent = await runCli(['ingest', '--state-dir', env.state, '--config', env.config, '--no-wait'], { input: `${JSON.stringify(message('p2', 'x1'))}\n` });
    assert.deepEqual(jsonLines(resent.stdout).filter((e) => e.type === 'result').map((e) => e.disposition), ['duplicate']);
    assert.equal(copiesOf(env.dir, 'x1'), 1);
  });
});
