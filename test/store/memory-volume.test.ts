// The memory volume behind incognito sessions: the store's own functions (one update path, one
// lock helper, transcript append/read, archive) work on paths under a mounted root, and nothing
// of it ever reaches the disk — not even after the volume is unmounted.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import {
  appendToTranscript,
  archiveFile,
  loadTranscript,
  memoryVolumeFor,
  mountMemoryVolume,
  readSessionStore,
  storedFileSizeSync,
  unmountMemoryVolume,
  updateSessionStore,
  withLock,
} from '../../src/store/index.js';
import { tempDir } from '../helpers.js';

function listTree(dir: string): string[] {
  return fs.readdirSync(dir, { recursive: true, encoding: 'utf8' }).sort();
}

test('store, transcript, archive and lock on a memory volume leave the disk untouched', async () => {
  const state = tempDir('memvol-');
  fs.writeFileSync(path.join(state, 'marker'), 'x');
  const volume = mountMemoryVolume(path.join(state, 'incognito'));
  try {
    const storePath = path.join(volume.root, 'agents', 'main', 'sessions', 'sessions.json');
    const transcript = path.join(path.dirname(storePath), 's1.jsonl');
    assert.equal(memoryVolumeFor(storePath), volume);
    assert.equal(memoryVolumeFor(path.join(state, 'marker')), undefined);

    await updateSessionStore(storePath, (store) => {
      store['agent:main:main'] = { sessionId: 's1', updatedAt: 1 };
    });
    // A second update goes through the backup path (.bak of the previous file) as on disk.
    await updateSessionStore(storePath, (store) => {
      store['agent:main:main']!.updatedAt = 2;
    });
    assert.deepEqual(await readSessionStore(storePath), { 'agent:main:main': { sessionId: 's1', updatedAt: 2 } });

    await appendToTranscript(transcript, [{ type: 'message', message: { role: 'user', content: [{ type: 'text', text: 'secret' }] } }], {
      session: { sessionId: 's1', sessionKey: 'agent:main:main', agentId: 'main' },
    });
    await appendToTranscript(transcript, { type: 'custom', customType: 'note' });
    const loaded = await loadTranscript(transcript);
    assert.equal(loaded.header?.id, 's1');
    assert.deepEqual(loaded.entries.map((e) => e.type), ['message', 'custom']);
    assert.equal(loaded.entries[1]!.parentId, loaded.entries[0]!.id, 'entries chain by parentId as on disk');
    assert.equal(storedFileSizeSync(transcript), loaded.stats.bytes);

    // FIFO in-process locking still holds: the second holder waits for the first.
    const order: string[] = [];
    let releaseFirst!: () => void;
    const first = withLock(transcript, {}, async () => {
      order.push('first in');
      await new Promise<void>((resolve) => (releaseFirst = resolve));
      order.push('first out');
    });
    await new Promise((resolve) => setImmediate(resolve));
    const second = withLock(transcript, {}, async () => void order.push('second'));
    await new Promise((resolve) => setTimeout(resolve, 20));
    assert.deepEqual(order, ['first in']);
    releaseFirst();
    await Promise.all([first, second]);
    assert.deepEqual(order, ['first in', 'first out', 'second']);

    const archived = await withLock(transcript, {}, () => archiveFile(transcript, 'reset', Date.UTC(2026, 10, 30)));
    assert.ok(archived && archived.startsWith(`${transcript}.reset.`));
    assert.equal(storedFileSizeSync(transcript), null);
    assert.ok(volume.paths().includes(archived));

    assert.deepEqual(listTree(state), ['marker'], 'nothing was created on disk');
  } finally {
    unmountMemoryVolume(volume);
  }
  // Unmounted: the root stays claimed, so a late write fails instead of landing on the disk.
  const late = path.join(volume.root, 'agents', 'main', 'sessions', 'late.jsonl');
  await assert.rejects(appendToTranscript(late, { type: 'custom' }, { session: { sessionId: 'late' } }), (err: any) => err.code === 'IO');
  await assert.rejects(
    updateSessionStore(path.join(volume.root, 'sessions.json'), (store) => void (store.x = { sessionId: 'x', updatedAt: 0 })),
    (err: any) => err.code === 'IO',
  );
  assert.equal(volume.paths().length, 0);
  assert.deepEqual(listTree(state), ['marker']);
});

test('overlapping memory volumes are refused', () => {
  const state = tempDir('memvol-');
  const volume = mountMemoryVolume(path.join(state, 'a'));
  try {
    assert.throws(() => mountMemoryVolume(path.join(state, 'a', 'b')), /overlaps/);
    assert.throws(() => mountMemoryVolume(state), /overlaps/);
  } finally {
    unmountMemoryVolume(volume);
  }
});

test('a path lies in the volume by where it resolves to, however it is spelled', () => {
  const parent = tempDir('memvol-');
  const root = path.join(parent, 'incognito-memory-abc');
  const volume = mountMemoryVolume(root);
  try {
    const inside = [path.join(root, 'x.jsonl'), `${root}/a/../x.jsonl`, `${parent}/other/../incognito-memory-abc/x.jsonl`, `${parent}//incognito-memory-abc//x.jsonl`, `${root}/`, root];
    for (const candidate of inside) assert.equal(memoryVolumeFor(candidate), volume, candidate);
    const outside = [path.join(parent, 'x.jsonl'), `${root}/../x.jsonl`, `${root}-2/x.jsonl`, path.join(parent, 'incognito-memory-ab', 'x.jsonl'), '/x.jsonl'];
    for (const candidate of outside) assert.equal(memoryVolumeFor(candidate), undefined, candidate);
    // A relative path resolves against the working directory.
    const cwd = process.cwd();
    process.chdir(parent);
    try {
      assert.equal(memoryVolumeFor('incognito-memory-abc/x.jsonl'), volume);
      assert.equal(memoryVolumeFor('x.jsonl'), undefined);
    } finally {
      process.chdir(cwd);
    }
  } finally {
    unmountMemoryVolume(volume);
  }
});
