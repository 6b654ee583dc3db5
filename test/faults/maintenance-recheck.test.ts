// Issue 10, "Must show": maintenance's pinned re-check inside the store update must be a red test
// when removed. `sessions cleanup` and `maintain` plan their removals from a snapshot read without
// the store lock; between that plan and the store update that removes the entries, another process
// may pin a session or give it a new message. The update must look at each entry again (same
// sessionId and updatedAt, not pinned) and leave such a session alone.
//
// The window is hit deterministically with real processes: a child holds sessions.json.lock inside
// a real updateSessionStore() mutator; the maintenance process (a real `switchboard`) plans, takes
// the transcript locks of the sessions it is about to remove (seen as their `.lock` folders, so the
// plan is made) and then waits for the store lock. Only then does the child pin one session and
// refresh another inside its mutator, write, and release the lock.

import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { after, test } from 'node:test';
import { killChildren, startChild, waitUntil, type ChildRun } from '../fixtures/store-child-process.js';
import { jsonLines, runCli, tempDir, writeJson } from '../helpers.js';

const NOW = Date.parse('2026-11-30T12:00:00Z');
const DAY = 86_400_000;
const iso = (ms: number) => new Date(ms).toISOString();

const children: ChildRun[] = [];
after(() => killChildren(children));

const KEYS = {
  /** Pinned by the other process after the plan: only the pinned check can save it. */
  pinned: 'agent:main:telegram:direct:pinned-late',
  /** Gets a new message (updatedAt) after the plan: only the identity check can save it. */
  refreshed: 'agent:main:telegram:direct:refreshed-late',
  /** Stays stale: removed, which shows the maintenance did apply its plan. */
  stale: 'agent:main:telegram:direct:stale',
  /** Fresh all along: never planned for removal. */
  fresh: 'agent:main:telegram:direct:fresh',
};

interface Stored {
  sessionId: string;
  updatedAt: number;
  pinned?: boolean;
}

/** sessions.json and one transcript per session, 90 days old except `fresh`. */
function generate(state: string): { dir: string; storePath: string; ids: Record<string, string> } {
  const dir = path.join(state, 'agents', 'main', 'sessions');
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  const store: Record<string, unknown> = {};
  const ids: Record<string, string> = {};
  for (const key of Object.values(KEYS)) {
    const sessionId = randomUUID();
    ids[key] = sessionId;
    const updatedAt = key === KEYS.fresh ? NOW - 60_000 : NOW - 90 * DAY;
    store[key] = { sessionId, updatedAt, sessionStartedAt: updatedAt, lastInteractionAt: updatedAt, sessionFile: `${sessionId}.jsonl`, chatType: 'direct', channel: 'telegram' };
    const header = { type: 'session', version: 3, id: sessionId, timestamp: iso(updatedAt), cwd: '/', sessionKey: key, agentId: 'main' };
    const message = { type: 'message', id: randomUUID(), parentId: null, timestamp: iso(updatedAt), message: { role: 'user', content: [{ type: 'text', text: `hello ${key}` }], timestamp: updatedAt } };
    fs.writeFileSync(path.join(dir, `${sessionId}.jsonl`), `${JSON.stringify(header)}\n${JSON.stringify(message)}\n`, { mode: 0o600 });
  }
  const storePath = path.join(dir, 'sessions.json');
  fs.writeFileSync(storePath, `${JSON.stringify(store, null, 2)}\n`, { mode: 0o600 });
  return { dir, storePath, ids };
}

/** Each command's JSON output and where the one store's cleanup summary is in it. */
const COMMANDS: { name: string; args: string[]; summary: (out: any) => any }[] = [
  { name: 'sessions cleanup --enforce', args: ['sessions', 'cleanup', '--enforce', '--json'], summary: (out) => out },
  { name: 'maintain (session.maintenance.mode enforce)', args: ['maintain', '--json'], summary: (out) => out.cleanup.stores[0] },
];

for (const command of COMMANDS) {
  test(`${command.name}: a session pinned or given a new message between the plan and the store update is not removed`, { timeout: 30_000 }, async () => {
    const state = tempDir('sb-recheck-');
    const config = writeJson(path.join(state, 'config.json'), { session: { maintenance: { mode: 'enforce', pruneAfter: '30d', maxEntries: 100 } } });
    const { dir, storePath, ids } = generate(state);
    const before = JSON.parse(fs.readFileSync(storePath, 'utf8')) as Record<string, Stored>;

    // 1. Another process is inside a store update: it holds sessions.json.lock.
    const holder = startChild('store-mutator-child.js', [storePath]);
    children.push(holder);
    await holder.waitForLine((line) => line === 'held', 15_000, 'the holder to hold sessions.json.lock');

    // 2. The maintenance plans from its snapshot (three stale sessions to prune), takes the
    //    transcript locks of those three and waits for the store lock.
    const maintenance = runCli([...command.args, '--now', iso(NOW), '--state-dir', state, '--config', config], { timeoutMs: 25_000 });
    const planned = [KEYS.pinned, KEYS.refreshed, KEYS.stale].map((key) => path.join(dir, `${ids[key]}.jsonl.lock`));
    await waitUntil(() => planned.every((lock) => fs.existsSync(lock)), 15_000, 'the maintenance to lock the transcripts it planned to remove');
    assert.equal(holder.child.exitCode, null, 'the holder still holds the store lock');

    // 3. Inside the holder's update: one session is pinned, one gets a new message (updatedAt).
    const refreshedAt = NOW - 1_000;
    holder.send(JSON.stringify({ [KEYS.pinned]: { pinned: true }, [KEYS.refreshed]: { updatedAt: refreshedAt, lastInteractionAt: refreshedAt } }));
    await holder.waitForLine((line) => line === 'done', 15_000, 'the holder to write and release');
    assert.deepEqual(await holder.exited, { code: 0, signal: null });

    const result = await maintenance;
    assert.equal(result.code, 0, result.stdout + result.stderr);
    const summary = command.summary(jsonLines(result.stdout)[0]);

    // The two sessions changed after the plan are still there, as the other process left them.
    const after = JSON.parse(fs.readFileSync(storePath, 'utf8')) as Record<string, Stored>;
    assert.deepEqual(Object.keys(after).sort(), [KEYS.fresh, KEYS.pinned, KEYS.refreshed].sort(), 'only the session that stayed stale was removed');
    assert.deepEqual({ ...after[KEYS.pinned] }, { ...before[KEYS.pinned], pinned: true });
    assert.equal(after[KEYS.refreshed]!.sessionId, ids[KEYS.refreshed]);
    assert.equal(after[KEYS.refreshed]!.updatedAt, refreshedAt);
    // Their transcripts were not archived away; the removed one's was (as .deleted, not deleted).
    assert.ok(fs.existsSync(path.join(dir, `${ids[KEYS.pinned]}.jsonl`)), 'the pinned session keeps its transcript');
    assert.ok(fs.existsSync(path.join(dir, `${ids[KEYS.refreshed]}.jsonl`)), 'the refreshed session keeps its transcript');
    assert.ok(!fs.existsSync(path.join(dir, `${ids[KEYS.stale]}.jsonl`)));
    assert.ok(fs.readdirSync(dir).some((name) => name.startsWith(`${ids[KEYS.stale]}.jsonl.deleted.`)), 'the stale transcript was archived');
    // And the summary says why the two were left alone.
    const skipped = new Map((summary.skipped as { key: string; reason: string }[]).map((s) => [s.key, s.reason]));
    assert.equal(skipped.get(KEYS.pinned), 'pinned');
    assert.equal(skipped.get(KEYS.refreshed), 'changed');
    assert.deepEqual(
      (summary.actions as { key: string; action: string }[]).map((a) => [a.key, a.action]),
      [[KEYS.stale, 'prune-stale']],
    );
    // No transcript lock is left behind.
    assert.deepEqual(fs.readdirSync(dir).filter((name) => name.endsWith('.lock')), []);
  });
}
