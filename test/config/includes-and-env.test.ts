// `$include` and `${VAR}` in an OpenClaw config, through the real CLI: a user's openclaw.json that
// splits its bindings into files or keeps ids in the environment routes as OpenClaw routes it.
// Expected answers were checked against OpenClaw 2026.9.6's own loader and resolver (session 19).

import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import { jsonLines, runCli, tempDir } from '../helpers.js';

const ROSTER = { ownership: 'explicit', defaults: { systemAgent: { agentId: 'main' } }, entries: { main: {}, family: {}, work: {} } };

function write(dir: string, name: string, value: unknown): string {
  const file = path.join(dir, name);
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, typeof value === 'string' ? value : JSON.stringify(value, null, 2));
  return file;
}

async function routes(config: string, inputs: unknown[], env: Record<string, string | undefined> = {}) {
  const result = await runCli(['route', 'resolve', '--batch', '--config', config, '--state-dir', path.dirname(config)], {
    input: inputs.map((input) => JSON.stringify(input)).join('\n') + '\n',
    env,
  });
  return { ...result, routes: result.code === 0 ? jsonLines(result.stdout) : [] };
}

function errorOf(stderr: string): { code: string; message: string } {
  return JSON.parse(stderr.trim().split('\n').pop()!).error;
}

describe('$include', () => {
  test('one file replaces the object holding it; a list is merged in order, arrays joined; sibling keys win; nested paths are relative to their file', async () => {
    const dir = tempDir();
    write(dir, 'parts/bindings.json5', '[ { agentId: "family", match: { channel: "telegram", peer: { kind: "direct", id: "mom" } } } ]');
    write(dir, 'parts/base.json5', { bindings: [{ agentId: 'work', match: { channel: 'slack', accountId: '*' } }], session: { dmScope: 'per-peer' } });
    write(dir, 'parts/session.json5', { $include: './links.json5', dmScope: 'main' });
    write(dir, 'parts/links.json5', { identityLinks: { alice: ['discord:a1'] } });
    const config = write(dir, 'openclaw.json', {
      $include: ['./parts/base.json5'],
      agents: ROSTER,
      bindings: [{ agentId: 'family', match: { channel: 'telegram', peer: { kind: 'direct', id: 'dad' } } }],
      session: { $include: './parts/session.json5', dmScope: 'per-channel-peer' },
    });
    const { code, stderr, routes: out } = await routes(config, [
      { channel: 'slack', peer: { kind: 'channel', id: 'C1' } },
      { channel: 'telegram', peer: { kind: 'direct', id: 'dad' } },
      { channel: 'discord', peer: { kind: 'direct', id: 'a1' } },
    ]);
    assert.equal(code, 0, stderr);
    // base.json5's slack binding and the file's own telegram one are both there (arrays join).
    assert.deepEqual(out.map((r) => [r.agentId, r.matchedBy]), [['work', 'binding.channel'], ['family', 'binding.peer'], ['main', 'default']]);
    // dmScope: the sibling next to the session $include wins over session.json5's "main" (and base's "per-peer").
    assert.equal(out[1].sessionKey, 'agent:family:telegram:direct:dad');
    // links.json5, included by session.json5 from its own folder: the identity link applies.
    assert.equal(out[2].sessionKey, 'agent:main:discord:direct:alice');
    // A single file may also replace an object with an array (bindings: { $include: … }).
    const single = write(dir, 'single.json', { agents: ROSTER, bindings: { $include: './parts/bindings.json5' } });
    const second = await routes(single, [{ channel: 'telegram', peer: { kind: 'direct', id: 'mom' } }]);
    assert.equal(second.code, 0, second.stderr);
    assert.equal(second.routes[0].agentId, 'family');
  });

  test('a problem inside an included file is named at that file, line and column', async () => {
    const dir = tempDir();
    write(dir, 'bindings.json5', '[\n  { agentId: "family", match: { channel: "telegram" } },\n  { agentId: "stranger", match: { channel: "slack" } },\n]\n');
    const config = write(dir, 'openclaw.json', { agents: ROSTER, bindings: { $include: './bindings.json5' } });
    const result = await runCli(['config', 'validate', '--json', '--config', config, '--state-dir', dir]);
    assert.equal(result.code, 78, result.stderr);
    const error = errorOf(result.stderr);
    assert.equal(error.code, 'CONFIG_INVALID');
    assert.match(error.message, new RegExp(`${path.join(dir, 'bindings.json5').replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}:3:\\d+: bindings\\[1\\]\\.agentId`));
  });

  test('refused as OpenClaw refuses them, with CONFIG_INVALID (78) naming the file: outside the folder, through a link, a cycle, too deep, a missing file, a FIFO, a hard link, a non-string', async () => {
    const dir = tempDir();
    const outside = tempDir();
    write(outside, 'far.json5', { session: { dmScope: 'main' } });
    fs.symlinkSync(path.join(outside, 'far.json5'), path.join(dir, 'link.json5'));
    write(dir, 'a.json5', { $include: './b.json5' });
    write(dir, 'b.json5', { $include: './a.json5' });
    for (let i = 0; i < 12; i++) write(dir, `deep${i}.json5`, i === 11 ? {} : { $include: `./deep${i + 1}.json5` });
    write(dir, 'shared.json5', {});
    fs.linkSync(path.join(dir, 'shared.json5'), path.join(dir, 'shared-too.json5'));
    const fifo = path.join(dir, 'fifo.json5');
    const { spawnSync } = await import('node:child_process');
    assert.equal(spawnSync('mkfifo', [fifo]).status, 0);
    const cases: [string, unknown, RegExp][] = [
      ['outside', path.join(outside, 'far.json5'), /outside the config folder/],
      ['link', './link.json5', /symbolic link/],
      ['cycle', './a.json5', /makes a cycle/],
      ['deep', './deep0.json5', /more than 10 levels/],
      ['missing', './nowhere.json5', /does not exist/],
      ['fifo', './fifo.json5', /not a regular file/],
      ['hard link', './shared.json5', /hard links/],
      ['number', 5, /must be a file name or a list of file names/],
    ];
    for (const [name, include, message] of cases) {
      const config = write(dir, `openclaw-${name.replace(' ', '-')}.json`, { agents: ROSTER, $include: include });
      const result = await runCli(['config', 'validate', '--json', '--config', config, '--state-dir', dir], { timeoutMs: 20_000 });
      assert.equal(result.code, 78, `${name}: ${result.stderr}`);
      const error = errorOf(result.stderr);
      assert.equal(error.code, 'CONFIG_INVALID', name);
      assert.match(error.message, message, name);
    }
    // OPENCLAW_INCLUDE_ROOTS admits another folder, as it does for OpenClaw.
    const admitted = write(dir, 'openclaw-admitted.json', { agents: ROSTER, $include: path.join(outside, 'far.json5') });
    const ok = await runCli(['config', 'validate', '--config', admitted, '--state-dir', dir], { env: { OPENCLAW_INCLUDE_ROOTS: outside } });
    assert.equal(ok.code, 0, ok.stderr);
  });

  test('a refused $include is named at its file, line and column, with the path of the object holding it', async () => {
    const dir = tempDir();
    const esc = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
    write(dir, 'parts/session.json5', '{\n  dmScope: "main",\n  identityLinks: {\n    $include: "links.json5",\n  },\n}\n');
    write(dir, 'binding.json5', '{ agentId: "main", match: { channel: "x" } }');
    const nested = write(dir, 'nested.json', '{\n  "session": { "$include": "./parts/session.json5" }\n}\n');
    const inArray = write(dir, 'in-array.json', '{\n  "bindings": [\n    { "$include": "./binding.json5" },\n    { "$include": 7 }\n  ]\n}\n');
    const expected: [string, RegExp][] = [
      // Inside an included file: that file's position, and the path within it.
      [nested, new RegExp(`^${esc(path.join(dir, 'parts', 'session.json5'))}:4:5: identityLinks\\.\\$include: "links\\.json5" does not exist`)],
      [inArray, new RegExp(`^${esc(inArray)}:4:7: bindings\\[1\\]\\.\\$include: must be a file name`)],
    ];
    for (const [config, message] of expected) {
      const result = await runCli(['config', 'validate', '--json', '--config', config, '--state-dir', dir]);
      assert.equal(result.code, 78, result.stderr);
      assert.match(errorOf(result.stderr).message, message);
    }
  });
});

describe('${VAR} in config values', () => {
  test('replaced from the environment, then the state dir .env, then the config env section; $${VAR} is a literal; lower-case names and keys are left alone', async () => {
    const dir = tempDir();
    write(dir, '.env', '# ids kept out of the config\nexport MOM_ID="mom-from-dotenv"\nWORK_TEAM=T-from-dotenv\n');
    const config = write(dir, 'openclaw.json', {
      env: { vars: { WORK_TEAM: 'T-from-config', GUILD: 'G-from-config', LOOP: '${GUILD}' } },
      agents: ROSTER,
      bindings: [
        { agentId: 'family', match: { channel: 'telegram', peer: { kind: 'direct', id: '${MOM_ID}' } } },
        { agentId: 'work', match: { channel: 'slack', accountId: '*', teamId: '${WORK_TEAM}' } },
        { agentId: 'work', match: { channel: 'discord', guildId: 'g-${GUILD}-$${GUILD}-${lower}' } },
        { agentId: 'family', match: { channel: 'discord', guildId: '${LOOP}' } },
      ],
      session: { dmScope: 'per-peer', identityLinks: { '${MOM_ID}': ['telegram:mom-from-dotenv'] } },
    });
    const { code, stderr, routes: out } = await routes(
      config,
      [
        { channel: 'telegram', peer: { kind: 'direct', id: 'mom-from-dotenv' } },
        { channel: 'slack', teamId: 'T-from-env' },
        { channel: 'discord', guildId: 'g-G-from-config-${GUILD}-${lower}' },
        { channel: 'discord', guildId: '${LOOP}' },
      ],
      { WORK_TEAM: 'T-from-env', MOM_ID: undefined, GUILD: '' },
    );
    assert.equal(code, 0, stderr);
    assert.deepEqual(out.map((r) => [r.agentId, r.matchedBy]), [['family', 'binding.peer'], ['work', 'binding.team'], ['work', 'binding.guild'], ['family', 'binding.guild']]);
    // The identity link's canonical name is a key: never substituted.
    assert.equal(out[0].sessionKey, 'agent:family:direct:${mom_id}');
  });

  test('an unset variable stays as written, and config validate says so', async () => {
    const dir = tempDir();
    const config = write(dir, 'openclaw.json', { agents: ROSTER, bindings: [{ agentId: 'family', match: { channel: 'telegram', peer: { kind: 'direct', id: '${NOT_SET_ANYWHERE}' } } }] });
    const result = await runCli(['config', 'validate', '--json', '--config', config, '--state-dir', dir], { env: { NOT_SET_ANYWHERE: undefined } });
    assert.equal(result.code, 0, result.stderr);
    const report = JSON.parse(result.stdout);
    assert.ok(report.warnings.some((w: string) => /NOT_SET_ANYWHERE \(at bindings\[0\]\.match\.peer\.id\) is not set or empty/.test(w)), JSON.stringify(report.warnings));
    const { routes: out } = await routes(config, [{ channel: 'telegram', peer: { kind: 'direct', id: '${NOT_SET_ANYWHERE}' } }], { NOT_SET_ANYWHERE: undefined });
    assert.equal(out[0].agentId, 'family');
  });
});

describe('bounds on what an include tree or a reference may cost', () => {
  test('an include tree that fans out, values nested deep across files, and references that would grow the config past 16 Mi characters are CONFIG_INVALID (78) at once', async () => {
    const dir = tempDir();
    // Ten levels of files that each include the next eight times: 8^10 inclusions without a bound.
    for (let level = 0; level < 10; level++) write(dir, `fan${level}.json`, level === 9 ? {} : { $include: Array.from({ length: 8 }, () => `./fan${level + 1}.json`) });
    // 120 levels in each of two files: each within the cap of 128, together past it.
    const deep = (levels: number, inner: unknown): unknown => (levels === 0 ? inner : { a: deep(levels - 1, inner) });
    write(dir, 'deep2.json', deep(120, 1));
    write(dir, 'deep1.json', deep(120, { $include: './deep2.json' }));
    const big = 'x'.repeat(1024 * 1024);
    const cases: [string, Record<string, unknown>, RegExp][] = [
      ['fan-out', { agents: ROSTER, $include: './fan0.json' }, /more than 256 files are included in all/],
      ['deep', { agents: ROSTER, notes: { $include: './deep1.json' } }, /nested more than 128 levels deep/],
      ['references', { agents: ROSTER, env: { vars: { BIG: big } }, notes: { x: '${BIG}'.repeat(20) } }, /openclaw-references\.json: notes\.x: \$\{BIG\} and the other references make the config more than 16777216 characters longer/],
    ];
    for (const [name, value, message] of cases) {
      const config = write(dir, `openclaw-${name}.json`, value);
      const started = Date.now();
      const result = await runCli(['config', 'validate', '--json', '--config', config, '--state-dir', dir], { timeoutMs: 30_000 });
      assert.equal(result.code, 78, `${name}: ${result.stderr.slice(0, 500)}`);
      assert.match(errorOf(result.stderr).message, message, name);
      assert.ok(Date.now() - started < 25_000, `${name} was refused, not worked through`);
    }
  });

  test('a name starting with ".." inside the folder is inside; a missing file behind a linked folder is "does not exist"', async () => {
    const real = tempDir();
    write(real, '..bindings.json', [{ agentId: 'work', match: { channel: 'slack', accountId: '*' } }]);
    const linked = path.join(tempDir(), 'linked');
    fs.symlinkSync(real, linked);
    write(real, 'openclaw.json', { agents: ROSTER, bindings: { $include: './..bindings.json' } });
    const ok = await runCli(['config', 'validate', '--json', '--config', path.join(linked, 'openclaw.json'), '--state-dir', real]);
    assert.equal(ok.code, 0, ok.stderr);
    const missing = write(real, 'openclaw-missing.json', { agents: ROSTER, $include: './not-there.json' });
    const result = await runCli(['config', 'validate', '--json', '--config', path.join(linked, path.basename(missing)), '--state-dir', real]);
    assert.equal(result.code, 78);
    assert.match(errorOf(result.stderr).message, /does not exist/);
  });
});

describe('a "__proto__" key', () => {
  test('is an unknown key in every way a config is read: never inherited config, with ${VAR}, $include or extends alike', async () => {
    const dir = tempDir();
    // JSON text: a JSON5 object literal would read `__proto__` as the literal's prototype.
    const proto = '"__proto__": { "dmScope": "per-peer" }';
    write(dir, 'empty.json5', '{}');
    write(dir, 'base.json', '{}');
    const configs = {
      plain: write(dir, 'plain.json5', `{ "session": { ${proto} } }`),
      reference: write(dir, 'reference.json5', `{ "session": { ${proto} }, "note": "\${HOME}" }`),
      include: write(dir, 'include.json5', `{ "session": { ${proto} }, "messages": { "$include": "./empty.json5" } }`),
      extends: write(dir, 'extends.json5', `{ "extends": "./base.json", "session": { ${proto} } }`),
      topLevel: write(dir, 'top-level.json5', `{ "extends": "./base.json", "__proto__": { "session": { "dmScope": "per-peer" } } }`),
    };
    for (const [name, config] of Object.entries(configs)) {
      const r = await routes(config, [{ channel: 'telegram', peer: { kind: 'direct', id: 'bob' } }]);
      assert.equal(r.code, 0, `${name}: ${r.stderr}`);
      assert.equal(r.routes[0].sessionKey, 'agent:main:main', `${name}: the key under __proto__ is not the dmScope`);
      const checked = await runCli(['config', 'validate', '--config', config, '--state-dir', dir]);
      assert.equal(checked.code, 0, `${name}: ${checked.stderr}`);
      assert.match(checked.stderr, /not used by switchboard \(ignored\): .*__proto__/, name);
    }
  });
});
