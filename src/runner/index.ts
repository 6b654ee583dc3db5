// Public face of runner/: resolve a runner config, start a run (an external program spoken to in
// JSON lines, or a built-in) and follow it through one RunHandle. runner/ imports only core/.

import { startBuiltinRun } from './builtin.js';
import { startChildRun } from './child-run.js';
import { resolveRunOptions } from './options.js';
import { isBuiltinRunner } from './spec.js';
import type { RunHandle, RunInit, RunnerSpec, StartRunOptions } from './types.js';

export type * from './types.js';
export { BUILTIN_RUNNERS } from './types.js';
export { resolveRunnerSpec, parseCommand, isBuiltinRunner, maySteer, DEFAULT_RUNNER_TIMEOUT_SECONDS, type RunnerConfigInput } from './spec.js';
export { DEFAULT_TERM_AFTER_MS, DEFAULT_KILL_AFTER_MS } from './options.js';
export { DEFAULT_SLOW_ECHO_DELAY_MS, DEFAULT_SLOW_ECHO_TOOL_CALLS } from './builtin.js';

/**
 * Starts one run. Never throws for runner problems: a program that cannot be started, breaks the
 * protocol, fails, times out or is aborted ends with an `end` event saying so.
 */
export function startRun(spec: RunnerSpec, init: RunInit, options: StartRunOptions = {}): RunHandle {
  const resolved = resolveRunOptions(options);
  if (isBuiltinRunner(spec.command)) return startBuiltinRun(spec.command, spec, init);
  return startChildRun(spec.command, spec, init, resolved);
}
