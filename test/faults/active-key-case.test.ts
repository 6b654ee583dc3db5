// `sessions cleanup --active-key KEY` must keep the session KEY names as `sessions` lists it. Keys
// of Signal groups (and Matrix rooms) keep their case in the store (docs/decisions.md, Routing),
// so the key a caller copies from the listing is cased; read only lower-cased, it protected
// nothing and the caller's live session was pruned. Real files, the real CLI.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { runCli, tempDir, writeJson } from '../helpers.js';

const NOW = '2026-11-30T12:00:00Z';
const DAY = 86_400_000;
const ID = '33333333-3333-4333-8333-333333333333';
const KEY = 'agent:main:signal:group:AbCdEf';

test('--active-key protects a cased key as listed (or bare), in the plan and in apply', async () => {
  const state = tempDir('sb-active-key-');
  const dir = path.join(state, 'agents', 'main', 'sessions');
  fs.mkdirSync(dir, { recursive: true });
  const header = { type: 'session', version: 3, id: ID, timestamp: '2026-10-01T00:00:00.000Z', cwd: '/', sessionKey: KEY, agentId: 'main' };
  fs.writeFileSync(path.join(dir, `${ID}.jsonl`), `${JSON.stringify(header)}\n`);
  // 40 days idle: older than the default pruneAfter (30d).
  writeJson(path.join(dir, 'sessions.json'), {
    [KEY]: { sessionId: ID, updatedAt: Date.parse(NOW) - 40 * DAY, sessionFile: `${ID}.jsonl`, chatType: 'group', channel: 'signal' },
  });
  const cli = (...args: string[]) => runCli([...args, '--state-dir', state, '--now', NOW]);

  const listed = await cli('sessions', '--json');
  assert.equal(listed.code, 0, listed.stderr);
  assert.deepEqual(JSON.parse(listed.stdout).sessions.map((s: any) => s.key), [KEY]);

  // As listed, and bare (the owner's key): each in a dry run, then applied.
  for (const [active, extra] of [[KEY, ['--dry-run']], ['signal:group:AbCdEf', ['--dry-run']], ['signal:group:AbCdEf', []], [KEY, []]] as const) {
    const r = await cli('sessions', 'cleanup', '--enforce', '--active-key', active, '--json', ...extra);
    assert.equal(r.code, 0, r.stderr);
    const summary = JSON.parse(r.stdout);
    assert.equal(summary.pruned, 0, `${active} ${extra.join(' ') || 'apply'}: the active session is not pruned`);
    assert.equal(summary.protected, 1);
  }
  assert.ok(KEY in JSON.parse(fs.readFileSync(path.join(dir, 'sessions.json'), 'utf8')), 'the entry is still there');
  assert.ok(fs.existsSync(path.join(dir, `${ID}.jsonl`)), 'its transcript is still there');
});
