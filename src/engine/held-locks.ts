// Session write locks kept across ingest batches. Bulk input touches the same sessions batch
// after batch, and taking a lock costs several directory operations; so an ingest keeps what it
// took while more input is already waiting, and lets go as soon as input pauses or a lock has been
// held for HOLD_BUDGET_MS (other processes then get their turn).

import { withLock, type LockHandle, type LockOptions } from '../store/index.js';

/** Longest a lock is kept across batches before it is handed back at the next batch boundary. */
export const HOLD_BUDGET_MS = 2_000;

interface Holding {
  handle: LockHandle;
  since: number;
  release: () => void;
  /** Settles when withLock has really released (or failed to acquire). */
  finished: Promise<void>;
}

export class HeldLocks {
  private readonly holdings = new Map<string, Promise<Holding>>();

  /** The handle for `file`'s lock, taking the lock if this process does not keep it yet. */
  async acquire(file: string, options: LockOptions): Promise<LockHandle> {
    let pending = this.holdings.get(file);
    if (pending) {
      const holding = await pending.catch(() => undefined);
      if (holding && holding.handle.isHeld()) return holding.handle;
      this.holdings.delete(file);
      if (holding) holding.release();
    }
    pending = new Promise<Holding>((resolveHolding, rejectHolding) => {
      let release!: () => void;
      const released = new Promise<void>((resolve) => (release = resolve));
      const finished = withLock(file, options, async (handle) => {
        resolveHolding({ handle, since: Date.now(), release, finished });
        await released;
      }).catch((err: unknown) => rejectHolding(err));
    });
    this.holdings.set(file, pending);
    try {
      return (await pending).handle;
    } catch (err) {
      this.holdings.delete(file);
      throw err;
    }
  }

  /** Lets go of one lock (e.g. of a transcript that was just archived). */
  async release(file: string): Promise<void> {
    const pending = this.holdings.get(file);
    if (!pending) return;
    this.holdings.delete(file);
    const holding = await pending.catch(() => undefined);
    if (holding) {
      holding.release();
      await holding.finished;
    }
  }

  /** Releases locks held longer than the budget, or all of them (`all`: input paused or ended). */
  async releaseIdle(all: boolean): Promise<void> {
    const now = Date.now();
    const files: string[] = [];
    for (const [file, pending] of this.holdings) {
      const holding = await pending.catch(() => undefined);
      if (all || !holding || now - holding.since >= HOLD_BUDGET_MS) files.push(file);
    }
    await Promise.all(files.map((file) => this.release(file)));
  }

  get size(): number {
    return this.holdings.size;
  }
}
