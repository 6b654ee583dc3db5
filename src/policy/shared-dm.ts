// The privacy rule for shared direct-message sessions: under `dmScope: "main"` every DM sender of
// an agent lands in one session and sees the others' history. The session remembers the direct
// peers it has heard from (`dmSenders`); one rule decides when that deserves a warning. Pure.

import { parseSessionKey } from '../routing/index.js';

/** A direct peer heard on a shared session: its channel, its peer id and, when known, a name. */
export interface DmSender {
  channel: string;
  id: string;
  name?: string;
}

/** Senders a session remembers: enough to name them in a warning; past it the list says "at least". */
export const DM_SENDERS_KEPT = 10;

/** The message fields the recorder reads (a subset of the planner's message). */
export interface DmMessage {
  kind: string;
  channel: string;
  peer?: { kind: string; id: string };
  sender?: { id?: string; name?: string };
}

function sendersOf(value: unknown): DmSender[] {
  if (!Array.isArray(value)) return [];
  return value.filter((s): s is DmSender => s !== null && typeof s === 'object' && typeof s.channel === 'string' && typeof s.id === 'string');
}

/**
 * Remembers the direct peer of a user message on a session whose key names no direct peer of its
 * own (`agent:<id>:main` under dmScope main, an explicit key): that is where several people can
 * end up in one transcript. A per-peer key (`…:direct:<peer>`) is one person's by construction
 * (identity-linked accounts of one person included), so nothing is kept there.
 */
/** The peer kind a session key names (null: not a parseable key); remembered, it is asked per DM. */
const peerKinds = new Map<string, string | undefined | null>();
const PEER_KINDS_KEPT = 4096;

function peerKindOfKey(sessionKey: string): string | undefined | null {
  let kind = peerKinds.get(sessionKey);
  if (kind === undefined && !peerKinds.has(sessionKey)) {
    try {
      kind = parseSessionKey(sessionKey).peerKind;
    } catch {
      kind = null;
    }
    if (peerKinds.size >= PEER_KINDS_KEPT) peerKinds.clear();
    peerKinds.set(sessionKey, kind);
  }
  return kind;
}

export function noteDmSender(entry: Record<string, unknown>, message: DmMessage, sessionKey: string): void {
  if (message.kind !== 'user' || message.peer?.kind !== 'direct') return;
  const ownPeer = peerKindOfKey(sessionKey);
  if (ownPeer === null || ownPeer === 'direct') return;
  const senders = sendersOf(entry.dmSenders);
  if (senders.some((s) => s.channel === message.channel && s.id === message.peer!.id)) return;
  if (senders.length >= DM_SENDERS_KEPT) return;
  const sender: DmSender = { channel: message.channel, id: message.peer.id };
  if (message.sender?.name) sender.name = message.sender.name;
  entry.dmSenders = [...senders, sender];
}

export interface SharedDmWarning {
  sessionKey: string;
  senders: DmSender[];
  /** The session remembers only DM_SENDERS_KEPT senders: there may be more. */
  atLeast: boolean;
  message: string;
}

/** `Alice (telegram:111)`, or the bare `telegram:111` when no name is known. */
export function describeDmSender(sender: DmSender): string {
  const address = `${sender.channel}:${sender.id}`;
  return sender.name ? `${sender.name} (${address})` : address;
}

/**
 * THE rule: a session in a `dmScope: "main"` config that more than one direct peer has written
 * to (`senders`, plus for `route explain` the peer being explained) shares one transcript between
 * people. Returns the warning naming them and the fix, or null. Peers are told apart by channel
 * and id: the same person on two apps counts twice (dmScope main applies no identity links).
 */
export function sharedDmWarning(input: { dmScope: string | undefined; sessionKey: string; senders: unknown }): SharedDmWarning | null {
  if ((input.dmScope ?? 'main') !== 'main') return null;
  const seen = new Set<string>();
  const senders = sendersOf(input.senders).filter((s) => {
    const id = `${s.channel}\u0000${s.id}`;
    if (seen.has(id)) return false;
    seen.add(id);
    return true;
  });
  if (senders.length < 2) return null;
  const atLeast = senders.length >= DM_SENDERS_KEPT;
  const count = `${atLeast ? 'at least ' : ''}${senders.length}`;
  const message =
    `session.dmScope is "main": ${count} DM senders share ${input.sessionKey} and each one's messages are in the others' conversation (${senders.map(describeDmSender).join(', ')}). ` +
    'Unless they are one person, set session.dmScope to "per-peer" (one session per sender; identityLinks join one person\'s accounts) or "per-channel-peer" (one per sender and app).';
  return { sessionKey: input.sessionKey, senders, atLeast, message };
}
