// Rows OpenClaw 2026.7.1 wrote (test/fixtures/openclaw-store/by-openclaw) name their channel in
// origin.provider and their chat type in chatType / origin.chatType, with no origin.peer:
// `sessions show` and `maintain` resolve the reset policy for them by that channel and type, as
// ingest does for the same session from a message.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import { REPO_ROOT, copyOpenClawState, runCli } from '../helpers.js';

const FIXTURE = path.join(REPO_ROOT, 'test', 'fixtures', 'openclaw-store', 'by-openclaw');
const WRITTEN_AT = '/tmp/g-harness/ocstore';

function copyStore(): string {
  const state = copyOpenClawState(FIXTURE, WRITTEN_AT, 'sb-openclaw-policy-');
  // Only groups reset by type, and only Slack by channel; everything else never.
  fs.writeFileSync(path.join(state, 'switchboard.json'), JSON.stringify({
    agents: { list: [{ id: 'main', default: true }, { id: 'work' }] },
    session: { resetByType: { group: { mode: 'idle', idleMinutes: 1 }, direct: { mode: 'none' } }, resetByChannel: { slack: { mode: 'idle', idleMinutes: 1 } } },
  }));
  return state;
}

const LATER = '2026-12-02T00:00:00Z';

describe('the reset policy of rows OpenClaw 2026.7.1 wrote', () => {
  test('sessions show uses their chat type and channel', async () => {
    const state = copyStore();
    const show = async (key: string) => {
      const result = await runCli(['sessions', 'show', key, '--json', '--state-dir', state, '--config', path.join(state, 'switchboard.json'), '--now', LATER]);
      assert.equal(result.code, 0, result.stdout + result.stderr);
      return JSON.parse(result.stdout).freshness;
    };
    assert.equal((await show('agent:main:telegram:group:-100555')).fresh, false, 'a Telegram group: resetByType.group');
    assert.equal((await show('agent:main:slack:direct:alice')).fresh, false, 'a Slack DM: resetByChannel.slack');
    assert.equal((await show('agent:main:telegram:direct:alice')).fresh, true, 'a Telegram DM: resetByType.direct, never');
  });

  test('maintain --dry-run finds the same resets due', async () => {
    const state = copyStore();
    // A day after the turns: idle past its minute, not yet stale for pruning.
    const result = await runCli(['maintain', '--dry-run', '--json', '--state-dir', state, '--config', path.join(state, 'switchboard.json'), '--now', '2026-12-02T00:00:00Z']);
    assert.equal(result.code, 0, result.stdout + result.stderr);
    const due = new Set(JSON.parse(result.stdout).resets.reset.map((item: { sessionKey: string }) => item.sessionKey));
    assert.ok(due.has('agent:main:telegram:group:-100555'), [...due].join(', '));
    assert.ok(due.has('agent:main:slack:direct:alice'), [...due].join(', '));
    assert.ok(!due.has('agent:main:telegram:direct:alice'), [...due].join(', '));
  });
});
