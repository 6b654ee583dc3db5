// The stored form of a session's duplicate memory (`recentMessageIds` of its entry): which
// messageIds were recorded lately, and when. One string, one line per id, oldest first:
//
//   "<epoch ms> <messageId>\n<epoch ms> <messageId>…"
//
// with `\` and a newline inside an id written `\\` and `\n`. A string rather than `[id, ms]`
// pairs because the entry is serialised, hashed, copied and journalled on every store write:
// for a busy session a thousand pairs were most of that work, while the same ids in one string
// are one value to copy. Entries written by earlier versions hold the pairs; they are read the
// same way and written in this form on their next change.
//
// Pure: the store (journal recovery) and the session planner both use it.

import { sha256Base64url } from './digest.js';

/** A messageId seen on the same session within this window makes a later copy a duplicate. */
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

/** Longer messageIds are remembered by digest (see recentIdKey). */
export const RECENT_ID_MAX_CHARS = 128;
const DIGEST_PREFIX = 'sha256:';

/**
 * What the memory holds for a messageId: the id itself, or for a long one (or one that looks
 * like a digest) `sha256:<base64url>` of it. A sender may send ids of any length, and a session
 * remembers up to 50 000 of them in an entry that every store write serialises: without the bound,
 * one client's megabyte-long ids would grow the store until no write of it fits in a string.
 */
export function recentIdKey(messageId: string): string {
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
      if (Array.isArray(pair) && typeof pair[0] === 'string' && pair[0] !== '' && typeof pair[1] === 'number' && Number.isFinite(pair[1])) ids.push({ id: recentIdKey(pair[0]), at: pair[1] });
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

/** The stored value without the messageIds in `gone` (journal recovery: records that never reached the disk). */
export function withoutRecentIds(value: unknown, gone: Iterable<string>): string {
  const keys = new Set([...gone].map(recentIdKey));
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
