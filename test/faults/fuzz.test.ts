// Bad input fuzzing (quality.md "Bad input"): thousands of generated bad message lines and
// configs. Nothing crashes, every bad thing gets the documented code, and the store is untouched.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { isSwitchboardError } from '../../src/core/index.js';
import { parseConfigText } from '../../src/config/index.js';
import { validateResetConfig } from '../../src/policy/index.js';
import { compileRoutingTable } from '../../src/routing/index.js';
import { jsonLines, runCli, tempDir } from '../helpers.js';

function rng(seed: number): (n: number) => number {
  let s = seed >>> 0;
  return (n) => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s % n;
  };
}

const WRONG_VALUES: unknown[] = [null, 0, -1, 1.5, true, [], {}, [1], { x: 1 }, '', ' ', '\u0000', 'x'.repeat(300)];

/** A message line that is invalid in one of many ways (never accidentally valid). */
function badLine(rand: (n: number) => number): string | Buffer {
  const valid: Record<string, unknown> = { channel: 'telegram', peer: { kind: 'direct', id: '1' }, text: 'hi' };
  const pick = <T>(items: readonly T[]) => items[rand(items.length)];
  switch (rand(12)) {
    case 0:
      return JSON.stringify(valid).slice(0, 1 + rand(30)); // truncated JSON
    case 1:
      return pick(['nope', '[]', '42', 'null', '"str"', 'true', '{', '}', '{"channel":}']);
    case 2:
      return JSON.stringify({ ...valid, channel: pick([null, 5, true, [], {}, '', '   ']) });
    case 3:
      return JSON.stringify({ ...valid, kind: pick(['shout', 'USER ', 5, null === null ? 'bot' : 'x', []]) });
    case 4:
      return JSON.stringify({ ...valid, peer: pick([5, true, [], 'nocolon', { kind: 'room', id: '1' }, { kind: 7, id: '1' }, { id: '1' }]) });
    case 5:
      return JSON.stringify({ ...valid, text: pick([undefined, '', '   ', 5, {}, []]) });
    case 6:
      return JSON.stringify({ ...valid, memberRoleIds: pick(['r1', 5, {}, [{}], [[1]]]) });
    case 7:
      return JSON.stringify({ ...valid, timestamp: pick(['yesterday', -5, {}, 'not-a-date', '2026-13-45T99:99:99Z']) });
    case 8:
      return JSON.stringify({ ...valid, sender: pick([5, 'alice', [], { id: {} }, { name: [] }]) });
    case 9:
      return JSON.stringify({ ...valid, cron: pick([5, 'job', [], {}, { jobId: '' }, { jobId: {} }]) });
    case 10:
      return Buffer.from([0x7b, 0x22, 0x63, 0xff, 0xfe, 0x22, 0x7d]); // invalid UTF-8
    default:
      return JSON.stringify({ ...valid, runId: pick(['', ' bad id ', '../../x', 'a'.repeat(200), {}, 5.5]), incognito: pick(['yes', 1, {}]) });
  }
}

test('10 000 generated bad lines: one BAD_MESSAGE event each, exit 65, nothing written', async () => {
  const rand = rng(20261130);
  const parts: Buffer[] = [];
  for (let i = 0; i < 10_000; i++) {
    const line = badLine(rand);
    parts.push(typeof line === 'string' ? Buffer.from(line) : line, Buffer.from('\n'));
  }
  const state = tempDir();
  const r = await runCli(['ingest', '--state-dir', state], { input: Buffer.concat(parts), timeoutMs: 120_000 });
  assert.equal(r.signal, null);
  assert.equal(r.code, 65, r.stderr);
  const events = jsonLines(r.stdout);
  assert.equal(events.length, 10_000);
  events.forEach((event, i) => {
    assert.equal(event.type, 'error', `line ${i + 1} is rejected`);
    assert.equal(event.line, i + 1);
    assert.equal(event.code, 'BAD_MESSAGE');
  });
  assert.equal(fs.existsSync(path.join(state, 'agents')), false, 'the store is untouched');
});

/** A config that is wrong in one of many ways: wrong types at known paths, or broken references. */
function badConfig(rand: (n: number) => number): unknown {
  const pick = <T>(items: readonly T[]) => items[rand(items.length)];
  const wrong = () => pick(WRONG_VALUES);
  const base = () => ({ agents: { list: [{ id: 'main', default: true }] }, bindings: [{ agentId: 'main', match: { channel: 'x' } }], session: {} as Record<string, unknown> });
  const config = base() as Record<string, any>;
  switch (rand(10)) {
    case 0:
      return wrong();
    case 1:
      config.agents = pick([wrong(), { list: wrong() }, { list: [wrong()] }, { list: [{ id: wrong() }] }]);
      return config;
    case 2:
      config.bindings = pick([wrong(), [wrong()], [{ agentId: wrong(), match: { channel: 'x' } }], [{ agentId: 'main', match: wrong() }], [{ agentId: 'ghost', match: { channel: 'x' } }]]);
      return config;
    case 3:
      config.bindings[0].match = { channel: 'x', peer: pick([wrong(), { kind: 'room', id: '1' }, { kind: wrong(), id: '1' }]) };
      return config;
    case 4:
      config.session.dmScope = pick(['per-user', 'Main', 5, null, []]);
      return config;
    case 5:
      config.session.reset = pick([wrong(), { mode: pick(['weekly', 5, '']) }, { atHour: pick([24, -1, 'four', 99]) }, { idleMinutes: pick([-5, 'ten', {}]) }, { timezone: pick(['Mars/Olympus', 5, '']) }]);
      return config;
    case 6:
      config.session.identityLinks = pick([wrong(), { alice: wrong() }, { alice: [5] }]);
      return config;
    case 7:
      config.session.writeLock = { acquireTimeoutMs: pick([-1, 'soon', 1.5]), staleMs: pick([5, 'x', -3]) };
      return config;
    case 8:
      config.session.resetTriggers = pick([wrong(), [5], ['two words'], ['']]);
      return config;
    default:
      config.messages = { queue: pick([wrong(), { cap: pick([0, -1, 'many', 1.5]) }, { debounceMs: pick([-5, 'x', {}]) }]) };
      return config;
  }
}

test('10 000 generated bad configs: CONFIG_INVALID with a path, never a crash', async () => {
  const rand = rng(78);
  let rejected = 0;
  for (let i = 0; i < 10_000; i++) {
    const config = badConfig(rand);
    try {
      // The same steps every command takes when it loads a config.
      const parsed = await parseConfigText(JSON.stringify(config) ?? 'null', `fuzz-${i}.json`);
      compileRoutingTable(parsed);
      validateResetConfig(parsed.session);
    } catch (err) {
      assert.ok(isSwitchboardError(err), `config ${i} failed with a SwitchboardError, not ${String(err)}`);
      assert.equal(err.code, 'CONFIG_INVALID', `config ${i}: ${err.message}`);
      assert.equal(err.exitCode, 78);
      rejected++;
    }
  }
  // A few generated values are valid after all (e.g. an empty identityLinks object, or a blank
  // timezone that the schema allows); everything else must be rejected.
  assert.ok(rejected > 9_000, `rejected ${rejected} of 10 000`);
});

test('bad configs through the real CLI exit 78 and name the JSON path', async () => {
  const dir = tempDir();
  const cases: [unknown, RegExp][] = [
    [{ session: { dmScope: 'per-user' } }, /session\.dmScope/],
    [{ bindings: [{ agentId: 'main', match: { channel: 7 } }] }, /bindings\[0\]\.match\.channel/],
    [{ session: { reset: { timezone: 'Mars/Olympus' } } }, /session\.reset\.timezone/],
    [{ messages: { queue: { cap: 0 } } }, /messages\.queue\.cap/],
  ];
  for (const [i, [config, path_]] of cases.entries()) {
    const file = path.join(dir, `c${i}.json`);
    fs.writeFileSync(file, JSON.stringify(config));
    const r = await runCli(['ingest', '--config', file, '--state-dir', dir, '--json'], { input: '{"channel":"x","text":"hi"}\n' });
    assert.equal(r.code, 78, `case ${i}: ${r.stderr}`);
    const error = JSON.parse(r.stderr.trim().split('\n').pop()!).error;
    assert.equal(error.code, 'CONFIG_INVALID');
    assert.match(error.message, path_);
  }
  assert.equal(fs.existsSync(path.join(dir, 'agents')), false);
});
