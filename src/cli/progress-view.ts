// The ink view of a progress line on stderr: one line (label, bar, counts) that ink redraws in
// place, truncated to the terminal width, erased when the work is done. Loaded only by progress.ts.

import { PassThrough } from 'node:stream';
import React from 'react';
import { Text, render } from 'ink';
import { formatBytes } from './format.js';
import type { ProgressReport } from './progress.js';

const h = React.createElement;
const BAR_WIDTH = 20;
/** Erase this line, go up one, erase it, go to its first column. */
const ERASE_LINE_ABOVE = '\u001b[2K\u001b[1A\u001b[2K\u001b[G';

function ProgressLine({ report }: { report: ProgressReport }): React.ReactElement {
  const share = report.total > 0 ? Math.min(1, report.done / report.total) : 0;
  const filled = Math.round(share * BAR_WIDTH);
  const count = (n: number): string => (report.unit === 'bytes' ? formatBytes(n) : String(n));
  return h(Text, { wrap: 'truncate-end' }, `${report.label} [${'#'.repeat(filled)}${'.'.repeat(BAR_WIDTH - filled)}] ${count(report.done)}/${count(report.total)}`);
}

export interface ProgressView {
  update(report: ProgressReport): void;
  /** Erases the line and gives the terminal back. */
  stop(): void;
}

export function showProgress(stderr: NodeJS.WriteStream, first: ProgressReport): ProgressView {
  // Never ink's stdin: `ingest` reads its messages from ours.
  const stdin = new PassThrough() as unknown as NodeJS.ReadStream;
  const app = render(h(ProgressLine, { report: first }), { stdout: stderr, stderr, stdin, patchConsole: false, exitOnCtrlC: false });
  return {
    update: (report) => app.rerender(h(ProgressLine, { report })),
    stop: () => {
      // Unmounting draws the last frame (a throttled one may still be pending) and leaves the
      // cursor below it; the one line is then erased and the cursor put back at its start, so
      // what comes next is printed where the progress was.
      app.unmount();
      stderr.write(ERASE_LINE_ABOVE);
    },
  };
}
