// Maintenance settings (store.md "Maintenance"): `session.maintenance` with its defaults, and the
// schedules of `maintain` and cron retention; bad values are CONFIG_INVALID naming the config path.

import type { SessionConfig, SwitchboardConfig } from '../config/types.js';
import { configValueError, parseByteSize, parseDurationMs } from './units.js';

export type MaintenanceMode = 'warn' | 'enforce';

/** Rotated copies of the store file that are kept (`sessions.json.bak.<ms>`). */
export const ROTATE_KEEP = 3;
export const DEFAULT_PRUNE_AFTER = '30d';
export const DEFAULT_MAX_ENTRIES = 500;
export const DEFAULT_ROTATE_BYTES = '10mb';
export const DEFAULT_CRON_SESSION_RETENTION = '24h';
/** highWaterBytes defaults to this share of maxDiskBytes. */
export const DEFAULT_HIGH_WATER_RATIO = 0.8;

/**
 * Resolved settings. Every limit is `null` when disabled: unset-with-no-default, `false`, or a
 * value of 0 or less — which never means "delete everything".
 */
export interface MaintenanceSettings {
  mode: MaintenanceMode;
  pruneAfterMs: number | null;
  maxEntries: number | null;
  rotateBytes: number | null;
  rotateKeep: number;
  resetArchiveRetentionMs: number | null;
  maxDiskBytes: number | null;
  /** The level the disk budget cleans down to (≤ maxDiskBytes); null when the budget is off. */
  highWaterBytes: number | null;
}

export type MaintenanceConfig = NonNullable<SessionConfig['maintenance']>;

const BASE_PATH = 'session.maintenance';


/** null for "unset" (undefined or null). */
function isUnset(value: unknown): value is undefined | null {
  return value === undefined || value === null;
}

/** ≤ 0 means disabled, whatever the setting. */
function positiveOrNull(value: number): number | null {
  return value > 0 ? value : null;
}

/** A duration or size setting: `false` or ≤ 0 disables it, unset takes the fallback. */
function readAmount(value: unknown, fallback: string | number | null, path: string, parse: (text: string | number, path: string) => number, example: string): number | null {
  if (value === false) return null;
  const chosen = isUnset(value) ? fallback : value;
  if (chosen === null) return null;
  if (typeof chosen !== 'string' && typeof chosen !== 'number') configValueError(path, chosen, `${example} or false`);
  return positiveOrNull(parse(chosen, path));
}

function readDuration(value: unknown, fallback: string | number | null, path: string): number | null {
  return readAmount(value, fallback, path, parseDurationMs, 'a duration (e.g. "30d")');
}

function readSize(value: unknown, fallback: string | number | null, path: string): number | null {
  return readAmount(value, fallback, path, parseByteSize, 'a size (e.g. "10mb")');
}

function readCount(value: unknown, fallback: number, path: string): number | null {
  if (value === false) return null;
  const chosen = isUnset(value) ? fallback : value;
  let count: number;
  if (typeof chosen === 'number') count = chosen;
  else if (typeof chosen === 'string' && /^\s*[+-]?\d+(?:\.\d+)?\s*$/.test(chosen)) count = Number(chosen);
  else configValueError(path, chosen, 'a number of entries');
  if (!Number.isFinite(count)) configValueError(path, chosen, 'a finite number of entries');
  return positiveOrNull(Math.floor(count));
}

/**
 * `session.maintenance` with defaults: mode warn, pruneAfter 30d, maxEntries 500, rotateBytes
 * 10mb (keeping 3 rotated copies), resetArchiveRetention = pruneAfter (`false` keeps archives
 * forever), maxDiskBytes off, highWaterBytes 80% of maxDiskBytes. Bad values are CONFIG_INVALID
 * naming the config path; values of 0 or less switch that limit off.
 */
export function resolveMaintenanceSettings(config: MaintenanceConfig | undefined | null): MaintenanceSettings {
  if (!isUnset(config) && (typeof config !== 'object' || Array.isArray(config))) configValueError(BASE_PATH, config, 'an object');
  const raw = (config ?? {}) as Record<string, unknown>;

  let mode: MaintenanceMode = 'warn';
  if (!isUnset(raw.mode)) {
    const text = typeof raw.mode === 'string' ? raw.mode.trim().toLowerCase() : raw.mode;
    if (text !== 'warn' && text !== 'enforce') configValueError(`${BASE_PATH}.mode`, raw.mode, 'one of warn, enforce');
    mode = text;
  }

  const pruneAfterMs = readDuration(raw.pruneAfter, DEFAULT_PRUNE_AFTER, `${BASE_PATH}.pruneAfter`);
  const maxEntries = readCount(raw.maxEntries, DEFAULT_MAX_ENTRIES, `${BASE_PATH}.maxEntries`);
  const rotateBytes = readSize(raw.rotateBytes, DEFAULT_ROTATE_BYTES, `${BASE_PATH}.rotateBytes`);
  // "= pruneAfter": when pruning is off, archives are kept forever too (the safe reading).
  const resetArchiveRetentionMs = isUnset(raw.resetArchiveRetention)
    ? pruneAfterMs
    : readDuration(raw.resetArchiveRetention, null, `${BASE_PATH}.resetArchiveRetention`);
  const maxDiskBytes = readSize(raw.maxDiskBytes, null, `${BASE_PATH}.maxDiskBytes`);

  let highWaterBytes: number | null = null;
  // Validated even while the budget is off, so a typo is reported before it matters.
  const configuredHighWater = readSize(raw.highWaterBytes, null, `${BASE_PATH}.highWaterBytes`);
  if (maxDiskBytes !== null) {
    const explicit = !isUnset(raw.highWaterBytes);
    // An explicit high water of 0 or less (or false) disables the hysteresis: clean down to maxDiskBytes.
    const wanted = explicit ? (configuredHighWater ?? maxDiskBytes) : Math.floor(maxDiskBytes * DEFAULT_HIGH_WATER_RATIO);
    highWaterBytes = Math.max(1, Math.min(maxDiskBytes, wanted));
  }

  return { mode, pruneAfterMs, maxEntries, rotateBytes, rotateKeep: ROTATE_KEEP, resetArchiveRetentionMs, maxDiskBytes, highWaterBytes };
}

export const DEFAULT_MAINTAIN_EVERY = '1h';

/** `session.maintenance.maintainEvery` (default 1h): how often `serve` runs `maintain`; null = off. */
export function resolveMaintainEveryMs(config: MaintenanceConfig | undefined | null): number | null {
  const raw = (config ?? {}) as Record<string, unknown>;
  return readDuration(raw.maintainEvery, DEFAULT_MAINTAIN_EVERY, `${BASE_PATH}.maintainEvery`);
}

/** `cron.sessionRetention` (default 24h); `false` or 0 or less disables it (null). */
export function resolveCronRetentionMs(cron: SwitchboardConfig['cron'] | undefined | null): number | null {
  return readDuration(cron?.sessionRetention, DEFAULT_CRON_SESSION_RETENTION, 'cron.sessionRetention');
}
