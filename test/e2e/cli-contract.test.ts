// The public contract of ../shared/spec/cli.md, point by point, through the real binary: the
// global options and their variables, the JSON shapes the page names (field names and types),
// and the exit code and JSON error of each kind of failure. Points other e2e files cover are
// not repeated here.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import { jsonLines, runCli, tempDir, writeJson } from '../helpers.js';
import { startServe, stopAllServers } from '../serve-process.js';

const line = (message: Record<string, unknown>) => JSON.stringify(message);
const isInt = (value: unknown) => typeof value === 'number' && Number.isInteger(value);
const ESC = /\u001b\[/;

/** The one JSON error line a failing command prints on stderr with --json (stdout empty). */
function jsonError(r: { code: number | null; stdout: string; stderr: string }, what: string): { code: string; message: string; hint: string } {
  assert.equal(r.stdout, '', `${what}: nothing on stdout`);
  const lines = r.stderr.trim().split('\n');
  assert.equal(lines.length, 1, `${what}: one line on stderr: ${r.stderr}`);
  const parsed = JSON.parse(lines[0]!);
  assert.deepEqual(Object.keys(parsed), ['error'], what);
  for (const field of ['code', 'message', 'hint']) assert.equal(typeof parsed.error[field], 'string', `${what}: error.${field}`);
  return parsed.error;
}

describe('global options', () => {
  test('--no-color turns colour off even when FORCE_COLOR asks for it, before or after the command', async () => {
    const state = tempDir();
    const explain = ['route', 'explain', '--channel', 'telegram', '--peer', 'direct:1', '--state-dir', state];
    const forced = { env: { FORCE_COLOR: '1', NO_COLOR: '' } };
    const coloured = await runCli(explain, forced);
    assert.equal(coloured.code, 0, coloured.stderr);
    assert.match(coloured.stdout, ESC, 'FORCE_COLOR colours the trace');
    for (const args of [['--no-color', ...explain], [...explain, '--no-color']]) {
      const r = await runCli(args, forced);
      assert.equal(r.code, 0, r.stderr);
      assert.doesNotMatch(r.stdout, ESC, args.join(' '));
      assert.doesNotMatch(r.stderr, ESC, args.join(' '));
      assert.match(r.stdout, /tier 1 binding\.peer/);
    }
  });

  test('-q drops diagnostics but not errors; -v adds the stack to an error; data on stdout is the same', async () => {
    const state = tempDir();
    const input = [line({ channel: 'telegram', peer: 'direct:1', text: 'a' }), line({ channel: 'telegram', peer: 'group:2', text: 'b' })].join('\n');
    assert.equal((await runCli(['ingest', '--state-dir', state], { input })).code, 0);
    const noisy = await runCli(['sessions', '--limit', '1', '--json', '--state-dir', state]);
    assert.equal(noisy.code, 0, noisy.stderr);
    assert.notEqual(noisy.stderr, '', 'a listing cut by --limit says so on stderr');
    for (const quiet of ['-q', '--quiet']) {
      const r = await runCli(['sessions', '--limit', '1', '--json', quiet, '--state-dir', state]);
      assert.equal(r.code, 0);
      assert.equal(r.stderr, '', quiet);
      assert.equal(jsonLines(r.stdout)[0].count, jsonLines(noisy.stdout)[0].count);
    }
    const quietError = await runCli(['sessions', 'show', 'agent:main:nobody', '-q', '--state-dir', state]);
    assert.equal(quietError.code, 66);
    assert.match(quietError.stderr, /nobody/, 'an error is still reported with -q');
    const plain = await runCli(['sessions', 'show', 'agent:main:nobody', '--state-dir', state]);
    assert.doesNotMatch(plain.stderr, /\n\s+at /, 'no stack without -v');
    for (const verbose of ['-v', '--verbose']) {
      const r = await runCli(['sessions', 'show', 'agent:main:nobody', verbose, '--state-dir', state]);
      assert.equal(r.code, 66, verbose);
      assert.match(r.stderr, /\n\s+at /, `${verbose} prints the stack`);
      assert.equal(r.stdout, '');
    }
  });

  test('SWITCHBOARD_STATE_DIR and SWITCHBOARD_CONFIG stand in for --state-dir and --config; the flags win', async () => {
    const fromEnv = tempDir();
    const fromFlag = tempDir();
    const config = writeJson(path.join(tempDir(), 'c.json'), {
      agents: { list: [{ id: 'home', default: true }, { id: 'work' }] },
      bindings: [{ agentId: 'work', match: { channel: 'slack', accountId: '*' } }],
    });
    const other = writeJson(path.join(tempDir(), 'other.json'), { agents: { list: [{ id: 'solo', default: true }] } });
    const env = { SWITCHBOARD_STATE_DIR: fromEnv, SWITCHBOARD_CONFIG: config };
    const sent = await runCli(['send', 'hi', '--channel', 'slack', '--peer', 'channel:c1', '--json'], { env });
    assert.equal(sent.code, 0, sent.stderr);
    assert.equal(jsonLines(sent.stdout)[0].agentId, 'work', 'the config came from SWITCHBOARD_CONFIG');
    assert.ok(fs.existsSync(path.join(fromEnv, 'agents', 'work', 'sessions', 'sessions.json')), 'written under SWITCHBOARD_STATE_DIR');
    const shown = jsonLines((await runCli(['config', 'show', '--json'], { env })).stdout)[0];
    assert.equal(shown.path, config);
    assert.equal(shown.stateDir, fromEnv);
    const overridden = await runCli(['send', 'hi', '--channel', 'slack', '--json', '--state-dir', fromFlag, '--config', other], { env });
    assert.equal(overridden.code, 0, overridden.stderr);
    assert.equal(jsonLines(overridden.stdout)[0].agentId, 'solo', '--config wins over SWITCHBOARD_CONFIG');
    assert.ok(fs.existsSync(path.join(fromFlag, 'agents', 'solo', 'sessions', 'sessions.json')), '--state-dir wins over SWITCHBOARD_STATE_DIR');
    assert.equal(fs.existsSync(path.join(fromEnv, 'agents', 'solo')), false);
  });

  test('SWITCHBOARD_NOW and --now fix the clock as ISO or epoch ms; --now wins', async () => {
    const state = tempDir();
    assert.equal((await runCli(['send', 'hi', '--channel', 'telegram', '--now', '2026-11-30T07:00:00Z', '--state-dir', state])).code, 0);
    const viaEnv = jsonLines((await runCli(['sessions', '--json', '--state-dir', state], { env: { SWITCHBOARD_NOW: String(Date.parse('2026-11-30T07:02:00Z')) } })).stdout)[0];
    assert.equal(viaEnv.sessions[0].ageMs, 120_000);
    const both = jsonLines((await runCli(['sessions', '--json', '--now', '2026-11-30T07:05:00Z', '--state-dir', state], { env: { SWITCHBOARD_NOW: '2026-11-30T07:02:00Z' } })).stdout)[0];
    assert.equal(both.sessions[0].ageMs, 300_000);
  });
});

describe('send', () => {
  test('send takes the route flags of route resolve and lands where route resolve says; --session-key, --message-id and --cron-job as in a message', async () => {
    const state = tempDir();
    const config = writeJson(path.join(state, 'c.json'), {
      agents: { list: [{ id: 'main', default: true }, { id: 'mods' }, { id: 'team' }, { id: 'work' }, { id: 'club' }] },
      bindings: [
        { agentId: 'club', match: { channel: 'discord', accountId: '*', peer: { kind: 'channel', id: 'book-club' } } },
        { agentId: 'mods', match: { channel: 'discord', accountId: '*', guildId: 'g1', roles: ['mod'] } },
        { agentId: 'team', match: { channel: 'slack', accountId: '*', teamId: 'T1' } },
        { agentId: 'work', match: { channel: 'telegram', accountId: 'work' } },
      ],
    });
    const cli = (...args: string[]) => runCli([...args, '--state-dir', state, '--config', config]);
    const flagSets: [string[], string, string][] = [
      [['--channel', 'discord', '--peer', 'channel:thread-1', '--parent-peer', 'channel:book-club'], 'club', 'binding.peer.parent'],
      [['--channel', 'discord', '--peer', 'channel:general', '--guild', 'g1', '--roles', 'a,mod'], 'mods', 'binding.guild+roles'],
      [['--channel', 'slack', '--peer', 'channel:c1', '--team', 'T1'], 'team', 'binding.team'],
      [['--channel', 'telegram', '--account', 'work', '--peer', 'direct:5'], 'work', 'binding.account'],
      [['--channel', 'discord', '--peer', 'channel:general', '--thread', '77'], 'main', 'default'],
    ];
    for (const [flags, agentId, matchedBy] of flagSets) {
      const route = jsonLines((await cli('route', 'resolve', ...flags, '--json')).stdout)[0];
      assert.deepEqual([route.agentId, route.matchedBy], [agentId, matchedBy], flags.join(' '));
      const sent = await cli('send', 'hello', ...flags, '--json');
      assert.equal(sent.code, 0, `${flags.join(' ')}: ${sent.stderr}`);
      const result = jsonLines(sent.stdout)[0];
      assert.equal(result.type, 'result');
      assert.deepEqual([result.agentId, result.sessionKey, result.matchedBy], [route.agentId, route.sessionKey, route.matchedBy], flags.join(' '));
    }
    const explicit = jsonLines((await cli('send', 'note', '--channel', 'telegram', '--session-key', 'agent:work:notes', '--json')).stdout)[0];
    assert.deepEqual([explicit.agentId, explicit.sessionKey, explicit.matchedBy], ['work', 'agent:work:notes', 'explicit']);
    const first = jsonLines((await cli('send', 'once', '--channel', 'telegram', '--message-id', 'm-1', '--run-id', 'r-1', '--json')).stdout)[0];
    assert.deepEqual([first.messageId, first.runId, first.disposition], ['m-1', 'r-1', 'recorded']);
    const again = jsonLines((await cli('send', 'once', '--channel', 'telegram', '--message-id', 'm-1', '--json')).stdout)[0];
    assert.equal(again.disposition, 'duplicate');
    const cron = jsonLines((await cli('send', 'digest', '--channel', 'telegram', '--kind', 'cron', '--cron-job', 'daily', '--json')).stdout)[0];
    assert.equal(cron.sessionKey, 'agent:main:cron:daily');
    const incognito = await cli('send', 'secret', '--channel', 'telegram', '--peer', 'direct:42', '--incognito', '--json');
    assert.equal(jsonLines(incognito.stdout)[0].persisted, false);
    const keys = jsonLines((await cli('sessions', '--all-agents', '--json')).stdout)[0].sessions.map((s: { key: string }) => s.key);
    assert.ok(!keys.some((key: string) => key.includes('42')), 'an incognito send writes nothing');
  });
});

describe('ingest --socket', () => {
  after(stopAllServers);

  test('ingest --socket FILE reads FILE through the default socket; an explicit socket path before or after FILE still works', async () => {
    const state = tempDir();
    const server = await startServe(state);
    const file = path.join(tempDir(), 'messages.ndjson');
    fs.writeFileSync(file, `${[line({ channel: 'telegram', peer: 'direct:1', text: 'a' }), line({ channel: 'telegram', peer: 'group:2', text: 'b' })].join('\n')}\n`);
    for (const args of [['ingest', '--socket', file], ['ingest', file, '--socket'], ['ingest', '--socket', server.socketPath, file], ['ingest', file, '--socket', server.socketPath]]) {
      const r = await runCli([...args, '--state-dir', state]);
      assert.equal(r.code, 0, `${args.join(' ')}: ${r.stderr}`);
      const events = jsonLines(r.stdout);
      assert.deepEqual(events.map((e) => [e.type, e.line]), [['result', 1], ['result', 2]], args.join(' '));
    }
    const missing = await runCli(['ingest', '--socket', path.join(state, 'nobody.sock'), '--json', '--state-dir', state]);
    assert.equal(missing.code, 69, 'a --socket path that is no file stays a socket path');
    assert.equal(jsonError(missing, 'ingest --socket nobody.sock').code, 'UNAVAILABLE');
    await server.stop();
  });
});

describe('exit codes and the JSON error', () => {
  test('each kind of failure has its documented exit code and code, one {error: {code, message, hint}} on stderr', async () => {
    const state = tempDir();
    assert.equal((await runCli(['send', 'hi', '--channel', 'telegram', '--state-dir', state])).code, 0);
    const corrupt = tempDir();
    fs.mkdirSync(path.join(corrupt, 'agents', 'main', 'sessions'), { recursive: true });
    fs.writeFileSync(path.join(corrupt, 'agents', 'main', 'sessions', 'sessions.json'), 'garbage');
    const badConfig = path.join(tempDir(), 'bad.json5');
    fs.writeFileSync(badConfig, '{ bindings: [{ agentId: "main", match: { channel: 5 } }] }');
    const cases: [string[], string, number][] = [
      [['route', 'resolve', '--state-dir', state], 'USAGE', 2],
      [['sessions', '--state-dir', corrupt], 'STORE_CORRUPT', 65],
      [['sessions', 'show', 'agent:main:nobody', '--state-dir', state], 'NOT_FOUND', 66],
      [['route', 'resolve', '--channel', 'x', '--config', path.join(state, 'missing.json5'), '--state-dir', state], 'NOT_FOUND', 66],
      [['send', 'hi', '--channel', 'telegram', '--socket', path.join(state, 'nobody.sock'), '--state-dir', state], 'UNAVAILABLE', 69],
      [['config', 'validate', '--config', badConfig, '--state-dir', state], 'CONFIG_INVALID', 78],
      [['route', 'resolve', '--channel', 'x', '--config', badConfig, '--state-dir', state], 'CONFIG_INVALID', 78],
    ];
    for (const [args, code, exit] of cases) {
      const r = await runCli([...args, '--json']);
      assert.equal(r.code, exit, `${args.join(' ')}: ${r.stderr}`);
      assert.equal(jsonError(r, args.join(' ')).code, code, args.join(' '));
    }
    // Without --json the same failures are text on stderr, nothing on stdout.
    const text = await runCli(['sessions', '--state-dir', corrupt]);
    assert.equal(text.code, 65);
    assert.equal(text.stdout, '');
    assert.throws(() => JSON.parse(text.stderr), 'not JSON without --json');
    assert.match(text.stderr, /sessions\.json/);
  });

  test('config validate names the JSON path of each error (bindings[3].match.channel) and exits 78', async () => {
    const config = writeJson(path.join(tempDir(), 'c.json'), {
      bindings: [
        { agentId: 'main', match: { channel: 'a' } },
        { agentId: 'main', match: { channel: 'b' } },
        { agentId: 'main', match: { channel: 'c' } },
        { agentId: 'main', match: { channel: 7 } },
      ],
    });
    const r = await runCli(['config', 'validate', '--config', config]);
    assert.equal(r.code, 78);
    assert.match(r.stderr, /bindings\[3\]\.match\.channel/);
    const json = await runCli(['config', 'validate', '--config', config, '--json']);
    assert.equal(json.code, 78);
    assert.match(jsonError(json, 'config validate --json').message, /bindings\[3\]\.match\.channel/);
  });
});

describe('JSON shapes', () => {
  const config = () =>
    writeJson(path.join(tempDir(), 'c.json'), {
      agents: { list: [{ id: 'main', default: true }, { id: 'club' }] },
      bindings: [{ agentId: 'club', match: { channel: 'discord', accountId: '*', peer: { kind: 'channel', id: 'book-club' } } }],
      session: { dmScope: 'per-peer', identityLinks: { alice: ['telegram:111'] } },
    });

  test('route resolve --json prints the route object with every documented field', async () => {
    const r = await runCli(['route', 'resolve', '--channel', 'discord', '--peer', 'channel:book-club', '--json', '--config', config(), '--state-dir', tempDir()]);
    assert.equal(r.code, 0, r.stderr);
    const route = jsonLines(r.stdout)[0];
    for (const field of ['agentId', 'channel', 'accountId', 'dmScope', 'sessionKey', 'mainSessionKey', 'lastRoutePolicy', 'matchedBy']) {
      assert.equal(typeof route[field], 'string', field);
    }
    assert.deepEqual(
      [route.agentId, route.channel, route.accountId, route.sessionKey, route.mainSessionKey, route.matchedBy],
      ['club', 'discord', 'default', 'agent:club:discord:channel:book-club', 'agent:club:main', 'binding.peer'],
    );
  });

  test('route explain --json has input, route, trace, key, session, queue, send and warnings as documented', async () => {
    const r = await runCli(['route', 'explain', '--channel', 'telegram', '--peer', 'direct:111', '--thread', '9', '--json', '--config', config(), '--state-dir', tempDir()]);
    assert.equal(r.code, 0, r.stderr);
    const explained = jsonLines(r.stdout)[0];
    for (const field of ['input', 'route', 'trace', 'key', 'session', 'queue', 'send', 'warnings']) assert.ok(field in explained, field);
    assert.equal(explained.route.sessionKey, 'agent:main:direct:alice:thread:9');
    assert.equal(explained.input.channel, 'telegram');
    assert.ok(Array.isArray(explained.trace) && explained.trace.length > 0);
    for (const tier of explained.trace) {
      assert.ok(isInt(tier.tier), 'trace[].tier');
      assert.equal(typeof tier.matchedBy, 'string');
      assert.ok(Array.isArray(tier.candidates));
      if ('skipped' in tier) assert.equal(typeof tier.skipped, 'string');
    }
    assert.equal(explained.trace.at(-1).matchedBy, 'default');
    assert.equal(explained.key.dmScope, 'per-peer');
    assert.equal(explained.key.mainKey, 'main');
    assert.equal(explained.key.threadSuffix, ':thread:9');
    assert.ok(explained.key.identityLink, 'the identity link that named the key');
    assert.deepEqual([explained.session.exists, explained.session.fresh], [false, false]);
    for (const field of ['mode', 'debounceMs', 'cap', 'dropPolicy']) {
      assert.ok(field in explained.queue, `queue.${field}`);
      assert.equal(typeof explained.queue.sources[field], 'string', `queue.sources.${field}`);
    }
    assert.deepEqual([explained.send.decision, explained.send.rule], ['allow', null]);
    assert.ok(Array.isArray(explained.warnings));

    // A candidate binding is shown with its index, agent, match and result (and why it failed).
    const discord = await runCli(['route', 'explain', '--channel', 'discord', '--peer', 'channel:other', '--json', '--config', config(), '--state-dir', tempDir()]);
    const candidates = jsonLines(discord.stdout)[0].trace.flatMap((tier: { candidates: unknown[] }) => tier.candidates);
    assert.ok(candidates.length > 0);
    const first = candidates[0];
    assert.ok(isInt(first.index));
    assert.equal(first.agentId, 'club');
    assert.equal(typeof first.match, 'object');
    assert.equal(typeof first.result, 'string');
    assert.equal(typeof first.reason, 'string', 'a rejected candidate says why');
  });

  test('sessions reset --model and --reason (and the reset alias) start a new instance with that model', async () => {
    const state = tempDir();
    assert.equal((await runCli(['send', 'hi', '--channel', 'telegram', '--state-dir', state])).code, 0);
    const before = jsonLines((await runCli(['sessions', '--json', '--state-dir', state])).stdout)[0].sessions[0];
    const reset = await runCli(['sessions', 'reset', 'agent:main:main', '--model', 'gpt-5', '--reason', 'fresh start', '--json', '--state-dir', state]);
    assert.equal(reset.code, 0, reset.stderr);
    const result = jsonLines(reset.stdout)[0];
    assert.equal(result.previousSessionId, before.sessionId);
    assert.notEqual(result.sessionId, before.sessionId);
    const after = jsonLines((await runCli(['sessions', '--json', '--state-dir', state])).stdout)[0].sessions[0];
    assert.equal(after.sessionId, result.sessionId);
    assert.equal(after.model, 'gpt-5');
    const raw = (await runCli(['sessions', 'transcript', 'agent:main:main', '--raw', '--state-dir', state])).stdout;
    assert.match(raw, /fresh start/, 'the reason is kept in the reset notice');
    const alias = await runCli(['reset', 'main', '--json', '--state-dir', state]);
    assert.equal(alias.code, 0, alias.stderr);
    assert.equal(jsonLines(alias.stdout)[0].previousSessionId, result.sessionId);
  });

  test('sessions show --json names the entry, freshness, lock, queue and transcript stats, as cli.md lists them', async () => {
    const state = tempDir();
    const cfg = writeJson(path.join(state, 'c.json'), { agents: { defaults: { runner: { command: 'builtin:echo' } } } });
    const input = [line({ channel: 'telegram', text: 'a', runId: 'w1' }), line({ channel: 'telegram', text: 'b', runId: 'w2' })].join('\n');
    const queued = await runCli(['ingest', '--no-wait', '--state-dir', state, '--config', cfg], { input });
    assert.equal(queued.code, 0, queued.stderr);
    const shown = await runCli(['sessions', 'show', 'main', '--json', '--state-dir', state, '--config', cfg]);
    assert.equal(shown.code, 0, shown.stderr);
    const details = jsonLines(shown.stdout)[0];
    for (const field of ['entry', 'freshness', 'lock', 'queue', 'transcript']) assert.ok(field in details, field);
    assert.equal(details.key, 'agent:main:main');
    assert.equal(typeof details.freshness.fresh, 'boolean');
    assert.equal(details.lock, null);
    assert.deepEqual(details.queue, { waiting: 2, activeRunId: null });
    assert.match((await runCli(['sessions', 'show', 'main', '--state-dir', state, '--config', cfg])).stdout, /^queue\s+2 waiting/m);
    // Once the queue has run, nothing waits.
    assert.equal((await runCli(['ingest', '--state-dir', state, '--config', cfg], { input: '' })).code, 0);
    const after = jsonLines((await runCli(['sessions', 'show', 'main', '--json', '--state-dir', state, '--config', cfg])).stdout)[0];
    assert.deepEqual(after.queue, { waiting: 0, activeRunId: null });
    assert.ok(after.transcript.records > 0);
  });

  test('sessions --active MIN keeps only sessions updated in the last MIN minutes, by the --now clock', async () => {
    const state = tempDir();
    assert.equal((await runCli(['send', 'old', '--channel', 'telegram', '--peer', 'group:1', '--now', '2026-11-30T07:00:00Z', '--state-dir', state])).code, 0);
    assert.equal((await runCli(['send', 'new', '--channel', 'telegram', '--peer', 'group:2', '--now', '2026-11-30T07:50:00Z', '--state-dir', state])).code, 0);
    const listed = async (minutes: string) =>
      jsonLines((await runCli(['sessions', '--active', minutes, '--json', '--now', '2026-11-30T08:00:00Z', '--state-dir', state])).stdout)[0].sessions.map((s: { key: string }) => s.key);
    assert.deepEqual(await listed('15'), ['agent:main:telegram:group:2']);
    assert.deepEqual((await listed('90')).sort(), ['agent:main:telegram:group:1', 'agent:main:telegram:group:2']);
  });

  test('sessions cleanup --json: one store is the summary itself, several are {allAgents, mode, dryRun, stores}; diskBudget an object or null', async () => {
    const state = tempDir();
    const cfg = writeJson(path.join(state, 'c.json'), { agents: { list: [{ id: 'main', default: true }, { id: 'club' }] } });
    assert.equal((await runCli(['send', 'hi', '--channel', 'telegram', '--state-dir', state, '--config', cfg])).code, 0);
    const one = await runCli(['sessions', 'cleanup', '--dry-run', '--json', '--state-dir', state, '--config', cfg]);
    assert.equal(one.code, 0, one.stderr);
    const summary = jsonLines(one.stdout)[0];
    const checkSummary = (s: Record<string, any>, what: string) => {
      for (const field of ['agentId', 'storePath', 'mode']) assert.equal(typeof s[field], 'string', `${what}.${field}`);
      for (const field of ['dryRun', 'wouldMutate']) assert.equal(typeof s[field], 'boolean', `${what}.${field}`);
      for (const field of ['beforeCount', 'afterCount', 'missing', 'pruned', 'capped']) assert.ok(isInt(s[field]), `${what}.${field}`);
      assert.ok('diskBudget' in s, `${what}.diskBudget`);
      if ('applied' in s) assert.equal(s.applied, true);
    };
    checkSummary(summary, 'summary');
    assert.deepEqual([summary.agentId, summary.dryRun, summary.beforeCount, summary.diskBudget], ['main', true, 1, null]);
    const all = jsonLines((await runCli(['sessions', 'cleanup', '--dry-run', '--all-agents', '--json', '--state-dir', state, '--config', cfg])).stdout)[0];
    assert.equal(all.allAgents, true);
    assert.equal(all.dryRun, true);
    assert.equal(typeof all.mode, 'string');
    assert.deepEqual(all.stores.map((s: { agentId: string }) => s.agentId).sort(), ['club', 'main']);
    for (const s of all.stores) checkSummary(s, `stores[${s.agentId}]`);

    const budget = writeJson(path.join(state, 'budget.json'), { session: { maintenance: { maxDiskBytes: '10mb' } } });
    const withBudget = jsonLines((await runCli(['sessions', 'cleanup', '--dry-run', '--json', '--state-dir', state, '--config', budget])).stdout)[0];
    const disk = withBudget.diskBudget;
    for (const field of ['totalBytesBefore', 'totalBytesAfter', 'removedFiles', 'removedEntries', 'freedBytes', 'maxBytes', 'highWaterBytes']) assert.ok(isInt(disk[field]), `diskBudget.${field}`);
    assert.equal(typeof disk.overBudget, 'boolean');
    assert.equal(disk.maxBytes, 10 * 1024 * 1024);
  });
});
