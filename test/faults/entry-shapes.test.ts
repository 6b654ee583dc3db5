// sessions.json entries of a shape the code cannot use (issue 10: "a bad entry is STORE_CORRUPT
// for that entry, and a doctor finding, not a crash and never a write into the wrong file"):
// fields of the wrong type, entries that are not objects at all, and entries that share one
// transcript. Real stores written by the real CLI, then edited the way a person or another tool
// would; every command is the real binary.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import { connectClient } from '../../src/server/index.js';
import { ingestAsOneBatch, jsonLines, runCli, seedPeers, tempDir, writeJson, type CliResult } from '../helpers.js';
import { startServe, stopAllServers } from '../serve-process.js';

after(stopAllServers);

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
const ingest = (s: State, messages: Record<string, unknown>[]) => ingestAsOneBatch((...args) => cli(s, ...args), s.state, messages);

const say = (peer: string, text: string, messageId?: string) => ({ channel: 'telegram', peer: `direct:${peer}`, text, ...(messageId ? { messageId } : {}) });
const keyOf = (peer: string) => `agent:main:direct:${peer}`;

/** A store with one session per peer, written by the real CLI (twice, so sessions.json.bak exists). */
async function seeded(peers: string[], config: Record<string, unknown> = {}): Promise<State> {
  const s = newState(config);
  // The first message of each peer carries an id (`<peer>-0`), the second write none.
  await seedPeers((messages) => ingest(s, messages), peers, (peer, text) => say(peer, text, text === 'again' ? undefined : `${peer}-0`));
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
      // Written back with the other sessions' change as it was — the infinite time too (as 1e999;
      // JSON.stringify alone made it null, and two writes later no copy held it any more).
      assert.deepEqual(after[keyOf(p)], before[keyOf(p)], `${p}: the entry is as it was`);
    }
    assert.equal(after[keyOf('f')].queueOwner.since, Number.POSITIVE_INFINITY);
    assert.match(fs.readFileSync(path.join(s.dir, 'sessions.json'), 'utf8'), /"since": 1e999/);
    assert.deepEqual(recordedIds(s, files.ok!), ['ok-0', 'ok-1']);

    // Listings and maintenance read past them (a queue of [null, 5] is nobody's queue).
    for (const args of [['queue', '--json'], ['sessions', '--json'], ['maintain', '--json'], ['sessions', 'cleanup', '--enforce', '--fix-missing', '--json']]) {
      const used = await cli(s, ...args);
      assert.equal(used.code, 0, `${args.join(' ')}: ${used.stderr}`);
    }
    for (const p of bad) assert.ok(Object.hasOwn(readStore(s), keyOf(p)), `${p}: maintenance left it`);

    // Still refused after the rewrites; doctor names every one.
    const again = await ingest(s, [say('f', 'once more', 'f-2')]);
    assert.deepEqual(linesOf(again.events), ['1 STORE_CORRUPT']);
    const checked = await doctor(s);
    assert.deepEqual(checked.problems.filter((p) => p.kind === 'invalid-entry').map((p) => p.sessionKey).sort(), bad.map(keyOf).sort());
  });

  test('queue records missing the fields the queue reads (an activeRun of no process, a queued text that is a number) are unusable too; delete removes such a row at once; displays show odd labels', async () => {
    const peers = ['run', 'owner', 'item', 'outbox', 'model', 'ok'];
    const s = await seeded(peers);
    const store = readStore(s);
    store[keyOf('run')].activeRun = {};
    store[keyOf('owner')].queueOwner = { pid: 'x', hostname: 'here' };
    store[keyOf('item')].queue = [{ runId: 5, text: 7, enqueuedAt: 1, mode: 9, messageId: {} }];
    store[keyOf('outbox')].outbox = [{ id: 'o1', sessionId: store[keyOf('outbox')].sessionId, records: 'none' }];
    store[keyOf('model')].model = 5;
    store[keyOf('model')].modelOverride = { name: 'x' };
    writeStore(s, store);
    const bad = ['run', 'owner', 'item', 'outbox'];

    const r = await ingest(s, peers.map((p) => say(p, `to ${p}`, `${p}-1`)));
    assert.deepEqual(linesOf(r.events), [...bad.map((_, i) => `${i + 1} STORE_CORRUPT`), '5 recorded', '6 recorded']);
    const messages = r.events.filter((e: any) => e.type === 'error').map((e: any) => e.message as string);
    ['activeRun.runId is missing', 'queueOwner.pid is "x"', 'queue[0].runId is number 5', 'outbox[0].records is "none"'].forEach((why, i) => assert.ok(messages[i]!.includes(why), `${messages[i]} names ${why}`));
    const checked = await doctor(s);
    assert.deepEqual(checked.problems.filter((p) => p.kind === 'invalid-entry').map((p) => p.sessionKey).sort(), bad.map(keyOf).sort());

    // The text views read past them (before: an internal error, exit 1).
    for (const args of [['queue'], ['sessions'], ['sessions', 'show', keyOf('model')], ['sessions', 'show', keyOf('item')]]) {
      const shown = await cli(s, ...args);
      assert.notEqual(shown.code, 1, `${args.join(' ')}: ${shown.stderr}`);
      assert.doesNotMatch(shown.stderr, /internal error/i, args.join(' '));
    }
    const model = await cli(s, 'sessions', 'show', keyOf('model'));
    assert.equal(model.code, 0, model.stderr);
    assert.match(model.stdout, /^model\s+\{"name":"x"\}$/m);

    // An activeRun naming no process is nobody's run: delete does not wait for it to end (before:
    // it polled until the lock timeout, longer than this test's budget).
    const deleted = await cli(s, 'sessions', 'delete', keyOf('run'), '--json');
    assert.equal(deleted.code, 0, deleted.stderr);
    assert.equal(Object.hasOwn(readStore(s), keyOf('run')), false);
  });
});

describe('entries that are not objects', () => {
  /** null, a list, a string and a number in place of four entries; `ok` stays healthy. */
  const NOT_OBJECTS: [string, unknown][] = [
    ['nul', null],
    ['arr', [1, 'x']],
    ['str', 'agent'],
    ['num', 5],
  ];
  const bad = NOT_OBJECTS.map(([p]) => p);

  /** Seeded with the plain config; `config` is what the test's own commands then run with. */
  async function storeWithNonObjects(config: Record<string, unknown> = {}): Promise<{ s: State; ids: Record<string, string> }> {
    const s = await seeded([...bad, 'ok', 'other']);
    writeJson(s.config, { session: { dmScope: 'per-peer' }, ...config });
    const store = readStore(s);
    const ids = Object.fromEntries(bad.map((p) => [p, store[keyOf(p)].sessionId as string]));
    for (const [p, value] of NOT_OBJECTS) store[keyOf(p)] = value;
    writeStore(s, store);
    return { s, ids };
  }

  function assertKept(s: State, when: string): void {
    const store = readStore(s);
    for (const [p, value] of NOT_OBJECTS) assert.deepEqual(store[keyOf(p)], value, `${when}: the entry of ${p} is as it was`);
  }

  test('STORE_CORRUPT only for what is addressed to them: other sessions, listings, maintenance and doctor keep working', async () => {
    const { s, ids } = await storeWithNonObjects();

    const r = await ingest(s, [...bad.map((p) => say(p, `to ${p}`, `${p}-1`)), say('ok', 'to ok', 'ok-1'), say('fresh', 'new here', 'fresh-1')]);
    assert.equal(r.code, 65, r.stderr);
    assert.deepEqual(linesOf(r.events), [...bad.map((_, i) => `${i + 1} STORE_CORRUPT`), '5 recorded', '6 recorded']);
    assertKept(s, 'after ingest');
    for (const p of bad) assert.deepEqual(recordedIds(s, `${ids[p]}.jsonl`), [`${p}-0`], `${p}: nothing was recorded for it`);
    const store = readStore(s);
    assert.deepEqual(recordedIds(s, store[keyOf('ok')].sessionFile), ['ok-0', 'ok-1']);
    assert.deepEqual(recordedIds(s, store[keyOf('fresh')].sessionFile), ['fresh-1']);

    // Listings list every row and mark the unusable ones (the same as an entry of the wrong shape).
    const listed = await cli(s, 'sessions', '--json');
    assert.equal(listed.code, 0, listed.stderr);
    const rows = JSON.parse(listed.stdout).sessions as any[];
    assert.deepEqual(rows.map((row) => row.key).sort(), [...bad, 'ok', 'other', 'fresh'].map(keyOf).sort());
    for (const row of rows) assert.equal(typeof row.problem === 'string', bad.some((p) => row.key === keyOf(p)), row.key);
    for (const args of [['sessions'], ['sessions', '--active', '60'], ['queue', '--json'], ['locks', '--json'], ['config', 'validate'], ['sessions', 'history', keyOf('ok'), '--json']]) {
      const used = await cli(s, ...args);
      assert.equal(used.code, 0, `${args.join(' ')}: ${used.stderr}`);
    }
    for (const peer of ['nul', 'ok']) {
      const explained = await cli(s, 'route', 'explain', '--json', '--channel', 'telegram', '--peer', `direct:${peer}`);
      assert.equal(explained.code, 0, `route explain ${peer}: ${explained.stderr}`);
    }

    // Commands on them: STORE_CORRUPT; on the others: as always.
    const uses = [['sessions', 'show', '--json'], ['sessions', 'pin', '--json'], ['reset', '--json'], ['sessions', 'transcript', '--json']];
    for (const [i, p] of bad.entries()) {
      const args = [...uses[i]!, keyOf(p)];
      const used = await cli(s, ...args);
      assert.equal(used.code, 65, `${args.join(' ')}: ${used.stderr}`);
    }
    const reset = await cli(s, 'reset', '--json', keyOf('ok'));
    assert.equal(reset.code, 0, reset.stderr);
    const pinned = await cli(s, 'sessions', 'pin', keyOf('other'), '--json');
    assert.equal(pinned.code, 0, pinned.stderr);
    assertKept(s, 'after reset and pin of others');

    // Maintenance, even told to drop everything it may: they are never removed or rewritten.
    const maintained = await cli(s, 'maintain', '--json', '--now', '2099-01-01T00:00:00Z');
    assert.equal(maintained.code, 0, maintained.stderr);
    const cleanup = await cli(s, 'sessions', 'cleanup', '--enforce', '--fix-missing', '--json', '--now', '2099-01-01T00:00:00Z');
    assert.equal(cleanup.code, 0, cleanup.stderr);
    assertKept(s, 'after maintain and cleanup');
    for (const p of bad) assert.ok(fs.existsSync(path.join(s.dir, `${ids[p]}.jsonl`)), `${p}: its transcript was not archived`);

    // doctor names each; --repair gives each its transcript back (its header names the key).
    const checked = await doctor(s);
    assert.equal(checked.code, 65);
    assert.deepEqual(checked.problems.filter((p) => p.kind === 'check-failed'), []);
    assert.deepEqual(checked.problems.filter((p) => p.kind === 'invalid-entry').map((p) => p.sessionKey).sort(), bad.map(keyOf).sort());
    const repaired = await doctor(s, '--repair');
    assert.deepEqual(repaired.problems.filter((p) => p.repaired !== true), [], JSON.stringify(repaired.problems));
    const fixed = readStore(s);
    for (const p of bad) assert.equal(fixed[keyOf(p)].sessionId, ids[p], `${p}: adopted its own transcript again`);
    const after = await ingest(s, bad.map((p) => say(p, `to ${p} again`, `${p}-2`)));
    assert.deepEqual(linesOf(after.events), bad.map((_, i) => `${i + 1} recorded`));
    for (const p of bad) assert.deepEqual(recordedIds(s, `${ids[p]}.jsonl`), [`${p}-0`, `${p}-2`]);
  });

  test('maintenance on write (enforce) never removes them', async () => {
    // Seven entries after the write, six allowed: the oldest usable one goes, none of the four.
    const { s, ids } = await storeWithNonObjects({ session: { dmScope: 'per-peer', maintenance: { mode: 'enforce', maxEntries: 6 } } });
    const r = await ingest(s, [say('fresh', 'new here', 'fresh-1')]);
    assert.equal(r.code, 0, r.stderr);
    assertKept(s, 'after a write over maxEntries');
    const keys = Object.keys(readStore(s));
    assert.equal(keys.length, 6, keys.join(' '));
    assert.ok(keys.includes(keyOf('fresh')));
    // A person removes one: the row goes, nothing is archived (it names no file).
    const deleted = await cli(s, 'sessions', 'delete', keyOf('nul'), '--json');
    assert.equal(deleted.code, 0, deleted.stderr);
    assert.equal(JSON.parse(deleted.stdout).archivedTo, null);
    assert.ok(!Object.hasOwn(readStore(s), keyOf('nul')));
    assert.deepEqual(fs.readdirSync(s.dir).filter((n) => n.startsWith(ids.nul!)), [`${ids.nul}.jsonl`]);
  });

  test('serve (with a runner): the others are ingested and listed, the bad ones fail alone', async () => {
    const { s } = await storeWithNonObjects({ agents: { defaults: { runner: { command: 'builtin:echo' } } } });
    const server = await startServe(s.state, ['--config', s.config, '--grace', '100']);
    const client = await connectClient(server.socketPath);
    try {
      const toBad = await client.request<{ events: any[] }>('ingest', { message: say('nul', 'to nul', 'nul-1') });
      assert.deepEqual(toBad.events.map((e) => e.code), ['STORE_CORRUPT']);
      const toOk = await client.request<{ events: any[] }>('ingest', { message: say('ok', 'to ok', 'ok-1') });
      assert.equal(toOk.events[0].type, 'result', JSON.stringify(toOk));
      const listed = await client.request<{ sessions: any[] }>('sessions.list', {});
      assert.ok(listed.sessions.some((row) => row.key === keyOf('nul') && typeof row.problem === 'string'), JSON.stringify(listed));
      await client.request('queue.list', {});
    } finally {
      await client.close();
      await server.stop();
    }
    assert.equal(server.stderr.includes('INTERNAL'), false, server.stderr);
    assertKept(s, 'after serve');
  });
});

describe('entries that share a transcript', () => {
  test('two keys naming one transcript (or one sessionId): STORE_CORRUPT for both, nothing written or archived, a doctor finding naming both', async () => {
    const s = await seeded(['good', 'bad', 'p', 'q', 'other']);
    const store = readStore(s);
    const good = store[keyOf('good')];
    const badOwnFile = store[keyOf('bad')].sessionFile as string;
    // bad: the same sessionId and file as good (a copy-paste in sessions.json); q: p's sessionId
    // with a file name of its own (a thread form of p's transcript).
    store[keyOf('bad')] = { ...store[keyOf('bad')], sessionId: good.sessionId, sessionFile: good.sessionFile };
    const pId = store[keyOf('p')].sessionId as string;
    store[keyOf('q')] = { ...store[keyOf('q')], sessionId: pId, sessionFile: `${pId}-topic-9.jsonl` };
    // OpenClaw's isolated cron run: its alias key names the job's transcript, as it should.
    const cron = await ingest(s, [{ channel: 'cron', cron: { jobId: 'digest' }, text: 'run digest', messageId: 'cron-0' }]);
    assert.equal(cron.code, 0, cron.stderr);
    const jobKey = 'agent:main:cron:digest';
    const job = readStore(s)[jobKey];
    store[jobKey] = job;
    store[`${jobKey}:run:${job.sessionId}`] = { ...job };
    writeStore(s, store);
    const before = readStore(s);
    const goodBytes = fs.readFileSync(path.join(s.dir, good.sessionFile));

    const r = await ingest(s, [
      say('bad', 'to bad', 'bad-1'),
      say('good', 'to good', 'good-1'),
      say('q', 'to q', 'q-1'),
      say('p', 'to p', 'p-1'),
      say('other', 'to other', 'other-1'),
      { channel: 'telegram', sessionKey: `${jobKey}:run:${job.sessionId}`, text: 'into the run', messageId: 'run-1' },
    ]);
    assert.equal(r.code, 65, r.stderr);
    assert.deepEqual(linesOf(r.events), ['1 STORE_CORRUPT', '2 STORE_CORRUPT', '3 STORE_CORRUPT', '4 STORE_CORRUPT', '5 recorded', '6 recorded']);
    assert.deepEqual(fs.readFileSync(path.join(s.dir, good.sessionFile)), goodBytes, "nothing was written into good's transcript");
    assert.deepEqual(recordedIds(s, `${pId}.jsonl`), ['p-0']);
    assert.ok(!fs.existsSync(path.join(s.dir, `${pId}-topic-9.jsonl`)));
    assert.deepEqual(recordedIds(s, job.sessionFile), ['cron-0', 'run-1'], 'the cron run alias still writes into its job transcript');

    // Commands that would write or archive their transcript refuse both keys of a pair.
    for (const args of [['reset', '--json', keyOf('bad')], ['sessions', 'delete', keyOf('bad'), '--json'], ['sessions', 'pin', keyOf('good'), '--json'], ['reset', '--json', keyOf('q')]]) {
      const used = await cli(s, ...args);
      assert.equal(used.code, 65, `${args.join(' ')}: ${used.stdout}${used.stderr}`);
    }
    const maintained = await cli(s, 'maintain', '--json', '--now', '2099-01-01T00:00:00Z');
    assert.equal(maintained.code, 0, maintained.stderr);
    const cleanup = await cli(s, 'sessions', 'cleanup', '--enforce', '--json', '--now', '2099-01-01T00:00:00Z');
    assert.equal(cleanup.code, 0, cleanup.stderr);
    const after = readStore(s);
    for (const p of ['good', 'bad', 'p', 'q']) assert.deepEqual(after[keyOf(p)], before[keyOf(p)], `${p}: left as it was`);
    assert.deepEqual(fs.readFileSync(path.join(s.dir, good.sessionFile)), goodBytes, "good's transcript is in place, unchanged");
    assert.ok(fs.existsSync(path.join(s.dir, badOwnFile)), "bad's own old transcript was not archived");
    assert.deepEqual(fs.readdirSync(s.dir).filter((n) => n.includes('.reset.') || n.includes('.deleted.')).filter((n) => n.startsWith(good.sessionId) || n.startsWith(pId)), []);

    // The listing marks all four; doctor names each pair once, with both keys.
    const listed = await cli(s, 'sessions', '--json');
    assert.equal(listed.code, 0, listed.stderr);
    const marked = (JSON.parse(listed.stdout).sessions as any[]).filter((row) => typeof row.problem === 'string').map((row) => row.key).sort();
    assert.deepEqual(marked, ['bad', 'good', 'p', 'q'].map(keyOf).sort());
    const checked = await doctor(s);
    assert.equal(checked.code, 65);
    const shared = checked.problems.filter((p) => p.kind === 'shared-transcript').map((p) => [...p.sessionKeys].sort());
    assert.deepEqual(shared.sort(), [[keyOf('bad'), keyOf('good')].sort(), [keyOf('p'), keyOf('q')].sort()].sort());
    assert.deepEqual(checked.problems.filter((p) => p.kind === 'check-failed'), []);
    const repaired = await doctor(s, '--repair');
    assert.notEqual(repaired.code, 1);
    assert.deepEqual(fs.readFileSync(path.join(s.dir, good.sessionFile)), goodBytes, 'doctor --repair left the shared transcript alone');
    assert.ok(fs.existsSync(path.join(s.dir, badOwnFile)), "doctor --repair did not archive bad's own transcript");
  });
});

describe('doctor --repair separates keys that share a transcript', () => {
  test('the file stays with the key its header names; the others get their own earlier transcript back, or a new instance; a pair no header decides is left alone', async () => {
    const s = await seeded(['good', 'bad', 'lonely', 'x', 'y']);
    const store = readStore(s);
    const good = store[keyOf('good')];
    const badOwn = store[keyOf('bad')];
    const lonelyOwn = store[keyOf('lonely')];
    // bad and lonely name good's transcript (a copy-paste in sessions.json); lonely's own file is
    // gone, bad's is still there. x and y name a sessionId whose file does not exist: no header
    // says whose it is.
    store[keyOf('bad')] = { ...badOwn, sessionId: good.sessionId, sessionFile: good.sessionFile };
    store[keyOf('lonely')] = { ...lonelyOwn, sessionId: good.sessionId, sessionFile: good.sessionFile };
    fs.unlinkSync(path.join(s.dir, lonelyOwn.sessionFile));
    const ghost = '0badc0de-0000-4000-8000-000000000000';
    for (const peer of ['x', 'y']) store[keyOf(peer)] = { ...store[keyOf(peer)], sessionId: ghost, sessionFile: `${ghost}.jsonl` };
    writeStore(s, store);
    const goodBytes = fs.readFileSync(path.join(s.dir, good.sessionFile));

    const checked = await doctor(s);
    const findings = checked.problems.filter((p) => p.kind === 'shared-transcript');
    assert.deepEqual(findings.map((p) => [[...p.sessionKeys].sort(), p.repairable]).sort(), [
      [['bad', 'good', 'lonely'].map(keyOf), true],
      [['x', 'y'].map(keyOf), false],
    ]);

    const repaired = await doctor(s, '--repair');
    assert.notEqual(repaired.code, 1, JSON.stringify(repaired.report));
    assert.deepEqual(repaired.problems.filter((p) => p.kind === 'shared-transcript').map((p) => [[...p.sessionKeys].sort()[0], p.repaired]).sort(), [
      [keyOf('bad'), true],
      [keyOf('x'), false],
    ]);
    const after = readStore(s);
    assert.deepEqual(after[keyOf('good')], good, "good's entry is as it was");
    assert.deepEqual(fs.readFileSync(path.join(s.dir, good.sessionFile)), goodBytes, "good's transcript is untouched");
    assert.equal(after[keyOf('bad')].sessionId, badOwn.sessionId, 'bad names its own transcript again');
    assert.equal(after[keyOf('bad')].sessionFile, badOwn.sessionFile);
    assert.deepEqual(recordedIds(s, badOwn.sessionFile), ['bad-0']);
    const lonely = after[keyOf('lonely')];
    assert.ok(![good.sessionId, lonelyOwn.sessionId].includes(lonely.sessionId), 'lonely started a new instance');
    const opened = jsonLines(fs.readFileSync(path.join(s.dir, lonely.sessionFile), 'utf8'));
    assert.deepEqual(opened.map((r) => r.type), ['session', 'reset_notice']);
    assert.equal(opened[0].sessionKey, keyOf('lonely'));
    assert.equal(opened[1].reason, 'shared-transcript');
    assert.equal(opened[1].previousSessionId, good.sessionId);
    for (const peer of ['x', 'y']) assert.deepEqual(after[keyOf(peer)], store[keyOf(peer)], `${peer}: left for a person`);

    // Each of the three now writes into its own file; x and y are still refused.
    const r = await ingest(s, [say('good', 'to good', 'good-1'), say('bad', 'to bad', 'bad-1'), say('lonely', 'to lonely', 'lonely-1'), say('x', 'to x', 'x-1')]);
    assert.deepEqual(linesOf(r.events), ['1 recorded', '2 recorded', '3 recorded', '4 STORE_CORRUPT']);
    assert.deepEqual(recordedIds(s, good.sessionFile), ['good-0', 'good-1']);
    assert.deepEqual(recordedIds(s, badOwn.sessionFile), ['bad-0', 'bad-1']);
    assert.deepEqual(recordedIds(s, lonely.sessionFile), ['lonely-1']);
    const again = await doctor(s);
    assert.deepEqual(again.problems.filter((p) => p.kind === 'shared-transcript').map((p) => [...p.sessionKeys].sort()), [['x', 'y'].map(keyOf)]);
    // What the repair wrote is sound by the store's own schema.
    assert.deepEqual(again.problems.filter((p) => p.file === path.join(s.dir, lonely.sessionFile)), []);
  });
});
