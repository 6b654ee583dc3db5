// The shape of one sessions.json row (store.md "SessionEntry") and of the whole registry.
// Unknown fields are kept as they are: a newer or OpenClaw-written row survives our writes.

export type SessionChatType = 'direct' | 'group' | 'channel';

/** A peer as routing sees it; kept structural so store/ needs no routing import. */
export interface SessionPeer {
  kind: string;
  id: string;
  [extra: string]: unknown;
}

/** Where the first message of this session came from. */
export interface SessionOrigin {
  channel: string;
  accountId?: string;
  peer?: SessionPeer;
  parentPeer?: SessionPeer;
  threadId?: string;
  sender?: string;
  [extra: string]: unknown;
}

/** Where replies go; only inbound messages on this same session move it. */
export interface SessionDeliveryContext {
  channel: string;
  to: string;
  accountId?: string;
  threadId?: string;
  [extra: string]: unknown;
}

export interface SessionEntry {
  /** Current instance at this address (UUID v4); rotated by resets. */
  sessionId: string;
  /** Epoch ms of the last change of the row: listing, pruning, capping — never freshness. */
  updatedAt: number;
  /** Epoch ms when this sessionId began; daily-reset anchor. */
  sessionStartedAt?: number;
  /** Epoch ms of the last real user/channel message; idle-reset anchor. */
  lastInteractionAt?: number;
  chatType?: SessionChatType;
  channel?: string;
  accountId?: string;
  displayName?: string;
  subject?: string;
  origin?: SessionOrigin;
  deliveryContext?: SessionDeliveryContext;
  queueMode?: string;
  queueDebounceMs?: number;
  queueCap?: number;
  queueDrop?: string;
  sendPolicy?: 'allow' | 'deny';
  model?: string;
  modelOverride?: string;
  parentSessionKey?: string;
  spawnDepth?: number;
  /** Never pruned or capped by maintenance. */
  pinned?: boolean;
  incognito?: boolean;
  /** Fields this version does not know are preserved on every write. */
  [extra: string]: unknown;
}

/** sessions.json: sessionKey → SessionEntry. */
export type SessionStore = Record<string, SessionEntry>;

