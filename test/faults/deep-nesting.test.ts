// Store files holding a value nested far deeper than anything switchboard or OpenClaw writes:
// JSON.parse reads it, but every stringify or walk after it overflowed the stack, so one such
// value turned each command that touched it into an INTERNAL error (exit 1, a stack trace).
// Messages and configs were already refused past MAX_JSON_DEPTH; store files follow that bound.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import { jsonLines, runCli, tempDir } from '../helpers.js';
import { startFollower } from '../fixtures/follower.js';

/** A JSON array nested `depth` levels deep, as text (JSON.stringify itself could not make it). */
const nestedArray = (depth: number): string => `${'['.repeat(depth)}${']'.repeat(depth)}`;
const DEEP = 100_000;

/** A state dir with one session (agent:main:main) and the paths of its store and transcript. */
async function oneSession(): Promise<{ state: string; store: string; transcript: string }> {
  const state = tempDir('sb-deep-');
  const sent = await runCli(['send', 'hello', '--channel', 'telegram', '--json', '--state-dir', state]);
  assert.equal(sent.code, 0, sent.stderr);
  const [result] = jsonLines(sent.stdout);
  const dir = path.join(state, 'agents', 'main', 'sessions');
  return { state, store: path.join(dir, 'sessions.json'), transcript: path.join(dir, `${result.sessionId}.jsonl`) };
}

describe('a sessions.json value nested too deep', () => {
  test('is STORE_CORRUPT (exit 65) for every command, left as it is; doctor --repair rebuilds the store keeping the bytes', async () => {
    const { state, store } = await oneSession();
    const entries = JSON.parse(fs.readFileSync(store, 'utf8'));
    entries['agent:main:main'].extra = '@DEEP@';
    const damaged = JSON.stringify(entries, null, 2).replace('"@DEEP@"', nestedArray(DEEP));
    fs.writeFileSync(store, damaged);
    const flags = ['--state-dir', state];
    for (const args of [['sessions', '--json'], ['send', 'again', '--channel', 'telegram'], ['sessions', 'reset', 'agent:main:main', '--yes']]) {
      const r = await runCli([...args, ...flags]);
      assert.equal(r.code, 65, `${args.join(' ')}: ${r.stdout}${r.stderr}`);
      assert.match(r.stdout + r.stderr, /STORE_CORRUPT|is damaged/);
      assert.doesNotMatch(r.stdout + r.stderr, /INTERNAL|internal error|RangeError/);
    }
    assert.equal(fs.readFileSync(store, 'utf8'), damaged, 'the damaged store was not written over');

    const check = await runCli(['doctor', '--json', ...flags]);
    assert.equal(check.code, 65, check.stderr);
    const problems = JSON.parse(check.stdout).stores[0].problems;
    assert.deepEqual(problems.map((p: { kind: string; repairable: boolean }) => [p.kind, p.repairable]), [['store-corrupt', true]]);
    const repair = await runCli(['doctor', '--repair', ...flags]);
    assert.equal(repair.code, 0, repair.stdout + repair.stderr);
    const listed = await runCli(['sessions', '--json', ...flags]);
    assert.equal(listed.code, 0, listed.stderr);
    assert.deepEqual(JSON.parse(listed.stdout).sessions.map((s: { key: string }) => s.key), ['agent:main:main']);
    const kept = fs.readdirSync(path.dirname(store)).filter((name) => name.startsWith('sessions.json.corrupt-'));
    assert.equal(kept.length, 1);
    assert.equal(fs.readFileSync(path.join(path.dirname(store), kept[0]!), 'utf8'), damaged, 'the damaged bytes are kept');
  });
});

describe('a transcript line nested too deep', () => {
  const deepRecord = `{"type":"message","id":"deep","parentId":null,"message":{"role":"user","content":${nestedArray(DEEP)}}}`;

  test('is a damaged line: readers skip and count it (--raw and --json too), doctor --repair removes it keeping the bytes', async () => {
    const { state, transcript } = await oneSession();
    fs.appendFileSync(transcript, `${deepRecord}\n`);
    const flags = ['--state-dir', state];
    for (const mode of ['--raw', '--json']) {
      const r = await runCli(['sessions', 'transcript', 'agent:main:main', mode, ...flags]);
      assert.equal(r.code, 0, `${mode}: ${r.stderr}`);
      assert.deepEqual(jsonLines(r.stdout).map((record) => record.type), ['session', 'message'], mode);
      assert.match(r.stderr, /skipped 1 damaged line/, mode);
    }
    const check = await runCli(['doctor', '--json', ...flags]);
    assert.equal(check.code, 65, check.stderr);
    assert.deepEqual(JSON.parse(check.stdout).stores[0].problems.map((p: { kind: string }) => p.kind), ['malformed-lines']);
    const before = fs.readFileSync(transcript, 'utf8');
    assert.equal((await runCli(['doctor', '--repair', ...flags])).code, 0);
    assert.equal((await runCli(['doctor', ...flags])).code, 0);
    const backups = fs.readdirSync(path.dirname(transcript)).filter((name) => name.startsWith(`${path.basename(transcript)}.bak-`));
    assert.equal(fs.readFileSync(path.join(path.dirname(transcript), backups[0]!), 'utf8'), before, 'the original bytes are kept');
  });

  test('--follow --raw skips one appended later and goes on with the next record', async () => {
    const { state, transcript } = await oneSession();
    const follower = startFollower(['sessions', 'transcript', 'agent:main:main', '--follow', '--raw', '--state-dir', state]);
    const { until } = follower;
    let code: number | null = null;
    try {
      await until('the existing records are printed', () => follower.out().includes('"hello"'));
      fs.appendFileSync(transcript, `${deepRecord}\n`);
      assert.equal((await runCli(['send', 'after the deep line', '--channel', 'telegram', '--state-dir', state])).code, 0);
      await until('the record after it is printed', () => follower.out().includes('after the deep line'));
    } finally {
      code = await follower.stop();
    }
    assert.equal(code, 0, follower.err());
    assert.doesNotMatch(follower.err(), /internal error|RangeError/);
  });
});
