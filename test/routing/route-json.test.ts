// routeJson writes a route's JSON text directly (route resolve --batch); it must be byte for byte
// JSON.stringify(route), whatever the strings hold.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { RouteJsonWriter, compileRoutingTable, normalizeRouteInput, resolveRoute, routeJson } from '../../src/routing/index.js';
import type { SwitchboardConfig } from '../../src/config/index.js';

const config = {
  agents: { list: [{ id: 'main', default: true }, { id: 'work' }] },
  bindings: [{ agentId: 'work', match: { channel: 'slack', accountId: '*', teamId: 't1' } }],
  session: { dmScope: 'per-account-channel-peer' as const },
};

const awkward = ['plain', 'del \u007f and ~', 'quote " and \\ backslash', 'tab\tnew\nline', '\u0000\u001f control', 'h\u00e9llo \u{1F600}', '\u2028\u2029', 'lone \ud800 surrogate', '</script>'];

describe('routeJson', () => {
  test('equals JSON.stringify(route) for every tier and for awkward ids', () => {
    const table = compileRoutingTable(config);
    const writer = new RouteJsonWriter(table);
    for (const text of awkward) {
      for (const raw of [
        { channel: 'slack', accountId: text, teamId: 't1', peer: { kind: 'direct', id: text } },
        { channel: 'telegram', accountId: text, peer: { kind: 'group', id: text }, threadId: text },
        { channel: `x${text}`, peer: { kind: 'direct', id: text } },
        { channel: 'discord' },
      ]) {
        const { route } = resolveRoute(table, normalizeRouteInput(raw));
        assert.equal(routeJson(route), JSON.stringify(route), JSON.stringify(raw));
        // Twice: the second time from the writer's cached text.
        assert.equal(writer.json(normalizeRouteInput(raw)), JSON.stringify(route), JSON.stringify(raw));
        assert.equal(writer.json(normalizeRouteInput(raw)), JSON.stringify(route), JSON.stringify(raw));
        // What --batch vouches for: a line without a backslash has no string that needs escaping.
        const line = JSON.stringify(raw);
        if (!line.includes('\\')) assert.equal(writer.json(normalizeRouteInput(JSON.parse(line)), true), JSON.stringify(route), line);
      }
    }
  });
});

describe('RouteJsonWriter', () => {
  const base = {
    bindings: [
      { agentId: 'work', match: { channel: 'slack', accountId: '*', teamId: 't1' } },
      { agentId: 'home', match: { channel: 'telegram', peer: { kind: 'group', id: 'g1' } }, session: { dmScope: 'per-peer' as const, groupScope: 'main' as const } },
      { agentId: '', match: { channel: 'discord', accountId: '*' } },
    ],
    session: { dmScope: 'per-account-channel-peer' as const, mainKey: 'Home "base"', identityLinks: { alice: ['telegram:u1'], 'bo"b\\': ['telegram:u2'] } },
  };
  const configs: SwitchboardConfig[] = [
    { ...base, agents: { list: [{ id: 'main', default: true }, { id: 'work' }, { id: 'home' }] }, bindings: base.bindings.slice(0, 2) },
    { ...base, agents: { ownership: 'explicit', entries: { main: {}, work: {}, home: {} } } },
    { ...base, agents: { ownership: 'explicit', defaults: { systemAgent: { agentId: 'home' } }, entries: { main: {}, work: {}, home: {} } } },
  ];
  const inputs = [
    { channel: 'slack', teamId: 't1', peer: 'direct:U1' },
    { channel: 'slack', accountId: 'A2', peer: 'group:C1', threadId: 'T1' },
    { channel: 'telegram', peer: 'group:g1', threadId: '7' },
    { channel: 'telegram', peer: 'direct:u1' },
    { channel: 'telegram', peer: 'direct:u2' },
    { channel: 'telegram', accountId: 'bot2', peer: 'direct:U1' },
    { channel: 'discord', peer: 'channel:c1' },
    { channel: 'matrix', peer: 'group:!Room' },
    { channel: 'signal' },
  ];

  test('prints what routeJson prints of resolveRoute, or throws the same error, for every config generation', () => {
    for (const config of configs) {
      const table = compileRoutingTable(config);
      const writer = new RouteJsonWriter(table);
      for (let round = 0; round < 2; round++) {
        for (const raw of inputs) {
          const input = normalizeRouteInput(raw);
          let expected: string;
          try {
            expected = routeJson(resolveRoute(table, input).route);
          } catch (err) {
            assert.throws(() => writer.json(input), (thrown: unknown) => (thrown as { code?: string }).code === (err as { code?: string }).code && (thrown as Error).message === (err as Error).message);
            continue;
          }
          assert.equal(writer.json(input), expected, JSON.stringify(raw));
          // The table's own strings (main key, linked names) are checked even when the input vouches for its own.
          assert.equal(writer.json(input, true), expected, JSON.stringify(raw));
        }
      }
    }
  });
});
