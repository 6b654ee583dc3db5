// Global lanes across processes: `main` allows agents.defaults.maxConcurrent runs at once, `cron`
// allows cron.maxConcurrent cron-driven runs; each run holds one slot lock under <state>/lanes/.

import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { DEFAULTS } from '../config/index.js';
import { isSwitchboardError, type SwitchboardError } from '../core/index.js';
import type { LaneName } from '../policy/index.js';
import { withLock, type LockOptions } from '../store/index.js';
import type { EngineContext } from './context.js';

export interface LaneSlot {
  lane: LaneName;
  index: number;
  /** Aborted when the slot lock is lost (held past its max hold, taken over). */
  signal: AbortSignal;
  release(): Promise<void>;
}

function positiveInteger(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 1 ? value : undefined;
}

/** How many runs a lane allows at once (config, else the default of config/defaults.ts). */
export function laneCapacity(ctx: EngineContext, lane: LaneName): number {
  if (lane === 'cron') return positiveInteger(ctx.config.cron?.maxConcurrent) ?? DEFAULTS['cron.maxConcurrent'];
  return positiveInteger(ctx.config.agents?.defaults?.maxConcurrent) ?? DEFAULTS['agents.defaults.maxConcurrent'];
}

export function laneDir(stateDir: string, lane: LaneName): string {
  return path.join(stateDir, 'lanes', lane);
}

/** Tries one slot once; resolves the busy error (naming the holder) when it is held by someone else. */
function tryHold(target: string, options: LockOptions, lane: LaneName, index: number): Promise<LaneSlot | SwitchboardError> {
  return new Promise((resolve, reject) => {
    let settled = false;
    let letGo!: () => void;
    const released = new Promise<void>((done) => (letGo = done));
    const holding = withLock(target, options, async (handle) => {
      settled = true;
      resolve({
        lane,
        index,
        signal: handle.signal,
        release: async () => {
          letGo();
          await holding.catch(() => undefined);
        },
      });
      await released;
    });
    holding.catch((err: unknown) => {
      if (settled) return; // a failed release: taken over once stale with this process gone, or past its max hold
      settled = true;
      if (isSwitchboardError(err) && (err.code === 'SESSION_BUSY' || err.code === 'STORE_BUSY')) resolve(err);
      else reject(err);
    });
  });
}

export interface AcquireSlotOptions {
  /** Written into the slot's lock record (empty for an incognito run). */
  owner: { sessionKey?: string; runId?: string };
  /** The run's timeout; the slot's max hold derives from it like the session lock's. */
  runTimeoutMs: number;
  staleMs?: number;
  /** session.writeLock.maxHoldMs: a slot is held as long as the run's session lock may be. */
  maxHoldMs?: number;
  /** Checked between attempts: true gives up (the run was aborted while waiting). */
  shouldStop: () => boolean;
}

/**
 * Waits for a free slot of the lane: every slot is tried once in a random order (no waiting on a
 * held one), then the caller backs off with jitter and tries again. Resolves null when shouldStop
 * said so. Processes compete through the slot locks only, so the limit holds across processes.
 * A slot whose holder is alive but no longer refreshes it (a stopped process) is waited for until
 * its max hold, like any lock of a live holder; the wait says once, on the command's diagnostics,
 * who it waits for — it has no timeout of its own that would name the holder.
 */
export async function acquireLaneSlot(ctx: EngineContext, lane: LaneName, options: AcquireSlotOptions): Promise<LaneSlot | null> {
  const capacity = laneCapacity(ctx, lane);
  const dir = laneDir(ctx.stateDir, lane);
  const lockOptions: LockOptions = {
    acquireTimeoutMs: 0,
    staleMs: options.staleMs,
    maxHoldMs: options.maxHoldMs,
    runTimeoutMs: options.runTimeoutMs,
    busyCode: 'SESSION_BUSY',
    owner: options.owner,
  };
  const told = new Set<unknown>();
  for (let attempt = 0; ; attempt++) {
    if (options.shouldStop()) return null;
    const start = Math.floor(Math.random() * capacity);
    const unresponsive: { index: number; busy: SwitchboardError }[] = [];
    for (let n = 0; n < capacity; n++) {
      const index = (start + n) % capacity;
      const slot = await tryHold(path.join(dir, `slot-${index}`), lockOptions, lane, index);
      if (!isSwitchboardError(slot)) {
        if (options.shouldStop()) {
          await slot.release();
          return null;
        }
        return slot;
      }
      if (slot.details?.unresponsive === true) unresponsive.push({ index, busy: slot });
    }
    for (const { index, busy } of unresponsive) {
      const lockId = (busy.details?.owner as { lockId?: unknown } | null)?.lockId;
      if (told.has(lockId)) continue;
      told.add(lockId);
      const who = options.owner.runId !== undefined ? `run ${options.owner.runId} (${options.owner.sessionKey})` : 'a run';
      ctx.log?.(`switchboard: ${who} waits for a slot of lane ${lane}: slot ${index} is ${String(busy.details?.holder)}`);
    }
    const ceiling = Math.min(250, 10 * 2 ** Math.min(attempt, 5));
    await sleep(ceiling / 2 + Math.random() * (ceiling / 2));
  }
}
