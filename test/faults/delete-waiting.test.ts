// `sessions delete` of a session whose queue still holds acknowledged messages. Before, the row
// went with its queue and nothing anywhere said so: an item queued with `ingest --no-wait`, or
// left behind by a process that died, vanished without a dropped report. Now a live process's
// work is waited for, and what is left is dropped with the session and reported, in the
// command's outcome and in the archived transcript (with the report of a dead run).

import assert from 'node:assert/strict';
import fs from 'node:fs';
import { spawn } from 'node:child_process';
import { after, describe, test } from 'node:test';
import { BIN, jsonLines } from '../helpers.js';
import { LiveIngest, allTranscripts, dm, ingestAll, killLiveIngests, queueCli, queueEnv, queueRunner, readStore, releaseHolds, shape, assertStoreValid, type QueueEnv } from '../fixtures/queue-lib.js';

after(killLiveIngests);

const KEY = 'agent:main:direct:alice';
const alice = (text: string, extra: Record<string, unknown> = {}) => dm('alice', text, extra);

function holdEnv(): QueueEnv {
  return queueEnv({ session: { dmScope: 'per-peer' }, agents: { defaults: { runner: queueRunner('hold') } }, messages: { queue: { mode: 'followup', debounceMs: 20 } } });
}

/** The `.deleted.` archives of the agent, as shapes, with their custom records' data. */
function deletedArchives(env: QueueEnv): { shape: string[]; custom: any[] }[] {
  return allTranscripts(env)
    .filter(({ file }) => file.includes('.deleted.'))
    .map(({ records }) => ({ shape: shape(records), custom: records.filter((r) => r.type === 'custom').map((r) => ({ customType: r.customType, ...r.data })) }));
}

describe('sessions delete with waiting work', () => {
  test('an item queued with --no-wait is dropped with the session and reported, in the outcome and in the archive', async () => {
    const env = holdEnv();
    const queued = await ingestAll(env, [alice('later', { runId: 'W1', messageId: 'm-w1' })], ['--no-wait']);
    assert.equal(queued.code, 0, queued.stderr);
    assert.deepEqual(queued.events.map((e) => [e.disposition, e.persisted]), [['queued', true]]);

    const deleted = await queueCli(env, ['sessions', 'delete', KEY, '--yes', '--json']);
    assert.equal(deleted.code, 0, deleted.stderr);
    assert.deepEqual(
      deleted.json.dropped.map((e: any) => [e.type, e.runId, e.messageId, e.reason, e.sessionKey]),
      [['dropped', 'W1', 'm-w1', 'deleted', KEY]],
    );
    assert.ok(deleted.json.archivedTo, 'a transcript exists to keep the report, even for a session that had recorded nothing');
    assert.deepEqual(deletedArchives(env).map((a) => a.custom.map((c) => [c.customType, c.runId, c.messageId, c.reason])), [[['dropped', 'W1', 'm-w1', 'deleted']]]);
    assert.equal(readStore(env)[KEY], undefined);
    assertStoreValid(env);

    const text = await queueCli(env, ['sessions', 'delete', KEY, '--yes']);
    assert.equal(text.code, 66, 'deleted once');
    const next = await ingestAll(env, []);
    assert.deepEqual(next.events, [], 'nothing is left to run');
  });

  test('a live process running and draining the session is waited for: its queued messages run first', async () => {
    const env = holdEnv();
    const live = new LiveIngest(env);
    live.send(alice('active', { runId: 'A' }), alice('b', { runId: 'B' }));
    await live.waitFor((e) => e.type === 'run_started' && e.runId === 'A', 'the active run');
    await live.result(2);

    const child = spawn(process.execPath, [BIN, 'sessions', 'delete', KEY, '--yes', '--json', '--state-dir', env.state, '--config', env.config], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString('utf8')));
    child.stderr.on('data', (chunk: Buffer) => (err += chunk.toString('utf8')));
    const exited = new Promise<number | null>((resolve) => child.on('close', resolve));
    // The delete cannot end while run A holds the session; it is still waiting once B is seen queued.
    const listed = await queueCli(env, ['queue', '--json']);
    assert.deepEqual(listed.json.items.map((i: any) => i.runId), ['B']);
    assert.equal(child.exitCode, null, `the delete ended while a run was live: ${out}${err}`);
    releaseHolds(env);
    await live.finish();
    assert.equal(await exited, 0, err);
    const outcome = jsonLines(out)[0];
    assert.deepEqual(outcome.dropped, []);
    assert.deepEqual(live.events.filter((e) => e.type === 'run_ended').map((e) => [e.runId, e.status]), [['A', 'done'], ['B', 'done']]);
    const [archive] = deletedArchives(env);
    assert.deepEqual(archive.shape.filter((s) => s.startsWith('user:')), ['user:active', 'user:b'], 'both ran in the instance that was archived');
  });

  test('waiting messages of a live process that does not get to them: SESSION_BUSY (75) after the acquire timeout, nothing dropped', async () => {
    // After run A, B waits out a long quiet window: the ingest owns the queue, and nothing runs
    // or holds a lock meanwhile.
    const env = queueEnv({
      session: { dmScope: 'per-peer', writeLock: { acquireTimeoutMs: 400 } },
      agents: { defaults: { runner: queueRunner('hold') } },
      messages: { queue: { mode: 'followup', debounceMs: 60_000 } },
    });
    const live = new LiveIngest(env);
    live.send(alice('active', { runId: 'A' }), alice('later', { runId: 'L1' }));
    await live.waitFor((e) => e.type === 'run_started' && e.runId === 'A', 'the active run');
    await live.result(2);
    releaseHolds(env);
    await live.waitFor((e) => e.type === 'run_ended' && e.runId === 'A', 'the end of run A');
    // --now pins the command's clock: the wait must end by real time all the same.
    const refused = await queueCli(env, ['sessions', 'delete', KEY, '--yes', '--json', '--now', '2026-06-01T10:00:00Z']);
    assert.equal(refused.code, 75, refused.stdout + refused.stderr);
    assert.match(refused.stderr, /still has a run or waiting messages of a live process/);
    assert.deepEqual((await queueCli(env, ['queue', '--json'])).json.items.map((i: any) => i.runId), ['L1'], 'the item still waits');
    live.child.kill('SIGKILL');
    await live.exited;
  });

  test('a run whose process was killed: its report and the messages it left waiting go into the archive', async () => {
    const env = holdEnv();
    const live = new LiveIngest(env);
    live.send(alice('active', { runId: 'A' }), alice('b', { runId: 'B', messageId: 'm-b' }));
    await live.waitFor((e) => e.type === 'run_started' && e.runId === 'A', 'the active run');
    await live.result(2);
    live.child.kill('SIGKILL');
    await live.exited;
    // The runner child of the dead ingest may outlive it; let it go so nothing holds on.
    releaseHolds(env);

    const deleted = await queueCli(env, ['sessions', 'delete', KEY, '--yes', '--json']);
    assert.equal(deleted.code, 0, deleted.stderr);
    assert.deepEqual(deleted.json.dropped.map((e: any) => [e.runId, e.messageId, e.reason]), [['B', 'm-b', 'deleted']]);
    const [archive] = deletedArchives(env);
    assert.deepEqual(
      archive.custom.map((c) => [c.customType, c.runId, c.reason]),
      [
        ['run_failed', 'A', 'orphaned'],
        ['dropped', 'B', 'deleted'],
      ],
    );
    assert.ok(fs.existsSync(deleted.json.archivedTo));
    assertStoreValid(env);
  });
});
