// sendPolicy: whether a reply produced for a session may be delivered, from the entry's own
// override, the configured rules (any matching deny wins) and the default.

import type { SendPolicyRule } from '../config/types.js';

export type SendDecision = 'allow' | 'deny';

/** `entry` = the session's `/send` override, `rule` = a matching rule, `default` = the policy's
 * default, `none` = no policy configured at all. */
/** `unknown`: the session's entry could not be read, so its own setting is not known (the reply is held).
 * `key`: the session key reads as two different peer shapes (see `hasAmbiguousPeerShape`), so no
 * rule can be trusted to see the session's channel or chat type, and the reply is held. */
export type SendPolicySource = 'entry' | 'rule' | 'default' | 'none' | 'unknown' | 'key';

export interface SendPolicyInput {
  sessionKey: string;
  /** The session's channel, or candidates for it in order (the first non-blank one counts);
   * when none is given, the channel the key names (`<channel>:<kind>:<id>`). */
  channel?: string | null | readonly (string | null | undefined)[];
  /** The session's chat type; when it is not one of direct/dm/group/channel, the one the key names. */
  chatType?: string | null;
  /** The entry's `sendPolicy` field; any other value (e.g. `inherit`) is no override. */
  entryOverride?: string | null;
}

export interface SendPolicyConfig {
  rules?: SendPolicyRule[];
  default?: string;
}

export interface SendPolicyDecision {
  decision: SendDecision;
  /** Index in `rules` of the rule that decided, or null. */
  rule: number | null;
  source: SendPolicySource;
}

function normalise(value: unknown): string {
  return value === undefined || value === null ? '' : String(value).trim().toLowerCase();
}

function asDecision(value: unknown): SendDecision | undefined {
  const normalised = normalise(value);
  return normalised === 'allow' || normalised === 'deny' ? normalised : undefined;
}

// `dm` is OpenClaw's older spelling of a direct chat; treat them as one type.
function normaliseChatType(value: unknown): string {
  const normalised = normalise(value);
  return normalised === 'dm' ? 'direct' : normalised;
}

const PEER_KINDS = new Set(['direct', 'dm', 'group', 'channel']);

/** A session's own chat type: direct (also `dm`), group or channel; '' for anything else. */
function sessionChatType(value: unknown): string {
  const normalised = normaliseChatType(value);
  return PEER_KINDS.has(normalised) ? normalised : '';
}

/**
 * The key without its `agent:<id>:` prefix, as OpenClaw strips it (2026.7.1 and 2026.9.6
 * `stripAgentSessionKeyPrefix`): on the key as given (a key starting `Agent:` or with a space is
 * not agent-scoped), and a key `agent:<id>:` with nothing after it has no rest (undefined).
 */
function withoutAgentPrefix(key: string): string | undefined {
  if (key === '') return undefined;
  const parts = key.split(':');
  if (parts[0] !== 'agent') return key;
  if (parts.length < 3 || !parts[1] || !parts[2]) return undefined;
  return parts.slice(2).join(':');
}

// OpenClaw's older key shapes that name a chat type without a `<kind>` segment.
function legacyChatType(scoped: string): string | undefined {
  if (/^group:[^:]+(?::.*)?$/u.test(scoped)) return 'group';
  if (/^channel:[^:]+(?::.*)?$/u.test(scoped)) return 'channel';
  if (/^(?:whatsapp:)?[^:]+@g\.us$/u.test(scoped)) return 'group';
  if (/^discord:(?:[^:]+:)?guild-[^:]+:channel-[^:]+$/u.test(scoped)) return 'channel';
  return undefined;
}

/**
 * True when a key (without its agent prefix) fits more than one of the peer shapes
 * `<kind>:<id>`, `<channel>:<kind>:<id>`, `<channel>:<account>:<kind>:<id>` and the legacy
 * shapes — e.g. `telegram:group:direct:1` (a group whose id is `direct:1`, or account `group`'s
 * DM with `1`?). OpenClaw then denies whenever a sendPolicy is configured; so does switchboard.
 */
function hasAmbiguousPeerShape(scoped: string): boolean {
  const parts = scoped.split(':');
  if (parts[0] === 'agent') return false;
  const shapes = [
    (parts[0] === 'direct' || parts[0] === 'dm') && Boolean(parts[1]),
    Boolean(parts[0]) && PEER_KINDS.has(parts[1] ?? '') && Boolean(parts[2]),
    Boolean(parts[0]) && Boolean(parts[1]) && PEER_KINDS.has(parts[2] ?? '') && Boolean(parts[3]),
    legacyChatType(scoped) !== undefined,
  ];
  return shapes.filter(Boolean).length > 1;
}

/** The channel and chat type a key names in one of the peer shapes (none when ambiguous). */
function peerShape(scoped: string): { channel?: string; chatType: string } | undefined {
  const parts = scoped.split(':');
  if (parts[0] === 'agent' || hasAmbiguousPeerShape(scoped)) return undefined;
  let channel: string | undefined;
  let kind: string | undefined;
  let idAt = 0;
  if (parts[0] === 'direct' || parts[0] === 'dm') {
    kind = parts[0];
    idAt = 1;
  } else if (parts[0] && PEER_KINDS.has(parts[1] ?? '')) {
    channel = parts[0];
    kind = parts[1];
    idAt = 2;
  } else if (parts[0] && parts[1] && PEER_KINDS.has(parts[2] ?? '')) {
    channel = parts[0];
    kind = parts[2];
    idAt = 3;
  }
  if (kind === undefined || !parts[idAt]) return undefined;
  return { ...(channel === undefined ? {} : { channel }), chatType: kind === 'dm' ? 'direct' : kind };
}

function keyChatType(sessionKey: string): string {
  const scoped = withoutAgentPrefix(sessionKey);
  const normalised = scoped === undefined ? '' : normalise(scoped);
  if (normalised === '' || normalised.startsWith('agent:')) return '';
  return peerShape(normalised)?.chatType ?? legacyChatType(normalised) ?? '';
}

// As OpenClaw does, the shape is read from the key as given (only the channel is lower-cased).
function keyChannel(sessionKey: string): string {
  const scoped = withoutAgentPrefix(sessionKey);
  return scoped === undefined ? '' : normalise(peerShape(scoped)?.channel);
}

function firstChannel(channel: SendPolicyInput['channel']): string {
  const candidates = Array.isArray(channel) ? channel : [channel];
  for (const candidate of candidates) {
    const normalised = normalise(candidate);
    if (normalised !== '') return normalised;
  }
  return '';
}

interface SessionFacts {
  channel: string;
  chatType: string;
  fullKey: string;
  keyWithoutAgent: string;
}

/**
 * A rule matches when every field it names matches. A field that is absent or blank is not
 * named (so `{action: "deny"}` with no match denies everything).
 */
function ruleMatches(match: SendPolicyRule['match'], facts: SessionFacts): boolean {
  if (match === undefined || match === null) return true;
  if (typeof match !== 'object') return false;
  const channel = normalise(match.channel);
  if (channel !== '' && channel !== facts.channel) return false;
  const chatType = normaliseChatType(match.chatType);
  if (chatType !== '' && chatType !== facts.chatType) return false;
  const rawKeyPrefix = normalise(match.rawKeyPrefix);
  if (rawKeyPrefix !== '' && !facts.fullKey.startsWith(rawKeyPrefix)) return false;
  const keyPrefix = normalise(match.keyPrefix);
  if (keyPrefix !== '' && !facts.fullKey.startsWith(keyPrefix) && !facts.keyWithoutAgent.startsWith(keyPrefix)) {
    return false;
  }
  return true;
}

/**
 * The send decision for a session: the entry override wins outright; no policy allows; a key
 * that fits two peer shapes denies (as OpenClaw does); any
 * matching deny rule denies wherever it is in the list (the first such index is reported); else
 * the first matching allow rule allows; else the policy's default (allow when unset). Rules with
 * an action other than allow/deny are ignored (config validation reports them).
 */
export function evaluateSendPolicy(input: SendPolicyInput, policy?: SendPolicyConfig | null): SendPolicyDecision {
  const override = asDecision(input.entryOverride);
  if (override !== undefined) return { decision: override, rule: null, source: 'entry' };
  if (policy === undefined || policy === null) return { decision: 'allow', rule: null, source: 'none' };

  const sessionKey = typeof input.sessionKey === 'string' ? input.sessionKey : '';
  const scoped = withoutAgentPrefix(sessionKey);
  if (scoped !== undefined && hasAmbiguousPeerShape(normalise(scoped))) return { decision: 'deny', rule: null, source: 'key' };
  const facts: SessionFacts = {
    channel: firstChannel(input.channel) || keyChannel(sessionKey),
    chatType: sessionChatType(input.chatType) || keyChatType(sessionKey),
    fullKey: normalise(sessionKey),
    keyWithoutAgent: normalise(scoped),
  };

  let firstAllow: number | null = null;
  const rules = Array.isArray(policy.rules) ? policy.rules : [];
  for (const [index, rule] of rules.entries()) {
    if (rule === null || typeof rule !== 'object') continue;
    const action = asDecision(rule.action);
    if (action === undefined || !ruleMatches(rule.match, facts)) continue;
    if (action === 'deny') return { decision: 'deny', rule: index, source: 'rule' };
    firstAllow ??= index;
  }
  if (firstAllow !== null) return { decision: 'allow', rule: firstAllow, source: 'rule' };
  return { decision: asDecision(policy.default) ?? 'allow', rule: null, source: 'default' };
}
