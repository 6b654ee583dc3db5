// The schemas in store-format/ against files written by real runs of bin/switchboard (and a lock
// held by a real child process), plus negative cases proving that every schema can fail.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { describeSchemaErrors, schemaValidator } from '../../src/config/index.js';
import { parseInboundMessage, parseMessageLine } from '../../src/engine/index.js';
import { REPO_ROOT, jsonLines, runCli, tempDir } from '../helpers.js';

const EXAMPLE_CONFIG = path.join(REPO_ROOT, 'examples', 'switchboard.json5');
const EXAMPLE_MESSAGES = path.join(REPO_ROOT, 'examples', 'alice.ndjson');
const TRANSCRIPT_NAME = /\.jsonl(\.(reset|deleted)\.\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}(\.\d{1,3})?Z)?$/;

/** Asserts `value` is valid against store-format/<schema>.schema.json, naming every error. */
function assertValid(schema: string, value: unknown, where: string): void {
  const validate = schemaValidator(schema);
  const ok = validate(value);
  assert.equal(ok, true, `${where} does not match ${schema}.schema.json:\n  ${describeSchemaErrors(validate.errors).join('\n  ')}\n${JSON.stringify(value)}`);
}

/** Asserts `value` is rejected by the schema, and that one of the errors names `expectedPath`. */
function assertInvalid(schema: string, value: unknown, expectedPath: string): void {
  const validate = schemaValidator(schema);
  assert.equal(validate(value), false, `${schema}.schema.json accepted ${JSON.stringify(value)}`);
  const lines = describeSchemaErrors(validate.errors);
  assert.ok(
    lines.some((line) => line.startsWith(`${expectedPath}:`)),
    `expected an error at ${expectedPath}, got:\n  ${lines.join('\n  ')}`,
  );
}

function walk(dir: string): { files: string[]; dirs: string[] } {
  const files: string[] = [];
  const dirs: string[] = [dir];
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) {
      const sub = walk(full);
      files.push(...sub.files);
      dirs.push(...sub.dirs);
    } else files.push(full);
  }
  return { files, dirs };
}

const msg = (message: Record<string, unknown>): string => JSON.stringify(message);

/** Messages beyond the example file: every kind, a cron job run twice, a thread, resets, explicit keys. */
const EXTRA_MESSAGES = [
  msg({ channel: 'telegram', peer: 'direct:111222333', kind: 'heartbeat' }),
  msg({ channel: 'telegram', peer: { kind: 'direct', id: '111222333' }, kind: 'system', text: 'Alice went offline', timestamp: 1796022000000 }),
  msg({ channel: 'cron', cron: { jobId: 'morning-digest' }, text: 'Write the morning digest' }),
  msg({ channel: 'cron', cron: { jobId: 'morning-digest' }, text: 'Write the morning digest' }),
  msg({ channel: 'slack', peer: { kind: 'channel', id: 'C42' }, threadId: '1700000000.0042', sender: { id: 'U07ALICE', name: 'Alice' }, text: 'in a thread', messageId: 'sl-t-1' }),
  msg({ channel: 'slack', peer: { kind: 'channel', id: 'C42' }, threadId: '1700000000.0042', text: '/reset and a fresh start' }),
  msg({ channel: 'telegram', peer: { kind: 'direct', id: '111222333' }, sender: { id: '111222333', name: 'Alice' }, text: '/new gpt-test', messageId: 'tg-1002' }),
  msg({ channel: 'telegram', peer: { kind: 'direct', id: '111222333' }, sender: { id: '111222333', name: 'Alice' }, text: 'after the reset', messageId: 'tg-1003' }),
  msg({ channel: 'telegram', peer: { kind: 'direct', id: '111222333' }, text: 'after the reset', messageId: 'tg-1003' }),
  msg({ channel: 'internal', sessionKey: 'notes', text: 'explicit address', runId: 'client-run-1', queue: { mode: 'collect', debounceMs: 2000 } }),
  msg({ channel: 'internal', sessionKey: 'agent:club:reading-list', text: 'explicit key of another agent' }),
  msg({ channel: 'telegram', peer: { kind: 'direct', id: '999' }, text: 'off the record', incognito: true }),
];

describe('store-format schemas against files written by real runs', () => {
  let state: string;
  const cli = (...args: string[]) => runCli([...args, '--config', EXAMPLE_CONFIG, '--state-dir', state]);

  before(async () => {
    state = tempDir('sb-store-format-');
    const first = await cli('ingest', EXAMPLE_MESSAGES);
    assert.equal(first.code, 0, first.stderr);
    const extra = await runCli(['ingest', '--config', EXAMPLE_CONFIG, '--state-dir', state], { input: `${EXTRA_MESSAGES.join('\n')}\n` });
    assert.equal(extra.code, 0, extra.stderr);
    const events = jsonLines(extra.stdout);
    assert.equal(events.length, EXTRA_MESSAGES.length);
    for (const event of events) assert.equal(event.type, 'result', JSON.stringify(event));
    assert.deepEqual(
      events.map((e) => e.disposition),
      ['recorded', 'recorded', 'recorded', 'recorded', 'recorded', 'recorded', 'command', 'recorded', 'duplicate', 'recorded', 'recorded', 'recorded'],
    );
    for (const args of [
      ['reset', 'agent:main:direct:alice', '--reason', 'schema test', '--model', 'gpt-other'],
      ['sessions', 'pin', 'agent:main:notes'],
      ['sessions', 'delete', 'agent:club:reading-list'],
    ]) {
      const result = await cli(...args);
      assert.equal(result.code, 0, `${args.join(' ')}: ${result.stderr}`);
    }
  });

  after(() => fs.rmSync(state, { recursive: true, force: true }));

  test('every sessions.json (and its .bak) validates as a whole', () => {
    const stores = walk(state).files.filter((file) => /sessions\.json(\.bak)?$/.test(file));
    assert.ok(stores.some((file) => file.endsWith(path.join('main', 'sessions', 'sessions.json'))));
    assert.ok(stores.some((file) => file.endsWith(path.join('club', 'sessions', 'sessions.json'))));
    assert.ok(stores.some((file) => file.endsWith('.bak')), 'a replaced store keeps sessions.json.bak');
    const keys = new Set<string>();
    for (const file of stores) {
      const store = JSON.parse(fs.readFileSync(file, 'utf8')) as Record<string, Record<string, unknown>>;
      assertValid('sessions', store, path.relative(state, file));
      if (!file.endsWith('sessions.json')) continue;
      for (const [key, entry] of Object.entries(store)) {
        keys.add(key);
        // Our schema admits any safe id (other tools' stores); ids switchboard creates are UUID v4.
        assert.match(String(entry.sessionId), /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/, `${key} sessionId`);
      }
    }
    // The runs above must really have produced each kind of entry the schema describes.
    for (const key of ['agent:main:direct:alice', 'agent:main:cron:morning-digest', 'agent:main:slack:channel:c42:thread:1700000000.0042', 'agent:main:notes', 'agent:club:discord:channel:book-club']) {
      assert.ok(keys.has(key), `no entry for ${key} in ${[...keys].join(', ')}`);
    }
    assert.ok(!keys.has('agent:club:reading-list'), 'a deleted session leaves the store');
    const main = JSON.parse(fs.readFileSync(path.join(state, 'agents', 'main', 'sessions', 'sessions.json'), 'utf8'));
    assert.equal(main['agent:main:notes'].pinned, true);
    assert.equal(main['agent:main:direct:alice'].model, 'gpt-other');
    assert.match(main['agent:main:slack:channel:c42:thread:1700000000.0042'].sessionFile, /-topic-1700000000\.0042\.jsonl$/);
    assert.equal(main['agent:main:cron:morning-digest'].lastInteractionAt, undefined);
  });

  test('every transcript header and entry validates, and parentId chains the entries', () => {
    const transcripts = walk(state).files.filter((file) => TRANSCRIPT_NAME.test(path.basename(file)));
    assert.ok(transcripts.some((file) => file.includes('-topic-')), 'a thread transcript');
    assert.ok(transcripts.some((file) => /\.jsonl\.reset\./.test(file)), 'a .reset archive');
    assert.ok(transcripts.some((file) => /\.jsonl\.deleted\./.test(file)), 'a .deleted archive');
    const seen = new Set<string>();
    for (const file of transcripts) {
      const where = path.relative(state, file);
      const text = fs.readFileSync(file, 'utf8');
      assert.ok(text.endsWith('\n'), `${where} ends with a newline`);
      const [header, ...entries] = text.trimEnd().split('\n').map((line) => JSON.parse(line) as Record<string, unknown>);
      assertValid('transcript-header', header, `${where} line 1`);
      assert.ok(path.basename(file).startsWith(`${String(header!.id)}`), `${where}: header id ${String(header!.id)} names the file`);
      assert.ok(entries.length >= 1, `${where}: the header is written together with a first entry`);
      let previous: unknown = null;
      entries.forEach((entry, index) => {
        assertValid('transcript-entry', entry, `${where} line ${index + 2}`);
        assert.equal(entry.parentId, previous, `${where} line ${index + 2}: parentId chains to the previous entry`);
        previous = entry.id;
        const message = entry.message as Record<string, unknown> | undefined;
        seen.add(entry.type === 'custom' ? `custom:${String(entry.customType)}` : entry.type === 'message' ? `message:${String(message?.role)}${message?.cron ? '+cron' : ''}${message?.threadId ? '+thread' : ''}` : String(entry.type));
        if (entry.type === 'reset_notice' && entry.note !== undefined) seen.add('reset_notice+note');
      });
    }
    for (const kind of ['message:user', 'message:user+cron', 'message:user+thread', 'reset_notice', 'reset_notice+note', 'custom:heartbeat', 'custom:system']) {
      assert.ok(seen.has(kind), `no ${kind} record among ${[...seen].join(', ')}`);
    }
  });

  test('folders are 0700 and files 0600, and no lock is left behind', () => {
    const { files, dirs } = walk(state);
    for (const dir of dirs) assert.equal(fs.statSync(dir).mode & 0o777, 0o700, `${dir} mode`);
    for (const file of files) assert.equal(fs.statSync(file).mode & 0o777, 0o600, `${file} mode`);
    assert.deepEqual(dirs.filter((dir) => dir.endsWith('.lock')), []);
  });
});

describe('lock owner record', () => {
  test('the owner.json of a lock held by a real child process validates', async () => {
    const dir = tempDir('sb-store-format-lock-');
    const target = path.join(dir, 'transcript.jsonl');
    const child = spawn(
      process.execPath,
      [fileURLToPath(new URL('../fixtures/lock-holder-child.js', import.meta.url)), JSON.stringify({ target, behaviour: 'hold', sessionKey: 'agent:main:main', runId: 'run-schema' })],
      { stdio: ['pipe', 'pipe', 'inherit'] },
    );
    const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
    try {
      await new Promise<void>((resolve, reject) => {
        let out = '';
        child.stdout.on('data', (data: Buffer) => {
          out += data.toString();
          if (out.includes('held ')) resolve();
          if (out.includes('error ')) reject(new Error(out));
        });
        child.on('close', () => reject(new Error(`holder exited before holding: ${out}`)));
      });
      const ownerFile = path.join(`${target}.lock`, 'owner.json');
      assert.equal(fs.statSync(ownerFile).mode & 0o777, 0o600);
      const record = JSON.parse(fs.readFileSync(ownerFile, 'utf8')) as Record<string, unknown>;
      assertValid('lock-owner', record, 'owner.json');
      assert.equal(record.pid, child.pid);
      assert.equal(record.runId, 'run-schema');
      assert.equal(record.sessionKey, 'agent:main:main');

      const { pid: _pid, ...withoutPid } = record;
      assertInvalid('lock-owner', withoutPid, 'pid');
      assertInvalid('lock-owner', { ...record, pid: String(record.pid) }, 'pid');
      assertInvalid('lock-owner', { ...record, lockId: 'not-a-lock-id' }, 'lockId');
      assertInvalid('lock-owner', { ...record, maxHoldMs: 2 ** 31 }, 'maxHoldMs');
      assertInvalid('lock-owner', { ...record, holder: 'someone' }, '$');
      assertInvalid('lock-owner', { ...record, takeover: 'never' }, 'takeover');
      assertValid('lock-owner', { ...record, takeover: 'dead' }, 'owner.json of a sessions.json lock');
    } finally {
      child.stdin.end('release\n');
      const code = await Promise.race([exited, new Promise<'timeout'>((resolve) => setTimeout(() => resolve('timeout'), 10_000))]);
      if (code === 'timeout') child.kill('SIGKILL');
    }
    assert.equal(fs.existsSync(`${target}.lock`), false, 'the holder released its lock');
    fs.rmSync(dir, { recursive: true, force: true });
  });
});

describe('inbound message schema', () => {
  test('every line of examples/alice.ndjson validates (and the parser accepts it)', () => {
    const lines = fs.readFileSync(EXAMPLE_MESSAGES, 'utf8').split('\n').filter((line) => line.trim() !== '');
    assert.ok(lines.length >= 5);
    lines.forEach((line, index) => {
      const value: unknown = JSON.parse(line);
      assertValid('message', value, `examples/alice.ndjson line ${index + 1}`);
      assert.doesNotThrow(() => parseInboundMessage(value));
    });
    for (const line of EXTRA_MESSAGES) assertValid('message', JSON.parse(line), line);
  });

  // [message, accepted?] — the schema and the parser must agree on each.
  const base = { channel: 'telegram', text: 'hi' };
  const cases: [unknown, boolean][] = [
    [base, true],
    [{ text: 'hi' }, false],
    [{ channel: null, text: 'hi' }, false],
    [{ channel: '   ', text: 'hi' }, false],
    [{ channel: 7, text: 'hi' }, false],
    [{ channel: 'x' }, false],
    [{ channel: 'x', text: '  \n ' }, false],
    [{ channel: 'x', text: 42 }, false],
    [{ channel: 'x', kind: 'heartbeat' }, true],
    [{ channel: 'x', kind: 'system', text: null }, true],
    [{ channel: 'x', kind: 'User', text: 'hi' }, false],
    [{ channel: 'x', kind: null, text: 'hi' }, true],
    [{ channel: 'x', kind: null }, false],
    [{ channel: 'x', cron: { jobId: 'digest' } }, true],
    [{ channel: 'x', cron: { jobId: 7 } }, true],
    [{ channel: 'x', cron: { jobId: '  ' } }, false],
    [{ channel: 'x', cron: {} }, false],
    [{ channel: 'x', cron: 'digest' }, false],
    [{ channel: 'x', cron: null }, false],
    [{ channel: 'x', kind: 'cron', text: 'go' }, false],
    [{ channel: 'x', kind: 'user', cron: { jobId: 'j' } }, false],
    [{ ...base, peer: 'direct:123' }, true],
    [{ ...base, peer: ' DM :a:b' }, true],
    [{ ...base, peer: 'direct' }, false],
    [{ ...base, peer: 'friend:1' }, false],
    [{ ...base, peer: { kind: 'Group', id: 5 } }, true],
    [{ ...base, peer: { id: '1' } }, false],
    [{ ...base, peer: { kind: 'direct', id: true } }, false],
    [{ ...base, peer: ['direct', '1'] }, false],
    [{ ...base, parentPeer: 'channel:c5', guildId: 'g1', teamId: 7, memberRoleIds: ['r1', 2, null], threadId: 42 }, true],
    [{ ...base, memberRoleIds: 'r1' }, false],
    [{ ...base, guildId: {} }, false],
    [{ ...base, sender: { id: 1, name: 'A' } }, true],
    [{ ...base, sender: 'Alice' }, false],
    [{ ...base, messageId: 1001 }, true],
    [{ ...base, messageId: false }, false],
    [{ ...base, timestamp: '2026-11-30T07:00:00Z' }, true],
    [{ ...base, timestamp: 1796022000000 }, true],
    [{ ...base, timestamp: -1 }, false],
    [{ ...base, timestamp: 'yesterday' }, false],
    [{ ...base, runId: ' client-chosen-id ' }, true],
    [{ ...base, runId: 'has space' }, false],
    [{ ...base, runId: '-leading-dash' }, false],
    [{ ...base, runId: 'r'.repeat(129) }, false],
    [{ ...base, runId: 12 }, true],
    [{ ...base, runId: -12 }, false],
    [{ ...base, sessionKey: 'agent:main:notes' }, true],
    [{ ...base, sessionKey: '   ' }, false],
    [{ ...base, queue: { mode: 'collect', debounceMs: 2000 } }, true],
    [{ ...base, queue: { debounceMs: -5 } }, false],
    [{ ...base, queue: { debounceMs: null } }, false],
    [{ ...base, queue: 'collect' }, false],
    [{ ...base, incognito: true }, true],
    [{ ...base, incognito: 'yes' }, false],
    [{ ...base, group: { displayName: 'Book club', subject: 'Dune', space: 7 } }, true],
    [{ ...base, group: null }, true],
    [{ ...base, group: 'Book club' }, false],
    [{ ...base, group: { subject: ['Dune'] } }, false],
    [{ ...base, parentSessionKey: ' Agent:Main:main ', spawnDepth: 1 }, true],
    [{ ...base, parentSessionKey: 'main' }, false],
    [{ ...base, parentSessionKey: '  ' }, false],
    [{ ...base, parentSessionKey: 12 }, false],
    [{ ...base, parentSessionKey: null, spawnDepth: null }, true],
    [{ ...base, spawnDepth: -1 }, false],
    [{ ...base, spawnDepth: 1.5 }, false],
    [{ ...base, spawnDepth: '1' }, false],
    [{ ...base, unknownField: { kept: 'ignored' } }, true],
    [[base], false],
    ['telegram', false],
  ];

  test('the schema and the message parser agree on accepted and rejected messages', () => {
    const validate = schemaValidator('message');
    for (const [value, accepted] of cases) {
      let parserAccepts = true;
      try {
        parseInboundMessage(value);
      } catch {
        parserAccepts = false;
      }
      assert.equal(parserAccepts, accepted, `parser on ${JSON.stringify(value)}`);
      assert.equal(validate(value), accepted, `schema on ${JSON.stringify(value)}: ${describeSchemaErrors(validate.errors).join('; ')}`);
    }
  });

  test('a number JSON reads as Infinity is named as such, not as null', () => {
    assert.throws(
      () => parseMessageLine('{"channel":"telegram","text":"x","parentSessionKey":"agent:main:main","spawnDepth":1e400}'),
      (err: any) => err.code === 'BAD_MESSAGE' && /spawnDepth.*got Infinity/.test(err.message),
    );
  });

  test('rejections name the offending field', () => {
    assertInvalid('message', { text: 'hi' }, 'channel');
    assertInvalid('message', { channel: 'x' }, 'text');
    assertInvalid('message', { channel: 'x', kind: 'cron' }, 'cron');
    assertInvalid('message', { channel: 'x', kind: 'weekly', text: 'hi' }, 'kind');
  });
});

describe('every schema can fail', () => {
  const sessionId = '0f8fad5b-d9cb-469f-a165-70867728950e';
  const entry = { sessionId, sessionFile: `${sessionId}.jsonl`, updatedAt: 1796022000000, sessionStartedAt: 1796022000000 };

  test('sessions.json', () => {
    assertValid('sessions', { 'agent:main:main': entry, 'agent:main:direct:alice': { ...entry, futureField: { kept: true } } }, 'a minimal store');
    const { sessionId: _id, ...withoutId } = entry;
    assertInvalid('sessions', { 'agent:main:main': withoutId }, '["agent:main:main"].sessionId');
    assertInvalid('sessions', { 'agent:main:main': { ...entry, sessionId: '../../etc/passwd' } }, '["agent:main:main"].sessionId');
    assertInvalid('sessions', { 'agent:main:main': { ...entry, updatedAt: '2026-11-30' } }, '["agent:main:main"].updatedAt');
    assertInvalid('sessions', { 'agent:main:main': { ...entry, sessionFile: '../x.jsonl' } }, '["agent:main:main"].sessionFile');
    assertInvalid('sessions', { 'agent:main:main': { ...entry, sessionFile: '/home/oc/.openclaw/agents/main/sessions/sessions.json' } }, '["agent:main:main"].sessionFile');
    // As OpenClaw writes an entry: absolute sessionFile, its origin fields, a numeric topic id, fields of its own.
    const openclaw = {
      ...entry,
      sessionFile: `/home/oc/.openclaw/agents/main/sessions/${entry.sessionId}-topic-42.jsonl`,
      origin: { label: 'Family id:-100888 topic:42', provider: 'telegram', surface: 'telegram', chatType: 'group', from: 'telegram:group:-100888:topic:42', to: 'telegram:-100888:topic:42', accountId: 'Default', threadId: 42 },
      deliveryContext: { channel: 'telegram', to: 'telegram:-100888:topic:42', accountId: 'default', threadId: 42 },
      lastChannel: 'telegram', lastTo: 'telegram:-100888:topic:42', lastAccountId: 'default', lastThreadId: 42,
      route: { channel: 'telegram', accountId: 'default', target: { to: 'telegram:-100888:topic:42', chatType: 'group' }, thread: { id: 42 } },
      systemSent: true, skillsSnapshot: { prompt: '', skills: [] },
    };
    assertValid('sessions', { 'agent:main:telegram:group:-100888:topic:42': openclaw }, 'an entry as OpenClaw writes it');
    assertInvalid('sessions', { 'agent:main:main': { ...entry, chatType: 'dm' } }, '["agent:main:main"].chatType');
    // OpenClaw 2026.7.1's store code writes a session without a last route (a Telegram group) so.
    assertValid('sessions', { 'agent:main:telegram:group:-100555': { ...entry, chatType: 'group', deliveryContext: { channel: 'telegram' }, route: { channel: 'telegram' }, lastChannel: 'telegram' } }, 'a deliveryContext without a target');
    assertInvalid('sessions', { 'agent:main:main': { ...entry, deliveryContext: { to: 'telegram:111' } } }, '["agent:main:main"].deliveryContext.channel');
    assertInvalid('sessions', { 'agent:main:main': { ...entry, recentMessageIds: [['m1', 'now']] } }, '["agent:main:main"].recentMessageIds[0][1]');
    assertInvalid('sessions', { main: entry }, '$');
    assertInvalid('sessions', { 'agent:Main:main': entry }, '$');
    assertInvalid('sessions', [entry], '$');
  });

  test('session ids with capitals, as OpenClaw accepts them (`openclaw agent --session-id Work-Run1`), are valid; unsafe ones are not', () => {
    const explicit = { sessionId: 'Work-Run1', updatedAt: 1796022000000, sessionStartedAt: 1796022000000, sessionFile: '/home/oc/.openclaw/agents/main/sessions/Work-Run1.jsonl' };
    assertValid('sessions', { 'agent:main:explicit:work-run1': explicit, 'agent:main:x': { ...entry, sessionId: 'ABC_1.x', sessionFile: 'ABC_1.x-topic-7.jsonl' } }, 'ids with capitals');
    assertValid('transcript-header', { type: 'session', version: 3, id: 'Work-Run1', timestamp: '2026-11-30T07:00:00.000Z', cwd: '/home/oc' }, 'an OpenClaw header of such an id');
    assertValid('transcript-entry', { type: 'reset_notice', id: 'e1', parentId: null, timestamp: '2026-11-30T07:00:00.000Z', reason: 'command', previousSessionId: 'Work-Run1' }, 'a reset notice naming it');
    for (const bad of ['../x', 'a/b', '.hidden', '-x', 'a b', 'a:b', 'a@b', 'x'.repeat(129)]) {
      assertInvalid('sessions', { 'agent:main:main': { sessionId: bad, updatedAt: entry.updatedAt } }, '["agent:main:main"].sessionId');
      assertInvalid('transcript-header', { type: 'session', version: 3, id: bad, timestamp: '2026-11-30T07:00:00.000Z', cwd: '/' }, 'id');
    }
  });

  test('transcript header', () => {
    const header = { type: 'session', version: 3, id: sessionId, timestamp: '2026-11-30T07:00:00.000Z', cwd: '/home/me', sessionKey: 'agent:main:main', agentId: 'main' };
    assertValid('transcript-header', header, 'a header');
    assertInvalid('transcript-header', { ...header, version: 2 }, 'version');
    assertInvalid('transcript-header', { ...header, type: 'message' }, 'type');
    assertInvalid('transcript-header', { ...header, timestamp: 1796022000000 }, 'timestamp');
    assertInvalid('transcript-header', { ...header, id: 'Not An Id' }, 'id');
    const { cwd: _cwd, ...withoutCwd } = header;
    assertInvalid('transcript-header', withoutCwd, 'cwd');
  });

  test('transcript entry', () => {
    const common = { id: 'e1', parentId: null, timestamp: '2026-11-30T07:00:00.000Z' };
    const userMessage = { role: 'user', content: [{ type: 'text', text: 'hi' }], timestamp: 1796022000000, channel: 'telegram', runId: 'r1' };
    assertValid('transcript-entry', { type: 'message', ...common, message: userMessage }, 'a user message');
    assertValid('transcript-entry', { type: 'tool_call', ...common, parentId: 'e0', name: 'search', anything: [1, 2] }, 'a runner record');
    assertValid('transcript-entry', { type: 'openclaw_future_type', ...common }, 'an unknown type');
    const { parentId: _parent, ...withoutParent } = common;
    assertInvalid('transcript-entry', { type: 'steer', ...withoutParent }, 'parentId');
    assertInvalid('transcript-entry', { type: 'session', ...common }, 'type');
    assertInvalid('transcript-entry', { type: 'message', ...common, message: { ...userMessage, role: 'system' } }, 'message.role');
    // As OpenClaw writes them: no inbound metadata, string content, its own record types.
    const { runId: _run, channel: _channel, ...openclawUser } = userMessage;
    assertValid('transcript-entry', { type: 'message', ...common, id: '1a2b3c4d', message: openclawUser }, 'an OpenClaw user message');
    assertValid('transcript-entry', { type: 'message', ...common, message: { ...openclawUser, content: 'Summarise README.md' } }, 'string content');
    assertValid('transcript-entry', { type: 'model_change', ...common, provider: 'anthropic', modelId: 'claude-sonnet-4-5' }, 'model_change');
    assertValid('transcript-entry', { type: 'thinking_level_change', ...common, thinkingLevel: 'low' }, 'thinking_level_change');
    assertValid('transcript-entry', { type: 'custom', ...common, customType: 'openclaw:bootstrap-context' }, 'custom without data');
    assertInvalid('transcript-entry', { type: 'message', ...common, message: { ...userMessage, runId: 7 } }, 'message.runId');
    assertInvalid('transcript-entry', { type: 'message', ...common, message: { ...userMessage, content: [] } }, 'message.content');
    assertInvalid('transcript-entry', { type: 'leaf', ...common }, 'targetId');
    assertInvalid('transcript-entry', { type: 'message', ...common, message: { ...userMessage, content: [{ type: 'text' }] } }, 'message.content[0].text');
    assertInvalid('transcript-entry', { type: 'message', ...common, message: { ...userMessage, timestamp: '2026-11-30T07:00:00Z' } }, 'message.timestamp');
    // Only a bare trigger as an address's first message (reason command) replaced nothing.
    assertInvalid('transcript-entry', { type: 'reset_notice', ...common, reason: 'daily' }, 'previousSessionId');
    assertInvalid('transcript-entry', { type: 'reset_notice', ...common, reason: 'idle' }, 'previousSessionId');
    assertInvalid('transcript-entry', { type: 'reset_notice', ...common, reason: 'whim', previousSessionId: sessionId }, 'reason');
    assertInvalid('transcript-entry', { type: 'custom', ...common, data: {} }, 'customType');
    assertInvalid('transcript-entry', { type: 'custom', ...common, customType: 'heartbeat', data: { text: null, channel: 'x', runId: 'r1' } }, 'data.timestamp');
  });
});
