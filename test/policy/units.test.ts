// Tests of duration and size parsing: every unit, decimals, composites, signs, and the errors
// (code, exit code, path) for values that are not durations or sizes.

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { SwitchboardError } from '../../src/core/index.js';
import { formatByteSize, formatDurationMs, parseByteSize, parseDurationMs } from '../../src/policy/index.js';

function assertRejected(action: () => unknown, code: string, exitCode: number, path: string): void {
  assert.throws(action, (error: unknown) => {
    assert.ok(error instanceof SwitchboardError);
    assert.equal(error.code, code);
    assert.equal(error.exitCode, exitCode);
    assert.equal(error.details?.path, path);
    assert.ok(error.message.includes(path), 'the message names the path');
    return true;
  });
}

describe('parseDurationMs', () => {
  it('reads a bare number (number or string) as milliseconds', () => {
    assert.equal(parseDurationMs(500, 'p'), 500);
    assert.equal(parseDurationMs('500', 'p'), 500);
    assert.equal(parseDurationMs('0', 'p'), 0);
    assert.equal(parseDurationMs(' 42 ', 'p'), 42);
  });

  it('knows every unit', () => {
    assert.equal(parseDurationMs('7ms', 'p'), 7);
    assert.equal(parseDurationMs('7s', 'p'), 7_000);
    assert.equal(parseDurationMs('7m', 'p'), 420_000);
    assert.equal(parseDurationMs('7h', 'p'), 25_200_000);
    assert.equal(parseDurationMs('7d', 'p'), 604_800_000);
  });

  it('never reads ms as minutes', () => {
    assert.equal(parseDurationMs('5ms', 'p'), 5);
    assert.equal(parseDurationMs('5m', 'p'), 300_000);
  });

  it('accepts decimals and rounds to whole milliseconds', () => {
    assert.equal(parseDurationMs('1.5h', 'p'), 5_400_000);
    assert.equal(parseDurationMs('.5s', 'p'), 500);
    assert.equal(parseDurationMs('0.25m', 'p'), 15_000);
    assert.equal(parseDurationMs('1.6', 'p'), 2);
    assert.equal(parseDurationMs(2.4, 'p'), 2);
    assert.equal(parseDurationMs('1.0004s', 'p'), 1_000);
  });

  it('adds up composites, with or without spaces', () => {
    assert.equal(parseDurationMs('1m30s', 'p'), 90_000);
    assert.equal(parseDurationMs('1h 30m', 'p'), 5_400_000);
    assert.equal(parseDurationMs('1d2h3m4s5ms', 'p'), 93_784_005);
    assert.equal(parseDurationMs('1.5m30s', 'p'), 120_000);
    assert.equal(parseDurationMs('2 h', 'p'), 7_200_000);
  });

  it('is case-insensitive and trims', () => {
    assert.equal(parseDurationMs('2H', 'p'), 7_200_000);
    assert.equal(parseDurationMs(' 5MS ', 'p'), 5);
    assert.equal(parseDurationMs('\t1M30S\n', 'p'), 90_000);
  });

  it('keeps a sign so that "0 or less = disabled" settings can be written', () => {
    assert.equal(parseDurationMs('-1d', 'p'), -86_400_000);
    assert.equal(parseDurationMs('-5', 'p'), -5);
    assert.equal(parseDurationMs('+2s', 'p'), 2_000);
    assert.ok(Object.is(parseDurationMs('-0', 'p'), 0));
    assert.ok(Object.is(parseDurationMs('-0.2', 'p'), 0));
  });

  it('rejects what is not a duration with CONFIG_INVALID naming the path', () => {
    const bad: unknown[] = [
      '', '   ', 'abc', '5x', '5min', '1h30', '1..5s', 's', '--5', '5 5s', '1e3', '0x10', 'm5',
      Number.NaN, Number.POSITIVE_INFINITY, true, null, {}, [], '99999999999999999999d',
    ];
    for (const value of bad) {
      assertRejected(() => parseDurationMs(value as string, 'session.maintenance.pruneAfter'), 'CONFIG_INVALID', 78,
        'session.maintenance.pruneAfter');
    }
  });

  it('uses the error code the caller passes', () => {
    assertRejected(() => parseDurationMs('soon', 'debounce', 'BAD_INPUT'), 'BAD_INPUT', 65, 'debounce');
  });
});

describe('parseByteSize', () => {
  it('reads bare numbers as bytes', () => {
    assert.equal(parseByteSize(100, 'p'), 100);
    assert.equal(parseByteSize('100', 'p'), 100);
  });

  it('knows b, kb, mb, gb as binary units', () => {
    assert.equal(parseByteSize('5b', 'p'), 5);
    assert.equal(parseByteSize('1kb', 'p'), 1024);
    assert.equal(parseByteSize('10mb', 'p'), 10_485_760);
    assert.equal(parseByteSize('2gb', 'p'), 2_147_483_648);
  });

  it('accepts decimals, case, spaces and a sign', () => {
    assert.equal(parseByteSize('1.5kb', 'p'), 1536);
    assert.equal(parseByteSize(' 10 MB ', 'p'), 10_485_760);
    assert.equal(parseByteSize('0.1kb', 'p'), 102);
    assert.equal(parseByteSize('-1mb', 'p'), -1_048_576);
  });

  it('rejects what is not a size', () => {
    for (const value of ['', 'kb', '10tb', '1k', '1 k b', '-', 'ten', '1kb2', Number.NaN, false] as unknown[]) {
      assertRejected(() => parseByteSize(value as string, 'session.maintenance.rotateBytes'), 'CONFIG_INVALID', 78,
        'session.maintenance.rotateBytes');
    }
    assertRejected(() => parseByteSize('huge', 'size', 'USAGE'), 'USAGE', 2, 'size');
  });
});

describe('formatDurationMs', () => {
  it('writes composites in config syntax, largest unit first', () => {
    assert.equal(formatDurationMs(0), '0ms');
    assert.equal(formatDurationMs(500), '500ms');
    assert.equal(formatDurationMs(1_500), '1s500ms');
    assert.equal(formatDurationMs(90_000), '1m30s');
    assert.equal(formatDurationMs(5_400_000), '1h30m');
    assert.equal(formatDurationMs(86_400_000), '1d');
    assert.equal(formatDurationMs(-90_000), '-1m30s');
  });

  it('round-trips through parseDurationMs', () => {
    for (const ms of [0, 1, 999, 1_000, 61_001, 3_599_999, 86_400_001, 1_234_567_890, -42]) {
      assert.equal(parseDurationMs(formatDurationMs(ms), 'p'), ms);
    }
  });

  it('can shorten to the largest parts', () => {
    assert.equal(formatDurationMs(93_784_005, { maxParts: 2 }), '1d2h');
    assert.equal(formatDurationMs(90_000, { maxParts: 1 }), '1m');
  });
});

describe('formatByteSize', () => {
  it('picks the largest unit with at most two decimals', () => {
    assert.equal(formatByteSize(100), '100b');
    assert.equal(formatByteSize(1536), '1.5kb');
    assert.equal(formatByteSize(10_485_760), '10mb');
    assert.equal(formatByteSize(3 * 1024 ** 3), '3gb');
  });
});
