// Defaults of the run options: the abort sequence's delays (2 s to SIGTERM, 15 s to SIGKILL, both
// counted from the abort line) and the 1 MiB line cap shared with every other NDJSON reader.

import { MAX_LINE_BYTES, MAX_TIMER_MS } from '../core/index.js';
import type { StartRunOptions } from './types.js';

export const DEFAULT_TERM_AFTER_MS = 2_000;
export const DEFAULT_KILL_AFTER_MS = 15_000;

export interface ResolvedRunOptions {
  termAfterMs: number;
  killAfterMs: number;
  env?: NodeJS.ProcessEnv;
  cwd?: string;
  maxLineBytes: number;
}

export function resolveRunOptions(options: StartRunOptions): ResolvedRunOptions {
  return {
    termAfterMs: clampDelay(options.termAfterMs, DEFAULT_TERM_AFTER_MS),
    // Never before SIGTERM: the sequence clamps it to at least the SIGTERM delay actually used.
    killAfterMs: clampDelay(options.killAfterMs, DEFAULT_KILL_AFTER_MS),
    env: options.env,
    cwd: options.cwd,
    maxLineBytes: options.maxLineBytes !== undefined && options.maxLineBytes > 0 ? Math.floor(options.maxLineBytes) : MAX_LINE_BYTES,
  };
}

export function clampDelay(value: number | undefined, fallback: number): number {
  if (value === undefined || !Number.isFinite(value) || value < 0) return fallback;
  return Math.min(MAX_TIMER_MS, Math.floor(value));
}
