// Progress of long work on stderr: drawn on a real pseudo-terminal (script(1)) when there is much
// to do, erased before the result; never in a pipe, with --json, or for a little work.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { before, describe, test } from 'node:test';
import { BIN, runCli, tempDir } from '../helpers.js';

/** A progress frame: a label, a bar of # and ., and a count. */
const BAR = /\[[#.]{20}\] \S+\/\S+/;
/** ink erasing its line (erase line, cursor up), as it does when the work is done. */
const ERASE = '\u001b[2K';

function cleanEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, NO_COLOR: '1', TERM: 'xterm' };
  for (const key of Object.keys(env)) if (key.startsWith('SWITCHBOARD_')) delete env[key];
  return env;
}

/** Runs the binary on a pseudo-terminal of 100x40 (stdout and stderr both the terminal). */
function onTerminal(args: string[], redirectStdout = false): { status: number | null; screen: string } {
  const command = [process.execPath, BIN, ...args].map((word) => `'${word}'`).join(' ');
  const r = spawnSync('script', ['-qec', `stty rows 40 cols 100; ${command}${redirectStdout ? ' > /dev/null' : ''}`, '/dev/null'], { encoding: 'utf8', env: cleanEnv() });
  return { status: r.status, screen: r.stdout };
}

describe('progress on long work', () => {
  let big: string;
  let small: string;
  let file: string;
  before(async () => {
    big = tempDir();
    fs.writeFileSync(path.join(big, 'switchboard.json5'), '{ session: { dmScope: "per-peer" } }');
    const input = Array.from({ length: 300 }, (_, i) => JSON.stringify({ channel: 'telegram', peer: `direct:u${i}`, text: `hi ${i}` })).join('\n');
    assert.equal((await runCli(['ingest', '--state-dir', big], { input })).code, 0);
    small = tempDir();
    fs.writeFileSync(path.join(small, 'switchboard.json5'), '{ session: { dmScope: "per-peer" } }');
    assert.equal((await runCli(['ingest', '--state-dir', small], { input: input.split('\n').slice(0, 5).join('\n') })).code, 0);
    // A file over 1 MiB: ingest shows how far it has read.
    file = path.join(tempDir(), 'big.ndjson');
    const line = (i: number) => JSON.stringify({ channel: 'telegram', peer: `direct:f${i % 20}`, text: `a message long enough to make the file big, number ${i}` });
    fs.writeFileSync(file, `${Array.from({ length: 14_000 }, (_, i) => line(i)).join('\n')}\n`);
    assert.ok(fs.statSync(file).size > 1024 * 1024);
  });

  const cases: [string, string[], RegExp][] = [
    ['doctor', ['doctor'], /main: read the transcripts \[/],
    ['sessions cleanup', ['sessions', 'cleanup', '--dry-run'], /main: scan \[/],
    ['maintain', ['maintain', '--dry-run'], /main: scan \[/],
  ];
  for (const [name, args, label] of cases) {
    test(`${name}: a progress line on a terminal, erased before the result; none with --json or in a pipe`, async () => {
      const shown = onTerminal([...args, '--state-dir', big], true);
      assert.equal(shown.status, 0, shown.screen);
      assert.match(shown.screen, label);
      assert.match(shown.screen, BAR);
      const lastFrame = shown.screen.lastIndexOf(']');
      assert.ok(shown.screen.indexOf(ERASE, lastFrame) > lastFrame, 'the line is erased after its last frame');
      assert.doesNotMatch(shown.screen.slice(shown.screen.lastIndexOf(ERASE)), BAR, 'no frame is drawn after the erase');

      const json = onTerminal([...args, '--json', '--state-dir', big], true);
      assert.equal(json.status, 0, json.screen);
      assert.doesNotMatch(json.screen, BAR);

      const piped = await runCli([...args, '--state-dir', big]);
      assert.equal(piped.code, 0, piped.stderr);
      assert.doesNotMatch(piped.stderr, BAR);
      assert.doesNotMatch(piped.stderr, /\u001b/);

      const little = onTerminal([...args, '--state-dir', small], true);
      assert.doesNotMatch(little.screen, BAR, 'a little work shows no progress');
    });
  }

  test('ingest of a large file: progress in bytes on a terminal (stdout redirected), none in a pipe or for stdin', async () => {
    const state = tempDir();
    const shown = onTerminal(['ingest', file, '--state-dir', state], true);
    assert.equal(shown.status, 0, shown.screen);
    assert.match(shown.screen, /ingest \S+big\.ndjson \[[#.]{20}\] [\d.]+[km]?b\/1\.\d+mb/);
    assert.match(shown.screen, /14000 message\(s\) taken into 1 session\(s\)/);

    const piped = await runCli(['ingest', file, '--state-dir', tempDir()]);
    assert.equal(piped.code, 0, piped.stderr);
    assert.equal(piped.stderr, '');
    assert.equal(piped.stdout.trim().split('\n').length, 14_000, 'every event on stdout');
  });
});
