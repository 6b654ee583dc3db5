// Integration tests of the sessions.json registry on real files: format and modes, the .bak
// copy, skipped identical writes, in-process batching, mutator isolation and the readers.

import assert from 'node:assert/strict';
import { mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import { SwitchboardError } from '../../src/core/index.js';
import {
  checkSessionEntry,
  getSessionStoreStats,
  nodeStoreFileSystem,
  readSessionStore,
  sessionEntryProblem,
  updateSessionStore,
  type SessionEntry,
  type StoreFileSystem,
} from '../../src/store/index.js';

const tempRoots: string[] = [];
async function newStorePath(): Promise<string> {
  const root = await mkdtemp(path.join(os.tmpdir(), 'sb-store-'));
  tempRoots.push(root);
  // A folder that does not exist yet: the first update must create it (0700).
  return path.join(root, 'agents', 'main', 'sessions', 'sessions.json');
}
after(async () => {
  for (const dir of tempRoots) await rm(dir, { recursive: true, force: true });
});

function entry(sessionId: string, extra: Partial<SessionEntry> = {}): SessionEntry {
  return { sessionId, updatedAt: 1_700_000_000_000, ...extra };
}

function isCode(code: string, exitCode: number) {
  return (err: unknown): boolean => err instanceof SwitchboardError && err.code === code && err.exitCode === exitCode;
}

/** A seam that counts renames over the store: an independent witness of how many files were written. */
function countingFs(): { fs: StoreFileSystem; replaces: () => number } {
  let replaces = 0;
  const fs: StoreFileSystem = {
    ...nodeStoreFileSystem,
    rename: async (from, to) => {
      await nodeStoreFileSystem.rename(from, to);
      if (path.basename(to) === 'sessions.json') replaces += 1;
    },
  };
  return { fs, replaces: () => replaces };
}

describe('reading and writing sessions.json', () => {
  test('a missing store reads as {} and is not created by reading or by an update that changes nothing', async () => {
    const storePath = await newStorePath();
    assert.deepEqual(await readSessionStore(storePath), {});
    assert.equal(await updateSessionStore(storePath, (store) => Object.keys(store).length), 0);
    await assert.rejects(stat(storePath), { code: 'ENOENT' });
  });

  test('the first update creates folder 0700 and file 0600 with 2-space JSON, and returns the mutator result', async () => {
    const storePath = await newStorePath();
    const result = await updateSessionStore(storePath, (store) => {
      store['agent:main:main'] = entry('s-1', { chatType: 'direct' });
      return 'created';
    });
    assert.equal(result, 'created');
    assert.equal((await stat(path.dirname(storePath))).mode & 0o777, 0o700);
    assert.equal((await stat(storePath)).mode & 0o777, 0o600);
    const text = await readFile(storePath, 'utf8');
    assert.equal(text, `${JSON.stringify({ 'agent:main:main': entry('s-1', { chatType: 'direct' }) }, null, 2)}\n`);
    // Only the store itself: no .bak for a store that had no previous version, no temp files.
    assert.deepEqual(await readdir(path.dirname(storePath)), ['sessions.json']);
  });

  test('.bak holds the previous good version after every replace', async () => {
    const storePath = await newStorePath();
    const backupPath = `${storePath}.bak`;
    await updateSessionStore(storePath, (store) => {
      store.k = entry('s-1', { round: 1 });
    });
    const version1 = await readFile(storePath, 'utf8');
    await updateSessionStore(storePath, (store) => {
      store.k!.round = 2;
    });
    assert.equal(await readFile(backupPath, 'utf8'), version1);
    const version2 = await readFile(storePath, 'utf8');
    await updateSessionStore(storePath, (store) => {
      store.k!.round = 3;
    });
    assert.equal(await readFile(backupPath, 'utf8'), version2);
    assert.equal((await readSessionStore(storePath)).k!.round, 3);
    assert.deepEqual((await readdir(path.dirname(storePath))).sort(), ['sessions.json', 'sessions.json.bak']);
  });

  test('identical content is not rewritten (same inode, mtime and .bak)', async () => {
    const storePath = await newStorePath();
    await updateSessionStore(storePath, (store) => {
      store.k = entry('s-1');
    });
    await updateSessionStore(storePath, (store) => {
      store.k!.updatedAt += 1;
    });
    const before = await stat(storePath);
    const backupBefore = await readFile(`${storePath}.bak`, 'utf8');
    const statsBefore = getSessionStoreStats(storePath);
    const seen = await updateSessionStore(storePath, (store) => {
      store.k!.sessionId = 's-1'; // a write of the value it already has
      return Object.keys(store).length;
    });
    assert.equal(seen, 1);
    const afterStat = await stat(storePath);
    assert.equal(afterStat.ino, before.ino);
    assert.equal(afterStat.mtimeMs, before.mtimeMs);
    assert.equal(await readFile(`${storePath}.bak`, 'utf8'), backupBefore);
    const statsAfter = getSessionStoreStats(storePath);
    assert.equal(statsAfter.writes, statsBefore.writes);
    assert.equal(statsAfter.unchangedBatches, statsBefore.unchangedBatches + 1);
  });

  test('fields this version does not know survive an update', async () => {
    const storePath = await newStorePath();
    await updateSessionStore(storePath, () => undefined); // creates the folder
    const foreign = { 'agent:main:x': { sessionId: 's-9', updatedAt: 5, futureField: { nested: [1, 2] }, openclawOnly: 'kept' } };
    await writeFile(storePath, JSON.stringify(foreign));
    await updateSessionStore(storePath, (store) => {
      store['agent:main:x']!.pinned = true;
    });
    assert.deepEqual(await readSessionStore(storePath), { 'agent:main:x': { ...foreign['agent:main:x'], pinned: true } });
  });

  test('JSON that is not an object is STORE_CORRUPT for every reader and the writer', async () => {
    const variants: Record<string, Buffer> = {
      array: Buffer.from('[]'),
      null: Buffer.from('null'),
      number: Buffer.from('42'),
      string: Buffer.from('"text"'),
      'whitespace only': Buffer.from(' \n\t '),
      'invalid UTF-8': Buffer.from([0x7b, 0x22, 0xff, 0xfe, 0x22, 0x3a, 0x7b, 0x7d, 0x7d]),
    };
    const storePath = await newStorePath();
    await updateSessionStore(storePath, () => undefined);
    for (const [name, bytes] of Object.entries(variants)) {
      await writeFile(storePath, bytes);
      const corrupt = isCode('STORE_CORRUPT', 65);
      await assert.rejects(readSessionStore(storePath), corrupt, name);
      let called = false;
      await assert.rejects(
        updateSessionStore(storePath, () => {
          called = true;
        }),
        corrupt,
        name,
      );
      assert.equal(called, false, `${name}: the mutator must not run on a damaged store`);
      assert.deepEqual(await readFile(storePath), bytes, `${name}: bytes must be untouched`);
    }
  });

  test('an entry that is not an object is its own problem: the store is read and written, and the entry kept as it was', async () => {
    const storePath = await newStorePath();
    await updateSessionStore(storePath, () => undefined);
    const values: Record<string, unknown> = { 'agent:main:n': null, 'agent:main:a': [1, 'x'], 'agent:main:s': 'text', 'agent:main:5': 5, 'agent:main:f': false };
    await writeFile(storePath, JSON.stringify({ ...values, 'agent:main:ok': { sessionId: 'a', updatedAt: 1 } }));
    const read = await readSessionStore(storePath);
    for (const key of Object.keys(values)) {
      assert.equal(typeof sessionEntryProblem(read[key], path.dirname(storePath))?.reason, 'string', key);
      assert.throws(() => checkSessionEntry(storePath, key, read[key]), isCode('STORE_CORRUPT', 65), key);
    }
    await updateSessionStore(storePath, (store) => {
      store['agent:main:ok']!.pinned = true;
      // A change made to one of them by mistake never reaches the file.
      store['agent:main:n']!.updatedAt = 7;
    });
    const written = JSON.parse(await readFile(storePath, 'utf8'));
    assert.deepEqual(written, { ...values, 'agent:main:ok': { sessionId: 'a', updatedAt: 1, pinned: true } });
  });

  test('a UTF-8 BOM is tolerated', async () => {
    const storePath = await newStorePath();
    await updateSessionStore(storePath, () => undefined);
    await writeFile(storePath, Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('{"k":{"sessionId":"a","updatedAt":1}}')]));
    assert.equal((await readSessionStore(storePath)).k!.sessionId, 'a');
  });
});

describe('in-process serialisation and batching', () => {
  test('200 concurrent updates all land, each gets its own result, with far fewer file writes', async () => {
    const storePath = await newStorePath();
    const { fs, replaces } = countingFs();
    await updateSessionStore(storePath, (store) => {
      store.counter = entry('counter', { total: 0 });
    }, { fs });
    const statsBefore = getSessionStoreStats(storePath);
    const replacesBefore = replaces();
    const results = await Promise.all(
      Array.from({ length: 200 }, (_, index) =>
        updateSessionStore(
          storePath,
          async (store) => {
            if (index % 3 === 0) await Promise.resolve(); // async mutators take part too
            const counter = store.counter!;
            counter.total = (counter.total as number) + 1;
            store[`k${index}`] = entry(`s-${index}`);
            return { index, totalSeen: counter.total };
          },
          { fs },
        ),
      ),
    );
    assert.deepEqual(
      results.map((result) => result.index),
      Array.from({ length: 200 }, (_, index) => index),
    );
    // Applied one after the other in call order: each saw exactly the updates before it.
    assert.deepEqual(
      results.map((result) => result.totalSeen),
      Array.from({ length: 200 }, (_, index) => index + 1),
    );
    const store = await readSessionStore(storePath);
    assert.equal(store.counter!.total, 200);
    for (let index = 0; index < 200; index += 1) assert.equal(store[`k${index}`]!.sessionId, `s-${index}`);
    const fileWrites = replaces() - replacesBefore;
    const statsAfter = getSessionStoreStats(storePath);
    assert.equal(statsAfter.updates - statsBefore.updates, 200);
    assert.equal(statsAfter.writes - statsBefore.writes, fileWrites, 'stats counter agrees with the seam');
    assert.ok(fileWrites >= 1 && fileWrites <= 5, `200 updates took ${fileWrites} file writes`);
  });

  test('a mutator that throws gets its own error, its partial changes are dropped, the others land', async () => {
    const storePath = await newStorePath();
    await updateSessionStore(storePath, (store) => {
      store.k = entry('s-1', { a: 0, b: 0, c: 0 });
    });
    const ownError = new Error('b refuses');
    const settled = await Promise.allSettled([
      updateSessionStore(storePath, (store) => {
        store.k!.a = 1;
        return 'a';
      }),
      updateSessionStore(storePath, (store) => {
        store.k!.b = 1; // changed, then thrown: must not reach the file
        store.extra = entry('from-b');
        throw ownError;
      }),
      updateSessionStore(storePath, async (store) => {
        store.k!.c = (store.k!.a as number) + 1; // sees a's change, not b's
        return 'c';
      }),
    ]);
    assert.deepEqual(settled[0], { status: 'fulfilled', value: 'a' });
    assert.deepEqual(settled[1], { status: 'rejected', reason: ownError });
    assert.deepEqual(settled[2], { status: 'fulfilled', value: 'c' });
    assert.deepEqual(await readSessionStore(storePath), { k: entry('s-1', { a: 1, b: 0, c: 2 }) });
  });

  test('a nested update of the same store from inside a mutator fails fast instead of deadlocking', async () => {
    const storePath = await newStorePath();
    const outcome = await updateSessionStore(storePath, async (store) => {
      store.k = entry('outer');
      try {
        await updateSessionStore(storePath, () => undefined);
        return 'nested update ran';
      } catch (err) {
        return (err as SwitchboardError).code;
      }
    });
    assert.equal(outcome, 'INTERNAL');
    assert.equal((await readSessionStore(storePath)).k!.sessionId, 'outer');
  });
});



describe('durability order of a replace (the injectable fs records every step)', () => {
  /** The real fs, logging the steps that decide durability, by name inside the store folder. */
  function recordingFs(storePath: string, log: string[]): StoreFileSystem {
    const dir = path.dirname(storePath);
    const name = (filePath: string): string => (filePath === dir ? '<folder>' : path.relative(dir, filePath));
    return {
      ...nodeStoreFileSystem,
      writeWholeFile: async (filePath, data) => {
        log.push(`write ${name(filePath)}`);
        await nodeStoreFileSystem.writeWholeFile(filePath, data);
      },
      fsyncPath: async (filePath) => {
        await nodeStoreFileSystem.fsyncPath(filePath);
        log.push(`fsync ${name(filePath)}`);
      },
      rename: async (from, to) => {
        await nodeStoreFileSystem.rename(from, to);
        log.push(`rename ${name(from)} -> ${name(to)}`);
      },
    };
  }

  /** write(temp) → fsync(temp) → rename(temp → store) → fsync(folder) → resolved, in that order. */
  function assertDurableOrder(log: string[]): void {
    const renameStep = log.findIndex((step) => step.endsWith(' -> sessions.json'));
    assert.ok(renameStep >= 0, `the store was replaced: ${log.join(' | ')}`);
    const temp = log[renameStep]!.slice('rename '.length, -' -> sessions.json'.length);
    assert.notEqual(temp, 'sessions.json');
    const lastWrite = log.lastIndexOf(`write ${temp}`);
    const fsyncTemp = log.lastIndexOf(`fsync ${temp}`);
    const fsyncFolder = log.indexOf('fsync <folder>', renameStep);
    const resolved = log.indexOf('resolved');
    assert.ok(lastWrite >= 0 && lastWrite < fsyncTemp, `the temp file is fsynced after its data is written: ${log.join(' | ')}`);
    assert.ok(fsyncTemp < renameStep, `the temp file is fsynced before the rename: ${log.join(' | ')}`);
    assert.ok(fsyncFolder > renameStep, `the folder is fsynced after the rename: ${log.join(' | ')}`);
    assert.ok(resolved > fsyncFolder, `updateSessionStore resolves only after both fsyncs: ${log.join(' | ')}`);
  }

  test('creating sessions.json: data fsynced before the rename, folder fsynced after it, before the update resolves', async () => {
    const storePath = await newStorePath();
    const log: string[] = [];
    await updateSessionStore(storePath, (store) => {
      store.k = entry('s-1');
    }, { fs: recordingFs(storePath, log) }).then(() => log.push('resolved'));
    assertDurableOrder(log);
  });

  test('replacing sessions.json (with its .bak): the same order', async () => {
    const storePath = await newStorePath();
    await updateSessionStore(storePath, (store) => {
      store.k = entry('s-1');
    });
    const log: string[] = [];
    await updateSessionStore(storePath, (store) => {
      store.k = entry('s-2');
    }, { fs: recordingFs(storePath, log) }).then(() => log.push('resolved'));
    assertDurableOrder(log);
    assert.equal((await readSessionStore(`${storePath}.bak`)).k!.sessionId, 's-1');
  });
});
