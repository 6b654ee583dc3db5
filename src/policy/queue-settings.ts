// Queue settings: mode and drop aliases, the `/queue` directive parser, and the resolution of
// mode/debounce/cap/drop through message → directive → session → per-channel config → config.

import type { QueueConfig } from '../config/types.js';
import { formatDurationMs, parseDurationMs } from './units.js';
import { isSwitchboardError } from '../core/index.js';

export type QueueMode = 'steer' | 'followup' | 'collect' | 'interrupt';
export type DropPolicy = 'old' | 'new' | 'summarize';

export const DEFAULT_QUEUE_MODE: QueueMode = 'steer';
export const DEFAULT_DEBOUNCE_MS = 500;
export const DEFAULT_DEBOUNCE_MAX_WAIT_MS = 30_000;
export const DEFAULT_QUEUE_CAP = 20;
export const DEFAULT_DROP_POLICY: DropPolicy = 'summarize';

// queue.md's alias list, plus `follow-up` (the singular of the listed `follow-ups`) and
// `summarise` (British spelling): both are what people type, and neither can mean anything else.
const MODE_ALIASES: Readonly<Record<string, QueueMode>> = {
  interrupt: 'interrupt',
  interrupts: 'interrupt',
  abort: 'interrupt',
  steer: 'steer',
  steering: 'steer',
  followup: 'followup',
  'follow-up': 'followup',
  'follow-ups': 'followup',
  followups: 'followup',
  collect: 'collect',
  coalesce: 'collect',
  // OpenClaw's retired modes, still found in older configs and session entries; OpenClaw's own
  // migration maps them the same way.
  queue: 'steer',
  'steer-backlog': 'followup',
  'steer+backlog': 'followup',
  steer_backlog: 'followup',
};

const DROP_ALIASES: Readonly<Record<string, DropPolicy>> = {
  old: 'old',
  oldest: 'old',
  new: 'new',
  newest: 'new',
  summarize: 'summarize',
  summary: 'summarize',
  summarise: 'summarize',
};

function lookupAlias<T>(table: Readonly<Record<string, T>>, value: unknown): T | undefined {
  if (typeof value !== 'string') return undefined;
  const key = value.trim().toLowerCase();
  return Object.hasOwn(table, key) ? table[key] : undefined;
}

/** A queue mode or one of its aliases, case-insensitive; undefined when it is none of them. */
export function normalizeQueueMode(value: unknown): QueueMode | undefined {
  return lookupAlias(MODE_ALIASES, value);
}

/** A drop policy or one of its aliases, case-insensitive; undefined when it is none of them. */
export function normalizeDropPolicy(value: unknown): DropPolicy | undefined {
  return lookupAlias(DROP_ALIASES, value);
}

/**
 * Warnings for `messages.queue` values that do not normalise: they are not errors (each falls
 * through to the next layer, as queue.md says), but a typo like `mode: "stear"` would otherwise
 * go unnoticed while every message quietly takes the default.
 */
export function queueConfigWarnings(config: QueueConfig | undefined): string[] {
  if (config === undefined || config === null || typeof config !== 'object') return [];
  const modes = `a queue mode (${[...new Set(Object.values(MODE_ALIASES))].join(', ')} or an alias)`;
  const warnings: string[] = [];
  const check = (value: unknown, path: string, valid: (value: unknown) => unknown, what: string, fallback: string): void => {
    if (value !== undefined && valid(value) === undefined) warnings.push(`${path}: ${JSON.stringify(value)} is not ${what}; ignored (${fallback} applies)`);
  };
  check(config.mode, 'messages.queue.mode', normalizeQueueMode, modes, `the default "${DEFAULT_QUEUE_MODE}"`);
  check(config.drop, 'messages.queue.drop', normalizeDropPolicy, 'a drop policy (old, new, summarize or an alias)', `the default "${DEFAULT_DROP_POLICY}"`);
  if (config.byChannel !== null && typeof config.byChannel === 'object') {
    for (const [channel, mode] of Object.entries(config.byChannel)) {
      check(mode, `messages.queue.byChannel.${channel}`, normalizeQueueMode, modes, 'messages.queue.mode or the default');
    }
  }
  return warnings;
}

export interface QueueDirective {
  /** A `/queue` directive was present (even an invalid or empty one). */
  found: boolean;
  /** The text with the directive removed (trimmed); the original text when none was found. */
  cleanedText: string;
  /** Found, and nothing but the directive was in the text. */
  directiveOnly: boolean;
  /** `default`, `reset` or `clear`: drop the session's queue override. */
  reset?: true;
  mode?: QueueMode;
  debounceMs?: number;
  cap?: number;
  drop?: DropPolicy;
  /** One message per invalid token; a directive with errors must change nothing. */
  errors: string[];
}

// `/queue` at the start or after whitespace, then end, whitespace or `:` (so `/queued` is text).
const DIRECTIVE_START = /(^|\s)\/queue(?=$|[\s:])/i;
const TOKEN = /\S+/y;
const WHITESPACE = /\s*/y;
// `key:value` or `key=value`; queue.md names `=` for debounce only, but accepting it for cap and
// drop too costs nothing and saves a confusing "unknown token".
const KEYED_TOKEN = /^(debounce|cap|drop)[:=](.*)$/i;

/**
 * Finds and parses the first `/queue` directive in a message (queue.md "/queue directive").
 * Tokens are read left to right: `default|reset|clear` sets reset and ends the directive (any
 * settings read before it are discarded: a reset leaves nothing to apply); `debounce:<d>`,
 * `cap:<n>`, `drop:<p>` set values (last wins); a mode alias sets the mode (last wins); the first
 * unknown token ends the directive and stays in the text. A keyed token with a bad value is part
 * of the directive and adds an error.
 */
export function parseQueueDirective(text: string): QueueDirective {
  const source = typeof text === 'string' ? text : '';
  const start = DIRECTIVE_START.exec(source);
  if (start === null) return { found: false, cleanedText: source, directiveOnly: false, errors: [] };

  const directiveStart = start.index + start[1]!.length;
  let end = directiveStart + '/queue'.length;
  if (source[end] === ':') end += 1;

  const result: QueueDirective = { found: true, cleanedText: '', directiveOnly: false, errors: [] };
  let position = end;
  for (;;) {
    WHITESPACE.lastIndex = position;
    WHITESPACE.exec(source);
    TOKEN.lastIndex = WHITESPACE.lastIndex;
    const token = TOKEN.exec(source)?.[0];
    if (token === undefined) break;
    const consumed = applyDirectiveToken(token, result);
    if (consumed === 'unknown') break;
    end = TOKEN.lastIndex;
    position = end;
    if (consumed === 'stop') break;
  }

  result.cleanedText = joinAround(source.slice(0, directiveStart), source.slice(end));
  result.directiveOnly = result.cleanedText === '';
  return result;
}

type TokenOutcome = 'consumed' | 'stop' | 'unknown';

function applyDirectiveToken(token: string, result: QueueDirective): TokenOutcome {
  const lower = token.toLowerCase();
  if (lower === 'default' || lower === 'reset' || lower === 'clear') {
    delete result.mode;
    delete result.debounceMs;
    delete result.cap;
    delete result.drop;
    result.reset = true;
    return 'stop';
  }
  const keyed = KEYED_TOKEN.exec(token);
  if (keyed !== null) {
    const key = keyed[1]!.toLowerCase();
    const value = keyed[2]!;
    if (key === 'debounce') {
      const debounceMs = parseDirectiveDebounce(value);
      if (debounceMs === undefined) {
        result.errors.push(`debounce: ${JSON.stringify(value)} is not a duration above 0 (e.g. 500, 2s, 1m30s)`);
      } else result.debounceMs = debounceMs;
    } else if (key === 'cap') {
      const cap = /^\d+$/.test(value) ? Number(value) : Number.NaN;
      if (!Number.isSafeInteger(cap) || cap < 1) {
        result.errors.push(`cap: ${JSON.stringify(value)} is not a whole number of at least 1`);
      } else result.cap = cap;
    } else {
      const drop = normalizeDropPolicy(value);
      if (drop === undefined) result.errors.push(`drop: ${JSON.stringify(value)} is not one of old, new, summarize`);
      else result.drop = drop;
    }
    return 'consumed';
  }
  const mode = normalizeQueueMode(token);
  if (mode === undefined) return 'unknown';
  result.mode = mode;
  return 'consumed';
}

function parseDirectiveDebounce(value: string): number | undefined {
  try {
    const debounceMs = parseDurationMs(value, 'debounce', 'BAD_INPUT');
    return debounceMs > 0 ? debounceMs : undefined;
  } catch (error) {
    if (isSwitchboardError(error)) return undefined;
    throw error;
  }
}

// Keeps a line break where the directive sat on its own line; otherwise one space.
function joinAround(before: string, after: string): string {
  const head = before.trimEnd();
  const tail = after.trimStart();
  if (head === '' || tail === '') return (head + tail).trim();
  const gap = before.slice(head.length) + after.slice(0, after.length - tail.length);
  return `${head}${gap.includes('\n') ? '\n' : ' '}${tail}`.trim();
}

/** The `queue` field of an inbound message (cli.md), as received: values are checked here. */
export interface MessageQueueOptions {
  mode?: unknown;
  debounceMs?: unknown;
  cap?: unknown;
  drop?: unknown;
}

/** The per-session override stored on the entry by a directive-only `/queue` message. */
export interface SessionQueueOverride {
  queueMode?: unknown;
  queueDebounceMs?: unknown;
  queueCap?: unknown;
  queueDrop?: unknown;
}

/**
 * Which layer supplied a value: `message` (the message's `queue` field), `directive` (inline
 * `/queue` in the text), `session` (the entry's override), `config.byChannel`
 * (`messages.queue.byChannel.<channel>` for mode, `messages.queue.debounceMsByChannel.<channel>`
 * for debounce), `config` (`messages.queue.*`), `default` (built in).
 */
export type QueueSettingSource = 'message' | 'directive' | 'session' | 'config.byChannel' | 'config' | 'default';

export interface QueueSettings {
  mode: QueueMode;
  debounceMs: number;
  debounceMaxWaitMs: number;
  cap: number;
  dropPolicy: DropPolicy;
  sources: { mode: QueueSettingSource; debounceMs: QueueSettingSource; cap: QueueSettingSource; dropPolicy: QueueSettingSource };
}

export interface QueueSettingsInput {
  channel?: string | null;
  messageQueue?: MessageQueueOptions | null;
  /** Ignored when it has errors (an invalid directive changes nothing); its reset skips the session layer. */
  directive?: QueueDirective | null;
  entry?: SessionQueueOverride | null;
  config?: QueueConfig | null;
}

/** Debounce from a non-directive layer: ms as a number ≥ 0 or a duration string; else undefined. */
function readDebounce(value: unknown): number | undefined {
  if (typeof value !== 'number' && typeof value !== 'string') return undefined;
  try {
    const debounceMs = parseDurationMs(value, 'debounceMs');
    return debounceMs >= 0 ? debounceMs : undefined;
  } catch (error) {
    if (isSwitchboardError(error)) return undefined;
    throw error;
  }
}

/** A cap from any layer: a number or digit string, floored, at least 1; else undefined. */
function readCap(value: unknown): number | undefined {
  const number = typeof value === 'string' && /^\s*\d+(\.\d+)?\s*$/.test(value) ? Number(value) : value;
  if (typeof number !== 'number' || !Number.isFinite(number) || number < 1) return undefined;
  return Math.min(Number.MAX_SAFE_INTEGER, Math.floor(number));
}

function channelValue<T>(record: Record<string, T> | undefined | null, channel: string | null | undefined): T | undefined {
  if (record === undefined || record === null || typeof record !== 'object') return undefined;
  if (typeof channel !== 'string' || channel.trim() === '') return undefined;
  if (Object.hasOwn(record, channel)) return record[channel];
  const wanted = channel.trim().toLowerCase();
  const key = Object.keys(record).find((candidate) => candidate.trim().toLowerCase() === wanted);
  return key === undefined ? undefined : record[key];
}

type Layer = [QueueSettingSource, unknown];

function firstOf<T>(layers: Layer[], read: (value: unknown) => T | undefined, fallback: T): [T, QueueSettingSource] {
  for (const [source, raw] of layers) {
    const value = read(raw);
    if (value !== undefined) return [value, source];
  }
  return [fallback, 'default'];
}

/**
 * The effective queue settings for one message (queue.md "Settings and precedence"). Each value
 * comes from the highest layer whose value is valid; an invalid value falls through to the next.
 * The message's `queue` field is the top layer for every setting (cli.md lets a message carry
 * `queue.debounceMs`), then the inline directive, the session override, per-channel config,
 * config, and the built-in defaults.
 */
export function resolveQueueSettings(input: QueueSettingsInput): QueueSettings {
  const message = input.messageQueue ?? {};
  const directive = input.directive && input.directive.found && input.directive.errors.length === 0 ? input.directive : undefined;
  const session = directive?.reset ? {} : (input.entry ?? {});
  const config = input.config ?? {};

  const [mode, modeSource] = firstOf<QueueMode>(
    [
      ['message', message.mode],
      ['directive', directive?.mode],
      ['session', session.queueMode],
      ['config.byChannel', channelValue(config.byChannel, input.channel)],
      ['config', config.mode],
    ],
    normalizeQueueMode,
    DEFAULT_QUEUE_MODE,
  );
  const [debounceMs, debounceSource] = firstOf<number>(
    [
      ['message', message.debounceMs],
      ['directive', directive?.debounceMs],
      ['session', session.queueDebounceMs],
      ['config.byChannel', channelValue(config.debounceMsByChannel, input.channel)],
      ['config', config.debounceMs],
    ],
    readDebounce,
    DEFAULT_DEBOUNCE_MS,
  );
  const [cap, capSource] = firstOf<number>(
    [
      ['message', message.cap],
      ['directive', directive?.cap],
      ['session', session.queueCap],
      ['config', config.cap],
    ],
    readCap,
    DEFAULT_QUEUE_CAP,
  );
  const [dropPolicy, dropSource] = firstOf<DropPolicy>(
    [
      ['message', message.drop],
      ['directive', directive?.drop],
      ['session', session.queueDrop],
      ['config', config.drop],
    ],
    normalizeDropPolicy,
    DEFAULT_DROP_POLICY,
  );
  const debounceMaxWaitMs = readDebounce(config.debounceMaxWaitMs) ?? DEFAULT_DEBOUNCE_MAX_WAIT_MS;

  return {
    mode,
    debounceMs,
    debounceMaxWaitMs,
    cap,
    dropPolicy,
    sources: { mode: modeSource, debounceMs: debounceSource, cap: capSource, dropPolicy: dropSource },
  };
}

/**
 * The session override after a directive-only message: null when the directive is invalid (it
 * changes nothing); all fields cleared on reset; otherwise the current override with the
 * directive's values laid over it.
 */
export function applyQueueDirective(
  current: SessionQueueOverride | null | undefined,
  directive: QueueDirective,
): SessionQueueOverride | null {
  if (!directive.found || directive.errors.length > 0) return null;
  if (directive.reset) return {};
  const next: SessionQueueOverride = { ...(current ?? {}) };
  if (directive.mode !== undefined) next.queueMode = directive.mode;
  if (directive.debounceMs !== undefined) next.queueDebounceMs = directive.debounceMs;
  if (directive.cap !== undefined) next.queueCap = directive.cap;
  if (directive.drop !== undefined) next.queueDrop = directive.drop;
  return next;
}

/** One line for the `/queue` reply and for explain: `mode collect · debounce 2s · cap 20 · drop summarize`. */
export function describeQueueSettings(settings: QueueSettings): string {
  return [
    `mode ${settings.mode}`,
    `debounce ${formatDurationMs(settings.debounceMs)}`,
    `cap ${settings.cap}`,
    `drop ${settings.dropPolicy}`,
  ].join(' · ');
}
