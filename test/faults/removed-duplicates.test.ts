// A session's duplicate memory used to leave with its entry: when maintenance capped a session
// away (maxEntries in enforce mode), or `sessions delete`/`sessions cleanup` removed it, a resend
// of a message it had recorded a moment before was recorded a second time. Now every removal
// keeps the ids of the window in sessions.json.removed, written before sessions.json, and a
// resend is `duplicate` — until the window has passed.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import { jsonLines, runCli, tempDir, writeJson } from '../helpers.js';

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

/** How many records, in every transcript and archive of the folder, carry this messageId. */
function copiesOf(dir: string, messageId: string): number {
  let copies = 0;
  for (const name of fs.readdirSync(dir).filter((n) => n.includes('.jsonl'))) {
    for (const line of fs.readFileSync(path.join(dir, name), 'utf8').split('\n')) {
      if (line.includes(`"messageId":"${messageId}"`)) copies += 1;
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
