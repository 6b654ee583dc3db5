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
} from './reset.js';

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

export {
  planSessionMessage,
  rotateEntry,
  resetPolicyFor,
  messageIdSeenAt,
  forgetMessageId,
  type RecentMessageIds,
  DUPLICATE_WINDOW_MS,
  type PlannedEntry,
  type PlanMessage,
  type PlanMessageKind,
  type PlanContext,
  type SessionPlan,
  type RotationReason,
} from './session-plan.js';
