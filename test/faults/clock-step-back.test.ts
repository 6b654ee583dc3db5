// The wall clock stepped back (NTP correction, a VM resumed from a snapshot) while messages wait
// in the durable queue: their quiet window was stamped with the clock as it read before the step,
// so it ends "in the future". Real processes: `ingest --no-wait` queues, the store is left as a
// clock stepped back by an hour leaves it (the items' wall stamps an hour after the clock), and
// the next `ingest` must run them — not wait for the clock to catch up (an hour: the sender got no
// answer, and debounceMaxWaitMs, which promises one, was waited past as well).

import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { dm, eventsOf, ingestAll, queueEnv, readStore, runnerEnv, sessionsDir, transcriptOf } from '../fixtures/queue-lib.js';
import { jsonLines, runCli } from '../helpers.js';

const KEY = 'agent:main:direct:alice';
const STEP_BACK_MS = 60 * 60_000;
/** Far below the hour a drain that trusts the old stamps waits; far above what a drain that runs them takes. */
const DRAIN_BOUND_MS = 15_000;

for (const mode of ['collect', 'followup'] as const) {
  test(`${mode}: items stamped before the clock was stepped back an hour run at the next drain, once each`, async () => {
    const env = queueEnv({
      session: { dmScope: 'per-peer' },
      agents: { defaults: { runner: { command: 'builtin:echo' } } },
      messages: { queue: { mode, debounceMs: 50, debounceMaxWaitMs: 1000 } },
    }, 'sb-clockstep-');
    const queued = await ingestAll(env, [dm('alice', 'one', { runId: 'r1', messageId: 'm1' }), dm('alice', 'two', { runId: 'r2', messageId: 'm2' })], ['--no-wait']);
    assert.equal(queued.code, 0, queued.stderr);
    assert.deepEqual(eventsOf(queued.events, 'result').map((e) => e.persisted), [true, true]);

    // What a step back leaves: the items' wall stamps are after the clock that reads them now.
    const file = path.join(sessionsDir(env), 'sessions.json');
    const store = readStore(env);
    for (const item of store[KEY].queue) item.wallAt += STEP_BACK_MS;
    fs.writeFileSync(file, JSON.stringify(store, null, 2));

    // A drain that waited for the old clock would still be waiting when this bound kills it.
    const run = await runCli(['ingest', '--state-dir', env.state, '--config', env.config], { input: '', env: runnerEnv(env), timeoutMs: DRAIN_BOUND_MS });
    const drained = { ...run, events: jsonLines(run.stdout) };
    assert.equal(drained.signal, null, `the drain waited for the clock to catch up (killed after ${DRAIN_BOUND_MS} ms)`);
    assert.equal(drained.code, 0, drained.stderr);
    const replies = eventsOf(drained.events, 'reply');
    if (mode === 'collect') assert.equal(replies.length, 1, JSON.stringify(drained.events));
    else assert.deepEqual(replies.map((e) => e.runId), ['r1', 'r2']);
    const recorded = transcriptOf(env, KEY)
      .filter((r) => r.type === 'message' && r.message.role === 'user')
      .flatMap((r) => (Array.isArray(r.message.collected) ? r.message.collected.map((part: any) => part.messageId) : [r.message.messageId]));
    assert.deepEqual(recorded, ['m1', 'm2'], 'each recorded once');
    assert.equal(readStore(env)[KEY].queue, undefined, 'nothing left waiting');
  });
}
