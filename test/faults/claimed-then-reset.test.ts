// A queued turn is claimed in sessions.json, then waits for the session's write lock; whoever
// holds the lock resets the session meanwhile (archiving its transcript). Found by a race hunt
// (ingests, `sessions reset` and `maintain` at once): the run then wrote its turn into the old
// file name, making the archived transcript again as an orphan that no entry names. The run must
// give the turn back instead: nothing written under the old name, the message reported expired.
//
// Real processes and locks: the waiting run is a child `ingest` taking over the queue; the lock
// holder and the reset are this process (the lock helper is re-entrant within its holder).

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { systemClock } from '../../src/core/index.js';
import { resetSession, sessionLockOptions, type EngineContext } from '../../src/engine/index.js';
import { compileRoutingTable } from '../../src/routing/index.js';
import { withLock } from '../../src/store/index.js';
import { BIN, REPO_ROOT, jsonLines, runCli, tempDir, writeJson } from '../helpers.js';
import { cleanEnv } from '../serve-process.js';
import { waitUntil } from '../fixtures/store-child-process.js';

const KEY = 'agent:main:main';

test('a claimed turn whose session is reset before the run gets the lock is given back, and nothing recreates the archived transcript', async () => {
  const state = tempDir('sb-claim-reset-');
  const configData = { agents: { defaults: { runner: { command: 'builtin:slow-echo', delayMs: 10 } } }, messages: { queue: { mode: 'followup', debounceMs: 0 } } };
  const config = writeJson(path.join(state, 'c.json'), configData);
  const cli = (args: string[], input = '') => runCli(['--state-dir', state, '--config', config, ...args], { input });
  const sessionsDir = path.join(state, 'agents', 'main', 'sessions');
  const readEntry = () => JSON.parse(fs.readFileSync(path.join(sessionsDir, 'sessions.json'), 'utf8'))[KEY];

  assert.equal((await cli(['send', 'first', '--channel', 'telegram', '--peer', 'direct:1', '--message-id', 'm0'])).code, 0);
  const queued = jsonLines((await cli(['send', 'second', '--channel', 'telegram', '--peer', 'direct:1', '--message-id', 'm1', '--no-wait', '--json'])).stdout)[0];
  assert.equal(queued.disposition, 'queued');
  const oldId = readEntry().sessionId as string;
  const oldFile = path.join(sessionsDir, `${oldId}.jsonl`);
  assert.ok(fs.existsSync(oldFile));

  const ctx: EngineContext = { stateDir: state, config: configData, table: compileRoutingTable(configData), clock: systemClock };
  let child: ReturnType<typeof spawn> | undefined;
  let output = '';
  await withLock(oldFile, sessionLockOptions(ctx, { sessionKey: KEY, runId: 'the-test' }), async () => {
    // The next ingest takes the ownerless queue over: it claims the turn, then waits for this lock.
    child = spawn(process.execPath, [BIN, '--state-dir', state, '--config', config, 'ingest', '--json'], { env: cleanEnv(), cwd: REPO_ROOT, stdio: ['pipe', 'pipe', 'pipe'] });
    child.stdout!.on('data', (chunk: Buffer) => (output += chunk));
    child.stdin!.end('');
    await waitUntil(() => readEntry().activeRun?.runId === queued.runId, 20_000, 'the child to claim the queued turn');
    const reset = await resetSession(ctx, KEY);
    assert.equal(reset.previousSessionId, oldId);
  });
  const exit = await new Promise<number | null>((resolve) => child!.on('close', resolve));
  assert.equal(exit, 0, output);

  const names = fs.readdirSync(sessionsDir);
  assert.ok(!names.includes(`${oldId}.jsonl`), `the archived transcript was not made again: ${names.join(', ')}`);
  assert.equal(names.filter((name) => name.startsWith(`${oldId}.jsonl.reset.`)).length, 1);
  const entry = readEntry();
  assert.notEqual(entry.sessionId, oldId);
  assert.equal(entry.activeRun, undefined);
  assert.deepEqual(entry.queue ?? [], []);

  // The message is accounted for: reported expired (it was pinned to the instance the reset ended).
  const events = jsonLines(output);
  assert.deepEqual(events.filter((e) => e.type === 'expired').map((e) => e.runId), [queued.runId], output);
  const current = fs.readFileSync(path.join(sessionsDir, entry.sessionFile), 'utf8');
  assert.match(current, /"customType":"expired".*"messageId":"m1"/);
  const doctor = await cli(['doctor', '--json']);
  assert.equal(doctor.code, 0, doctor.stdout);
});
