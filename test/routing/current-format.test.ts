// OpenClaw 2026.9.6 configs (agents.entries) through the real CLI: a message nobody owns is refused
// with NO_OWNER in every command, and the strict parts of the format refuse typos with their path.

import assert from 'node:assert/strict';
import path from 'node:path';
import { describe, test } from 'node:test';
import { jsonLines, runCli, tempDir, writeJson } from '../helpers.js';

function errorOf(stderr: string): { code: string; message: string; hint?: string } {
  return JSON.parse(stderr.trim().split('\n').pop()!).error;
}

/** Two agents, explicit ownership, no system agent: only slack has an owner. */
const noOwner = {
  agents: { ownership: 'explicit', entries: { work: {}, home: {} } },
  bindings: [{ agentId: 'work', match: { channel: 'slack', accountId: '*' } }],
};

function setup(config: unknown): { dir: string; file: string } {
  const dir = tempDir();
  return { dir, file: writeJson(path.join(dir, 'openclaw.json'), config) };
}

describe('no owner, no guess', () => {
  test('route resolve --batch refuses that line with NO_OWNER and routes the others', async () => {
    const { dir, file } = setup(noOwner);
    const input = ['{"channel":"slack","peer":{"kind":"direct","id":"u1"}}', '{"channel":"telegram","peer":{"kind":"direct","id":"u1"}}', '{"channel":"slack"}'].join('\n') + '\n';
    const r = await runCli(['route', 'resolve', '--batch', '--config', file, '--state-dir', dir], { input });
    assert.equal(r.code, 78, r.stderr);
    const lines = jsonLines(r.stdout);
    assert.equal(lines.length, 3);
    assert.equal(lines[0].agentId, 'work');
    assert.equal(lines[1].error.code, 'NO_OWNER');
    assert.equal(lines[1].error.line, 2);
    assert.equal(lines[1].agentId, undefined, 'no made-up agent');
    assert.equal(lines[2].agentId, 'work');
  });

  test('route resolve of one such message exits 78 with NO_OWNER and a fix', async () => {
    const { dir, file } = setup(noOwner);
    const r = await runCli(['route', 'resolve', '--json', '--channel', 'telegram', '--config', file, '--state-dir', dir]);
    assert.equal(r.code, 78);
    assert.equal(r.stdout, '');
    const error = errorOf(r.stderr);
    assert.equal(error.code, 'NO_OWNER');
    assert.match(error.hint ?? '', /"channel":"telegram"/);
  });

  test('ingest emits an error event for that line, records the others, and never invents agent main', async () => {
    const { dir, file } = setup(noOwner);
    const input = '{"channel":"telegram","peer":"direct:1","text":"hi"}\n{"channel":"slack","peer":"direct:1","text":"hi"}\n';
    const r = await runCli(['ingest', '--no-wait', '--config', file, '--state-dir', dir], { input });
    const events = jsonLines(r.stdout);
    const error = events.find((e) => e.type === 'error');
    assert.equal(error?.code, 'NO_OWNER');
    assert.equal(error?.line, 1);
    const result = events.find((e) => e.type === 'result');
    assert.equal(result?.line, 2);
    assert.equal(result?.agentId, 'work');
    assert.ok(!events.some((e) => e.agentId === 'main'));
    assert.equal(r.code, 78);
    const sessions = await runCli(['sessions', 'list', '--all-agents', '--json', '--config', file, '--state-dir', dir]);
    assert.deepEqual(JSON.parse(sessions.stdout).sessions.map((s: { key: string }) => s.key), ['agent:work:main']);
  });

  test('route explain shows the trace, says why no agent owns the message and how to fix it', async () => {
    const { dir, file } = setup(noOwner);
    const text = await runCli(['route', 'explain', '--channel', 'telegram', '--peer', 'direct:1', '--config', file, '--state-dir', dir]);
    assert.equal(text.code, 78);
    assert.match(text.stdout, /tier 9 default/);
    assert.match(text.stdout, /no fallback owner/);
    assert.match(text.stdout, /NO_OWNER/);
    assert.match(text.stdout, /fix: add a channel-wide binding .*"telegram"/);
    assert.match(text.stdout, /agents\.defaults\.systemAgent\.agentId/);
    const json = await runCli(['route', 'explain', '--json', '--channel', 'telegram', '--config', file, '--state-dir', dir]);
    assert.equal(json.code, 78);
    const out = JSON.parse(json.stdout);
    assert.equal(out.route, null);
    assert.equal(out.error.code, 'NO_OWNER');
    assert.deepEqual(out.trace.map((t: { tier: number }) => t.tier), [1, 2, 3, 4, 5, 6, 7, 8, 9]);
    assert.equal(errorOf(json.stderr).code, 'NO_OWNER');
  });

  test('ingest refuses a bare explicit session key when nobody owns it; an agent-qualified key still works', async () => {
    const { dir, file } = setup(noOwner);
    const input = '{"channel":"telegram","sessionKey":"notes","text":"hi"}\n{"channel":"telegram","sessionKey":"agent:home:notes","text":"hi"}\n';
    const r = await runCli(['ingest', '--no-wait', '--config', file, '--state-dir', dir], { input });
    const events = jsonLines(r.stdout);
    assert.equal(events.find((e) => e.line === 1)?.code, 'NO_OWNER');
    assert.equal(events.find((e) => e.line === 2)?.sessionKey, 'agent:home:notes');
  });

  test('a matched binding with a blank agentId means the fallback owner: refused when there is none', async () => {
    const { dir, file } = setup({ agents: { ownership: 'explicit', entries: { main: {}, work: {} } }, bindings: [{ agentId: '', match: { channel: 'slack' } }] });
    const r = await runCli(['route', 'resolve', '--json', '--channel', 'slack', '--config', file, '--state-dir', dir]);
    assert.equal(r.code, 78);
    assert.equal(errorOf(r.stderr).code, 'NO_OWNER');
    assert.match(errorOf(r.stderr).message, /blank agentId/);
  });

  test('a system agent owns what no binding claims; the matched binding session scope wins', async () => {
    const { dir, file } = setup({
      agents: { ownership: 'explicit', entries: { work: {}, home: {} }, defaults: { systemAgent: { agentId: ' HOME ' } } },
      bindings: [{ agentId: 'work', match: { channel: 'slack' }, session: { dmScope: 'per-peer', groupScope: 'main' } }],
      session: { dmScope: 'per-channel-peer', mainKey: 'work' },
    });
    const input = '{"channel":"telegram","peer":"direct:U1"}\n{"channel":"slack","peer":"direct:U1"}\n{"channel":"slack","peer":"group:G1"}\n';
    const r = await runCli(['route', 'resolve', '--batch', '--config', file, '--state-dir', dir], { input });
    assert.equal(r.code, 0, r.stderr);
    const [tg, dm, group] = jsonLines(r.stdout);
    assert.equal(tg.agentId, 'home');
    assert.equal(tg.sessionKey, 'agent:home:telegram:direct:u1');
    assert.equal(tg.mainSessionKey, 'agent:home:main', 'mainKey is ignored');
    assert.equal(dm.dmScope, 'per-peer');
    assert.equal(dm.sessionKey, 'agent:work:direct:u1');
    assert.equal(group.sessionKey, 'agent:work:main');
    assert.equal(group.lastRoutePolicy, 'main');
    const explain = await runCli(['route', 'explain', '--channel', 'slack', '--config', file, '--state-dir', dir]);
    assert.match(explain.stdout, /session\.mainKey is ignored/);
  });
});

describe('which rules: the file decides', () => {
  test('agents.list keeps mainKey and dm; an empty agents section or an entries roster ignores mainKey', async () => {
    const input = '{"channel":"signal","peer":{"kind":"group","id":"AbC"}}\n';
    const run = async (config: unknown) => {
      const { dir, file } = setup(config);
      const r = await runCli(['route', 'resolve', '--batch', '--config', file, '--state-dir', dir], { input });
      assert.equal(r.code, 0, r.stderr);
      return jsonLines(r.stdout)[0];
    };
    const legacy = await run({ agents: { list: [{ id: 'main' }] }, session: { mainKey: 'Home' } });
    assert.equal(legacy.mainSessionKey, 'agent:main:home');
    // OpenClaw's resolver keeps the case of a Signal group id for agents.list configs too.
    assert.equal(legacy.sessionKey, 'agent:main:signal:group:AbC');
    for (const config of [{ agents: {}, session: { mainKey: 'Home' } }, { agents: { entries: { main: {} } }, session: { mainKey: 'Home' } }]) {
      const current = await run(config);
      assert.equal(current.mainSessionKey, 'agent:main:main');
      assert.equal(current.sessionKey, 'agent:main:signal:group:AbC', 'Signal group ids keep their case');
    }
  });
});

describe('strict where OpenClaw is strict', () => {
  async function refused(config: unknown, pathPattern: RegExp): Promise<void> {
    const { dir, file } = setup(config);
    for (const args of [['route', 'resolve', '--json', '--channel', 'slack'], ['config', 'validate', '--json']]) {
      const r = await runCli([...args, '--config', file, '--state-dir', dir]);
      assert.equal(r.code, 78, `${args.join(' ')}: ${r.stdout}${r.stderr}`);
      const error = errorOf(r.stderr);
      assert.equal(error.code, 'CONFIG_INVALID');
      assert.match(error.message, pathPattern);
    }
  }

  test('a typo in a binding match (guild for guildId) is refused with its path, in both generations', async () => {
    await refused({ agents: { list: [{ id: 'main' }, { id: 'work' }] }, bindings: [{ agentId: 'work', match: { channel: 'discord', guild: 'g1' } }] }, /bindings\[0\]\.match\.guild: unknown key/);
    await refused({ agents: { entries: { main: {} } }, bindings: [{ agentId: 'main', match: { channel: 'discord', guild: 'g1' } }] }, /bindings\[0\]\.match\.guild: unknown key/);
    await refused({ bindings: [{ agentId: 'main', match: { channel: 'discord', peer: { kind: 'group', id: 'x', idd: 'y' } } }] }, /bindings\[0\]\.match\.peer\.idd: unknown key/);
  });

  test('unknown keys in sendPolicy rules and in their match are refused with their path', async () => {
    await refused({ session: { sendPolicy: { rules: [{ action: 'deny', match: { channel: 'x' }, when: 'always' }] } } }, /session\.sendPolicy\.rules\[0\]\.when: unknown key/);
    await refused({ session: { sendPolicy: { rules: [{ action: 'deny', match: { chanel: 'x' } }] } } }, /session\.sendPolicy\.rules\[0\]\.match\.chanel: unknown key/);
  });

  test('a peer kind outside direct/group/channel is refused; dm stays an alias in agents.list configs', async () => {
    await refused({ bindings: [{ agentId: 'main', match: { channel: 'slack', peer: { kind: 'room', id: 'x' } } }] }, /bindings\[0\]\.match\.peer\.kind/);
    await refused({ agents: { entries: { main: {} } }, bindings: [{ agentId: 'main', match: { channel: 'slack', peer: { kind: 'dm', id: 'x' } } }] }, /bindings\[0\]\.match\.peer\.kind: must be one of direct, group, channel/);
    const { dir, file } = setup({ agents: { list: [{ id: 'main' }, { id: 'work' }] }, bindings: [{ agentId: 'work', match: { channel: 'slack', peer: { kind: 'dm', id: 'x' } } }] });
    const r = await runCli(['route', 'resolve', '--json', '--channel', 'slack', '--peer', 'direct:x', '--config', file, '--state-dir', dir]);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(JSON.parse(r.stdout).agentId, 'work');
  });

  test('roster keys that are not valid agent ids, duplicates and stray entry keys are refused', async () => {
    await refused({ agents: { entries: { ' ops': {} } } }, /agents\.entries\[" ops"\]: invalid agent id key/);
    await refused({ agents: { ownership: 'explicit', entries: { Ops: {}, ops: {} } } }, /agents\.entries\.ops: keys "Ops" and "ops" are the same agent id/);
    await refused({ agents: { entries: { main: { runner: { command: 'cat' } } } } }, /agents\.entries\.main\.runner: OpenClaw refuses this key/);
    await refused({ agents: { entries: { a: {}, b: {} } } }, /agents\.ownership: several agents/);
    await refused({ agents: { entries: { a: {} } }, bindings: [{ agentId: 'b', match: { channel: 'slack' } }] }, /bindings\[0\]\.agentId: agent "b" is not in agents\.entries/);
  });

  test('every problem is listed, not only the first', async () => {
    const { dir, file } = setup({ agents: { entries: { ' ops': {}, a: { routing: {} } } }, bindings: [{ agentId: 'a', match: { channel: 'x', guild: 'g' } }] });
    const r = await runCli(['config', 'validate', '--json', '--config', file, '--state-dir', dir]);
    assert.equal(r.code, 78);
    const message = errorOf(r.stderr).message;
    assert.match(message, /bindings\[0\]\.match\.guild/);
    assert.doesNotMatch(message, /and \d+ more/);
  });

  test('unknown keys elsewhere stay quiet in commands; config validate lists them once, grouped', async () => {
    const { dir, file } = setup({
      agents: { entries: { main: { workspace: '~/w' } } },
      gateway: { port: 18789, bind: 'loopback', auth: { mode: 'token' } },
      tools: { profile: 'coding' },
    });
    const resolved = await runCli(['route', 'resolve', '--channel', 'slack', '--config', file, '--state-dir', dir]);
    assert.equal(resolved.code, 0);
    assert.equal(resolved.stderr, '');
    const validated = await runCli(['config', 'validate', '--config', file, '--state-dir', dir]);
    assert.equal(validated.code, 0, validated.stderr);
    const lines = validated.stderr.split('\n').filter((line) => /not used by switchboard/.test(line));
    assert.equal(lines.length, 1, validated.stderr);
    for (const key of ['gateway', 'tools', 'agents.entries.main.workspace']) assert.ok(lines[0].includes(key), lines[0]);
  });
});
