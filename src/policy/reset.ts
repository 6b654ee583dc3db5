// Reset policy: which reset rule governs a session (per channel, per type, base), whether a
// session instance is still fresh at a given time, and whether a message is a reset trigger.

import { MAX_DATE_MS, SwitchboardError } from '../core/index.js';
import type { ResetConfig, ResetMode, SessionConfig } from '../config/types.js';
import { hostTimeZone, isValidTimeZone, mostRecentDailyBoundary, nextDailyBoundary } from './zoned-time.js';
import { configValueError } from './units.js';

export type SessionType = 'direct' | 'group' | 'thread';
export type StaleReason = 'daily' | 'idle';

export const DEFAULT_RESET_AT_HOUR = 4;
export const DEFAULT_RESET_TRIGGERS: readonly string[] = ['/new', '/reset'];

const MINUTE_MS = 60_000;
const RESET_MODES: readonly ResetMode[] = ['none', 'daily', 'idle'];

export interface SessionTypeInput {
  sessionKey: string;
  threadId?: string | number | null;
  /** The peer kind of the route (`direct`/`group`/`channel`), or the entry's `chatType`. */
  peerKind?: string | null;
}

/**
 * `thread` if the key carries a thread or forum-topic suffix or the message names a thread;
 * `group` if the peer is a group or channel, or the key names one (`:group:` / `:channel:`, as
 * OpenClaw reads it: an explicit key or a row without a chat type is still a group's session);
 * otherwise `direct`.
 */
export function sessionTypeFor(input: SessionTypeInput): SessionType {
  const key = typeof input.sessionKey === 'string' ? input.sessionKey.toLowerCase() : '';
  const hasThreadId = input.threadId !== undefined && input.threadId !== null && String(input.threadId).trim() !== '';
  if (key.includes(':thread:') || key.includes(':topic:') || hasThreadId) return 'thread';
  const peerKind = typeof input.peerKind === 'string' ? input.peerKind.trim().toLowerCase() : '';
  if (peerKind === 'group' || peerKind === 'channel') return 'group';
  if (GROUP_KEY_MARKERS.some((marker) => key.includes(marker))) return 'group';
  return 'direct';
}

const GROUP_KEY_MARKERS = [':group:', ':channel:'];

/**
 * Where the resolved policy came from: the config path of the block that decided it
 * (`session.resetByChannel.<channel>`, `session.resetByType.<direct|dm|group|thread>`,
 * `session.reset`), or `default` when no block applies (mode `none`).
 */
export type ResetPolicySource = string;

export interface ResetPolicy {
  mode: ResetMode;
  /** 0–23, local hour of the daily boundary. */
  atHour: number;
  /** Whole minutes of inactivity after which the session is stale; 0 = no idle expiry. */
  idleMinutes: number;
  /** IANA zone of the daily boundary; absent = the host's zone (honours TZ). */
  timezone?: string;
  source: ResetPolicySource;
}

interface ResetBlock {
  mode?: ResetMode;
  atHour?: number;
  idleMinutes?: number;
  timezone?: string;
}


/** A time-zone setting at `path`: unset → undefined; anything but a known IANA name → CONFIG_INVALID. */
export function readTimeZone(value: unknown, path: string): string | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'string' || !isValidTimeZone(value)) {
    throw new SwitchboardError('CONFIG_INVALID', `${path}: ${JSON.stringify(value)} is not a known IANA time zone`, {
      hint: 'use a name such as "Europe/Berlin", "America/New_York" or "UTC"',
      details: { path, value },
    });
  }
  return value.trim();
}

/** Reads and type-checks one reset block; null/undefined mean "no block". */
function readResetBlock(value: unknown, path: string): ResetBlock | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'object' || Array.isArray(value)) configValueError(path, value, 'an object');
  const raw = value as ResetConfig;
  const block: ResetBlock = {};
  if (raw.mode !== undefined && raw.mode !== null) {
    const mode = typeof raw.mode === 'string' ? raw.mode.trim().toLowerCase() : raw.mode;
    if (!RESET_MODES.includes(mode as ResetMode)) configValueError(`${path}.mode`, raw.mode, 'one of none, daily, idle');
    block.mode = mode as ResetMode;
  }
  for (const field of ['atHour', 'idleMinutes'] as const) {
    const number = raw[field];
    if (number === undefined || number === null) continue;
    if (typeof number !== 'number' || !Number.isFinite(number)) configValueError(`${path}.${field}`, number, 'a number');
    block[field] = number;
  }
  const timezone = readTimeZone(raw.timezone, `${path}.timezone`);
  if (timezone !== undefined) block.timezone = timezone;
  if (path !== 'session.reset' && (raw as Record<string, unknown>).beforeReset !== undefined) {
    // One turn before every reset of a session, whatever block decides when: a per-channel or
    // per-type value would silently do nothing, so it is refused where it is written.
    throw new SwitchboardError('CONFIG_INVALID', `${path}.beforeReset: only session.reset.beforeReset is read`, {
      hint: 'move it to session.reset.beforeReset (it applies to every reset of every session)',
      details: { path: `${path}.beforeReset` },
    });
  }
  return block;
}

/** `session.reset.beforeReset`, resolved: the agent's one turn on the old instance before any reset. */
export interface BeforeResetSettings {
  /** What the runner gets as the turn's message. */
  prompt: string;
  /** The turn is stopped (status `timeout`, reported) after this long; the reset goes on. */
  timeoutMs: number;
}

export const DEFAULT_BEFORE_RESET_PROMPT =
  'This conversation is about to be reset and a new one will start. Save anything you want to keep now; nothing you reply here is sent to the user.';
export const DEFAULT_BEFORE_RESET_TIMEOUT_SECONDS = 120;

/**
 * `true` or an object `{prompt?, timeoutSeconds?}` turns the turn on (defaults for what is left
 * out); absent, null or `false` leaves it off. Anything else is CONFIG_INVALID naming the path.
 */
export function resolveBeforeReset(session: SessionConfig | undefined): BeforeResetSettings | undefined {
  const reset = session?.reset as Record<string, unknown> | undefined;
  const path = 'session.reset.beforeReset';
  if (reset === undefined || reset === null || typeof reset !== 'object') return undefined;
  const raw = reset.beforeReset;
  if (raw === undefined || raw === null || raw === false) return undefined;
  const settings: BeforeResetSettings = { prompt: DEFAULT_BEFORE_RESET_PROMPT, timeoutMs: DEFAULT_BEFORE_RESET_TIMEOUT_SECONDS * 1000 };
  if (raw === true) return settings;
  if (typeof raw !== 'object' || Array.isArray(raw)) configValueError(path, raw, 'true, false or an object {prompt, timeoutSeconds}');
  const block = raw as Record<string, unknown>;
  for (const key of Object.keys(block)) {
    if (key !== 'prompt' && key !== 'timeoutSeconds') {
      throw new SwitchboardError('CONFIG_INVALID', `${path}.${key}: unknown key (known: prompt, timeoutSeconds)`, { details: { path: `${path}.${key}` } });
    }
  }
  if (block.prompt !== undefined) {
    if (typeof block.prompt !== 'string' || block.prompt.trim() === '') configValueError(`${path}.prompt`, block.prompt, 'a non-empty text');
    settings.prompt = block.prompt;
  }
  if (block.timeoutSeconds !== undefined) {
    const seconds = block.timeoutSeconds;
    if (typeof seconds !== 'number' || !Number.isFinite(seconds) || !(seconds > 0)) configValueError(`${path}.timeoutSeconds`, seconds, 'a number of seconds greater than 0');
    settings.timeoutMs = Math.max(1, Math.round(seconds * 1000));
  }
  return settings;
}

function ownEntry<T>(record: Record<string, T> | undefined, wanted: string): [string, T] | undefined {
  if (record === undefined || record === null || typeof record !== 'object') return undefined;
  // Object.hasOwn keeps `constructor` or `__proto__` from resolving to Object.prototype members.
  if (Object.hasOwn(record, wanted)) return [wanted, record[wanted] as T];
  const normalised = wanted.trim().toLowerCase();
  for (const key of Object.keys(record)) {
    if (key.trim().toLowerCase() === normalised) return [key, record[key] as T];
  }
  return undefined;
}

function clampHour(hour: number): number {
  return Math.min(23, Math.max(0, Math.floor(hour)));
}

function wholeMinutes(minutes: number): number {
  return Math.max(0, Math.floor(minutes));
}

export interface ResetScope {
  /** The session's channel; absent (e.g. an explicit key with no channel) skips resetByChannel. */
  channel?: string;
  type: SessionType;
}

/**
 * The effective reset policy of one session, by store.md's precedence: a resetByChannel block
 * replaces both `reset` and `resetByType`; otherwise the typed block wins field by field over the
 * base, and a block without a mode means daily. Unset everywhere means mode `none`.
 * Note: a resetByChannel block is self-contained — it does not inherit `reset.timezone`.
 */
export function resolveResetPolicy(session: SessionConfig | undefined, scope: ResetScope): ResetPolicy {
  const channelName = typeof scope.channel === 'string' ? scope.channel : '';
  const channelEntry = channelName === '' ? undefined : ownEntry(session?.resetByChannel, channelName);
  if (channelEntry !== undefined) {
    const path = `session.resetByChannel.${channelEntry[0]}`;
    const block = readResetBlock(channelEntry[1], path);
    if (block !== undefined) {
      return withTimeZone(
        {
          mode: block.mode ?? 'daily',
          atHour: clampHour(block.atHour ?? DEFAULT_RESET_AT_HOUR),
          idleMinutes: wholeMinutes(block.idleMinutes ?? 0),
          source: path,
        },
        block.timezone,
      );
    }
  }

  const base = withLegacyIdleMinutes(readResetBlock(session?.reset, 'session.reset'), session);
  const typedEntry = typedBlockFor(session, scope.type);
  const typed = typedEntry === undefined ? undefined : readResetBlock(typedEntry[1], typedEntry[0]);

  let mode: ResetMode;
  if (typed?.mode !== undefined) mode = typed.mode;
  else if (typed !== undefined && base?.mode !== undefined && base.mode !== 'none') mode = base.mode;
  else if (typed !== undefined) mode = 'daily';
  else if (base?.mode !== undefined) mode = base.mode;
  else if (base !== undefined) mode = 'daily';
  else mode = 'none';

  return withTimeZone(
    {
      mode,
      atHour: clampHour(typed?.atHour ?? base?.atHour ?? DEFAULT_RESET_AT_HOUR),
      idleMinutes: wholeMinutes(typed?.idleMinutes ?? base?.idleMinutes ?? 0),
      source: typed !== undefined ? typedEntry![0] : base !== undefined ? (session?.reset == null ? 'session.idleMinutes' : 'session.reset') : 'default',
    },
    typed?.timezone ?? base?.timezone,
  );
}

/**
 * The legacy `session.idleMinutes` (OpenClaw before `session.reset`), read as OpenClaw's doctor
 * moves it: it is `reset.idleMinutes` where that is unset, and alone it is `{mode: "idle"}`. A
 * `resetByChannel` block, which replaces `reset`, does not see it.
 */
function withLegacyIdleMinutes(base: ResetBlock | undefined, session: SessionConfig | undefined): ResetBlock | undefined {
  const legacy = session?.idleMinutes;
  if (legacy === undefined || legacy === null) return base;
  if (typeof legacy !== 'number' || !Number.isFinite(legacy)) configValueError('session.idleMinutes', legacy, 'a number');
  if (base === undefined) return { mode: 'idle', idleMinutes: legacy };
  return base.idleMinutes === undefined ? { ...base, idleMinutes: legacy } : base;
}

function withTimeZone(policy: ResetPolicy, timezone: string | undefined): ResetPolicy {
  return timezone === undefined ? policy : { ...policy, timezone };
}

/** The typed block for a session type, with its config path; the legacy `dm` stands for direct. */
function typedBlockFor(session: SessionConfig | undefined, type: SessionType): [string, unknown] | undefined {
  const byType = session?.resetByType as Record<string, unknown> | undefined;
  if (byType === undefined || byType === null || typeof byType !== 'object') return undefined;
  // `direct` wins over the legacy `dm` when both are written.
  const names = type === 'direct' ? ['direct', 'dm'] : [type];
  for (const name of names) {
    const value = Object.hasOwn(byType, name) ? byType[name] : undefined;
    if (value !== undefined && value !== null) return [`session.resetByType.${name}`, value];
  }
  return undefined;
}

/**
 * Checks every reset block of a session config (modes, numbers, time zones) so that a bad value
 * is reported when the config loads rather than when the first message for that channel arrives.
 */
export function validateResetConfig(session: SessionConfig | undefined): void {
  withLegacyIdleMinutes(readResetBlock(session?.reset, 'session.reset'), session);
  const byType = session?.resetByType as Record<string, unknown> | undefined;
  if (byType !== undefined && byType !== null) {
    if (typeof byType !== 'object' || Array.isArray(byType)) configValueError('session.resetByType', byType, 'an object');
    for (const name of Object.keys(byType)) readResetBlock(byType[name], `session.resetByType.${name}`);
  }
  const byChannel = session?.resetByChannel as Record<string, unknown> | undefined;
  if (byChannel !== undefined && byChannel !== null) {
    if (typeof byChannel !== 'object' || Array.isArray(byChannel)) {
      configValueError('session.resetByChannel', byChannel, 'an object');
    }
    for (const name of Object.keys(byChannel)) readResetBlock(byChannel[name], `session.resetByChannel.${name}`);
  }
  resolveResetTriggers(session);
  resolveBeforeReset(session);
}

export interface SessionTimes {
  /** When this sessionId began: the daily anchor. */
  sessionStartedAt?: number | null;
  /** Last real inbound user message: the idle anchor. */
  lastInteractionAt?: number | null;
  /**
   * The transcript header's time (when the instance's file began), read by the caller only for an
   * entry without a usable sessionStartedAt: OpenClaw's own reset writes none, and OpenClaw then
   * takes the header's time as the start.
   */
  transcriptStartedAt?: number | null;
}

export interface Freshness {
  fresh: boolean;
  staleReason?: StaleReason;
  /** When fresh: the first millisecond at which the session would be stale (absent = never). */
  nextResetAt?: number;
}

/** A time a check can be anchored at: a number from 1970 on and not after `now` (else ignored). */
function usableTime(value: number | null | undefined, now: number): number | undefined {
  return typeof value === 'number' && Number.isFinite(value) && value >= 0 && value <= now ? value : undefined;
}

/**
 * Whether a session instance is still fresh at `now` under `policy`.
 *
 * * daily: stale when sessionStartedAt is before the most recent atHour:00 (in the policy's zone)
 *   at or before now. Its expiry is the first boundary after sessionStartedAt.
 * * idle: stale when now > anchor + idleMinutes, the anchor being lastInteractionAt, or
 *   sessionStartedAt for a session that never had an interaction. Its expiry is anchor + idle.
 * * Both stale: the earlier expiry names the reason; on a tie, daily.
 * * A timestamp in the future (clock moved back, hand-edited store) or before 1970 is ignored, as
 *   OpenClaw ignores it: the check falls back to the other time. Without a usable sessionStartedAt
 *   (OpenClaw's own reset writes none) the start is the transcript header's time when the caller
 *   read it (as OpenClaw takes it), else the daily check is anchored at lastInteractionAt — the
 *   instance began no later than that; without a usable lastInteractionAt the idle check is
 *   anchored at the start. A check is off while there is neither.
 * * nextResetAt is exact to the millisecond: evaluating at nextResetAt - 1 is fresh, at
 *   nextResetAt stale (idle expiry + 1, because idle is "strictly after").
 */
export function evaluateFreshness(times: SessionTimes, policy: ResetPolicy, now: number): Freshness {
  if (!Number.isFinite(now)) throw new SwitchboardError('BAD_INPUT', `now: ${String(now)} is not a time`);
  if (policy.mode === 'none') return { fresh: true };

  const lastInteractionAt = usableTime(times.lastInteractionAt, now);
  const sessionStartedAt = usableTime(times.sessionStartedAt, now) ?? usableTime(times.transcriptStartedAt, now);
  const idleAnchor = lastInteractionAt ?? sessionStartedAt;
  const startedAt = sessionStartedAt ?? lastInteractionAt;

  let dailyStale = false;
  let dailyNextAt: number | undefined;
  let timeZone: string | undefined;
  if (policy.mode === 'daily' && startedAt !== undefined) {
    timeZone = policyTimeZone(policy);
    const hour = clampHour(policy.atHour);
    const recent = mostRecentDailyBoundary(now, hour, timeZone);
    if (recent !== null && startedAt < recent) dailyStale = true;
    else dailyNextAt = nextDailyBoundary(now, hour, timeZone) ?? undefined;
  }

  let idleStale = false;
  let idleExpiresAt: number | undefined;
  const idleMinutes = wholeMinutes(policy.idleMinutes);
  if (idleMinutes > 0 && idleAnchor !== undefined) {
    idleExpiresAt = idleAnchor + idleMinutes * MINUTE_MS;
    idleStale = now > idleExpiresAt;
  }

  if (dailyStale && idleStale) {
    const dailyExpiresAt = nextDailyBoundary(startedAt!, clampHour(policy.atHour), timeZone!);
    const dailyFirst = dailyExpiresAt === null || dailyExpiresAt <= idleExpiresAt!;
    return { fresh: false, staleReason: dailyFirst ? 'daily' : 'idle' };
  }
  if (dailyStale) return { fresh: false, staleReason: 'daily' };
  if (idleStale) return { fresh: false, staleReason: 'idle' };

  // An expiry past the last date there is (a huge idleMinutes) never comes.
  const upcoming = [dailyNextAt, idleExpiresAt === undefined ? undefined : idleExpiresAt + 1].filter(
    (at): at is number => at !== undefined && at <= MAX_DATE_MS,
  );
  return upcoming.length === 0 ? { fresh: true } : { fresh: true, nextResetAt: Math.min(...upcoming) };
}

function policyTimeZone(policy: ResetPolicy): string {
  if (policy.timezone === undefined) return hostTimeZone();
  const path = policy.source.startsWith('session.') ? `${policy.source}.timezone` : 'session.reset.timezone';
  return readTimeZone(policy.timezone, path) ?? hostTimeZone();
}

/** The configured reset triggers, trimmed and lower-cased; the default when unset or empty. */
export function resolveResetTriggers(session: SessionConfig | undefined): readonly string[] {
  const configured = session?.resetTriggers;
  // An empty list is unset, as in OpenClaw: /new and /reset stay commands (a session must not
  // keep "/new" as text where OpenClaw would have reset it).
  if (configured === undefined || configured === null) return DEFAULT_RESET_TRIGGERS;
  if (Array.isArray(configured) && configured.length === 0) return DEFAULT_RESET_TRIGGERS;
  if (!Array.isArray(configured)) configValueError('session.resetTriggers', configured, 'a list of strings');
  // Once per configured list (it is asked for every user message).
  let resolved = resolvedTriggers.get(configured);
  if (resolved === undefined) {
    resolved = configured.map((trigger, index) => {
      if (typeof trigger !== 'string' || trigger.trim() === '' || /\s/.test(trigger.trim())) {
        configValueError(`session.resetTriggers[${index}]`, trigger, 'a non-empty word such as "/new"');
      }
      return trigger.trim().toLowerCase();
    });
    resolvedTriggers.set(configured, resolved);
  }
  return resolved;
}

const resolvedTriggers = new WeakMap<readonly unknown[], readonly string[]>();

export interface ResetTrigger {
  /** The trigger as configured (trimmed, lower-case), e.g. `/new`. */
  trigger: string;
  /** The text after the trigger, trimmed; passed on as the message ('' = none). */
  rest: string;
  /** Set by `/new <model>`. */
  model?: string;
}

export interface ResetTriggerOptions {
  /** Narrows what counts as a model after `/new`, e.g. to the configured models and aliases. */
  isKnownModel?: (token: string) => boolean;
}

// One token of characters that model ids and aliases use (`gpt-4o`, `openai/gpt-5`,
// `llama3:8b`, `opus`), not ending in a dot so that "/new ok." stays a message.
const MODEL_TOKEN = /^[a-z0-9][a-z0-9._:/@+-]*$/i;
const MODEL_TRIGGER = '/new';

/**
 * Whether `text` is a reset trigger. Matching is case-insensitive on the whole first word: `/new`
 * and `/NEW hello` match, `/newer` does not. A slash trigger may be followed by a colon, as
 * OpenClaw's commands may (`/new: hello`, `/reset:`). `/reset soft [note]` is not a trigger: it is
 * OpenClaw's soft reset, which keeps the session (its note is ordinary text).
 *
 * The model rule: after `/new` (only `/new`, never `/reset` or custom triggers), the rest is a
 * model when it is exactly one token of model-name characters (letters, digits, `. _ : / @ + -`,
 * not ending in `.`) and, if the caller passes `isKnownModel`, that function accepts it. Anything
 * else — several words, punctuation — is the message. So `/new gpt-4o` sets the model, while
 * `/new what's up?` passes the text on; to start afresh with a one-word message, use `/reset word`.
 */
export function parseResetTrigger(
  text: string,
  triggers: readonly string[] = DEFAULT_RESET_TRIGGERS,
  options: ResetTriggerOptions = {},
): ResetTrigger | null {
  if (typeof text !== 'string') return null;
  const trimmed = text.trim();
  if (trimmed === '') return null;
  // Runs for every user message: most first words are not a trigger, which their length rules out
  // before anything is lowercased (only non-ASCII text can change length when lowercased).
  const known = normalizedTriggers(triggers);
  const space = trimmed.search(WHITESPACE);
  const firstWord = space < 0 ? trimmed : trimmed.slice(0, space);
  const matched = matchTriggerWord(firstWord, known);
  if (matched === null) return null;
  const rest = (matched.colon ? trimmed.slice(matched.word.length + 1) : trimmed.slice(firstWord.length)).trim();
  // `/reset soft [note]` is OpenClaw's soft reset, which keeps the session: not a trigger.
  if (matched.trigger === SOFT_RESET_COMMAND && SOFT_RESET_REST.test(rest)) return null;
  if (matched.trigger === MODEL_TRIGGER && isModelToken(rest, options)) return { trigger: matched.trigger, rest: '', model: rest };
  return { trigger: matched.trigger, rest };
}

const SOFT_RESET_COMMAND = '/reset';
const SOFT_RESET_REST = /^soft(?:\s|$)/i;

/**
 * The trigger a message's first word names: the whole word, or — for a slash command — the part
 * before a colon (`/new:` and `/new: hello`, OpenClaw's command form with a colon).
 */
function matchTriggerWord(firstWord: string, known: NormalizedTriggers): { trigger: string; word: string; colon: boolean } | null {
  const whole = triggerNamed(firstWord, known);
  if (whole !== null) return { trigger: whole, word: firstWord, colon: false };
  const colon = firstWord.indexOf(':');
  if (!firstWord.startsWith('/') || colon <= 1) return null;
  const word = firstWord.slice(0, colon);
  const trigger = triggerNamed(word, known);
  return trigger === null ? null : { trigger, word, colon: true };
}

function triggerNamed(word: string, known: NormalizedTriggers): string | null {
  if (!known.lengths.has(word.length) && ASCII_ONLY.test(word)) return null;
  const wanted = word.toLowerCase();
  return known.words.has(wanted) ? wanted : null;
}

const WHITESPACE = /\s/;
const ASCII_ONLY = /^[\x00-\x7f]*$/;

interface NormalizedTriggers {
  words: Set<string>;
  lengths: Set<number>;
}

/** Triggers as compared: trimmed, lowercased, blanks and non-strings left out; once per list. */
const normalizedByList = new WeakMap<readonly string[], NormalizedTriggers>();

function normalizedTriggers(triggers: readonly string[]): NormalizedTriggers {
  let known = normalizedByList.get(triggers);
  if (known === undefined) {
    const words = new Set<string>();
    for (const candidate of triggers) {
      if (typeof candidate !== 'string') continue;
      const word = candidate.trim().toLowerCase();
      if (word !== '') words.add(word);
    }
    known = { words, lengths: new Set([...words].map((word) => word.length)) };
    normalizedByList.set(triggers, known);
  }
  return known;
}

function isModelToken(rest: string, options: ResetTriggerOptions): boolean {
  if (rest === '' || !MODEL_TOKEN.test(rest) || rest.endsWith('.')) return false;
  return options.isKnownModel === undefined || options.isKnownModel(rest);
}
