// The stored form of a session's duplicate memory (`recentMessageIds` of its entry): which
// messages were recorded lately, and when. One string, one line per message, oldest first:
//
//   "<epoch ms> <key>\n<epoch ms> <key>…"
//
// where the key names the message's route and messageId (duplicateKey), with `\` and a newline
// inside a key written `\\` and `\n`. A string rather than `[id, ms]`
// pairs because the entry is serialised, hashed, copied and journalled on every store write:
// for a busy session a thousand pairs were most of that work, while the same ids in one string
// are one value to copy. Entries written by earlier versions hold the pairs; they are read the
// same way and written in this form on their next change.
//
// Pure: the store (journal recovery) and the session planner both use it.

import { sha256Base64url } from './digest.js';

/** A message seen on the same session and route within this window makes a later copy a duplicate. */
export const DUPLICATE_WINDOW_MS = 5 * 60_000;

/**
 * Most ids one session remembers: every id of the window up to this bound (over 160 messages a
 * second to ONE session for five minutes); it bounds the entry's size. At 1024 a resend of a
 * larger batch was recorded twice in full: each resent id, no longer remembered, was recorded
 * again and pushed out the next one before it came.
 */
export const RECENT_IDS_CAP = 50_000;

export interface RecentId {
  id: string;
  at: number;
}

const NEEDS_ESCAPE = /[\\\n]/;

/** Longer keys are remembered by digest (see duplicateKey). */
export const RECENT_ID_MAX_CHARS = 128;
const DIGEST_PREFIX = 'sha256:';

/** Where a message came from, as far as its duplicate identity goes (queue.md: "same messageId and route"). */
export interface DuplicateRoute {
  channel: string;
  accountId: string;
  peer?: { kind: string; id: string };
  threadId?: string;
}

const ROUTE_SEPARATORS = /[ \n]/;

/**
 * What the duplicate memory holds for a message: its route and messageId, so the same id from
 * another chat is a message of its own (two people's DMs reaching one `dmScope: main` session
 * number their messages independently). As OpenClaw keys it: channel, account, peer, thread, id.
 *
 *   "<channel> <accountId> <peerKind>:<peerId> <threadId> <messageId>"
 *
 * readable in sessions.json, with nothing a JSON writer has to escape in the common case. A route
 * part holding a space or newline would make that ambiguous, so such a key is a digest of the
 * parts instead, as is a key over RECENT_ID_MAX_CHARS (a sender may send ids of any length, and
 * a session remembers up to 50 000 of them in an entry every store write serialises) or one that
 * looks like a digest. The digest inputs never collide: a route digest's starts with a newline,
 * which a plain key's channel never holds.
 */
export function duplicateKey(route: DuplicateRoute, messageId: string): string {
  const peer = route.peer === undefined ? '' : `${route.peer.kind}:${route.peer.id}`;
  const thread = route.threadId ?? '';
  if (route.channel === '' || ROUTE_SEPARATORS.test(route.channel) || ROUTE_SEPARATORS.test(route.accountId) || ROUTE_SEPARATORS.test(peer) || ROUTE_SEPARATORS.test(thread)) {
    return `${DIGEST_PREFIX}${sha256Base64url(`\n${JSON.stringify([route.channel, route.accountId, peer, thread, messageId])}`)}`;
  }
  const key = `${route.channel} ${route.accountId} ${peer} ${thread} ${messageId}`;
  return key.length <= RECENT_ID_MAX_CHARS && !key.startsWith(DIGEST_PREFIX) ? key : `${DIGEST_PREFIX}${sha256Base64url(key)}`;
}

/**
 * The key an earlier version remembered a messageId by: the id alone (by digest when long). Still
 * read from the `[id, ms]` pairs and old journals, where it names that version's memory lines; a
 * message arriving now never matches one (its key names its route), and they leave the window.
 */
export function legacyIdKey(messageId: string): string {
  if (messageId.length <= RECENT_ID_MAX_CHARS && !messageId.startsWith(DIGEST_PREFIX)) return messageId;
  return `${DIGEST_PREFIX}${sha256Base64url(messageId)}`;
}

/** One stored line for `id` recorded at `at`. */
export function recentIdLine(id: string, at: number): string {
  return `${at} ${NEEDS_ESCAPE.test(id) ? id.replace(/\\/g, '\\\\').replace(/\n/g, '\\n') : id}`;
}

function unescapeId(text: string): string {
  if (!text.includes('\\')) return text;
  return text.replace(/\\(\\|n)/g, (_, char: string) => (char === 'n' ? '\n' : '\\'));
}

/** Every (id, time) a stored value names, oldest first; anything malformed is skipped. */
export function readRecentIds(value: unknown): RecentId[] {
  const ids: RecentId[] = [];
  if (typeof value === 'string') {
    if (value === '') return ids;
    for (const line of value.split('\n')) {
      const space = line.indexOf(' ');
      if (space <= 0) continue;
      const at = Number(line.slice(0, space));
      const id = unescapeId(line.slice(space + 1));
      if (Number.isFinite(at) && id !== '') ids.push({ id, at });
    }
  } else if (Array.isArray(value)) {
    // The form before the string: [messageId, epoch ms] pairs.
    for (const pair of value) {
      if (Array.isArray(pair) && typeof pair[0] === 'string' && pair[0] !== '' && typeof pair[1] === 'number' && Number.isFinite(pair[1])) ids.push({ id: legacyIdKey(pair[0]), at: pair[1] });
    }
  }
  return ids;
}

/** The stored form of `ids` (oldest first). */
export function writeRecentIds(ids: readonly RecentId[]): string {
  let text = '';
  for (const { id, at } of ids) text = text === '' ? recentIdLine(id, at) : `${text}\n${recentIdLine(id, at)}`;
  return text;
}

/** The stored value without the keys in `gone` (journal recovery: records that never reached the disk). */
export function withoutRecentIds(value: unknown, gone: Iterable<string>): string {
  const keys = new Set(gone);
  return writeRecentIds(readRecentIds(value).filter(({ id }) => !keys.has(id)));
}

/**
 * The ids of several stored values recorded at or after `since`, each once (at its latest time),
 * oldest first, at most RECENT_IDS_CAP (the newest): the memory of removed sessions merges the
 * memory a removal carries in with what it held already.
 */
export function mergeRecentIds(values: readonly unknown[], since: number): string {
  const latest = new Map<string, number>();
  for (const value of values) {
    for (const { id, at } of readRecentIds(value)) {
      const seen = latest.get(id);
      if (at >= since && (seen === undefined || at > seen)) latest.set(id, at);
    }
  }
  const ids = [...latest].map(([id, at]) => ({ id, at })).sort((a, b) => a.at - b.at);
  return writeRecentIds(ids.length > RECENT_IDS_CAP ? ids.slice(ids.length - RECENT_IDS_CAP) : ids);
}
