// Unit tests of the pure routing core: each tier, the precedence consequences routing.md pins,
// and agreement between the indexed resolver and the explain walk.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { SwitchboardConfig } from '../../src/config/index.js';
import { compileRoutingTable, explainRoute, normalizeRouteInput, resolveRoute } from '../../src/routing/index.js';

function route(config: SwitchboardConfig, raw: Record<string, unknown>) {
  const table = compileRoutingTable(config);
  const input = normalizeRouteInput(raw);
  const resolved = resolveRoute(table, input);
  const explained = explainRoute(table, input);
  // The explain walk must always agree with the indexed fast path.
  assert.deepEqual(explained.route, resolved.route);
  return resolved;
}

const agents = { list: [{ id: 'main', default: true }, { id: 'work' }, { id: 'home' }, { id: 'ops' }] };

describe('tiers', () => {
  test('1 binding.peer: exact peer wins over everything else', () => {
    const r = route(
      {
        agents,
        bindings: [
          { agentId: 'work', match: { channel: 'discord', accountId: '*' } },
          { agentId: 'ops', match: { channel: 'discord', guildId: 'g1' } },
          { agentId: 'home', match: { channel: 'discord', peer: { kind: 'channel', id: 'c5' } } },
        ],
      },
      { channel: 'discord', peer: { kind: 'channel', id: 'c5' }, guildId: 'g1' },
    );
    assert.equal(r.route.agentId, 'home');
    assert.equal(r.route.matchedBy, 'binding.peer');
  });

  test('peer ids keep their case for matching', () => {
    const config = { agents, bindings: [{ agentId: 'home', match: { channel: 'slack', peer: { kind: 'direct', id: 'U9' } } }] };
    assert.equal(route(config, { channel: 'slack', peer: { kind: 'direct', id: 'U9' } }).route.matchedBy, 'binding.peer');
    assert.equal(route(config, { channel: 'slack', peer: { kind: 'direct', id: 'u9' } }).route.matchedBy, 'default');
  });

  test('group and channel peer kinds match each other; direct matches only direct', () => {
    const config = { agents, bindings: [{ agentId: 'home', match: { channel: 'slack', peer: { kind: 'group', id: 'x' } } }] };
    assert.equal(route(config, { channel: 'slack', peer: 'channel:x' }).route.agentId, 'home');
    assert.equal(route(config, { channel: 'slack', peer: 'direct:x' }).route.agentId, 'main');
    const dm = { agents, bindings: [{ agentId: 'home', match: { channel: 'slack', peer: { kind: 'dm', id: 'x' } } }] };
    assert.equal(route(dm, { channel: 'slack', peer: 'direct:x' }).route.agentId, 'home');
    assert.equal(route(dm, { channel: 'slack', peer: 'group:x' }).route.agentId, 'main');
  });

  test('2 binding.peer.parent: a thread inherits its parent binding; exact peer still wins', () => {
    const config = {
      agents,
      bindings: [
        { agentId: 'work', match: { channel: 'discord', guildId: 'g1' } },
        { agentId: 'home', match: { channel: 'discord', peer: { kind: 'channel', id: 'parent' } } },
      ],
    };
    const thread = route(config, { channel: 'discord', peer: 'channel:t1', parentPeer: 'channel:parent', guildId: 'g1' });
    assert.equal(thread.route.agentId, 'home');
    assert.equal(thread.route.matchedBy, 'binding.peer.parent');
    const withExact = route(
      { agents, bindings: [...config.bindings, { agentId: 'ops', match: { channel: 'discord', peer: { kind: 'channel', id: 't1' } } }] },
      { channel: 'discord', peer: 'channel:t1', parentPeer: 'channel:parent' },
    );
    assert.equal(withExact.route.agentId, 'ops');
    assert.equal(withExact.route.matchedBy, 'binding.peer');
  });

  test('3 binding.peer.wildcard: peer id "*" of a compatible kind', () => {
    const config = {
      agents,
      bindings: [
        { agentId: 'work', match: { channel: 'telegram', peer: { kind: 'group', id: '*' } } },
        { agentId: 'home', match: { channel: 'telegram', peer: { kind: 'direct', id: '*' } } },
      ],
    };
    assert.deepEqual(
      [route(config, { channel: 'telegram', peer: 'channel:1' }).route.agentId, route(config, { channel: 'telegram', peer: 'direct:1' }).route.agentId],
      ['work', 'home'],
    );
    assert.equal(route(config, { channel: 'telegram', peer: 'direct:1' }).route.matchedBy, 'binding.peer.wildcard');
  });

  test('4 guild+roles beats 5 guild; roles are any-of; a failed roles binding is not retried as guild-only', () => {
    const config = {
      agents,
      bindings: [
        { agentId: 'work', match: { channel: 'discord', guildId: 'g1' } },
        { agentId: 'ops', match: { channel: 'discord', guildId: 'g1', roles: ['admin', 'mod'] } },
      ],
    };
    const admin = route(config, { channel: 'discord', guildId: 'g1', memberRoleIds: ['x', 'mod'] });
    assert.equal(admin.route.agentId, 'ops');
    assert.equal(admin.route.matchedBy, 'binding.guild+roles');
    const plain = route(config, { channel: 'discord', guildId: 'g1', memberRoleIds: ['x'] });
    assert.equal(plain.route.agentId, 'work');
    assert.equal(plain.route.matchedBy, 'binding.guild');
    const onlyRoles = route({ agents, bindings: [config.bindings[1]] }, { channel: 'discord', guildId: 'g1', memberRoleIds: ['x'] });
    assert.equal(onlyRoles.route.matchedBy, 'default');
  });

  test('an empty roles array means no role constraint', () => {
    const r = route({ agents, bindings: [{ agentId: 'work', match: { channel: 'discord', guildId: 'g1', roles: [] } }] }, { channel: 'discord', guildId: 'g1' });
    assert.equal(r.route.matchedBy, 'binding.guild');
  });

  test('role ids are compared exactly as OpenClaw compares them: untrimmed, and a blank id is still a constraint', () => {
    const entries = { entries: { main: { default: true }, work: {} } };
    for (const roster of [agents, entries] as SwitchboardConfig['agents'][]) {
      const padded = { agents: roster, bindings: [{ agentId: 'work', match: { channel: 'discord', guildId: 'g1', roles: [' r1 '] } }] };
      assert.equal(route(padded, { channel: 'discord', guildId: 'g1', memberRoleIds: ['r1'] }).route.agentId, 'main', 'a padded binding role is not role r1');
      assert.equal(route(padded, { channel: 'discord', guildId: 'g1', memberRoleIds: [' r1 '] }).route.matchedBy, 'binding.guild+roles');
      const plain = { agents: roster, bindings: [{ agentId: 'work', match: { channel: 'discord', guildId: 'g1', roles: ['r1'] } }] };
      assert.equal(route(plain, { channel: 'discord', guildId: 'g1', memberRoleIds: [' r1'] }).route.agentId, 'main', 'a padded member role is not role r1');
      // A blank role never widens the binding to the whole guild.
      const blank = { agents: roster, bindings: [{ agentId: 'work', match: { channel: 'discord', guildId: 'g1', roles: [''] } }] };
      assert.equal(route(blank, { channel: 'discord', guildId: 'g1', memberRoleIds: ['r1'] }).route.agentId, 'main');
      assert.equal(route(blank, { channel: 'discord', guildId: 'g1' }).route.agentId, 'main');
      assert.equal(route(blank, { channel: 'discord', guildId: 'g1', memberRoleIds: [''] }).route.matchedBy, 'binding.guild+roles');
    }
  });

  test('a peer+guild binding whose peer differs is no guild fallback', () => {
    const config = { agents, bindings: [{ agentId: 'work', match: { channel: 'discord', guildId: 'g1', peer: { kind: 'channel', id: 'c1' } } }] };
    assert.equal(route(config, { channel: 'discord', guildId: 'g1', peer: 'channel:c2' }).route.matchedBy, 'default');
    assert.equal(route(config, { channel: 'discord', guildId: 'g2', peer: 'channel:c1' }).route.matchedBy, 'default');
    assert.equal(route(config, { channel: 'discord', guildId: 'g1', peer: 'channel:c1' }).route.matchedBy, 'binding.peer');
  });

  test('6 binding.team', () => {
    const r = route({ agents, bindings: [{ agentId: 'work', match: { channel: 'msteams', teamId: 'T1' } }] }, { channel: 'msteams', teamId: 'T1' });
    assert.equal(r.route.matchedBy, 'binding.team');
    assert.equal(route({ agents, bindings: [{ agentId: 'work', match: { channel: 'msteams', teamId: 'T1' } }] }, { channel: 'msteams', teamId: 't1' }).route.matchedBy, 'default');
  });

  test('7 an explicit-account binding beats a "*" binding whatever the order', () => {
    const config = {
      agents,
      bindings: [
        { agentId: 'work', match: { channel: 'slack', accountId: '*' } },
        { agentId: 'home', match: { channel: 'slack', accountId: 'Acct2' } },
      ],
    };
    const r = route(config, { channel: 'slack', accountId: 'acct2' });
    assert.equal(r.route.agentId, 'home');
    assert.equal(r.route.matchedBy, 'binding.account');
    const other = route(config, { channel: 'slack', accountId: 'acct3' });
    assert.equal(other.route.agentId, 'work');
    assert.equal(other.route.matchedBy, 'binding.channel');
  });

  test('an omitted or blank match.accountId matches only the default account', () => {
    const config = { agents, bindings: [{ agentId: 'work', match: { channel: 'slack', accountId: '  ' } }] };
    assert.equal(route(config, { channel: 'slack' }).route.matchedBy, 'binding.account');
    assert.equal(route(config, { channel: 'slack', accountId: null }).route.matchedBy, 'binding.account');
    assert.equal(route(config, { channel: 'slack', accountId: 'other' }).route.matchedBy, 'default');
  });

  test('inside a tier the first binding in config order wins, across account buckets', () => {
    const config = {
      agents,
      bindings: [
        { agentId: 'work', match: { channel: 'discord', accountId: '*', guildId: 'g1' } },
        { agentId: 'home', match: { channel: 'discord', accountId: 'a1', guildId: 'g1' } },
      ],
    };
    assert.equal(route(config, { channel: 'discord', accountId: 'a1', guildId: 'g1' }).route.agentId, 'work');
  });

  test('9 default: the first agent marked default, else the first, else main', () => {
    assert.equal(route({ agents: { list: [{ id: 'a' }, { id: 'B', default: true }] } }, { channel: 'x' }).route.agentId, 'b');
    assert.equal(route({ agents: { list: [{ id: 'First' }, { id: 'b' }] } }, { channel: 'x' }).route.agentId, 'first');
    assert.equal(route({}, { channel: 'x' }).route.agentId, 'main');
  });

  test('channels are matched after trimming and lower-casing', () => {
    const r = route({ agents, bindings: [{ agentId: 'work', match: { channel: ' Slack ', accountId: '*' } }] }, { channel: 'SLACK ' });
    assert.equal(r.route.agentId, 'work');
    assert.equal(r.route.channel, 'slack');
  });
});

describe('session keys', () => {
  const base = { agents: { list: [{ id: 'main' }] } };
  const dm = { channel: 'telegram', accountId: 'Acct', peer: { kind: 'direct', id: 'Alice' } };

  test('each dmScope', () => {
    const key = (dmScope: string) => route({ ...base, session: { dmScope } } as SwitchboardConfig, dm).route;
    assert.equal(key('main').sessionKey, 'agent:main:main');
    assert.equal(key('main').lastRoutePolicy, 'main');
    assert.equal(key('per-peer').sessionKey, 'agent:main:direct:alice');
    assert.equal(key('per-peer').lastRoutePolicy, 'session');
    assert.equal(key('per-channel-peer').sessionKey, 'agent:main:telegram:direct:alice');
    assert.equal(key('per-account-channel-peer').sessionKey, 'agent:main:telegram:acct:direct:alice');
  });

  test('mainKey is trimmed and lower-cased', () => {
    const r = route({ ...base, session: { mainKey: ' Personal ' } }, dm).route;
    assert.equal(r.sessionKey, 'agent:main:personal');
    assert.equal(r.mainSessionKey, 'agent:main:personal');
  });

  test('no peer → main key; blank peer id → unknown', () => {
    assert.equal(route({ ...base, session: { dmScope: 'per-peer' } }, { channel: 'x' }).route.sessionKey, 'agent:main:main');
    assert.equal(route({ ...base, session: { dmScope: 'per-peer' } }, { channel: 'x', peer: { kind: 'direct', id: '  ' } }).route.sessionKey, 'agent:main:direct:unknown');
    assert.equal(route(base, { channel: 'x', peer: { kind: 'group', id: '' } }).route.sessionKey, 'agent:main:x:group:unknown');
  });

  test('groups and channels ignore dmScope and lower-case the peer id', () => {
    assert.equal(route(base, { channel: 'Discord', peer: 'channel:C5' }).route.sessionKey, 'agent:main:discord:channel:c5');
    assert.equal(route(base, { channel: 'telegram', peer: 'group:-100123:topic:42' }).route.sessionKey, 'agent:main:telegram:group:-100123:topic:42');
  });

  test('a thread id adds a lower-cased :thread: suffix', () => {
    const r = resolveRoute(compileRoutingTable(base), normalizeRouteInput({ channel: 'slack', peer: 'channel:C1', threadId: 'TS.1' }));
    assert.equal(r.route.sessionKey, 'agent:main:slack:channel:c1:thread:ts.1');
    assert.equal(r.derivation.threadSuffix, ':thread:ts.1');
  });

  describe('identityLinks', () => {
    const links = { alice: ['telegram:123', 'slack:U9'], bob: ['Bob', 'discord:bob'] };
    const cfg = (dmScope: string): SwitchboardConfig => ({ ...base, session: { dmScope: dmScope as never, identityLinks: links } });

    test('a channel-scoped entry matches only on that channel', () => {
      assert.equal(route(cfg('per-peer'), { channel: 'telegram', peer: 'direct:123' }).route.sessionKey, 'agent:main:direct:alice');
      assert.equal(route(cfg('per-peer'), { channel: 'slack', peer: 'direct:123' }).route.sessionKey, 'agent:main:direct:123');
    });

    test('entries and peers compare case-insensitively; a bare entry matches on every channel', () => {
      assert.equal(route(cfg('per-peer'), { channel: 'slack', peer: 'direct:u9' }).route.sessionKey, 'agent:main:direct:alice');
      assert.equal(route(cfg('per-channel-peer'), { channel: 'matrix', peer: 'direct:BOB' }).route.sessionKey, 'agent:main:matrix:direct:bob');
      assert.equal(route(cfg('per-channel-peer'), { channel: 'telegram', peer: 'direct:bob' }).route.sessionKey, 'agent:main:telegram:direct:bob');
    });

    test('the first canonical name in object order wins', () => {
      const r = route({ ...base, session: { dmScope: 'per-peer', identityLinks: { first: ['telegram:7'], second: ['7'] } } }, { channel: 'telegram', peer: 'direct:7' });
      assert.equal(r.route.sessionKey, 'agent:main:direct:first');
      assert.deepEqual(r.derivation.identityLink, { canonical: 'first', entry: 'telegram:7' });
    });

    test('not applied under dmScope main nor to groups', () => {
      assert.equal(route(cfg('main'), { channel: 'telegram', peer: 'direct:123' }).route.sessionKey, 'agent:main:main');
      assert.equal(route(cfg('per-peer'), { channel: 'telegram', peer: 'group:123' }).route.sessionKey, 'agent:main:telegram:group:123');
    });
  });
});

describe('normalisation', () => {
  test('account ids', () => {
    const acct = (accountId: unknown) => route({}, { channel: 'x', accountId }).route.accountId;
    assert.equal(acct(undefined), 'default');
    assert.equal(acct('  '), 'default');
    assert.equal(acct(' Work '), 'work');
    assert.equal(acct('My Account!'), 'my-account');
    assert.equal(acct('--'), 'default');
    assert.equal(acct('__proto__'), 'default');
    assert.equal(acct('Constructor'), 'default');
    assert.equal(acct('a'.repeat(100)), 'a'.repeat(64));
    assert.equal(acct(42), '42');
  });

  test('agent ids', () => {
    const agent = (id: string) => route({ agents: { list: [{ id, default: true }] } }, { channel: 'x' }).route.agentId;
    assert.equal(agent('Family Helper'), 'family-helper');
    assert.equal(agent('../../etc'), 'etc');
    assert.equal(agent('   '), 'main');
    assert.equal(agent('Ops'), 'ops');
    assert.equal(agent('!!!'), 'main');
  });

  test('bad inputs name their JSON path', () => {
    const code = (raw: unknown) => {
      try {
        normalizeRouteInput(raw);
        return 'ok';
      } catch (err) {
        return `${(err as { code: string }).code}@${(err as { details: { path: string } }).details.path}`;
      }
    };
    assert.equal(code({}), 'BAD_INPUT@channel');
    assert.equal(code({ channel: 5 }), 'BAD_INPUT@channel');
    assert.equal(code({ channel: 'x', peer: { kind: 'room', id: '1' } }), 'BAD_INPUT@peer.kind');
    assert.equal(code({ channel: 'x', peer: 'nocolon' }), 'BAD_INPUT@peer');
    assert.equal(code({ channel: 'x', memberRoleIds: 'r1' }), 'BAD_INPUT@memberRoleIds');
    assert.equal(code({ channel: 'x', memberRoleIds: ['r1', {}] }), 'BAD_INPUT@memberRoleIds[1]');
    assert.equal(code([]), 'BAD_INPUT@$');
  });
});

describe('config errors', () => {
  test('a binding to an agent missing from agents.list is CONFIG_INVALID naming the binding', () => {
    assert.throws(
      () => compileRoutingTable({ agents: { list: [{ id: 'main' }] }, bindings: [{ agentId: 'main', match: { channel: 'x' } }, { agentId: 'ghost', match: { channel: 'x' } }] }),
      (err: { code: string; exitCode: number; details: { path: string } }) => err.code === 'CONFIG_INVALID' && err.exitCode === 78 && err.details.path === 'bindings[1].agentId',
    );
  });

  test('several agents without a default is allowed, with a warning', () => {
    const table = compileRoutingTable({ agents: { list: [{ id: 'a' }, { id: 'b' }] } });
    assert.equal(table.defaultAgentId, 'a');
    assert.equal(table.warnings.length, 1);
  });

  test('a binding without match.channel is ignored with a warning', () => {
    const table = compileRoutingTable({ bindings: [{ agentId: 'main', match: {} }] });
    assert.equal(table.bindings.length, 0);
    assert.match(table.warnings[0], /bindings\[0\]/);
  });
});

describe('explain', () => {
  test('records why each candidate lost', () => {
    const table = compileRoutingTable({
      agents,
      bindings: [
        { agentId: 'work', match: { channel: 'discord', accountId: 'acct2', guildId: 'g1' } },
        { agentId: 'ops', match: { channel: 'discord', guildId: 'g1', roles: ['admin'] } },
        { agentId: 'home', match: { channel: 'discord', guildId: 'g1' } },
        { agentId: 'work', match: { channel: 'slack' } },
      ],
    });
    const e = explainRoute(table, normalizeRouteInput({ channel: 'discord', guildId: 'g1', memberRoleIds: ['user'] }));
    const tier4 = e.trace.find((t) => t.tier === 4)!;
    assert.equal(tier4.candidates[0].result, 'rejected');
    assert.match(tier4.candidates[0].reason!, /role/);
    const tier5 = e.trace.find((t) => t.tier === 5)!;
    assert.deepEqual(tier5.candidates.map((c) => [c.index, c.result]), [[0, 'rejected'], [2, 'matched']]);
    assert.match(tier5.candidates[0].reason!, /account/);
    assert.equal(e.trace.find((t) => t.tier === 1)!.skipped, 'no peer');
    assert.ok(e.trace.find((t) => t.tier === 7)!.skipped?.startsWith('not reached'));
    assert.equal(e.trace.length, 9);
    // Bindings of other channels are not candidates at all.
    assert.ok(e.trace.every((t) => t.candidates.every((c) => c.index !== 3)));
  });

  test('agrees with the indexed resolver on random configs and inputs', () => {
    let seed = 7;
    const rand = (n: number) => {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      return seed % n;
    };
    const pick = <T>(items: T[]) => items[rand(items.length)];
    for (let round = 0; round < 200; round++) {
      const bindings = Array.from({ length: 1 + rand(12) }, () => {
        const match: Record<string, unknown> = { channel: pick(['discord', 'slack']) };
        if (rand(3) === 0) match.accountId = pick(['*', 'a1', 'A2', '']);
        if (rand(3) === 0) match.peer = { kind: pick(['direct', 'group', 'channel', 'dm']), id: pick(['p1', 'P2', '*']) };
        if (rand(3) === 0) match.guildId = pick(['g1', 'g2']);
        if (rand(4) === 0) match.teamId = pick(['t1', 't2']);
        if (rand(3) === 0) match.roles = rand(2) ? [pick(['r1', 'r2'])] : [];
        return { agentId: pick(['main', 'work', 'home', 'ops']), match };
      });
      const raw: Record<string, unknown> = { channel: pick(['discord', 'slack']), accountId: pick([undefined, 'a1', 'a2']) };
      if (rand(2)) raw.peer = { kind: pick(['direct', 'group', 'channel']), id: pick(['p1', 'P2', 'p3']) };
      if (rand(3) === 0) raw.parentPeer = { kind: pick(['group', 'channel']), id: pick(['p1', 'P2']) };
      if (rand(2)) raw.guildId = pick(['g1', 'g2']);
      if (rand(3) === 0) raw.teamId = pick(['t1', 't2']);
      if (rand(2)) raw.memberRoleIds = [pick(['r1', 'r2', 'r3'])];
      route({ agents, bindings } as SwitchboardConfig, raw);
    }
  });

  test('agrees with the indexed resolver when one id is bound on many accounts (crowded chains)', () => {
    let seed = 11;
    const rand = (n: number) => {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      return seed % n;
    };
    const pick = <T>(items: T[]) => items[rand(items.length)];
    const accounts = ['*', 'a1', 'a2', 'a3', 'a4', 'a5', 'a6', 'a7'];
    for (let round = 0; round < 60; round++) {
      // 40 to 120 bindings over two ids: every chain holds far more than a handful of accounts.
      const bindings = Array.from({ length: 40 + rand(80) }, () => {
        const match: Record<string, unknown> = { channel: 'discord', accountId: pick(accounts) };
        const kind = rand(4);
        if (kind === 0) match.peer = { kind: pick(['direct', 'group']), id: pick(['p1', '*']) };
        if (kind === 1) match.guildId = 'g1';
        if (kind === 2) match.teamId = 't1';
        if (rand(3) === 0) match.roles = [pick(['r1', 'r2'])];
        return { agentId: pick(['main', 'work', 'home', 'ops']), match };
      });
      const table = compileRoutingTable({ agents, bindings } as SwitchboardConfig);
      for (let i = 0; i < 20; i++) {
        const raw: Record<string, unknown> = { channel: 'discord', accountId: pick([undefined, 'a1', 'a4', 'a7', 'a9']) };
        if (rand(2)) raw.peer = { kind: pick(['direct', 'group']), id: pick(['p1', 'p2']) };
        if (rand(3) === 0) raw.parentPeer = { kind: 'group', id: 'p1' };
        if (rand(2)) raw.guildId = 'g1';
        if (rand(2)) raw.teamId = 't1';
        if (rand(2)) raw.memberRoleIds = [pick(['r1', 'r2'])];
        const input = normalizeRouteInput(raw);
        const resolved = resolveRoute(table, input);
        const explained = explainRoute(table, input);
        assert.equal(resolved.binding?.index, explained.binding?.index, JSON.stringify(raw));
        assert.deepEqual(resolved.route, explained.route);
      }
    }
  });
});

// Rules that a plausible wrong implementation would break while every other test still passed:
// each test here was checked red against that wrong implementation (issue 11, "Must show").
describe('pinned precedence and identity-link rules', () => {
  test('the parent tier is tried before the wildcard tier, whatever the config order', () => {
    const config: SwitchboardConfig = {
      agents,
      bindings: [
        // The wildcard comes first in config order, so only tier order can put the parent first.
        { agentId: 'ops', match: { channel: 'discord', peer: { kind: 'channel', id: '*' } } },
        { agentId: 'home', match: { channel: 'discord', peer: { kind: 'channel', id: 'book-club' } } },
      ],
    };
    const thread = route(config, { channel: 'discord', peer: 'channel:thread-1', parentPeer: 'channel:book-club' });
    assert.equal(thread.route.agentId, 'home');
    assert.equal(thread.route.matchedBy, 'binding.peer.parent');
    // Without a parent the wildcard still catches the thread.
    assert.equal(route(config, { channel: 'discord', peer: 'channel:thread-1' }).route.matchedBy, 'binding.peer.wildcard');
  });

  const dm = (identityLinks: Record<string, string[]>): SwitchboardConfig => ({ agents, session: { dmScope: 'per-peer', identityLinks } });

  test('a bare entry earlier in walk order beats a channel-scoped entry: walk order decides, not specificity', () => {
    const bareFirst = route(dm({ bob: ['123'], alice: ['telegram:123'] }), { channel: 'telegram', peer: 'direct:123' });
    assert.equal(bareFirst.route.sessionKey, 'agent:main:direct:bob');
    assert.deepEqual(bareFirst.derivation.identityLink, { canonical: 'bob', entry: '123' });
    // The same two entries inside one name's list: the first listed wins.
    const inOneList = route(dm({ carol: ['123', 'telegram:123'] }), { channel: 'telegram', peer: 'direct:123' });
    assert.deepEqual(inOneList.derivation.identityLink, { canonical: 'carol', entry: '123' });
    const scopedFirst = route(dm({ alice: ['telegram:123'], bob: ['123'] }), { channel: 'telegram', peer: 'direct:123' });
    assert.equal(scopedFirst.route.sessionKey, 'agent:main:direct:alice');
    // On another channel only the bare entry applies.
    assert.equal(route(dm({ alice: ['telegram:123'], bob: ['123'] }), { channel: 'slack', peer: 'direct:123' }).route.sessionKey, 'agent:main:direct:bob');
  });

  test('a channel-scoped entry matches wherever its colons split it, and only there', () => {
    const links = { bob: ['a:b:123'] };
    assert.equal(route(dm(links), { channel: 'a:b', peer: 'direct:123' }).route.sessionKey, 'agent:main:direct:bob');
    assert.equal(route(dm(links), { channel: 'A', peer: 'direct:B:123' }).route.sessionKey, 'agent:main:direct:bob');
    assert.equal(route(dm(links), { channel: 'a', peer: 'direct:123' }).route.sessionKey, 'agent:main:direct:123');
    assert.equal(route(dm(links), { channel: 'b', peer: 'direct:a:123' }).route.sessionKey, 'agent:main:direct:a:123');
  });

  test('bare identity entries match whatever the case of the peer id or the entry', () => {
    assert.equal(route(dm({ alice: ['U9abc'] }), { channel: 'slack', peer: 'direct:U9ABC' }).route.sessionKey, 'agent:main:direct:alice');
    assert.equal(route(dm({ alice: ['u9abc'] }), { channel: 'slack', peer: 'direct:U9Abc' }).route.sessionKey, 'agent:main:direct:alice');
    assert.equal(route(dm({ alice: ['SLACK:U9abc'] }), { channel: 'slack', peer: 'direct:u9ABC' }).route.sessionKey, 'agent:main:direct:alice');
    // Linking is exact apart from case: a different id stays itself.
    assert.equal(route(dm({ alice: ['U9abc'] }), { channel: 'slack', peer: 'direct:U9abd' }).route.sessionKey, 'agent:main:direct:u9abd');
  });
});

describe('telegram forum topics (issue 12, item 3)', () => {
  test('a topic is its own peer <chatId>:topic:<threadId> under its group: OpenClaw’s key, and a group binding still applies', () => {
    const config: SwitchboardConfig = {
      agents: { list: [{ id: 'main', default: true }, { id: 'club' }] },
      bindings: [{ agentId: 'club', match: { channel: 'telegram', peer: { kind: 'group', id: '-100888' } } }],
    };
    const topic = route(config, { channel: 'telegram', peer: 'group:-100888', threadId: '42' }).route;
    assert.equal(topic.sessionKey, 'agent:club:telegram:group:-100888:topic:42');
    assert.equal(topic.agentId, 'club');
    assert.equal(topic.matchedBy, 'binding.peer.parent');
    // The group itself, and threads of other channels, are unchanged.
    assert.equal(route(config, { channel: 'telegram', peer: 'group:-100888' }).route.sessionKey, 'agent:club:telegram:group:-100888');
    assert.equal(route(config, { channel: 'discord', peer: 'channel:c1', threadId: 'T9' }).route.sessionKey, 'agent:main:discord:channel:c1:thread:t9');
    // A binding on the topic itself is the exact peer tier.
    const exact = route({ ...config, bindings: [{ agentId: 'club', match: { channel: 'telegram', peer: { kind: 'group', id: '-100888:topic:42' } } }] }, { channel: 'telegram', peer: 'group:-100888', threadId: '42' }).route;
    assert.equal(exact.matchedBy, 'binding.peer');
  });
});

describe('acp bindings', () => {
  test('never route, with agents.list as with agents.entries (OpenClaw 2026.7.1 leaves them out of its route bindings too)', () => {
    const acp = { type: 'acp', agentId: 'work', match: { channel: 'discord', peer: { kind: 'channel', id: 'c5' } }, acp: { mode: 'persistent' } } as const;
    const list = route({ agents, bindings: [acp as never] }, { channel: 'discord', peer: { kind: 'channel', id: 'c5' } });
    assert.equal(list.route.agentId, 'main');
    assert.equal(list.route.matchedBy, 'default');
    const entries = route(
      { agents: { ownership: 'explicit', defaults: { systemAgent: { agentId: 'main' } }, entries: { main: {}, work: {} } }, bindings: [acp as never] },
      { channel: 'discord', peer: { kind: 'channel', id: 'c5' } },
    );
    assert.equal(entries.route.matchedBy, 'default');
  });
});

describe('agents.list with keys of the current format', () => {
  test('routes by agents.list rules and warns that OpenClaw 2026.9.6 would route the file by the agents.entries rules', () => {
    const config = { agents: { list: [{ id: 'main' }, { id: 'work' }], ownership: 'explicit', defaults: { systemAgent: { agentId: 'work' } } } } as unknown as SwitchboardConfig;
    const table = compileRoutingTable(config);
    assert.equal(table.generation, 'list');
    assert.equal(resolveRoute(table, normalizeRouteInput({ channel: 'slack' })).route.agentId, 'main');
    assert.ok(table.warnings.some((w) => w.startsWith('agents.ownership, agents.defaults.systemAgent belong to the agents.entries format and are ignored with agents.list')), table.warnings.join('\n'));
    assert.ok(!compileRoutingTable({ agents: { list: [{ id: 'main' }] } }).warnings.some((w) => w.includes('agents.entries format')));
  });
});
