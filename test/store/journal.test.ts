// The write-ahead journal: a writer that died after appending and before writing sessions.json
// is completed by the next writer; a journal whose batch committed, or whose entry changed since,
// never rolls anything back; ids whose records never reached the disk are forgotten.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { appendToTranscript, entryHash, journalPathFor, journalledEntry, readSessionStore, updateSessionStore, type JournalSession } from '../../src/store/index.js';
import { runCli, tempDir } from '../helpers.js';

function setup(): { dir: string; storePath: string } {
  const dir = path.join(tempDir(), 'sessions');
  fs.mkdirSync(dir, { recursive: true });
  return { dir, storePath: path.join(dir, 'sessions.json') };
}

/** Version 1 (one object per record) is what an older release leaves behind; it is still completed. */
function writeJournalFile(storePath: string, sessions: unknown[], version = 1): void {
  fs.writeFileSync(journalPathFor(storePath), JSON.stringify({ version, pid: 1, writtenAt: new Date().toISOString(), sessions }));
}

for (const version of [1, 2, 3]) {
  test(`a journalled batch (version ${version}) whose records are down is installed by the next writer; missing ids are forgotten`, async () => {
    const { dir, storePath } = setup();
    const base = { sessionId: 'old', updatedAt: 1 };
    fs.writeFileSync(storePath, JSON.stringify({ 'agent:main:a': base }));
    // The dead writer planned a new instance with two messages but only the first record is down.
    await appendToTranscript(path.join(dir, 'new-id.jsonl'), { type: 'message', id: 'r1', message: { role: 'user', messageId: 'm1' } }, { session: { sessionId: 'new-id' } });
    // A version-1 journal comes from a switchboard that stored the duplicate memory as pairs; up
    // to version 2 the memory (and the journal) named bare messageIds, since 3 route keys.
    const key = (id: string) => (version === 3 ? `telegram default direct:1  ${id}` : id);
    const recentMessageIds = version === 1 ? [['m1', 2], ['m2', 2]] : `2 ${key('m1')}\n2 ${key('m2')}`;
    const planned = { sessionId: 'new-id', sessionFile: 'new-id.jsonl', updatedAt: 2, recentMessageIds };
    const session: JournalSession =
      { sessionKey: 'agent:main:a', base: entryHash(base), entry: planned, files: ['other.jsonl', 'new-id.jsonl'], records: [['r1', 1, key('m1')], ['r2', 1, key('m2')]] };
    const v1 = { sessionKey: 'agent:main:a', base: entryHash(base), entry: planned, records: [{ id: 'r1', sessionFile: 'new-id.jsonl', messageId: 'm1' }, { id: 'r2', sessionFile: 'new-id.jsonl', messageId: 'm2' }] };
    writeJournalFile(storePath, [version === 1 ? v1 : session], version);
    await updateSessionStore(storePath, (store) => {
      store['agent:main:other'] = { sessionId: 'x', updatedAt: 3 };
    });
    const store = await readSessionStore(storePath);
    assert.equal(store['agent:main:a']?.sessionId, 'new-id');
    assert.equal(store['agent:main:a']?.recentMessageIds, `2 ${key('m1')}`);
    assert.equal(store['agent:main:other']?.sessionId, 'x');
    assert.equal(fs.readFileSync(journalPathFor(storePath), 'utf8'), '', 'the journal is emptied once applied');
  });
}

test('version 4 journals only the lines a plan appended to the memory; recovery puts them after the memory it finds', async () => {
  const { dir, storePath } = setup();
  const key = (id: string) => `telegram default direct:1  ${id}`;
  const base = { sessionId: 's1', sessionFile: 's1.jsonl', updatedAt: 1, recentMessageIds: `1 ${key('m0')}` };
  fs.writeFileSync(storePath, JSON.stringify({ 'agent:main:a': base }));
  await appendToTranscript(path.join(dir, 's1.jsonl'), { type: 'message', id: 'r1', message: { role: 'user', messageId: 'm1' } }, { session: { sessionId: 's1' } });
  const planned = { ...base, updatedAt: 2, recentMessageIds: `${base.recentMessageIds}\n2 ${key('m1')}\n2 ${key('m2')}` };
  const journalled = journalledEntry(planned, base.recentMessageIds);
  assert.equal(journalled.memory, `\n2 ${key('m1')}\n2 ${key('m2')}`, 'only what the plan added');
  assert.equal('recentMessageIds' in journalled.entry, false);
  // A memory cut from the front, or kept as pairs, goes whole.
  assert.deepEqual(journalledEntry({ ...planned, recentMessageIds: `2 ${key('m1')}` }, base.recentMessageIds), { entry: { ...planned, recentMessageIds: `2 ${key('m1')}` } });
  assert.deepEqual(journalledEntry(planned, [['m0', 1]]), { entry: planned });
  writeJournalFile(storePath, [{ sessionKey: 'agent:main:a', base: entryHash(base), ...journalled, files: ['s1.jsonl'], records: [['r1', 0, key('m1')], ['r2', 0, key('m2')]] }], 4);
  await updateSessionStore(storePath, () => undefined);
  const entry = (await readSessionStore(storePath))['agent:main:a'];
  assert.equal(entry?.updatedAt, 2);
  assert.equal(entry?.recentMessageIds, `1 ${key('m0')}\n2 ${key('m1')}`, 'the memory found, then the recorded id; the lost one is forgotten');
});

test('a rotation that stopped before the planned instance got a record: the entry names the newest instance that did', async () => {
  const key = (id: string) => `telegram default direct:1  ${id}`;
  for (const rotations of [1, 2]) {
    const { dir, storePath } = setup();
    const base = { sessionId: 'old', sessionFile: 'old.jsonl', updatedAt: 1, recentMessageIds: `1 ${key('m0')}` };
    fs.writeFileSync(storePath, JSON.stringify({ 'agent:main:a': base }));
    // The batch: m1 to the old instance, a /new, (m2 and another /new,) m3 to the planned instance —
    // whose file the dead writer never got to; with two rotations the middle instance is down.
    await appendToTranscript(path.join(dir, 'old.jsonl'), { type: 'message', id: 'r1', message: { role: 'user', messageId: 'm1' } }, { session: { sessionId: 'old' } });
    const files = rotations === 1 ? ['old.jsonl', 'new.jsonl'] : ['old.jsonl', 'mid.jsonl', 'new.jsonl'];
    const records: [string, number, string?][] = [['r1', 0, key('m1')], ['n-last', files.length - 1], ['r3', files.length - 1, key('m3')]];
    if (rotations === 2) {
      await appendToTranscript(path.join(dir, 'mid.jsonl'), [{ type: 'reset_notice', id: 'n-mid', previousSessionId: 'old' }, { type: 'message', id: 'r2', message: { role: 'user', messageId: 'm2' } }], { session: { sessionId: 'mid' } });
      records.push(['n-mid', 1], ['r2', 1, key('m2')]);
    }
    const memory = `${base.recentMessageIds}\n2 ${key('m1')}${rotations === 2 ? `\n2 ${key('m2')}` : ''}\n2 ${key('m3')}`;
    const planned = { sessionId: 'new', sessionFile: 'new.jsonl', updatedAt: 2, recentMessageIds: memory };
    writeJournalFile(storePath, [{ sessionKey: 'agent:main:a', base: entryHash(base), ...journalledEntry(planned, base.recentMessageIds), files, records }], 4);
    await updateSessionStore(storePath, () => undefined);
    const entry = (await readSessionStore(storePath))['agent:main:a'];
    assert.deepEqual([entry?.sessionId, entry?.sessionFile], rotations === 1 ? ['old', 'old.jsonl'] : ['mid', 'mid.jsonl'], 'never a transcript that was not written');
    assert.equal(entry?.recentMessageIds, `1 ${key('m0')}\n2 ${key('m1')}${rotations === 2 ? `\n2 ${key('m2')}` : ''}`, 'what is down, and only that');
    assert.equal(fs.existsSync(path.join(dir, 'new.jsonl')), false);
  }
  // `/new`, `/new` alone: the old instance gets no record, so the first file is the middle one.
  const { dir, storePath } = setup();
  const base = { sessionId: 'old', sessionFile: 'old.jsonl', updatedAt: 1 };
  fs.writeFileSync(storePath, JSON.stringify({ 'agent:main:a': base }));
  await appendToTranscript(path.join(dir, 'mid.jsonl'), { type: 'reset_notice', id: 'n-mid', previousSessionId: 'old' }, { session: { sessionId: 'mid' } });
  const planned = { sessionId: 'new', sessionFile: 'new.jsonl', updatedAt: 2 };
  writeJournalFile(storePath, [{ sessionKey: 'agent:main:a', base: entryHash(base), entry: planned, files: ['mid.jsonl', 'new.jsonl'], records: [['n-mid', 0], ['n-new', 1]] }], 4);
  await updateSessionStore(storePath, () => undefined);
  const entry = (await readSessionStore(storePath))['agent:main:a'];
  assert.deepEqual([entry?.sessionId, entry?.sessionFile], ['mid', 'mid.jsonl'], 'the first rotation happened, the second did not');
});

test('a journal never rolls back: not when its batch committed, not when the entry changed since, not without records', async () => {
  const { dir, storePath } = setup();
  const committed = { sessionId: 'planned', updatedAt: 5 };
  const changed = { sessionId: 'later', updatedAt: 9 };
  const untouched = { sessionId: 'same', updatedAt: 1 };
  fs.writeFileSync(storePath, JSON.stringify({ 'k:committed': committed, 'k:changed': changed, 'k:norecords': untouched }));
  await appendToTranscript(path.join(dir, 'f.jsonl'), { type: 'message', id: 'r1', message: { role: 'user' } }, { session: { sessionId: 'f' } });
  writeJournalFile(storePath, [
    // Its batch committed: the registry already holds the planned entry (≠ base).
    { sessionKey: 'k:committed', base: entryHash({ sessionId: 'before', updatedAt: 1 }), entry: { sessionId: 'stale', updatedAt: 4 }, records: [{ id: 'r1', sessionFile: 'f.jsonl' }] },
    // Something wrote the entry since: the journal's base no longer matches.
    { sessionKey: 'k:changed', base: entryHash({ sessionId: 'older', updatedAt: 2 }), entry: { sessionId: 'stale', updatedAt: 4 }, records: [{ id: 'r1', sessionFile: 'f.jsonl' }] },
    // Base matches but none of its records reached the disk: nothing was acknowledged.
    { sessionKey: 'k:norecords', base: entryHash(untouched), entry: { sessionId: 'ghost', updatedAt: 4 }, records: [{ id: 'never', sessionFile: 'f.jsonl' }] },
  ]);
  await updateSessionStore(storePath, () => undefined);
  const store = await readSessionStore(storePath);
  assert.deepEqual(store['k:committed'], committed);
  assert.deepEqual(store['k:changed'], changed);
  assert.deepEqual(store['k:norecords'], untouched);
});

test('a torn journal (the writer died while writing it, before any record) is ignored', async () => {
  const { storePath } = setup();
  fs.writeFileSync(storePath, JSON.stringify({ 'k:a': { sessionId: 'a', updatedAt: 1 } }));
  fs.writeFileSync(journalPathFor(storePath), '{"version":1,"sessions":[{"sessionKey":"k:a","ba');
  await updateSessionStore(storePath, (store) => {
    store['k:b'] = { sessionId: 'b', updatedAt: 2 };
  });
  const store = await readSessionStore(storePath);
  assert.deepEqual(Object.keys(store).sort(), ['k:a', 'k:b']);
});

test('doctor reports a pending journal (journal-pending) and --repair completes it', async () => {
  const stateDir = tempDir();
  const dir = path.join(stateDir, 'agents', 'main', 'sessions');
  fs.mkdirSync(dir, { recursive: true });
  const storePath = path.join(dir, 'sessions.json');
  fs.writeFileSync(storePath, '{}\n');
  const sessionId = '3f2b8a4e-1c5d-4e6f-8a9b-0c1d2e3f4a5b';
  await appendToTranscript(
    path.join(dir, `${sessionId}.jsonl`),
    { type: 'message', id: 'r1', message: { role: 'user', content: [{ type: 'text', text: 'hi' }], timestamp: 1, messageId: 'm1', channel: 'telegram', runId: 'run-1' } },
    { session: { sessionId, sessionKey: 'agent:main:main', agentId: 'main' } },
  );
  writeJournalFile(storePath, [
    {
      sessionKey: 'agent:main:main',
      base: null,
      entry: { sessionId, sessionFile: `${sessionId}.jsonl`, updatedAt: 1, recentMessageIds: '1 m1' },
      records: [{ id: 'r1', sessionFile: `${sessionId}.jsonl`, messageId: 'm1' }],
    },
  ]);
  const check = await runCli(['doctor', '--json', '--state-dir', stateDir]);
  assert.equal(check.code, 65, check.stderr);
  assert.ok(JSON.parse(check.stdout).stores[0].problems.some((p: { kind: string }) => p.kind === 'journal-pending'), check.stdout);
  const repair = await runCli(['doctor', '--repair', '--json', '--state-dir', stateDir]);
  assert.equal(repair.code, 0, repair.stdout + repair.stderr);
  assert.equal((await readSessionStore(storePath))['agent:main:main']?.sessionId, sessionId);
  const again = await runCli(['doctor', '--json', '--state-dir', stateDir]);
  assert.equal(again.code, 0, again.stdout);
});

test('a journal that plans an entry which is not an object (foreign or damaged) never installs it; one for a key whose entry is not an object leaves that entry as it is', async () => {
  const { dir, storePath } = setup();
  const base = { sessionId: 'a', updatedAt: 1 };
  fs.writeFileSync(storePath, JSON.stringify({ 'k:a': base, 'k:null': null }));
  await appendToTranscript(path.join(dir, 'a.jsonl'), { type: 'message', id: 'r1', message: { role: 'user' } }, { session: { sessionId: 'a' } });
  writeJournalFile(
    storePath,
    [
      // Base and record match: only the planned "entry" is wrong.
      { sessionKey: 'k:a', base: entryHash(base), entry: null, files: ['a.jsonl'], records: [['r1', 0]] },
      // Planned from "no entry": the key's null is not that.
      { sessionKey: 'k:null', base: null, entry: { sessionId: 'a', updatedAt: 2 }, files: ['a.jsonl'], records: [['r1', 0]] },
    ],
    2,
  );
  await updateSessionStore(storePath, () => undefined);
  assert.deepEqual(JSON.parse(fs.readFileSync(storePath, 'utf8')), { 'k:a': base, 'k:null': null });
});
