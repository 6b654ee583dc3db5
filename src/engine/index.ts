// Public face of engine/: the ingest pipeline (route → plan → store → acknowledge) and the
// session operations the CLI and the server share.

export { type EngineContext, storeFor, knownAgentIds, transcriptPathIn, sessionLockOptions } from './context.js';
export { parseInboundMessage, parseMessageLine, type InboundMessage, type MessageKind } from './message.js';
export { ingestBatch, exitCodeFor, type IngestEvent, type ResultEvent, type ErrorEvent, type Disposition } from './ingest.js';
export { selectStores, listSessions, transcriptFileOf, tokenCountsOf, type StoreSelection, type SessionRow, type SessionListing } from './session-list.js';
export {
  findSession,
  showSession,
  resetSession,
  setPinned,
  deleteSession,
  type FoundSession,
  type SessionDetails,
  type ResetOutcome,
} from './sessions.js';
export { pinDeliveryRoute, type PinRouteOutcome } from './delivery-owner.js';
export { sessionHistory, instanceHistory, findInstance, type SessionHistory, type InstanceRecord, type FoundInstance } from './history.js';
export { sharedDmWarnings, routeSharedDmWarning } from './shared-dm.js';
export { explainInstanceAndTime, explainFully, explanationJson, type InstanceAndTime, type SessionSection, type FullExplanation } from './explain.js';
export {
  cleanupSessions,
  cleanupStore,
  cleanupSettingsFor,
  summarize as summarizeCleanup,
  isCleanupFailure,
  normalizeActiveKeys,
  type SessionCleanupOptions,
  type CleanupAction,
  type DiskBudgetSummary,
  type CleanupStoreSummary,
  type CleanupStoreFailure,
  type CleanupStoreResult,
  type CleanupReport,
} from './session-cleanup-run.js';
export { buildMaintenanceSnapshot, type BusyKeysProvider, type BuiltSnapshot, type EntryIdentity } from './cleanup-snapshot.js';
export { transcriptNameOf } from './session-artifacts.js';
export {
  applyCleanupPlan,
  removeEntries,
  type CleanupProgress,
  type RemovalCandidate,
  type RemovalOutcome,
  type ApplyOutcome,
} from './session-cleanup.js';
export {
  runMaintain,
  maintainEveryMs,
  purgeIncognitoArchives,
  type MaintainOptions,
  type MaintainReport,
  type MaintainResult,
  type MaintainStage,
  type MaintainError,
  type ReleasedLock,
  type ResetDone,
  type ResetDeferred,
  type CronRemoval,
} from './housekeeping.js';
export type { FinishedRotation } from './interrupted-rotations.js';
export { keepCapsOnWrite } from './cleanup-on-write.js';
export {
  runDoctor,
  type DoctorOptions,
  type DoctorReport,
  type DoctorStoreReport,
  type DoctorProblem,
  type DoctorProblemKind,
  type DoctorChange,
  type DoctorChangeAction,
} from './doctor/index.js';
export {
  configureQueue,
  waitForQueueWork,
  resumeOrphanedQueues,
  queueRuntimeFor,
  type QueueRuntime,
  type QueueOptions,
} from './runtime.js';
export {
  listQueue,
  showQueued,
  cancelQueued,
  abortSession,
  thisCanceller,
  queueBusyKeys,
  dropIncognitoQueues,
  type QueueListing,
  type QueueListItem,
  type QueueActiveRun,
  type QueueLookup,
  type CancelOutcome,
  type CancelRequest,
  type AbortOutcome,
} from './queue.js';
export {
  type QueueEvent,
  type ReplyEvent,
  type DroppedEvent,
  type DroppedReason,
  type CancelledBy,
  type ExpiredEvent,
  type RunFailedEvent,
  type OverflowEvent,
  type RunStartedEvent,
  type RunEndedEvent,
  type QueuedEntry,
  agentRunnerConfig,
  claimedByActiveRun,
} from './queue-state.js';
export { laneCapacity, laneDir, type LaneSlot } from './lanes.js';
