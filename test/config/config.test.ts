// Config loading through the real CLI: locations, JSON5, schema errors with JSON paths and
// exit 78, unknown keys as warnings, and `config show` sources.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import { jsonLines, runCli, tempDir, writeJson } from '../helpers.js';
import { jsonPathOf } from '../../src/config/index.js';

function errorOf(stderr: string): { code: string; message: string } {
  return JSON.parse(stderr.trim().split('\n').pop()!).error;
}

describe('config validate', () => {
  test('a schema error names the JSON path and exits 78', async () => {
    const dir = tempDir();
    const file = writeJson(path.join(dir, 'c.json'), { bindings: [{ agentId: 'main', match: { channel: 'x' } }, { agentId: 'main', match: { channel: 7 } }] });
    const r = await runCli(['config', 'validate', '--config', file, '--json']);
    assert.equal(r.code, 78);
    const error = errorOf(r.stderr);
    assert.equal(error.code, 'CONFIG_INVALID');
    assert.match(error.message, /bindings\[1\]\.match\.channel/);
  });

  test('a wrong enum value and a missing required field are reported with paths', async () => {
    const dir = tempDir();
    const file = writeJson(path.join(dir, 'c.json'), { session: { dmScope: 'per-user' }, agents: { list: [{ name: 'x' }] } });
    const r = await runCli(['config', 'validate', '--config', file]);
    assert.equal(r.code, 78);
    assert.match(r.stderr, /session\.dmScope/);
    assert.match(r.stderr, /agents\.list\[0\]\.id/);
  });

  test('a messages.queue value that does not normalise is a warning (exit 0) in validate and doctor', async () => {
    const dir = tempDir();
    const file = writeJson(path.join(dir, 'c.json'), { messages: { queue: { mode: 'stear', byChannel: { slack: 'collect', telegram: 'later' } } } });
    const r = await runCli(['config', 'validate', '--config', file, '--json']);
    assert.equal(r.code, 0, r.stderr);
    const { warnings } = jsonLines(r.stdout)[0];
    assert.deepEqual(warnings.map((w: string) => w.split(':')[0]), ['messages.queue.mode', 'messages.queue.byChannel.telegram']);
    const doctor = await runCli(['doctor', '--config', file, '--state-dir', dir, '--json']);
    assert.equal(doctor.code, 0, doctor.stderr);
    assert.deepEqual(jsonLines(doctor.stdout)[0].config.warnings, warnings);
  });

  test('Infinity, NaN and 1e400 are no value for a number setting: CONFIG_INVALID naming each path', async () => {
    const dir = tempDir();
    const json5 = path.join(dir, 'c.json5');
    fs.writeFileSync(json5, '{ messages: { queue: { debounceMs: Infinity, cap: NaN } }, agents: { defaults: { maxConcurrent: Infinity } } }\n');
    const r = await runCli(['config', 'validate', '--config', json5]);
    assert.equal(r.code, 78, r.stderr);
    for (const at of ['messages.queue.debounceMs', 'messages.queue.cap', 'agents.defaults.maxConcurrent']) assert.match(r.stderr, new RegExp(`${at.replaceAll('.', '\\.')}: must be a finite`));
    // JSON itself has no Infinity, but JSON.parse reads an out-of-range literal as one.
    const json = path.join(dir, 'c.json');
    fs.writeFileSync(json, '{"messages":{"queue":{"debounceMs":1e400}}}\n');
    const big = await runCli(['config', 'validate', '--config', json, '--json']);
    assert.equal(big.code, 78, big.stderr);
    assert.match(errorOf(big.stderr).message, /messages\.queue\.debounceMs: must be a finite number/);
  });

  test('a JSON5 syntax error names the line and exits 78', async () => {
    const dir = tempDir();
    const file = path.join(dir, 'c.json5');
    fs.writeFileSync(file, '{\n  // comment\n  session: { dmScope: "per-peer", },\n  bindings: [ oops ]\n}\n');
    const r = await runCli(['config', 'validate', '--config', file, '--json']);
    assert.equal(r.code, 78);
    assert.match(errorOf(r.stderr).message, /c\.json5:4:/);
  });

  test('JSON5 with comments and trailing commas is accepted', async () => {
    const dir = tempDir();
    const file = path.join(dir, 'c.json5');
    fs.writeFileSync(file, '{\n  // mine\n  session: { dmScope: "per-peer", },\n}\n');
    const r = await runCli(['config', 'validate', '--config', file, '--json']);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(jsonLines(r.stdout)[0].ok, true);
  });

  test('a binding to an unknown agent is an error naming the binding and the known agents', async () => {
    const dir = tempDir();
    const file = writeJson(path.join(dir, 'c.json'), { agents: { list: [{ id: 'home' }] }, bindings: [{ agentId: 'work', match: { channel: 'x' } }] });
    const r = await runCli(['route', 'resolve', '--channel', 'x', '--config', file, '--json']);
    assert.equal(r.code, 78);
    const error = errorOf(r.stderr);
    assert.equal(error.code, 'CONFIG_INVALID');
    assert.match(error.message, /bindings\[0\]\.agentId/);
    assert.match(error.message, /home/);
  });

  test('unknown keys (an OpenClaw config has many) are warnings, not errors', async () => {
    const dir = tempDir();
    const file = writeJson(path.join(dir, 'openclaw.json'), { gateway: { port: 1 }, session: { dmScope: 'per-peer', typingIntervalSeconds: 5 } });
    const r = await runCli(['config', 'validate', '--config', file, '--json']);
    assert.equal(r.code, 0, r.stderr);
    const out = jsonLines(r.stdout)[0];
    // One grouped warning, the keys themselves as data.
    assert.deepEqual(out.warnings, ['2 keys not used by switchboard (ignored): gateway, session.typingIntervalSeconds']);
    assert.deepEqual(out.unusedKeys, ['gateway', 'session.typingIntervalSeconds']);
  });

  test('unknown keys are a warning on stderr in text mode, and -q silences it (exit 0 either way)', async () => {
    const dir = tempDir();
    const file = writeJson(path.join(dir, 'openclaw.json'), { gateway: { port: 1 } });
    const loud = await runCli(['config', 'validate', '--config', file, '--state-dir', dir]);
    assert.equal(loud.code, 0, loud.stderr);
    assert.match(loud.stderr, /warning: .*gateway/);
    for (const quiet of ['-q', '--quiet']) {
      const r = await runCli(['config', 'validate', '--config', file, '--state-dir', dir, quiet]);
      assert.equal(r.code, 0, r.stderr);
      assert.equal(r.stderr, '', quiet);
      assert.match(r.stdout, /^ok: /);
    }
  });

  test('a missing --config file is NOT_FOUND (66)', async () => {
    const r = await runCli(['config', 'validate', '--config', '/nonexistent/x.json5', '--json']);
    assert.equal(r.code, 66);
    assert.equal(errorOf(r.stderr).code, 'NOT_FOUND');
  });
});

describe('config location', () => {
  test('<state>/openclaw.json is used when there is no switchboard.json5; switchboard.json5 wins', async () => {
    const state = tempDir();
    writeJson(path.join(state, 'openclaw.json'), { agents: { list: [{ id: 'claw' }] } });
    let r = await runCli(['route', 'resolve', '--channel', 'x', '--json'], { env: { SWITCHBOARD_STATE_DIR: state } });
    assert.equal(jsonLines(r.stdout)[0].agentId, 'claw');
    fs.writeFileSync(path.join(state, 'switchboard.json5'), '{agents: {list: [{id: "own"}]}}');
    r = await runCli(['route', 'resolve', '--channel', 'x', '--json', '--state-dir', state]);
    assert.equal(jsonLines(r.stdout)[0].agentId, 'own');
    const elsewhere = writeJson(path.join(tempDir(), 'c.json'), { agents: { list: [{ id: 'env' }] } });
    r = await runCli(['route', 'resolve', '--channel', 'x', '--json', '--state-dir', state], { env: { SWITCHBOARD_CONFIG: elsewhere } });
    assert.equal(jsonLines(r.stdout)[0].agentId, 'env');
  });

  test('no config at all works with agent main', async () => {
    const r = await runCli(['route', 'resolve', '--channel', 'x', '--json', '--state-dir', tempDir()]);
    assert.equal(r.code, 0);
    assert.equal(jsonLines(r.stdout)[0].agentId, 'main');
  });
});

describe('config show', () => {
  test('marks each value as coming from the file or the defaults', async () => {
    const dir = tempDir();
    const file = writeJson(path.join(dir, 'c.json'), { session: { dmScope: 'per-peer' } });
    const r = await runCli(['config', 'show', '--config', file, '--json']);
    assert.equal(r.code, 0, r.stderr);
    const shown = jsonLines(r.stdout)[0];
    const byPath = Object.fromEntries(shown.values.map((v: { path: string }) => [v.path, v]));
    assert.deepEqual(byPath['session.dmScope'], { path: 'session.dmScope', value: 'per-peer', source: 'file' });
    assert.deepEqual(byPath['messages.queue.mode'], { path: 'messages.queue.mode', value: 'steer', source: 'default' });
    assert.equal(shown.path, file);
  });
});

test('jsonPathOf renders instance paths the way messages show them', () => {
  assert.equal(jsonPathOf('/bindings/3/match/channel'), 'bindings[3].match.channel');
  assert.equal(jsonPathOf('/session/identityLinks/a b'), 'session.identityLinks["a b"]');
  assert.equal(jsonPathOf(''), '$');
  assert.equal(jsonPathOf('/agents/list/0', 'id'), 'agents.list[0].id');
});

describe('config validate rejects what any command would reject', () => {
  test('time zones, durations, sizes and runner specs are all listed, each as file:line:column and path', async () => {
    const dir = tempDir();
    const file = path.join(dir, 'switchboard.json5');
    fs.writeFileSync(
      file,
      [
        '{',
        '  // a JSON5 file with comments',
        '  agents: { defaults: { runner: { command: "builtin:nope" } } },',
        '  session: {',
        '    reset: { mode: "daily", timezone: "Mars/Olympus" },',
        '    maintenance: { pruneAfter: "30 fortnights", rotateBytes: "ten" },',
        '  },',
        '  cron: { sessionRetention: "forever" },',
        '}',
        '',
      ].join('\n'),
    );
    const r = await runCli(['config', 'validate', '--json', '--config', file, '--state-dir', dir]);
    assert.equal(r.code, 78, r.stdout + r.stderr);
    const { code, message } = errorOf(r.stderr);
    assert.equal(code, 'CONFIG_INVALID');
    for (const expected of [
      `${file}:5:29: session.reset.timezone:`,
      `${file}:6:20: session.maintenance.pruneAfter:`,
      `${file}:6:49: session.maintenance.rotateBytes:`,
      `${file}:8:11: cron.sessionRetention:`,
      `${file}:3:35: agents.defaults.runner.command:`,
    ]) {
      assert.ok(message.includes(expected), `missing ${expected} in:\n${message}`);
    }
    // The same file is refused by a command that uses the reset policy.
    const explain = await runCli(['route', 'explain', '--channel', 'x', '--config', file, '--state-dir', dir]);
    assert.equal(explain.code, 78);
  });

  test('a bad setting is refused, at its place in the file, by every command that works on the store — before it acts', async () => {
    const dir = tempDir();
    const file = path.join(dir, 'switchboard.json5');
    // enforce mode with a typo in one size: ingest used to switch the caps off without a word.
    fs.writeFileSync(file, '{\n  session: {\n    maintenance: { mode: "enforce", maxEntries: 2, pruneAfter: "abc" },\n  },\n}\n');
    const where = `${file}:3:52: session.maintenance.pruneAfter: "abc" is not a duration`;
    for (const args of [['sessions', 'cleanup', '--dry-run'], ['maintain'], ['doctor'], ['sessions'], ['ingest']]) {
      const r = await runCli([...args, '--json', '--config', file, '--state-dir', dir], { input: `${JSON.stringify({ channel: 'telegram', peer: 'direct:1', text: 'hi' })}\n` });
      assert.equal(r.code, 78, `${args.join(' ')}: ${r.stdout}${r.stderr}`);
      assert.equal(errorOf(r.stderr).message, where, args.join(' '));
    }
    assert.ok(!fs.existsSync(path.join(dir, 'agents')), 'nothing was stored');
  });

  test('doctor checks the config as config validate does (a runner spec too)', async () => {
    const dir = tempDir();
    const file = writeJson(path.join(dir, 'c.json'), { agents: { defaults: { runner: { command: 'builtin:nope' } } }, cron: { sessionRetention: 'forever' } });
    const validate = await runCli(['config', 'validate', '--json', '--config', file, '--state-dir', dir]);
    const doctor = await runCli(['doctor', '--json', '--config', file, '--state-dir', dir]);
    assert.equal(validate.code, 78);
    assert.equal(doctor.code, 78, doctor.stdout);
    assert.equal(errorOf(doctor.stderr).message, errorOf(validate.stderr).message);
  });

  test('a config nested past the depth cap, or a base of extends that is not an object, is CONFIG_INVALID naming the file (and line:column of the first value past the cap)', async () => {
    const dir = tempDir();
    const deep = path.join(dir, 'deep.json');
    fs.writeFileSync(deep, `{"channels":${'{"a":'.repeat(5000)}1${'}'.repeat(5000)}}`);
    const top = path.join(dir, 'top.json5');
    fs.writeFileSync(top, '{ extends: "./deep.json" }');
    for (const config of [deep, top]) {
      for (const args of [['config', 'show'], ['route', 'resolve', '--channel', 'x']]) {
        const r = await runCli([...args, '--json', '--config', config, '--state-dir', dir]);
        assert.equal(r.code, 78, `${config} ${args.join(' ')}: ${r.stderr}`);
        // `{"channels":` then `{"a":` per level: the key of the value at level 129 is the 127th "a".
        assert.equal(errorOf(r.stderr).message, `${deep}:1:${14 + 5 * 126}: values are nested more than 128 levels deep`);
      }
    }
    const json5 = path.join(dir, 'deep.json5');
    fs.writeFileSync(json5, `{\n  // arrays this time\n  session: {x: ${'['.repeat(300)}1${']'.repeat(300)}}\n}\n`);
    const r5 = await runCli(['config', 'validate', '--json', '--config', json5, '--state-dir', dir]);
    assert.equal(r5.code, 78);
    assert.equal(errorOf(r5.stderr).message, `${json5}:3:${16 + 126}: values are nested more than 128 levels deep`);
    const base = path.join(dir, 'null.json');
    fs.writeFileSync(base, 'null');
    fs.writeFileSync(top, '{ extends: "./null.json" }');
    const r = await runCli(['config', 'validate', '--json', '--config', top, '--state-dir', dir]);
    assert.equal(r.code, 78, r.stderr);
    assert.match(errorOf(r.stderr).message, /null\.json: must hold an object \(it is null\)/);
  });

  test('agent ids that collide or are marked default twice are warnings; a reserved word is an agent id like any other', async () => {
    const dir = tempDir();
    const file = writeJson(path.join(dir, 'c.json'), {
      agents: { list: [{ id: 'constructor' }, { id: 'b' }, { id: 'B ', default: true }, { id: 'c', default: true }] },
      bindings: [{ agentId: 'constructor', match: { channel: 'telegram' } }],
    });
    const r = await runCli(['config', 'validate', '--json', '--config', file, '--state-dir', dir]);
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(JSON.parse(r.stdout).warnings, [
      'agents.list[1] and agents.list[2] are both agent "b" (ids are compared lower-cased and cleaned): they are one agent',
      'several agents are marked default: true (b, c): "b" (the first) is used',
    ]);
    // A peer under two identity names goes to the first: said, too.
    const links = writeJson(path.join(dir, 'links.json'), { session: { dmScope: 'per-peer', identityLinks: { alice: ['telegram:1'], bob: ['Telegram:1', 'slack:u2'] } } });
    const linked = await runCli(['config', 'validate', '--json', '--config', links, '--state-dir', dir]);
    assert.deepEqual(JSON.parse(linked.stdout).warnings, ['session.identityLinks: "telegram:1" is listed under "alice" and "bob"; "alice" (the first) is used']);
  });

  test('schema problems name the line and column of the offending key', async () => {
    const dir = tempDir();
    const file = path.join(dir, 'c.json5');
    fs.writeFileSync(file, '{\n  bindings: [\n    { agentId: "main", match: { channel: "discord", guild: "g1" } },\n  ],\n}\n');
    const r = await runCli(['config', 'validate', '--json', '--config', file, '--state-dir', dir]);
    assert.equal(r.code, 78);
    assert.equal(errorOf(r.stderr).message, `${file}:3:53: bindings[0].match.guild: unknown key`);
  });

  test('positions follow what the parser kept: the last of two equal keys, and keys spelled with escapes', async () => {
    const dir = tempDir();
    const cases: [string, string, string][] = [
      // JSON.parse and JSON5 keep the last value of a repeated key: that is the one at fault.
      ['dup.json5', '{\n  session: {dmScope: "main"},\n  x: 1,\n  session: {dmScope: 5},\n}\n', ':4:13: session.dmScope:'],
      ['dup-deep.json5', `{\n  a: ${'['.repeat(127)}1${']'.repeat(127)},\n  a: ${'['.repeat(127)}{}${']'.repeat(127)},\n}\n`, `:3:${6 + 127}: values are nested more than 128 levels deep`],
      // A \x escape in a quoted key, a \u escape in an unquoted one (the value past the cap is the
      // 128th bracket: the file's own object is level 1).
      ['hex.json5', `{\n  'k\\x41': ${'['.repeat(200)}${']'.repeat(200)},\n}\n`, `:2:${12 + 127}: values are nested more than 128 levels deep`],
      ['ident.json5', `{\n  \\u0041bc: ${'['.repeat(200)}${']'.repeat(200)},\n}\n`, `:2:${13 + 127}: values are nested more than 128 levels deep`],
    ];
    for (const [name, text, expected] of cases) {
      const file = path.join(dir, name);
      fs.writeFileSync(file, text);
      const r = await runCli(['config', 'validate', '--json', '--config', file, '--state-dir', dir]);
      assert.equal(r.code, 78, `${name}: ${r.stderr}`);
      assert.ok(errorOf(r.stderr).message.includes(`${file}${expected}`), `${name}: ${errorOf(r.stderr).message}`);
    }
  });

  test('an extends naming a file with a NUL character is CONFIG_INVALID (78), not an I/O error', async () => {
    const dir = tempDir();
    const file = path.join(dir, 'c.json5');
    fs.writeFileSync(file, "{ extends: 'a\\u0000b.json' }");
    const r = await runCli(['config', 'validate', '--json', '--config', file, '--state-dir', dir]);
    assert.equal(r.code, 78, r.stderr);
    assert.equal(errorOf(r.stderr).message, `${file}: extends: a file name cannot contain a NUL character`);
  });

  test('a config every command accepts validates with exit 0', async () => {
    const dir = tempDir();
    const file = writeJson(path.join(dir, 'c.json'), {
      agents: { defaults: { runner: { command: 'builtin:echo' } } },
      session: { reset: { mode: 'daily', timezone: 'Europe/Berlin' }, maintenance: { pruneAfter: '30d', rotateBytes: '10mb' } },
      cron: { sessionRetention: '24h' },
    });
    const r = await runCli(['config', 'validate', '--config', file, '--state-dir', dir]);
    assert.equal(r.code, 0, r.stderr);
  });
});
