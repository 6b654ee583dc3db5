// A run that waits for a lane slot (agents.defaults.maxConcurrent reached) holds its session lock
// meanwhile; the wait must not eat into the lock's max hold, which is meant for the run itself
// (its timeout plus a grace). Before, a run that waited long enough lost its lock mid-run and was
// reported aborted ("the session write lock was lost") although its own timeout had not passed.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { dm, eventsOf, ingestAll, queueEnv, queueRunner, transcriptOf } from '../fixtures/queue-lib.js';

test('runs queued behind a lane slot each keep their whole max hold: all end done, none loses its lock', async () => {
  // Three sessions, one slot, runs of 1.2 s, a max hold of 2 s: the second waits 1.2 s and the
  // third 2.4 s (longer than the max hold itself) before their runners start.
  const env = queueEnv({
    agents: { defaults: { maxConcurrent: 1, runner: queueRunner('log') } },
    session: { dmScope: 'per-peer', writeLock: { maxHoldMs: 2000 } },
  });
  process.env.QUEUE_DELAY_MS = '1200';
  try {
    const r = await ingestAll(env, [dm('a', 'one'), dm('b', 'two'), dm('c', 'three')]);
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(eventsOf(r.events, 'run_failed'), []);
    assert.deepEqual(eventsOf(r.events, 'run_ended').map((e) => e.status), ['done', 'done', 'done']);
    for (const peer of ['a', 'b', 'c']) {
      const replies = transcriptOf(env, `agent:main:direct:${peer}`).filter((record) => record.type === 'message' && record.message.role === 'assistant' && record.message.delivered !== false);
      assert.ok(replies.length >= 1, `${peer} was answered`);
    }
  } finally {
    delete process.env.QUEUE_DELAY_MS;
  }
});
