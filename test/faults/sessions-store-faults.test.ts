// Fault tests of sessions.json (quality.md cases 2–5) with real files and real child processes:
// damaged stores, readers racing writers, cross-process lost updates, disk full / EIO / read-only.

import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import fsCallbacks from 'node:fs';
import { mkdir, open, readdir, readFile, truncate, unlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { SwitchboardError } from '../../src/core/index.js';
import {
  nodeStoreFileSystem,
  readSessionStore,
  updateSessionStore,
  type StoreFileSystem,
} from '../../src/store/index.js';
import { tempDir as makeTempDir } from '../helpers.js';

const CHILD_SCRIPT = fileURLToPath(new URL('../fixtures/sessions-child.js', import.meta.url));

const mounts: string[] = [];
const tempDir = (): string => makeTempDir('sb-faults-');
// Unmounted before the temp dirs are removed (at exit), so nothing is removed through a mount.
after(() => {
  for (const mountPoint of mounts) spawnSync('umount', ['-l', mountPoint]);
});

interface ChildResult {
  status: number | null;
  stdout: string;
  stderr: string;
}

/** A running child with line-wise stdout, so the test can wait for "ready" instead of sleeping. */
function startChild(args: string[]): { done: Promise<ChildResult>; nextLine: () => Promise<string>; send: (line: string) => void; endInput: () => void } {
  const child = spawn(process.execPath, [CHILD_SCRIPT, ...args], { stdio: ['pipe', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  let consumed = 0;
  const waiters: Array<() => void> = [];
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    stdout += chunk;
    waiters.splice(0).forEach((wake) => wake());
  });
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
    stderr += chunk;
  });
  const done = new Promise<ChildResult>((resolve) => {
    child.on('close', (status) => {
      waiters.splice(0).forEach((wake) => wake());
      resolve({ status, stdout, stderr });
    });
  });
  const nextLine = async (): Promise<string> => {
    for (;;) {
      const newline = stdout.indexOf('\n', consumed);
      if (newline >= 0) {
        const line = stdout.slice(consumed, newline);
        consumed = newline + 1;
        return line;
      }
      if (child.exitCode !== null || child.signalCode !== null) throw new Error(`child exited early: ${stderr || stdout}`);
      await new Promise<void>((wake) => waiters.push(wake));
    }
  };
  return {
    done,
    nextLine,
    send: (line) => child.stdin.write(`${line}\n`),
    endInput: () => child.stdin.end(),
  };
}

async function runChild(args: string[]): Promise<ChildResult> {
  const child = startChild(args);
  child.endInput();
  return child.done;
}

function isCode(code: string, exitCode: number) {
  return (err: unknown): boolean => err instanceof SwitchboardError && err.code === code && err.exitCode === exitCode;
}

/** Names in the store folder, without the lock (released) — anything else would be a leftover temp. */
async function folderListing(dir: string): Promise<string[]> {
  return (await readdir(dir)).sort();
}

/** A store with two versions written through the real update path, so .bak exists. */
async function seedStore(dir: string): Promise<string> {
  const storePath = path.join(dir, 'sessions.json');
  await updateSessionStore(storePath, (store) => {
    store['agent:main:main'] = { sessionId: 'seed-1', updatedAt: 1, channel: 'telegram' };
  });
  await updateSessionStore(storePath, (store) => {
    store['agent:main:main']!.updatedAt = 2;
    store['agent:main:other'] = { sessionId: 'seed-2', updatedAt: 2 };
  });
  return storePath;
}

// ---------------------------------------------------------------------------------------------

describe('case 2: a damaged sessions.json is STORE_CORRUPT (exit 65) and is never overwritten', () => {
  const goodJson = Buffer.from(JSON.stringify({ 'agent:main:main': { sessionId: 'abc', updatedAt: 1 } }, null, 2));
  const damages: Record<string, Buffer> = {
    'truncated to 0 bytes': Buffer.alloc(0),
    'truncated mid-file': goodJson.subarray(0, Math.floor(goodJson.length / 2)),
    garbage: Buffer.from('<<< this is not JSON at all >>> \u0001\u0002'),
    'all NUL bytes': Buffer.alloc(4096),
    'JSON followed by NULs (a torn block)': Buffer.concat([goodJson, Buffer.alloc(512)]),
  };

  for (const [damage, bytes] of Object.entries(damages)) {
    test(`${damage}: read and update fail in-process and in child processes; bytes and .bak unchanged`, async () => {
      const dir = await tempDir();
      const storePath = await seedStore(dir);
      const backupBefore = await readFile(`${storePath}.bak`);
      JSON.parse(backupBefore.toString('utf8')); // the .bak is a good copy to restore from
      await writeFile(storePath, bytes);

      const corrupt = (err: unknown): boolean =>
        isCode('STORE_CORRUPT', 65)(err) && /switchboard doctor --repair/.test((err as SwitchboardError).hint ?? '');
      await assert.rejects(readSessionStore(storePath), corrupt);
      let mutatorRan = false;
      await assert.rejects(
        updateSessionStore(storePath, (store) => {
          mutatorRan = true;
          store.x = { sessionId: 'x', updatedAt: 1 };
        }),
        corrupt,
      );
      assert.equal(mutatorRan, false);

      for (const mode of ['read', 'update']) {
        const result = await runChild([mode, storePath]);
        assert.equal(result.status, 65, `${mode}: ${result.stdout}${result.stderr}`);
        const reported = JSON.parse(result.stdout.trim()) as { code: string; hint: string };
        assert.equal(reported.code, 'STORE_CORRUPT');
        assert.match(reported.hint, /switchboard doctor --repair/);
      }

      assert.deepEqual(await readFile(storePath), bytes, 'damaged bytes kept as they were');
      assert.deepEqual(await readFile(`${storePath}.bak`), backupBefore, '.bak untouched');
      assert.deepEqual(await folderListing(dir), ['sessions.json', 'sessions.json.bak']);
    });
  }
});

// ---------------------------------------------------------------------------------------------

describe('cases 3 and 4: concurrent processes', () => {
  test('case 3: a reader process never sees an empty or partial sessions.json while 2 writer processes replace it', async (t) => {
    const dir = await tempDir();
    const storePath = path.join(dir, 'sessions.json');
    // A biggish file (≈ 200 KB) makes a non-atomic writer's partial states easy to catch.
    await updateSessionStore(storePath, (store) => {
      store['agent:main:counter'] = { sessionId: 'counter', updatedAt: 0, total: 0 };
      for (let i = 0; i < 1000; i += 1) {
        store[`agent:main:filler-${i}`] = { sessionId: `filler-${i}`, updatedAt: i, displayName: 'x'.repeat(120) };
      }
      store['agent:main:zz-last'] = { sessionId: 'zz-last', updatedAt: 0 };
    });
    const reader = startChild(['read-loop', storePath]);
    assert.equal(await reader.nextLine(), 'ready');
    const writesPerWriter = 100;
    const writers = ['a', 'b'].map((id) => startChild(['write-loop', storePath, id, String(writesPerWriter)]));
    for (const writer of writers) assert.equal(await writer.nextLine(), 'ready');
    for (const writer of writers) writer.send('go');
    for (const writer of writers) {
      const result = await writer.done;
      assert.equal(result.status, 0, result.stderr);
    }
    reader.endInput();
    const readerResult = await reader.done;
    assert.equal(readerResult.status, 0, readerResult.stderr);
    const report = JSON.parse(readerResult.stdout.trim().split('\n').pop()!) as {
      reads: number;
      badCount: number;
      badReads: string[];
      totalsSeen: number[];
    };
    t.diagnostic(`reader: ${report.reads} reads, ${report.totalsSeen.length} distinct versions seen`);
    assert.deepEqual(report.badReads, []);
    assert.equal(report.badCount, 0);
    assert.ok(report.totalsSeen.includes(0) && report.totalsSeen.includes(2 * writesPerWriter), `totals seen: ${report.totalsSeen.length}`);
    assert.equal((await readSessionStore(storePath))['agent:main:counter']!.total, 2 * writesPerWriter);
  });

  test('case 4: two processes each patch a different field of one entry 1000 times; no update is lost', async () => {
    const dir = await tempDir();
    const storePath = path.join(dir, 'sessions.json');
    const sessionKey = 'agent:main:telegram:direct:42';
    await updateSessionStore(storePath, (store) => {
      store[sessionKey] = { sessionId: 'shared', updatedAt: 1 };
    });
    const rounds = 1000;
    const inFlight = 5; // per process; see patchLoop in the fixture
    const patchers = ['counterA', 'counterB'].map((field) =>
      startChild(['patch', storePath, sessionKey, field, String(rounds), String(inFlight)]),
    );
    for (const patcher of patchers) assert.equal(await patcher.nextLine(), 'ready');
    for (const patcher of patchers) patcher.send('go');
    for (const patcher of patchers) {
      const result = await patcher.done;
      assert.equal(result.status, 0, result.stderr || result.stdout);
    }
    const entry = (await readSessionStore(storePath))[sessionKey]!;
    assert.equal(entry.counterA, rounds);
    assert.equal(entry.counterB, rounds);
    assert.equal(entry.sessionId, 'shared');
    assert.deepEqual(await folderListing(dir), ['sessions.json', 'sessions.json.bak']);
  });
});

// ---------------------------------------------------------------------------------------------
// Case 5. Real faults wherever the kernel can be made to produce them: a size-limited tmpfs
// (ENOSPC), a read-only remount (EROFS), permission bits (EACCES, non-root only) and an immutable
// sessions.json (EPERM from rename(2) itself). The seam (StoreFileSystem) only *times* those real
// faults to the replace step — so the store lock, which lives in the same folder, is taken and
// released normally — and injects EIO at the temp write, which no test can get from a real disk.
// EIO at rename is injected by swapping node:fs.rename, the very function write-file-atomic calls
// for its rename; the store's own seam cannot reach inside the library.

function probeTmpfs(): string | null {
  if (process.platform !== 'linux') return 'tmpfs needs Linux';
  if (process.getuid?.() !== 0) return 'mounting a tmpfs needs root';
  const probeDir = fsCallbacks.mkdtempSync(path.join(os.tmpdir(), 'sb-probe-'));
  try {
    const mounted = spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=64k', 'tmpfs', probeDir]);
    if (mounted.status !== 0) return `mount -t tmpfs not permitted here (${String(mounted.stderr).trim() || mounted.error?.message})`;
    spawnSync('umount', [probeDir]);
    return null;
  } finally {
    fsCallbacks.rmSync(probeDir, { recursive: true, force: true });
  }
}

function probeChattr(): string | null {
  if (process.platform !== 'linux') return 'chattr needs Linux';
  const probeDir = fsCallbacks.mkdtempSync(path.join(os.tmpdir(), 'sb-probe-'));
  const probeFile = path.join(probeDir, 'f');
  try {
    fsCallbacks.writeFileSync(probeFile, 'x');
    const set = spawnSync('chattr', ['+i', probeFile]);
    if (set.status !== 0) return `chattr +i not permitted here (${String(set.stderr).trim() || set.error?.message})`;
    spawnSync('chattr', ['-i', probeFile]);
    return null;
  } finally {
    fsCallbacks.rmSync(probeDir, { recursive: true, force: true });
  }
}

const tmpfsUnavailable = probeTmpfs();
const chattrUnavailable = probeChattr();
const runningAsRoot = process.getuid?.() === 0;

function named(title: string, skipReason: string | null): string {
  return skipReason === null ? title : `${title} [skipped: ${skipReason}]`;
}

function run(command: string, args: string[]): void {
  const result = spawnSync(command, args);
  if (result.status !== 0) throw new Error(`${command} ${args.join(' ')} failed: ${String(result.stderr)}`);
}

async function mountTmpfs(sizeBytes: number): Promise<string> {
  const mountPoint = await tempDir();
  run('mount', ['-t', 'tmpfs', '-o', `size=${sizeBytes},mode=0700`, 'tmpfs', mountPoint]);
  mounts.push(mountPoint);
  return mountPoint;
}

/** Fills the file system holding `dir` until ENOSPC, then gives back `leaveFreeBytes`. */
async function fillDisk(dir: string, leaveFreeBytes: number): Promise<string> {
  const fillerPath = path.join(path.dirname(dir), 'filler');
  const handle = await open(fillerPath, 'w');
  const chunk = Buffer.alloc(64 * 1024, 0x61);
  let size = 0;
  try {
    for (;;) {
      const { bytesWritten } = await handle.write(chunk, 0, chunk.length, size);
      size += bytesWritten;
      if (bytesWritten < chunk.length) break;
    }
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOSPC') throw err;
  } finally {
    await handle.close();
  }
  await truncate(fillerPath, Math.max(0, size - leaveFreeBytes));
  return fillerPath;
}

/**
 * Wraps the real fs so that `fault` is active exactly during the replace step: from the creation
 * of the temp file until its rename over the store settles, or until the temp is cleaned up.
 */
function faultDuringReplace(fault: { before: () => Promise<void> | void; after: () => Promise<void> | void }): StoreFileSystem {
  let active = false;
  const end = async (): Promise<void> => {
    if (!active) return;
    active = false;
    await fault.after();
  };
  return {
    ...nodeStoreFileSystem,
    createExclusive: async (filePath, mode) => {
      active = true;
      await fault.before();
      try {
        await nodeStoreFileSystem.createExclusive(filePath, mode);
      } catch (err) {
        await end();
        throw err;
      }
    },
    rename: async (from, to) => {
      try {
        await nodeStoreFileSystem.rename(from, to);
      } finally {
        await end();
      }
    },
    unlink: async (filePath) => {
      await end();
      await nodeStoreFileSystem.unlink(filePath);
    },
  };
}

const BIG_PAYLOAD = 'p'.repeat(200 * 1024);

/** The shared check of case 5: IO/74 with the errno, original and .bak intact, no temp left, retry works. */
async function assertCleanIoFailureThenRetry(options: {
  storeDir: string;
  storePath: string;
  fs?: StoreFileSystem;
  expectedErrno: string;
  clearFault: () => Promise<void> | void;
  extraNames?: string[];
}): Promise<void> {
  const { storeDir, storePath } = options;
  const originalBytes = await readFile(storePath);
  const update = (store: Record<string, Record<string, unknown>>): void => {
    store['agent:main:main']!.payload = BIG_PAYLOAD;
  };
  await assert.rejects(
    updateSessionStore(storePath, update as never, options.fs === undefined ? {} : { fs: options.fs }),
    (err: unknown) => {
      assert.ok(isCode('IO', 74)(err), `expected IO/74, got ${String(err)}`);
      assert.equal((err as SwitchboardError).details?.errno, options.expectedErrno);
      return true;
    },
  );
  assert.deepEqual(await readFile(storePath), originalBytes, 'original sessions.json intact');
  JSON.parse(await readFile(`${storePath}.bak`, 'utf8')); // .bak still a good copy
  assert.deepEqual(await folderListing(storeDir), ['sessions.json', 'sessions.json.bak', ...(options.extraNames ?? [])].sort());

  await options.clearFault();
  await updateSessionStore(storePath, update as never);
  assert.equal((await readSessionStore(storePath))['agent:main:main']!.payload, BIG_PAYLOAD, 'retry succeeded');
}

describe('case 5: disk full, EIO and read-only at temp write and at rename', () => {
  for (const [label, leaveFreeBytes] of [
    ['disk full', 0],
    ['disk nearly full, so the temp write is short (write-file-atomic alone would rename a truncated file)', 16 * 1024],
  ] as const) {
    test(named(`ENOSPC at temp write — ${label}: IO, original intact, no temp left, retry succeeds`, tmpfsUnavailable), { skip: tmpfsUnavailable ?? false }, async () => {
      const mountPoint = await mountTmpfs(1024 * 1024);
      const storeDir = path.join(mountPoint, 'sessions');
      await mkdir(storeDir);
      const storePath = await seedStore(storeDir);
      let fillerPath: string | undefined;
      const fs = faultDuringReplace({
        before: async () => {
          fillerPath = await fillDisk(storeDir, leaveFreeBytes);
        },
        after: () => undefined, // the disk stays full until the test clears it
      });
      await assertCleanIoFailureThenRetry({
        storeDir,
        storePath,
        fs,
        expectedErrno: 'ENOSPC',
        clearFault: () => unlink(fillerPath!),
      });
    });
  }

  test(named('EROFS at temp creation (read-only remount): IO, original intact, retry succeeds', tmpfsUnavailable), { skip: tmpfsUnavailable ?? false }, async () => {
    const mountPoint = await mountTmpfs(1024 * 1024);
    const storeDir = path.join(mountPoint, 'sessions');
    await mkdir(storeDir);
    const storePath = await seedStore(storeDir);
    const fs = faultDuringReplace({
      before: () => run('mount', ['-o', 'remount,ro', mountPoint]),
      after: () => run('mount', ['-o', 'remount,rw', mountPoint]),
    });
    await assertCleanIoFailureThenRetry({ storeDir, storePath, fs, expectedErrno: 'EROFS', clearFault: () => undefined });
  });

  test(
    named('EACCES at temp creation (folder made read-only): IO, original intact, retry succeeds', runningAsRoot ? 'root bypasses permission bits; EROFS above covers a read-only folder' : null),
    { skip: runningAsRoot ? 'root bypasses permission bits' : false },
    async () => {
      const storeDir = await tempDir();
      const storePath = await seedStore(storeDir);
      const fs = faultDuringReplace({
        before: () => fsCallbacks.promises.chmod(storeDir, 0o500),
        after: () => fsCallbacks.promises.chmod(storeDir, 0o700),
      });
      await assertCleanIoFailureThenRetry({ storeDir, storePath, fs, expectedErrno: 'EACCES', clearFault: () => undefined });
    },
  );

  test(named('EPERM from rename(2) itself (immutable sessions.json): IO, original intact, no temp left, retry succeeds', chattrUnavailable), { skip: chattrUnavailable ?? false }, async () => {
    const storeDir = await tempDir();
    const storePath = await seedStore(storeDir);
    run('chattr', ['+i', storePath]);
    try {
      await assertCleanIoFailureThenRetry({
        storeDir,
        storePath,
        expectedErrno: 'EPERM',
        clearFault: () => run('chattr', ['-i', storePath]),
      });
    } finally {
      spawnSync('chattr', ['-i', storePath]);
    }
  });

  test('EIO at temp write (seam: half the bytes land, then the device fails): IO, original intact, no temp left, retry succeeds', async () => {
    const storeDir = await tempDir();
    const storePath = await seedStore(storeDir);
    let injected = 0;
    const fs: StoreFileSystem = {
      ...nodeStoreFileSystem,
      writeWholeFile: async (tempPath, data) => {
        injected += 1;
        await nodeStoreFileSystem.writeWholeFile(tempPath, data.subarray(0, data.length >> 1));
        throw Object.assign(new Error(`EIO: i/o error, write '${tempPath}'`), { code: 'EIO', errno: -5, syscall: 'write' });
      },
    };
    await assertCleanIoFailureThenRetry({ storeDir, storePath, fs, expectedErrno: 'EIO', clearFault: () => undefined });
    assert.equal(injected, 1);
  });

  test('EIO at rename (seam: the rename of the temp over sessions.json fails): IO, original intact, no temp left, retry succeeds', async () => {
    const storeDir = await tempDir();
    const storePath = await seedStore(storeDir);
    let injected = 0;
    const fs: StoreFileSystem = {
      ...nodeStoreFileSystem,
      rename: async (from, to) => {
        if (to !== storePath) return nodeStoreFileSystem.rename(from, to);
        injected += 1;
        throw Object.assign(new Error(`EIO: i/o error, rename '${from}' -> '${to}'`), { code: 'EIO', errno: -5, syscall: 'rename' });
      },
    };
    await assertCleanIoFailureThenRetry({ storeDir, storePath, fs, expectedErrno: 'EIO', clearFault: () => undefined });
    assert.equal(injected, 1, 'the fault was really placed at the rename over the store');
  });
});
