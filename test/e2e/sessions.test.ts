// `switchboard sessions …`, `reset`, `locks` and `route explain`'s session section, end to end.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { spawn } from 'node:child_process';
import { before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { jsonLines, runCli, tempDir, writeJson } from '../helpers.js';

const line = (message: Record<string, unknown>) => JSON.stringify(message);

describe('sessions commands', () => {
  let state: string;
  let config: string;
  const cli = (...args: string[]) => runCli([...args, '--state-dir', state, '--config', config]);

  before(async () => {
    state = tempDir();
    config = writeJson(path.join(state, 'c.json'), {
      agents: { list: [{ id: 'main', default: true }, { id: 'work' }] },
      bindings: [{ agentId: 'work', match: { channel: 'slack', accountId: '*' } }],
      session: { dmScope: 'per-peer', reset: { mode: 'idle', idleMinutes: 60 } },
    });
    const input = [
      line({ channel: 'telegram', peer: 'direct:1', sender: { name: 'Ann' }, text: 'hello' }),
      line({ channel: 'telegram', peer: 'direct:2', text: 'hi' }),
      line({ channel: 'slack', peer: 'channel:C1', text: 'standup' }),
    ].join('\n');
    const r = await runCli(['ingest', '--state-dir', state, '--config', config, '--now', '2026-11-30T10:00:00Z'], { input });
    assert.equal(r.code, 0, r.stderr);
  });

  test('list shows the default agent, --all-agents every agent, --json has the documented fields', async () => {
    const r = await cli('sessions', '--json', '--now', '2026-11-30T10:30:00Z');
    const listing = jsonLines(r.stdout)[0];
    assert.equal(listing.count, 2);
    assert.deepEqual(listing.stores.map((s: { agentId: string }) => s.agentId), ['main']);
    const row = listing.sessions.find((s: { key: string }) => s.key === 'agent:main:direct:1');
    for (const field of ['agentId', 'key', 'sessionId', 'kind', 'chatType', 'updatedAt', 'ageMs', 'sessionStartedAt', 'lastInteractionAt', 'model', 'inputTokens', 'outputTokens', 'totalTokens', 'contextTokens', 'pinned', 'transcriptBytes']) {
      assert.ok(field in row, `field ${field}`);
    }
    assert.equal(row.ageMs, 30 * 60_000);
    assert.ok(row.transcriptBytes > 0);
    const all = jsonLines((await cli('sessions', 'list', '--all-agents', '--json')).stdout)[0];
    assert.equal(all.count, 3);
    const text = (await cli('sessions', '--all-agents')).stdout;
    assert.match(text, /^Agent\s+Kind\s+Key\s+Age\s+Model\s+Tokens\s+Flags/);
    assert.match(text, /agent:work:slack:channel:c1/);
  });

  test('--agent naming no configured agent and no store on disk is NOT_FOUND (66) naming the known agents, for listing, cleanup and show', async () => {
    for (const args of [['sessions'], ['sessions', 'list'], ['sessions', 'cleanup', '--dry-run'], ['sessions', 'show', 'notes']]) {
      const r = await cli(...args, '--agent', 'wrok', '--json');
      assert.equal(r.code, 66, `${args.join(' ')}: ${r.stderr}`);
      assert.equal(r.stdout, '');
      const error = JSON.parse(r.stderr.trim()).error;
      assert.equal(error.code, 'NOT_FOUND');
      assert.match(error.message, /wrok/);
      assert.match(error.message, /main, work/);
    }
    assert.equal(fs.existsSync(path.join(state, 'agents', 'wrok')), false);
    // A configured agent with no sessions yet lists empty, and so does a store left on disk by an agent since removed.
    const configured = await cli('sessions', '--agent', 'work', '--json');
    assert.equal(configured.code, 0, configured.stderr);
    fs.mkdirSync(path.join(state, 'agents', 'old', 'sessions'), { recursive: true });
    fs.writeFileSync(path.join(state, 'agents', 'old', 'sessions', 'sessions.json'), '{}');
    const leftOver = await cli('sessions', '--agent', 'old', '--json');
    assert.equal(leftOver.code, 0, leftOver.stderr);
    assert.equal(jsonLines(leftOver.stdout)[0].count, 0);
  });

  test('--store naming a file that is not there, in a folder that is not there, is NOT_FOUND (66), as for doctor', async () => {
    const nowhere = path.join(state, 'nowhere', 'sessions.json');
    for (const args of [['sessions'], ['sessions', 'list'], ['sessions', 'cleanup', '--dry-run']]) {
      const r = await cli(...args, '--store', nowhere, '--json');
      assert.equal(r.code, 66, `${args.join(' ')}: ${r.stderr}`);
      assert.equal(r.stdout, '');
      assert.equal(JSON.parse(r.stderr.trim()).error.code, 'NOT_FOUND');
    }
    assert.equal(fs.existsSync(path.join(state, 'nowhere')), false);
    // A sessions folder without its sessions.json yet is a store with no sessions.
    const empty = path.join(state, 'empty', 'sessions');
    fs.mkdirSync(empty, { recursive: true });
    const r = await cli('sessions', '--store', path.join(empty, 'sessions.json'), '--json');
    assert.equal(r.code, 0, r.stderr);
    assert.equal(jsonLines(r.stdout)[0].count, 0);
  });

  test('--store names the agent of the file: its own for a configured or agents/<id>/sessions store, else the default agent (never a folder name)', async () => {
    const stores = path.join(state, 'agents');
    const copy = (dir: string, agent: string) => {
      fs.mkdirSync(dir, { recursive: true });
      for (const name of fs.readdirSync(path.join(stores, agent, 'sessions'))) {
        const from = path.join(stores, agent, 'sessions', name);
        if (fs.statSync(from).isFile()) fs.copyFileSync(from, path.join(dir, name));
      }
      return path.join(dir, 'sessions.json');
    };
    const cases: [string, string][] = [
      [path.join(stores, 'work', 'sessions', 'sessions.json'), 'work'],
      [copy(path.join(state, 'backup-2026', 'agents', 'work', 'sessions'), 'work'), 'work'],
      [copy(path.join(state, 'snapshot', 'main-copy'), 'main'), 'main'],
    ];
    for (const [storePath, agentId] of cases) {
      const listing = jsonLines((await cli('sessions', '--store', storePath, '--json')).stdout)[0];
      assert.deepEqual(listing.stores, [{ agentId, path: storePath }], storePath);
      assert.ok(listing.count > 0, storePath);
      for (const row of listing.sessions) assert.equal(row.agentId, agentId, `${storePath}: ${row.key}`);
      const cleanup = jsonLines((await cli('sessions', 'cleanup', '--store', storePath, '--dry-run', '--json')).stdout)[0];
      assert.equal(cleanup.agentId, agentId, storePath);
      const key = listing.sessions[0].key;
      const shown = await cli('sessions', 'show', key, '--store', storePath, '--json');
      assert.equal(shown.code, 0, shown.stderr);
      assert.equal(jsonLines(shown.stdout)[0].agentId, agentId, storePath);
    }
  });

  test('agents sharing one store (session.store without {agentId}): each session listed once, under the agent its key names', async () => {
    const shared = tempDir();
    const sharedConfig = writeJson(path.join(shared, 'c.json'), {
      agents: { defaults: { runner: { command: 'builtin:echo' } }, list: [{ id: 'main', default: true }, { id: 'work' }] },
      bindings: [{ agentId: 'work', match: { channel: 'slack', accountId: '*' } }],
      session: { store: 'shared/sessions.json' },
    });
    const run = (...args: string[]) => runCli([...args, '--state-dir', shared, '--config', sharedConfig]);
    assert.equal((await run('send', 'a', '--channel', 'telegram')).code, 0);
    assert.equal((await run('send', 'b', '--channel', 'slack')).code, 0);
    const storePath = path.join(shared, 'shared', 'sessions.json');
    assert.deepEqual(Object.keys(JSON.parse(fs.readFileSync(storePath, 'utf8'))).sort(), ['agent:main:main', 'agent:work:main']);
    for (const args of [['sessions', '--all-agents'], ['sessions'], ['sessions', '--agent', 'work'], ['sessions', '--store', storePath]]) {
      const listing = jsonLines((await run(...args, '--json')).stdout)[0];
      assert.equal(listing.count, 2, args.join(' '));
      assert.deepEqual(listing.stores.map((s: { path: string }) => s.path), [storePath], args.join(' '));
      assert.deepEqual(
        listing.sessions.map((s: { agentId: string; key: string }) => [s.agentId, s.key]).sort(),
        [
          ['main', 'agent:main:main'],
          ['work', 'agent:work:main'],
        ],
        args.join(' '),
      );
    }
    const cleanup = jsonLines((await run('sessions', 'cleanup', '--all-agents', '--dry-run', '--json')).stdout)[0];
    assert.equal(cleanup.stores.length, 1);
    assert.equal(cleanup.stores[0].beforeCount, 2);
    // The queue names the same agent for a waiting message.
    assert.equal((await runCli(['ingest', '--no-wait', '--state-dir', shared, '--config', sharedConfig], { input: '{"channel":"slack","text":"later","runId":"w-1"}\n' })).code, 0);
    const queued = jsonLines((await run('queue', '--json')).stdout)[0];
    assert.deepEqual(queued.items.map((i: { runId: string; agentId: string; sessionKey: string }) => [i.runId, i.agentId, i.sessionKey]), [['w-1', 'work', 'agent:work:main']]);
  });

  test('show reports freshness against the reset policy', async () => {
    const fresh = jsonLines((await cli('sessions', 'show', 'agent:main:direct:1', '--json', '--now', '2026-11-30T10:30:00Z')).stdout)[0];
    assert.equal(fresh.freshness.fresh, true);
    assert.equal(fresh.freshness.nextResetAt, Date.parse('2026-11-30T11:00:00Z') + 1);
    assert.equal(fresh.transcript.records, 2);
    const stale = jsonLines((await cli('sessions', 'show', 'agent:main:direct:1', '--json', '--now', '2026-11-30T11:30:00Z')).stdout)[0];
    assert.deepEqual([stale.freshness.fresh, stale.freshness.staleReason], [false, 'idle']);
  });

  test('a missing session is NOT_FOUND (66)', async () => {
    const r = await cli('sessions', 'show', 'agent:main:direct:nobody', '--json');
    assert.equal(r.code, 66);
    assert.equal(JSON.parse(r.stderr.trim()).error.code, 'NOT_FOUND');
  });

  test('transcript prints the conversation, --tail limits it, damaged lines are counted on stderr', async () => {
    const shown = jsonLines((await cli('sessions', 'show', 'agent:main:direct:2', '--json')).stdout)[0];
    fs.appendFileSync(shown.transcriptPath, '{"type":"message","torn');
    const r = await cli('sessions', 'transcript', 'agent:main:direct:2');
    assert.equal(r.code, 0);
    assert.match(r.stdout, /user via telegram: hi/);
    assert.match(r.stderr, /skipped 1 damaged line/);
    const raw = jsonLines((await cli('sessions', 'transcript', shown.entry.sessionId, '--raw', '--tail', '1')).stdout);
    assert.equal(raw.length, 1);
    assert.equal(raw[0].message.content[0].text, 'hi');
  });

  test('reset rotates now and archives; pin/unpin; delete archives and removes the entry', async () => {
    const before = jsonLines((await cli('sessions', 'show', 'agent:work:slack:channel:c1', '--json')).stdout)[0];
    const reset = jsonLines((await cli('reset', 'agent:work:slack:channel:c1', '--reason', 'new sprint', '--json')).stdout)[0];
    assert.equal(reset.previousSessionId, before.entry.sessionId);
    assert.notEqual(reset.sessionId, before.entry.sessionId);
    assert.ok(fs.existsSync(reset.archivedTo));
    assert.match(path.basename(reset.archivedTo), new RegExp(`^${before.entry.sessionId}\\.jsonl\\.reset\\.\\d{4}-\\d{2}-\\d{2}T\\d{2}-\\d{2}-\\d{2}\\.\\d{3}Z$`));

    await cli('sessions', 'pin', 'agent:main:direct:1');
    let row = jsonLines((await cli('sessions', '--json')).stdout)[0].sessions.find((s: { key: string }) => s.key === 'agent:main:direct:1');
    assert.equal(row.pinned, true);
    await cli('sessions', 'unpin', 'agent:main:direct:1');
    row = jsonLines((await cli('sessions', '--json')).stdout)[0].sessions.find((s: { key: string }) => s.key === 'agent:main:direct:1');
    assert.equal(row.pinned, false);

    const deleted = jsonLines((await cli('sessions', 'delete', 'agent:main:direct:1', '--json')).stdout)[0];
    assert.ok(fs.existsSync(deleted.archivedTo));
    assert.match(deleted.archivedTo, /\.deleted\./);
    assert.equal((await cli('sessions', 'show', 'agent:main:direct:1')).code, 66);
  });

  test('route explain carries the session section', async () => {
    const r = await cli('route', 'explain', '--channel', 'telegram', '--peer', 'direct:2', '--json', '--now', '2026-11-30T12:00:00Z');
    const explained = jsonLines(r.stdout)[0];
    assert.equal(explained.session.exists, true);
    assert.equal(explained.session.fresh, false);
    assert.equal(explained.session.staleReason, 'idle');
    assert.deepEqual(explained.queue.sources, { mode: 'default', debounceMs: 'default', cap: 'default', dropPolicy: 'default' });
    assert.equal(explained.send.decision, 'allow');
    const none = jsonLines((await cli('route', 'explain', '--channel', 'telegram', '--peer', 'direct:77', '--json')).stdout)[0];
    assert.equal(none.session.exists, false);
  });
});

describe('locks command', () => {
  test('lists nothing on an idle store and refuses to release a lock that is not there', async () => {
    const state = tempDir();
    const list = await runCli(['locks', '--json', '--state-dir', state]);
    assert.equal(list.code, 0);
    assert.deepEqual(jsonLines(list.stdout)[0], { locks: [] });
    const release = await runCli(['locks', 'release', path.join(state, 'nothing.jsonl'), '--json', '--state-dir', state]);
    assert.equal(release.code, 66);
    assert.match(JSON.parse(release.stderr.trim()).error.message, /^no lock at .*nothing\.jsonl/, 'a path is answered as a path, not as a session name');
  });
});

test('locks release PATH clears the lock of a dead holder whose transcript is gone', async () => {
  const state = tempDir();
  const r = await runCli(['send', 'hi', '--channel', 'x', '--state-dir', state, '--json']);
  const transcript = path.join(state, 'agents', 'main', 'sessions', `${jsonLines(r.stdout)[0].sessionId}.jsonl`);
  const holder = spawn(process.execPath, [fileURLToPath(new URL('../fixtures/lock-holder-child.js', import.meta.url)), JSON.stringify({ target: transcript, behaviour: 'hold', sessionKey: 'agent:main:main', runId: 'run-8' })], { stdio: ['pipe', 'pipe', 'inherit'] });
  await new Promise<void>((resolve) => holder.stdout.on('data', (d: Buffer) => d.toString().includes('held') && resolve()));
  const gone = new Promise((resolve) => holder.on('exit', resolve));
  holder.kill('SIGKILL');
  await gone;
  fs.rmSync(transcript);
  const released = await runCli(['locks', 'release', transcript, '--json', '--state-dir', state]);
  assert.equal(released.code, 0, released.stderr);
  assert.equal(jsonLines(released.stdout)[0].lockPath, `${transcript}.lock`);
  assert.equal(fs.existsSync(`${transcript}.lock`), false);
});

test('locks shows a live holder; release refuses it (75) unless --force', async () => {
  const state = tempDir();
  const r = await runCli(['send', 'hi', '--channel', 'x', '--state-dir', state, '--json']);
  const { sessionId } = jsonLines(r.stdout)[0];
  const transcript = path.join(state, 'agents', 'main', 'sessions', `${sessionId}.jsonl`);
  const holder = spawn(process.execPath, [fileURLToPath(new URL('../fixtures/lock-holder-child.js', import.meta.url)), JSON.stringify({ target: transcript, behaviour: 'hold', sessionKey: 'agent:main:main', runId: 'run-7' })], { stdio: ['pipe', 'pipe', 'inherit'] });
  try {
    await new Promise<void>((resolve) => holder.stdout.on('data', (d: Buffer) => d.toString().includes('held') && resolve()));
    const listed = jsonLines((await runCli(['locks', '--json', '--state-dir', state])).stdout)[0].locks;
    assert.equal(listed.length, 1);
    assert.equal(listed[0].owner.pid, holder.pid);
    assert.equal(listed[0].owner.runId, 'run-7');
    const refused = await runCli(['locks', 'release', 'agent:main:main', '--json', '--state-dir', state]);
    assert.equal(refused.code, 75);
    assert.equal(JSON.parse(refused.stderr.trim()).error.code, 'SESSION_BUSY');
    const forced = await runCli(['locks', 'release', 'agent:main:main', '--force', '--json', '--state-dir', state]);
    assert.equal(forced.code, 0, forced.stderr);
    assert.equal(jsonLines(forced.stdout)[0].forced, true);
    assert.deepEqual(jsonLines((await runCli(['locks', '--json', '--state-dir', state])).stdout)[0].locks, []);
  } finally {
    holder.kill('SIGKILL');
  }
});

describe('a reset and what waited for the old instance', () => {
  test('sessions reset expires the queued messages of the old instance, reports them, records them once, and leaves nothing for later', async () => {
    const state = tempDir('sb-reset-queue-');
    const config = writeJson(path.join(state, 'c.json'), { agents: { defaults: { runner: { command: 'builtin:echo' } } } });
    const cli = (args: string[], input?: string) => runCli([...args, '--state-dir', state, '--config', config], input === undefined ? {} : { input });
    // --no-wait: nothing starts, both wait in the durable queue.
    const queued = await cli(['ingest', '--no-wait'], `${line({ channel: 'telegram', peer: 'direct:1', text: 'one', runId: 'r1' })}\n${line({ channel: 'telegram', peer: 'direct:1', text: 'two', runId: 'r2' })}\n`);
    assert.deepEqual(jsonLines(queued.stdout).map((e) => e.disposition), ['queued', 'queued']);

    const reset = await cli(['sessions', 'reset', 'agent:main:main', '--yes', '--json']);
    assert.equal(reset.code, 0, reset.stderr);
    const outcome = jsonLines(reset.stdout)[0];
    assert.deepEqual(outcome.expired.map((e: { type: string; runId: string; reason: string; sessionId: string }) => [e.type, e.runId, e.reason, e.sessionId]), [
      ['expired', 'r1', 'rebind', outcome.previousSessionId],
      ['expired', 'r2', 'rebind', outcome.previousSessionId],
    ]);
    const listed = await cli(['queue', 'list', '--json']);
    assert.deepEqual(jsonLines(listed.stdout), [{ items: [], active: [] }], 'nothing left waiting');

    // The next message runs alone; nobody reports r1/r2 a second time.
    const next = await cli(['ingest'], `${line({ channel: 'telegram', peer: 'direct:1', text: 'three', runId: 'r3' })}\n`);
    assert.equal(next.code, 0, next.stderr);
    assert.deepEqual(jsonLines(next.stdout).filter((e) => e.type === 'expired'), []);
    const store = JSON.parse(fs.readFileSync(path.join(state, 'agents', 'main', 'sessions', 'sessions.json'), 'utf8'));
    const records = fs.readFileSync(path.join(state, 'agents', 'main', 'sessions', store['agent:main:main'].sessionFile), 'utf8').trim().split('\n').map((l) => JSON.parse(l));
    assert.deepEqual(records.filter((r) => r.customType === 'expired').map((r) => r.data.runId), ['r1', 'r2'], 'recorded once, after the reset notice');
    assert.equal(records[1].type, 'reset_notice');

    const human = await cli(['ingest', '--no-wait'], `${line({ channel: 'telegram', peer: 'direct:1', text: 'four', runId: 'r4' })}\n`);
    assert.equal(human.code, 0, human.stderr);
    const said = await cli(['sessions', 'reset', 'agent:main:main', '--yes']);
    assert.match(said.stdout, /1 waiting message\(s\) of the old instance expired: r4 \(telegram:direct:1\)/);
  });

  test('maintain\'s due daily reset expires them the same way and says so', async () => {
    const state = tempDir('sb-maintain-queue-');
    const config = writeJson(path.join(state, 'c.json'), { session: { reset: { mode: 'daily', atHour: 4 } }, agents: { defaults: { runner: { command: 'builtin:echo' } } } });
    const cli = (args: string[], input?: string) => runCli([...args, '--state-dir', state, '--config', config], input === undefined ? {} : { input });
    const queued = await cli(['ingest', '--no-wait', '--now', '2026-11-30T10:00:00Z'], `${line({ channel: 'telegram', peer: 'direct:1', text: 'one', runId: 'q1' })}\n`);
    assert.deepEqual(jsonLines(queued.stdout).map((e) => e.disposition), ['queued']);
    const maintained = await cli(['maintain', '--json', '--now', '2026-12-01T05:00:00Z']);
    assert.equal(maintained.code, 0, maintained.stderr);
    const done = jsonLines(maintained.stdout)[0].resets.reset;
    assert.deepEqual(done.map((r: { sessionKey: string; expired: { runId: string }[] }) => [r.sessionKey, r.expired.map((e) => e.runId)]), [['agent:main:main', ['q1']]]);
    const text = await cli(['queue', 'list', '--json']);
    assert.deepEqual(jsonLines(text.stdout), [{ items: [], active: [] }]);
  });
});

describe('a key that keeps its case (a Signal group, a Matrix room)', () => {
  test('is found as sessions lists it, by show, transcript, queue list and reset', async () => {
    const dir = tempDir();
    const config = writeJson(path.join(dir, 'c.json'), { session: { dmScope: 'per-peer' } });
    const common = ['--state-dir', dir, '--config', config];
    const r = await runCli(['ingest', '--no-wait', ...common], { input: line({ channel: 'signal', peer: { kind: 'group', id: 'AbCdEf' }, text: 'hi', messageId: 'm1' }) });
    assert.equal(r.code, 0, r.stderr);
    const listed = jsonLines((await runCli(['sessions', '--json', ...common])).stdout)[0].sessions.map((row: { key: string }) => row.key);
    assert.deepEqual(listed, ['agent:main:signal:group:AbCdEf']);
    for (const key of [listed[0], 'signal:group:AbCdEf']) {
      const shown = await runCli(['sessions', 'show', key, '--json', ...common]);
      assert.equal(shown.code, 0, `${key}: ${shown.stderr}`);
      assert.equal(jsonLines(shown.stdout)[0].key, listed[0]);
      const transcript = await runCli(['sessions', 'transcript', key, '--json', ...common]);
      assert.equal(transcript.code, 0, transcript.stderr);
      assert.ok(jsonLines(transcript.stdout).some((record) => record.message?.content?.[0]?.text === 'hi'));
    }
    const queue = await runCli(['queue', 'list', '--session', listed[0], '--json', ...common]);
    assert.equal(queue.code, 0, queue.stderr);
    const reset = await runCli(['sessions', 'reset', listed[0], '--yes', '--json', ...common]);
    assert.equal(reset.code, 0, reset.stderr);
    // The lower-cased key is another address, which no session has.
    const other = await runCli(['sessions', 'show', 'agent:main:signal:group:abcdef', '--json', ...common]);
    assert.equal(other.code, 66);
  });
});

describe('sessions show on a session a policy cannot judge', () => {
  test('says which policy applies and why no reset is due, not "no reset policy"', async () => {
    const dir = tempDir();
    const common = (config: string) => ['--state-dir', dir, '--config', config];
    const daily = writeJson(path.join(dir, 'daily.json'), { session: { dmScope: 'per-peer', reset: { mode: 'daily', atHour: 4 } } });
    const r = await runCli(['ingest', '--no-wait', ...common(daily)], { input: line({ channel: 'telegram', peer: { kind: 'direct', id: 'a1' }, text: 'hi' }) });
    assert.equal(r.code, 0, r.stderr);
    // As OpenClaw's own reset leaves a row: neither of the times a reset is measured from.
    const storeFile = path.join(dir, 'agents', 'main', 'sessions', 'sessions.json');
    const store = JSON.parse(fs.readFileSync(storeFile, 'utf8'));
    delete store['agent:main:direct:a1'].sessionStartedAt;
    delete store['agent:main:direct:a1'].lastInteractionAt;
    fs.writeFileSync(storeFile, JSON.stringify(store, null, 2));
    // Nor a transcript header with a time (which would be the start, as for OpenClaw).
    const transcript = path.join(dir, 'agents', 'main', 'sessions', store['agent:main:direct:a1'].sessionFile);
    const lines = fs.readFileSync(transcript, 'utf8').split('\n');
    const { timestamp: _dropped, ...header } = JSON.parse(lines[0]!);
    lines[0] = JSON.stringify(header);
    fs.writeFileSync(transcript, lines.join('\n'));
    const shown = await runCli(['sessions', 'show', 'agent:main:direct:a1', ...common(daily)]);
    assert.equal(shown.code, 0, shown.stderr);
    const fresh = shown.stdout.split('\n').find((row) => row.startsWith('fresh'));
    assert.match(fresh ?? '', /daily policy, but no reset is due/);
    const none = writeJson(path.join(dir, 'none.json'), { session: { dmScope: 'per-peer', reset: { mode: 'none' } } });
    const plain = await runCli(['sessions', 'show', 'agent:main:direct:a1', ...common(none)]);
    assert.match(plain.stdout.split('\n').find((row) => row.startsWith('fresh')) ?? '', /no reset policy/);
  });
});
