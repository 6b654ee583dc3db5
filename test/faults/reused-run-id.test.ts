// A client that gives its messages runIds of its own may give one twice (cli.md: `runId:
// "client-chosen-id"`, nothing makes it unique). A drain that dies after claiming a turn and
// before recording it leaves the claim to the next owner, which first looks in the transcript for
// the turn's record so as not to write it twice (docs/decisions.md, Queue). Looked up by runId
// alone, the record of an *earlier* message with the same runId was taken for this one's: the
// message ran (its reply is in the transcript) and its own user record was never written.
// Real processes: the drain is held at the session lock by an OpenClaw-style lock file, its claim
// is seen in sessions.json, the process is SIGKILLed there, the next `ingest` takes over.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, test } from 'node:test';
import { holdOpenClawLock } from '../fixtures/openclaw-lock.js';
import { waitUntil, type ChildRun } from '../fixtures/store-child-process.js';
import { LiveIngest, WAIT_MS, dm, ingestAll, killLiveIngests, queueEnv, readStore, sessionsDir, transcriptOf } from '../fixtures/queue-lib.js';

const KEY = 'agent:main:direct:alice';
const holders: ChildRun[] = [];
after(() => {
  killLiveIngests();
  for (const holder of holders) holder.child.kill('SIGKILL');
});

async function takeOverAfterReusedRunId(ids: { first?: string; second?: string }): Promise<void> {
  const env = queueEnv({
    session: { dmScope: 'per-peer', writeLock: { acquireTimeoutMs: WAIT_MS } },
    agents: { defaults: { runner: { command: 'builtin:echo' } } },
    messages: { queue: { mode: 'followup', debounceMs: 0 } },
  }, 'sb-runid-');
  const first = await ingestAll(env, [dm('alice', 'one', { runId: 'R', ...(ids.first ? { messageId: ids.first } : {}) })]);
  assert.equal(first.code, 0, first.stderr);
  const queued = await ingestAll(env, [dm('alice', 'two', { runId: 'R', ...(ids.second ? { messageId: ids.second } : {}) })], ['--no-wait']);
  assert.equal(queued.code, 0, queued.stderr);
  assert.equal(queued.events[0].disposition, 'queued');

  // The drain claims "two" in the store, then waits for the session lock: killed there.
  const transcript = path.join(sessionsDir(env), readStore(env)[KEY].sessionFile);
  const holder = await holdOpenClawLock(`${transcript}.lock`);
  holders.push(holder);
  const drain = new LiveIngest(env);
  drain.end();
  await waitUntil(() => (readStore(env)[KEY].queue ?? []).some((item: any) => item.text === 'two' && item.claimedBy !== undefined), WAIT_MS, 'the drain to claim the turn');
  drain.child.kill('SIGKILL');
  await drain.exited;
  holder.send('release');
  await holder.exited;
  assert.equal(fs.existsSync(`${transcript}.lock`), false);

  const takeover = await ingestAll(env, []);
  assert.equal(takeover.code, 0, takeover.stderr);
  assert.ok(takeover.events.some((e) => e.type === 'reply' && e.text === 'echo: two'), JSON.stringify(takeover.events));
  const users = transcriptOf(env, KEY).filter((r) => r.type === 'message' && r.message.role === 'user');
  assert.deepEqual(users.map((r) => [r.message.messageId, r.message.content[0].text]), [[ids.first, 'one'], [ids.second, 'two']], 'each message recorded once, "two" included');
  assert.equal(readStore(env)[KEY].queue, undefined);
}

test('a claimed turn taken over from a dead drain is recorded although an earlier message had the same runId', () => takeOverAfterReusedRunId({ first: 'm1', second: 'm2' }));

test('…also when neither message has a messageId: the record is the queued item\'s by its queue time', () => takeOverAfterReusedRunId({}));
