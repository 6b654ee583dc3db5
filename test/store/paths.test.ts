// Tests of store paths: state-dir precedence, per-agent folders, `session.store` templates,
// transcript and archive names, archiving, and quality case 6 (ids that try to escape).

import assert from 'node:assert/strict';
import { readdir, readFile, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, test } from 'node:test';
import { SwitchboardError } from '../../src/core/index.js';
import {
  archiveFile,
  archivePathFor,
  ensureStateDir,
  findInstanceTranscript,
  formatArchiveTimestamp,
  parseArchiveName,
  resolveAgentSessionsDir,
  resolveInside,
  resolveStateDir,
  resolveStoreLocation,
  resolveThreadTranscriptPath,
  resolveTranscriptPath,
  validateSessionId,
} from '../../src/store/index.js';
import { tempDir as makeTempDir } from '../helpers.js';

const tempDir = (): string => makeTempDir('sb-paths-');

function isBadInput(err: unknown): boolean {
  return err instanceof SwitchboardError && err.code === 'BAD_INPUT' && err.exitCode === 65;
}

/** True when `candidate` is strictly inside `dir` (the check case 6 is about). */
function isInside(dir: string, candidate: string): boolean {
  const relative = path.relative(dir, candidate);
  return relative !== '' && relative.split(path.sep)[0] !== '..' && !path.isAbsolute(relative);
}

const HOME = '/home/tester';
const STATE = '/srv/state';

describe('state dir', () => {
  test('--state-dir wins over $SWITCHBOARD_STATE_DIR, which wins over ~/.switchboard', () => {
    const env = { SWITCHBOARD_STATE_DIR: '/from/env' };
    assert.equal(resolveStateDir({ stateDir: '/from/flag', env, homeDir: HOME }), '/from/flag');
    assert.equal(resolveStateDir({ env, homeDir: HOME }), '/from/env');
    assert.equal(resolveStateDir({ env: {}, homeDir: HOME }), '/home/tester/.switchboard');
    assert.equal(resolveStateDir({ stateDir: '', env: { SWITCHBOARD_STATE_DIR: '' }, homeDir: HOME }), '/home/tester/.switchboard');
  });

  test('~ is expanded and relative values become absolute', () => {
    assert.equal(resolveStateDir({ stateDir: '~/sb', env: {}, homeDir: HOME }), '/home/tester/sb');
    assert.equal(resolveStateDir({ env: { SWITCHBOARD_STATE_DIR: '~' }, homeDir: HOME }), HOME);
    assert.equal(resolveStateDir({ stateDir: 'rel/dir', env: {}, homeDir: HOME }), path.resolve('rel/dir'));
  });

  test('a blank $SWITCHBOARD_STATE_DIR is a usage error, as a blank --state-dir is (never a folder named by spaces)', () => {
    for (const blank of [' ', '  \t']) {
      assert.throws(() => resolveStateDir({ env: { SWITCHBOARD_STATE_DIR: blank }, homeDir: HOME }), (err: any) => err.code === 'USAGE' && /SWITCHBOARD_STATE_DIR/.test(err.message));
    }
    assert.equal(resolveStateDir({ stateDir: '/from/flag', env: { SWITCHBOARD_STATE_DIR: ' ' }, homeDir: HOME }), '/from/flag', 'the flag wins over it');
  });

  test('a NUL byte in the state dir is BAD_INPUT', () => {
    assert.throws(() => resolveStateDir({ stateDir: '/tmp/a\0b', env: {}, homeDir: HOME }), isBadInput);
  });

  test('ensureStateDir creates the folder (and parents) with mode 0700', async () => {
    const root = await tempDir();
    const stateDir = path.join(root, 'nested', 'state');
    assert.equal(await ensureStateDir({ stateDir, env: {}, homeDir: HOME }), stateDir);
    assert.equal((await stat(stateDir)).mode & 0o777, 0o700);
    assert.equal((await stat(path.join(root, 'nested'))).mode & 0o777, 0o700);
  });
});

describe('store location', () => {
  test('default: <state>/agents/<agentId>/sessions/sessions.json with the agent id normalised', () => {
    assert.deepEqual(resolveStoreLocation(STATE, 'main'), {
      agentId: 'main',
      sessionsDir: '/srv/state/agents/main/sessions',
      storePath: '/srv/state/agents/main/sessions/sessions.json',
    });
    assert.equal(resolveStoreLocation(STATE, 'Family Helper').sessionsDir, '/srv/state/agents/family-helper/sessions');
    assert.equal(resolveStoreLocation(STATE, '').agentId, 'main');
  });

  test('session.store: {agentId} placeholder, relative to the state dir, ~ expanded', () => {
    assert.equal(
      resolveStoreLocation(STATE, 'Work', { storeTemplate: 'stores/{agentId}/sessions.json' }).storePath,
      '/srv/state/stores/work/sessions.json',
    );
    const fromHome = resolveStoreLocation(STATE, 'work', { storeTemplate: '~/oc/{agentId}/s.json', homeDir: HOME });
    assert.deepEqual(fromHome, { agentId: 'work', sessionsDir: '/home/tester/oc/work', storePath: '/home/tester/oc/work/s.json' });
    assert.equal(
      resolveStoreLocation(STATE, 'work', { storeTemplate: '/abs/{agentId}/' }).storePath,
      '/abs/work/sessions.json',
      'a template ending in / names the folder',
    );
    assert.equal(resolveStoreLocation(STATE, 'main', { storeTemplate: '  ' }).storePath, '/srv/state/agents/main/sessions/sessions.json');
  });

  test('transcript and thread transcript names', () => {
    const dir = '/srv/state/agents/main/sessions';
    assert.equal(resolveTranscriptPath(dir, 'abc-123'), `${dir}/abc-123.jsonl`);
    assert.equal(resolveThreadTranscriptPath(dir, 'abc-123', '42'), `${dir}/abc-123-topic-42.jsonl`);
    assert.equal(resolveThreadTranscriptPath(dir, 'abc-123', 42), `${dir}/abc-123-topic-42.jsonl`);
    assert.equal(resolveThreadTranscriptPath(dir, 'abc-123', '1700.5/x y'), `${dir}/abc-123-topic-1700.5%2Fx%20y.jsonl`);
  });
});

describe('archive names and archiving', () => {
  const at = Date.UTC(2026, 0, 2, 3, 4, 5, 678);

  test('timestamp is ISO-8601 UTC with : replaced by -', () => {
    assert.equal(formatArchiveTimestamp(at), '2026-01-02T03-04-05.678Z');
    assert.equal(archivePathFor('/d/abc.jsonl', 'reset', at), '/d/abc.jsonl.reset.2026-01-02T03-04-05.678Z');
    assert.equal(archivePathFor('/d/abc.jsonl', 'deleted', at), '/d/abc.jsonl.deleted.2026-01-02T03-04-05.678Z');
    assert.deepEqual(parseArchiveName('abc.jsonl.deleted.2026-01-02T03-04-05.678Z'), {
      originalName: 'abc.jsonl',
      reason: 'deleted',
      archivedAt: at,
    });
    assert.equal(parseArchiveName('abc.jsonl'), null);
    assert.throws(() => formatArchiveTimestamp(Number.NaN), isBadInput);
    assert.throws(() => archivePathFor('/d/x', 'purged' as 'reset', at), isBadInput);
  });

  test('archiveFile renames (never deletes), never overwrites an archive, and returns null for no file', async () => {
    const dir = await tempDir();
    const transcript = path.join(dir, 'abc.jsonl');
    await writeFile(transcript, 'first\n');
    const firstArchive = await archiveFile(transcript, 'reset', at);
    assert.equal(firstArchive, `${transcript}.reset.2026-01-02T03-04-05.678Z`);
    // Same pinned clock again: the first archive must survive, the second moves on by 1 ms.
    await writeFile(transcript, 'second\n');
    const secondArchive = await archiveFile(transcript, 'reset', at);
    assert.equal(secondArchive, `${transcript}.reset.2026-01-02T03-04-05.679Z`);
    assert.equal(await readFile(firstArchive!, 'utf8'), 'first\n');
    assert.equal(await readFile(secondArchive!, 'utf8'), 'second\n');
    assert.deepEqual((await readdir(dir)).sort(), [path.basename(firstArchive!), path.basename(secondArchive!)].sort());
    assert.equal(await archiveFile(transcript, 'deleted', at), null);
  });
});

describe('case 6: ids that try to escape never produce a path outside the store', () => {
  const sessionsDir = '/srv/state/agents/main/sessions';
  const hostile = [
    '../x',
    '../../../../etc/passwd',
    '/etc/passwd',
    '..',
    '.',
    '',
    'a\0b',
    '\0',
    'x'.repeat(129),
    'x'.repeat(10_000),
    'a/b',
    'a\\b',
    'C:\\Windows',
    '%2e%2e%2f',
    'a:b',
    'a@b',
    'a b',
    ' lead',
    '-lead',
    '.hidden',
    'ok\n',
  ];

  test('hostile session ids are BAD_INPUT for transcripts and thread transcripts', () => {
    for (const sessionId of hostile) {
      assert.throws(() => validateSessionId(sessionId), isBadInput, JSON.stringify(sessionId));
      assert.throws(() => resolveTranscriptPath(sessionsDir, sessionId), isBadInput, JSON.stringify(sessionId));
      assert.throws(() => resolveThreadTranscriptPath(sessionsDir, sessionId, '1'), isBadInput, JSON.stringify(sessionId));
    }
    for (const notString of [undefined, null, 5, {}, ['a']]) {
      assert.throws(() => validateSessionId(notString), isBadInput);
    }
    // The longest valid id still works, so the limit is the grammar's and not an accident.
    assert.ok(isInside(sessionsDir, resolveTranscriptPath(sessionsDir, `a${'b'.repeat(127)}`)));
  });

  test('ids with capitals are valid, as OpenClaw accepts them (its SAFE_SESSION_ID_RE is case-insensitive)', () => {
    for (const sessionId of ['Work-Run1', 'ABC', 'x.Y_z-1', `A${'b'.repeat(127)}`]) {
      assert.equal(validateSessionId(sessionId), sessionId);
      assert.equal(resolveTranscriptPath(sessionsDir, sessionId), path.join(sessionsDir, `${sessionId}.jsonl`));
      assert.ok(isInside(sessionsDir, resolveThreadTranscriptPath(sessionsDir, sessionId, '1')));
    }
  });

  test('hostile thread ids are encoded into the folder or refused, never outside', () => {
    const threads = ['../x', '/etc/passwd', '..', '.', '\0', 'a/../../b', '/abs/thread', 'C:\\x', '~root', '%00', 'x'.repeat(100)];
    for (const threadId of threads) {
      const produced = resolveThreadTranscriptPath(sessionsDir, 'abc', threadId);
      assert.ok(isInside(sessionsDir, produced), `${JSON.stringify(threadId)} → ${produced}`);
      assert.equal(path.dirname(produced), sessionsDir);
    }
    for (const refused of ['', 'x'.repeat(300), '\ud800', 'a'.repeat(10_000)]) {
      assert.throws(() => resolveThreadTranscriptPath(sessionsDir, 'abc', refused), isBadInput, JSON.stringify(refused.slice(0, 10)));
    }
  });

  test('hostile agent ids are normalised into <state>/agents, also through a session.store template', () => {
    const agentsDir = path.join(STATE, 'agents');
    const agentIds = ['../../etc', '/etc', '..', '.', '\0', 'a/../../b', 'x'.repeat(500), '../', '..\\..\\x', '__proto__', '~'];
    for (const agentId of agentIds) {
      const sessions = resolveAgentSessionsDir(STATE, agentId);
      assert.ok(isInside(agentsDir, sessions), `${JSON.stringify(agentId)} → ${sessions}`);
      const location = resolveStoreLocation(STATE, agentId, { storeTemplate: 'stores/{agentId}/sessions.json' });
      assert.ok(isInside(path.join(STATE, 'stores'), location.storePath), `${JSON.stringify(agentId)} → ${location.storePath}`);
      assert.ok(isInside(location.sessionsDir, resolveTranscriptPath(location.sessionsDir, 'abc')));
    }
  });

  test('resolveInside refuses every name that is not one plain segment', () => {
    for (const name of ['..', '.', '', '../x', 'a/b', 'a\\b', '/etc/passwd', 'x\0', 'x'.repeat(256)]) {
      assert.throws(() => resolveInside(sessionsDir, name), isBadInput, JSON.stringify(name.slice(0, 20)));
    }
    assert.equal(resolveInside(sessionsDir, '..x'), `${sessionsDir}/..x`);
  });

  test('resolveInside joins plain names (its quick path) exactly as path.join does, from any spelling of the folder', () => {
    const names = ['abc.jsonl', 'a-topic-1.jsonl', 'sessions.json.lock', 'x.jsonl.deleted.2026-11-30T12-00-00.000Z', 'A~b@c+d,e=f', '0', 'x'.repeat(255)];
    for (const dir of [sessionsDir, `${sessionsDir}/`, `${sessionsDir}/./`, `${sessionsDir}/../${path.basename(sessionsDir)}`, '/', path.relative(process.cwd(), sessionsDir)]) {
      for (const name of names) assert.equal(resolveInside(dir, name), path.join(path.resolve(dir), name), `${dir} + ${name}`);
    }
    // Not a string: refused as before, whatever it turns into as a string.
    assert.throws(() => resolveInside(sessionsDir, ['abc.jsonl'] as unknown as string), isBadInput);
  });

  test('a generated sweep of dangerous strings: every produced path is inside, everything else is BAD_INPUT', () => {
    // Deterministic generator (xorshift) over the characters that matter for paths.
    const alphabet = ['.', '.', '/', '\\', '\0', '%', '2', 'e', 'f', 'a', '-', '_', ':', '~', ' ', 'é', '\n'];
    let seed = 0x9e3779b9;
    const next = (): number => {
      seed ^= seed << 13;
      seed ^= seed >>> 17;
      seed ^= seed << 5;
      return (seed >>> 0) / 0x1_0000_0000;
    };
    let produced = 0;
    let refused = 0;
    for (let round = 0; round < 5000; round += 1) {
      const length = 1 + Math.floor(next() * 12);
      let candidate = '';
      for (let i = 0; i < length; i += 1) candidate += alphabet[Math.floor(next() * alphabet.length)];
      const builders: Array<[string, () => string]> = [
        [sessionsDir, () => resolveTranscriptPath(sessionsDir, candidate)],
        [sessionsDir, () => resolveThreadTranscriptPath(sessionsDir, 'abc', candidate)],
        [sessionsDir, () => resolveInside(sessionsDir, candidate)],
        [path.join(STATE, 'agents'), () => resolveAgentSessionsDir(STATE, candidate)],
      ];
      for (const [base, build] of builders) {
        try {
          const result = build();
          assert.ok(isInside(base, result), `${JSON.stringify(candidate)} → ${result}`);
          produced += 1;
        } catch (err) {
          assert.ok(isBadInput(err), `${JSON.stringify(candidate)} threw ${String(err)}`);
          refused += 1;
        }
      }
    }
    // Both outcomes must occur, or the sweep tested nothing.
    assert.ok(produced > 1000 && refused > 1000, `produced ${produced}, refused ${refused}`);
  });
});

describe('findInstanceTranscript', () => {
  test("a thread instance whose transcript was archived is found in its archive, not in OpenClaw's trajectory file left under the live name", async () => {
    const dir = makeTempDir('sb-instance-');
    const id = '6398abbc-36d6-4a0f-a43d-1b1faa1a0997';
    const archived = path.basename(archivePathFor(path.join(dir, `${id}-topic-7.jsonl`), 'reset', Date.UTC(2026, 11, 1)));
    for (const name of [`${id}-topic-7.trajectory.jsonl`, `${id}-topic-7.trajectory-path.json`, archived]) await writeFile(path.join(dir, name), '{}\n');
    assert.equal(await findInstanceTranscript(dir, id), path.join(dir, archived));
  });
});
