// `sessions cleanup` and `maintain` end to end on real generated stores: the maintenance safety
// rules (quality.md 15–18), several stores with one failing, and maintain's resets (case 12),
// stale-lock removal and cron retention. Time moves with --now; locks are held by real processes.

import assert from 'node:assert/strict';
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { holdOpenClawLock } from '../fixtures/openclaw-lock.js';
import { jsonLines, runCli, tempDir, writeJson } from '../helpers.js';

const NOW = Date.parse('2026-11-30T12:00:00Z');
const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const iso = (ms: number) => new Date(ms).toISOString();
const archiveStamp = (ms: number) => iso(ms).replace(/:/g, '-');
const HOLDER = fileURLToPath(new URL('../fixtures/lock-holder-child.js', import.meta.url));

interface GenSession {
  key: string;
  ageMs: number;
  /** Approximate transcript size; 0 = header only. */
  bytes?: number;
  pinned?: boolean;
  /** No transcript file. */
  missing?: boolean;
  model?: string;
}

interface Generated {
  dir: string;
  storePath: string;
  ids: Map<string, string>;
  fileOf(key: string): string;
}

/** Writes sessions.json and transcripts (header + padded message lines) the way the store does. */
function generateStore(state: string, agentId: string, sessions: GenSession[], options: { archives?: { ageMs: number; bytes: number; reason?: 'reset' | 'deleted' }[]; orphans?: number } = {}): Generated {
  const dir = path.join(state, 'agents', agentId, 'sessions');
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  const store: Record<string, unknown> = {};
  const ids = new Map<string, string>();
  for (const s of sessions) {
    const sessionId = randomUUID();
    ids.set(s.key, sessionId);
    const updatedAt = NOW - s.ageMs;
    store[s.key] = {
      sessionId,
      updatedAt,
      sessionStartedAt: updatedAt,
      lastInteractionAt: updatedAt,
      sessionFile: `${sessionId}.jsonl`,
      chatType: 'direct',
      channel: 'telegram',
      ...(s.pinned ? { pinned: true } : {}),
      ...(s.model ? { model: s.model } : {}),
    };
    if (!s.missing) fs.writeFileSync(path.join(dir, `${sessionId}.jsonl`), transcriptText(sessionId, s.key, agentId, updatedAt, s.bytes ?? 400), { mode: 0o600 });
  }
  fs.writeFileSync(path.join(dir, 'sessions.json'), `${JSON.stringify(store, null, 2)}\n`, { mode: 0o600 });
  for (const [i, a] of (options.archives ?? []).entries()) {
    const id = randomUUID();
    fs.writeFileSync(path.join(dir, `${id}.jsonl.${a.reason ?? 'reset'}.${archiveStamp(NOW - a.ageMs - i)}`), transcriptText(id, `agent:${agentId}:old:${i}`, agentId, NOW - a.ageMs, a.bytes));
  }
  for (let i = 0; i < (options.orphans ?? 0); i++) {
    const id = randomUUID();
    fs.writeFileSync(path.join(dir, `${id}.jsonl`), transcriptText(id, `agent:${agentId}:orphan:${i}`, agentId, NOW - 5 * DAY, 300));
  }
  return { dir, storePath: path.join(dir, 'sessions.json'), ids, fileOf: (key) => path.join(dir, `${ids.get(key)}.jsonl`) };
}

function transcriptText(sessionId: string, sessionKey: string, agentId: string, at: number, bytes: number): string {
  const lines = [JSON.stringify({ type: 'session', version: 3, id: sessionId, timestamp: iso(at), cwd: '/', sessionKey, agentId })];
  let size = lines[0]!.length + 1;
  let parentId: string | null = null;
  for (let n = 0; size < bytes; n++) {
    const id = randomUUID();
    const line = JSON.stringify({ type: 'message', id, parentId, timestamp: iso(at), message: { role: 'user', content: [{ type: 'text', text: `message ${n} ${'x'.repeat(60)}` }], timestamp: at } });
    parentId = id;
    lines.push(line);
    size += line.length + 1;
  }
  return `${lines.join('\n')}\n`;
}

/** name → size of every entry in a folder (lock folders included), for before/after comparisons. */
function listing(dir: string): Record<string, number> {
  return Object.fromEntries(
    fs
      .readdirSync(dir)
      .sort()
      .map((name) => [name, fs.statSync(path.join(dir, name)).isDirectory() ? -1 : fs.statSync(path.join(dir, name)).size]),
  );
}

const readStore = (storePath: string) => JSON.parse(fs.readFileSync(storePath, 'utf8')) as Record<string, { sessionId: string; pinned?: boolean }>;

function setup(config: Record<string, unknown>): { state: string; config: string; cli: (...args: string[]) => ReturnType<typeof runCli> } {
  const state = tempDir('sb-maint-');
  const configPath = writeJson(path.join(state, 'config.json'), config);
  return { state, config: configPath, cli: (...args: string[]) => runCli([...args, '--state-dir', state, '--config', configPath]) };
}

const holders: ChildProcessWithoutNullStreams[] = [];
after(() => {
  for (const holder of holders) holder.kill('SIGKILL');
});

/** A real process holding the write lock of `target` until released or killed. */
async function holdLock(target: string, sessionKey: string): Promise<ChildProcessWithoutNullStreams> {
  const holder = spawn(process.execPath, [HOLDER, JSON.stringify({ target, behaviour: 'hold', sessionKey, runId: 'run-busy' })], { stdio: ['pipe', 'pipe', 'pipe'] });
  holders.push(holder);
  await new Promise<void>((resolve, reject) => {
    let seen = '';
    holder.stdout.on('data', (d: Buffer) => {
      seen += d.toString();
      if (seen.includes('held')) resolve();
      if (seen.includes('error')) reject(new Error(seen));
    });
    holder.on('exit', (code) => reject(new Error(`holder exited ${code}: ${seen}`)));
  });
  return holder;
}

async function stop(holder: ChildProcessWithoutNullStreams, signal: NodeJS.Signals | 'release'): Promise<void> {
  const exited = new Promise<void>((resolve) => holder.once('exit', () => resolve()));
  if (signal === 'release') holder.stdin.end('release\n');
  else holder.kill(signal);
  await exited;
}

describe('sessions cleanup safety rules', () => {
  test('15: every limit at 0 or less is disabled — an ancient, huge, messy store is left exactly as it was', async () => {
    const { state, cli } = setup({
      session: { maintenance: { mode: 'enforce', pruneAfter: 0, maxEntries: -1, rotateBytes: '0mb', resetArchiveRetention: '-1d', maxDiskBytes: 0, highWaterBytes: -5 } },
    });
    const sessions = Array.from({ length: 300 }, (_, i): GenSession => ({ key: `agent:main:direct:u${i}`, ageMs: 400 * DAY + i * HOUR, bytes: 600 }));
    const store = generateStore(state, 'main', sessions, { archives: [{ ageMs: 900 * DAY, bytes: 500 }, { ageMs: 400 * DAY, bytes: 500, reason: 'deleted' }], orphans: 3 });
    const before = listing(store.dir);
    const storeBytes = fs.readFileSync(store.storePath);

    const r = await cli('sessions', 'cleanup', '--enforce', '--json', '--now', iso(NOW));
    assert.equal(r.code, 0, r.stderr);
    const summary = jsonLines(r.stdout)[0];
    assert.equal(summary.applied, true);
    assert.equal(summary.wouldMutate, false);
    assert.deepEqual([summary.beforeCount, summary.afterCount, summary.pruned, summary.capped, summary.missing], [300, 300, 0, 0, 0]);
    assert.equal(summary.diskBudget, null);
    assert.deepEqual(summary.actions, []);
    assert.deepEqual(listing(store.dir), before);
    assert.ok(fs.readFileSync(store.storePath).equals(storeBytes), 'sessions.json not rewritten');
  });

  test("16b: a transcript OpenClaw holds its lock file on is locked for the plan too: dry-run plans exactly what apply does", async () => {
    const { state, cli } = setup({ session: { maintenance: { mode: 'enforce', pruneAfter: '30d', maxEntries: 50 } } });
    const store = generateStore(state, 'main', [
      { key: 'agent:main:direct:openclaw', ageMs: 90 * DAY, bytes: 500 },
      { key: 'agent:main:direct:stale', ageMs: 90 * DAY, bytes: 500 },
      { key: 'agent:main:direct:fresh', ageMs: DAY, bytes: 500 },
    ]);
    const lockedFile = store.fileOf('agent:main:direct:openclaw');
    const holder = await holdOpenClawLock(`${lockedFile}.lock`);
    try {
      const plan = jsonLines((await cli('sessions', 'cleanup', '--dry-run', '--json', '--now', iso(NOW))).stdout)[0];
      const applied = await cli('sessions', 'cleanup', '--json', '--now', iso(NOW));
      assert.equal(applied.code, 0, applied.stderr);
      const done = jsonLines(applied.stdout)[0];
      const keys = (summary: { actions: { key: string }[] }) => summary.actions.map((a) => a.key).sort();
      assert.deepEqual(keys(plan), ['agent:main:direct:stale']);
      assert.deepEqual(keys(done), keys(plan));
      assert.equal(plan.protected, 1);
      assert.ok(readStore(store.storePath)['agent:main:direct:openclaw'], 'the locked session stays');
    } finally {
      holder.child.kill('SIGKILL');
      await holder.exited;
    }
  });

  test('16: pinned, locked (a real holder process) and --active-key sessions are never removed', async () => {
    const { state, cli } = setup({ session: { maintenance: { mode: 'enforce', pruneAfter: '30d', maxEntries: 2, maxDiskBytes: '2kb', highWaterBytes: '1kb' } } });
    const sessions: GenSession[] = [
      { key: 'agent:main:direct:pinned', ageMs: 90 * DAY, pinned: true, bytes: 3000 },
      { key: 'agent:main:direct:locked', ageMs: 90 * DAY, bytes: 3000 },
      { key: 'agent:main:direct:active', ageMs: 90 * DAY, bytes: 3000 },
      { key: 'agent:main:direct:pinned-missing', ageMs: 90 * DAY, pinned: true, missing: true },
      ...Array.from({ length: 60 }, (_, i): GenSession => ({ key: `agent:main:direct:n${i}`, ageMs: (i % 2 ? 90 : 1) * DAY + i * HOUR, bytes: 800 })),
    ];
    const store = generateStore(state, 'main', sessions);
    const lockedFile = store.fileOf('agent:main:direct:locked');
    const lockedBytes = fs.readFileSync(lockedFile);
    const holder = await holdLock(lockedFile, 'agent:main:direct:locked');
    try {
      const r = await cli('sessions', 'cleanup', '--json', '--fix-missing', '--active-key', 'agent:main:direct:active', '--now', iso(NOW));
      assert.equal(r.code, 0, r.stderr);
      const summary = jsonLines(r.stdout)[0];
      assert.equal(summary.protected, 4);
      const left = readStore(store.storePath);
      // everything else went (stale, capped or evicted by the 2kb budget); the four stayed
      assert.deepEqual(Object.keys(left).sort(), ['agent:main:direct:active', 'agent:main:direct:locked', 'agent:main:direct:pinned', 'agent:main:direct:pinned-missing']);
      for (const key of ['agent:main:direct:pinned', 'agent:main:direct:locked', 'agent:main:direct:active']) {
        assert.equal(left[key]!.sessionId, store.ids.get(key));
        assert.ok(fs.existsSync(store.fileOf(key)), `${key} keeps its transcript`);
      }
      assert.ok(fs.readFileSync(lockedFile).equals(lockedBytes), 'the locked transcript was not touched');
      assert.ok(summary.diskBudget.protectedBytes >= 9000, 'protected transcripts are outside the budget');
      assert.ok(!summary.actions.some((a: { key: string }) => ['pinned', 'locked', 'active', 'pinned-missing'].includes(a.key.split(':').pop()!)));
      // the holder still owns its lock; cleanup's own locks are gone
      assert.ok(fs.existsSync(`${lockedFile}.lock`));
      assert.deepEqual(fs.readdirSync(store.dir).filter((n) => n.endsWith('.lock')), [path.basename(`${lockedFile}.lock`)]);
    } finally {
      await stop(holder, 'release');
    }
  });

  test('17: the dry-run plan is exactly what apply does (counts, actions, files)', async () => {
    const { state, cli } = setup({
      session: { maintenance: { mode: 'warn', pruneAfter: '30d', maxEntries: 150, rotateBytes: '20kb', resetArchiveRetention: '10d', maxDiskBytes: '150kb', highWaterBytes: '120kb' } },
    });
    const sessions: GenSession[] = Array.from({ length: 260 }, (_, i): GenSession => ({
      key: `agent:main:telegram:direct:p${String(i).padStart(3, '0')}`,
      ageMs: (i % 5 === 0 ? 45 * DAY : (i % 29) * DAY) + i * 60_000,
      bytes: 300 + (i % 7) * 200,
      missing: i % 17 === 3,
      pinned: i % 50 === 1,
      model: i % 3 === 0 ? 'gpt-x' : undefined,
    }));
    const store = generateStore(state, 'main', sessions, {
      archives: [
        { ageMs: 40 * DAY, bytes: 4000 },
        { ageMs: 20 * DAY, bytes: 4000, reason: 'deleted' },
        { ageMs: 9 * DAY, bytes: 4000 },
        { ageMs: DAY, bytes: 4000 },
      ],
      orphans: 4,
    });
    const before = listing(store.dir);

    const dry = await cli('sessions', 'cleanup', '--dry-run', '--fix-missing', '--json', '--now', iso(NOW));
    assert.equal(dry.code, 0, dry.stderr);
    const plan = jsonLines(dry.stdout)[0];
    assert.deepEqual(listing(store.dir), before, 'a dry run changes nothing');
    assert.equal(plan.dryRun, true);
    assert.equal(plan.mode, 'warn');
    assert.equal(plan.wouldMutate, true);
    // every kind of action is exercised
    const kinds = new Set(plan.actions.map((a: { action: string }) => a.action));
    for (const kind of ['prune-stale', 'prune-missing', 'cap-overflow', 'evict-budget']) assert.ok(kinds.has(kind), `plan has ${kind}`);
    assert.ok(plan.purgedArchives > 0 && plan.rotatedTo !== null && plan.diskBudget.overBudget);

    // warn mode without --dry-run reports the same plan and changes nothing either
    const warn = jsonLines((await cli('sessions', 'cleanup', '--fix-missing', '--json', '--now', iso(NOW))).stdout)[0];
    assert.deepEqual(warn.actions, plan.actions);
    assert.equal(warn.applied, undefined);
    assert.deepEqual(listing(store.dir), before);

    const text = await cli('sessions', 'cleanup', '--dry-run', '--fix-missing', '--now', iso(NOW));
    assert.match(text.stdout, /^Action\s+Key\s+Age\s+Model\s+Flags$/m);
    // The Action cell is the action alone (cli.md), one column for scripts; the summary says "would be".
    assert.match(text.stdout, /^prune-missing\s+agent:main:telegram:direct:p003\s+\S+\s+gpt-x\s+missing$/m, 'each planned change is named');
    assert.match(text.stdout, /would be pruned/);
    assert.match(text.stdout, /^keep\s+agent:main:telegram:direct:p001\s+\S+\s+-\s+pinned$/m);

    const applied = await cli('sessions', 'cleanup', '--enforce', '--fix-missing', '--json', '--now', iso(NOW));
    assert.equal(applied.code, 0, applied.stderr);
    const result = jsonLines(applied.stdout)[0];
    assert.equal(result.applied, true);
    assert.deepEqual(result.skipped, []);
    assert.deepEqual(result.actions, plan.actions);
    for (const field of ['beforeCount', 'afterCount', 'missing', 'pruned', 'capped', 'archived', 'purgedArchives', 'missingTranscripts', 'protected', 'diskBudget']) {
      assert.deepEqual(result[field], plan[field], field);
    }
    assert.equal(path.basename(result.rotatedTo), path.basename(plan.rotatedTo));

    // and the disk agrees with the plan
    const removed = new Set(plan.actions.map((a: { key: string }) => a.key));
    const left = readStore(store.storePath);
    assert.deepEqual(Object.keys(left).sort(), sessions.map((s) => s.key).filter((k) => !removed.has(k)).sort());
    assert.equal(Object.keys(left).length, plan.afterCount);
    const after = listing(store.dir);
    const archivesLeft = Object.keys(after).filter((n) => /\.(reset|deleted)\.\d{4}-/.test(n));
    const orphansLeft = Object.keys(after).filter((n) => n.endsWith('.jsonl') && !Object.values(left).some((e) => `${e.sessionId}.jsonl` === n));
    const removableBytes = [...archivesLeft, ...orphansLeft].reduce((sum, n) => sum + after[n]!, 0) +
      Object.entries(left).filter(([, e]) => !e.pinned).reduce((sum, [, e]) => sum + (after[`${e.sessionId}.jsonl`] ?? 0), 0);
    assert.equal(removableBytes, result.diskBudget.totalBytesAfter, 'removable bytes on disk = planned total after');
    assert.ok(removableBytes <= result.diskBudget.highWaterBytes);
    assert.ok(fs.existsSync(result.rotatedTo));
    assert.equal(Object.keys(after).filter((n) => n.endsWith('.lock')).length, 0, 'no lock left behind');

    // a second apply has nothing left to do
    const again = jsonLines((await cli('sessions', 'cleanup', '--enforce', '--fix-missing', '--json', '--now', iso(NOW))).stdout)[0];
    assert.deepEqual(again.actions, []);
  });

  test('18: every removal archives first — each removed transcript survives byte for byte as .deleted', async () => {
    const { state, cli } = setup({ session: { maintenance: { mode: 'enforce', pruneAfter: '7d', maxEntries: 40 } } });
    const sessions = Array.from({ length: 120 }, (_, i): GenSession => ({ key: `agent:main:direct:r${i}`, ageMs: (i % 3 === 0 ? 10 * DAY : DAY) + i * 60_000, bytes: 500 + i }));
    const store = generateStore(state, 'main', sessions);
    const contents = new Map(sessions.map((s) => [s.key, fs.readFileSync(store.fileOf(s.key))]));

    const r = await cli('sessions', 'cleanup', '--json', '--now', iso(NOW));
    assert.equal(r.code, 0, r.stderr);
    const summary = jsonLines(r.stdout)[0];
    assert.equal(summary.pruned, 40);
    assert.equal(summary.capped, 40);
    assert.equal(summary.archived, 80);
    const left = readStore(store.storePath);
    assert.equal(Object.keys(left).length, 40);
    for (const s of sessions) {
      const file = store.fileOf(s.key);
      if (s.key in left) {
        assert.ok(fs.readFileSync(file).equals(contents.get(s.key)!), `${s.key} kept as it was`);
        continue;
      }
      assert.ok(!fs.existsSync(file), `${s.key}: transcript moved away`);
      const archived = fs.readdirSync(store.dir).filter((n) => n.startsWith(`${path.basename(file)}.deleted.`));
      assert.equal(archived.length, 1, `${s.key}: one .deleted archive`);
      assert.equal(archived[0], `${path.basename(file)}.deleted.${archiveStamp(NOW)}`);
      assert.ok(fs.readFileSync(path.join(store.dir, archived[0]!)).equals(contents.get(s.key)!), `${s.key}: archive holds the same bytes`);
    }
  });

  test('an unusable entry is counted as unusable, not as protected or missing; --fix-missing prints no hint to use it', async () => {
    const { state, cli } = setup({ session: { maintenance: { mode: 'enforce', pruneAfter: '7d', maxEntries: 40 } } });
    const store = generateStore(state, 'main', [
      { key: 'agent:main:direct:ok', ageMs: HOUR },
      { key: 'agent:main:direct:gone', ageMs: HOUR, missing: true },
      { key: 'agent:main:direct:gone-pinned', ageMs: HOUR, missing: true, pinned: true },
    ]);
    const raw = JSON.parse(fs.readFileSync(store.storePath, 'utf8'));
    raw['agent:main:direct:bad'] = { sessionId: 'bad', sessionFile: 5, updatedAt: NOW - HOUR };
    fs.writeFileSync(store.storePath, JSON.stringify(raw, null, 2));

    const planned = jsonLines((await cli('sessions', 'cleanup', '--dry-run', '--json', '--now', iso(NOW))).stdout)[0];
    assert.deepEqual([planned.unusable, planned.protected, planned.missingTranscripts, planned.missing], [1, 1, 2, 0]);
    const hinted = await cli('sessions', 'cleanup', '--dry-run', '--now', iso(NOW));
    assert.match(hinted.stdout, /2 without a transcript \(use --fix-missing to remove them\)/);
    assert.match(hinted.stdout, /1 unusable .*switchboard doctor/);

    const fixed = await cli('sessions', 'cleanup', '--enforce', '--fix-missing', '--now', iso(NOW));
    assert.equal(fixed.code, 0, fixed.stderr);
    assert.match(fixed.stdout, /1 protected .*, 2 without a transcript\n/, 'no stale hint once --fix-missing was given');
    assert.match(fixed.stdout, /1 unusable/);
    assert.deepEqual(Object.keys(readStore(store.storePath)).sort(), ['agent:main:direct:bad', 'agent:main:direct:gone-pinned', 'agent:main:direct:ok']);
  });
});

describe('several stores', () => {
  test('one corrupt store fails with its code; the others are cleaned and reported', async () => {
    const { state, cli } = setup({
      agents: { list: [{ id: 'main', default: true }, { id: 'work' }, { id: 'broken' }] },
      session: { maintenance: { pruneAfter: '30d' } },
    });
    const mk = (prefix: string) => Array.from({ length: 100 }, (_, i): GenSession => ({ key: `agent:${prefix}:direct:u${i}`, ageMs: (i < 30 ? 60 : 1) * DAY }));
    const main = generateStore(state, 'main', mk('main'));
    const work = generateStore(state, 'work', mk('work'));
    const broken = generateStore(state, 'broken', mk('broken'));
    fs.writeFileSync(broken.storePath, '{"agent:broken:direct:u1": {"sessionId": "x", "upd');
    const brokenBytes = fs.readFileSync(broken.storePath);

    const r = await cli('sessions', 'cleanup', '--all-agents', '--enforce', '--json', '--now', iso(NOW));
    assert.equal(r.code, 65, 'exit code of the failure (STORE_CORRUPT), at the end');
    const report = jsonLines(r.stdout)[0];
    assert.equal(report.allAgents, true);
    assert.equal(report.mode, 'enforce');
    assert.equal(report.dryRun, false);
    assert.deepEqual(report.stores.map((s: { agentId: string }) => s.agentId), ['main', 'work', 'broken']);
    for (const [i, generated] of [main, work].entries()) {
      const summary = report.stores[i];
      assert.equal(summary.applied, true);
      assert.equal(summary.pruned, 30);
      assert.equal(Object.keys(readStore(generated.storePath)).length, 70);
    }
    assert.equal(report.stores[2].error.code, 'STORE_CORRUPT');
    assert.ok(fs.readFileSync(broken.storePath).equals(brokenBytes), 'the corrupt store is left untouched');

    // one selected store that fails is the command's error, printed the usual way
    const single = await cli('sessions', 'cleanup', '--agent', 'broken', '--json', '--now', iso(NOW));
    assert.equal(single.code, 65);
    assert.equal(JSON.parse(single.stderr.trim()).error.code, 'STORE_CORRUPT');
    // --store picks a file directly
    const byPath = jsonLines((await cli('sessions', 'cleanup', '--store', work.storePath, '--dry-run', '--json', '--now', iso(NOW))).stdout)[0];
    assert.equal(byPath.storePath, work.storePath);
    assert.equal(byPath.beforeCount, 70);
  });
});

describe('maintain', () => {
  const line = (message: Record<string, unknown>) => JSON.stringify(message);

  test('12: applies a due daily reset with no message; defers a session whose run holds the lock', async () => {
    const { state, cli } = setup({ session: { dmScope: 'per-peer', reset: { mode: 'daily', atHour: 4, timezone: 'UTC' } } });
    const input = [line({ channel: 'telegram', peer: 'direct:ann', text: 'hi' }), line({ channel: 'telegram', peer: 'direct:bob', text: 'yo' })].join('\n');
    const ingest = await runCli(['ingest', '--state-dir', state, '--config', path.join(state, 'config.json'), '--now', '2026-11-30T10:00:00Z'], { input });
    assert.equal(ingest.code, 0, ingest.stderr);
    const [ann, bob] = jsonLines(ingest.stdout);
    const dir = path.join(state, 'agents', 'main', 'sessions');
    const storePath = path.join(dir, 'sessions.json');
    const bobFile = path.join(dir, `${bob.sessionId}.jsonl`);
    const holder = await holdLock(bobFile, bob.sessionKey);
    try {
      // before the boundary: nothing is due
      const early = jsonLines((await cli('maintain', '--json', '--now', '2026-12-01T03:59:00Z')).stdout)[0];
      assert.equal(early.resets.due, 0);

      const dryRun = await cli('maintain', '--dry-run', '--json', '--now', '2026-12-01T04:30:00Z');
      const planned = jsonLines(dryRun.stdout)[0];
      assert.deepEqual(planned.resets.reset.map((x: { sessionKey: string }) => x.sessionKey), [ann.sessionKey]);
      assert.deepEqual(planned.resets.deferred.map((x: { sessionKey: string }) => x.sessionKey), [bob.sessionKey]);
      assert.equal(readStore(storePath)[ann.sessionKey]!.sessionId, ann.sessionId, 'dry run changed nothing');

      const r = await cli('maintain', '--json', '--now', '2026-12-01T04:30:00Z');
      assert.equal(r.code, 0, r.stderr);
      const report = jsonLines(r.stdout)[0];
      assert.equal(report.ok, true);
      assert.equal(report.resets.due, 2);
      assert.equal(report.resets.reset.length, 1);
      const done = report.resets.reset[0];
      assert.deepEqual([done.sessionKey, done.reason, done.previousSessionId], [ann.sessionKey, 'daily', ann.sessionId]);
      assert.equal(report.resets.deferred.length, 1);
      assert.deepEqual([report.resets.deferred[0].sessionKey, report.resets.deferred[0].holder.pid, report.resets.deferred[0].holder.runId], [bob.sessionKey, holder.pid, 'run-busy']);
      assert.equal(report.locks.kept, 1, 'the live lock is kept');

      const store = readStore(storePath);
      assert.equal(store[ann.sessionKey]!.sessionId, done.sessionId);
      assert.notEqual(done.sessionId, ann.sessionId);
      assert.equal(store[bob.sessionKey]!.sessionId, bob.sessionId, 'not reset under the run');
      assert.match(path.basename(done.archivedTo), new RegExp(`^${ann.sessionId}\\.jsonl\\.reset\\.2026-12-01T04-30-00\\.000Z$`));
      const fresh = fs.readFileSync(path.join(dir, `${done.sessionId}.jsonl`), 'utf8').trim().split('\n').map((l) => JSON.parse(l));
      assert.equal(fresh[0].type, 'session');
      assert.deepEqual([fresh[1].type, fresh[1].reason, fresh[1].previousSessionId], ['reset_notice', 'daily', ann.sessionId]);
    } finally {
      await stop(holder, 'release');
    }
    // the run is over: the next maintain resets bob too, and ann is not reset twice
    const later = jsonLines((await cli('maintain', '--json', '--now', '2026-12-01T05:00:00Z')).stdout)[0];
    assert.deepEqual(later.resets.reset.map((x: { sessionKey: string }) => x.sessionKey), [bob.sessionKey]);
    assert.deepEqual(later.resets.deferred, []);
  });

  test('removes stale and dead-holder locks, never a live in-time one', async () => {
    const { state, cli } = setup({});
    const dir = path.join(state, 'agents', 'main', 'sessions');
    fs.mkdirSync(dir, { recursive: true });
    const liveTarget = path.join(dir, 'live.jsonl');
    const deadTarget = path.join(dir, 'dead.jsonl');
    const live = await holdLock(liveTarget, 'agent:main:live');
    const dead = await holdLock(deadTarget, 'agent:main:dead');
    await stop(dead, 'SIGKILL'); // no exit hook runs: the lock folder stays, its pid is gone
    // an ownerless lock folder whose mtime is long past any staleMs (a crash between mkdir and record)
    const orphanLock = path.join(dir, 'ownerless.jsonl.lock');
    fs.mkdirSync(orphanLock);
    const old = new Date(Date.now() - 3_600_000);
    fs.utimesSync(orphanLock, old, old);
    try {
      assert.ok(fs.existsSync(`${deadTarget}.lock`));
      const dryRun = jsonLines((await cli('maintain', '--dry-run', '--json')).stdout)[0];
      assert.equal(dryRun.locks.released.length, 2);
      assert.ok(fs.existsSync(`${deadTarget}.lock`), 'dry run releases nothing');

      const r = await cli('maintain', '--json');
      assert.equal(r.code, 0, r.stderr);
      const report = jsonLines(r.stdout)[0];
      const released = Object.fromEntries(report.locks.released.map((l: { lockPath: string; reason: string }) => [path.basename(l.lockPath), l.reason]));
      assert.deepEqual(released, { 'dead.jsonl.lock': 'holder-dead', 'ownerless.jsonl.lock': 'stale' });
      assert.equal(report.locks.kept, 1);
      assert.ok(!fs.existsSync(`${deadTarget}.lock`));
      assert.ok(!fs.existsSync(orphanLock));
      assert.ok(fs.existsSync(`${liveTarget}.lock`), 'the live holder keeps its lock');
    } finally {
      await stop(live, 'release');
    }
  });

  test('cron session retention removes (archiving) cron sessions idle past cron.sessionRetention; false disables it', async () => {
    const run = async (retention: unknown) => {
      const { state, cli } = setup(retention === undefined ? {} : { cron: { sessionRetention: retention } });
      const config = path.join(state, 'config.json');
      const t0 = '2026-11-29T10:00:00Z';
      const i1 = await runCli(['ingest', '--state-dir', state, '--config', config, '--now', t0], {
        input: [line({ channel: 'cron', cron: { jobId: 'digest' }, text: 'run digest' }), line({ channel: 'telegram', peer: 'direct:1', text: 'hello' })].join('\n'),
      });
      assert.equal(i1.code, 0, i1.stderr);
      const i2 = await runCli(['ingest', '--state-dir', state, '--config', config, '--now', '2026-11-30T09:00:00Z'], { input: line({ channel: 'cron', cron: { jobId: 'hourly' }, text: 'tick' }) });
      assert.equal(i2.code, 0, i2.stderr);
      const digest = jsonLines(i1.stdout)[0];
      const r = await cli('maintain', '--json', '--now', '2026-11-30T11:00:00Z');
      assert.equal(r.code, 0, r.stderr);
      return { state, report: jsonLines(r.stdout)[0], digest };
    };

    const { state, report, digest } = await run(undefined);
    assert.equal(report.cronRetention.retentionMs, DAY);
    assert.deepEqual(report.cronRetention.removed.map((x: { sessionKey: string }) => x.sessionKey), ['agent:main:cron:digest']);
    const dir = path.join(state, 'agents', 'main', 'sessions');
    const store = readStore(path.join(dir, 'sessions.json'));
    assert.deepEqual(Object.keys(store).sort(), ['agent:main:cron:hourly', 'agent:main:main']);
    assert.ok(!fs.existsSync(path.join(dir, `${digest.sessionId}.jsonl`)));
    assert.match(path.basename(report.cronRetention.removed[0].archivedTo), new RegExp(`^${digest.sessionId}\\.jsonl\\.deleted\\.`));
    assert.ok(fs.existsSync(report.cronRetention.removed[0].archivedTo));

    for (const off of [false, 0]) {
      const disabled = await run(off);
      assert.equal(disabled.report.cronRetention.retentionMs, null);
      assert.deepEqual(disabled.report.cronRetention.removed, []);
    }
  });

  test('a corrupt store makes maintain fail at the end; every other stage and store still ran', async () => {
    const { state, cli } = setup({
      agents: { list: [{ id: 'main', default: true }, { id: 'bad' }] },
      session: { reset: { mode: 'idle', idleMinutes: 60 }, maintenance: { mode: 'enforce', pruneAfter: '30d' } },
    });
    const main = generateStore(state, 'main', [
      { key: 'agent:main:direct:old', ageMs: 40 * DAY },
      { key: 'agent:main:direct:idle', ageMs: 2 * HOUR },
    ]);
    const bad = generateStore(state, 'bad', [{ key: 'agent:bad:direct:x', ageMs: DAY }]);
    fs.writeFileSync(bad.storePath, '');
    const r = await cli('maintain', '--json', '--now', iso(NOW));
    assert.equal(r.code, 65, r.stderr);
    const report = jsonLines(r.stdout)[0];
    assert.equal(report.ok, false);
    assert.ok(report.errors.length > 0 && report.errors.every((e: { agentId: string; code: string }) => e.agentId === 'bad' && e.code === 'STORE_CORRUPT'));
    assert.equal(report.cleanup.stores[0].pruned, 1);
    assert.deepEqual(report.resets.reset.map((x: { sessionKey: string; reason: string }) => [x.sessionKey, x.reason]), [['agent:main:direct:idle', 'idle']]);
    assert.deepEqual(Object.keys(readStore(main.storePath)), ['agent:main:direct:idle']);
    assert.equal(fs.readFileSync(bad.storePath, 'utf8'), '');
  });

  test('--help of both commands shows an example', async () => {
    for (const args of [['sessions', 'cleanup', '--help'], ['maintain', '--help']]) {
      const r = await runCli(args);
      assert.equal(r.code, 0);
      assert.match(r.stdout, /Example:\n {2}\$ switchboard /);
    }
  });
});

test('enforce mode at maxEntries: doctor --repair adopts an orphan and stays clean; the next write applies the cap, archiving first', async () => {
  const { state, config, cli } = setup({ session: { dmScope: 'per-peer', maintenance: { mode: 'enforce', maxEntries: 2 } } });
  const sessionsDir = path.join(state, 'agents', 'main', 'sessions');
  const say = (peer: string) => `${JSON.stringify({ channel: 'telegram', peer: { kind: 'direct', id: peer }, text: `hi ${peer}`, messageId: `m-${peer}` })}\n`;
  for (const peer of ['p1', 'p2', 'p3']) {
    const w = await runCli(['ingest', '--state-dir', state, '--config', config], { input: say(peer) });
    assert.equal(w.code, 0, w.stderr);
  }
  // What a kill between the cap's removal of an entry and the rename of its transcript leaves.
  const deleted = fs.readdirSync(sessionsDir).find((name) => name.includes('.jsonl.deleted.'));
  assert.ok(deleted, fs.readdirSync(sessionsDir).join(', '));
  fs.renameSync(path.join(sessionsDir, deleted), path.join(sessionsDir, deleted.slice(0, deleted.indexOf('.deleted.'))));

  const repaired = await cli('doctor', '--repair', '--json');
  assert.equal(repaired.code, 0, repaired.stdout);
  const again = await cli('doctor', '--json');
  assert.equal(again.code, 0, `the repair converged: ${again.stdout}`);

  const next = await runCli(['ingest', '--state-dir', state, '--config', config], { input: say('p4') });
  assert.equal(next.code, 0, next.stderr);
  assert.ok(Object.keys(readStore(path.join(sessionsDir, 'sessions.json'))).length <= 2);
  const afterWrite = await cli('doctor', '--json');
  assert.equal(afterWrite.code, 0, `the cap archived what it removed: ${afterWrite.stdout}`);
});
