// What one inbound message does to its session entry: duplicate check, new instance, rotation
// (command, daily, idle, cron run) and which event moves which timestamp. Pure: no I/O, no clock.

import type { SessionConfig } from '../config/types.js';
import { applyMessageLabels, type LabelledMessage } from './entry-labels.js';
import { noteDmSender } from './shared-dm.js';
import { duplicateKey } from '../core/index.js';
import { DUPLICATE_WINDOW_MS, duplicateKeySeenAt, rememberDuplicateKey, shareMemory } from './duplicate-memory.js';
import { carryOverToNewInstance } from './usage.js';
import { evaluateFreshness, parseResetTrigger, resolveResetPolicy, resolveResetTriggers, sessionTypeFor, type ResetPolicy } from './reset.js';

/** The entry fields this planner reads and writes; other fields pass through untouched. */
export interface PlannedEntry {
  sessionId: string;
  updatedAt: number;
  sessionStartedAt?: number;
  lastInteractionAt?: number;
  sessionFile?: string;
  chatType?: 'direct' | 'group' | 'channel';
  channel?: string;
  accountId?: string;
  displayName?: string;
  origin?: Record<string, unknown>;
  /** OpenClaw writes `{channel}` alone for a row it has no target for yet: an address without `to`. */
  deliveryContext?: Omit<DeliveryAddress, 'to'> & { to?: string };
  deliveryOwner?: DeliveryOwner;
  model?: string;
  modelOverride?: string;
  /** The duplicate memory (policy/duplicate-memory.ts). */
  recentMessageIds?: unknown;
  [extra: string]: unknown;
}

/** Where output goes, in OpenClaw's target form (`deliveryContext`). */
export interface DeliveryAddress {
  channel: string;
  to: string;
  accountId?: string;
  threadId?: string;
}

/**
 * The sender whose messages move a shared session's address: the first DM peer of the main
 * session, or whoever `sessions pin-route` named (`pinned`).
 */
export interface DeliveryOwner {
  channel: string;
  peer: { kind: string; id: string };
  accountId?: string;
  pinned?: boolean;
}

export type PlanMessageKind = 'user' | 'heartbeat' | 'system' | 'cron';

export interface PlanMessage {
  kind: PlanMessageKind;
  text?: string;
  messageId?: string;
  sender?: { id?: string; name?: string };
  channel: string;
  accountId: string;
  peer?: { kind: string; id: string };
  parentPeer?: { kind: string; id: string };
  threadId?: string;
  group?: LabelledMessage['group'];
  lineage?: LabelledMessage['lineage'];
}

export type RotationReason = 'daily' | 'idle' | 'command' | 'cron';

export interface SessionPlan {
  entry: PlannedEntry;
  /** Set when this message started a new instance of an existing address. */
  rotation?: { reason: RotationReason; previousSessionId: string; previousSessionFile?: string };
  /** True when this message created the address (first message ever). */
  created: boolean;
  duplicate: boolean;
  /** The text to record after a reset trigger was stripped (undefined for no text). */
  text?: string;
  /** A bare reset trigger (`/new`): nothing to record but the reset notice. */
  commandOnly: boolean;
  /** Where a reply to this message goes (see planDelivery); undefined when there is nowhere. */
  replyTo?: DeliveryAddress;
  /** The message's key in the duplicate memory (core duplicateKey), when it has a messageId: what is remembered, and forgotten if it is not taken. */
  duplicateKey?: string;
}

export interface PlanContext {
  sessionKey: string;
  session: SessionConfig | undefined;
  now: number;
  /**
   * What a removed entry of this key remembered (store/removed-memory.ts): consulted when the
   * key has no entry, so a resend of a message recorded before the removal is still a duplicate.
   */
  removed?: { sessionId: string; recentMessageIds: string };
  /**
   * When the key's instance `sessionId` began by its transcript header, for an entry without a
   * usable sessionStartedAt (OpenClaw's reset writes none): the start its reset check uses.
   */
  transcriptStarted?: { sessionId: string; at: number };
  newSessionId: () => string;
  /** File name of a transcript for a sessionId (thread sessions get a topic suffix). */
  transcriptName: (sessionId: string, threadId?: string) => string;
  /**
   * The address collects the DMs of several senders (the agent's main session, e.g. under
   * dmScope "main"): only its owner's messages move it.
   */
  sharedAddress?: boolean;
  /** The linked identity of a peer (session.identityLinks), so an owner is known on every app. */
  identityOf?: (channel: string, peerId: string) => string | undefined;
}

export function resetPolicyFor(session: SessionConfig | undefined, sessionKey: string, message: Pick<PlanMessage, 'channel' | 'threadId' | 'peer'>): ResetPolicy {
  const type = sessionTypeFor({ sessionKey, threadId: message.threadId, peerKind: message.peer?.kind });
  return resolveResetPolicy(session, { channel: message.channel, type });
}

function chatTypeOf(peer: PlanMessage['peer']): PlannedEntry['chatType'] {
  if (!peer) return undefined;
  return peer.kind === 'direct' ? 'direct' : peer.kind === 'channel' ? 'channel' : 'group';
}

/**
 * The one rotation rule: a fresh instance at the same address — new id, transcript name and
 * clocks; what the address keeps (its settings, labels, delivery, switchboard's bookkeeping and
 * the settings OpenClaw's own reset keeps) carries over, the old instance's state does not
 * (carryOverToNewInstance in usage.ts).
 */
export function rotateEntry(
  entry: PlannedEntry,
  ctx: Pick<PlanContext, 'sessionKey' | 'now' | 'newSessionId' | 'transcriptName'>,
  rotation: { reason: string; threadId: string | undefined },
): PlannedEntry {
  const sessionId = ctx.newSessionId();
  const next = { ...entry } as PlannedEntry;
  shareMemory(entry, next);
  carryOverToNewInstance(next, { sessionKey: ctx.sessionKey, reason: rotation.reason, sessionId });
  next.sessionId = sessionId;
  next.sessionFile = ctx.transcriptName(sessionId, rotation.threadId);
  next.sessionStartedAt = ctx.now;
  next.lastInteractionAt = ctx.now;
  next.updatedAt = ctx.now;
  return next;
}

/**
 * Plans the effect of one message on its session entry (undefined entry = a new address). The
 * planned entry is a copy; with `editInPlace`, the caller says that `existing` is already its own
 * copy (made earlier in the same planning pass, held by nobody else), and a message that keeps
 * the instance edits it instead of copying it again — a batch plans dozens of messages per
 * session, and each copy lived as long as the batch.
 */
export function planSessionMessage(existing: PlannedEntry | undefined, message: PlanMessage, ctx: PlanContext, editInPlace = false): SessionPlan {
  const { now } = ctx;
  // A key without an entry still knows what its removed entry recorded lately.
  const memory = existing ?? ctx.removed;
  const seenKey = message.messageId === undefined ? undefined : duplicateKey(message, message.messageId);
  if (memory && seenKey !== undefined) {
    const seenAt = duplicateKeySeenAt(memory, seenKey);
    // An id remembered "in the future" (the clock stepped back since) is a duplicate too: its record
    // is on disk. Compared both ways, a step back of over 5 minutes let every resend be recorded again.
    if (typeof seenAt === 'number' && now - seenAt < DUPLICATE_WINDOW_MS) {
      // For a removed entry: the instance that recorded it, which nothing else is known of.
      const entry = existing ?? { sessionId: memory.sessionId, updatedAt: seenAt };
      return { entry, created: false, duplicate: true, text: message.text, commandOnly: false, replyTo: planDelivery(existing, message, ctx).replyTo, duplicateKey: seenKey };
    }
  }

  let entry: PlannedEntry;
  let rotation: SessionPlan['rotation'];
  let text = message.text;
  let commandOnly = false;
  const created = existing === undefined;
  // A reset trigger is a command on any address, as in OpenClaw: its word never reaches the
  // transcript, `/new <model>` sets the model. A new address has nothing to rotate.
  let model: string | undefined;
  let triggered = false;
  if (message.kind === 'user' && text !== undefined) {
    const trigger = parseResetTrigger(text, resolveResetTriggers(ctx.session));
    if (trigger) {
      triggered = true;
      text = trigger.rest === '' ? undefined : trigger.rest;
      commandOnly = text === undefined;
      model = trigger.model;
    }
  }

  if (!existing) {
    const sessionId = ctx.newSessionId();
    entry = {
      sessionId,
      sessionFile: ctx.transcriptName(sessionId, message.threadId),
      updatedAt: now,
      sessionStartedAt: now,
      lastInteractionAt: now,
    };
    // The new entry goes on remembering what the removed one recorded.
    if (ctx.removed !== undefined) entry.recentMessageIds = ctx.removed.recentMessageIds;
    if (model) entry.model = entry.modelOverride = model;
  } else {
    let reason: RotationReason | undefined;
    if (message.kind === 'cron') {
      // Cron jobs never reuse history: every run is a fresh instance.
      reason = 'cron';
    } else if (triggered) {
      reason = 'command';
    } else if (message.kind === 'user') {
      // Only real user messages find a session stale; heartbeats and system events never
      // start a new instance (`switchboard maintain` applies due resets without a message).
      const header = ctx.transcriptStarted;
      const times = header !== undefined && header.sessionId === existing.sessionId ? { sessionStartedAt: existing.sessionStartedAt, lastInteractionAt: existing.lastInteractionAt, transcriptStartedAt: header.at } : existing;
      const freshness = evaluateFreshness(times, resetPolicyFor(ctx.session, ctx.sessionKey, message), now);
      if (!freshness.fresh) reason = freshness.staleReason;
    }
    // A new instance is always a new object: the entry the earlier messages planned stays as it was.
    if (editInPlace && reason === undefined) entry = existing;
    else {
      entry = { ...existing };
      shareMemory(existing, entry);
    }
    if (model) entry.model = entry.modelOverride = model;
    if (reason) {
      rotation = { reason, previousSessionId: existing.sessionId, previousSessionFile: existing.sessionFile };
      entry = rotateEntry(entry, ctx, { reason, threadId: message.threadId });
      // A cron run is not an interaction: its fresh instance has no interaction time.
      if (reason === 'cron') delete entry.lastInteractionAt;
    }
  }

  const delivery = planDelivery(entry, message, ctx);
  applyMessage(entry, message, now, created, delivery);
  if (seenKey !== undefined) rememberDuplicateKey(entry, seenKey, now);
  applyMessageLabels(entry, message, created);
  noteDmSender(entry, message, ctx.sessionKey);
  return { entry, rotation, created, duplicate: false, text, commandOnly, replyTo: delivery.replyTo, duplicateKey: seenKey };
}

/** Which event moves which field (store.md "SessionEntry"). */
function applyMessage(entry: PlannedEntry, message: PlanMessage, now: number, created: boolean, delivery: DeliveryPlan): void {
  entry.updatedAt = now;
  // Only real user messages are interactions; heartbeats, cron and system events never are.
  if (message.kind === 'user') entry.lastInteractionAt = now;
  const chatType = chatTypeOf(message.peer);
  if (created) {
    entry.channel = message.channel;
    entry.accountId = message.accountId;
    if (chatType) entry.chatType = chatType;
    if (message.kind !== 'user') entry.lastInteractionAt = undefined;
    const origin: Record<string, unknown> = { channel: message.channel, accountId: message.accountId };
    if (message.peer) origin.peer = { ...message.peer };
    if (message.parentPeer) origin.parentPeer = { ...message.parentPeer };
    if (message.threadId) origin.threadId = message.threadId;
    if (message.sender?.id || message.sender?.name) origin.sender = message.sender.name ?? message.sender.id;
    entry.origin = origin;
    const label = chatType === 'direct' ? message.sender?.name : undefined;
    if (label) entry.displayName = label;
  }
  if (delivery.claimsOwner && message.peer) {
    const owner: DeliveryOwner = { channel: message.channel, peer: { kind: message.peer.kind, id: message.peer.id } };
    if (message.accountId !== undefined) owner.accountId = message.accountId;
    entry.deliveryOwner = owner;
  }
  if (delivery.movesSessionAddress && delivery.own) setDeliveryAddress(entry, delivery.own, chatType);
  if (entry.lastInteractionAt === undefined) delete entry.lastInteractionAt;
}

/** What one message does to where output goes (store.md `deliveryContext`). */
export interface DeliveryPlan {
  /** The message's own route as an address (undefined without a peer). */
  own?: DeliveryAddress;
  /** Where a reply to this message goes. */
  replyTo?: DeliveryAddress;
  /** `message`: its own route; `session`: the session's address (proactive output, no peer). */
  replySource: 'message' | 'session' | 'none';
  /** The session's address becomes this message's route. */
  movesSessionAddress: boolean;
  /** This sender becomes the owner of a shared address (its first DM peer). */
  claimsOwner: boolean;
  /** Why the session's address moves or stays, in words (for `route explain`). */
  why: string;
}

/** The route a message came from, as an address; a message without a peer has none. */
export function messageAddress(message: Pick<PlanMessage, 'channel' | 'accountId' | 'peer' | 'threadId'>): DeliveryAddress | undefined {
  if (!message.peer) return undefined;
  const address: DeliveryAddress = { channel: message.channel, to: deliveryTarget(message.channel, message.peer) };
  if (message.accountId !== undefined) address.accountId = message.accountId;
  if (message.threadId) address.threadId = message.threadId;
  return address;
}

function wellFormedOwner(owner: unknown): DeliveryOwner | undefined {
  if (owner === null || typeof owner !== 'object') return undefined;
  const { channel, peer } = owner as { channel?: unknown; peer?: { kind?: unknown; id?: unknown } };
  const ok = typeof channel === 'string' && peer !== null && typeof peer === 'object' && typeof peer.kind === 'string' && typeof peer.id === 'string';
  return ok ? (owner as DeliveryOwner) : undefined;
}

/** The same sender: same channel and peer, or peers linked to one identity (session.identityLinks). */
export function isOwnerMessage(owner: DeliveryOwner, message: Pick<PlanMessage, 'channel' | 'peer'>, identityOf?: PlanContext['identityOf']): boolean {
  const peer = message.peer;
  if (!peer) return false;
  const same = (a: string, b: string) => a.trim().toLowerCase() === b.trim().toLowerCase();
  if (same(owner.channel, message.channel) && same(owner.peer.kind, peer.kind) && same(owner.peer.id, peer.id)) return true;
  if (!identityOf || owner.peer.kind !== 'direct' || peer.kind !== 'direct') return false;
  const ownerIdentity = identityOf(owner.channel, owner.peer.id);
  return ownerIdentity !== undefined && ownerIdentity === identityOf(message.channel, peer.id);
}

/**
 * The one delivery rule. A user message is answered on its own route. The session's address (for
 * proactive output: cron, heartbeats) follows the latest user message of the session's owner: on
 * a session of its own (per-peer DM, group, thread) every sender reaching it is the owner; on a
 * shared address (the main session) the first DM peer owns it, or whoever `sessions pin-route`
 * named, and another sender is answered on its own route without taking the address over.
 * Heartbeats, cron and system messages are proactive: they use the session's address and only
 * give a session that has none its first one.
 */
export function planDelivery(entry: Pick<PlannedEntry, 'deliveryContext' | 'deliveryOwner'> | undefined, message: Pick<PlanMessage, 'kind' | 'channel' | 'accountId' | 'peer' | 'threadId'>, ctx: Pick<PlanContext, 'sharedAddress' | 'identityOf'>): DeliveryPlan {
  const own = messageAddress(message);
  // A row without a target (OpenClaw's `{channel}` alone) has no address to use yet.
  const stored = entry?.deliveryContext;
  const current = typeof stored?.to === 'string' ? (stored as DeliveryAddress) : undefined;
  // A hand-edited owner without a usable peer names nobody (doctor reports it against the schema).
  const owner = wellFormedOwner(entry?.deliveryOwner);
  if (message.kind !== 'user') {
    const first = current === undefined && own !== undefined;
    const replyTo = current ?? own;
    return { own, replyTo, replySource: current ? 'session' : own ? 'message' : 'none', movesSessionAddress: first, claimsOwner: false, why: first ? 'the session has no address yet' : `a ${message.kind} message never moves the session's address` };
  }
  if (!own) return { own, replyTo: current, replySource: current ? 'session' : 'none', movesSessionAddress: false, claimsOwner: false, why: 'the message has no peer to answer' };
  // With a peer, a user message is answered on its own route. (Each plan is one literal: this
  // runs for every message, and spreading a shared part into each was most of its cost.)
  if (owner) {
    const moves = isOwnerMessage(owner, message, ctx.identityOf);
    const who = `${owner.channel}:${owner.peer.kind}:${owner.peer.id}${owner.pinned ? ' (pinned)' : ''}`;
    return { own, replyTo: own, replySource: 'message', movesSessionAddress: moves, claimsOwner: false, why: moves ? `the sender is the session's owner ${who}` : `the session's owner is ${who}; another sender never moves its address` };
  }
  if (ctx.sharedAddress) {
    if (message.peer?.kind === 'direct') return { own, replyTo: own, replySource: 'message', movesSessionAddress: true, claimsOwner: true, why: 'the first DM sender of a shared session becomes its owner' };
    const first = current === undefined;
    return { own, replyTo: own, replySource: 'message', movesSessionAddress: first, claimsOwner: false, why: first ? 'the session has no address yet' : 'only a DM from its owner moves a shared session\'s address' };
  }
  return { own, replyTo: own, replySource: 'message', movesSessionAddress: true, claimsOwner: false, why: 'every sender of this session is its owner' };
}

/** Channels whose targets name the peer's kind: a bare id there is read as a channel. */
const KIND_PREFIXED_CHANNELS = new Set(['discord', 'slack', 'msteams', 'mattermost', 'googlechat']);

/**
 * A peer as OpenClaw writes a delivery target: Telegram chats are `telegram:<chatId>` (a forum
 * topic `telegram:<chatId>:topic:<threadId>`); on
 * Discord, Slack, Teams, Mattermost and Google Chat a direct peer is `user:<id>` and a group or
 * channel `channel:<id>` (OpenClaw's Discord code reads a bare numeric id as a channel); other
 * channels take the bare id.
 */
export function deliveryTarget(channel: string, peer: { kind: string; id: string }): string {
  // A forum topic's peer is `<chatId>:topic:<threadId>`, and OpenClaw's Telegram code addresses
  // it as `telegram:<chatId>:topic:<threadId>` (with `threadId` beside it as well).
  if (channel === 'telegram') return `telegram:${peer.id}`;
  if (KIND_PREFIXED_CHANNELS.has(channel)) return `${peer.kind === 'direct' ? 'user' : 'channel'}:${peer.id}`;
  return peer.id;
}

/**
 * The one place the session's address is written: `deliveryContext` and OpenClaw's mirrors of it
 * (`lastChannel`, `lastTo`, `lastAccountId`, `lastThreadId`, and `route` where an entry has one),
 * so they always agree.
 */
export function setDeliveryAddress(
  entry: PlannedEntry,
  address: { channel: string; to: string; accountId?: string; threadId?: string },
  chatType: PlannedEntry['chatType'],
): void {
  const context: NonNullable<PlannedEntry['deliveryContext']> = { channel: address.channel, to: address.to };
  if (address.accountId !== undefined) context.accountId = address.accountId;
  if (address.threadId) context.threadId = address.threadId;
  entry.deliveryContext = context;
  entry.lastChannel = address.channel;
  entry.lastTo = address.to;
  if (address.accountId !== undefined) entry.lastAccountId = address.accountId;
  else delete entry.lastAccountId;
  if (address.threadId) entry.lastThreadId = address.threadId;
  else delete entry.lastThreadId;
  if (entry.route !== undefined && entry.route !== null && typeof entry.route === 'object') {
    const route: Record<string, unknown> = { ...(entry.route as Record<string, unknown>), channel: address.channel, target: { to: address.to, ...(chatType ? { chatType } : {}) } };
    if (address.accountId !== undefined) route.accountId = address.accountId;
    if (address.threadId) route.thread = { id: address.threadId };
    else delete route.thread;
    entry.route = route;
  }
}
