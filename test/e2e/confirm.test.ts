// Destructive session commands say what they will do: several targets, --dry-run per line, a
// question on a terminal (a real pseudo-terminal through script(1)), none in a pipe.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { describe, test } from 'node:test';
import { BIN, REPO_ROOT, jsonLines, runCli, tempDir } from '../helpers.js';

const CONFIG = path.join(REPO_ROOT, 'examples', 'switchboard.json5');
const CLUB = 'agent:club:discord:channel:book-club';
const ALICE = 'agent:main:direct:alice';

async function demoState(): Promise<string[]> {
  const state = tempDir();
  const flags = ['--config', CONFIG, '--state-dir', state];
  const r = await runCli(['ingest', path.join(REPO_ROOT, 'examples', 'alice.ndjson'), ...flags]);
  assert.equal(r.code, 0, r.stderr);
  return flags;
}

async function keys(flags: string[]): Promise<string[]> {
  const r = await runCli(['sessions', '--all-agents', '--json', ...flags]);
  return JSON.parse(r.stdout).sessions.map((s: { key: string }) => s.key).sort();
}

/** Runs the binary on a pseudo-terminal, typing `answer` at the question (then Enter, unless `enter` is false). */
function onTerminal(args: string[], answer: string, enter = true): { status: number | null; output: string } {
  const command = [process.execPath, BIN, ...args].map((word) => `'${word}'`).join(' ');
  const r = spawnSync('script', ['-qec', command, '/dev/null'], { input: enter ? `${answer}\n` : answer, encoding: 'utf8', env: { ...process.env, NO_COLOR: '1' } });
  return { status: r.status, output: r.stdout };
}

describe('destructive commands say what they will do', () => {
  test('--dry-run labels each target and changes nothing; an unknown target stops the whole command', async () => {
    const flags = await demoState();
    const before = await keys(flags);
    const dry = await runCli(['sessions', 'delete', CLUB, ALICE, '--dry-run', ...flags]);
    assert.equal(dry.code, 0, dry.stderr);
    assert.deepEqual(dry.stdout.trim().split('\n').map((line) => line.split(' ').slice(0, 3).join(' ')), [`would delete ${CLUB}`, `would delete ${ALICE}`]);
    const dryJson = await runCli(['sessions', 'reset', CLUB, '--dry-run', '--json', ...flags]);
    assert.deepEqual(jsonLines(dryJson.stdout).map((e) => [e.dryRun, e.action, e.sessionKey]), [[true, 'reset', CLUB]]);
    const unknown = await runCli(['sessions', 'delete', CLUB, 'agent:main:direct:nobody', '--json', ...flags]);
    assert.equal(unknown.code, 66);
    assert.deepEqual(await keys(flags), before);
  });

  test('several targets at once, and no question without a terminal', async () => {
    const flags = await demoState();
    const r = await runCli(['sessions', 'delete', CLUB, ALICE, '--json', ...flags]);
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(jsonLines(r.stdout).map((e) => e.sessionKey), [CLUB, ALICE]);
    assert.ok(!(await keys(flags)).includes(CLUB));
    assert.ok(!(await keys(flags)).includes(ALICE));
  });

  test('on a terminal it asks: "n" changes nothing, "y" goes ahead, --yes does not ask', async () => {
    const flags = await demoState();
    const no = onTerminal(['sessions', 'delete', CLUB, ...flags], 'n');
    assert.equal(no.status, 0);
    assert.match(no.output, /delete this session\? \[y\/N\]/);
    assert.match(no.output, /nothing changed/);
    assert.ok((await keys(flags)).includes(CLUB));
    const yes = onTerminal(['sessions', 'delete', CLUB, ...flags], 'y');
    assert.equal(yes.status, 0);
    assert.match(yes.output, /deleted agent:club:discord:channel:book-club/);
    assert.ok(!(await keys(flags)).includes(CLUB));
    const skip = onTerminal(['sessions', 'reset', ALICE, '--yes', ...flags], '');
    assert.equal(skip.status, 0);
    assert.doesNotMatch(skip.output, /\[y\/N\]/);
    assert.match(skip.output, /reset agent:main:direct:alice/);
  });

  test('Ctrl+D at the question is a "no": nothing changed, exit 0, no internal error', async () => {
    const flags = await demoState();
    const eof = onTerminal(['sessions', 'delete', CLUB, ...flags], '\u0004', false);
    assert.equal(eof.status, 0, eof.output);
    assert.match(eof.output, /delete this session\? \[y\/N\]/);
    assert.match(eof.output, /nothing changed/);
    assert.doesNotMatch(eof.output, /internal error|AbortError/);
    assert.ok((await keys(flags)).includes(CLUB));
  });
});
