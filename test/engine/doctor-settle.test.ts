// doctor next to a busy writer: a check that found problems while sessions.json changed under it
// is made again, and only what is still wrong is reported. Here the "writer" is a `sessions delete`
// caught between archiving a transcript and removing its entry, finished while doctor reads; a
// real store built by the real CLI, the check in-process so that the change lands at a known step.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { systemClock } from '../../src/core/index.js';
import { runDoctor, type EngineContext } from '../../src/engine/index.js';
import { compileRoutingTable } from '../../src/routing/index.js';
import { runCli, tempDir } from '../helpers.js';

test('a deletion finished while doctor checks is not reported as a missing transcript; one left unfinished still is', async () => {
  const state = tempDir('sb-doctor-settle-');
  const input = ['a', 'b'].map((peer) => JSON.stringify({ channel: 'telegram', peer: `direct:${peer}`, text: `hi ${peer}` })).join('\n');
  assert.equal((await runCli(['ingest', '--state-dir', state], { input: `${input}\n` })).code, 0);
  const dir = path.join(state, 'agents', 'main', 'sessions');
  const storePath = path.join(dir, 'sessions.json');
  const key = 'agent:main:main';
  const store = JSON.parse(fs.readFileSync(storePath, 'utf8'));
  const file = store[key].sessionFile as string;
  // What a delete does first: the transcript goes to its archive name; the entry is still there.
  fs.renameSync(path.join(dir, file), path.join(dir, `${file}.deleted.2026-12-03T08-00-00.000Z`));
  const ctx: EngineContext = { stateDir: state, config: {}, table: compileRoutingTable({}), clock: systemClock };

  const unfinished = await runDoctor(ctx);
  assert.deepEqual(unfinished.stores[0]!.problems.map((p) => p.kind), ['missing-transcript'], 'a deletion nobody finishes is reported');

  let finished = false;
  const settled = await runDoctor(ctx, {
    onProgress: ({ step }) => {
      // After doctor has read sessions.json: the delete's store write lands (a replace, as every writer's).
      if (finished || step !== 'check the entries') return;
      finished = true;
      const current = JSON.parse(fs.readFileSync(storePath, 'utf8'));
      delete current[key];
      fs.writeFileSync(`${storePath}.tmp-test`, JSON.stringify(current, null, 2));
      fs.renameSync(`${storePath}.tmp-test`, storePath);
    },
  });
  assert.ok(finished);
  assert.deepEqual(settled.stores[0]!.problems, [], 'checked again once the store had changed: nothing is wrong');
});
