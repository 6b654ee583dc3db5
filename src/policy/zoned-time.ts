// Wall-clock arithmetic in IANA time zones for the daily reset: which instant is "04:00 in
// Europe/Berlin" on a given day, correct across DST changes, using only the runtime's Intl data.
//
// Choices where a wall-clock hour is not a single instant (documented in docs as well):
// * Skipped hour (spring forward, e.g. 02:00 in New York on the March change): the boundary is the
//   moment the clocks jump past it (03:00 EDT). The reset still happens that day, as early as the
//   wall clock allows — never skipped, never an hour late.
// * Repeated hour (fall back, e.g. 01:00 in New York on the November change): the boundary is the
//   first occurrence. A session started during the repeat is after the boundary, so there is
//   exactly one reset that day.
// * A calendar day that does not exist at all in a zone (Pacific/Apia skipped 2011-12-30) has no
//   boundary; the previous day's boundary stays the most recent one.

export interface CalendarDate {
  year: number;
  month: number; // 1–12
  day: number;
}

const DAY_MS = 86_400_000;

const formatters = new Map<string, Intl.DateTimeFormat>();

function formatterFor(timeZone: string): Intl.DateTimeFormat {
  let formatter = formatters.get(timeZone);
  if (formatter === undefined) {
    // h23 avoids the "24:00" that some ICU versions print for midnight with hour12: false.
    formatter = new Intl.DateTimeFormat('en-US', {
      timeZone,
      hourCycle: 'h23',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
      second: 'numeric',
    });
    formatters.set(timeZone, formatter);
  }
  return formatter;
}

/** True when the runtime knows `name` as an IANA time zone (or an alias such as `UTC`). */
export function isValidTimeZone(name: string): boolean {
  if (typeof name !== 'string' || name.trim() === '') return false;
  try {
    formatterFor(name.trim());
    return true;
  } catch {
    return false;
  }
}

let hostZoneFor: { tzVariable: string | undefined; zone: string } | undefined;

// The name of the host's clock when Intl cannot name its zone: `TZ` empty or unknown
// (`Etc/Unknown`) or a POSIX rule such as `JST-9` or `UTC+3` (no name at all). Its wall clock is
// read from Date's local time, which does follow such a TZ, as OpenClaw's daily reset does. The
// TZ value is part of the name so that the caches below never mix two of them; no IANA name starts
// like this, so no config can name it.
const HOST_CLOCK_PREFIX = 'host-clock:';

/**
 * The zone used when `timezone` is unset: the host's local zone, which honours `TZ`. Cached per
 * value of `TZ` because building a formatter to ask is far slower than the arithmetic itself.
 */
export function hostTimeZone(): string {
  const tzVariable = process.env.TZ;
  if (hostZoneFor === undefined || hostZoneFor.tzVariable !== tzVariable) {
    const zone = new Intl.DateTimeFormat().resolvedOptions().timeZone;
    const named = typeof zone === 'string' && zone !== '' && isValidTimeZone(zone);
    hostZoneFor = { tzVariable, zone: named ? zone : `${HOST_CLOCK_PREFIX}${tzVariable ?? ''}` };
  }
  return hostZoneFor.zone;
}

/**
 * The local date-time of `instant` in `timeZone`, encoded as if it were a UTC instant ("wall
 * milliseconds"). Comparing wall milliseconds compares local clock readings.
 */
export function wallClockMs(instant: number, timeZone: string): number {
  if (timeZone.startsWith(HOST_CLOCK_PREFIX)) return instant - new Date(instant).getTimezoneOffset() * 60_000;
  const fields: Record<string, number> = {};
  for (const part of formatterFor(timeZone).formatToParts(instant)) {
    if (part.type !== 'literal') fields[part.type] = Number(part.value);
  }
  const milliseconds = ((instant % 1000) + 1000) % 1000;
  return (
    Date.UTC(fields.year!, fields.month! - 1, fields.day!, fields.hour!, fields.minute!, fields.second!) + milliseconds
  );
}

function dateOfWallMs(wallMs: number): CalendarDate {
  const date = new Date(wallMs);
  return { year: date.getUTCFullYear(), month: date.getUTCMonth() + 1, day: date.getUTCDate() };
}

// `maintain` asks about the same `now` for every session; remembering the last answer saves the
// formatter call that dominates the cost of a freshness check.
let lastLocalDate: { instant: number; timeZone: string; date: CalendarDate } | undefined;

/** The calendar date shown on a wall clock in `timeZone` at `instant`. */
export function localDateOf(instant: number, timeZone: string): CalendarDate {
  if (lastLocalDate !== undefined && lastLocalDate.instant === instant && lastLocalDate.timeZone === timeZone) {
    return { ...lastLocalDate.date };
  }
  const date = dateOfWallMs(wallClockMs(instant, timeZone));
  lastLocalDate = { instant, timeZone, date };
  return { ...date };
}

function shiftDate(date: CalendarDate, days: number): CalendarDate {
  return dateOfWallMs(Date.UTC(date.year, date.month - 1, date.day + days));
}

function sameDate(a: CalendarDate, b: CalendarDate): boolean {
  return a.year === b.year && a.month === b.month && a.day === b.day;
}

/**
 * The instant at which a wall clock in `timeZone` shows `hour:00` on `date`, disambiguated as the
 * header describes (first occurrence; end of a gap); null when the date has no such moment.
 */
export function instantOfLocalHour(date: CalendarDate, hour: number, timeZone: string): number | null {
  const target = Date.UTC(date.year, date.month - 1, date.day, hour);
  // The true instant lies within a day of `target`; the offsets a day either side (and at it)
  // cover the offset before and after any DST change near that time.
  const offsets = new Set(
    [target - DAY_MS, target, target + DAY_MS].map((probe) => wallClockMs(probe, timeZone) - probe),
  );
  const candidates = [...offsets].map((offset) => target - offset);
  const exact = candidates.filter((instant) => wallClockMs(instant, timeZone) === target);
  if (exact.length > 0) return Math.min(...exact);

  // A gap: find the first instant whose wall clock reads at or after the target. Inside the
  // bracket the wall clock only moves forward, so a binary search is exact to the millisecond.
  let low = Math.min(...candidates);
  let high = Math.max(...candidates);
  if (wallClockMs(low, timeZone) >= target || wallClockMs(high, timeZone) < target) return null;
  while (high - low > 1) {
    const middle = Math.floor((low + high) / 2);
    if (wallClockMs(middle, timeZone) >= target) high = middle;
    else low = middle;
  }
  return sameDate(localDateOf(high, timeZone), date) ? high : null;
}

// Boundaries are shared by every session with the same policy, so `maintain` over thousands of
// sessions computes each (zone, hour, day) once. The cache is bounded; clearing it is harmless.
const boundaryCache = new Map<string, number | null>();
const BOUNDARY_CACHE_LIMIT = 4096;

function dailyBoundaryOn(date: CalendarDate, hour: number, timeZone: string): number | null {
  const key = `${timeZone}\u0000${hour}\u0000${date.year}-${date.month}-${date.day}`;
  const cached = boundaryCache.get(key);
  if (cached !== undefined) return cached;
  const boundary = instantOfLocalHour(date, hour, timeZone);
  if (boundaryCache.size >= BOUNDARY_CACHE_LIMIT) boundaryCache.clear();
  boundaryCache.set(key, boundary);
  return boundary;
}

// How many calendar days to look past a day without a boundary (a skipped date) before giving up.
const MAX_DAYS_SEARCHED = 4;

/** The most recent instant at or before `now` at which the wall clock in `timeZone` read `hour:00`. */
export function mostRecentDailyBoundary(now: number, hour: number, timeZone: string): number | null {
  // Start a day late: where a fall-back moves the date backwards, the most recent boundary can
  // carry a later date than `now` does.
  let date = shiftDate(localDateOf(now, timeZone), 1);
  for (let step = 0; step < MAX_DAYS_SEARCHED + 1; step += 1) {
    const boundary = dailyBoundaryOn(date, hour, timeZone);
    if (boundary !== null && boundary <= now) return boundary;
    date = shiftDate(date, -1);
  }
  return null;
}

/** The first instant strictly after `after` at which the wall clock in `timeZone` reads `hour:00`. */
export function nextDailyBoundary(after: number, hour: number, timeZone: string): number | null {
  // Start a day early: where a fall-back moves the date backwards, the next boundary can carry an
  // earlier date than `after` does.
  let date = shiftDate(localDateOf(after, timeZone), -1);
  for (let step = 0; step < MAX_DAYS_SEARCHED + 1; step += 1) {
    const boundary = dailyBoundaryOn(date, hour, timeZone);
    if (boundary !== null && boundary > after) return boundary;
    date = shiftDate(date, 1);
  }
  return null;
}
