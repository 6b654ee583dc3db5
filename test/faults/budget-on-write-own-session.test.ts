// The disk budget kept on write (enforce mode, maxDiskBytes) must not evict the sessions the very
// write records into: a conversation that alone outgrows the budget had its entry removed and its
// transcript archived and deleted in the write that answered its message `persisted` — the
// acknowledged message was gone before the caller read the answer. Other, older sessions still
// go as before. Real processes (one `ingest` each, so each write measures the folder), real files.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { jsonLines, runCli, tempDir, writeJson } from '../helpers.js';

const say = (peer: string, messageId: string, bytes: number) => ({ channel: 'telegram', peer: `direct:${peer}`, text: `${messageId} ${'x'.repeat(bytes)}`, messageId });

test('a write keeps the sessions it records into, however far over the budget', async () => {
  const state = tempDir('sb-budget-write-');
  const config = writeJson(path.join(state, 'c.json'), {
    session: { dmScope: 'per-peer', maintenance: { mode: 'enforce', maxDiskBytes: '2kb', resetArchiveRetention: false } },
  });
  const dir = path.join(state, 'agents', 'main', 'sessions');
  const ingest = async (...messages: Record<string, unknown>[]) => {
    const r = await runCli(['ingest', '--json', '--state-dir', state, '--config', config], { input: messages.map((m) => JSON.stringify(m)).join('\n') + '\n' });
    assert.equal(r.code, 0, r.stderr);
    const results = jsonLines(r.stdout).filter((e: any) => e.type === 'result');
    for (const result of results) assert.equal(result.persisted, true);
    return results;
  };
  const foundIn = (messageId: string) =>
    fs.readdirSync(dir).filter((name) => fs.readFileSync(path.join(dir, name), 'utf8').includes(`"messageId":"${messageId}"`));
  const store = () => JSON.parse(fs.readFileSync(path.join(dir, 'sessions.json'), 'utf8'));

  // The first write of a store: its only session is already over the budget.
  const [first] = await ingest(say('a', 'm1', 3000));
  assert.deepEqual(foundIn('m1'), [`${first.sessionId}.jsonl`], 'the acknowledged message is in its transcript');
  assert.equal(store()[first.sessionKey]?.sessionId, first.sessionId, 'its entry is in the store');

  // Next message to the same session: still kept.
  await ingest(say('a', 'm2', 3000));
  assert.deepEqual(foundIn('m2'), [`${first.sessionId}.jsonl`]);
  assert.equal(store()[first.sessionKey]?.sessionId, first.sessionId);

  // Another session written: the older one, not touched by this write, is evicted by the budget.
  const [other] = await ingest(say('b', 'm3', 100));
  assert.deepEqual(foundIn('m3'), [`${other.sessionId}.jsonl`]);
  assert.deepEqual(Object.keys(store()), [other.sessionKey], 'the budget still evicts the older session');
});
