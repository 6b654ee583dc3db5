// Engine pieces of the queue without the CLI: lane slots (a limit across callers, giving up when
// told), who counts as alive (dead pid, this process, another host, a reused pid), clearing dead holders.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { describe, test } from 'node:test';
import { readProcStat, systemClock } from '../../src/core/index.js';
import type { EngineContext } from '../../src/engine/index.js';
import { acquireLaneSlot, laneCapacity } from '../../src/engine/lanes.js';
import { THIS_PROCESS, clearDeadHolders, learnLiveness, runAlive, ownerAlive, type Liveness, type QueuedEntry } from '../../src/engine/queue-state.js';
import type { ActiveRunRecord, QueueItem } from '../../src/policy/index.js';
import { compileRoutingTable } from '../../src/routing/index.js';
import { lockPathFor, resolveStoreLocation, withLock } from '../../src/store/index.js';
import fs from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { tempDir } from '../helpers.js';

function context(config: Record<string, unknown> = {}): EngineContext {
  return { stateDir: tempDir('sb-engine-queue-'), config, table: compileRoutingTable(config), clock: systemClock };
}

async function deadPid(): Promise<number> {
  const child = spawn(process.execPath, ['-e', '0'], { stdio: 'ignore' });
  const pid = child.pid!;
  await new Promise((resolve) => child.on('exit', resolve));
  return pid;
}

describe('lane slots', () => {
  test('capacity comes from the config, else the defaults', () => {
    assert.equal(laneCapacity(context({ agents: { defaults: { maxConcurrent: 3 } } }), 'main'), 3);
    assert.equal(laneCapacity(context({ cron: { maxConcurrent: 2 } }), 'cron'), 2);
    assert.ok(laneCapacity(context(), 'main') >= 8);
    assert.equal(laneCapacity(context(), 'cron'), 8);
  });

  test('with one slot a second holder waits until the first releases; shouldStop gives up', async () => {
    const ctx = context({ agents: { defaults: { maxConcurrent: 1 } } });
    const options = (runId: string, shouldStop = () => false) => ({ owner: { sessionKey: 'agent:main:main', runId }, runTimeoutMs: 60_000, shouldStop });
    const first = await acquireLaneSlot(ctx, 'main', options('one'));
    assert.ok(first);
    const order: string[] = [];
    const second = acquireLaneSlot(ctx, 'main', options('two')).then((slot) => {
      order.push('second acquired');
      return slot;
    });
    let stop = false;
    const third = acquireLaneSlot(ctx, 'main', options('three', () => stop));
    // Both wait while the only slot is held; the third gives up when told to.
    stop = true;
    assert.equal(await third, null);
    order.push('first released');
    await first.release();
    const slot = await second;
    assert.deepEqual(order, ['first released', 'second acquired']);
    await slot!.release();
  });
});

describe('the session lane', () => {
  test('a lock held for a whole run survives its refreshes (the owner record does not break the mtime check)', async () => {
    const target = path.join(tempDir('sb-engine-lane-'), 'session.jsonl');
    await withLock(target, { staleMs: 2000 }, async (handle) => {
      const lockDir = lockPathFor(target);
      const first = fs.statSync(lockDir).mtimeMs;
      // Wait for two refreshes (every staleMs / 2): the first is where a changed mtime was judged.
      let refreshes = 0;
      let last = first;
      for (let waited = 0; refreshes < 2 && waited < 20_000; waited += 50) {
        await sleep(50);
        const now = fs.statSync(lockDir).mtimeMs;
        if (now !== last) {
          refreshes += 1;
          last = now;
        }
      }
      assert.equal(refreshes, 2, 'the holder refreshed its lock twice');
      assert.equal(handle.signal.aborted, false, String(handle.signal.reason));
      assert.equal(handle.isHeld(), true);
    });
  });
});

describe('liveness of holders', () => {
  const location = (ctx: EngineContext) => resolveStoreLocation(ctx.stateDir, 'main', {});
  const run = (extra: Partial<ActiveRunRecord>): ActiveRunRecord => ({ ...THIS_PROCESS, runId: 'r1', sessionId: 's1', startedAt: 0, lane: 'main', ...extra });

  test('a dead pid is dead, this process is alive, another host is assumed alive, a reused pid of ours is dead', async () => {
    const ctx = context();
    const pid = await deadPid();
    const entries: QueuedEntry[] = [
      { sessionId: 's1', updatedAt: 0, activeRun: run({ pid, runId: 'dead' }) },
      { sessionId: 's2', updatedAt: 0, activeRun: run({ runId: 'mine' }) },
      { sessionId: 's3', updatedAt: 0, activeRun: run({ hostname: 'elsewhere.example', pid: 1, runId: 'far' }) },
      { sessionId: 's4', updatedAt: 0, activeRun: run({ processStartTime: 1, runId: 'reused' }) },
      { sessionId: 's5', updatedAt: 0, queueOwner: { pid, hostname: THIS_PROCESS.hostname, processStartTime: 5, since: 0 } },
    ];
    const liveness: Liveness = new Map();
    await learnLiveness(ctx, location(ctx), entries, liveness);
    assert.deepEqual(entries.slice(0, 4).map((e) => runAlive(e.activeRun!, liveness)), [false, true, true, false]);
    assert.equal(ownerAlive(entries[4].queueOwner!, liveness), false);
  });

  test('a pid reused by a live process (its /proc start time differs from the record\'s) is dead, for runs and queue owners alike', async () => {
    // The records name a live process of this host that is not the one that wrote them: our
    // parent (the test runner), with the start ticks of this process. Judged by kill(pid, 0)
    // alone it was alive, so a dead run whose lock maintain had released stayed "running" and
    // what was queued behind it, or behind a dead queue owner, was never drained.
    const ctx = context();
    const startTicks = readProcStat('self')?.startTicks;
    assert.equal(typeof startTicks, 'number', 'this test needs /proc');
    const ticks = { processStartTicks: startTicks };
    const live = process.ppid;
    const entries: QueuedEntry[] = [
      { sessionId: 's1', updatedAt: 0, activeRun: run({ pid: live, ...ticks, runId: 'reused-run' }) },
      { sessionId: 's2', updatedAt: 0, queueOwner: { pid: live, hostname: THIS_PROCESS.hostname, processStartTime: 5, ...ticks, since: 0 } },
      { sessionId: 's3', updatedAt: 0, queueOwner: { pid: live, hostname: THIS_PROCESS.hostname, processStartTime: 6, since: 0 } },
    ];
    const liveness: Liveness = new Map();
    await learnLiveness(ctx, location(ctx), entries, liveness);
    assert.equal(runAlive(entries[0].activeRun!, liveness), false);
    assert.equal(ownerAlive(entries[1].queueOwner!, liveness), false);
    assert.equal(ownerAlive(entries[2].queueOwner!, liveness), true, 'a record without start ticks (an older process): alive while its pid is');
  });

  test('clearing a dead run turns its parked items into followups and frees the session', () => {
    const parked = { runId: 'p', state: 'parked' } as QueueItem;
    const entry: QueuedEntry = {
      sessionId: 's1',
      updatedAt: 0,
      activeRun: run({ pid: 999_999, runId: 'gone' }),
      abortRequested: 'gone',
      queue: [parked],
      queueOwner: { pid: 999_999, hostname: THIS_PROCESS.hostname, processStartTime: 1, since: 0 },
    };
    const liveness: Liveness = new Map([
      [`run:${THIS_PROCESS.hostname}/999999/${THIS_PROCESS.processStartTime}/gone`, false],
      [`proc:${THIS_PROCESS.hostname}/999999/1`, false],
    ]);
    const orphan = clearDeadHolders(entry, liveness);
    assert.equal(orphan?.run.runId, 'gone');
    assert.equal(orphan?.unparked, 1);
    assert.equal(entry.activeRun, undefined);
    assert.equal(entry.abortRequested, undefined);
    assert.equal(entry.queueOwner, undefined);
    assert.deepEqual(entry.queue!.map((i) => i.state), ['queued']);
  });
});
