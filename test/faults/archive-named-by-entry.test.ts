// An entry whose sessionFile names an archive (`<id>.jsonl.reset.<ts>`: a hand edit, a tool that
// renamed the file under it) is unusable — `sessions cleanup` leaves it alone and doctor tells the
// user to fix it by hand or `sessions delete` it, which archives the file. The file it names is
// then the only copy of that conversation: neither the archive purge nor the disk budget may
// delete it without archiving, in the plan or in apply. Real files, the real CLI.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import { runCli, tempDir, writeJson } from '../helpers.js';

const NOW = '2026-11-30T12:00:00Z';
const ID = '11111111-1111-4111-8111-111111111111';
/** Far older than the default resetArchiveRetention (30d). */
const NAMED = `${ID}.jsonl.reset.2020-01-01T00-00-00.000Z`;
const OTHER = `22222222-2222-4222-8222-222222222222.jsonl.deleted.2020-01-01T00-00-00.000Z`;

function setUp(maintenance: Record<string, unknown>): { state: string; config: string; dir: string } {
  const state = tempDir('sb-archive-named-');
  const dir = path.join(state, 'agents', 'main', 'sessions');
  fs.mkdirSync(dir, { recursive: true });
  const line = JSON.stringify({ type: 'message', text: 'x'.repeat(2000) });
  fs.writeFileSync(path.join(dir, NAMED), `${line}\n`);
  fs.writeFileSync(path.join(dir, OTHER), `${line}\n`);
  writeJson(path.join(dir, 'sessions.json'), {
    'agent:main:main': { sessionId: ID, updatedAt: Date.parse(NOW), sessionFile: NAMED, chatType: 'direct', channel: 'telegram' },
  });
  const config = writeJson(path.join(state, 'c.json'), { session: { maintenance: { mode: 'enforce', ...maintenance } } });
  return { state, config, dir };
}

async function cleanup(s: { state: string; config: string }, ...extra: string[]): Promise<any> {
  const r = await runCli(['sessions', 'cleanup', '--json', '--now', NOW, '--state-dir', s.state, '--config', s.config, ...extra]);
  assert.equal(r.code, 0, r.stderr);
  return JSON.parse(r.stdout);
}

describe('an archive that an entry names', () => {
  for (const [label, maintenance] of [
    ['archive retention', {}],
    ['disk budget', { resetArchiveRetention: false, maxDiskBytes: '1kb' }],
  ] as const) {
    test(`${label}: planned and applied alike, the named file stays; other old archives go`, async () => {
      const s = setUp(maintenance);
      const plan = await cleanup(s, '--dry-run');
      const done = await cleanup(s);
      assert.ok(fs.existsSync(path.join(s.dir, NAMED)), 'the file the entry names is still there');
      assert.ok(!fs.existsSync(path.join(s.dir, OTHER)), 'an archive no entry names is still removed');
      const removed = (j: any) => j.purgedArchives + (j.diskBudget?.removedFiles ?? 0);
      assert.equal(removed(plan), 1, 'the plan removes only the other archive');
      assert.equal(removed(done), 1, 'apply removes only the other archive');
      assert.equal(done.unusable, 1);
    });
  }
});
