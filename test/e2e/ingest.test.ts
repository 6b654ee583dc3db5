// `switchboard ingest` and `send` end to end: real processes, real files, real locks.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { REPO_ROOT, jsonLines, runCli, tempDir, writeJson } from '../helpers.js';

const EXAMPLE_CONFIG = path.join(REPO_ROOT, 'examples', 'switchboard.json5');
const EXAMPLE_MESSAGES = path.join(REPO_ROOT, 'examples', 'alice.ndjson');

function sessionsDir(state: string, agent: string): string {
  return path.join(state, 'agents', agent, 'sessions');
}

function readStore(state: string, agent: string): Record<string, any> {
  return JSON.parse(fs.readFileSync(path.join(sessionsDir(state, agent), 'sessions.json'), 'utf8'));
}

function transcriptLines(state: string, agent: string, sessionFile: string): any[] {
  return jsonLines(fs.readFileSync(path.join(sessionsDir(state, agent), sessionFile), 'utf8'));
}

function ingest(state: string, input: string, extra: string[] = [], config?: string) {
  return runCli(['ingest', '--state-dir', state, ...(config ? ['--config', config] : []), ...extra], { input });
}

const line = (message: Record<string, unknown>) => JSON.stringify(message);

describe('the Alice scenario (examples/)', () => {
  test('linked DMs share one session; the group and the thread have their own; the thread inherits the group binding', async () => {
    const state = tempDir();
    const r = await runCli(['ingest', EXAMPLE_MESSAGES, '--config', EXAMPLE_CONFIG, '--state-dir', state]);
    assert.equal(r.code, 0, r.stderr);
    const events = jsonLines(r.stdout);
    assert.deepEqual(events.map((e) => [e.type, e.line, e.disposition]), [1, 2, 3, 4, 5].map((n) => ['result', n, 'recorded']));
    const [telegram, slack, group, thread, general] = events;
    assert.equal(telegram.sessionKey, 'agent:main:direct:alice');
    assert.equal(slack.sessionKey, 'agent:main:direct:alice');
    assert.equal(telegram.sessionId, slack.sessionId);
    assert.equal(group.sessionKey, 'agent:club:discord:channel:book-club');
    assert.equal(group.matchedBy, 'binding.peer');
    assert.equal(thread.sessionKey, 'agent:club:discord:channel:thread-dune');
    assert.equal(thread.agentId, 'club');
    assert.equal(thread.matchedBy, 'binding.peer.parent');
    assert.notEqual(thread.sessionId, group.sessionId);
    assert.equal(general.agentId, 'main');
    assert.equal(general.matchedBy, 'binding.guild');

    const mainStore = readStore(state, 'main');
    const alice = mainStore['agent:main:direct:alice'];
    assert.equal(alice.sessionId, telegram.sessionId);
    // The session's address follows its owner's latest message: Alice wrote on Slack last.
    assert.equal(alice.deliveryContext.channel, 'slack');
    const lines = transcriptLines(state, 'main', alice.sessionFile);
    assert.equal(lines[0].type, 'session');
    assert.equal(lines[0].id, alice.sessionId);
    assert.deepEqual(lines.slice(1).map((l) => [l.message.channel, l.message.messageId]), [['telegram', 'tg-1001'], ['slack', 'sl-2001']]);
    assert.equal(lines[2].parentId, lines[1].id);
    const clubStore = readStore(state, 'club');
    assert.deepEqual(Object.keys(clubStore).sort(), ['agent:club:discord:channel:book-club', 'agent:club:discord:channel:thread-dune']);
  });

  test('dmScope "main" collapses the DMs into the main session', async () => {
    const state = tempDir();
    // The example is a pair (switchboard.json5 extends openclaw.json): copy both, change the OpenClaw file.
    const base = fs.readFileSync(path.join(path.dirname(EXAMPLE_CONFIG), 'openclaw.json'), 'utf8').replace('"dmScope": "per-peer"', '"dmScope": "main"');
    assert.ok(base.includes('"dmScope": "main"'));
    fs.writeFileSync(path.join(state, 'openclaw.json'), base);
    const config = path.join(state, 'main-scope.json5');
    fs.copyFileSync(EXAMPLE_CONFIG, config);
    const r = await runCli(['ingest', EXAMPLE_MESSAGES, '--config', config, '--state-dir', state]);
    const [telegram, slack] = jsonLines(r.stdout);
    assert.equal(telegram.sessionKey, 'agent:main:main');
    assert.equal(slack.sessionKey, 'agent:main:main');
    assert.equal(telegram.sessionId, slack.sessionId);
  });
});

describe('bad input', () => {
  test('each bad line gets an error event with its line and JSON path; good lines are kept; exit 65', async () => {
    const state = tempDir();
    const input = [
      line({ channel: 'telegram', peer: 'direct:1', text: 'one' }),
      'not json',
      line({ peer: 'direct:1', text: 'no channel' }),
      line({ channel: 'telegram', peer: 'direct:1', text: 'two', kind: 'shout' }),
      line({ channel: 'telegram', peer: { kind: 'room', id: 'x' }, text: 'bad peer' }),
      line({ channel: 'telegram', peer: 'direct:1' }),
      line({ channel: 'telegram', peer: 'direct:1', text: 'three', memberRoleIds: [1, {}] }),
      line({ channel: 'telegram', peer: 'direct:1', text: 'four' }),
    ].join('\n');
    const r = await ingest(state, input);
    assert.equal(r.code, 65);
    const events = jsonLines(r.stdout);
    assert.deepEqual(events.map((e) => e.line), [1, 2, 3, 4, 5, 6, 7, 8]);
    assert.deepEqual(events.map((e) => e.type === 'error' ? `${e.code}@${e.path}` : e.disposition), [
      'recorded',
      'BAD_MESSAGE@$',
      'BAD_MESSAGE@channel',
      'BAD_MESSAGE@kind',
      'BAD_MESSAGE@peer.kind',
      'BAD_MESSAGE@text',
      'BAD_MESSAGE@memberRoleIds[1]',
      'recorded',
    ]);
    const entry = readStore(state, 'main')['agent:main:main'];
    const texts = transcriptLines(state, 'main', entry.sessionFile).slice(1).map((l) => l.message.content[0].text);
    assert.deepEqual(texts, ['one', 'four']);
  });

  test('an explicit sessionKey that does not normalise is BAD_MESSAGE at "sessionKey" (a bad line, not bad usage); nothing is written for it', async () => {
    const state = tempDir();
    const input = [
      line({ channel: 'telegram', sessionKey: 'agent:../../x:main', text: 'climbs out' }),
      line({ channel: 'telegram', sessionKey: 'agent:Main Agent:main', text: 'not an agent id' }),
      line({ channel: 'telegram', sessionKey: 'agent:main:notes', text: 'fine' }),
    ].join('\n');
    const r = await ingest(state, input);
    assert.equal(r.code, 65, r.stderr);
    const events = jsonLines(r.stdout);
    assert.deepEqual(events.map((e) => (e.type === 'error' ? `${e.line} ${e.code}@${e.path}` : `${e.line} ${e.disposition}`)), [
      '1 BAD_MESSAGE@sessionKey',
      '2 BAD_MESSAGE@sessionKey',
      '3 recorded',
    ]);
    assert.deepEqual(Object.keys(readStore(state, 'main')), ['agent:main:notes']);
  });

  test('a timestamp that is not a real time (30 February, 24:00, text after it) is BAD_MESSAGE at "timestamp", never rolled over', async () => {
    const state = tempDir();
    const input = [
      line({ channel: 'telegram', peer: 'direct:1', text: 'feb 30', timestamp: '2026-02-30' }),
      line({ channel: 'telegram', peer: 'direct:1', text: 'midnight+', timestamp: '2026-11-30T24:00:00Z' }),
      line({ channel: 'telegram', peer: 'direct:1', text: 'trailing', timestamp: '2026-11-30 (sent)' }),
      // Outside the clock's range, in either form, as --now is: 1e20 ms and year 1 are no times a message was sent.
      line({ channel: 'telegram', peer: 'direct:1', text: 'far future', timestamp: 1e20 }),
      line({ channel: 'telegram', peer: 'direct:1', text: 'year one', timestamp: '0001-01-01T00:00:00Z' }),
      line({ channel: 'telegram', peer: 'direct:1', text: 'fine', timestamp: '2026-11-30T07:00:00Z' }),
    ].join('\n');
    const r = await ingest(state, input);
    assert.equal(r.code, 65, r.stderr);
    assert.deepEqual(jsonLines(r.stdout).map((e) => (e.type === 'error' ? `${e.line} ${e.code}@${e.path}` : `${e.line} ${e.disposition}`)), [
      '1 BAD_MESSAGE@timestamp',
      '2 BAD_MESSAGE@timestamp',
      '3 BAD_MESSAGE@timestamp',
      '4 BAD_MESSAGE@timestamp',
      '5 BAD_MESSAGE@timestamp',
      '6 recorded',
    ]);
    const entry = readStore(state, 'main')['agent:main:main'];
    assert.deepEqual(transcriptLines(state, 'main', entry.sessionFile).slice(1).map((l) => l.message.content[0].text), ['fine']);
  });

  test('a line over 1 MiB and invalid UTF-8 are BAD_MESSAGE; nothing is written for them', async () => {
    const state = tempDir();
    const huge = line({ channel: 'x', text: 'y'.repeat(1024 * 1024) });
    const input = Buffer.concat([Buffer.from(`${huge}\n`), Buffer.from([0x7b, 0xc3, 0x28, 0x7d, 0x0a])]);
    const r = await runCli(['ingest', '--state-dir', state], { input });
    assert.equal(r.code, 65);
    assert.deepEqual(jsonLines(r.stdout).map((e) => [e.line, e.code]), [[1, 'BAD_MESSAGE'], [2, 'BAD_MESSAGE']]);
    assert.equal(fs.existsSync(path.join(state, 'agents')), false);
  });

  test('a corrupt sessions.json fails with STORE_CORRUPT and is never overwritten', async () => {
    const state = tempDir();
    await ingest(state, line({ channel: 'x', text: 'first' }));
    const store = path.join(sessionsDir(state, 'main'), 'sessions.json');
    fs.writeFileSync(store, '{"agent:main:main": {"sessionId": "abc", "upd');
    const before = fs.readFileSync(store);
    const r = await ingest(state, line({ channel: 'x', text: 'second' }));
    assert.equal(r.code, 65);
    const [event] = jsonLines(r.stdout);
    assert.equal(event.code, 'STORE_CORRUPT');
    assert.deepEqual(fs.readFileSync(store), before);
  });

  test('ids that try to leave the store never produce a path outside it', async () => {
    const state = tempDir();
    const input = [
      line({ channel: 'x', peer: 'direct:../../etc/passwd', text: 'a', threadId: '../../../tmp/evil' }),
      line({ channel: 'x', sessionKey: 'agent:../x:main', text: 'b' }),
      line({ channel: 'x', sessionKey: '../../../etc', text: 'c' }),
      line({ channel: '../x', peer: 'group:/etc/passwd', text: 'd' }),
    ].join('\n');
    const r = await ingest(state, input);
    const events = jsonLines(r.stdout);
    assert.equal(events.length, 4);
    const walk = (dir: string): string[] => fs.readdirSync(dir, { withFileTypes: true }).flatMap((d) => (d.isDirectory() ? walk(path.join(dir, d.name)) : [path.join(dir, d.name)]));
    for (const file of walk(state)) {
      assert.ok(!path.relative(path.join(state, 'agents', 'main', 'sessions'), file).startsWith('..'), `${file} stays in the store`);
    }
    assert.equal(events[1].type, 'error');
  });
});

describe('session instances', () => {
  const at = (iso: string) => ['--now', iso];

  test('heartbeat, system and cron messages never move lastInteractionAt; idle reset fires on schedule', async () => {
    const state = tempDir();
    const config = writeJson(path.join(state, 'c.json'), { session: { dmScope: 'per-peer', reset: { mode: 'idle', idleMinutes: 30 } } });
    const dm = { channel: 'telegram', peer: 'direct:9' };
    let r = await ingest(state, line({ ...dm, text: 'hello' }), at('2026-11-30T10:00:00Z'), config);
    const first = jsonLines(r.stdout)[0];
    for (const [kind, time] of [['heartbeat', '10:20'], ['system', '10:25']] as const) {
      r = await ingest(state, line({ ...dm, kind, text: `${kind} ping` }), at(`2026-11-30T${time}:00Z`), config);
      assert.equal(jsonLines(r.stdout)[0].sessionId, first.sessionId);
    }
    const entry = readStore(state, 'main')['agent:main:direct:9'];
    assert.equal(entry.lastInteractionAt, Date.parse('2026-11-30T10:00:00Z'));
    assert.equal(entry.updatedAt, Date.parse('2026-11-30T10:25:00Z'));
    // 30 min after the last real message (not after the heartbeat): stale, rotated.
    r = await ingest(state, line({ ...dm, text: 'back again' }), at('2026-11-30T10:30:01Z'), config);
    const rotated = jsonLines(r.stdout)[0];
    assert.deepEqual(rotated.reset, { reason: 'idle', previousSessionId: first.sessionId });
    assert.notEqual(rotated.sessionId, first.sessionId);
    const archived = fs.readdirSync(sessionsDir(state, 'main')).filter((f) => f.startsWith(`${first.sessionId}.jsonl.reset.`));
    assert.equal(archived.length, 1);
    const lines = transcriptLines(state, 'main', `${rotated.sessionId}.jsonl`);
    assert.deepEqual(lines.map((l) => l.type), ['session', 'reset_notice', 'message']);
    assert.equal(lines[1].reason, 'idle');
  });

  test('daily reset at atHour in the configured zone, across a DST change', async () => {
    const state = tempDir();
    const config = writeJson(path.join(state, 'c.json'), { session: { reset: { mode: 'daily', atHour: 4, timezone: 'Europe/Berlin' } } });
    // 2026-10-25: Berlin leaves summer time at 03:00 CEST → 02:00 CET; 04:00 CET is 03:00Z.
    let r = await ingest(state, line({ channel: 'x', text: 'late night' }), at('2026-10-25T01:30:00Z'), config);
    const first = jsonLines(r.stdout)[0];
    r = await ingest(state, line({ channel: 'x', text: 'still before 4' }), at('2026-10-25T02:59:59Z'), config);
    assert.equal(jsonLines(r.stdout)[0].sessionId, first.sessionId);
    assert.equal(jsonLines(r.stdout)[0].reset, null);
    r = await ingest(state, line({ channel: 'x', text: 'after 4 local' }), at('2026-10-25T03:00:01Z'), config);
    assert.deepEqual(jsonLines(r.stdout)[0].reset, { reason: 'daily', previousSessionId: first.sessionId });
  });

  test('no reset policy means never: a year later the session is the same', async () => {
    const state = tempDir();
    let r = await ingest(state, line({ channel: 'x', text: 'a' }), at('2026-01-01T00:00:00Z'));
    const first = jsonLines(r.stdout)[0];
    r = await ingest(state, line({ channel: 'x', text: 'b' }), at('2027-01-01T00:00:00Z'));
    assert.equal(jsonLines(r.stdout)[0].sessionId, first.sessionId);
  });

  test('/new and /reset rotate; a bare trigger is a command; "/new <model>" sets the model', async () => {
    const state = tempDir();
    const dm = { channel: 'telegram', peer: 'direct:5' };
    const r = await ingest(state, [line({ ...dm, text: 'hi' }), line({ ...dm, text: '/NEW' }), line({ ...dm, text: '/reset what now?' }), line({ ...dm, text: '/new gpt-5' })].join('\n'));
    const [hi, bare, withText, model] = jsonLines(r.stdout);
    assert.equal(bare.disposition, 'command');
    assert.deepEqual(bare.reset, { reason: 'command', previousSessionId: hi.sessionId });
    assert.equal(withText.disposition, 'recorded');
    assert.deepEqual(withText.reset, { reason: 'command', previousSessionId: bare.sessionId });
    const entry = readStore(state, 'main')['agent:main:main'];
    assert.equal(entry.sessionId, model.sessionId);
    assert.equal(entry.model, 'gpt-5');
    // The text after "/reset" was recorded in the new instance, after its reset notice.
    const archived = fs.readdirSync(sessionsDir(state, 'main')).find((f) => f.startsWith(`${withText.sessionId}.jsonl.reset.`))!;
    const lines = transcriptLines(state, 'main', archived);
    assert.deepEqual(lines.slice(1).map((l) => l.type === 'message' ? l.message.content[0].text : l.type), ['reset_notice', 'what now?']);
  });

  test('a reset trigger as the first message of an address is a command too: its word is never recorded', async () => {
    const state = tempDir();
    const r = await ingest(
      state,
      [
        line({ channel: 'telegram', peer: 'direct:a', text: '/new hello there' }),
        line({ channel: 'telegram', peer: 'direct:b', text: '/new' }),
        line({ channel: 'telegram', peer: 'direct:c', text: '/new gpt-5' }),
        line({ channel: 'telegram', peer: 'direct:b', text: 'and now?' }),
      ].join('\n'),
      [],
      writeJson(path.join(state, 'config.json'), { session: { dmScope: 'per-peer' } }),
    );
    assert.equal(r.code, 0, r.stderr);
    const [rest, bare, model, after] = jsonLines(r.stdout);
    assert.deepEqual([rest.disposition, bare.disposition, model.disposition, after.disposition], ['recorded', 'command', 'command', 'recorded']);
    assert.deepEqual([rest.reset, bare.reset, model.reset], [null, null, null], 'nothing was there to reset');
    assert.equal(after.sessionId, bare.sessionId, 'the instance the bare trigger started goes on');
    const store = readStore(state, 'main');
    const shapeOf = (key: string) => transcriptLines(state, 'main', store[key].sessionFile).slice(1).map((l) => (l.type === 'message' ? l.message.content[0].text : `${l.type}${l.previousSessionId === undefined ? '' : ' after'}`));
    assert.deepEqual(shapeOf('agent:main:direct:a'), ['hello there']);
    assert.deepEqual(shapeOf('agent:main:direct:b'), ['reset_notice', 'and now?']);
    assert.deepEqual(shapeOf('agent:main:direct:c'), ['reset_notice']);
    assert.equal(store['agent:main:direct:c'].model, 'gpt-5');
    const transcript = await runCli(['sessions', 'transcript', 'agent:main:direct:b', '--state-dir', state, '--config', path.join(state, 'config.json')]);
    assert.match(transcript.stdout, /reset \(command\) as the first message: nothing before it/);
  });

  test('a repeated messageId within 5 minutes is a duplicate and is recorded once', async () => {
    const state = tempDir();
    const msg = line({ channel: 'x', text: 'once', messageId: 'm-1' });
    let r = await ingest(state, `${msg}\n${msg}`, at('2026-11-30T10:00:00Z'));
    assert.deepEqual(jsonLines(r.stdout).map((e) => e.disposition), ['recorded', 'duplicate']);
    r = await ingest(state, msg, at('2026-11-30T10:04:00Z'));
    assert.equal(jsonLines(r.stdout)[0].disposition, 'duplicate');
    r = await ingest(state, msg, at('2026-11-30T10:06:00Z'));
    assert.equal(jsonLines(r.stdout)[0].disposition, 'recorded');
    const entry = readStore(state, 'main')['agent:main:main'];
    assert.equal(transcriptLines(state, 'main', entry.sessionFile).filter((l) => l.type === 'message').length, 2);
  });

  test('the same messageId from another route is another message (queue.md: "same messageId and route"); a resend from its own route is a duplicate', async () => {
    const state = tempDir();
    // dmScope main (the default): every DM meets in agent:main:main, and each chat numbers its own messages.
    const from = (peer: string, extra: Record<string, unknown> = {}) => line({ channel: 'telegram', peer, text: `hi from ${peer}`, messageId: '1', ...extra });
    const lines = [from('direct:alice'), from('direct:bob'), from('direct:alice', { accountId: 'work' }), from('direct:alice', { channel: 'discord' }), from('direct:alice'), from('direct:bob')];
    const r = await ingest(state, lines.join('\n'), at('2026-11-30T10:00:00Z'));
    assert.equal(r.code, 0, r.stderr);
    const results = jsonLines(r.stdout);
    assert.deepEqual(results.map((e) => e.disposition), ['recorded', 'recorded', 'recorded', 'recorded', 'duplicate', 'duplicate']);
    assert.equal(new Set(results.map((e) => e.sessionKey)).size, 1, 'one session');
    const entry = readStore(state, 'main')['agent:main:main'];
    const records = transcriptLines(state, 'main', entry.sessionFile).filter((l) => l.type === 'message');
    assert.equal(records.length, 4);
    // Each record names its route, which is what the memory is rebuilt from.
    assert.deepEqual(records.map((l) => [l.message.channel, l.message.accountId ?? 'default', l.message.peer?.id]), [['telegram', 'default', 'alice'], ['telegram', 'default', 'bob'], ['telegram', 'work', 'alice'], ['discord', 'default', 'alice']]);
  });

  test('after the clock steps back past the window, a resend is still a duplicate (its record is on disk)', async () => {
    const state = tempDir();
    const msg = line({ channel: 'x', text: 'once', messageId: 'm-back' });
    let r = await ingest(state, msg, at('2026-11-30T10:00:00Z'));
    assert.equal(jsonLines(r.stdout)[0].disposition, 'recorded');
    // NTP steps the clock back 10 minutes: the id was remembered "in the future".
    r = await ingest(state, msg, at('2026-11-30T09:50:00Z'));
    assert.equal(jsonLines(r.stdout)[0].disposition, 'duplicate');
    r = await ingest(state, line({ channel: 'x', text: 'other', messageId: 'm-other' }), at('2026-11-30T09:51:00Z'));
    r = await ingest(state, msg, at('2026-11-30T09:52:00Z'));
    assert.equal(jsonLines(r.stdout)[0].disposition, 'duplicate', 'still remembered after another message pruned the memory');
    const entry = readStore(state, 'main')['agent:main:main'];
    assert.equal(transcriptLines(state, 'main', entry.sessionFile).filter((l) => l.type === 'message' && l.message.messageId === 'm-back').length, 1);
  });

  test('a store whose duplicate memory an earlier version wrote as [id, ms] pairs is read; the next change writes the string, keeping the old lines until they leave the window', async () => {
    const state = tempDir();
    const first = line({ channel: 'x', text: 'first', messageId: 'old-1' });
    await ingest(state, first, at('2026-11-30T10:00:00Z'));
    const storeFile = path.join(sessionsDir(state, 'main'), 'sessions.json');
    const store = readStore(state, 'main');
    const recordedAt = Date.parse('2026-11-30T10:00:00Z');
    assert.equal(store['agent:main:main'].recentMessageIds, `${recordedAt} x default   old-1`, 'keyed by route and messageId');
    store['agent:main:main'].recentMessageIds = [['old-1', recordedAt], ['old-2', recordedAt]];
    fs.writeFileSync(storeFile, JSON.stringify(store, null, 2));

    const resend = line({ channel: 'x', text: 'new', messageId: 'new-1' });
    const r = await ingest(state, `${resend}\n${resend}`, at('2026-11-30T10:01:00Z'));
    assert.deepEqual(jsonLines(r.stdout).map((e) => e.disposition), ['recorded', 'duplicate']);
    // The earlier version's lines hold bare ids (no route): carried as they were, they match no message of today's.
    assert.equal(readStore(state, 'main')['agent:main:main'].recentMessageIds, `${recordedAt} old-1\n${recordedAt} old-2\n${recordedAt + 60_000} x default   new-1`);
    await ingest(state, line({ channel: 'x', text: 'later', messageId: 'new-2' }), at('2026-11-30T10:06:30Z'));
    assert.equal(readStore(state, 'main')['agent:main:main'].recentMessageIds.includes('old-'), false, 'gone with the window');
  });

  test('cron messages get a fresh sessionId on every run; explicit keys skip routing', async () => {
    const state = tempDir();
    const cron = line({ channel: 'cron', cron: { jobId: 'Digest' }, text: 'run the digest' });
    const a = jsonLines((await ingest(state, cron)).stdout)[0];
    const b = jsonLines((await ingest(state, cron)).stdout)[0];
    assert.equal(a.sessionKey, 'agent:main:cron:digest');
    assert.notEqual(a.sessionId, b.sessionId);
    assert.equal(readStore(state, 'main')['agent:main:cron:digest'].lastInteractionAt, undefined);
    const explicit = jsonLines((await ingest(state, line({ channel: 'x', sessionKey: 'notes', text: 'n' }))).stdout)[0];
    assert.equal(explicit.sessionKey, 'agent:main:notes');
    assert.equal(explicit.matchedBy, 'explicit');
  });

  test('incognito messages are routed but nothing is written', async () => {
    const state = tempDir();
    const r = await ingest(state, line({ channel: 'x', peer: 'direct:1', text: 'secret', incognito: true }));
    const [event] = jsonLines(r.stdout);
    assert.equal(event.persisted, false);
    assert.equal(event.sessionKey, 'agent:main:main');
    assert.equal(fs.existsSync(path.join(state, 'agents')), false);
  });

  test('send records one message from flags', async () => {
    const state = tempDir();
    const r = await runCli(['send', 'backup done', '--channel', 'telegram', '--peer', 'direct:42', '--sender-name', 'cron-box', '--state-dir', state]);
    assert.equal(r.code, 0, r.stderr);
    const [event] = jsonLines(r.stdout);
    assert.equal(event.disposition, 'recorded');
    const entry = readStore(state, 'main')['agent:main:main'];
    assert.equal(transcriptLines(state, 'main', entry.sessionFile)[1].message.content[0].text, 'backup done');
  });
});

describe('concurrency and locks', () => {
  test('4 processes ingesting into the same session at once: every line once, whole, in each writer\'s order', async () => {
    const state = tempDir();
    const writers = 4;
    const perWriter = 150;
    const runs = Array.from({ length: writers }, (_, w) =>
      ingest(state, Array.from({ length: perWriter }, (_, i) => line({ channel: 'x', text: `w${w}-${i}`, messageId: `w${w}-${i}` })).join('\n')),
    );
    const results = await Promise.all(runs);
    for (const r of results) assert.equal(r.code, 0, r.stderr);
    const entry = readStore(state, 'main')['agent:main:main'];
    const raw = fs.readFileSync(path.join(sessionsDir(state, 'main'), entry.sessionFile), 'utf8');
    const lines = jsonLines(raw);
    assert.equal(lines.filter((l) => l.type === 'session').length, 1);
    const texts = lines.filter((l) => l.type === 'message').map((l) => l.message.content[0].text as string);
    assert.equal(texts.length, writers * perWriter);
    assert.equal(new Set(texts).size, writers * perWriter);
    for (let w = 0; w < writers; w++) {
      const mine = texts.filter((t) => t.startsWith(`w${w}-`)).map((t) => Number(t.split('-')[1]));
      assert.deepEqual(mine, Array.from({ length: perWriter }, (_, i) => i), `writer ${w} order kept`);
    }
  });

  test('a message arriving while another process holds the session lock waits and is recorded, never dropped', async () => {
    const state = tempDir();
    const first = jsonLines((await ingest(state, line({ channel: 'x', text: 'open' }))).stdout)[0];
    const transcript = path.join(sessionsDir(state, 'main'), `${first.sessionId}.jsonl`);
    const child = spawn(process.execPath, [fileURLToPath(new URL('../fixtures/lock-holder-child.js', import.meta.url)), JSON.stringify({ target: transcript, behaviour: 'hold', sessionKey: 'agent:main:main', runId: 'long-run' })], { stdio: ['pipe', 'pipe', 'inherit'] });
    await new Promise<void>((resolve) => child.stdout.on('data', (d: Buffer) => d.toString().includes('held') && resolve()));
    const pending = ingest(state, line({ channel: 'x', text: 'while busy' }));
    // The ingest must still be waiting: the lock is held until we say so.
    const early = await Promise.race([pending.then(() => 'finished'), new Promise((resolve) => setTimeout(resolve, 700, 'waiting'))]);
    assert.equal(early, 'waiting');
    child.stdin.write('release\n');
    const r = await pending;
    assert.equal(r.code, 0, r.stderr);
    assert.equal(jsonLines(r.stdout)[0].disposition, 'recorded');
    const texts = jsonLines(fs.readFileSync(transcript, 'utf8')).filter((l) => l.type === 'message').map((l) => l.message.content[0].text);
    assert.deepEqual(texts, ['open', 'while busy']);
  });
});

/** `ingest` with its stdin the open file `fd` (as after `< file`; closed here once the child has it). */
function ingestWithStdin(state: string, fd: number): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [path.join(REPO_ROOT, 'bin', 'switchboard'), 'ingest', '--state-dir', state], { stdio: [fd, 'pipe', 'pipe'] });
    fs.closeSync(fd);
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

describe('input sources', () => {
  test('stdin redirected from a file (`ingest < file`) is read like a pipe; a FILE argument and `-` too', async () => {
    const state = tempDir();
    const file = path.join(state, 'in.ndjson');
    fs.writeFileSync(file, `${line({ channel: 'x', peer: 'direct:a', text: 'one' })}\n${line({ channel: 'x', peer: 'direct:a', text: 'two' })}\n`);
    // Node gives a process whose stdin is a regular file an fs.ReadStream, as for a FILE argument.
    const redirected = await ingestWithStdin(state, fs.openSync(file, 'r'));
    assert.equal(redirected.code, 0, redirected.stderr);
    assert.deepEqual(jsonLines(redirected.stdout).map((e) => e.disposition), ['recorded', 'recorded']);
    const asArgument = await runCli(['ingest', file, '--state-dir', state]);
    assert.equal(asArgument.code, 0, asArgument.stderr);
    assert.deepEqual(jsonLines(asArgument.stdout).map((e) => e.disposition), ['recorded', 'recorded'], 'no messageId: recorded again');
  });

  test('stdin redirected from a file is read from where the shell left it (`{ head -n1; ingest; } < file`), to the end', async () => {
    const state = tempDir();
    const file = path.join(state, 'in.ndjson');
    const first = `${line({ channel: 'x', peer: 'direct:a', text: 'read by someone else' })}\n`;
    // Over a megabyte after the first line, so a reader with large chunks needs several of them.
    const rest = Array.from({ length: 6000 }, (_, i) => line({ channel: 'x', peer: `direct:p${i % 7}`, text: `${i} ${'y'.repeat(200)}` })).join('\n');
    fs.writeFileSync(file, `${first}${rest}\n`);
    const fd = fs.openSync(file, 'r');
    fs.readSync(fd, Buffer.alloc(first.length), 0, first.length, null); // moves the shared offset
    const { code, stdout, stderr } = await ingestWithStdin(state, fd);
    assert.equal(code, 0, stderr);
    const events = jsonLines(stdout);
    assert.equal(events.length, 6000);
    assert.ok(events.every((e) => e.disposition === 'recorded'));
    const texts = Object.values(readStore(state, 'main')).flatMap((entry: any) => transcriptLines(state, 'main', entry.sessionFile).filter((r) => r.type === 'message').map((r) => r.message.content[0].text as string));
    assert.equal(texts.length, 6000);
    assert.ok(!texts.includes('read by someone else'), 'the line before the offset is not ingested');
  });
});
