// What `ingest` (local or --socket) says and returns when its stdout closed before its input
// ended: it stopped taking input at a line boundary, and everything up to it is on disk.

import { SwitchboardError } from '../core/index.js';
import type { CliContext } from './context.js';

/** ingest whose stdout closed before its input ended: IO, as for any output it could not write. */
export const OUTPUT_CLOSED_EXIT_CODE = new SwitchboardError('IO', 'stdout closed').exitCode;

/**
 * Nobody reads the acknowledgements any more: taking more messages in would do so without telling
 * anyone. Every line up to the stop is on disk; a resend with messageIds is safe (duplicates).
 */
export function reportStoppedIngest(ctx: CliContext, stoppedAfterLine: number, acknowledgedLine: number): number {
  ctx.note(
    `switchboard: stdout closed; stopped taking input after line ${stoppedAfterLine}: lines 1-${stoppedAfterLine} are recorded ` +
      `(results printed up to line ${acknowledgedLine}), nothing after line ${stoppedAfterLine} was taken in`,
  );
  return OUTPUT_CLOSED_EXIT_CODE;
}
