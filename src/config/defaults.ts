// The built-in default of every setting switchboard reads, in one table: readers in policy/,
// store/ and engine/ take their fallbacks from here, and `config show` prints it with sources.

import os from 'node:os';

export const DEFAULTS = {
  'agents.defaults.maxConcurrent': Math.max(8, 4 * os.availableParallelism()),
  'session.dmScope': 'main',
  'session.mainKey': 'main',
  'session.reset.mode': 'none',
  'session.reset.atHour': 4,
  'session.resetTriggers': ['/new', '/reset'],
  'session.writeLock.acquireTimeoutMs': 60_000,
  'session.writeLock.staleMs': 10_000,
  'session.sendPolicy.default': 'allow',
  'session.maintenance.mode': 'warn',
  'session.maintenance.pruneAfter': '30d',
  'session.maintenance.maxEntries': 500,
  'session.maintenance.rotateBytes': '10mb',
  'session.maintenance.maintainEvery': '1h',
  'messages.queue.mode': 'steer',
  'messages.queue.debounceMs': 500,
  'messages.queue.debounceMaxWaitMs': 30_000,
  'messages.queue.cap': 20,
  'messages.queue.drop': 'summarize',
  'cron.maxConcurrent': 8,
  'cron.sessionRetention': '24h',
} as const;

/** Settings whose default is derived from another value rather than a constant. */
export const DERIVED_DEFAULTS: Record<string, string> = {
  'session.writeLock.maxHoldMs': 'min(2^31-1, max(5 min, runner timeout + 2 min))',
  'session.maintenance.resetArchiveRetention': 'same as pruneAfter',
  'session.maintenance.maxDiskBytes': 'off',
  'session.maintenance.highWaterBytes': '80% of maxDiskBytes',
  'session.reset.timezone': 'the host time zone (TZ)',
  'agents.list': 'one agent "main"',
};
