// Public face of core/: errors, the injected clock, id normalisation and shared types.
// core/ imports nothing else in the project.

export * from './errors.js';
export * from './clock.js';
export * from './ids.js';
export * from './ndjson.js';
export * from './state-dir.js';
export { inPool } from './pool.js';
export { MAX_TIMER_MS, timerDelay } from './timers.js';
export { nodeCrypto, sha256Base64url } from './digest.js';
export { newUuid } from './uuid.js';
export { DUPLICATE_WINDOW_MS, RECENT_IDS_CAP, RECENT_ID_MAX_CHARS, duplicateKey, legacyIdKey, mergeRecentIds, readRecentIds, recentIdLine, withoutRecentIds, writeRecentIds, type DuplicateRoute, type RecentId } from './recent-ids.js';
export { packageRoot } from './package-root.js';
export { describeFileKind, fileKindOf, type FileKind } from './file-kind.js';
export { isProcessAlive, killProcessSession, readProcStat, thisProcessStartTicks, type ProcStat } from './processes.js';
