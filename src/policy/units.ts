// Durations (`90s`, `1m30s`, `30d`) and byte sizes (`10mb`) as written in config and directives,
// parsed into milliseconds and bytes with errors that name where the bad value came from.

import { SwitchboardError, type ErrorCode } from '../core/index.js';

const MS_PER_UNIT = {
  ms: 1,
  s: 1_000,
  m: 60_000,
  h: 3_600_000,
  d: 86_400_000,
} as const;

const BYTES_PER_UNIT = {
  b: 1,
  kb: 1024,
  mb: 1024 ** 2,
  gb: 1024 ** 3,
} as const;

// `12`, `1.5`, `.5` — no exponents, no hex: config values are written by people.
const NUMBER = String.raw`(?:\d+(?:\.\d+)?|\.\d+)`;
const BARE_NUMBER = new RegExp(`^([+-]?)(${NUMBER})$`);
// The lookahead stops a unit inside a longer word: `5ms` is never 5m plus a stray `s`, and `5min`
// is an error rather than five minutes.
const DURATION_PART = new RegExp(`(${NUMBER})\\s*(ms|s|m|h|d)(?![a-z])\\s*`, 'y');
const BYTE_SIZE = new RegExp(`^([+-]?)(${NUMBER})\\s*(b|kb|mb|gb)?$`);

function fail(code: ErrorCode, path: string, value: unknown, expected: string, hint: string): never {
  throw new SwitchboardError(code, `${path}: ${JSON.stringify(value)} is not ${expected}`, {
    hint,
    details: { path, value },
  });
}

function checkedResult(result: number, code: ErrorCode, path: string, value: unknown, expected: string, hint: string): number {
  if (!Number.isSafeInteger(result)) fail(code, path, value, `${expected} in range`, hint);
  // Math.round(-0.4) is -0; nobody wants to read "-0ms".
  return result === 0 ? 0 : result;
}

const DURATION_HINT = 'use milliseconds (500) or units ms, s, m, h, d, e.g. "90s", "1.5h" or "1m30s"';
const SIZE_HINT = 'use bytes (1048576) or units b, kb, mb, gb (1kb = 1024 b), e.g. "10mb"';

/**
 * CONFIG_INVALID for a setting at `path` whose value is not `expected`, quoting the value as
 * written: JSON5 reads `Infinity` and `NaN`, which JSON.stringify would show as null.
 */
export function configValueError(path: string, value: unknown, expected: string): never {
  const shown = typeof value === 'number' && !Number.isFinite(value) ? String(value) : (JSON.stringify(value) ?? String(value));
  throw new SwitchboardError('CONFIG_INVALID', `${path}: ${shown} is not ${expected}`, { details: { path, value } });
}

/**
 * Milliseconds from a number (taken as ms) or a string: a bare number (ms), or one or more
 * `<number><unit>` parts (units ms s m h d, decimals allowed) that are added up, so `1m30s` and
 * `1h 30m` work. Case-insensitive, surrounding whitespace ignored. A leading `-` is accepted and
 * gives a negative result: maintenance reads "0 or less" as "disabled", so rejecting it here would
 * turn a harmless setting into a config error. Results are rounded to whole milliseconds.
 */
export function parseDurationMs(value: string | number, path: string, code: ErrorCode = 'CONFIG_INVALID'): number {
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) fail(code, path, value, 'a duration', DURATION_HINT);
    return checkedResult(Math.round(value), code, path, value, 'a duration', DURATION_HINT);
  }
  if (typeof value !== 'string') fail(code, path, value, 'a duration', DURATION_HINT);
  const text = value.trim().toLowerCase();

  const bare = BARE_NUMBER.exec(text);
  if (bare) {
    const magnitude = Number(bare[2]);
    const signed = bare[1] === '-' ? -magnitude : magnitude;
    return checkedResult(Math.round(signed), code, path, value, 'a duration', DURATION_HINT);
  }

  let position = 0;
  let sign = 1;
  if (text.startsWith('-') || text.startsWith('+')) {
    sign = text.startsWith('-') ? -1 : 1;
    position = 1;
  }
  let total = 0;
  let parts = 0;
  while (position < text.length) {
    DURATION_PART.lastIndex = position;
    const part = DURATION_PART.exec(text);
    if (!part) fail(code, path, value, 'a duration', DURATION_HINT);
    total += Number(part[1]) * MS_PER_UNIT[part[2] as keyof typeof MS_PER_UNIT];
    position = DURATION_PART.lastIndex;
    parts += 1;
  }
  if (parts === 0) fail(code, path, value, 'a duration', DURATION_HINT);
  return checkedResult(Math.round(sign * total), code, path, value, 'a duration', DURATION_HINT);
}

/**
 * Bytes from a number (taken as bytes) or a string `<number>[unit]` with units b, kb, mb, gb
 * (binary: 1kb = 1024 b), decimals allowed, case-insensitive. As with durations a leading `-` is
 * accepted (budgets of 0 or less mean "disabled"). Results are rounded to whole bytes.
 */
export function parseByteSize(value: string | number, path: string, code: ErrorCode = 'CONFIG_INVALID'): number {
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) fail(code, path, value, 'a size', SIZE_HINT);
    return checkedResult(Math.round(value), code, path, value, 'a size', SIZE_HINT);
  }
  if (typeof value !== 'string') fail(code, path, value, 'a size', SIZE_HINT);
  const match = BYTE_SIZE.exec(value.trim().toLowerCase());
  if (!match) fail(code, path, value, 'a size', SIZE_HINT);
  const unit = (match[3] ?? 'b') as keyof typeof BYTES_PER_UNIT;
  const magnitude = Number(match[2]) * BYTES_PER_UNIT[unit];
  return checkedResult(Math.round(match[1] === '-' ? -magnitude : magnitude), code, path, value, 'a size', SIZE_HINT);
}

export interface FormatDurationOptions {
  /** Keep at most this many non-zero parts, largest first (`3d4h` instead of `3d4h12m5s`). */
  maxParts?: number;
}

/**
 * `5400000` → `1h30m`, `1500` → `1s500ms`, `0` → `0ms`. The output uses the config syntax, so
 * (without maxParts) parseDurationMs reads it back to the same number.
 */
export function formatDurationMs(ms: number, options: FormatDurationOptions = {}): string {
  if (!Number.isFinite(ms)) return String(ms);
  let rest = Math.abs(Math.round(ms));
  if (rest === 0) return '0ms';
  const maxParts = Math.max(1, Math.floor(options.maxParts ?? Number.POSITIVE_INFINITY));
  const parts: string[] = [];
  for (const unit of ['d', 'h', 'm', 's', 'ms'] as const) {
    const size = MS_PER_UNIT[unit];
    const count = Math.floor(rest / size);
    rest -= count * size;
    if (count > 0 && parts.length < maxParts) parts.push(`${count}${unit}`);
  }
  return (ms < 0 ? '-' : '') + parts.join('');
}

/** `10485760` → `10mb`, `1536` → `1.5kb`, `100` → `100b` (two decimals at most). */
export function formatByteSize(bytes: number): string {
  if (!Number.isFinite(bytes)) return String(bytes);
  const magnitude = Math.abs(bytes);
  for (const unit of ['gb', 'mb', 'kb'] as const) {
    const size = BYTES_PER_UNIT[unit];
    if (magnitude >= size) {
      const value = Math.round((magnitude / size) * 100) / 100;
      return `${bytes < 0 ? '-' : ''}${value}${unit}`;
    }
  }
  return `${Math.round(bytes)}b`;
}
