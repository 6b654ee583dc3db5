import assert from 'node:assert/strict';
import { test } from 'node:test';
import { RECENT_ID_MAX_CHARS, readRecentIds, withoutRecentIds, writeRecentIds } from '../../src/core/index.js';
import { DUPLICATE_WINDOW_MS, RECENT_IDS_CAP, forgetMessageId, messageIdSeenAt } from '../../src/policy/index.js';
import { rememberMessageId, shareMemory } from '../../src/policy/duplicate-memory.js';

type Entry = { recentMessageIds?: unknown };

test('remembered ids are stored as one line each, oldest first, and found again', () => {
  const entry: Entry = {};
  rememberMessageId(entry, 'tg-1', 1000);
  rememberMessageId(entry, 'tg-2', 2000);
  assert.equal(entry.recentMessageIds, '1000 tg-1\n2000 tg-2');
  assert.equal(messageIdSeenAt(entry, 'tg-1'), 1000);
  assert.equal(messageIdSeenAt(entry, 'tg-2'), 2000);
  assert.equal(messageIdSeenAt(entry, 'tg-3'), undefined);
});

test('ids with spaces, backslashes and newlines survive the stored form', () => {
  const awkward = ['a b', 'back\\slash', 'two\nlines', '\\n', 'end\\'];
  const entry: Entry = {};
  awkward.forEach((id, index) => rememberMessageId(entry, id, 10 + index));
  assert.equal((entry.recentMessageIds as string).split('\n').length, awkward.length);
  // A fresh reader (another process) sees the same ids from the string alone.
  const reread: Entry = { recentMessageIds: entry.recentMessageIds };
  awkward.forEach((id, index) => assert.equal(messageIdSeenAt(reread, id), 10 + index, JSON.stringify(id)));
  assert.deepEqual(readRecentIds(entry.recentMessageIds).map(({ id }) => id), awkward);
});

test('pairs written by earlier versions are read, and rewritten as the string on the next change', () => {
  const entry: Entry = { recentMessageIds: [['old-1', 1000], ['old-2', 1500]] };
  assert.equal(messageIdSeenAt(entry, 'old-2'), 1500);
  assert.deepEqual(entry.recentMessageIds, [['old-1', 1000], ['old-2', 1500]], 'reading changes nothing');
  rememberMessageId(entry, 'new', 2000);
  assert.equal(entry.recentMessageIds, '1000 old-1\n1500 old-2\n2000 new');
});

test('ids that left the five-minute window are forgotten; their lines are cut from the front once they are half the string', () => {
  const entry: Entry = {};
  rememberMessageId(entry, 'early', 0);
  rememberMessageId(entry, 'again', 1);
  rememberMessageId(entry, 'later', DUPLICATE_WINDOW_MS - 1);
  // Recorded once more after its window: the new time is the one that counts.
  rememberMessageId(entry, 'again', DUPLICATE_WINDOW_MS + 1);
  assert.equal(messageIdSeenAt(entry, 'early'), undefined);
  assert.equal(messageIdSeenAt(entry, 'again'), DUPLICATE_WINDOW_MS + 1);
  assert.equal(messageIdSeenAt(entry, 'later'), DUPLICATE_WINDOW_MS - 1);
  // A fresh reader (another process) finds the live ids at their times; an expired line still in
  // the string carries its old time, which the planner compares with the window.
  const reread: Entry = { recentMessageIds: entry.recentMessageIds };
  assert.equal(messageIdSeenAt(reread, 'again'), DUPLICATE_WINDOW_MS + 1);
  assert.equal(messageIdSeenAt(reread, 'later'), DUPLICATE_WINDOW_MS - 1);
  assert.ok([undefined, 0].includes(messageIdSeenAt(reread, 'early')));
  // The expired lines go once they are half the text.
  for (let i = 0; i < 4; i++) rememberMessageId(entry, `n${i}`, DUPLICATE_WINDOW_MS + 2 + i);
  assert.ok(!(entry.recentMessageIds as string).includes('early'), String(entry.recentMessageIds));
  assert.deepEqual(readRecentIds(entry.recentMessageIds).map(({ id }) => id), ['later', 'again', 'n0', 'n1', 'n2', 'n3']);
});

test(`at ${RECENT_IDS_CAP} ids the oldest goes, and the stored string never holds twice that`, () => {
  const entry: Entry = {};
  for (let i = 0; i < RECENT_IDS_CAP + 5; i++) rememberMessageId(entry, `m${i}`, 1000 + i);
  assert.equal(messageIdSeenAt(entry, 'm4'), undefined);
  assert.equal(messageIdSeenAt(entry, 'm5'), 1005);
  const reread: Entry = { recentMessageIds: entry.recentMessageIds };
  for (const i of [5, 1000, RECENT_IDS_CAP + 4]) assert.equal(messageIdSeenAt(reread, `m${i}`), 1000 + i);
  const last = 3 * RECENT_IDS_CAP;
  for (let i = RECENT_IDS_CAP + 5; i < last; i++) {
    rememberMessageId(entry, `m${i}`, 1000 + i);
    if (i % 9973 !== 0) continue;
    // Lines of ids that left stay at the front until they are half the string, no longer.
    const live = Array.from({ length: RECENT_IDS_CAP }, (_, k) => ({ id: `m${i - RECENT_IDS_CAP + 1 + k}`, at: 1000 + i - RECENT_IDS_CAP + 1 + k }));
    const stored = entry.recentMessageIds as string;
    assert.ok(stored.endsWith(writeRecentIds(live)), `the live ids at ${i}`);
    assert.ok(stored.length <= 2 * writeRecentIds(live).length + 32, `${stored.length} characters stored at ${i}`);
  }
  assert.equal(messageIdSeenAt(entry, `m${last - RECENT_IDS_CAP - 1}`), undefined);
  assert.equal(messageIdSeenAt(entry, `m${last - RECENT_IDS_CAP}`), 1000 + last - RECENT_IDS_CAP);
});

test('a forgotten id is no duplicate any more; the others stay', () => {
  const entry: Entry = {};
  rememberMessageId(entry, 'keep', 1);
  rememberMessageId(entry, 'drop', 2);
  forgetMessageId(entry, 'drop');
  assert.equal(entry.recentMessageIds, '1 keep');
  assert.equal(messageIdSeenAt(entry, 'drop'), undefined);
  assert.equal(messageIdSeenAt(entry, 'keep'), 1);
  forgetMessageId(entry, 'never-seen');
  assert.equal(entry.recentMessageIds, '1 keep');
});

test('the memory follows the entry field: a restored value is what is read', () => {
  const entry: Entry = {};
  rememberMessageId(entry, 'a', 1);
  const before = entry.recentMessageIds;
  rememberMessageId(entry, 'b', 2);
  entry.recentMessageIds = before; // a batch took its change back
  assert.equal(messageIdSeenAt(entry, 'b'), undefined);
  rememberMessageId(entry, 'c', 3);
  assert.equal(entry.recentMessageIds, '1 a\n3 c');
});

test('a hand-edited string with stray lines keeps its good lines and is rewritten cleanly on the next change', () => {
  const entry: Entry = { recentMessageIds: 'garbage\n0012 padded\n\n20 ok' };
  assert.equal(messageIdSeenAt(entry, 'ok'), 20);
  assert.equal(messageIdSeenAt(entry, 'padded'), 12);
  rememberMessageId(entry, 'new', 30);
  assert.equal(entry.recentMessageIds, '12 padded\n20 ok\n30 new');
});

test(`ids longer than ${RECENT_ID_MAX_CHARS} characters are remembered by digest: a resend is still a duplicate, the entry stays small`, () => {
  const entry: Entry = {};
  const huge = 'x'.repeat(100_000);
  const lookalike = 'sha256:short';
  rememberMessageId(entry, huge, 1);
  rememberMessageId(entry, lookalike, 2);
  assert.equal(messageIdSeenAt(entry, huge), 1);
  assert.equal(messageIdSeenAt({ recentMessageIds: entry.recentMessageIds }, huge), 1);
  assert.equal(messageIdSeenAt(entry, `${huge}y`), undefined);
  assert.equal(messageIdSeenAt(entry, lookalike), 2);
  assert.ok((entry.recentMessageIds as string).length < 200, String(entry.recentMessageIds).slice(0, 300));
  assert.ok(!(entry.recentMessageIds as string).includes(lookalike), 'an id shaped like a digest is digested too, so it cannot pose as one');
  forgetMessageId(entry, huge);
  assert.equal(messageIdSeenAt(entry, huge), undefined);
  // Journal recovery takes raw messageIds out the same way.
  rememberMessageId(entry, huge, 3);
  assert.equal(messageIdSeenAt({ recentMessageIds: withoutRecentIds(entry.recentMessageIds, [huge]) }, huge), undefined);
  // A long id in pairs written by an earlier version is found too.
  assert.equal(messageIdSeenAt({ recentMessageIds: [[huge, 4]] }, huge), 4);
});

test('two sessions whose memories end in the same line and have the same length keep their own ids', () => {
  // The parsed copies are found again by a fingerprint (length and last line) of the string:
  // two different strings sharing it must never lend one session the other's ids.
  const first: Entry = {};
  const second: Entry = {};
  rememberMessageId(first, 'aa', 1000);
  rememberMessageId(first, 'shared', 3000);
  rememberMessageId(second, 'bb', 1000);
  rememberMessageId(second, 'shared', 3000);
  assert.equal((first.recentMessageIds as string).length, (second.recentMessageIds as string).length);
  // Both filed, then read back through new entry objects holding equal strings (the next batch).
  const firstAgain: Entry = { recentMessageIds: `${first.recentMessageIds as string}` };
  const secondAgain: Entry = { recentMessageIds: `${second.recentMessageIds as string}` };
  assert.equal(messageIdSeenAt(secondAgain, 'bb'), 1000);
  assert.equal(messageIdSeenAt(secondAgain, 'aa'), undefined);
  assert.equal(messageIdSeenAt(firstAgain, 'aa'), 1000);
  assert.equal(messageIdSeenAt(firstAgain, 'bb'), undefined);
  // Remembering on one changes nothing the other finds.
  rememberMessageId(firstAgain, 'cc', 4000);
  assert.equal(messageIdSeenAt(secondAgain, 'cc'), undefined);
  assert.equal(messageIdSeenAt({ recentMessageIds: secondAgain.recentMessageIds }, 'bb'), 1000);
});

test('copies of entries keep their ids after the cache of parsed copies has been emptied many times over', () => {
  // The planner copies an entry for every message (shareMemory); the parsed copies are kept per
  // entry object in a bounded cache. 20 000 sessions × 3 messages passes its bound several times.
  let entries: Entry[] = Array.from({ length: 20_000 }, () => ({}));
  for (let round = 0; round < 3; round++) {
    entries = entries.map((entry, i) => {
      const copy: Entry = { ...entry };
      shareMemory(entry, copy);
      assert.equal(messageIdSeenAt(copy, `s${i}-m${round}`), undefined);
      rememberMessageId(copy, `s${i}-m${round}`, 1000 + round);
      return copy;
    });
  }
  for (const [i, entry] of entries.entries()) {
    for (let round = 0; round < 3; round++) assert.equal(messageIdSeenAt(entry, `s${i}-m${round}`), 1000 + round);
    assert.equal(messageIdSeenAt(entry, `s${(i + 1) % entries.length}-m0`), undefined);
    // A reader of the string alone (the next batch's entry object) agrees.
    assert.equal(messageIdSeenAt({ recentMessageIds: `${entry.recentMessageIds as string}` }, `s${i}-m2`), 1002);
  }
});
