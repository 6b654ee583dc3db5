// Progress of long work (doctor, sessions cleanup, maintain, ingest of a large file) on stderr:
// only when stderr is a terminal, never with --json or --quiet, and only once there is much to
// do; the ink view is loaded then, so short runs and pipes pay nothing.

import type { CliContext } from './context.js';

export interface ProgressReport {
  /** What is being done, e.g. "main: check the transcripts". */
  label: string;
  done: number;
  total: number;
  /** `bytes`: done and total are shown as sizes (1.5mb/40.0mb). */
  unit?: 'bytes';
}

export interface Progress {
  update(report: ProgressReport): void;
  /** Erases the line (if one was shown); call before printing the result. */
  stop(): Promise<void>;
}

/** Below this many items of one stage a progress line would only flicker. */
export const PROGRESS_MIN_TOTAL = 200;

const silent: Progress = { update: () => undefined, stop: async () => undefined };

export function progressFor(ctx: CliContext): Progress {
  const stderr = ctx.streams.stderr as NodeJS.WriteStream;
  // A terminal that does not say its size (rows 0) would make ink clear the screen for every frame.
  if (stderr.isTTY !== true || ctx.json || ctx.quiet || !(stderr.rows > 0 && stderr.columns > 0)) return silent;
  let latest: ProgressReport | undefined;
  let view: Promise<{ update(report: ProgressReport): void; stop(): void } | null> | undefined;
  let stopped = false;
  const start = (): void => {
    // ink draws only a final frame when it believes it runs under CI; stderr is a terminal here.
    for (const name of ['CI', 'CONTINUOUS_INTEGRATION']) if (name in process.env) process.env[name] = 'false';
    // Drawn even when the work ended while the view was loading (then at once erased by stop()):
    // a person at a terminal sees that work of this size shows progress, every time.
    view = import('./progress-view.js').then(
      ({ showProgress }) => showProgress(stderr, latest!),
      () => null, // no terminal library: the work goes on without a progress line
    );
  };
  return {
    update: (report) => {
      if (stopped) return;
      latest = report;
      if (view === undefined) {
        if (report.total >= PROGRESS_MIN_TOTAL) start();
        return;
      }
      void view.then((shown) => {
        if (!stopped && latest === report) shown?.update(report);
      });
    },
    stop: async () => {
      stopped = true;
      (await view)?.stop();
    },
  };
}
