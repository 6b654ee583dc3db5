// Pipes closed early: `switchboard sessions | head` ends quietly; `ingest` whose reader goes away
// stops taking input at a line boundary, exits 74 (IO), and what it acknowledged is on disk.

import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { BIN, REPO_ROOT, jsonLines, runCli, tempDir } from '../helpers.js';
import { startServe, stopAllServers } from '../serve-process.js';

function cleanEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, NO_COLOR: '1' };
  for (const key of Object.keys(env)) if (key.startsWith('SWITCHBOARD_')) delete env[key];
  return env;
}

/**
 * Runs the binary with its stdout a pipe whose reading end is already closed, as after
 * `| head -0`: its first write fails with EPIPE, every time (no race with the reader).
 */
function runWithClosedStdout(args: string[]): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], { cwd: REPO_ROOT, env: cleanEnv(), stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout.destroy();
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stderr }));
  });
}

describe('pipes closed early', () => {
  let state: string;
  before(async () => {
    state = tempDir();
    fs.writeFileSync(path.join(state, 'switchboard.json5'), '{ session: { dmScope: "per-peer" } }');
    const input = Array.from({ length: 300 }, (_, i) => JSON.stringify({ channel: 'telegram', peer: `direct:u${i}`, text: `hi ${i}` })).join('\n');
    const r = await runCli(['ingest', '--state-dir', state], { input });
    assert.equal(r.code, 0, r.stderr);
  });

  const listings = [
    ['sessions', '--limit', 'all'],
    ['sessions', '--json', '--limit', 'all'],
    ['sessions', 'cleanup', '--dry-run'],
    ['maintain', '--json'],
    ['maintain', '--dry-run'],
    ['locks'],
    ['queue', '--json'],
    ['route', 'explain', '--channel', 'telegram', '--peer', 'direct:u1'],
  ];
  for (const args of listings) {
    test(`switchboard ${args.join(' ')} | head: exit 0, nothing on stderr`, async () => {
      const r = await runWithClosedStdout([...args, '--state-dir', state]);
      assert.equal(r.stderr, '');
      assert.equal(r.code, 0);
    });
  }

  test('sessions transcript --follow ends when its reader goes away', async () => {
    const r = await runWithClosedStdout(['sessions', 'transcript', 'agent:main:direct:u1', '--follow', '--state-dir', state]);
    assert.equal(r.stderr, '');
    assert.equal(r.code, 0);
  });

  after(stopAllServers);

  for (const viaSocket of [false, true]) {
    const name = viaSocket ? 'ingest --socket' : 'ingest';
    test(`${name} with a closed stdout stops at a line boundary, exits 74, and every acknowledged line is on disk`, async () => {
      const dir = tempDir();
      fs.writeFileSync(path.join(dir, 'switchboard.json5'), '{ session: { dmScope: "per-peer" } }');
      if (viaSocket) await startServe(dir);
      const child = spawn(process.execPath, [BIN, 'ingest', '--state-dir', dir, ...(viaSocket ? ['--socket'] : [])], {
        cwd: REPO_ROOT,
        env: cleanEnv(),
        stdio: ['pipe', 'pipe', 'pipe'],
      });
      let stderr = '';
      child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
      const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
      child.stdin.on('error', () => undefined); // once ingest stops reading, our writes may fail
      const message = (i: number) => `${JSON.stringify({ channel: 'telegram', peer: `direct:p${i}`, text: `m${i}`, messageId: `m${i}` })}\n`;

      // Two lines, one at a time, each acknowledged before the next is sent: like `| head -2`.
      let received = '';
      const acknowledged: number[] = [];
      child.stdout.setEncoding('utf8');
      for (const i of [1, 2]) {
        child.stdin.write(message(i));
        await new Promise<void>((resolve) => {
          const onData = (chunk: string) => {
            received += chunk;
            if (received.includes('\n')) {
              child.stdout.off('data', onData);
              resolve();
            }
          };
          child.stdout.on('data', onData);
        });
        const [event] = jsonLines(received);
        received = '';
        assert.equal(event.line, i);
        acknowledged.push(event.line);
      }
      // The reader goes away; the producer goes on, and never closes stdin.
      child.stdout.destroy();
      child.stdin.write(message(3));
      const code = await exited;
      child.stdin.destroy();

      assert.equal(code, 74, stderr);
      assert.match(stderr, /stdout closed; stopped taking input after line 3\b/);
      assert.doesNotMatch(stderr, /at .*\.js:\d+/, 'no stack trace');
      const listed = await runCli(['sessions', '--json', '--state-dir', dir]);
      const keys = JSON.parse(listed.stdout).sessions.map((s: { key: string }) => s.key).sort();
      // Every acknowledged line is on disk; line 3, read before the close was seen, is too.
      assert.deepEqual(keys, ['agent:main:direct:p1', 'agent:main:direct:p2', 'agent:main:direct:p3']);
    });

    test(`an endless producer | ${name} | head -1: ingest stops, exits 74, and exactly the lines it says it took are on disk`, async () => {
      const dir = tempDir();
      if (viaSocket) await startServe(dir);
      // Every message goes to the one main session, numbered, so its transcript counts them.
      const producer = `${JSON.stringify(process.execPath)} -e 'let i = 0; const w = () => { while (process.stdout.write(JSON.stringify({ channel: "telegram", peer: "direct:u", text: "m" + ++i, messageId: "m" + i }) + "\\n")); process.stdout.once("drain", w); }; process.stdout.on("error", () => process.exit(0)); w();'`;
      const ingest = [process.execPath, BIN, 'ingest', '--state-dir', dir, ...(viaSocket ? ['--socket'] : [])].map((word) => JSON.stringify(word)).join(' ');
      const r = spawnSync('bash', ['-c', `${producer} | ${ingest} | head -1; echo "exit \${PIPESTATUS[1]}" >&2`], { cwd: REPO_ROOT, env: cleanEnv(), encoding: 'utf8' });
      assert.equal(jsonLines(r.stdout)[0].line, 1, r.stderr);
      assert.match(r.stderr, /exit 74\n$/);
      const stop = /stopped taking input after line (\d+)\b/.exec(r.stderr);
      assert.ok(stop, r.stderr);
      const transcript = await runCli(['sessions', 'transcript', 'agent:main:main', '--raw', '--state-dir', dir]);
      const texts = jsonLines(transcript.stdout)
        .filter((record) => record.type === 'message' && record.message.role === 'user')
        .map((record) => record.message.content[0]?.text ?? record.message.content);
      assert.equal(texts.length, Number(stop[1]));
      assert.equal(texts[texts.length - 1], `m${stop[1]}`);
    });
  }
});
