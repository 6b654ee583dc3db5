// The write order of ingest, seen from the system calls it makes on real files: the journal is
// fsynced before any record is written, every record is fsynced before sessions.json is replaced,
// and sessions.json is replaced before the result is handed out. The node fs functions are wrapped
// to record the order of calls (and then do exactly what they did); nothing is stubbed out. An
// fsync is recorded when it has completed, a write or rename when it is made.

import assert from 'node:assert/strict';
import fs, { promises as fsp } from 'node:fs';
import { syncBuiltinESMExports } from 'node:module';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { systemClock } from '../../src/core/index.js';
import { ingestBatch, type EngineContext } from '../../src/engine/index.js';
import { compileRoutingTable } from '../../src/routing/index.js';
import { tempDir } from '../helpers.js';

interface Call {
  op: 'write' | 'fsync' | 'rename' | 'ack';
  file: string;
}

const calls: Call[] = [];
const fdPaths = new Map<number, string>();
const restore: (() => void)[] = [];

function wrap<T extends object, K extends keyof T>(owner: T, key: K, make: (original: T[K]) => T[K]): void {
  const original = owner[key];
  owner[key] = make(original);
  restore.push(() => {
    owner[key] = original;
  });
}

before(async () => {
  const probe = await fsp.open(path.join(tempDir(), 'probe'), 'w');
  const FileHandle = Object.getPrototypeOf(probe) as Record<string, (...args: unknown[]) => Promise<unknown>> & { fd?: number };
  await probe.close();
  type Fn = (...args: unknown[]) => Promise<unknown>;
  wrap(fsp as unknown as Record<string, Fn>, 'open', (original) => async function (this: unknown, ...args: unknown[]) {
    const handle = (await original.apply(this, args)) as { fd: number };
    fdPaths.set(handle.fd, path.resolve(String(args[0])));
    return handle;
  });
  for (const method of ['sync', 'datasync'] as const) {
    wrap(FileHandle, method, (original) => async function (this: { fd: number }, ...args: unknown[]) {
      const result = await original.apply(this, args);
      calls.push({ op: 'fsync', file: fdPaths.get(this.fd) ?? `fd:${this.fd}` });
      return result;
    });
  }
  for (const method of ['write', 'writeFile'] as const) {
    wrap(FileHandle, method, (original) => async function (this: { fd: number }, ...args: unknown[]) {
      calls.push({ op: 'write', file: fdPaths.get(this.fd) ?? `fd:${this.fd}` });
      return original.apply(this, args);
    });
  }
  wrap(fsp as unknown as Record<string, Fn>, 'rename', (original) => async function (this: unknown, ...args: unknown[]) {
    calls.push({ op: 'rename', file: path.resolve(String(args[1])) });
    return original.apply(this, args);
  });
  // The synchronous and callback forms (the store's file calls, write-file-atomic).
  type CallbackFn = (...args: unknown[]) => unknown;
  const nodeFs = fs as unknown as Record<string, CallbackFn>;
  wrap(nodeFs, 'openSync', (original) => function (this: unknown, ...args: unknown[]) {
    const fd = original.apply(this, args) as number;
    fdPaths.set(fd, path.resolve(String(args[0])));
    return fd;
  });
  wrap(nodeFs, 'writeSync', (original) => function (this: unknown, ...args: unknown[]) {
    calls.push({ op: 'write', file: fdPaths.get(args[0] as number) ?? `fd:${String(args[0])}` });
    return original.apply(this, args);
  });
  for (const method of ['rename', 'renameSync'] as const) {
    wrap(nodeFs, method, (original) => function (this: unknown, ...args: unknown[]) {
      calls.push({ op: 'rename', file: path.resolve(String(args[1])) });
      return original.apply(this, args);
    });
  }
  wrap(nodeFs, 'fsync', (original) => function (this: unknown, ...args: unknown[]) {
    const fd = args[0] as number;
    const done = args[args.length - 1] as (err: unknown) => void;
    return original.apply(this, [
      ...args.slice(0, -1),
      (err: unknown) => {
        if (!err) calls.push({ op: 'fsync', file: fdPaths.get(fd) ?? `fd:${fd}` });
        done(err);
      },
    ]);
  });
  // Named imports of node:fs/promises see the wrapped functions only after this.
  syncBuiltinESMExports();
});

after(() => {
  for (const undo of restore.reverse()) undo();
  syncBuiltinESMExports();
});

function indexOf(predicate: (call: Call) => boolean, from = 0): number {
  for (let i = from; i < calls.length; i++) if (predicate(calls[i]!)) return i;
  return -1;
}

test('ingest: journal fsynced → record written → record fsynced → sessions.json replaced → acknowledged', async () => {
  const stateDir = tempDir();
  const ctx: EngineContext = { stateDir, config: {}, table: compileRoutingTable({}), clock: systemClock };
  for (const round of [1, 2]) {
    calls.length = 0;
    const line = JSON.stringify({ channel: 'telegram', peer: { kind: 'direct', id: 'alice' }, text: `hello ${round}`, messageId: `m${round}` });
    const events = await ingestBatch(ctx, [{ line: 1, text: line }]);
    calls.push({ op: 'ack', file: '' });
    assert.equal(events[0]?.type, 'result', JSON.stringify(events));

    const sessionsDir = path.join(stateDir, 'agents', 'main', 'sessions');
    const storePath = path.join(sessionsDir, 'sessions.json');
    const isTranscript = (file: string): boolean => file.startsWith(sessionsDir) && file.endsWith('.jsonl');
    const journalSync = indexOf((c) => c.op === 'fsync' && c.file === `${storePath}.journal`);
    const recordWrite = indexOf((c) => c.op === 'write' && isTranscript(c.file));
    const recordSync = indexOf((c) => c.op === 'fsync' && isTranscript(c.file), Math.max(recordWrite, 0));
    const storeReplace = indexOf((c) => c.op === 'rename' && c.file === storePath);
    const ack = indexOf((c) => c.op === 'ack');
    const order = JSON.stringify(calls.map((c) => `${c.op} ${path.basename(c.file)}`));
    assert.ok(journalSync >= 0, `round ${round}: the journal is fsynced: ${order}`);
    assert.ok(recordWrite > journalSync, `round ${round}: the record is written after the journal is durable: ${order}`);
    assert.ok(recordSync > recordWrite, `round ${round}: the record is fsynced: ${order}`);
    assert.ok(storeReplace > recordSync, `round ${round}: sessions.json is replaced only after the record is durable: ${order}`);
    assert.ok(ack > storeReplace, `round ${round}: the result comes after sessions.json: ${order}`);
  }
});
