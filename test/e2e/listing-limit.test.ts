// Listings are bounded by default like `openclaw sessions`: 100 rows, newest first, a note on
// stderr when rows were left out; `--limit all` lists every one (issue 14, item 4).

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { runCli, tempDir, writeJson } from '../helpers.js';

test('sessions lists 100 rows unless --limit says otherwise, and says when it left rows out', async () => {
  const stateDir = tempDir();
  const config = writeJson(`${stateDir}/config.json`, { session: { dmScope: 'per-peer' } });
  const lines = Array.from({ length: 120 }, (_, i) => JSON.stringify({ channel: 'telegram', peer: { kind: 'direct', id: `u${i}` }, text: 'hi' }));
  assert.equal((await runCli(['ingest', '--config', config, '--state-dir', stateDir], { input: `${lines.join('\n')}\n` })).code, 0);
  const base = ['sessions', '--json', '--config', config, '--state-dir', stateDir];

  const bounded = await runCli(base);
  assert.equal(bounded.code, 0, bounded.stderr);
  const listing = JSON.parse(bounded.stdout);
  assert.deepEqual([listing.count, listing.total, listing.sessions.length], [100, 120, 100]);
  assert.match(bounded.stderr, /listed 100 of 120 sessions.*--limit all/);

  const all = JSON.parse((await runCli([...base, '--limit', 'all'])).stdout);
  assert.deepEqual([all.count, all.total], [120, 120]);
  const few = await runCli([...base, '--limit', '5']);
  assert.equal(JSON.parse(few.stdout).count, 5);
  assert.equal((await runCli([...base, '--limit', 'some'])).code, 2);
});
