// setTimeout keeps a delay in a signed 32-bit integer: anything longer than 2^31−1 ms (~24.8 days)
// fires after 1 ms instead, with a TimeoutOverflowWarning. Configured durations may be longer
// (a `maintainEvery` of "30d", a quiet window of weeks), so every timer armed from a setting
// goes through timerDelay, and a caller that needs the full wait re-checks when it fires.

/** The longest delay setTimeout honours. */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/** A delay setTimeout honours: `ms` clamped to 0 … MAX_TIMER_MS (NaN is 0). */
export function timerDelay(ms: number): number {
  return ms > 0 ? Math.min(MAX_TIMER_MS, ms) : 0;
}
