// sessions.json entries of a shape the code cannot use (issue 10: "a bad entry is STORE_CORRUPT
// for that entry, and a doctor finding, not a crash and never a write into the wrong file"):
// fields of the wrong type, entries that are not objects at all, and entries that share one
// transcript. Real stores written by the real CLI, then edited the way a person or another tool
// would; every command is the real binary.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import { jsonLines, runCli, tempDir, writeJson, type CliResult } from '../helpers.js';

interface State {
  state: string;
  config: string;
  dir: string;
  storePath: string;
}

function newState(config: Record<string, unknown> = {}): State {
  const state = tempDir('sb-shapes-');
  const configPath = writeJson(path.join(state, 'c.json'), { session: { dmScope: 'per-peer' }, ...config });
  const dir = path.join(state, 'agents', 'main', 'sessions');
  return { state, config: configPath, dir, storePath: path.join(dir, 'sessions.json') };
}

function cli(s: State, ...args: string[]): Promise<CliResult> {
  return runCli([...args, '--state-dir', s.state, '--config', s.config]);
}

/** From a file, so that the lines form one batch. */
async function ingest(s: State, messages: Record<string, unknown>[]): Promise<{ code: number | null; events: any[]; stderr: string }> {
  const input = path.join(s.state, `input-${Math.random().toString(36).slice(2)}.ndjson`);
  fs.writeFileSync(input, `${messages.map((m) => JSON.stringify(m)).join('\n')}\n`);
  const r = await cli(s, 'ingest', input, '--json');
  fs.unlinkSync(input);
  return { code: r.code, events: jsonLines(r.stdout), stderr: r.stderr };
}

const say = (peer: string, text: string, messageId?: string) => ({ channel: 'telegram', peer: `direct:${peer}`, text, ...(messageId ? { messageId } : {}) });
const keyOf = (peer: string) => `agent:main:direct:${peer}`;

/** A store with one session per peer, written by the real CLI (twice, so sessions.json.bak exists). */
async function seeded(peers: string[], config: Record<string, unknown> = {}): Promise<State> {
  const s = newState(config);
  const first = await ingest(s, peers.map((p) => say(p, `hello from ${p}`, `${p}-0`)));
  assert.equal(first.code, 0, first.stderr);
  const second = await ingest(s, [say(peers[0]!, 'again')]);
  assert.equal(second.code, 0, second.stderr);
  return s;
}

function readStore(s: State): Record<string, any> {
  return JSON.parse(fs.readFileSync(s.storePath, 'utf8'));
}

function writeStore(s: State, store: Record<string, unknown>, edit: (text: string) => string = (t) => t): void {
  fs.writeFileSync(s.storePath, edit(`${JSON.stringify(store, null, 2)}\n`));
}

/** The messageIds recorded in a transcript, in order. */
function recordedIds(s: State, file: string): string[] {
  const full = path.join(s.dir, file);
  if (!fs.existsSync(full)) return [];
  return jsonLines(fs.readFileSync(full, 'utf8'))
    .map((line) => line.message?.messageId)
    .filter((id): id is string => typeof id === 'string');
}

async function doctor(s: State, ...args: string[]): Promise<{ code: number | null; problems: any[]; report: any }> {
  const r = await cli(s, 'doctor', '--json', ...args);
  assert.ok(r.stdout.trim() !== '', `doctor printed a report (exit ${r.code}): ${r.stderr}`);
  const report = jsonLines(r.stdout)[0];
  return { code: r.code, problems: report.stores.flatMap((store: any) => store.problems), report };
}

const linesOf = (events: any[]) => events.map((e) => `${e.line} ${e.type === 'error' ? e.code : e.disposition}`);

describe('fields the code walks', () => {
  test('recentMessageIds, queue and outbox of the wrong type, or a time that is not finite, make the entry unusable: STORE_CORRUPT, left as it is', async () => {
    const peers = ['a', 'b', 'c', 'd', 'e', 'f', 'ok'];
    const s = await seeded(peers);
    const store = readStore(s);
    store[keyOf('a')].recentMessageIds = 5;
    store[keyOf('b')].recentMessageIds = {};
    store[keyOf('c')].recentMessageIds = [['c-0', 1796026545389], 'c-1'];
    store[keyOf('d')].queue = [null, 5];
    store[keyOf('e')].outbox = [null];
    // JSON has no Infinity: 1e400 is how one gets into a file, and it reads as Infinity.
    store[keyOf('f')].queueOwner = { pid: 1, hostname: 'elsewhere', processStartTime: 1, since: 424242 };
    writeStore(s, store, (text) => text.replace('"since": 424242', '"since": 1e400'));
    const bad = ['a', 'b', 'c', 'd', 'e', 'f'];
    const before = readStore(s);
    const files = Object.fromEntries(peers.map((p) => [p, before[keyOf(p)].sessionFile as string]));

    const r = await ingest(s, peers.map((p) => say(p, `to ${p}`, `${p}-1`)));
    assert.equal(r.code, 65, r.stderr);
    assert.deepEqual(linesOf(r.events), [...bad.map((_, i) => `${i + 1} STORE_CORRUPT`), '7 recorded']);
    const after = readStore(s);
    for (const p of bad) {
      assert.deepEqual(recordedIds(s, files[p]!), [`${p}-0`], `${p}: nothing was recorded for it`);
      // Written back with the other sessions' change: the same JSON (Infinity can only come back as null).
      assert.deepEqual(after[keyOf(p)], JSON.parse(JSON.stringify(before[keyOf(p)])), `${p}: the entry is as it was`);
    }
    assert.deepEqual(recordedIds(s, files.ok!), ['ok-0', 'ok-1']);

    // What the rewrite made of the infinite time is still refused; doctor names every one.
    const again = await ingest(s, [say('f', 'once more', 'f-2')]);
    assert.deepEqual(linesOf(again.events), ['1 STORE_CORRUPT']);
    const checked = await doctor(s);
    assert.deepEqual(checked.problems.filter((p) => p.kind === 'invalid-entry').map((p) => p.sessionKey).sort(), bad.map(keyOf).sort());
  });
});
