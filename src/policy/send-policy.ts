// sendPolicy: whether a reply produced for a session may be delivered, from the entry's own
// override, the configured rules (any matching deny wins) and the default.

import type { SendPolicyRule } from '../config/types.js';

export type SendDecision = 'allow' | 'deny';

/** `entry` = the session's `/send` override, `rule` = a matching rule, `default` = the policy's
 * default, `none` = no policy configured at all. */
/** `unknown`: the session's entry could not be read, so its own setting is not known (the reply is held). */
export type SendPolicySource = 'entry' | 'rule' | 'default' | 'none' | 'unknown';

export interface SendPolicyInput {
  sessionKey: string;
  channel?: string | null;
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

const AGENT_PREFIX = /^agent:[^:]+:/;

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
 * The send decision for a session: the entry override wins outright; no policy allows; any
 * matching deny rule denies wherever it is in the list (the first such index is reported); else
 * the first matching allow rule allows; else the policy's default (allow when unset). Rules with
 * an action other than allow/deny are ignored (config validation reports them).
 */
export function evaluateSendPolicy(input: SendPolicyInput, policy?: SendPolicyConfig | null): SendPolicyDecision {
  const override = asDecision(input.entryOverride);
  if (override !== undefined) return { decision: override, rule: null, source: 'entry' };
  if (policy === undefined || policy === null) return { decision: 'allow', rule: null, source: 'none' };

  const fullKey = normalise(input.sessionKey);
  const facts: SessionFacts = {
    channel: normalise(input.channel),
    chatType: normaliseChatType(input.chatType),
    fullKey,
    keyWithoutAgent: fullKey.replace(AGENT_PREFIX, ''),
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
