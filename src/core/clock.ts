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

// `2026-11-30`, `2026-11-30T07:00`, `…T07:00:00.123Z`, `… 07:00:00+02:00` (T or a space, any case).
const ISO_TIME = /^(\d{4})-(\d{2})-(\d{2})(?:[Tt ](\d{2}):(\d{2})(?::(\d{2})(\.\d{1,9})?)?([Zz]|[+-]\d{2}:?\d{2})?)?$/;

function daysInMonth(year: number, month: number): number {
  return new Date(Date.UTC(year, month, 0)).getUTCDate();
}

/**
 * Epoch ms of an ISO-8601 date or date-time, or undefined. Stricter than Date.parse, which rolls
 * 30 February over to 2 March, reads 24:00 as the next day and ignores text after a date
 * (`2026-11-30 (note)`): a time that is not on the calendar is refused, never guessed. Without an
 * offset a date-time is local time (TZ), a bare date UTC midnight, as in JavaScript.
 */
export function parseIsoTime(text: string): number | undefined {
  const match = ISO_TIME.exec(text);
  if (match === null) return undefined;
  const [, year, month, day, hour, minute, second, fraction, zone] = match;
  const y = Number(year);
  const mo = Number(month);
  if (mo < 1 || mo > 12 || Number(day) < 1 || Number(day) > daysInMonth(y, mo)) return undefined;
  if (hour !== undefined && (Number(hour) > 23 || Number(minute) > 59 || Number(second ?? 0) > 59)) return undefined;
  let offset = '';
  if (zone !== undefined && zone.toUpperCase() !== 'Z') {
    const digits = zone.replace(':', '');
    if (Number(digits.slice(1, 3)) > 23 || Number(digits.slice(3)) > 59) return undefined;
    offset = `${digits.slice(0, 3)}:${digits.slice(3)}`;
  } else if (zone !== undefined) offset = 'Z';
  const canonical =
    hour === undefined
      ? `${year}-${month}-${day}`
      : `${year}-${month}-${day}T${hour}:${minute}:${second ?? '00'}${fraction === undefined ? '' : fraction.slice(0, 4)}${offset}`;
  const ms = Date.parse(canonical);
  return Number.isNaN(ms) ? undefined : ms;
}

/** Parses `--now` values: an ISO-8601 date-time or epoch milliseconds. */
/** The largest epoch ms a Date can hold (either side of 1970). */
export const MAX_DATE_MS = 8.64e15;

/**
 * The latest time a clock may be set to, 9999-12-31T23:59:59.999Z: every time switchboard works
 * out from "now" (the next daily reset, an idle expiry, a file's archive stamp) must still be a
 * date, and JavaScript's dates end in the year 275760.
 */
export const MAX_CLOCK_MS = 253_402_300_799_999;

export function parseNow(value: string, source = '--now'): number {
  const trimmed = value.trim();
  let ms: number | undefined;
  if (/^-?\d+$/.test(trimmed)) {
    const epoch = Number(trimmed);
    // A digit string past the safe integers is still a time, just one far past the clock's end.
    if (epoch >= 0) ms = Number.isSafeInteger(epoch) ? epoch : Number.POSITIVE_INFINITY;
  } else {
    ms = parseIsoTime(trimmed);
  }
  if (ms !== undefined && ms > MAX_CLOCK_MS) {
    throw new SwitchboardError('USAGE', `${source}: "${value}" is after 9999-12-31T23:59:59.999Z, the latest time the clock may be set to`);
  }
  // The store keeps times as epoch milliseconds of 0 or more: a clock set before 1970 wrote
  // entries that its own schema (and doctor) calls invalid, with nothing to repair them from.
  if (ms !== undefined && ms < 0) {
    throw new SwitchboardError('USAGE', `${source}: "${value}" is before 1970-01-01T00:00:00Z, the earliest time the clock may be set to`);
  }
  if (ms !== undefined) return ms;
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
