// `route resolve --batch` prints, for every input line, exactly what `route resolve --json` prints
// for that input on its own (byte for byte), with bad lines answered in place.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import { runCli, tempDir } from '../helpers.js';

const config = {
  agents: { ownership: 'explicit', defaults: { systemAgent: { agentId: 'main' } }, entries: { main: {}, work: {}, club: {} } },
  bindings: [
    { agentId: 'club', match: { channel: 'discord', accountId: '*', peer: { kind: 'channel', id: 'Book-Club' } } },
    { agentId: 'work', match: { channel: 'discord', accountId: '*', guildId: 'g1', roles: ['r1'] } },
    { agentId: 'work', match: { channel: 'msteams', teamId: 't1' } },
    { agentId: 'work', match: { channel: 'slack', accountId: 'acme' }, session: { dmScope: 'per-account-channel-peer' } },
  ],
  session: { dmScope: 'per-channel-peer', identityLinks: { alice: ['telegram:111', 'slack:U9'] } },
};

/** Each input as flags for a single `route resolve --json`, and as an NDJSON line. */
const cases: { flags: string[]; line: unknown }[] = [
  { flags: ['--channel', 'telegram', '--peer', 'direct:111'], line: { channel: 'telegram', peer: { kind: 'direct', id: '111' } } },
  { flags: ['--channel', 'Discord', '--peer', 'channel:thread-9', '--parent-peer', 'channel:Book-Club'], line: { channel: 'Discord', peer: 'channel:thread-9', parentPeer: { kind: 'channel', id: 'Book-Club' } } },
  { flags: ['--channel', 'discord', '--guild', 'g1', '--roles', 'r1', '--peer', 'channel:c5'], line: { channel: 'discord', guildId: 'g1', memberRoleIds: ['r1'], peer: { kind: 'channel', id: 'c5' } } },
  { flags: ['--channel', 'msteams', '--team', 't1'], line: { channel: 'msteams', teamId: 't1' } },
  { flags: ['--channel', 'slack', '--account', 'ACME', '--peer', 'dm:U9'], line: { channel: 'slack', accountId: 'ACME', peer: { kind: 'dm', id: 'U9' } } },
  { flags: ['--channel', 'telegram', '--peer', 'group:-100', '--thread', '42'], line: { channel: 'telegram', peer: { kind: 'group', id: '-100' }, threadId: 42 } },
  { flags: ['--channel', 'signal', '--peer', 'direct:say "hi" \\ é 😀'], line: { channel: 'signal', peer: { kind: 'direct', id: 'say "hi" \\ é 😀' } } },
];

describe('route resolve --batch', () => {
  test('prints byte for byte what route resolve --json prints for each input, bad lines in place', async () => {
    const dir = tempDir();
    const configFile = path.join(dir, 'openclaw.json');
    fs.writeFileSync(configFile, JSON.stringify(config));
    const common = ['--config', configFile, '--state-dir', dir];
    const single: string[] = [];
    for (const { flags } of cases) {
      const r = await runCli(['route', 'resolve', ...flags, '--json', ...common]);
      assert.equal(r.code, 0, `${flags.join(' ')}: ${r.stderr}`);
      single.push(r.stdout);
    }
    const input = [...cases.map(({ line }) => JSON.stringify(line)), '{"channel":', ...cases.map(({ line }) => JSON.stringify(line))].join('\n');
    const batch = await runCli(['route', 'resolve', '--batch', ...common], { input });
    assert.equal(batch.code, 65, batch.stderr);
    const lines = batch.stdout.split(/(?<=\n)/);
    assert.equal(lines.length, cases.length * 2 + 1);
    assert.deepEqual(lines.slice(0, cases.length), single);
    assert.equal(JSON.parse(lines[cases.length]!).error.line, cases.length + 1);
    assert.deepEqual(lines.slice(cases.length + 1), single);
  });
});
