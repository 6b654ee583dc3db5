// OpenClaw's side files in a sessions folder (test/fixtures/openclaw-artifacts/README.md): a run's
// trajectory capture and pointer, and a compaction checkpoint listed in the entry. They are
// artifacts of the session instance, not transcripts: doctor does not report them, and no
// cleanup — `sessions cleanup`, `maintain`, the upkeep on a write — removes them while the entry
// lives. Once no entry names their instance, the disk budget removes them as OpenClaw's does, and
// an entry the budget evicts takes its trajectory capture and pointer with it (as in OpenClaw).

import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import { REPO_ROOT, runCli, tempDir, writeJson } from '../helpers.js';

const FIXTURE = path.join(REPO_ROOT, 'test', 'fixtures', 'openclaw-artifacts', 'state');
/** Where OpenClaw wrote the fixture (its absolute paths are moved to each copy). */
const WRITTEN_AT = '/tmp/oc-artifacts';
const KEY = 'agent:main:telegram:direct:111';

interface Copy {
  state: string;
  dir: string;
  sessionId: string;
  /** The artifact names of the fixture's session: trajectory, pointer, checkpoint. */
  artifacts: string[];
  config(maintenance?: Record<string, unknown>): string;
}

/** A private copy of the fixture, its absolute paths (sessionFile, checkpoints, pointer) moved to the copy. */
function copyFixture(): Copy {
  const state = tempDir('sb-oc-artifacts-');
  fs.cpSync(FIXTURE, state, { recursive: true });
  const dir = path.join(state, 'agents', 'main', 'sessions');
  for (const name of fs.readdirSync(dir)) {
    if (!name.endsWith('.json')) continue;
    const file = path.join(dir, name);
    fs.writeFileSync(file, fs.readFileSync(file, 'utf8').split(`${WRITTEN_AT}/`).join(`${state}/`));
  }
  const store = JSON.parse(fs.readFileSync(path.join(dir, 'sessions.json'), 'utf8'));
  const sessionId: string = store[KEY].sessionId;
  const artifacts = fs.readdirSync(dir).filter((name) => name.startsWith(`${sessionId}.`) && name !== `${sessionId}.jsonl`).sort();
  assert.equal(artifacts.length, 3, `the fixture has a trajectory, its pointer and a checkpoint: ${artifacts.join(', ')}`);
  return {
    state,
    dir,
    sessionId,
    artifacts,
    config: (maintenance = {}) => writeJson(path.join(state, 'test-config.json'), { session: { dmScope: 'per-channel-peer', maintenance } }),
  };
}

const present = (copy: Copy): string[] => copy.artifacts.filter((name) => fs.existsSync(path.join(copy.dir, name)));
/** A budget that the three artifacts (with the transcript) are over, and the transcript alone is under. */
const TIGHT = { mode: 'enforce', maxDiskBytes: '2500b', highWaterBytes: '2000b' };

describe('OpenClaw session artifacts (trajectory, checkpoint)', () => {
  test('doctor finds nothing in a folder OpenClaw wrote them into; --repair changes nothing', async () => {
    const copy = copyFixture();
    const before = fs.readdirSync(copy.dir).sort();
    const check = await runCli(['doctor', '--json', '--state-dir', copy.state, '--config', copy.config()]);
    assert.equal(check.code, 0, check.stdout + check.stderr);
    assert.deepEqual(JSON.parse(check.stdout).stores.flatMap((s: { problems: unknown[] }) => s.problems), []);
    const repair = await runCli(['doctor', '--repair', '--json', '--state-dir', copy.state, '--config', copy.config()]);
    assert.equal(repair.code, 0, repair.stdout + repair.stderr);
    assert.deepEqual(fs.readdirSync(copy.dir).sort(), before);
  });

  test('sessions cleanup --enforce with a disk budget keeps a live entry’s artifacts', async () => {
    const copy = copyFixture();
    const r = await runCli(['sessions', 'cleanup', '--enforce', '--json', '--state-dir', copy.state, '--config', copy.config(TIGHT)]);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    assert.deepEqual(present(copy), copy.artifacts);
    const budget = JSON.parse(r.stdout).diskBudget ?? JSON.parse(r.stdout).stores?.[0]?.diskBudget;
    assert.equal(budget.removedFiles, 0, r.stdout);
  });

  test('maintain with a disk budget keeps them too', async () => {
    const copy = copyFixture();
    const r = await runCli(['maintain', '--json', '--state-dir', copy.state, '--config', copy.config(TIGHT)]);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    assert.deepEqual(present(copy), copy.artifacts);
  });

  test('the enforce upkeep of an ingest keeps them too', async () => {
    const copy = copyFixture();
    const input = `${JSON.stringify({ channel: 'telegram', peer: { kind: 'direct', id: '222' }, text: 'hello from someone else', messageId: 'm-222' })}\n`;
    const r = await runCli(['ingest', '--state-dir', copy.state, '--config', copy.config({ mode: 'enforce', maxDiskBytes: '3000b', highWaterBytes: '2500b' })], { input });
    assert.equal(r.code, 0, r.stdout + r.stderr);
    assert.deepEqual(present(copy), copy.artifacts);
    const store = JSON.parse(fs.readFileSync(path.join(copy.dir, 'sessions.json'), 'utf8'));
    assert.ok(Object.hasOwn(store, KEY), 'the entry itself was not evicted');
  });

  test('once no entry names the instance, doctor still finds nothing and the disk budget removes them, as OpenClaw’s does', async () => {
    const copy = copyFixture();
    // switchboard's delete archives the transcript only, as OpenClaw's does; the artifacts stay.
    const deleted = await runCli(['sessions', 'delete', KEY, '--json', '--state-dir', copy.state, '--config', copy.config()]);
    assert.equal(deleted.code, 0, deleted.stdout + deleted.stderr);
    assert.deepEqual(present(copy), copy.artifacts);
    const check = await runCli(['doctor', '--json', '--state-dir', copy.state, '--config', copy.config()]);
    assert.equal(check.code, 0, check.stdout);

    const r = await runCli(['sessions', 'cleanup', '--enforce', '--json', '--state-dir', copy.state, '--config', copy.config({ mode: 'enforce', maxDiskBytes: '100b', highWaterBytes: '50b' })]);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    assert.deepEqual(present(copy), [], 'trajectory, pointer and checkpoint of a removed instance are the budget’s');
  });

  test('an entry the disk budget evicts takes its trajectory capture and pointer with it', async () => {
    const copy = copyFixture();
    const r = await runCli(['sessions', 'cleanup', '--enforce', '--json', '--state-dir', copy.state, '--config', copy.config({ mode: 'enforce', maxDiskBytes: '500b', highWaterBytes: '400b' })]);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    const store = JSON.parse(fs.readFileSync(path.join(copy.dir, 'sessions.json'), 'utf8'));
    assert.ok(!Object.hasOwn(store, KEY), r.stdout);
    const left = fs.readdirSync(copy.dir).filter((name) => name.startsWith(copy.sessionId));
    // The checkpoint was the live entry's when the pass began: unreferenced now, the next pass's.
    assert.deepEqual(left, copy.artifacts.filter((name) => name.includes('.checkpoint.')));
  });
});

describe('names that look like artifacts but are transcripts', () => {
  const config = (dir: string, maintenance: Record<string, unknown> = {}) => writeJson(path.join(dir, `config-${Object.keys(maintenance).length}.json`), { session: { dmScope: 'per-peer', maintenance } });

  test('a thread id ending in ".trajectory": its transcript is checked by doctor, listed by history and readable once archived', async () => {
    const state = tempDir('sb-artifact-lookalike-');
    const cfg = config(state);
    const key = 'agent:main:slack:channel:c1:thread:1700.trajectory';
    const ingested = await runCli(['ingest', '--json', '--state-dir', state, '--config', cfg], { input: `${JSON.stringify({ channel: 'slack', peer: 'channel:c1', threadId: '1700.trajectory', text: 'in thread', messageId: 't1' })}\n` });
    assert.equal(ingested.code, 0, ingested.stderr);
    const sessionId = JSON.parse(ingested.stdout.split('\n')[0]!).sessionId as string;
    const dir = path.join(state, 'agents', 'main', 'sessions');
    const transcript = path.join(dir, `${sessionId}-topic-1700.trajectory.jsonl`);
    assert.ok(fs.existsSync(transcript));
    fs.appendFileSync(transcript, 'not json\n');
    const checked = await runCli(['doctor', '--json', '--state-dir', state, '--config', cfg]);
    assert.equal(checked.code, 65, checked.stdout);
    assert.deepEqual(JSON.parse(checked.stdout).stores[0].problems.map((p: { kind: string; file: string }) => [p.kind, p.file]), [['malformed-lines', transcript]]);
    const history = await runCli(['sessions', 'history', key, '--json', '--state-dir', state, '--config', cfg]);
    assert.equal(JSON.parse(history.stdout).instances.length, 1, history.stdout);
    assert.equal((await runCli(['sessions', 'reset', key, '--state-dir', state, '--config', cfg])).code, 0);
    const old = await runCli(['sessions', 'transcript', sessionId, '--state-dir', state, '--config', cfg]);
    assert.equal(old.code, 0, old.stderr);
    assert.match(old.stdout, /in thread/);
  });

  test("evicting a session for the disk budget never deletes another session's transcript named like the evicted one's trajectory", async () => {
    const state = tempDir('sb-artifact-collision-');
    const cfg = config(state);
    const input = [1, 2].map((i) => JSON.stringify({ channel: 'telegram', peer: `direct:${i}`, text: `hello ${i}`, messageId: `m${i}` })).join('\n') + '\n';
    assert.equal((await runCli(['ingest', '--state-dir', state, '--config', cfg], { input })).code, 0);
    // Sessions "work" (older) and "work.trajectory", ids OpenClaw accepts: the second's transcript
    // has the name of the first's trajectory capture.
    const dir = path.join(state, 'agents', 'main', 'sessions');
    const storeFile = path.join(dir, 'sessions.json');
    const store = JSON.parse(fs.readFileSync(storeFile, 'utf8'));
    for (const [key, id, ageMinutes] of [['agent:main:direct:1', 'work', 5000], ['agent:main:direct:2', 'work.trajectory', 1000]] as const) {
      const entry = store[key];
      const lines = fs.readFileSync(path.join(dir, entry.sessionFile), 'utf8').split('\n');
      fs.rmSync(path.join(dir, entry.sessionFile));
      lines[0] = JSON.stringify({ ...JSON.parse(lines[0]!), id });
      fs.writeFileSync(path.join(dir, `${id}.jsonl`), `${lines.join('\n').trimEnd()}\n${JSON.stringify({ type: 'custom', id: `pad-${id}`, parentId: null, timestamp: new Date().toISOString(), customType: 'pad', data: 'x'.repeat(4000) })}\n`);
      Object.assign(entry, { sessionId: id, sessionFile: `${id}.jsonl`, updatedAt: Date.now() - ageMinutes * 60_000 });
    }
    fs.writeFileSync(storeFile, JSON.stringify(store, null, 2));
    const budget = config(state, { mode: 'enforce', maxDiskBytes: '9kb', highWaterBytes: '7kb' });
    const cleaned = await runCli(['sessions', 'cleanup', '--enforce', '--json', '--state-dir', state, '--config', budget]);
    assert.equal(cleaned.code, 0, cleaned.stderr);
    const left = JSON.parse(fs.readFileSync(storeFile, 'utf8'));
    assert.equal(left['agent:main:direct:1'], undefined, 'the older session was evicted');
    assert.ok(fs.existsSync(path.join(dir, 'work.trajectory.jsonl')), "the other session's transcript is still there");
    const checked = await runCli(['doctor', '--json', '--state-dir', state, '--config', cfg]);
    assert.equal(checked.code, 0, checked.stdout);
  });
});
