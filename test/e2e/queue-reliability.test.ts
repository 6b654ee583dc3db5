// The queue's reliability cases (quality.md 10, 13, 19, 21, 22 for ingest) and the queue commands:
// real processes, a runner held by a file, SIGKILL; no test sleeps for correctness.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import {
  LiveIngest,
  allTranscripts,
  assertStoreValid,
  dm,
  eventsOf,
  ingestAll,
  killLiveIngests,
  queueCli,
  queueEnv,
  queueRunner,
  readStore,
  releaseHolds,
  sessionsDir,
  shape,
  transcriptOf,
} from '../fixtures/queue-lib.js';

after(killLiveIngests);

const KEY = 'agent:main:direct:alice';
const alice = (text: string, extra: Record<string, unknown> = {}) => dm('alice', text, extra);

function holdConfig(queue: Record<string, unknown> = {}, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { session: { dmScope: 'per-peer' }, agents: { defaults: { runner: queueRunner('hold') } }, messages: { queue: { debounceMs: 20, ...queue } }, ...extra };
}

describe('case 10: a message arriving while a long run holds the session lock', () => {
  test('is queued durably by another process and run by the run\'s owner afterwards — never dropped', async () => {
    const env = queueEnv(holdConfig({ mode: 'followup' }));
    const live = new LiveIngest(env);
    live.send(alice('long run'));
    const first = await live.waitFor((e) => e.type === 'run_started', 'the long run');
    const lockDir = `${sessionsDir(env)}/${readStore(env)[KEY].sessionFile}.lock`;
    assert.ok(fs.existsSync(lockDir), 'the run holds the session write lock');
    const other = await ingestAll(env, [alice('meanwhile', { runId: 'meanwhile-1' })]);
    assert.equal(other.code, 0, other.stderr);
    assert.deepEqual(eventsOf(other.events, 'result').map((e) => [e.disposition, e.persisted]), [['queued', true]]);
    // Durable and visible to any process while it waits.
    const listing = await queueCli(env, ['queue', '--json']);
    assert.equal(listing.code, 0, listing.stderr);
    assert.deepEqual(listing.json.items.map((i: any) => [i.runId, i.state, i.mode, i.sessionKey, i.requester, i.text]), [['meanwhile-1', 'queued', 'followup', KEY, 'alice', 'meanwhile']]);
    assert.deepEqual(listing.json.active.map((a: any) => [a.runId, a.sessionKey, a.pid, a.alive]), [[first.runId, KEY, live.child.pid, true]]);
    assertStoreValid(env);
    releaseHolds(env);
    await live.waitFor((e) => e.type === 'reply' && e.runId === 'meanwhile-1', 'the queued message\'s reply (from the owner)');
    await live.finish();
    assert.deepEqual(shape(transcriptOf(env, KEY)).filter((l) => l.startsWith('user:')), ['user:long run', 'user:meanwhile']);
  });
});

describe('a run that outlasts its lock\'s refreshes', () => {
  test('keeps its session write lock: naming its runner in the lock folder is no takeover', async () => {
    // The holder refreshes the folder's mtime every staleMs / 2 and checks that it is still the
    // mtime it set; a file made in the folder after that (child.json, once the runner started)
    // changed it, and every run was aborted ("lock was lost") at its first refresh.
    const env = queueEnv(holdConfig({ mode: 'followup' }, { session: { dmScope: 'per-peer', writeLock: { staleMs: 2_000 } } }));
    const live = new LiveIngest(env);
    live.send(alice('long run'));
    const started = await live.waitFor((e) => e.type === 'run_started', 'the long run');
    const lockDir = `${sessionsDir(env)}/${readStore(env)[KEY].sessionFile}.lock`;
    const childRecord = path.join(lockDir, 'child.json');
    const deadline = Date.now() + 20_000;
    // Until two refreshes (one a second) have passed since the runner was named: each sets a new mtime.
    const mtimes = new Set<number>();
    while (mtimes.size < 3) {
      assert.equal(eventsOf(live.events, 'run_failed').length, 0, `the run was stopped: ${JSON.stringify(eventsOf(live.events, 'run_failed'))}`);
      assert.ok(Date.now() < deadline, 'the lock folder was not refreshed');
      try {
        if (JSON.parse(fs.readFileSync(childRecord, 'utf8')).pid > 0) mtimes.add(fs.statSync(lockDir).mtimeMs);
      } catch {
        // the runner is not named yet
      }
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    releaseHolds(env);
    const ended = await live.waitFor((e) => e.type === 'run_ended' && e.runId === started.runId, 'the end of the run');
    assert.equal(ended.status, 'done');
    await live.finish();
    assert.deepEqual(eventsOf(live.events, 'run_failed'), []);
  });
});

describe('case 13: work queued under the old sessionId after a reset', () => {
  test('expires (reported) and is never delivered into the new instance; the reset interrupts the run', async () => {
    const env = queueEnv(holdConfig({ mode: 'followup' }));
    const live = new LiveIngest(env);
    live.send(alice('old work'));
    const run = await live.waitFor((e) => e.type === 'run_started', 'the run');
    live.send(alice('queued 1', { runId: 'q1' }), alice('queued 2', { runId: 'q2' }));
    assert.equal((await live.result(2)).disposition, 'queued');
    assert.equal((await live.result(3)).disposition, 'queued');
    live.send(alice('/new fresh start', { runId: 'fresh' }));
    const reset = await live.result(4);
    assert.equal(reset.disposition, 'interrupted');
    assert.equal(reset.reset.reason, 'command');
    assert.equal(reset.reset.previousSessionId, run.sessionId);
    assert.notEqual(reset.sessionId, run.sessionId);
    const failed = await live.waitFor((e) => e.type === 'run_failed', 'the interrupted run');
    assert.deepEqual([failed.runId, failed.status], [run.runId, 'aborted']);
    await live.waitFor((e) => e.type === 'expired' && e.runId === 'q2', 'the expiries');
    releaseHolds(env);
    await live.finish();
    const expired = eventsOf(live.events, 'expired');
    assert.deepEqual(expired.map((e) => [e.runId, e.sessionId, e.currentSessionId, e.reason]), [['q1', run.sessionId, reset.sessionId, 'rebind'], ['q2', run.sessionId, reset.sessionId, 'rebind']]);
    assert.deepEqual(eventsOf(live.events, 'reply').map((e) => [e.runId, e.sessionId, e.text]), [['fresh', reset.sessionId, 'hold: fresh start']]);
    const entry = readStore(env)[KEY];
    assert.equal(entry.sessionId, reset.sessionId);
    // The new instance opens with its notice; the expiries are recorded as reports (custom
    // records naming the items, never their messages), then the new work.
    assert.deepEqual(shape(transcriptOf(env, KEY)), ['reset_notice', 'custom:expired', 'custom:expired', 'user:fresh start', 'tool_call', 'tool_result', 'assistant:hold: fresh start', 'mirror:hold: fresh start']);
    const reports = transcriptOf(env, KEY).filter((record: any) => record.type === 'custom' && record.customType === 'expired');
    assert.deepEqual(reports.map((r: any) => [r.data.runId, r.data.sessionId, r.data.currentSessionId, r.data.reason]), [['q1', run.sessionId, reset.sessionId, 'rebind'], ['q2', run.sessionId, reset.sessionId, 'rebind']]);
    const archived = allTranscripts(env).find((t) => t.file.startsWith(`${run.sessionId}.jsonl.reset.`));
    assert.ok(archived, 'the old instance is archived');
    assert.deepEqual(shape(archived.records), ['user:old work', 'tool_call', 'custom:run_failed']);
    const everything = allTranscripts(env).flatMap((t) => shape(t.records));
    assert.ok(!everything.some((l) => l.includes('queued 1') || l.includes('queued 2')), 'expired items are in no transcript');
    assertStoreValid(env);
  });
});

describe('case 19: FIFO across steer and followup', () => {
  test('a steer message behind a waiting followup waits its turn; an interrupt supersedes what waits and runs next', async () => {
    const env = queueEnv(holdConfig());
    const live = new LiveIngest(env);
    live.send(alice('A'));
    const run = await live.waitFor((e) => e.type === 'run_started', 'run A');
    live.send(
      alice('B', { runId: 'B', queue: { mode: 'steer' } }),
      alice('C', { runId: 'C', queue: { mode: 'followup' } }),
      alice('D', { runId: 'D', queue: { mode: 'steer' } }),
      alice('E', { runId: 'E', queue: { mode: 'interrupt' } }),
      alice('F', { runId: 'F', queue: { mode: 'followup' } }),
    );
    const results = await Promise.all([2, 3, 4, 5, 6].map((n) => live.result(n)));
    // B is parked for the run; D behind the waiting C is not; E interrupts: stop and do this instead.
    assert.deepEqual(results.map((e) => e.disposition), ['steered', 'queued', 'queued', 'interrupted', 'queued']);
    const failed = await live.waitFor((e) => e.type === 'run_failed', 'the interrupted run');
    assert.equal(failed.runId, run.runId);
    releaseHolds(env);
    await live.finish();
    // C and D waited and are superseded; B, taken by the aborted run, leaves with it. Each is reported.
    assert.deepEqual(eventsOf(live.events, 'dropped').map((e) => [e.runId, e.reason]).sort(), [['B', 'interrupt'], ['C', 'interrupt'], ['D', 'interrupt']]);
    assert.deepEqual(eventsOf(live.events, 'run_started').map((e) => e.runId), [run.runId, 'E', 'F']);
    assert.deepEqual(eventsOf(live.events, 'reply').map((e) => e.text), ['hold: E', 'hold: F']);
    assert.deepEqual(shape(transcriptOf(env, KEY)).filter((l) => l.startsWith('user:')), ['user:A', 'user:E', 'user:F']);
  });
});

describe('case 21: duplicates', () => {
  test('the same messageId within 5 minutes runs once, idle or queued', async () => {
    const env = queueEnv({ session: { dmScope: 'per-peer' }, agents: { defaults: { runner: { command: 'builtin:slow-echo', delayMs: 50, toolCalls: 1 } } }, messages: { queue: { mode: 'followup', debounceMs: 10 } } });
    const r = await ingestAll(env, [
      alice('one', { messageId: 'm1' }),
      alice('one again', { messageId: 'm1' }),
      alice('two', { messageId: 'm2' }),
      alice('two again', { messageId: 'm2' }),
    ]);
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(eventsOf(r.events, 'result').map((e) => e.disposition), ['started', 'duplicate', 'queued', 'duplicate']);
    assert.deepEqual(eventsOf(r.events, 'reply').map((e) => e.text), ['slow-echo: one', 'slow-echo: two']);
    const again = await ingestAll(env, [alice('two, third time', { messageId: 'm2' })]);
    assert.deepEqual(eventsOf(again.events, 'result').map((e) => e.disposition), ['duplicate']);
    assert.deepEqual(eventsOf(again.events, 'reply'), []);
  });
});

describe('case 22 (ingest): SIGKILL with queued items', () => {
  test('the next ingest reports the dead run, takes the session over and runs the queued items in order', async () => {
    const slow = { command: 'builtin:slow-echo', delayMs: 600_000, toolCalls: 1 };
    const fast = { command: 'builtin:slow-echo', delayMs: 10, toolCalls: 1 };
    const base = { session: { dmScope: 'per-peer', writeLock: { staleMs: 2000 } }, messages: { queue: { mode: 'followup', debounceMs: 10 } } };
    const env = queueEnv({ ...base, agents: { defaults: { runner: slow } } });
    const live = new LiveIngest(env);
    live.send(alice('doomed'), alice('survivor 1', { runId: 's1' }), alice('survivor 2', { runId: 's2' }));
    const run = await live.waitFor((e) => e.type === 'run_started', 'the first run');
    await live.result(3);
    live.child.kill('SIGKILL');
    const { signal } = await live.exited;
    assert.equal(signal, 'SIGKILL');
    assert.deepEqual(readStore(env)[KEY].queue.map((i: any) => i.runId), ['s1', 's2'], 'the queue survived on disk');

    fs.writeFileSync(env.config, JSON.stringify({ ...base, agents: { defaults: { runner: fast } } }));
    const next = await ingestAll(env, []);
    assert.equal(next.code, 0, next.stderr);
    const [failed] = eventsOf(next.events, 'run_failed');
    assert.deepEqual([failed.runId, failed.reason], [run.runId, 'orphaned']);
    assert.deepEqual(eventsOf(next.events, 'reply').map((e) => [e.runId, e.text]), [['s1', 'slow-echo: survivor 1'], ['s2', 'slow-echo: survivor 2']]);
    const entry = readStore(env)[KEY];
    assert.equal(entry.queue, undefined);
    assert.equal(entry.activeRun, undefined);
    const conversation = shape(transcriptOf(env, KEY));
    const failedAt = conversation.indexOf('custom:run_failed');
    // The killed run may or may not have recorded its tool call before the kill.
    assert.deepEqual(conversation.slice(0, failedAt).filter((label) => label !== 'tool_call'), ['user:doomed']);
    assert.deepEqual(conversation.slice(failedAt), [
      'custom:run_failed',
      'user:survivor 1', 'tool_call', 'tool_result', 'assistant:slow-echo: survivor 1', 'mirror:slow-echo: survivor 1',
      'user:survivor 2', 'tool_call', 'tool_result', 'assistant:slow-echo: survivor 2', 'mirror:slow-echo: survivor 2',
    ]);
    assertStoreValid(env);
  });
});

describe('SIGTERM', () => {
  test('aborts the runs of the ingest (recorded) and keeps what waits queued for the next ingest', async () => {
    const env = queueEnv(holdConfig({ mode: 'followup' }));
    const live = new LiveIngest(env);
    live.send(alice('running', { runId: 'R' }), alice('waiting', { runId: 'W' }));
    await live.waitFor((e) => e.type === 'run_started', 'the run');
    await live.result(2);
    live.child.kill('SIGTERM');
    const { code } = await live.exited;
    assert.equal(code, 143, live.stderr);
    assert.deepEqual(eventsOf(live.events, 'run_failed').map((e) => [e.runId, e.status]), [['R', 'aborted']]);
    const entry = readStore(env)[KEY];
    assert.deepEqual(entry.queue.map((i: any) => i.runId), ['W']);
    assert.equal(entry.activeRun, undefined);
    releaseHolds(env);
    const next = await ingestAll(env, []);
    assert.equal(next.code, 0, next.stderr);
    assert.deepEqual(eventsOf(next.events, 'reply').map((e) => [e.runId, e.text]), [['W', 'hold: waiting']]);
  });
});

describe('queue commands', () => {
  test('list, show, cancel (queued only) and abort (queued first, then the active run)', async () => {
    const env = queueEnv(holdConfig({ mode: 'followup' }));
    const live = new LiveIngest(env);
    live.send(alice('active', { runId: 'A' }), alice('b', { runId: 'B' }), alice('c', { runId: 'C' }), alice('d', { runId: 'D' }));
    await live.waitFor((e) => e.type === 'run_started', 'the active run');
    await live.result(4);

    const listed = await queueCli(env, ['queue', 'list', '--session', KEY, '--json']);
    assert.equal(listed.code, 0, listed.stderr);
    assert.deepEqual(Object.keys(listed.json.items[0]).slice(0, 9), ['runId', 'messageId', 'requester', 'sessionKey', 'sessionId', 'mode', 'state', 'enqueuedAt', 'text']);
    assert.deepEqual(listed.json.items.map((i: any) => [i.runId, i.position]), [['B', 1], ['C', 2], ['D', 3]]);
    assert.deepEqual([listed.json.items[0].owner.pid, listed.json.items[0].owner.alive], [live.child.pid, true], 'the live ingest drains the queue');
    assert.deepEqual(Object.keys(listed.json.active[0]).slice(0, 5), ['runId', 'sessionKey', 'sessionId', 'pid', 'startedAt']);
    const other = await queueCli(env, ['queue', '--session', 'agent:main:direct:nobody', '--json']);
    assert.equal(other.code, 66, `a session that is not there is NOT_FOUND, as for queue abort: ${other.stdout}`);
    assert.equal(JSON.parse(other.stderr.trim()).error.code, 'NOT_FOUND');
    const text = await queueCli(env, ['queue']);
    assert.match(text.stdout, /Active run/);
    assert.match(text.stdout, /\bC\b/);

    const shown = await queueCli(env, ['queue', 'show', 'C', '--json']);
    assert.deepEqual([shown.code, shown.json.item.runId, shown.json.item.text, shown.json.item.position], [0, 'C', 'c', 2]);
    const showActive = await queueCli(env, ['queue', 'show', 'A', '--json']);
    assert.equal(showActive.json.active.runId, 'A');

    const cancel = await queueCli(env, ['queue', 'cancel', 'C', '--json']);
    assert.deepEqual([cancel.code, cancel.json.cancelled.runId], [0, 'C']);
    const again = await queueCli(env, ['queue', 'cancel', 'C', '--json']);
    assert.equal(again.code, 66);
    assert.equal(JSON.parse(again.stderr).error.code, 'NOT_FOUND');
    const activeCancel = await queueCli(env, ['queue', 'cancel', 'A', '--json']);
    assert.equal(activeCancel.code, 66, 'cancel never touches the active run');
    const missing = await queueCli(env, ['queue', 'show', 'nope', '--json']);
    assert.equal(missing.code, 66);

    const abort = await queueCli(env, ['queue', 'abort', '--session', KEY, '--json']);
    assert.equal(abort.code, 0, abort.stderr);
    assert.deepEqual([abort.json.sessionKey, abort.json.cancelled.map((i: any) => i.runId), abort.json.aborted], [KEY, ['B', 'D'], 'A']);
    const failed = await live.waitFor((e) => e.type === 'run_failed', 'the aborted run');
    assert.deepEqual([failed.runId, failed.status], ['A', 'aborted']);
    await live.finish();
    assert.deepEqual(eventsOf(live.events, 'run_started').map((e) => e.runId), ['A'], 'nothing queued was promoted into the stopped session');
    // Each cancelled item is recorded by name (C by cancel, B and D by abort), as every drop is.
    const records = transcriptOf(env, KEY);
    assert.deepEqual(shape(records), ['user:active', 'tool_call', 'custom:dropped', 'custom:dropped', 'custom:dropped', 'custom:run_failed']);
    assert.deepEqual(records.filter((r) => r.customType === 'dropped').map((r) => [r.data.runId, r.data.reason]), [['C', 'cancelled'], ['B', 'stopped'], ['D', 'stopped']]);
    const after = await queueCli(env, ['queue', '--json']);
    assert.deepEqual(after.json, { items: [], active: [] });
    const quiet = await queueCli(env, ['queue', 'list', '--session', KEY, '--json']);
    assert.deepEqual([quiet.code, quiet.json], [0, { items: [], active: [] }], 'a session that is there with nothing queued lists nothing');
    const helpText = await queueCli(env, ['queue', 'cancel', '--help']);
    assert.match(helpText.stdout, /Example/);
  });
});

describe('queue list and processes on another host', () => {
  test('their runs and queue owners are listed with alive: null (unknown), never taken for dead', async () => {
    const env = queueEnv(holdConfig({ mode: 'followup' }));
    const elsewhere = { pid: 4242, hostname: 'some-other-host.invalid', processStartTime: 1 };
    const item = { runId: 'W', requester: 'alice', sessionKey: KEY, sessionId: 's1', enqueuedAt: 1, wallAt: 1, mode: 'followup', state: 'queued', kind: 'user', text: 'waiting', channel: 'telegram', debounceMs: 0 };
    fs.mkdirSync(sessionsDir(env), { recursive: true });
    fs.writeFileSync(
      path.join(sessionsDir(env), 'sessions.json'),
      JSON.stringify({ [KEY]: { sessionId: 's1', updatedAt: 1, activeRun: { ...elsewhere, runId: 'R', sessionId: 's1', startedAt: 1, lane: 'main' }, queueOwner: { ...elsewhere, since: 1 }, queue: [item] } }),
    );
    const listed = await queueCli(env, ['queue', '--json']);
    assert.equal(listed.code, 0, listed.stderr);
    assert.deepEqual(listed.json.active.map((run: any) => [run.runId, run.hostname, run.alive]), [['R', elsewhere.hostname, null]]);
    assert.deepEqual(listed.json.items.map((i: any) => [i.runId, i.owner]), [['W', { pid: 4242, hostname: elsewhere.hostname, alive: null }]]);
  });
});
