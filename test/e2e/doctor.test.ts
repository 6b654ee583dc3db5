// `switchboard doctor [--repair]` end to end: stores built by the real CLI, damaged the ways a
// crash, a full disk or a careless hand damages them, then checked and repaired by the real CLI.
// Asserts problem kinds and files, exit statuses and file contents — never wording.

import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { BIN, jsonLines, runCli, tempDir, writeJson } from '../helpers.js';

const PROBLEMS_EXIT = 65;
const line = (message: Record<string, unknown>) => JSON.stringify(message);
const roots: string[] = [];
after(() => {
  for (const dir of roots) fs.rmSync(dir, { recursive: true, force: true });
});

function newState(): { state: string; config: string } {
  const state = tempDir('sb-doctor-');
  roots.push(state);
  const config = writeJson(path.join(state, 'c.json'), { session: { dmScope: 'per-peer' } });
  return { state, config };
}

function sessionsDir(state: string, agent = 'main'): string {
  return path.join(state, 'agents', agent, 'sessions');
}

function cli(state: string, config: string, ...args: string[]) {
  return runCli([...args, '--state-dir', state, '--config', config]);
}

/** From a file, so that the messages form one batch (one sessions.json write) whatever the pipe does. */
async function ingest(state: string, config: string, now: string, messages: Record<string, unknown>[]): Promise<any[]> {
  const input = path.join(state, `input-${Math.random().toString(36).slice(2)}.ndjson`);
  fs.writeFileSync(input, `${messages.map(line).join('\n')}\n`);
  const r = await runCli(['ingest', input, '--state-dir', state, '--config', config, '--now', now]);
  fs.unlinkSync(input);
  assert.equal(r.code, 0, r.stderr);
  return jsonLines(r.stdout);
}

async function doctor(state: string, config: string, ...args: string[]): Promise<{ code: number | null; report: any; stderr: string }> {
  const r = await cli(state, config, 'doctor', '--json', ...args);
  assert.ok(r.stdout.trim() !== '', `doctor printed a report (exit ${r.code}): ${r.stderr}`);
  return { code: r.code, report: jsonLines(r.stdout)[0], stderr: r.stderr };
}

function readStore(state: string): Record<string, any> {
  return JSON.parse(fs.readFileSync(path.join(sessionsDir(state), 'sessions.json'), 'utf8'));
}

/** Independent of the code under test: the complete lines of a file that are records. */
function recordLines(bytes: Buffer | string): string[] {
  const text = typeof bytes === 'string' ? bytes : bytes.toString('utf8');
  const complete = text.endsWith('\n') ? text : text.slice(0, text.lastIndexOf('\n') + 1);
  return complete.split('\n').filter((candidate) => {
    try {
      const value = JSON.parse(candidate) as unknown;
      return typeof value === 'object' && value !== null && !Array.isArray(value) && typeof (value as { type?: unknown }).type === 'string';
    } catch {
      return false;
    }
  });
}

/** (kind, file name) of every problem, sorted, for set comparisons. */
function kindsAndFiles(report: any): string[] {
  return report.stores.flatMap((s: any) => s.problems.map((p: any) => `${p.kind} ${path.basename(p.file)}`)).sort();
}

/** Every file and folder under dir with its bytes: proves a check wrote nothing. */
function snapshot(dir: string): Map<string, string> {
  const out = new Map<string, string>();
  const walk = (current: string) => {
    for (const entry of fs.readdirSync(current, { withFileTypes: true })) {
      const full = path.join(current, entry.name);
      if (entry.isDirectory()) {
        out.set(`${path.relative(dir, full)}/`, String(fs.statSync(full).mtimeMs));
        walk(full);
      } else out.set(path.relative(dir, full), fs.readFileSync(full).toString('base64'));
    }
  };
  walk(dir);
  return out;
}

/** A pid that belonged to a process that has exited. */
function deadPid(): number {
  const child = spawnSync(process.execPath, ['-e', '0']);
  return child.pid!;
}

function setOld(file: string, ageMs: number): void {
  const when = new Date(Date.now() - ageMs);
  fs.utimesSync(file, when, when);
}

/** A lock folder as a SIGKILLed holder leaves it: owner record of a dead pid, mtime long ago. */
function plantDeadLock(lockPath: string, pid: number, sessionKey: string): void {
  fs.mkdirSync(lockPath);
  const acquiredAt = Date.now() - 3_600_000;
  fs.writeFileSync(
    path.join(lockPath, 'owner.json'),
    JSON.stringify({ version: 1, lockId: `${pid}-0123456789abcdef`, pid, hostname: os.hostname(), processStartTime: acquiredAt - 1_000, acquiredAt, maxHoldMs: 300_000, staleMs: 10_000, sessionKey }),
  );
  setOld(lockPath, 3_600_000);
}

const BACKUP_TS = '2026-11-30T12-00-00.000Z';
const REPAIR_NOW = '2026-11-30T12:00:00Z';

describe('doctor', () => {
  test('a healthy store: exit 0, no problems, and --repair changes nothing', async () => {
    const { state, config } = newState();
    await ingest(state, config, '2026-11-30T10:00:00Z', [{ channel: 'telegram', peer: 'direct:a', text: 'hi' }, { channel: 'telegram', peer: 'direct:b', text: 'yo' }]);
    await ingest(state, config, '2026-11-30T10:05:00Z', [{ channel: 'telegram', peer: 'direct:a', text: 'again' }]);
    const checked = await doctor(state, config);
    assert.equal(checked.code, 0, checked.stderr);
    assert.equal(checked.report.ok, true);
    assert.equal(checked.report.summary.problems, 0);
    assert.deepEqual(checked.report.stores.map((s: any) => [s.agentId, s.sessions, s.transcripts]), [['main', 2, 2]]);
    const before = snapshot(sessionsDir(state));
    const repaired = await doctor(state, config, '--repair');
    assert.equal(repaired.code, 0);
    assert.deepEqual(repaired.report.stores[0].changes, []);
    assert.deepEqual(snapshot(sessionsDir(state)), before);
    // Text output, selection flags, and a --store that names nothing.
    const text = await cli(state, config, 'doctor', '--agent', 'main');
    assert.equal(text.code, 0, text.stderr);
    assert.match(text.stdout, /sessions\.json/);
    assert.equal((await cli(state, config, 'doctor', '--agent', 'main', '--all-agents')).code, 2);
    const nowhere = await cli(state, config, 'doctor', '--store', path.join(state, 'nowhere', 'sessions.json'), '--json');
    assert.equal(nowhere.code, 66);
    assert.equal(JSON.parse(nowhere.stderr.trim()).error.code, 'NOT_FOUND');
  });

  test('a session whose messages all still wait in its queue has no transcript yet: not a problem; one that recorded a message before is', async () => {
    const state = tempDir('sb-doctor-');
    roots.push(state);
    const config = writeJson(path.join(state, 'c.json'), { session: { dmScope: 'per-peer' }, agents: { defaults: { runner: { command: 'builtin:echo' } } } });
    const input = path.join(state, 'in.ndjson');
    fs.writeFileSync(input, `${line({ channel: 'telegram', peer: 'direct:q', text: 'waits', messageId: 'q1' })}\n${line({ channel: 'telegram', peer: 'direct:q', text: 'cancelled', messageId: 'q2', runId: 'r2' })}\n`);
    // --no-wait: admitted and queued; nothing drains it, so nothing is recorded yet. The cancel's
    // report waits in the outbox for the session's next drain.
    assert.equal((await runCli(['ingest', input, '--no-wait', '--state-dir', state, '--config', config])).code, 0);
    assert.equal((await cli(state, config, 'queue', 'cancel', 'r2', '--yes')).code, 0);
    const entry = readStore(state)['agent:main:direct:q'];
    assert.equal(entry.queue.length, 1);
    assert.equal(entry.outbox.length, 1);
    assert.equal(fs.existsSync(path.join(sessionsDir(state), entry.sessionFile)), false);
    const checked = await doctor(state, config);
    assert.equal(checked.code, 0, JSON.stringify(checked.report.stores[0].problems));
    const before = snapshot(sessionsDir(state));
    assert.deepEqual((await doctor(state, config, '--repair')).report.stores[0].changes, []);
    assert.deepEqual(snapshot(sessionsDir(state)), before, 'no "history was lost" note ahead of the conversation');

    // The memory names a message besides the queued one: that one was recorded, and its file is gone.
    const store = readStore(state);
    store['agent:main:direct:q'].recentMessageIds = `${Date.now() - 1000} telegram default direct:q  q0\n${store['agent:main:direct:q'].recentMessageIds}`;
    fs.writeFileSync(path.join(sessionsDir(state), 'sessions.json'), JSON.stringify(store, null, 2));
    const lost = await doctor(state, config);
    assert.equal(lost.code, PROBLEMS_EXIT);
    assert.deepEqual(kindsAndFiles(lost.report), [`missing-transcript ${entry.sessionFile}`]);
  });

  test('reports every kind of damage (exit 65, writes nothing); --repair fixes all, keeps the original bytes, loses no complete record', async () => {
    const { state, config } = newState();
    const dir = sessionsDir(state);
    const peers = ['a', 'b', 'c', 'd', 'e', 'f'];
    await ingest(state, config, '2026-11-30T10:00:00Z', peers.map((p) => ({ channel: 'telegram', peer: `direct:${p}`, text: `hello from ${p}` })));
    await ingest(state, config, '2026-11-30T10:05:00Z', ['a', 'b', 'c'].flatMap((p) => [1, 2].map((n) => ({ channel: 'telegram', peer: `direct:${p}`, text: `${p} says ${n}` }))));
    // An older instance of e that a rotation left under its own name (the archive renamed back).
    const eOld = readStore(state)['agent:main:direct:e'].sessionFile as string;
    const reset = await cli(state, config, 'reset', 'agent:main:direct:e', '--json', '--now', '2026-11-30T10:10:00Z');
    assert.equal(reset.code, 0, reset.stderr);
    fs.renameSync(jsonLines(reset.stdout)[0].archivedTo, path.join(dir, eOld));
    // A transcript from elsewhere whose key has no entry here.
    const other = newState();
    const [ghostResult] = await ingest(other.state, other.config, '2026-11-30T09:00:00Z', [{ channel: 'telegram', peer: 'direct:ghost', text: 'boo' }]);
    const ghostName = `${ghostResult.sessionId}.jsonl`;
    fs.copyFileSync(path.join(sessionsDir(other.state), ghostName), path.join(dir, ghostName));

    const store = readStore(state);
    const fileOf = (peer: string) => path.join(dir, store[`agent:main:direct:${peer}`].sessionFile);
    // a: torn tail; b: a garbage line in the middle; c: a line of NUL bytes; d: transcript gone.
    fs.appendFileSync(fileOf('a'), '{"type":"message","id":"torn-1","parentId":null,"mess');
    const bLines = fs.readFileSync(fileOf('b'), 'utf8').split('\n');
    fs.writeFileSync(fileOf('b'), [...bLines.slice(0, 2), 'this is not json {', ...bLines.slice(2)].join('\n'));
    const cLines = fs.readFileSync(fileOf('c'), 'utf8').split('\n');
    fs.writeFileSync(fileOf('c'), [cLines[0], '\0'.repeat(64), ...cLines.slice(1)].join('\n'));
    fs.unlinkSync(fileOf('d'));
    // f: nothing but garbage (no complete record survives): moved aside, then started again.
    fs.writeFileSync(fileOf('f'), '\0\0\0\0\n{"type":"mess\n');
    // Leftovers of killed processes: a lock (on b, which also needs a rewrite under that lock),
    // a release tombstone, old temp files, and one young temp file that must be left alone.
    const pid = deadPid();
    plantDeadLock(`${fileOf('b')}.lock`, pid, 'agent:main:direct:b');
    const tombstone = `${fileOf('c')}.lock-gone-${pid}-0a1b2c3d4e5f`;
    fs.mkdirSync(tombstone);
    fs.writeFileSync(path.join(tombstone, 'owner.json'), '{}');
    const oldTemp = path.join(dir, 'sessions.json.3735928559');
    fs.writeFileSync(oldTemp, '{"half":');
    setOld(oldTemp, 120_000);
    const oldBakTemp = path.join(dir, 'sessions.json.bak.tmp');
    fs.writeFileSync(oldBakTemp, '{}');
    setOld(oldBakTemp, 120_000);
    const youngTemp = path.join(dir, 'sessions.json.42');
    fs.writeFileSync(youngTemp, '{');

    const damaged = new Map(['a', 'b', 'c', 'f'].map((p) => [p, fs.readFileSync(fileOf(p))]));
    const before = snapshot(dir);
    const checked = await doctor(state, config);
    assert.equal(checked.code, PROBLEMS_EXIT);
    assert.equal(checked.report.ok, false);
    const name = (peer: string) => path.basename(fileOf(peer));
    assert.deepEqual(
      kindsAndFiles(checked.report),
      [
        `torn-tail ${name('a')}`,
        `malformed-lines ${name('b')}`,
        `malformed-lines ${name('c')}`,
        `malformed-lines ${name('f')}`,
        `missing-transcript ${name('d')}`,
        `orphan-transcript ${eOld}`,
        `orphan-transcript ${ghostName}`,
        `stale-lock ${name('b')}.lock`,
        `lock-tombstone ${path.basename(tombstone)}`,
        'temp-file sessions.json.3735928559',
        'temp-file sessions.json.bak.tmp',
      ].sort(),
    );
    const problems = checked.report.stores[0].problems;
    const find = (kind: string, file: string) => problems.find((p: any) => p.kind === kind && path.basename(p.file) === file);
    assert.equal(find('malformed-lines', name('b')).line, 3);
    assert.deepEqual(find('malformed-lines', name('c')).lines, [2]);
    assert.equal(find('torn-tail', name('a')).line, recordLines(damaged.get('a')!).length + 1);
    assert.ok(problems.every((p: any) => p.repairable === true && !('repaired' in p)));
    assert.deepEqual(snapshot(dir), before, 'a check writes nothing');

    const repaired = await doctor(state, config, '--repair', '--now', REPAIR_NOW);
    assert.equal(repaired.code, 0, JSON.stringify(repaired.report.stores[0].problems.filter((p: any) => !p.repaired)));
    assert.equal(repaired.report.ok, true);
    // …plus f's missing transcript, found once its garbage was moved aside.
    assert.deepEqual(kindsAndFiles(repaired.report), [...kindsAndFiles(checked.report), `missing-transcript ${name('f')}`].sort());
    assert.equal(repaired.report.summary.repaired, 12);
    assert.deepEqual(fs.readFileSync(`${fileOf('f')}.bak-${BACKUP_TS}`), damaged.get('f'));
    for (const peer of ['a', 'b', 'c']) {
      const file = fileOf(peer);
      const backup = `${file}.bak-${BACKUP_TS}`;
      assert.deepEqual(fs.readFileSync(backup), damaged.get(peer), `${peer}: the original bytes are kept`);
      const now = fs.readFileSync(file, 'utf8');
      assert.ok(now.endsWith('\n'));
      assert.deepEqual(now.split('\n').slice(0, -1), recordLines(damaged.get(peer)!), `${peer}: every complete record, in order, nothing else`);
    }
    for (const peer of ['d', 'f']) {
      const recreated = jsonLines(fs.readFileSync(fileOf(peer), 'utf8'));
      const key = `agent:main:direct:${peer}`;
      assert.deepEqual([recreated.length, recreated[0].type, recreated[0].id, recreated[0].sessionKey], [2, 'session', store[key].sessionId, key]);
      assert.deepEqual([recreated[1].type, recreated[1].customType, recreated[1].parentId], ['custom', 'doctor', null]);
    }
    const after = readStore(state);
    assert.equal(after['agent:main:direct:ghost'].sessionId, ghostResult.sessionId);
    assert.equal(after['agent:main:direct:ghost'].sessionFile, ghostName);
    assert.equal(after['agent:main:direct:e'].sessionId, store['agent:main:direct:e'].sessionId, 'the current instance of e stays current');
    assert.ok(!fs.existsSync(path.join(dir, eOld)));
    assert.ok(fs.existsSync(path.join(dir, `${eOld}.reset.${BACKUP_TS}`)), 'the older instance is archived');
    for (const gone of [`${fileOf('b')}.lock`, tombstone, oldTemp, oldBakTemp]) assert.ok(!fs.existsSync(gone), `${path.basename(gone)} removed`);
    assert.ok(fs.existsSync(youngTemp), 'a temp file younger than a minute is left alone');
    fs.unlinkSync(youngTemp);

    const clean = await doctor(state, config);
    assert.equal(clean.code, 0, JSON.stringify(clean.report.stores[0].problems));
    assert.equal(clean.report.summary.problems, 0);
    const listing = jsonLines((await cli(state, config, 'sessions', '--json')).stdout)[0];
    assert.equal(listing.count, 7);
    const more = await ingest(state, config, '2026-11-30T12:30:00Z', ['a', 'b', 'c', 'd', 'f'].map((p) => ({ channel: 'telegram', peer: `direct:${p}`, text: `${p} is back` })));
    assert.ok(more.every((event) => event.type === 'result' && event.disposition === 'recorded'));
    for (const peer of ['a', 'b', 'c', 'd', 'f']) {
      const records = jsonLines(fs.readFileSync(fileOf(peer), 'utf8'));
      assert.equal(records.at(-1).message.content[0].text, `${peer} is back`);
      assert.equal(records.at(-1).parentId, records.at(-2).id, `${peer}: the chain continues`);
    }
    assert.equal((await doctor(state, config)).code, 0);
  });

  test('sessions.json empty, truncated, garbage, NULs or gone: STORE_CORRUPT until --repair restores .bak or rebuilds from headers', async () => {
    const base = newState();
    await ingest(base.state, base.config, '2026-11-30T10:00:00Z', [{ channel: 'telegram', peer: 'direct:p', text: 'one' }, { channel: 'telegram', peer: 'direct:q', text: 'two' }]);
    // The second write: a new key r and a rotation of p. sessions.json.bak is one write behind.
    await ingest(base.state, base.config, '2026-11-30T10:30:00Z', [{ channel: 'telegram', peer: 'direct:r', text: 'three' }, { channel: 'telegram', peer: 'direct:p', text: '/new' }]);
    const good = readStore(base.state);
    const backup = JSON.parse(fs.readFileSync(path.join(sessionsDir(base.state), 'sessions.json.bak'), 'utf8'));
    assert.deepEqual(Object.keys(backup).sort(), ['agent:main:direct:p', 'agent:main:direct:q']);
    assert.notEqual(backup['agent:main:direct:p'].sessionId, good['agent:main:direct:p'].sessionId);
    const idsOf = (store: Record<string, any>) => Object.fromEntries(Object.entries(store).map(([key, entry]) => [key, entry.sessionId]));
    const goodBytes = fs.readFileSync(path.join(sessionsDir(base.state), 'sessions.json'));
    const damages: Record<string, Buffer | null> = {
      empty: Buffer.alloc(0),
      truncated: goodBytes.subarray(0, Math.floor(goodBytes.length / 2)),
      garbage: Buffer.from('<<<garbage>>>'),
      nul: Buffer.alloc(goodBytes.length),
      missing: null,
    };

    const cases = Object.entries(damages).flatMap(([damage, bytes]) => [true, false].map((withBackup) => ({ damage, bytes, withBackup })));
    // A few at a time: each case is three or four short CLI runs.
    const inPool = async <T,>(items: T[], limit: number, task: (item: T) => Promise<void>) => {
      let next = 0;
      await Promise.all(Array.from({ length: limit }, async () => {
        while (next < items.length) await task(items[next++]!);
      }));
    };
    await inPool(
      cases,
      4,
      async ({ damage, bytes, withBackup }) => {
        const label = `${damage}, ${withBackup ? 'good .bak' : 'no usable .bak'}`;
        const state = tempDir('sb-doctor-');
        roots.push(state);
        fs.cpSync(base.state, state, { recursive: true });
        const config = path.join(state, 'c.json');
        const dir = sessionsDir(state);
        const storePath = path.join(dir, 'sessions.json');
        if (bytes === null) fs.unlinkSync(storePath);
        else fs.writeFileSync(storePath, bytes);
        if (!withBackup) {
          if (damage === 'garbage') fs.writeFileSync(`${storePath}.bak`, '{"agent:main:direct:p": 42}');
          else fs.unlinkSync(`${storePath}.bak`);
        }
        if (withBackup && bytes !== null) {
          // (one variant each is enough: the other half lists the sessions after the repair)
          const refused = await cli(state, config, 'sessions', '--json');
          assert.equal(refused.code, 65, label);
          assert.equal(JSON.parse(refused.stderr.trim()).error.code, 'STORE_CORRUPT', label);
        }

        if (withBackup) {
          // (what a check finds does not depend on the .bak: once per damage)
          const checked = await doctor(state, config);
          assert.equal(checked.code, PROBLEMS_EXIT, label);
          assert.deepEqual(kindsAndFiles(checked.report), [`${bytes === null ? 'store-missing' : 'store-corrupt'} sessions.json`], label);
          if (bytes === null) assert.ok(!fs.existsSync(storePath), `${label}: a check writes nothing`);
          else assert.deepEqual(fs.readFileSync(storePath), bytes, `${label}: a check leaves it as it is`);
        }

        const repaired = await doctor(state, config, '--repair', '--now', REPAIR_NOW);
        assert.equal(repaired.code, 0, `${label}: ${JSON.stringify(repaired.report.stores[0].problems)}`);
        if (bytes === null) assert.ok(!fs.existsSync(`${storePath}.corrupt-${BACKUP_TS}`), `${label}: nothing to keep`);
        else assert.deepEqual(fs.readFileSync(`${storePath}.corrupt-${BACKUP_TS}`), bytes, `${label}: the damaged bytes are kept`);
        const changes = repaired.report.stores[0].changes.map((c: any) => `${c.action} ${path.basename(c.file)}`);
        assert.ok(changes.includes(`${withBackup ? 'restored' : 'rebuilt'} sessions.json`), `${label}: ${changes.join(', ')}`);
        const restored = readStore(state);
        // Either way every key comes back with its current instance: from .bak plus the headers
        // of what was written after it (r adopted, p's newer instance), or from the headers alone.
        assert.deepEqual(idsOf(restored), idsOf(good), label);
        if (withBackup) {
          assert.deepEqual(restored['agent:main:direct:q'], good['agent:main:direct:q'], `${label}: q restored whole from .bak`);
        } else {
          for (const [key, entry] of Object.entries(restored)) {
            const header = JSON.parse(fs.readFileSync(path.join(dir, entry.sessionFile), 'utf8').split('\n')[0]!);
            assert.equal(entry.sessionStartedAt, Date.parse(header.timestamp), `${label}: ${key} started when its header says`);
            assert.equal(entry.updatedAt, Math.floor(fs.statSync(path.join(dir, entry.sessionFile)).mtimeMs), `${label}: ${key} updated at its file time`);
          }
        }
        const clean = await doctor(state, config);
        assert.equal(clean.code, 0, `${label}: ${JSON.stringify(clean.report.stores[0].problems)}`);
        if (!withBackup) {
          const listed = await cli(state, config, 'sessions', '--json');
          assert.equal(listed.code, 0, label);
          assert.equal(jsonLines(listed.stdout)[0].count, 3, label);
        }
      },
    );
  });

  test('a key that is not a session key (AGENT:MAIN:MAIN, __proto__, empty) gets no new transcript: repair converges', async () => {
    const { state, config } = newState();
    const dir = sessionsDir(state);
    await ingest(state, config, '2026-11-30T10:00:00Z', [{ channel: 'telegram', peer: 'direct:a', text: 'hi' }]);
    const file = path.join(dir, 'sessions.json');
    const odd = ['AGENT:MAIN:MAIN', '__proto__', ''];
    // Written as text: "__proto__" must be a key of the file, not an object's prototype.
    const rows = odd.map((key, i) => `  ${JSON.stringify(key)}: ${JSON.stringify({ sessionId: `4444444${i}-4444-4444-8444-444444444444`, updatedAt: 1796000000000 })},`);
    fs.writeFileSync(file, fs.readFileSync(file, 'utf8').replace(/^\{/, `{\n${rows.join('\n')}`));
    const before = fs.readdirSync(dir).sort();
    const first = await doctor(state, config, '--repair');
    const missing = first.report.stores[0].problems.filter((p: any) => p.kind === 'missing-transcript');
    assert.deepEqual(missing.map((p: any) => [p.sessionKey, p.repairable]).sort(), odd.map((key) => [key, false]).sort());
    assert.deepEqual(fs.readdirSync(dir).sort(), before, 'no transcript was made for them');
    const second = await doctor(state, config, '--repair');
    assert.deepEqual(second.report.summary.byKind, first.report.summary.byKind, 'the second run finds what the first did, nothing new');
  });

  test('what doctor cannot decide is reported and left alone (exit 65); a live lock is never a problem', async () => {
    const { state, config } = newState();
    const dir = sessionsDir(state);
    const results = await ingest(state, config, '2026-11-30T10:00:00Z', ['a', 'b', 'c'].map((p) => ({ channel: 'telegram', peer: `direct:${p}`, text: `hi ${p}` })));
    const [a, b, c] = results.map((r) => path.join(dir, `${r.sessionId}.jsonl`)) as [string, string, string];
    // An orphan with no header (records only), and an interrupted deletion (transcript archived,
    // entry still there).
    const headless = path.join(dir, 'notes.jsonl');
    fs.writeFileSync(headless, `${fs.readFileSync(a, 'utf8').split('\n')[1]}\n`);
    const archivedC = `${c}.deleted.2026-11-30T10-00-00.000Z`;
    fs.renameSync(c, archivedC);
    const holder = spawn(process.execPath, [fileURLToPath(new URL('../fixtures/lock-holder-child.js', import.meta.url)), JSON.stringify({ target: b, behaviour: 'hold', sessionKey: 'agent:main:direct:b' })], {
      stdio: ['pipe', 'pipe', 'inherit'],
    });
    try {
      await new Promise<void>((resolve) => holder.stdout.on('data', (d: Buffer) => d.toString().includes('held') && resolve()));
      const before = snapshot(dir);
      const repaired = await doctor(state, config, '--repair');
      assert.equal(repaired.code, PROBLEMS_EXIT);
      assert.equal(repaired.report.ok, false);
      assert.deepEqual(kindsAndFiles(repaired.report), [`missing-transcript ${path.basename(c)}`, 'invalid-header notes.jsonl', 'orphan-transcript notes.jsonl'].sort());
      for (const problem of repaired.report.stores[0].problems) assert.deepEqual([problem.repairable, problem.repaired], [false, false]);
      assert.equal((await cli(state, config, 'doctor')).code, PROBLEMS_EXIT, 'the text report exits the same way');
      assert.deepEqual(snapshot(dir), before, 'nothing was changed, the live lock included');
      assert.ok(fs.existsSync(`${b}.lock`));
    } finally {
      holder.kill('SIGKILL');
    }
  });

  test('case 1: SIGKILL an ingest mid-stream; doctor --repair makes the store clean and every acknowledged message is there', async (t) => {
    const { state, config } = newState();
    const dir = sessionsDir(state);
    const env: Record<string, string | undefined> = { ...process.env };
    for (const key of Object.keys(env)) if (key.startsWith('SWITCHBOARD_')) delete env[key];
    const child = spawn(process.execPath, [BIN, 'ingest', '--state-dir', state, '--config', config], { env, stdio: ['pipe', 'pipe', 'pipe'] });
    const results: any[] = [];
    let buffered = '';
    let waiter: (() => void) | undefined;
    child.stdout.on('data', (chunk: Buffer) => {
      buffered += chunk.toString('utf8');
      const lines = buffered.split('\n');
      buffered = lines.pop()!;
      for (const text of lines) if (text.trim() !== '') results.push(JSON.parse(text));
      waiter?.();
    });
    child.stdin.on('error', () => undefined);
    const exited = new Promise<NodeJS.Signals | null>((resolve) => child.on('close', (_code, signal) => resolve(signal)));
    const waitForResults = async (count: number) => {
      const deadline = Date.now() + 15_000;
      while (results.length < count) {
        assert.ok(Date.now() < deadline, `waiting for ${count} results, have ${results.length}`);
        await new Promise<void>((resolve) => {
          waiter = resolve;
          setTimeout(resolve, 200);
        });
      }
    };
    const send = (message: Record<string, unknown>) => child.stdin.write(`${line(message)}\n`);
    try {
      // One at a time first, so that every session has a transcript and several acknowledged lines.
      for (let n = 0; n < 9; n += 1) {
        send({ channel: 'telegram', peer: `direct:k${n % 3}`, text: `message ${n}` });
        await waitForResults(n + 1);
      }
      const big = path.join(dir, `${results[0].sessionId}.jsonl`);
      const sizeBefore = fs.statSync(big).size;
      // Then a burst with a large record, killed as soon as that record starts reaching the file.
      const burst = [
        ...[0, 1, 2].map((n) => ({ channel: 'telegram', peer: `direct:k${(n % 2) + 1}`, text: `burst ${n}` })),
        { channel: 'telegram', peer: 'direct:k0', text: 'x'.repeat(700_000) },
        ...[3, 4, 5, 6].map((n) => ({ channel: 'telegram', peer: `direct:k${n % 3}`, text: `burst ${n}` })),
      ];
      // Handed to the kernel first: the busy poll below blocks this process's event loop.
      await new Promise<void>((resolve, reject) => child.stdin.write(burst.map((m) => `${line(m)}\n`).join(''), (err) => (err ? reject(err) : resolve())));
      const giveUpAt = Date.now() + 5_000;
      while ((fs.statSync(big, { throwIfNoEntry: false })?.size ?? 0) <= sizeBefore && Date.now() < giveUpAt) {
        // busy poll on purpose: the kill should land while the large write is under way
      }
      child.kill('SIGKILL');
      assert.equal(await exited, 'SIGKILL');
    } finally {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    }
    const acknowledged = results.filter((event) => event.type === 'result');
    assert.ok(acknowledged.length >= 9);
    const afterKill = new Map(fs.readdirSync(dir).filter((n) => n.endsWith('.jsonl')).map((n) => [n, fs.readFileSync(path.join(dir, n))]));

    const repaired = await doctor(state, config, '--repair');
    assert.equal(repaired.code, 0, JSON.stringify(repaired.report.stores[0].problems));
    for (const problem of repaired.report.stores[0].problems) assert.ok(['torn-tail', 'malformed-lines', 'stale-lock', 'lock-tombstone', 'journal-pending'].includes(problem.kind), problem.kind);
    for (const change of repaired.report.stores[0].changes.filter((c: any) => c.action === 'kept')) {
      const original = path.basename(change.from);
      assert.deepEqual(fs.readFileSync(change.file), afterKill.get(original), `${original}: the original bytes are kept`);
      assert.deepEqual(fs.readFileSync(change.from, 'utf8').split('\n').slice(0, -1), recordLines(afterKill.get(original)!), `${original}: no complete record lost`);
    }
    const clean = await doctor(state, config);
    assert.equal(clean.code, 0, JSON.stringify(clean.report.stores[0].problems));

    for (const event of acknowledged) {
      const records = jsonLines(fs.readFileSync(path.join(dir, `${event.sessionId}.jsonl`), 'utf8'));
      assert.ok(records.some((r) => r.message?.runId === event.runId), `acknowledged line ${event.line} (${event.sessionKey}) is on disk`);
    }
    assert.equal((await cli(state, config, 'sessions', '--json')).code, 0);
    const [next] = await ingest(state, config, '2026-11-30T13:00:00Z', [{ channel: 'telegram', peer: 'direct:k9', text: 'after the crash' }]);
    assert.equal(next.disposition, 'recorded');
    t.diagnostic(`${acknowledged.length} acknowledged; repaired: ${repaired.report.stores[0].problems.map((p: any) => p.kind).join(', ') || 'nothing'}`);
  });
});

describe('a session key written twice in sessions.json', () => {
  test('is a repeated-key problem with its lines; --repair keeps the bytes and writes the entry readers use', async () => {
    const { state, config } = newState();
    await ingest(state, config, '2026-11-30T10:00:00Z', [
      { channel: 'telegram', peer: 'direct:a', text: 'hi' },
      { channel: 'telegram', peer: 'direct:b', text: 'hello' },
    ]);
    const storePath = path.join(sessionsDir(state), 'sessions.json');
    const store = readStore(state);
    const a = store['agent:main:direct:a'];
    const b = store['agent:main:direct:b'];
    // A hand edit that pasted a's entry again, under a key spelled with an escape: one key to JSON.parse.
    const text = `{\n  "agent:main:direct:a": ${JSON.stringify(a)},\n  "agent:main:direct:b": ${JSON.stringify(b)},\n  "agent:main:direct:\\u0061": ${JSON.stringify({ ...a, label: 'the copy' })}\n}\n`;
    fs.writeFileSync(storePath, text);

    const check = await doctor(state, config);
    assert.equal(check.code, PROBLEMS_EXIT);
    const found = check.report.stores[0].problems.filter((p: { kind: string }) => p.kind === 'repeated-key');
    assert.deepEqual(found.map((p: { sessionKey: string; lines: number[] }) => [p.sessionKey, p.lines]), [['agent:main:direct:a', [2, 4]]]);
    assert.match(found[0].message, /takes the one on line 4/);

    const repaired = await doctor(state, config, '--repair');
    assert.equal(repaired.code, 0, JSON.stringify(repaired.report));
    const problem = repaired.report.stores[0].problems.find((p: { kind: string }) => p.kind === 'repeated-key');
    assert.equal(problem.repaired, true);
    assert.equal(fs.readFileSync(problem.backup, 'utf8'), text, 'the file as it was is kept');
    const after = fs.readFileSync(storePath, 'utf8');
    assert.equal((after.match(/"agent:main:direct:a"/g) ?? []).length, 1);
    assert.equal(readStore(state)['agent:main:direct:a'].label, 'the copy', 'the entry every reader used');
    assert.equal((await doctor(state, config)).code, 0);
  });
});
