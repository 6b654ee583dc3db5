// agents.entries configs (OpenClaw 2026.9.6) in the commands around routing: a bare session key
// with no owner is refused (NO_OWNER) instead of given to a guessed agent; an entry may carry
// switchboard's runner from a switchboard.json5 overlay (never from the OpenClaw file itself);
// `config validate` refuses every runner problem a command would refuse.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, test } from 'node:test';
import { connectClient } from '../../src/server/index.js';
import { jsonLines, runCli, tempDir, writeJson } from '../helpers.js';
import { startServe, stopAllServers } from '../serve-process.js';

after(stopAllServers);

/** Two agents, explicit ownership, no system agent: slack belongs to work, nothing is anyone's by default. */
const explicit = {
  agents: { ownership: 'explicit', entries: { work: {}, home: {} } },
  bindings: [{ agentId: 'work', match: { channel: 'slack', accountId: '*' } }],
};

function errorOf(stderr: string): { code: string; message: string; hint?: string } {
  return JSON.parse(stderr.trim().split('\n').pop()!).error;
}

test('sessions and queue refuse a bare key (or no agent) when nobody owns it, and work when the agent is named', async () => {
  const dir = tempDir();
  writeJson(path.join(dir, 'openclaw.json'), explicit);
  const ingest = await runCli(['ingest', '--state-dir', dir], { input: `${JSON.stringify({ channel: 'slack', sessionKey: 'agent:work:notes', text: 'hi' })}\n` });
  assert.equal(ingest.code, 0, ingest.stderr);

  for (const args of [['sessions'], ['sessions', 'show', 'notes'], ['sessions', 'reset', 'notes', '--yes'], ['queue', '--session', 'notes']]) {
    const r = await runCli([...args, '--json', '--state-dir', dir]);
    assert.equal(r.code, 78, `${args.join(' ')}: ${r.stdout}${r.stderr}`);
    const error = errorOf(r.stderr);
    assert.equal(error.code, 'NO_OWNER', args.join(' '));
    assert.match(error.hint ?? '', /--agent/);
  }
  const listed = await runCli(['sessions', '--agent', 'work', '--json', '--state-dir', dir]);
  assert.equal(listed.code, 0, listed.stderr);
  assert.deepEqual(JSON.parse(listed.stdout).sessions.map((s: any) => s.key), ['agent:work:notes']);
  const shown = await runCli(['sessions', 'show', 'agent:work:notes', '--json', '--state-dir', dir]);
  assert.equal(shown.code, 0, shown.stderr);
  const byAgent = await runCli(['sessions', 'show', 'notes', '--agent', 'work', '--json', '--state-dir', dir]);
  assert.equal(byAgent.code, 0, byAgent.stderr);
  const sessionId = JSON.parse(shown.stdout).sessionId ?? JSON.parse(shown.stdout).entry?.sessionId;
  assert.ok(sessionId, shown.stdout);
  const byId = await runCli(['sessions', 'show', sessionId, '--json', '--state-dir', dir]);
  assert.equal(byId.code, 0, `a session id still finds its session: ${byId.stderr}`);
  const queue = await runCli(['queue', '--session', 'agent:work:notes', '--json', '--state-dir', dir]);
  assert.equal(queue.code, 0, queue.stderr);
});

test('serve: subscribe with a bare key and no owner is refused with NO_OWNER; a full key is taken', async () => {
  const dir = tempDir();
  writeJson(path.join(dir, 'openclaw.json'), explicit);
  const server = await startServe(dir);
  const client = await connectClient(server.socketPath);
  await assert.rejects(client.request('subscribe', { sessionKey: 'notes' }), (err: any) => err.code === 'NO_OWNER');
  assert.deepEqual(await client.request('subscribe', { sessionKey: 'agent:work:notes' }), { subscribed: ['agent:work:notes'] });
  await client.close();
});

test('an agents.entries agent gets its own runner from the switchboard.json5 overlay, never from the OpenClaw file', async () => {
  const dir = tempDir();
  const openclaw = {
    agents: { entries: { work: {}, home: { default: true } } },
    bindings: [{ agentId: 'work', match: { channel: 'slack', accountId: '*' } }],
  };
  writeJson(path.join(dir, 'openclaw.json'), openclaw);
  fs.writeFileSync(path.join(dir, 'switchboard.json5'), `{ extends: "./openclaw.json", agents: { entries: { work: { runner: { command: "builtin:echo" } } } } }\n`);
  const valid = await runCli(['config', 'validate', '--state-dir', dir]);
  assert.equal(valid.code, 0, valid.stderr);
  const input = [
    { channel: 'slack', peer: { kind: 'direct', id: 'u1' }, text: 'for work' },
    { channel: 'telegram', peer: { kind: 'direct', id: 'u2' }, text: 'for home' },
  ].map((m) => JSON.stringify(m)).join('\n');
  const r = await runCli(['ingest', '--state-dir', dir], { input: `${input}\n` });
  assert.equal(r.code, 0, r.stderr);
  const events = jsonLines(r.stdout);
  const results = events.filter((e) => e.type === 'result');
  assert.deepEqual(results.map((e) => [e.agentId, e.disposition]), [['work', 'started'], ['home', 'recorded']], 'work runs with its own runner, home has none');
  assert.deepEqual(events.filter((e) => e.type === 'reply').map((e) => [e.sessionKey.split(':')[1], e.text]), [['work', 'echo: for work']]);

  // The same key in the OpenClaw file itself: refused where it is written, as OpenClaw refuses it.
  const inBase = tempDir();
  writeJson(path.join(inBase, 'openclaw.json'), { ...openclaw, agents: { entries: { work: { runner: { command: 'builtin:echo' } }, home: { default: true } } } });
  fs.writeFileSync(path.join(inBase, 'switchboard.json5'), `{ extends: "./openclaw.json" }\n`);
  const refused = await runCli(['config', 'validate', '--state-dir', inBase]);
  assert.equal(refused.code, 78);
  assert.match(refused.stderr, /openclaw\.json:\d+:\d+: agents\.entries\.work\.runner: OpenClaw refuses this key/);
});

test('config validate refuses the runner problems ingest refuses, for agents.entries runners too', async () => {
  const cases: [string, string][] = [
    [`{ extends: "./openclaw.json", agents: { entries: { work: { runner: { command: "builtin:echo", env: { "A=B": "x" } } } } } }`, 'agents.entries.work.runner.env.A=B'],
    [`{ extends: "./openclaw.json", agents: { entries: { work: { runner: { command: "builtin:nope" } } } } }`, 'agents.entries.work.runner.command'],
    [`{ extends: "./openclaw.json", agents: { defaults: { runner: { env: { "A=B": "x" } } }, entries: { work: { runner: { command: "cat" } } } } }`, 'agents.defaults.runner.env.A=B'],
  ];
  for (const [overlay, pathShown] of cases) {
    const dir = tempDir();
    writeJson(path.join(dir, 'openclaw.json'), { agents: { entries: { work: {} } } });
    fs.writeFileSync(path.join(dir, 'switchboard.json5'), `${overlay}\n`);
    const validate = await runCli(['config', 'validate', '--state-dir', dir]);
    const ingest = await runCli(['ingest', '--state-dir', dir], { input: `${JSON.stringify({ channel: 'slack', peer: { kind: 'direct', id: 'u1' }, text: 'x' })}\n` });
    assert.equal(ingest.code, 78, `ingest refuses ${overlay}: ${ingest.stdout}${ingest.stderr}`);
    assert.equal(validate.code, 78, `config validate refuses ${overlay}: ${validate.stdout}${validate.stderr}`);
    assert.ok(validate.stderr.includes(pathShown), `${pathShown} in: ${validate.stderr}`);
  }
});
