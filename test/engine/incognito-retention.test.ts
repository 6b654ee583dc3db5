// Archive retention reaches serve's incognito volume: rotated incognito transcripts (archived
// inside the volume) older than resetArchiveRetention are dropped by the scheduled pass; live
// transcripts and young archives stay. A real memory volume, the real purge.

import assert from 'node:assert/strict';
import path from 'node:path';
import { test } from 'node:test';
import { fixedClock } from '../../src/core/index.js';
import { purgeIncognitoArchives, type EngineContext } from '../../src/engine/index.js';
import { compileRoutingTable } from '../../src/routing/index.js';
import { archivePathFor, mountMemoryVolume, unmountMemoryVolume } from '../../src/store/index.js';
import { tempDir } from '../helpers.js';

const NOW = Date.parse('2026-11-30T10:00:00Z');
const DAY = 24 * 60 * 60 * 1000;

test('incognito archives older than resetArchiveRetention are purged from the memory volume; the rest stays', async () => {
  const root = path.join(tempDir(), 'incognito-memory-test');
  const volume = mountMemoryVolume(root);
  try {
    const dir = path.join(root, 'agents', 'main', 'sessions');
    const live = path.join(dir, 'live.jsonl');
    const oldArchive = archivePathFor(path.join(dir, 'a.jsonl'), 'reset', NOW - 8 * DAY);
    const youngArchive = archivePathFor(path.join(dir, 'b.jsonl'), 'reset', NOW - 1 * DAY);
    for (const file of [live, oldArchive, youngArchive]) {
      const handle = volume.openForAppend(file, true);
      await handle.write(Buffer.from('{"type":"session"}\n'), 0, 19);
      await handle.close();
    }
    const config = { session: { maintenance: { resetArchiveRetention: '7d' } } };
    const ctx: EngineContext = { stateDir: tempDir(), config, table: compileRoutingTable(config), clock: fixedClock(NOW), incognitoRoot: root };
    assert.equal(purgeIncognitoArchives(ctx), 1);
    assert.deepEqual(volume.paths(), [live, youngArchive].sort());
    // Retention off (false): nothing is purged.
    const keepForever = { session: { maintenance: { resetArchiveRetention: false as const } } };
    assert.equal(purgeIncognitoArchives({ ...ctx, config: keepForever, clock: fixedClock(NOW + 100 * DAY) }), 0);
  } finally {
    unmountMemoryVolume(volume);
  }
});
