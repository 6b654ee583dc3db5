// `serve` runs `maintain` on a schedule (session.maintenance.maintainEvery, default hourly), so a
// server without cron never grows without limit. One timer, re-armed only after a pass ends, so
// passes never overlap; the interval is read from the current config at each arming (a reload
// changes it); stop() disarms it and waits for a pass in progress.

import { timerDelay } from '../core/index.js';
import { maintainEveryMs, purgeIncognitoArchives, runMaintain, type EngineContext, type MaintainReport } from '../engine/index.js';

export interface MaintainScheduleStatus {
  /** null: the schedule is off. */
  everyMs: number | null;
  runs: number;
  failed: number;
  lastStartedAt: string | null;
  lastOk: boolean | null;
}

export class MaintainSchedule {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | null = null;
  private stopped = false;
  private everyMs: number | null = null;
  private readonly counters = { runs: 0, failed: 0, lastStartedAt: null as string | null, lastOk: null as boolean | null };

  constructor(
    private readonly engine: () => EngineContext,
    private readonly log: (line: string) => void,
    private readonly warn: (line: string) => void,
  ) {}

  /** Arms the timer (again) from the current config; a pass in progress re-arms when it ends. */
  arm(): void {
    if (this.stopped) return;
    clearTimeout(this.timer);
    this.timer = undefined;
    try {
      this.everyMs = maintainEveryMs(this.engine());
    } catch (err) {
      this.everyMs = null;
      this.warn(`switchboard serve: no scheduled maintain: ${err instanceof Error ? err.message : String(err)}`);
    }
    if (this.everyMs === null || this.running !== null) return;
    this.waitUntil(Date.now() + this.everyMs);
  }

  /** One timer, re-armed for what is left while the pass is not due yet (timers wait ~24.8 days at most). */
  private waitUntil(dueAt: number): void {
    // unref: a pending pass never keeps the process alive on its own.
    this.timer = setTimeout(() => {
      if (Date.now() < dueAt) this.waitUntil(dueAt);
      else this.runOnce();
    }, timerDelay(dueAt - Date.now())).unref();
  }

  private runOnce(): void {
    this.timer = undefined;
    if (this.stopped) return;
    this.running = this.pass().finally(() => {
      this.running = null;
      this.arm();
    });
  }

  private async pass(): Promise<void> {
    this.counters.runs += 1;
    this.counters.lastStartedAt = new Date().toISOString();
    try {
      const engine = this.engine();
      const result = await runMaintain(engine);
      const incognitoPurged = purgeIncognitoArchives(engine);
      this.counters.lastOk = result.report.ok;
      if (!result.report.ok) this.counters.failed += 1;
      const line = summaryOf(result.report, incognitoPurged);
      if (!result.report.ok) this.warn(line);
      else this.log(line);
    } catch (err) {
      this.counters.failed += 1;
      this.counters.lastOk = false;
      this.warn(`switchboard serve: scheduled maintain failed: ${err instanceof Error ? err.message : String(err)}`);
    }
  }

  /** Disarms the timer and waits for a pass in progress (its store writes are short and locked). */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    this.timer = undefined;
    await this.running;
  }

  status(): MaintainScheduleStatus {
    return { everyMs: this.everyMs, ...this.counters };
  }
}

function summaryOf(r: MaintainReport, incognitoPurged: number): string {
  let removed = 0;
  let purged = 0;
  for (const store of r.cleanup.stores) {
    if ('error' in store) continue;
    removed += store.pruned + store.missing + store.capped + (store.diskBudget?.removedEntries ?? 0);
    purged += store.purgedArchives;
  }
  return (
    `switchboard serve: scheduled maintain: ${r.locks.released.length} lock(s) released, ${r.cronRetention.removed.length} cron session(s) retired, ` +
    `${removed} session(s) removed, ${purged} old archive(s) purged${incognitoPurged > 0 ? ` (+${incognitoPurged} incognito)` : ''}, ${r.resets.reset.length} reset(s)${r.errors.length > 0 ? `, ${r.errors.length} failure(s)` : ''}`
  );
}
