// The one session-key builder and its parser. Every path that needs a key (routing, ingest,
// explicit keys, cron) goes through buildSessionKey / normalizeExplicitSessionKey.

import { SwitchboardError, normalizeAgentId } from '../core/index.js';
import type { DmScope, GroupScope, PeerKind } from '../config/types.js';
import type { KeyDerivation, Peer } from './types.js';

export const THREAD_MARKER = ':thread:';

/** Identity links compiled once per config: lower-cased entry → canonical name + walk order. */
export interface IdentityLinkTable {
  byEntry: Map<string, { canonical: string; entry: string; order: number }>;
  /**
   * Every prefix of an entry that ends before one of its colons (`telegram` of `telegram:123`):
   * a `channel:id` candidate is looked up only for a channel in here, sparing most messages
   * the building of a key that cannot match.
   */
  scopes: Set<string>;
}

/** A config that lists thousands of peers twice needs a few examples, not thousands of lines. */
const MAX_OVERLAP_WARNINGS = 5;

export function compileIdentityLinks(links: Record<string, string[]> | undefined, warnings: string[] = []): IdentityLinkTable {
  const byEntry = new Map<string, { canonical: string; entry: string; order: number }>();
  let order = 0;
  let overlaps = 0;
  for (const [name, entries] of Object.entries(links ?? {})) {
    if (!Array.isArray(entries)) continue;
    // Canonical names are trimmed and blank ones skipped, as OpenClaw does (2026.7.1 and 2026.9.6):
    // a name used as written put its spaces into the session key.
    const canonical = name.trim();
    if (canonical === '') continue;
    for (const entry of entries) {
      const key = String(entry).trim().toLowerCase();
      // The first occurrence in walk order wins, so later duplicates are ignored.
      const earlier = byEntry.get(key);
      if (key !== '' && earlier === undefined) byEntry.set(key, { canonical, entry: key, order });
      // Said, as OpenClaw is silent about it: the second name never gets this peer.
      else if (earlier !== undefined && earlier.canonical !== canonical && overlaps++ < MAX_OVERLAP_WARNINGS) {
        warnings.push(`session.identityLinks: "${key}" is listed under "${earlier.canonical}" and "${canonical}"; "${earlier.canonical}" (the first) is used`);
      }
      order++;
    }
  }
  const scopes = new Set<string>();
  for (const key of byEntry.keys()) for (let at = key.indexOf(':'); at >= 0; at = key.indexOf(':', at + 1)) scopes.add(key.slice(0, at));
  return { byEntry, scopes };
}

/** Finds the canonical identity of a direct peer: candidates `id` and `channel:id`, earliest in walk order. */
export function lookupIdentityLink(
  table: IdentityLinkTable,
  channel: string,
  peerId: string,
): { canonical: string; entry: string } | undefined {
  if (table.byEntry.size === 0) return undefined;
  const bare = table.byEntry.get(peerId.toLowerCase());
  // A lower-case channel (routing's always is) stays the prefix of the lower-cased candidate.
  const cannotMatch = !table.scopes.has(channel) && channel.toLowerCase() === channel;
  const scoped = cannotMatch ? undefined : table.byEntry.get(`${channel}:${peerId}`.toLowerCase());
  const hit = bare && scoped ? (bare.order <= scoped.order ? bare : scoped) : (bare ?? scoped);
  return hit ? { canonical: hit.canonical, entry: hit.entry } : undefined;
}

export function normalizeMainKey(raw: unknown): string {
  const key = typeof raw === 'string' ? raw.trim().toLowerCase() : '';
  return key === '' ? 'main' : key;
}

export interface SessionKeyParams {
  agentId: string;
  channel: string;
  accountId: string;
  peer?: Peer;
  dmScope: DmScope;
  /** `main`: group and channel peers share the main session (agents.entries configs). */
  groupScope?: GroupScope;
  mainKey: string;
  identityLinks: IdentityLinkTable;
  threadId?: string;
}

/**
 * Channels whose group ids are opaque and case-sensitive: OpenClaw keeps their case in keys, in
 * both config generations (its resolver does, 2026.7.1 and 2026.9.6 alike, on agents.list configs
 * too).
 */
function keepsCase(channel: string, kind: PeerKind): boolean {
  return (channel === 'signal' && kind === 'group') || (channel === 'matrix' && kind !== 'direct');
}

export interface BuiltSessionKey {
  sessionKey: string;
  mainSessionKey: string;
  derivation: KeyDerivation;
}

function peerIdOrUnknown(id: string): string {
  const trimmed = id.trim();
  return trimmed === '' ? 'unknown' : trimmed;
}

/** Builds `agent:<agentId>:<rest>` from a route, the dmScope policy, identity links and a thread. */
export function buildSessionKey(params: SessionKeyParams): BuiltSessionKey {
  const { dmScope, mainKey } = params;
  const mainSessionKey = mainSessionKeyOf(params.agentId, mainKey);
  const derivation: KeyDerivation = { dmScope, mainKey };
  if (params.groupScope !== undefined) derivation.groupScope = params.groupScope;
  const sessionKey = sessionKeyWith(params, mainSessionKey, derivation);
  return { sessionKey, mainSessionKey, derivation };
}

/** `agent:<agentId>:<mainKey>`, the key every main-scoped message of an agent shares. */
export function mainSessionKeyOf(agentId: string, mainKey: string): string {
  return `agent:${agentId}:${mainKey}`;
}

/**
 * The session key of buildSessionKey given its main session key (`mainSessionKeyOf`), for callers
 * that need only the key: `derivation`, when given, gets the identity link and thread suffix used.
 */
export function sessionKeyWith(params: SessionKeyParams, mainSessionKey: string, derivation?: KeyDerivation): string {
  const { agentId, channel, accountId, peer, dmScope } = params;
  let baseKey: string;
  if (!peer) {
    baseKey = mainSessionKey;
  } else if (peer.kind === 'direct') {
    if (dmScope === 'main') {
      baseKey = mainSessionKey;
    } else {
      let peerId = peerIdOrUnknown(peer.id);
      const link = lookupIdentityLink(params.identityLinks, channel, peerId);
      if (link) {
        peerId = link.canonical;
        if (derivation) derivation.identityLink = link;
      }
      peerId = peerId.toLowerCase();
      if (dmScope === 'per-peer') baseKey = `agent:${agentId}:direct:${peerId}`;
      else if (dmScope === 'per-channel-peer') baseKey = `agent:${agentId}:${channel}:direct:${peerId}`;
      else baseKey = `agent:${agentId}:${channel}:${accountId}:direct:${peerId}`;
    }
  } else if (params.groupScope === 'main') {
    baseKey = mainSessionKey;
  } else {
    const peerId = peerIdOrUnknown(peer.id);
    baseKey = `agent:${agentId}:${channel}:${peer.kind}:${keepsCase(channel, peer.kind) ? peerId : peerId.toLowerCase()}`;
  }
  const sessionKey = appendThreadSuffix(baseKey, params.threadId);
  if (derivation && sessionKey !== baseKey) derivation.threadSuffix = sessionKey.slice(baseKey.length);
  return sessionKey;
}

/** `<baseKey>:thread:<threadId>` (thread id lower-cased); no thread → the base key. */
export function appendThreadSuffix(baseKey: string, threadId: string | undefined): string {
  const thread = threadId?.trim().toLowerCase();
  return thread ? `${baseKey}${THREAD_MARKER}${thread}` : baseKey;
}

export type SessionKeyKind = 'main' | 'direct' | 'group' | 'channel' | 'cron' | 'subagent' | 'other';

export interface ParsedSessionKey {
  agentId: string;
  rest: string;
  kind: SessionKeyKind;
  channel?: string;
  peerKind?: PeerKind;
  peerId?: string;
  threadId?: string;
}

/** `agent:<agentId>:<rest>`; one object, not a RegExp made per call (a listing parses every key it shows). */
const AGENT_KEY = /^agent:([^:]+):(.+)$/;

function isPeerKindPart(part: string | undefined): boolean {
  return part === 'direct' || part === 'group' || part === 'channel';
}

/** Splits an `agent:` key into its parts; a malformed key is an error, never a guess. */
export function parseSessionKey(key: string, mainKey = 'main'): ParsedSessionKey {
  const match = AGENT_KEY.exec(key);
  if (!match || normalizeAgentId(match[1]) !== match[1]) {
    throw new SwitchboardError('BAD_INPUT', `malformed session key "${key}": expected agent:<agentId>:<rest>`, {
      details: { sessionKey: key },
    });
  }
  const agentId = match[1];
  const rest = match[2];
  const parsed: ParsedSessionKey = { agentId, rest, kind: 'other' };
  let base = rest;
  const threadAt = rest.lastIndexOf(THREAD_MARKER);
  if (threadAt >= 0) {
    parsed.threadId = rest.slice(threadAt + THREAD_MARKER.length);
    base = rest.slice(0, threadAt);
  }
  const parts = base.split(':');
  if (base === mainKey) parsed.kind = 'main';
  else if (parts[0] === 'cron') parsed.kind = 'cron';
  else if (parts[0] === 'subagent') parsed.kind = 'subagent';
  else if (parts[0] === 'direct') {
    // Fields set one by one, no Object.assign or findIndex closure per key.
    parsed.kind = 'direct';
    parsed.peerKind = 'direct';
    parsed.peerId = parts.slice(1).join(':');
  } else {
    // <channel>:[<account>:]<direct|group|channel>:<peerId>; the peer id may itself contain ':'.
    const kindAt = isPeerKindPart(parts[1]) ? 1 : isPeerKindPart(parts[2]) ? 2 : -1;
    if (kindAt > 0) {
      const peerKind = parts[kindAt] as PeerKind;
      parsed.kind = peerKind;
      parsed.channel = parts[0];
      parsed.peerKind = peerKind;
      parsed.peerId = parts.slice(kindAt + 1).join(':');
    }
  }
  return parsed;
}

/**
 * An explicit `sessionKey` on a message: `agent:<id>:<rest>` as given, a bare `foo` →
 * `agent:<owner>:foo`. Without an owner (agents.entries, explicit ownership, no system agent) a
 * bare key is NO_OWNER: it must name its agent rather than be given to a guessed one.
 */
export function normalizeExplicitSessionKey(raw: string, defaultAgentId: string | undefined): string {
  const key = raw.trim().toLowerCase();
  if (key === '') throw new SwitchboardError('BAD_INPUT', 'session key must not be blank', { details: { path: 'sessionKey' } });
  if (key.startsWith('agent:')) {
    parseSessionKey(key);
    return key;
  }
  if (defaultAgentId === undefined) {
    throw new SwitchboardError('NO_OWNER', `session key "${key}" names no agent and the config has no fallback owner`, {
      hint: `write it as agent:<agentId>:${key}, or set agents.defaults.systemAgent.agentId`,
      details: { path: 'sessionKey' },
    });
  }
  return `agent:${defaultAgentId}:${key}`;
}

/**
 * The key normalizeExplicitSessionKey made from `raw`, with `raw`'s own case: a Signal group's or a
 * Matrix room's key keeps its case in the store (keepsCase), and that is the key `sessions` lists,
 * so a command given a key as listed looks this one up too. A bare key keeps the `agent:<owner>:`
 * prefix it was given; a full key is the key as typed.
 */
export function explicitSessionKeyAsTyped(raw: string, normalized: string): string {
  const typed = raw.trim();
  const lower = typed.toLowerCase();
  if (lower.startsWith('agent:') || !normalized.endsWith(lower)) return typed;
  return `${normalized.slice(0, normalized.length - lower.length)}${typed}`;
}

/** The cron key family: `agent:<agentId>:cron:<jobId>`. */
export function cronSessionKey(agentId: string, jobId: string): string {
  const job = jobId.trim().toLowerCase();
  if (job === '') throw new SwitchboardError('BAD_INPUT', '"cron.jobId" must not be blank', { details: { path: 'cron.jobId' } });
  return `agent:${agentId}:cron:${job}`;
}
