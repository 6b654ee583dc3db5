// The injected clock: nothing below the CLI calls Date.now() directly, so `--now` and
// SWITCHBOARD_NOW can pin time for scripts and tests.

import { SwitchboardError } from './errors.js';

export interface Clock {
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };

export function fixedClock(epochMs: number): Clock {
  return { now: () => epochMs };
}

/** Parses `--now` values: an ISO-8601 date-time or epoch milliseconds. */
export function parseNow(value: string, source = '--now'): number {
  const trimmed = value.trim();
  if (/^-?\d+$/.test(trimmed)) {
    const ms = Number(trimmed);
    if (Number.isSafeInteger(ms) && ms >= 0) return ms;
  } else if (/^\d{4}-\d{2}-\d{2}/.test(trimmed)) {
    const ms = Date.parse(trimmed);
    if (!Number.isNaN(ms)) return ms;
  }
  throw new SwitchboardError('USAGE', `${source}: "${value}" is neither an ISO-8601 time nor epoch milliseconds`, {
    hint: 'example: --now 2026-11-30T07:00:00Z or --now 1796022000000',
  });
}

/** Clock from `--now`, else SWITCHBOARD_NOW, else the system clock. */
export function clockFrom(nowFlag: string | undefined, env: NodeJS.ProcessEnv = process.env): Clock {
  if (nowFlag !== undefined) return fixedClock(parseNow(nowFlag));
  const fromEnv = env.SWITCHBOARD_NOW;
  if (fromEnv !== undefined && fromEnv !== '') return fixedClock(parseNow(fromEnv, 'SWITCHBOARD_NOW'));
  return systemClock;
}
