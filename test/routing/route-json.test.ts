// routeJson writes a route's JSON text directly (route resolve --batch); it must be byte for byte
// JSON.stringify(route), whatever the strings hold.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { compileRoutingTable, normalizeRouteInput, resolveRoute, routeJson } from '../../src/routing/index.js';

const config = {
  agents: { list: [{ id: 'main', default: true }, { id: 'work' }] },
  bindings: [{ agentId: 'work', match: { channel: 'slack', accountId: '*', teamId: 't1' } }],
  session: { dmScope: 'per-account-channel-peer' as const },
};

const awkward = ['plain', 'quote " and \\ backslash', 'tab\tnew\nline', '\u0000\u001f control', 'h\u00e9llo \u{1F600}', '\u2028\u2029', 'lone \ud800 surrogate', '</script>'];

describe('routeJson', () => {
  test('equals JSON.stringify(route) for every tier and for awkward ids', () => {
    const table = compileRoutingTable(config);
    for (const text of awkward) {
      for (const raw of [
        { channel: 'slack', accountId: text, teamId: 't1', peer: { kind: 'direct', id: text } },
        { channel: 'telegram', accountId: text, peer: { kind: 'group', id: text }, threadId: text },
        { channel: `x${text}`, peer: { kind: 'direct', id: text } },
        { channel: 'discord' },
      ]) {
        const { route } = resolveRoute(table, normalizeRouteInput(raw));
        assert.equal(routeJson(route), JSON.stringify(route), JSON.stringify(raw));
      }
    }
  });
});
