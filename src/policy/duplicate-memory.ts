// A session's duplicate memory: the messages (by route and messageId, core duplicateKey) recorded
// on it in the last five minutes. Stored in
// the entry's `recentMessageIds` as one string (core/recent-ids.ts); read here through a parsed
// copy kept next to the entry object, so that checking and remembering an id costs O(1) however
// many ids the session holds — the string itself only grows at its end (and is cut at its start
// when ids leave the window), so it is never rebuilt per message.

import { DUPLICATE_WINDOW_MS, RECENT_IDS_CAP, readRecentIds, recentIdLine, writeRecentIds, type RecentId } from '../core/index.js';

export { DUPLICATE_WINDOW_MS, RECENT_IDS_CAP };

/** The entry field this module owns: the stored string, or the pairs of an older version. */
type HasRecentIds = { recentMessageIds?: unknown };

interface Memory {
  /** The stored value this copy was made from (valid while the entry still holds it). */
  stored: unknown;
  /** What `stored` says, as a string (null: not written in the string form yet). */
  text: string | null;
  /** Oldest first; ids before `head` have left (lazily compacted). */
  order: RecentId[];
  head: number;
  /** Characters at the start of `text` that are lines of ids which have left (cut lazily too). */
  deadChars: number;
  /** key → when it was last recorded. */
  times: Map<string, number>;
  /** The key this copy is filed under in `byText`, if it is. */
  filedAs: string | null;
}

/**
 * The copy made for an entry object. A plain Map, emptied when it reaches its limits, not a
 * WeakMap: the planner copies an entry for every message and each copy is filed here, and a
 * WeakMap insert (an ephemeron the collector must trace) cost more than the rest of the
 * duplicate check together. Only recent entry objects are asked for (the next message of the
 * same session), and an entry dropped by the emptying is found again through `byText`.
 *
 * The limits bound what the Map keeps alive: every entry object it holds holds the memory string
 * it had when it was filed — each a different version of a session's growing text, up to 50 000
 * ids. Counted by entries alone (8 192 of them), a long-running `serve` taking one busy session's
 * messages a few at a time kept thousands of versions of one ever longer string: 2 GB after 6 000
 * messages, and out of memory under a 200 MB heap after 1 850. So the characters of the strings
 * filed are counted too.
 */
const memories = new Map<object, Memory>();
const MEMORIES_LIMIT = 8192;
const MEMORIES_CHARS_LIMIT = 8 * 1024 * 1024;
let filedChars = 0;

function fileMemory(entry: object, memory: Memory): void {
  const stored = (entry as HasRecentIds).recentMessageIds;
  const chars = typeof stored === 'string' ? stored.length : 0;
  if (memories.size >= MEMORIES_LIMIT || filedChars + chars > MEMORIES_CHARS_LIMIT) {
    // Before the copies lose their entry objects, the changed ones are filed by text.
    if (unfiled.size > 0) fileChanged();
    memories.clear();
    filedChars = 0;
  }
  memories.set(entry, memory);
  filedChars += chars;
}

/**
 * Copies by stored string, for an entry object this process has not seen: every store write
 * re-reads sessions.json, so the next batch's entries are new objects holding equal strings.
 * Filed under a fingerprint of the string (textKey), not the string: a Map hashes its string
 * keys in full, and a string read from the file is a new one each time, so filing and finding
 * by the whole text hashed every busy session's memory twice per batch. A fingerprint match is
 * confirmed by comparing the texts. Bounded: it is a cache, not a record.
 */
const byText = new Map<string, Memory>();

/**
 * Length and last line of a memory's text: the last line names the session's newest id and when
 * it came, so two different texts rarely share it (and when they do, the comparison that
 * confirms a find tells them apart; the later filed one simply wins the slot).
 */
function textKey(text: string): string {
  return `${text.length}:${text.slice(text.lastIndexOf('\n') + 1)}`;
}
const BY_TEXT_LIMIT = 4096;
/**
 * Copies changed since they were filed. They are filed on the next miss, not at each change: a
 * busy session changes its string once per message, and only the last version is looked up.
 */
const unfiled = new Set<Memory>();

function fileChanged(): void {
  for (const memory of unfiled) {
    if (memory.text === null || memory.text === '') continue;
    if (byText.size >= BY_TEXT_LIMIT) byText.clear();
    const key = textKey(memory.text);
    byText.set(key, memory);
    memory.filedAs = key;
  }
  unfiled.clear();
}

function memoryOf(entry: object): Memory {
  const stored = (entry as HasRecentIds).recentMessageIds;
  const known = memories.get(entry);
  if (known !== undefined && known.stored === stored) return known;
  if (typeof stored === 'string' && stored !== '') {
    if (unfiled.size > 0) fileChanged();
    const filed = byText.get(textKey(stored));
    if (filed !== undefined && filed.text === stored) {
      // This entry's own string object from now on: later checks compare pointers, not text.
      filed.stored = stored;
      fileMemory(entry, filed);
      return filed;
    }
  }
  const order = readRecentIds(stored);
  const times = new Map<string, number>();
  // Later lines win: the last time the id was recorded.
  for (const { id, at } of order) times.set(id, at);
  // The string is cut at its start by line lengths, so only a canonical one is kept as it is (a
  // hand-edited one with stray lines is rewritten on the next change).
  const text = typeof stored === 'string' && writeRecentIds(order) === stored ? stored : null;
  const memory: Memory = { stored, text, order, head: 0, deadChars: 0, times, filedAs: null };
  fileMemory(entry, memory);
  return memory;
}

/**
 * A shallow copy of an entry (the planner copies the entry for every message) shares the
 * original's parsed copy: without this each copy would be a miss, and a miss files every changed
 * string (see `unfiled`).
 */
export function shareMemory(from: object, to: object): void {
  const memory = memories.get(from);
  if (memory !== undefined) fileMemory(to, memory);
}

/** When the message of this key (core duplicateKey) was last recorded on the session, if it was. */
export function duplicateKeySeenAt(entry: object, key: string): number | undefined {
  return memoryOf(entry).times.get(key);
}

/**
 * Remembers a message's key, newest last. Keys that left the window are dropped from the front; at
 * the cap the oldest goes. The entry's string gains one line at its end.
 */
export function rememberDuplicateKey(entry: object, id: string, now: number): void {
  const memory = memoryOf(entry);
  const { order, times } = memory;
  let text = memory.text;
  if (text === null) {
    text = writeRecentIds(order.slice(memory.head));
    memory.deadChars = 0;
  }
  // Ids from "the future" (a clock stepped back) stay until the clock has passed them by the window.
  while (memory.head < order.length && (now - order[memory.head]!.at >= DUPLICATE_WINDOW_MS || order.length - memory.head + 1 > RECENT_IDS_CAP)) {
    const gone = order[memory.head]!;
    // An id recorded again later keeps that (later) time.
    if (times.get(gone.id) === gone.at) times.delete(gone.id);
    memory.deadChars += recentIdLine(gone.id, gone.at).length + 1;
    memory.head += 1;
  }
  // The lines of ids that left are cut off the front only once they are half the text: cutting
  // at every message copied the whole string each time (quadratic for a session kept at the cap).
  // Until then they stay in the stored string, where a reader takes an expired one for what it
  // is (checks compare its time with the window) and a live one past the cap for a remembered id.
  if (memory.deadChars > 0 && memory.deadChars * 2 >= text.length) {
    text = text.slice(Math.min(memory.deadChars, text.length));
    memory.deadChars = 0;
  }
  if (memory.head > 64 && memory.head * 2 > order.length) {
    order.splice(0, memory.head);
    memory.head = 0;
  }
  order.push({ id, at: now });
  times.set(id, now);
  const line = recentIdLine(id, now);
  text = text === '' ? line : `${text}\n${line}`;
  // Entries still holding the old string (a snapshot a batch may restore) must not find this copy.
  if (memory.filedAs !== null) {
    if (byText.get(memory.filedAs) === memory) byText.delete(memory.filedAs);
    memory.filedAs = null;
  }
  memory.text = text;
  memory.stored = text;
  unfiled.add(memory);
  (entry as HasRecentIds).recentMessageIds = text;
}

/** Forgets a key again (its message was not taken after all, so a resend is no duplicate). */
export function forgetDuplicateKey(entry: object, id: string): void {
  const memory = memoryOf(entry);
  if (!memory.times.has(id)) return;
  (entry as HasRecentIds).recentMessageIds = writeRecentIds(memory.order.slice(memory.head).filter((recent) => recent.id !== id));
}
