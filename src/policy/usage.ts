// What a runner's `usage` report does to the session entry, in OpenClaw's field names (model,
// modelProvider, inputTokens, outputTokens, totalTokens, totalTokensFresh, contextTokens), and
// what of an entry a new instance at the same address keeps (carryOverToNewInstance). Pure.

import { parseSessionKey } from '../routing/index.js';

/** A runner's usage report (the protocol's `usage` event); every field optional. */
export interface UsageReport {
  model?: string;
  provider?: string;
  inputTokens?: number;
  outputTokens?: number;
  totalTokens?: number;
  contextTokens?: number;
}

/**
 * Applies a report to an entry (the latest report wins, as OpenClaw keeps the latest run's
 * figures): `totalTokens` is the context in use, so it is marked fresh (`totalTokensFresh`);
 * `contextTokens` is the model's window. Fields the report leaves out are kept. Returns whether
 * anything changed.
 */
export function applyUsageReport(entry: Record<string, unknown>, report: UsageReport): boolean {
  const before = JSON.stringify(entry);
  if (report.model !== undefined) entry.model = report.model;
  if (report.provider !== undefined) entry.modelProvider = report.provider;
  if (report.inputTokens !== undefined) entry.inputTokens = report.inputTokens;
  if (report.outputTokens !== undefined) entry.outputTokens = report.outputTokens;
  if (report.totalTokens !== undefined) {
    entry.totalTokens = report.totalTokens;
    entry.totalTokensFresh = true;
  }
  if (report.contextTokens !== undefined) entry.contextTokens = report.contextTokens;
  return JSON.stringify(entry) !== before;
}

/**
 * What a new instance keeps of the entry, beside the model selection (below): the address's
 * settings, labels and delivery, switchboard's bookkeeping of the address, and the fields
 * OpenClaw's own reset keeps. Everything else — the old instance's usage, model, run status, the
 * CLI backend's conversation, and fields nobody names here — stays with the old instance. A
 * list rather than a list of what goes: OpenClaw's reset builds its new entry from a fixed list
 * too (2026.7.1 `sessions.reset` buildNextEntry, and the reply pipeline's new-session entry), so a
 * field of its own that it does not name is per-instance state, and carrying it over would resume
 * what the reset ended (docs/decisions.md "Sessions and resets").
 */
const KEPT_BY_NEW_INSTANCE: ReadonlySet<string> = new Set([
  // The instance itself: the caller sets it anew.
  'sessionId', 'sessionFile', 'updatedAt', 'sessionStartedAt', 'lastInteractionAt',
  // Labels and the address (switchboard's and OpenClaw's copies of it).
  'chatType', 'channel', 'accountId', 'displayName', 'subject', 'space', 'label', 'groupId', 'groupChannel',
  'origin', 'deliveryContext', 'deliveryOwner', 'lastChannel', 'lastTo', 'lastAccountId', 'lastThreadId', 'route',
  // Settings of the address.
  'queueMode', 'queueDebounceMs', 'queueCap', 'queueDrop', 'sendPolicy', 'pinned', 'pinnedAt', 'incognito',
  // Lineage.
  'parentSessionKey', 'spawnDepth', 'spawnedBy', 'spawnedWorkspaceDir', 'spawnedCwd', 'forkedFromParent', 'subagentRole', 'subagentControlScope',
  // switchboard's bookkeeping: duplicate memory, DM senders, and the queue (the rotation's caller expires what waited for the old instance).
  'recentMessageIds', 'dmSenders', 'queue', 'activeRun', 'queueOwner', 'abortRequested', 'stopRequested', 'stopReason', 'pendingReset', 'cancelledItems', 'outbox',
  // The compaction checkpoints OpenClaw's reset command keeps: they name the checkpoint copies,
  // which nothing removes while listed (engine/session-artifacts.ts); dropped, the disk budget could
  // delete history OpenClaw restores from. Keeping costs bytes only.
  'compactionCheckpoints',
  // OpenClaw's per-address preferences its reset keeps (2026.7.1; the later ones of 2026.9.6's reset too).
  'thinkingLevel', 'fastMode', 'verboseLevel', 'traceLevel', 'reasoningLevel', 'elevatedLevel', 'ttsAuto', 'responseUsage',
  'execHost', 'execSecurity', 'execAsk', 'execNode', 'execCwd', 'groupActivation', 'groupActivationNeedsSystemIntro',
  'usageFamilyKey', 'usageFamilySessionIds', 'contextWindow', 'toolOverrides', 'completionOwnerSessionKey',
  'inheritedToolPolicyVersion', 'inheritedToolAllow', 'inheritedToolDeny', 'sessionRoot', 'permissionMode', 'sandboxMode',
  'worktree', 'repositoryWorkspaceId', 'parentSessionId', 'createdVia', 'createdActor', 'createdAt', 'projectId', 'sandbox',
  'forkSource', 'autoLabel', 'icon', 'category', 'boardFace', 'boardPresentation', 'visibility', 'delivery', 'pendingDeliveryNotice', 'pluginOwnerId',
]);

/**
 * Whether `field` describes the address rather than one instance: a new instance keeps it (the
 * instance's clocks and names among them, which the caller sets anew). Every other field is the
 * instance's own, dropped or reset by carryOverToNewInstance — and kept as it is while a rotation
 * waits for an active run (admission's keepInstance), since until then the instance is the old one.
 */
export function isAddressField(field: string): boolean {
  return KEPT_BY_NEW_INSTANCE.has(field);
}

/** OpenClaw's run flags of an instance: a new one starts with them false (when the entry has them at all). */
const RESET_TO_FALSE = ['systemSent', 'abortedLastRun'] as const;

/** The usage fields of an instance: runner reports (applyUsageReport) and OpenClaw's runs write them. */
const USAGE_FIELDS = ['inputTokens', 'outputTokens', 'totalTokens', 'totalTokensFresh', 'totalTokensVersion', 'contextTokens'] as const;

/**
 * The usage a new instance starts with, as OpenClaw's reset writes it (2026.9.6 sessions.reset and
 * reply pipeline alike; 2026.7.1 without the version): nothing used yet — a known 0, marked fresh
 * (`totalTokensVersion: 1` is what 2026.9.6 requires beside `totalTokensFresh` to trust the count) —
 * rather than no count at all, which OpenClaw reads as unknown. `contextTokens` (the old model's
 * window) goes. The reply pipeline leaves `inputTokens`/`outputTokens` out where sessions.reset
 * writes 0; OpenClaw reads both as no usage.
 */
const NEW_INSTANCE_USAGE = { inputTokens: 0, outputTokens: 0, totalTokens: 0, totalTokensFresh: true, totalTokensVersion: 1 } as const;

const nonBlank = (value: unknown): value is string => typeof value === 'string' && value.trim() !== '';

/**
 * The model and auth-profile choice a new instance keeps — only one the user made (OpenClaw's
 * resolveResetPreservedSelection): an override marked `user`, or unmarked (as switchboard's
 * `/new <model>` writes it) unless OpenClaw recorded it as an automatic fallback; an auth profile
 * marked `user`. The model of the new instance is then the override, else unknown until it runs.
 */
function preservedSelection(entry: Record<string, unknown>): Record<string, unknown> {
  const kept: Record<string, unknown> = {};
  const source = entry.modelOverrideSource;
  const fellBack = (nonBlank(entry.providerOverride) || nonBlank(entry.modelOverride)) && nonBlank(entry.modelOverrideFallbackOriginProvider) && nonBlank(entry.modelOverrideFallbackOriginModel);
  if (nonBlank(entry.modelOverride) && (source === 'user' || (source === undefined && !fellBack))) {
    kept.modelOverride = kept.model = entry.modelOverride;
    if (entry.providerOverride !== undefined) kept.providerOverride = kept.modelProvider = entry.providerOverride;
    if (source !== undefined) kept.modelOverrideSource = source;
  }
  if (entry.authProfileOverrideSource === 'user' && nonBlank(entry.authProfileOverride)) {
    kept.authProfileOverride = entry.authProfileOverride;
    kept.authProfileOverrideSource = 'user';
    if (entry.authProfileOverrideCompactionCount !== undefined) kept.authProfileOverrideCompactionCount = entry.authProfileOverrideCompactionCount;
  }
  return kept;
}

/** The CLI backend's conversation with the agent (OpenClaw's claude-cli, codex-cli … backends). */
const CLI_SESSION_FIELDS = ['cliSessionBindings', 'cliSessionIds', 'claudeCliSessionId'] as const;

/** The new instance a rotation starts: at which address, why (a reset_notice reason, or `cron`), under which id. */
export interface NewInstance {
  sessionKey: string;
  reason: string;
  sessionId: string;
}

/** `agent:<id>:subagent:…`, a session OpenClaw spawned for a subagent (its isSubagentSessionKey). */
function isSubagentKey(sessionKey: string): boolean {
  try {
    return parseSessionKey(sessionKey).kind === 'subagent';
  } catch {
    return false;
  }
}

/**
 * Whether the new instance keeps the CLI backend's conversation: only when a subagent session is
 * reset on request (`/new`, `/reset`, `sessions reset`). OpenClaw runs subagents through its
 * gateway's agent method, whose reset (sessions.reset, 2026.7.1 and 2026.9.6 alike) keeps a
 * subagent's native CLI conversation and clears every other key's; an expiry (daily, idle, its
 * agent rollover) and the reply pipeline of channel messages clear it on every key.
 */
function keepsCliSessions(next: NewInstance): boolean {
  return next.reason === 'command' && isSubagentKey(next.sessionKey);
}

const SHA256_HEX = /^[a-f0-9]{64}$/;
const trimmedOrUndefined = (value: unknown): string | undefined => (typeof value === 'string' && value.trim() !== '' ? value.trim() : undefined);

/**
 * The CLI bindings a kept conversation goes on with: a reseed receipt of a turn whose user row was
 * `omitted` from the old transcript now belongs to the new instance (`localSessionId` = its id),
 * as OpenClaw's reset re-owns it (rebindCliSessionReseedReceiptsForReset); a `persisted` one stays
 * the old instance's, whose transcript holds that row. A receipt OpenClaw would not read (not
 * version 1, no sha-256 prompt hash, no owner, another disposition) is left as it is.
 */
function rebindReseedReceipts(bindings: unknown, sessionId: string): unknown {
  if (bindings === null || typeof bindings !== 'object' || Array.isArray(bindings)) return bindings;
  let rebound: Record<string, unknown> | undefined;
  for (const [provider, binding] of Object.entries(bindings as Record<string, unknown>)) {
    if (binding === null || typeof binding !== 'object') continue;
    const receipt = (binding as { reseedReceipt?: Record<string, unknown> | null }).reseedReceipt;
    if (receipt === null || typeof receipt !== 'object') continue;
    const promptHash = trimmedOrUndefined(receipt.promptHash);
    const valid = receipt.version === 1 && promptHash !== undefined && SHA256_HEX.test(promptHash) && trimmedOrUndefined(receipt.localSessionId) !== undefined;
    if (!valid || receipt.userTurnDisposition !== 'omitted') continue;
    rebound ??= { ...(bindings as Record<string, unknown>) };
    rebound[provider] = { ...binding, reseedReceipt: { version: 1, promptHash, localSessionId: sessionId, userTurnDisposition: 'omitted' } };
  }
  return rebound ?? bindings;
}

/**
 * Turns `entry` (in place) into the start of the new instance `next` at its address, as OpenClaw's
 * reset does: the fields above and the user's model choice stay; `systemSent` and `abortedLastRun`
 * become false, `compactionCount` 0 and the token counts 0 (NEW_INSTANCE_USAGE) — each where the
 * entry has them, so an entry without them gains nothing; everything else goes — the old
 * instance's context window, model and provider, run status and times, and the CLI backend's
 * session (`cliSessionBindings`, `cliSessionIds`, `claudeCliSessionId`: OpenClaw would resume the
 * old conversation), except where keepsCliSessions says the new instance goes on with it. The
 * caller gives it its new id, file and clocks.
 */
export function carryOverToNewInstance(entry: Record<string, unknown>, next: NewInstance): void {
  const cli = keepsCliSessions(next) ? CLI_SESSION_FIELDS.filter((field) => entry[field] !== undefined).map((field) => [field, entry[field]] as const) : [];
  const selection = preservedSelection(entry);
  const flags = RESET_TO_FALSE.filter((field) => entry[field] !== undefined);
  const compacted = entry.compactionCount !== undefined;
  const counted = USAGE_FIELDS.some((field) => entry[field] !== undefined);
  for (const field of Object.keys(entry)) if (!KEPT_BY_NEW_INSTANCE.has(field)) delete entry[field];
  Object.assign(entry, selection);
  for (const field of flags) entry[field] = false;
  if (compacted) entry.compactionCount = 0;
  if (counted) Object.assign(entry, NEW_INSTANCE_USAGE);
  for (const [field, value] of cli) entry[field] = field === 'cliSessionBindings' ? rebindReseedReceipts(value, next.sessionId) : value;
}
