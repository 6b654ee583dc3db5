// Normalisation of raw route input (from flags, NDJSON or the socket) into a RouteInput.
// Every rejection names the JSON path of the offending field.

import { SwitchboardError, normalizeAccountId } from '../core/index.js';
import type { PeerKind } from '../config/types.js';
import type { Peer, RouteInput } from './types.js';

type InputErrorCode = 'BAD_INPUT' | 'BAD_MESSAGE';

const PEER_KINDS: Record<string, PeerKind> = { direct: 'direct', dm: 'direct', group: 'group', channel: 'channel' };

export function normalizePeerKind(raw: unknown): PeerKind | undefined {
  // The canonical words as they are, compared before anything is made of them: a lookup by a
  // string fresh from JSON.parse first looks the string up in V8's table of property names.
  if (raw === 'direct' || raw === 'group' || raw === 'channel') return raw;
  return typeof raw === 'string' ? PEER_KINDS[raw.trim().toLowerCase()] : undefined;
}

function fail(code: InputErrorCode, path: string, problem: string): never {
  throw new SwitchboardError(code, `"${path}" ${problem}`, { details: { path } });
}

/** Strings pass trimmed, finite numbers are stringified; anything else is a typed error. */
function optionalText(value: unknown, path: string, code: InputErrorCode): string | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value === 'string') return value.trim();
  if (typeof value === 'number' && Number.isFinite(value)) return String(value);
  return fail(code, path, `must be a string, got ${describeType(value)}`);
}

export function describeType(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  return typeof value === 'object' ? 'an object' : `a ${typeof value}`;
}

/** Accepts `{kind, id}` or the shorthand string `"kind:id"` (the id may itself contain `:`). */
export function normalizePeer(raw: unknown, path: string, code: InputErrorCode = 'BAD_INPUT'): Peer | undefined {
  if (raw === undefined || raw === null) return undefined;
  let kindRaw: unknown;
  let idRaw: unknown;
  if (typeof raw === 'string') {
    const colon = raw.indexOf(':');
    if (colon < 0) fail(code, path, `must be "kind:id" (e.g. "direct:123"), got "${raw}"`);
    kindRaw = raw.slice(0, colon);
    idRaw = raw.slice(colon + 1);
  } else if (typeof raw === 'object' && !Array.isArray(raw)) {
    kindRaw = (raw as Record<string, unknown>).kind;
    idRaw = (raw as Record<string, unknown>).id;
  } else {
    return fail(code, path, `must be an object {kind, id} or a "kind:id" string, got ${describeType(raw)}`);
  }
  const kind = normalizePeerKind(kindRaw);
  if (kind === undefined) {
    fail(code, `${path}.kind`, `must be one of direct, dm, group, channel, got ${JSON.stringify(kindRaw ?? null)}`);
  }
  const id = optionalText(idRaw, `${path}.id`, code) ?? '';
  return { kind, id };
}

/** Most inputs name no roles: one shared empty list rather than one each. */
const NO_ROLES: readonly string[] = Object.freeze([]);

/**
 * Member role ids exactly as given (OpenClaw compares them untrimmed, and any non-empty list
 * counts for the guild+roles tier); numbers are stringified, null items skipped, anything else
 * is a typed error.
 */
function roleList(raw: unknown, path: string, code: InputErrorCode): readonly string[] {
  if (raw === undefined || raw === null || (Array.isArray(raw) && raw.length === 0)) return NO_ROLES;
  if (!Array.isArray(raw)) return fail(code, path, `must be an array of strings, got ${describeType(raw)}`);
  const roles: string[] = [];
  for (let i = 0; i < raw.length; i++) {
    const role: unknown = raw[i];
    // A null item names no role (the message schema allows it); a blank string is kept.
    if (role === null) continue;
    if (typeof role === 'string') roles.push(role);
    else if (typeof role === 'number' && Number.isFinite(role)) roles.push(String(role));
    else fail(code, `${path}[${i}]`, `must be a string, got ${describeType(role)}`);
  }
  return roles;
}

/** Normalises the routing fields of a raw object (a route input or an inbound message). */
export function normalizeRouteInput(raw: unknown, code: InputErrorCode = 'BAD_INPUT'): RouteInput {
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) {
    return fail(code, '$', `must be a JSON object, got ${describeType(raw)}`);
  }
  const obj = raw as Record<string, unknown>;
  const channelRaw = obj.channel;
  if (channelRaw === undefined || channelRaw === null) fail(code, 'channel', 'is required');
  if (typeof channelRaw !== 'string') fail(code, 'channel', `must be a string, got ${describeType(channelRaw)}`);
  const channel = channelRaw.trim().toLowerCase();
  if (channel === '') fail(code, 'channel', 'must not be blank');

  // Every field is set, absent ones to undefined, in one literal: inputs of every shape then
  // share one hidden class, and the routing code that reads them stays monomorphic (building
  // the object field by field gave each combination of fields its own, and cost twice as much).
  const input: RouteInput = {
    channel,
    accountId: normalizeAccountId(optionalText(obj.accountId, 'accountId', code)),
    memberRoleIds: roleList(obj.memberRoleIds, 'memberRoleIds', code),
    peer: normalizePeer(obj.peer, 'peer', code),
    parentPeer: normalizePeer(obj.parentPeer, 'parentPeer', code),
    guildId: optionalText(obj.guildId, 'guildId', code) || undefined,
    teamId: optionalText(obj.teamId, 'teamId', code) || undefined,
    threadId: optionalText(obj.threadId, 'threadId', code) || undefined,
  };
  if (isTelegramTopic(input) && !input.peer!.id.includes(TOPIC_MARKER)) {
    // OpenClaw makes a Telegram forum topic its own peer, `<chatId>:topic:<threadId>`, with the
    // group as parent peer: a binding on the group still applies (parent tier), and the key is
    // `…:group:<chatId>:topic:<threadId>` (no thread suffix).
    input.parentPeer ??= { kind: 'group', id: input.peer!.id };
    input.peer = { kind: 'group', id: `${input.peer!.id}${TOPIC_MARKER}${input.threadId}` };
  }
  return input;
}

const TOPIC_MARKER = ':topic:';

/** A Telegram group message in a forum topic: the topic is part of the peer, not a thread suffix. */
export function isTelegramTopic(input: Pick<RouteInput, 'channel' | 'peer' | 'threadId'>): boolean {
  return input.channel === 'telegram' && input.peer?.kind === 'group' && input.threadId !== undefined;
}
