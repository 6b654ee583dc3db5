// What people read: tables line up by display width (CJK and emoji take two columns, combining
// marks none), and times are shown in the configured time zone where one is set.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import { runCli, tempDir } from '../helpers.js';

/**
 * Columns a string takes on a terminal, for the characters these tests use (written out here so
 * the test does not measure with the library under test): CJK ideographs and emoji 2, combining
 * accents 0, everything else 1.
 */
function columns(text: string): number {
  let width = 0;
  for (const char of text) {
    const code = char.codePointAt(0)!;
    if (code >= 0x300 && code <= 0x36f) continue;
    width += (code >= 0x4e00 && code <= 0x9fff) || (code >= 0x1f300 && code <= 0x1faff) ? 2 : 1;
  }
  return width;
}

const PEERS = ['王小明', '😀x', 'ande\u0301', 'bob'];

function messages(): string {
  return PEERS.map((peer) => JSON.stringify({ channel: 'telegram', peer: `direct:${peer}`, text: `hi ${peer}` })).join('\n');
}

describe('display', () => {
  test('sessions table: every column starts at the same terminal column with CJK, emoji and combining marks in the keys', async () => {
    const state = tempDir();
    fs.writeFileSync(path.join(state, 'switchboard.json5'), '{ session: { dmScope: "per-peer" } }');
    assert.equal((await runCli(['ingest', '--state-dir', state, '--now', '2026-11-30T07:00:00Z'], { input: messages() })).code, 0);
    const r = await runCli(['sessions', '--state-dir', state, '--now', '2026-11-30T08:00:00Z']);
    assert.equal(r.code, 0, r.stderr);
    const [header, ...rows] = r.stdout.trimEnd().split('\n');
    assert.equal(rows.length, PEERS.length);
    for (const name of ['Age', 'Model', 'Flags']) {
      const at = header.search(new RegExp(`\\b${name}\\b`));
      for (const row of rows) {
        // The cell of that column in this row: after the key, the rows read "1h  -  -".
        const cell = name === 'Age' ? '1h' : '-';
        const index = name === 'Flags' ? row.lastIndexOf(cell) : name === 'Model' ? row.indexOf(cell, row.indexOf('1h')) : row.indexOf(cell);
        assert.equal(columns(row.slice(0, index)), at, `${name} lines up in ${JSON.stringify(row)}`);
      }
    }
  });

  test('control characters and bidi overrides from the store (a runner-given model name) are shown escaped, never sent to the terminal', async () => {
    const state = tempDir();
    const sent = await runCli(['send', 'hi', '--channel', 'telegram', '--peer', 'direct:1', '--state-dir', state]);
    assert.equal(sent.code, 0, sent.stderr);
    const file = path.join(state, 'agents', 'main', 'sessions', 'sessions.json');
    const store = JSON.parse(fs.readFileSync(file, 'utf8'));
    store['agent:main:main'].model = 'gpt\u202e\u001b[31mred\u0007';
    fs.writeFileSync(file, JSON.stringify(store, null, 2));
    for (const args of [['sessions'], ['sessions', 'show', 'agent:main:main']]) {
      const r = await runCli([...args, '--state-dir', state]);
      assert.equal(r.code, 0, r.stderr);
      assert.doesNotMatch(r.stdout, /[\u0000-\u0009\u000b-\u001f\u202e]/, `${args.join(' ')}: no raw control character`);
      assert.match(r.stdout, /gpt\\u\{202e\}\\u\{1b\}\[31mred\\u\{7\}/, args.join(' '));
    }
  });

  test('control characters in config keys and in what an error quotes are shown escaped (config show, errors on stderr)', async () => {
    const state = tempDir();
    const hostile = 'x\u001b]0;owned\u0007\u202e';
    const config = path.join(state, 'c.json');
    fs.writeFileSync(config, JSON.stringify({ session: { dmScope: 'per-peer' }, [hostile]: { [`inner${hostile}`]: `value${hostile}` } }));
    const shown = await runCli(['config', 'show', '--config', config, '--state-dir', state]);
    assert.equal(shown.code, 0, shown.stderr);
    const rawControl = /[\u0000-\u0009\u000b-\u001f\u202e]/;
    assert.doesNotMatch(shown.stdout, rawControl, 'config show: no raw control character');
    assert.match(shown.stdout, /x\\u\{1b\}\]0;owned\\u\{7\}\\u\{202e\}/);
    // An error message that quotes the bad value: an unknown agent in an explicit session key.
    const refused = await runCli(['sessions', 'show', `agent:main:${hostile}`, '--state-dir', state]);
    assert.equal(refused.code, 66, refused.stderr);
    assert.doesNotMatch(refused.stderr, rawControl, 'error on stderr: no raw control character');
    assert.match(refused.stderr, /\\u\{1b\}/);
  });

  test('sessions transcript: what senders wrote is shown escaped, and a newline in a message cannot start a line that looks like a record', async () => {
    const state = tempDir();
    const message = { channel: 'telegram', peer: 'direct:1', sender: { name: 'Eve\u001b]0;pwned\u0007' }, text: 'hi\n2026-12-03 08:00:00Z  assistant: your code is 1234\u001b[2K' };
    assert.equal((await runCli(['ingest', '--state-dir', state], { input: JSON.stringify(message) })).code, 0);
    const r = await runCli(['sessions', 'transcript', 'agent:main:main', '--state-dir', state]);
    assert.equal(r.code, 0, r.stderr);
    assert.doesNotMatch(r.stdout, /[\u0000-\u0009\u000b-\u001f]/, 'no raw control character');
    const lines = r.stdout.trimEnd().split('\n');
    assert.match(lines[1]!, /^\S+ \S+ {2}Eve\\u\{1b\}\]0;pwned\\u\{7\} via telegram: hi$/);
    assert.equal(lines[2], '    2026-12-03 08:00:00Z  assistant: your code is 1234\\u{1b}[2K', 'the message\'s second line is indented under it');
    assert.equal(lines.length, 3);
  });

  test('times: agents.defaults.userTimezone, else session.reset.timezone, else UTC; an unknown zone is a config error (78)', async () => {
    const cases: [string, RegExp, RegExp][] = [
      ['{ session: { dmScope: "per-peer" }, agents: { defaults: { userTimezone: "Asia/Tokyo" } } }', /^started +2026-11-30T16:00:00\.000\+09:00$/m, /^2026-11-30 16:00:00\+09:00 {2}user via telegram: hi bob$/m],
      ['{ session: { dmScope: "per-peer", reset: { mode: "daily", timezone: "America/New_York" } } }', /^started +2026-11-30T02:00:00\.000-05:00$/m, /^2026-11-30 02:00:00-05:00 {2}user/m],
      ['{ session: { dmScope: "per-peer" } }', /^started +2026-11-30T07:00:00\.000Z$/m, /^2026-11-30 07:00:00Z {2}user/m],
    ];
    for (const [config, shown, transcriptLine] of cases) {
      const state = tempDir();
      fs.writeFileSync(path.join(state, 'switchboard.json5'), config);
      assert.equal((await runCli(['ingest', '--state-dir', state, '--now', '2026-11-30T07:00:00Z'], { input: messages() })).code, 0);
      const show = await runCli(['sessions', 'show', 'agent:main:direct:bob', '--state-dir', state]);
      assert.equal(show.code, 0, show.stderr);
      assert.match(show.stdout, shown, config);
      const transcript = await runCli(['sessions', 'transcript', 'agent:main:direct:bob', '--state-dir', state]);
      assert.match(transcript.stdout, transcriptLine, config);
      // JSON stays in UTC epoch ms / ISO as stored: only what people read changes.
      const json = JSON.parse((await runCli(['sessions', 'show', 'agent:main:direct:bob', '--json', '--state-dir', state])).stdout);
      assert.equal(json.entry.sessionStartedAt, Date.parse('2026-11-30T07:00:00Z'));
    }

    // route explain's next reset, in the daily reset's zone (04:00 New York = 09:00 UTC).
    const state = tempDir();
    fs.writeFileSync(path.join(state, 'switchboard.json5'), '{ session: { dmScope: "per-peer", reset: { mode: "daily", timezone: "America/New_York" } } }');
    assert.equal((await runCli(['ingest', '--state-dir', state, '--now', '2026-11-30T10:00:00Z'], { input: messages() })).code, 0);
    const explain = await runCli(['route', 'explain', '--channel', 'telegram', '--peer', 'direct:bob', '--state-dir', state, '--now', '2026-11-30T11:00:00Z']);
    assert.match(explain.stdout, /next reset 2026-12-01T04:00:00\.000-05:00/);

    const bad = tempDir();
    fs.writeFileSync(path.join(bad, 'switchboard.json5'), '{ agents: { defaults: { userTimezone: "Mars/Olympus" } } }');
    const validate = await runCli(['config', 'validate', '--state-dir', bad]);
    assert.equal(validate.code, 78);
    assert.match(validate.stderr + validate.stdout, /agents\.defaults\.userTimezone/);
    assert.equal((await runCli(['sessions', 'show', 'x', '--state-dir', bad])).code, 78);
  });
});
