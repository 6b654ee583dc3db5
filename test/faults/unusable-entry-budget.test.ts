// An unusable entry (a field of the wrong type, here `recentMessageIds: 5`) is protected from
// pruning, capping and eviction and left for a person to fix (doctor `invalid-entry`). The
// transcript it names is that conversation: the disk budget took it for an orphan nobody
// references and archived and deleted it, in the plan and in apply. Real files, the real CLI,
// the write path's budget (an ingest of another session) too.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { runCli, tempDir, writeJson } from '../helpers.js';

const NOW = '2026-11-30T12:00:00Z';
const ID = '44444444-4444-4444-8444-444444444444';
const FILE = `${ID}.jsonl`;

test('the disk budget never removes the transcript an unusable entry names', async () => {
  const state = tempDir('sb-unusable-budget-');
  const dir = path.join(state, 'agents', 'main', 'sessions');
  fs.mkdirSync(dir, { recursive: true });
  const header = { type: 'session', version: 3, id: ID, timestamp: NOW, cwd: '/', sessionKey: 'agent:main:main', agentId: 'main' };
  fs.writeFileSync(path.join(dir, FILE), `${JSON.stringify(header)}\n${JSON.stringify({ type: 'message', text: 'x'.repeat(3000) })}\n`);
  writeJson(path.join(dir, 'sessions.json'), {
    'agent:main:main': { sessionId: ID, updatedAt: Date.parse(NOW), sessionFile: FILE, chatType: 'direct', channel: 'telegram', recentMessageIds: 5 },
  });
  const config = writeJson(path.join(state, 'c.json'), { session: { dmScope: 'per-peer', maintenance: { mode: 'enforce', maxDiskBytes: '1kb' } } });
  const cli = (args: string[], input?: string) => runCli([...args, '--state-dir', state, '--config', config, '--now', NOW], { input });

  for (const extra of [['--dry-run'], []]) {
    const r = await cli(['sessions', 'cleanup', '--json', ...extra]);
    assert.equal(r.code, 0, r.stderr);
    const summary = JSON.parse(r.stdout);
    assert.equal(summary.unusable, 1);
    assert.equal(summary.diskBudget.removedFiles, 0, `${extra.join(' ') || 'apply'}: nothing the budget may remove`);
    assert.ok(fs.existsSync(path.join(dir, FILE)), 'the transcript the unusable entry names is still there');
  }
  // The budget kept on write (enforce mode) plans on the same snapshot.
  const fed = await cli(['ingest'], `${JSON.stringify({ channel: 'telegram', peer: 'direct:bob', text: 'hi' })}\n`);
  assert.equal(fed.code, 0, fed.stderr);
  assert.ok(fs.existsSync(path.join(dir, FILE)), 'still there after a store write');
});
