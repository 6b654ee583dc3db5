// Which time zone people are shown times in, and the one way an instant is written for them:
// ISO 8601 with the zone's offset, so the text stays exact and sortable in any zone.

import { MAX_DATE_MS } from '../core/index.js';
import type { SwitchboardConfig } from '../config/types.js';
import { readTimeZone } from './reset.js';
import { wallClockMs } from './zoned-time.js';

/**
 * The user's zone (`agents.defaults.userTimezone`, OpenClaw's name for it), else the zone daily
 * resets are counted in (`session.reset.timezone`), else none: times stay in UTC as stored.
 * A set but unknown zone is CONFIG_INVALID naming its path.
 */
export function displayTimeZone(config: SwitchboardConfig | undefined): string | undefined {
  return (
    readTimeZone(config?.agents?.defaults?.userTimezone, 'agents.defaults.userTimezone') ??
    readTimeZone(config?.session?.reset?.timezone, 'session.reset.timezone')
  );
}

/** `2026-11-30T08:00:00.000+01:00` in `timeZone`; without one, `2026-11-30T07:00:00.000Z`. */
export function formatInstant(instant: number, timeZone?: string): string {
  // A stored time no date can hold (a hand-edited 1e20) is shown as it is, never a crash.
  if (!(Math.abs(instant) <= MAX_DATE_MS)) return `${instant} (not a date)`;
  if (timeZone === undefined) return new Date(instant).toISOString();
  const wall = wallClockMs(instant, timeZone);
  const offsetMinutes = Math.round((wall - instant) / 60_000);
  if (offsetMinutes === 0 && /^(utc|etc\/utc|gmt|etc\/gmt|zulu|etc\/zulu)$/i.test(timeZone)) return new Date(instant).toISOString();
  const sign = offsetMinutes < 0 ? '-' : '+';
  const abs = Math.abs(offsetMinutes);
  if (!(Math.abs(wall) <= MAX_DATE_MS)) return `${instant} (not a date)`;
  return `${new Date(wall).toISOString().slice(0, -1)}${sign}${String(Math.floor(abs / 60)).padStart(2, '0')}:${String(abs % 60).padStart(2, '0')}`;
}
