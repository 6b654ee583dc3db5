import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { test } from 'node:test';
import { RECENT_ID_MAX_CHARS, duplicateKey, legacyIdKey, readRecentIds, withoutRecentIds, writeRecentIds, type DuplicateRoute } from '../../src/core/index.js';
import { DUPLICATE_WINDOW_MS, RECENT_IDS_CAP, forgetDuplicateKey, duplicateKeySeenAt } from '../../src/policy/index.js';
import { rememberDuplicateKey, shareMemory } from '../../src/policy/duplicate-memory.js';

type Entry = { recentMessageIds?: unknown };

test('remembered ids are stored as one line each, oldest first, and found again', () => {
  const entry: Entry = {};
  rememberDuplicateKey(entry, 'tg-1', 1000);
  rememberDuplicateKey(entry, 'tg-2', 2000);
  assert.equal(entry.recentMessageIds, '1000 tg-1\n2000 tg-2');
  assert.equal(duplicateKeySeenAt(entry, 'tg-1'), 1000);
  assert.equal(duplicateKeySeenAt(entry, 'tg-2'), 2000);
  assert.equal(duplicateKeySeenAt(entry, 'tg-3'), undefined);
});

test('ids with spaces, backslashes and newlines survive the stored form', () => {
  const awkward = ['a b', 'back\\slash', 'two\nlines', '\\n', 'end\\'];
  const entry: Entry = {};
  awkward.forEach((id, index) => rememberDuplicateKey(entry, id, 10 + index));
  assert.equal((entry.recentMessageIds as string).split('\n').length, awkward.length);
  // A fresh reader (another process) sees the same ids from the string alone.
  const reread: Entry = { recentMessageIds: entry.recentMessageIds };
  awkward.forEach((id, index) => assert.equal(duplicateKeySeenAt(reread, id), 10 + index, JSON.stringify(id)));
  assert.deepEqual(readRecentIds(entry.recentMessageIds).map(({ id }) => id), awkward);
});

test('pairs written by earlier versions are read, and rewritten as the string on the next change', () => {
  const entry: Entry = { recentMessageIds: [['old-1', 1000], ['old-2', 1500]] };
  assert.equal(duplicateKeySeenAt(entry, 'old-2'), 1500);
  assert.deepEqual(entry.recentMessageIds, [['old-1', 1000], ['old-2', 1500]], 'reading changes nothing');
  rememberDuplicateKey(entry, 'new', 2000);
  assert.equal(entry.recentMessageIds, '1000 old-1\n1500 old-2\n2000 new');
});

test('ids that left the five-minute window are forgotten; their lines are cut from the front once they are half the string', () => {
  const entry: Entry = {};
  rememberDuplicateKey(entry, 'early', 0);
  rememberDuplicateKey(entry, 'again', 1);
  rememberDuplicateKey(entry, 'later', DUPLICATE_WINDOW_MS - 1);
  // Recorded once more after its window: the new time is the one that counts.
  rememberDuplicateKey(entry, 'again', DUPLICATE_WINDOW_MS + 1);
  assert.equal(duplicateKeySeenAt(entry, 'early'), undefined);
  assert.equal(duplicateKeySeenAt(entry, 'again'), DUPLICATE_WINDOW_MS + 1);
  assert.equal(duplicateKeySeenAt(entry, 'later'), DUPLICATE_WINDOW_MS - 1);
  // A fresh reader (another process) finds the live ids at their times; an expired line still in
  // the string carries its old time, which the planner compares with the window.
  const reread: Entry = { recentMessageIds: entry.recentMessageIds };
  assert.equal(duplicateKeySeenAt(reread, 'again'), DUPLICATE_WINDOW_MS + 1);
  assert.equal(duplicateKeySeenAt(reread, 'later'), DUPLICATE_WINDOW_MS - 1);
  assert.ok([undefined, 0].includes(duplicateKeySeenAt(reread, 'early')));
  // The expired lines go once they are half the text.
  for (let i = 0; i < 4; i++) rememberDuplicateKey(entry, `n${i}`, DUPLICATE_WINDOW_MS + 2 + i);
  assert.ok(!(entry.recentMessageIds as string).includes('early'), String(entry.recentMessageIds));
  assert.deepEqual(readRecentIds(entry.recentMessageIds).map(({ id }) => id), ['later', 'again', 'n0', 'n1', 'n2', 'n3']);
});

test(`at ${RECENT_IDS_CAP} ids the oldest goes, and the stored string never holds twice that`, () => {
  const entry: Entry = {};
  for (let i = 0; i < RECENT_IDS_CAP + 5; i++) rememberDuplicateKey(entry, `m${i}`, 1000 + i);
  assert.equal(duplicateKeySeenAt(entry, 'm4'), undefined);
  assert.equal(duplicateKeySeenAt(entry, 'm5'), 1005);
  const reread: Entry = { recentMessageIds: entry.recentMessageIds };
  for (const i of [5, 1000, RECENT_IDS_CAP + 4]) assert.equal(duplicateKeySeenAt(reread, `m${i}`), 1000 + i);
  const last = 3 * RECENT_IDS_CAP;
  for (let i = RECENT_IDS_CAP + 5; i < last; i++) {
    rememberDuplicateKey(entry, `m${i}`, 1000 + i);
    if (i % 9973 !== 0) continue;
    // Lines of ids that left stay at the front until they are half the string, no longer.
    const live = Array.from({ length: RECENT_IDS_CAP }, (_, k) => ({ id: `m${i - RECENT_IDS_CAP + 1 + k}`, at: 1000 + i - RECENT_IDS_CAP + 1 + k }));
    const stored = entry.recentMessageIds as string;
    assert.ok(stored.endsWith(writeRecentIds(live)), `the live ids at ${i}`);
    assert.ok(stored.length <= 2 * writeRecentIds(live).length + 32, `${stored.length} characters stored at ${i}`);
  }
  assert.equal(duplicateKeySeenAt(entry, `m${last - RECENT_IDS_CAP - 1}`), undefined);
  assert.equal(duplicateKeySeenAt(entry, `m${last - RECENT_IDS_CAP}`), 1000 + last - RECENT_IDS_CAP);
});

test('a forgotten id is no duplicate any more; the others stay', () => {
  const entry: Entry = {};
  rememberDuplicateKey(entry, 'keep', 1);
  rememberDuplicateKey(entry, 'drop', 2);
  forgetDuplicateKey(entry, 'drop');
  assert.equal(entry.recentMessageIds, '1 keep');
  assert.equal(duplicateKeySeenAt(entry, 'drop'), undefined);
  assert.equal(duplicateKeySeenAt(entry, 'keep'), 1);
  forgetDuplicateKey(entry, 'never-seen');
  assert.equal(entry.recentMessageIds, '1 keep');
});

test('the memory follows the entry field: a restored value is what is read', () => {
  const entry: Entry = {};
  rememberDuplicateKey(entry, 'a', 1);
  const before = entry.recentMessageIds;
  rememberDuplicateKey(entry, 'b', 2);
  entry.recentMessageIds = before; // a batch took its change back
  assert.equal(duplicateKeySeenAt(entry, 'b'), undefined);
  rememberDuplicateKey(entry, 'c', 3);
  assert.equal(entry.recentMessageIds, '1 a\n3 c');
});

test('a hand-edited string with stray lines keeps its good lines and is rewritten cleanly on the next change', () => {
  const entry: Entry = { recentMessageIds: 'garbage\n0012 padded\n\n20 ok' };
  assert.equal(duplicateKeySeenAt(entry, 'ok'), 20);
  assert.equal(duplicateKeySeenAt(entry, 'padded'), 12);
  rememberDuplicateKey(entry, 'new', 30);
  assert.equal(entry.recentMessageIds, '12 padded\n20 ok\n30 new');
});

const dm = (id: string, extra: Partial<DuplicateRoute> = {}): DuplicateRoute => ({ channel: 'telegram', accountId: 'default', peer: { kind: 'direct', id }, ...extra });

test('a duplicate key names the route as well as the messageId: the same id from another chat, account, channel or thread is another message', () => {
  const base = duplicateKey(dm('alice'), 'm1');
  assert.equal(base, 'telegram default direct:alice  m1', 'readable in sessions.json');
  assert.equal(duplicateKey(dm('alice'), 'm1'), base);
  const others = [
    duplicateKey(dm('bob'), 'm1'),
    duplicateKey(dm('alice', { accountId: 'work' }), 'm1'),
    duplicateKey(dm('alice', { channel: 'discord' }), 'm1'),
    duplicateKey(dm('alice', { threadId: '7' }), 'm1'),
    duplicateKey(dm('alice', { peer: { kind: 'group', id: 'alice' } }), 'm1'),
    duplicateKey({ channel: 'telegram', accountId: 'default' }, 'm1'),
    duplicateKey(dm('alice'), 'm2'),
  ];
  assert.equal(new Set([base, ...others]).size, others.length + 1);
});

test('route parts holding a separator cannot make two routes one key', () => {
  // Joined with spaces, these two would read "c a direct:x y  m" both.
  const spaced = duplicateKey({ channel: 'c', accountId: 'a', peer: { kind: 'direct', id: 'x y' } }, 'm');
  const split = duplicateKey({ channel: 'c', accountId: 'a', peer: { kind: 'direct', id: 'x' }, threadId: 'y' }, 'm');
  assert.notEqual(spaced, split);
  assert.ok(spaced.startsWith('sha256:'));
  assert.equal(duplicateKey({ channel: 'c', accountId: 'a', peer: { kind: 'direct', id: 'x y' } }, 'm'), spaced);
  // A newline in the messageId (the last part) is kept, escaped in the stored line.
  const entry: Entry = {};
  const newline = duplicateKey(dm('alice'), 'line\nbreak');
  rememberDuplicateKey(entry, newline, 5);
  assert.equal(duplicateKeySeenAt({ recentMessageIds: entry.recentMessageIds }, newline), 5);
});

test(`keys longer than ${RECENT_ID_MAX_CHARS} characters are remembered by digest: a resend is still a duplicate, the entry stays small`, () => {
  const entry: Entry = {};
  const huge = duplicateKey(dm('alice'), 'x'.repeat(100_000));
  const lookalike = duplicateKey({ channel: 'sha256:short', accountId: 'default' }, 'm');
  assert.ok(huge.startsWith('sha256:') && huge.length < 60);
  assert.notEqual(duplicateKey(dm('alice'), `${'x'.repeat(100_000)}y`), huge);
  assert.notEqual(lookalike, 'sha256:short default   m', 'a key shaped like a digest is digested too, so it cannot pose as one');
  rememberDuplicateKey(entry, huge, 1);
  rememberDuplicateKey(entry, lookalike, 2);
  assert.equal(duplicateKeySeenAt({ recentMessageIds: entry.recentMessageIds }, huge), 1);
  assert.equal(duplicateKeySeenAt(entry, lookalike), 2);
  assert.ok((entry.recentMessageIds as string).length < 200, String(entry.recentMessageIds).slice(0, 300));
  forgetDuplicateKey(entry, huge);
  assert.equal(duplicateKeySeenAt(entry, huge), undefined);
  // Journal recovery takes keys out the same way.
  rememberDuplicateKey(entry, huge, 3);
  assert.equal(duplicateKeySeenAt({ recentMessageIds: withoutRecentIds(entry.recentMessageIds, [huge]) }, huge), undefined);
  // Pairs written by an earlier version hold bare messageIds: read as that version keyed them, never as a route's key.
  assert.equal(duplicateKeySeenAt({ recentMessageIds: [['x'.repeat(200), 4]] }, legacyIdKey('x'.repeat(200))), 4);
  assert.equal(duplicateKeySeenAt({ recentMessageIds: [['m1', 4]] }, duplicateKey(dm('alice'), 'm1')), undefined);
});

test('two sessions whose memories end in the same line and have the same length keep their own ids', () => {
  // The parsed copies are found again by a fingerprint (length and last line) of the string:
  // two different strings sharing it must never lend one session the other's ids.
  const first: Entry = {};
  const second: Entry = {};
  rememberDuplicateKey(first, 'aa', 1000);
  rememberDuplicateKey(first, 'shared', 3000);
  rememberDuplicateKey(second, 'bb', 1000);
  rememberDuplicateKey(second, 'shared', 3000);
  assert.equal((first.recentMessageIds as string).length, (second.recentMessageIds as string).length);
  // Both filed, then read back through new entry objects holding equal strings (the next batch).
  const firstAgain: Entry = { recentMessageIds: `${first.recentMessageIds as string}` };
  const secondAgain: Entry = { recentMessageIds: `${second.recentMessageIds as string}` };
  assert.equal(duplicateKeySeenAt(secondAgain, 'bb'), 1000);
  assert.equal(duplicateKeySeenAt(secondAgain, 'aa'), undefined);
  assert.equal(duplicateKeySeenAt(firstAgain, 'aa'), 1000);
  assert.equal(duplicateKeySeenAt(firstAgain, 'bb'), undefined);
  // Remembering on one changes nothing the other finds.
  rememberDuplicateKey(firstAgain, 'cc', 4000);
  assert.equal(duplicateKeySeenAt(secondAgain, 'cc'), undefined);
  assert.equal(duplicateKeySeenAt({ recentMessageIds: secondAgain.recentMessageIds }, 'bb'), 1000);
});

test('copies of entries keep their ids after the cache of parsed copies has been emptied many times over', () => {
  // The planner copies an entry for every message (shareMemory); the parsed copies are kept per
  // entry object in a bounded cache. 20 000 sessions × 3 messages passes its bound several times.
  let entries: Entry[] = Array.from({ length: 20_000 }, () => ({}));
  for (let round = 0; round < 3; round++) {
    entries = entries.map((entry, i) => {
      const copy: Entry = { ...entry };
      shareMemory(entry, copy);
      assert.equal(duplicateKeySeenAt(copy, `s${i}-m${round}`), undefined);
      rememberDuplicateKey(copy, `s${i}-m${round}`, 1000 + round);
      return copy;
    });
  }
  for (const [i, entry] of entries.entries()) {
    for (let round = 0; round < 3; round++) assert.equal(duplicateKeySeenAt(entry, `s${i}-m${round}`), 1000 + round);
    assert.equal(duplicateKeySeenAt(entry, `s${(i + 1) % entries.length}-m0`), undefined);
    // A reader of the string alone (the next batch's entry object) agrees.
    assert.equal(duplicateKeySeenAt({ recentMessageIds: `${entry.recentMessageIds as string}` }, `s${i}-m2`), 1002);
  }
});

test('what the parsed copies keep alive is bounded: a long-running process re-reading one busy session batch after batch stays within a small heap', () => {
  // serve re-reads sessions.json for every batch: each batch's entry is a new object holding a
  // new (flat) copy of the session's ever longer memory string. Each copy filed once kept that
  // version alive — 8 192 of them: a server taking one busy session's messages a few at a time
  // grew to gigabytes and died. Run in a child with a 64 MB heap: it must finish.
  const moduleUrl = new URL('../../src/policy/duplicate-memory.js', import.meta.url).href;
  const script = `
    const { rememberDuplicateKey, shareMemory, duplicateKeySeenAt } = await import(${JSON.stringify(moduleUrl)});
    let stored = { recentMessageIds: '' };
    for (let batch = 0; batch < 2500; batch++) {
      const entry = JSON.parse(JSON.stringify(stored)); // the next batch's read of sessions.json
      const copy = { ...entry };
      shareMemory(entry, copy);
      const key = 'telegram default direct:alice  message-' + batch + '-' + 'x'.repeat(40);
      if (duplicateKeySeenAt(copy, key) !== undefined) throw new Error('a new id was taken for a duplicate');
      rememberDuplicateKey(copy, key, 1_000_000 + batch);
      stored = copy;
    }
    process.stdout.write(String(stored.recentMessageIds.split('\\n').length));`;
  const child = spawnSync(process.execPath, ['--max-old-space-size=64', '--input-type=module', '-e', script], { encoding: 'utf8', timeout: 120_000 });
  assert.equal(child.status, 0, `exited ${child.status ?? child.signal}: ${child.stderr.slice(-400)}`);
  assert.equal(child.stdout, '2500', 'every id remembered');
});
