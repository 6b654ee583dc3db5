// An addressed message as the later steps see it: the planner's input and context (with the
// delivery rule's view of the session), its transcript record, and who asked for it.

import { newUuid } from '../core/index.js';
import type { PlanContext, PlanMessage } from '../policy/index.js';
import { lookupIdentityLink } from '../routing/index.js';
import { addRecordRoute, type NewTranscriptEntry, type RemovedMemory, type StoreLocation } from '../store/index.js';
import type { Addressed } from './admission-types.js';
import { transcriptNameFor, type EngineContext } from './context.js';
import type { InboundMessage } from './message.js';

export function planMessageOf(item: Addressed): PlanMessage {
  const { message } = item;
  return {
    kind: message.kind,
    text: message.text,
    messageId: message.messageId,
    sender: message.sender,
    channel: message.route.channel,
    accountId: message.route.accountId,
    peer: message.route.peer,
    parentPeer: message.route.parentPeer,
    threadId: message.route.threadId,
    ...(message.group ? { group: message.group } : {}),
    ...(message.lineage ? { lineage: message.lineage } : {}),
  };
}

/** The transcript record of one inbound message (user and cron turns are user messages). */
export function messageRecord(item: Addressed, text: string | undefined, now: number): NewTranscriptEntry {
  const { message } = item;
  // Built field by field in the written order (one is made per message: no spread of a shared part).
  const custom = message.kind === 'heartbeat' || message.kind === 'system';
  const record: Record<string, unknown> = custom
    ? { text: text ?? null, timestamp: message.timestamp ?? now, channel: message.route.channel, runId: item.runId }
    : { role: 'user', content: [{ type: 'text', text: text ?? '' }], timestamp: message.timestamp ?? now, channel: message.route.channel, runId: item.runId };
  addRecordRoute(record, message.route);
  if (message.messageId !== undefined) record.messageId = message.messageId;
  if (message.sender) record.sender = message.sender;
  if (message.route.threadId) record.threadId = message.route.threadId;
  if (custom) return { type: 'custom', customType: message.kind, data: record };
  if (message.cronJobId) record.cron = { jobId: message.cronJobId };
  return { type: 'message', message: record };
}

export function planContextFor(ctx: EngineContext, location: StoreLocation, sessionKey: string, now: number, removed?: RemovedMemory, transcriptStarted?: PlanContext['transcriptStarted']): PlanContext {
  return {
    sessionKey,
    session: ctx.config.session,
    now,
    removed,
    transcriptStarted,
    newSessionId: newUuid,
    transcriptName: (sessionId: string, threadId?: string) => transcriptNameFor(location, sessionId, threadId),
    ...deliveryContextFor(ctx, sessionKey),
  };
}

/** What the delivery rule needs to know of a session: is its address shared, who is linked to whom. */
/** What follows `agent:<id>:` in a session key (the part mainKey names), if anything does. */
function restOfKey(sessionKey: string): string | undefined {
  if (!sessionKey.startsWith('agent:')) return undefined;
  const colon = sessionKey.indexOf(':', 'agent:'.length);
  return colon > 'agent:'.length && colon < sessionKey.length - 1 ? sessionKey.slice(colon + 1) : undefined;
}

export function deliveryContextFor(ctx: EngineContext, sessionKey: string): Pick<PlanContext, 'sharedAddress' | 'identityOf'> {
  // The agent's main session is where DMs of several senders meet (dmScope "main"; also a
  // peerless or groupScope "main" message): its address belongs to one owner.
  return {
    sharedAddress: restOfKey(sessionKey) === ctx.table.mainKey,
    identityOf: (channel: string, peerId: string) => lookupIdentityLink(ctx.table.identityLinks, channel, peerId)?.canonical,
  };
}

export function requesterOf(message: InboundMessage): string {
  const sender = message.sender?.id?.trim() || message.sender?.name?.trim();
  if (sender) return sender;
  const peer = message.route.peer;
  return peer ? `${message.route.channel}:${peer.kind}:${peer.id}` : message.route.channel;
}
