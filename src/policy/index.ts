// Public face of policy/: the pure decisions about time and delivery — reset freshness and
// triggers, queue settings and the `/queue` directive, send policy, durations and sizes.

export {
  parseDurationMs,
  parseByteSize,
  formatDurationMs,
  formatByteSize,
  type FormatDurationOptions,
} from './units.js';

export {
  sessionTypeFor,
  resolveResetPolicy,
  validateResetConfig,
  evaluateFreshness,
  resolveResetTriggers,
  parseResetTrigger,
  DEFAULT_RESET_AT_HOUR,
  DEFAULT_RESET_TRIGGERS,
  type SessionType,
  type SessionTypeInput,
  type StaleReason,
  type ResetPolicy,
  type ResetPolicySource,
  type ResetScope,
  type SessionTimes,
  type Freshness,
  type ResetTrigger,
  type ResetTriggerOptions,
  resolveBeforeReset,
  DEFAULT_BEFORE_RESET_PROMPT,
  DEFAULT_BEFORE_RESET_TIMEOUT_SECONDS,
  type BeforeResetSettings,
} from './reset.js';

export { displayTimeZone, formatInstant } from './display-time.js';

export {
  isValidTimeZone,
  hostTimeZone,
  mostRecentDailyBoundary,
  nextDailyBoundary,
  instantOfLocalHour,
  type CalendarDate,
} from './zoned-time.js';

export {
  evaluateSendPolicy,
  type SendDecision,
  type SendPolicySource,
  type SendPolicyInput,
  type SendPolicyConfig,
  type SendPolicyDecision,
} from './send-policy.js';

export {
  normalizeQueueMode,
  normalizeDropPolicy,
  parseQueueDirective,
  resolveQueueSettings,
  queueConfigWarnings,
  applyQueueDirective,
  describeQueueSettings,
  DEFAULT_QUEUE_MODE,
  DEFAULT_DEBOUNCE_MS,
  DEFAULT_DEBOUNCE_MAX_WAIT_MS,
  DEFAULT_QUEUE_CAP,
  DEFAULT_DROP_POLICY,
  type QueueMode,
  type DropPolicy,
  type QueueDirective,
  type MessageQueueOptions,
  type SessionQueueOverride,
  type QueueSettingSource,
  type QueueSettings,
  type QueueSettingsInput,
} from './queue-settings.js';

export { DUPLICATE_WINDOW_MS, RECENT_IDS_CAP, duplicateKeySeenAt, forgetDuplicateKey } from './duplicate-memory.js';

export {
  planSessionMessage,
  rotateEntry,
  resetPolicyFor,
  deliveryTarget,
  setDeliveryAddress,
  messageAddress,
  planDelivery,
  isOwnerMessage,
  type DeliveryAddress,
  type DeliveryOwner,
  type DeliveryPlan,
  type PlannedEntry,
  type PlanMessage,
  type PlanMessageKind,
  type PlanContext,
  type SessionPlan,
  type RotationReason,
} from './session-plan.js';

export {
  resolveMaintenanceSettings,
  resolveCronRetentionMs,
  resolveMaintainEveryMs,
  ROTATE_KEEP,
  DEFAULT_PRUNE_AFTER,
  DEFAULT_MAX_ENTRIES,
  DEFAULT_ROTATE_BYTES,
  DEFAULT_CRON_SESSION_RETENTION,
  DEFAULT_HIGH_WATER_RATIO,
  type MaintenanceMode,
  type MaintenanceSettings,
  type MaintenanceConfig,
} from './maintenance-settings.js';

export {
  planCleanup,
  type ProtectionReason,
  type TranscriptSnapshot,
  type EntrySnapshot,
  type ArchiveSnapshot,
  type UnreferencedFileSnapshot,
  type StoreBackupSnapshot,
  type ProtectedKey,
  type MaintenanceSnapshot,
  type CleanupOptions,
  type SessionAction,
  type PlannedSession,
  type BudgetRemoval,
  type CleanupStep,
  type DiskBudgetPlan,
  type CleanupPlan,
} from './maintenance.js';

export {
  planDueResets,
  planCronRetention,
  dueResetOf,
  resetRouteOf,
  isCronSessionKey,
  snapshotWithoutEntries,
  type ResetCandidate,
  type DueReset,
} from './maintain-plan.js';

export {
  planAdmission,
  sameDeliveryRoute,
  enqueueItem,
  planNextTurn,
  splitByInstance,
  parkedPrefix,
  unparkAll,
  orphanItems,
  carriedOf,
  waitingItems,
  isBusy,
  type QueueDisposition,
  type AdmissionInput,
  type Admission,
  type DroppedItem,
  type TurnPlan,
} from './queue-plan.js';
export {
  type QueueItem,
  type QueueItemState,
  type QueueItemKind,
  type QueueDeliveryContext,
  type ProcessRef,
  type LaneName,
  type ActiveRunRecord,
  type CarriedMessage,
  type QueueOwnerRecord,
  type PendingReset,
  type PendingResetReason,
  type OutboxItem,
} from './queue-records.js';
export { summaryLine, overflowPrompt, collectPrompt, senderLabel, singleSender, COLLECT_HEADER, SUMMARY_MAX_CHARS } from './queue-prompts.js';
export { parseControlCommand, describeSendSetting, type SendSetting, type ControlCommand } from './control-command.js';
export { applyUsageReport, carryOverToNewInstance, isAddressField, type UsageReport } from './usage.js';
export { applyMessageLabels, type LabelledMessage } from './entry-labels.js';
export { DM_SENDERS_KEPT, describeDmSender, noteDmSender, sharedDmWarning, type DmSender, type DmMessage, type SharedDmWarning } from './shared-dm.js';
