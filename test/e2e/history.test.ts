// `sessions history KEY` lists every instance of a key — current and archived, with start, end,
// why it ended and size — derived from the files on disk; `sessions transcript <archived id>`
// reads an archived one (issue 13, item 8).

import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { jsonLines, runCli, tempDir, writeJson } from '../helpers.js';

const T0 = Date.parse('2026-11-30T10:00:00Z');
const KEY = 'agent:main:main';

function send(stateDir: string, config: string, text: string, at: number) {
  return runCli(['send', text, '--channel', 'telegram', '--peer', 'direct:111', '--state-dir', stateDir, '--config', config, '--now', String(at), '--json']);
}

test('history lists current and archived instances with their end reasons, also after the key is deleted', async () => {
  const stateDir = tempDir();
  const config = writeJson(path.join(stateDir, 'switchboard.json5'), { session: { reset: { mode: 'idle', idleMinutes: 5 } } });
  const ids: string[] = [];
  const result = (r: { stdout: string }) => jsonLines(r.stdout).find((e) => e.type === 'result');
  let r = await send(stateDir, config, 'first instance', T0);
  assert.equal(r.code, 0, r.stderr);
  ids.push(result(r).sessionId);
  r = await send(stateDir, config, '/new', T0 + 60_000); // command reset
  ids.push(result(r).sessionId);
  const reset = await runCli(['sessions', 'reset', KEY, '--reason', 'tidy', '--state-dir', stateDir, '--config', config, '--now', String(T0 + 120_000), '--json']);
  assert.equal(reset.code, 0, reset.stderr);
  ids.push(JSON.parse(reset.stdout).sessionId);
  r = await send(stateDir, config, 'after a long pause', T0 + 60 * 60_000); // idle reset
  assert.equal(result(r).reset?.reason, 'idle');
  ids.push(result(r).sessionId);

  const history = await runCli(['sessions', 'history', KEY, '--json', '--state-dir', stateDir, '--config', config]);
  assert.equal(history.code, 0, history.stderr);
  const h = JSON.parse(history.stdout);
  assert.equal(h.sessionKey, KEY);
  assert.deepEqual(h.instances.map((i: any) => i.sessionId), ids, 'every instance, oldest first');
  assert.deepEqual(h.instances.map((i: any) => i.reason), ['command', 'command', 'idle', null]);
  assert.deepEqual(h.instances.map((i: any) => i.current), [false, false, false, true]);
  assert.deepEqual(h.instances.map((i: any) => i.state), ['archived', 'archived', 'archived', 'current']);
  assert.equal(h.instances[0].startedAt, T0);
  assert.equal(h.instances[0].endedAt, T0 + 60_000);
  assert.equal(h.instances[3].endedAt, null);
  for (const instance of h.instances) assert.equal(instance.bytes, fs.statSync(instance.file).size);

  const text = await runCli(['sessions', 'history', KEY, '--state-dir', stateDir, '--config', config]);
  assert.match(text.stdout, /4 instances, oldest first/);
  assert.match(text.stdout, /SessionId\s+Started\s+Ended\s+Reason\s+Size/);
  assert.match(text.stdout, new RegExp(`${ids[3]}.*current`));

  // The same history from the id of any instance, archived ones included.
  const byId = await runCli(['sessions', 'history', ids[1]!, '--json', '--state-dir', stateDir, '--config', config]);
  assert.deepEqual(JSON.parse(byId.stdout).instances.map((i: any) => i.sessionId), ids);

  // An archived instance reads like any transcript.
  const archived = await runCli(['sessions', 'transcript', ids[0]!, '--json', '--state-dir', stateDir, '--config', config]);
  assert.equal(archived.code, 0, archived.stderr);
  const records = jsonLines(archived.stdout);
  assert.equal(records[0].type, 'session');
  assert.equal(records[0].id, ids[0]);
  assert.ok(records.some((rec) => rec.type === 'message' && rec.message.content[0].text === 'first instance'));
  const follow = await runCli(['sessions', 'transcript', ids[0]!, '--follow', '--state-dir', stateDir, '--config', config]);
  assert.equal(follow.code, 2, 'an archived instance cannot be followed');

  // Deleted: the entry is gone, the archives remain, and so does the history.
  const del = await runCli(['sessions', 'delete', KEY, '--state-dir', stateDir, '--config', config, '--now', String(T0 + 61 * 60_000)]);
  assert.equal(del.code, 0, del.stderr);
  const after = JSON.parse((await runCli(['sessions', 'history', KEY, '--json', '--state-dir', stateDir, '--config', config])).stdout);
  assert.deepEqual(after.instances.map((i: any) => i.reason), ['command', 'command', 'idle', 'deleted']);
  assert.ok(after.instances.every((i: any) => i.current === false));

  const missing = await runCli(['sessions', 'history', 'agent:main:nobody', '--state-dir', stateDir, '--config', config]);
  assert.equal(missing.code, 66);
});

test('cron runs: every run is an instance that ended by cron', async () => {
  const stateDir = tempDir();
  for (const at of [T0, T0 + 60_000, T0 + 120_000]) {
    const r = await runCli(['ingest', '--state-dir', stateDir, '--now', String(at)], { input: `${JSON.stringify({ channel: 'cron', cron: { jobId: 'digest' }, text: 'run' })}\n` });
    assert.equal(r.code, 0, r.stderr);
  }
  const h = JSON.parse((await runCli(['sessions', 'history', 'agent:main:cron:digest', '--json', '--state-dir', stateDir])).stdout);
  assert.deepEqual(h.instances.map((i: any) => i.reason), ['cron', 'cron', null]);
  assert.deepEqual(h.instances.map((i: any) => i.startedAt), [T0, T0 + 60_000, T0 + 120_000]);
});
