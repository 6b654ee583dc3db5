// Tests of wall-clock arithmetic in IANA zones: the disambiguation of skipped and repeated
// hours, skipped calendar days, and a year-long sweep of the daily-boundary invariants.

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  instantOfLocalHour,
  isValidTimeZone,
  mostRecentDailyBoundary,
  nextDailyBoundary,
  wallClockMs,
} from '../../src/policy/zoned-time.js';

const at = (iso: string): number => Date.parse(iso);
const HOUR = 3_600_000;

describe('isValidTimeZone', () => {
  it('knows IANA names and rejects others', () => {
    for (const name of ['UTC', 'Europe/Berlin', 'America/New_York', 'Asia/Kolkata']) assert.equal(isValidTimeZone(name), true, name);
    for (const name of ['', ' ', 'Mars/Base', 'Europe/Berlinn', 'GMT+25']) assert.equal(isValidTimeZone(name), false, name);
  });
});

describe('instantOfLocalHour', () => {
  it('finds ordinary hours with the offset of that day', () => {
    assert.equal(instantOfLocalHour({ year: 2026, month: 1, day: 15 }, 4, 'America/New_York'), at('2026-01-15T09:00:00Z'));
    assert.equal(instantOfLocalHour({ year: 2026, month: 7, day: 15 }, 4, 'America/New_York'), at('2026-07-15T08:00:00Z'));
    assert.equal(instantOfLocalHour({ year: 2026, month: 7, day: 15 }, 4, 'Asia/Kolkata'), at('2026-07-14T22:30:00Z'));
  });

  it('maps a skipped hour to the moment the clocks jump past it', () => {
    assert.equal(instantOfLocalHour({ year: 2026, month: 3, day: 8 }, 2, 'America/New_York'), at('2026-03-08T07:00:00Z'));
    assert.equal(instantOfLocalHour({ year: 2026, month: 3, day: 29 }, 2, 'Europe/Berlin'), at('2026-03-29T01:00:00Z'));
    // Lord Howe moves by 30 minutes: 02:00 → 02:30.
    assert.equal(instantOfLocalHour({ year: 2026, month: 10, day: 4 }, 2, 'Australia/Lord_Howe'), at('2026-10-03T15:30:00Z'));
    // Santiago skips midnight: 00:00 → 01:00.
    assert.equal(instantOfLocalHour({ year: 2026, month: 9, day: 6 }, 0, 'America/Santiago'), at('2026-09-06T04:00:00Z'));
  });

  it('maps a repeated hour to its first occurrence', () => {
    assert.equal(instantOfLocalHour({ year: 2026, month: 11, day: 1 }, 1, 'America/New_York'), at('2026-11-01T05:00:00Z'));
    assert.equal(instantOfLocalHour({ year: 2026, month: 10, day: 25 }, 2, 'Europe/Berlin'), at('2026-10-25T00:00:00Z'));
    assert.equal(instantOfLocalHour({ year: 2026, month: 4, day: 4 }, 23, 'America/Santiago'), at('2026-04-05T02:00:00Z'));
  });

  it('has no instant on a calendar day the zone skipped', () => {
    assert.equal(instantOfLocalHour({ year: 2011, month: 12, day: 30 }, 4, 'Pacific/Apia'), null);
    // Around it, the previous day's boundary stays the most recent.
    assert.equal(mostRecentDailyBoundary(at('2011-12-30T13:00:00Z'), 4, 'Pacific/Apia'), at('2011-12-29T14:00:00Z'));
    assert.equal(nextDailyBoundary(at('2011-12-29T14:00:00Z'), 4, 'Pacific/Apia'), at('2011-12-30T14:00:00Z'));
  });
});

describe('daily boundaries over a year', () => {
  const zones = ['UTC', 'America/New_York', 'Europe/Berlin', 'Australia/Lord_Howe', 'Asia/Kolkata', 'America/Santiago', 'Pacific/Chatham'];
  const hours = [0, 1, 2, 3, 4, 23];

  it('most recent ≤ now < next, the boundary shows atHour (or is the jump past it), and days are 22–26 h apart', () => {
    const start = at('2026-01-01T00:00:00Z');
    for (const zone of zones) {
      for (const hour of hours) {
        for (let now = start; now < start + 366 * 24 * HOUR; now += 29 * HOUR + 17 * 60_000) {
          const recent = mostRecentDailyBoundary(now, hour, zone);
          const next = nextDailyBoundary(now, hour, zone);
          assert.ok(recent !== null && next !== null, `${zone} ${hour} ${now}`);
          assert.ok(recent <= now && now < next, `${zone} ${hour} ${new Date(now).toISOString()}`);
          assert.equal(nextDailyBoundary(recent, hour, zone), next, `${zone} ${hour}: nothing in between`);
          const gap = next - recent;
          assert.ok(gap >= 22 * HOUR && gap <= 26 * HOUR, `${zone} ${hour}: ${gap / HOUR} h`);
          // The wall clock reads exactly hour:00 there, or jumped over it at that very instant.
          const wallAt = wallClockMs(recent, zone);
          const day = new Date(wallAt);
          const target = Date.UTC(day.getUTCFullYear(), day.getUTCMonth(), day.getUTCDate(), hour);
          const exact = wallAt === target;
          const jumpedPast = wallAt > target && wallClockMs(recent - 1, zone) < target;
          assert.ok(exact || jumpedPast, `${zone} ${hour}: wall ${day.toISOString()} at ${new Date(recent).toISOString()}`);
        }
      }
    }
  });
});
