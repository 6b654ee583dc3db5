// A lock whose holder is stopped (SIGSTOP) looks stale — its folder is no longer refreshed — but
// its holder is alive and will resume. What the operator's tools say and do about it, with a real
// stopped process: `doctor` warns and leaves it (also with --repair), `locks release` refuses it
// without --force and says why (a session lock until its max hold, the registry lock until its
// holder ends).

import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, test } from 'node:test';
import { listLocks, lockPathFor } from '../../src/store/index.js';
import { killChildren, startChild, waitUntil, type ChildRun } from '../fixtures/store-child-process.js';
import { runCli, tempDir, writeJson } from '../helpers.js';

const STALE_MS = 1_000;
const children: ChildRun[] = [];
after(() => killChildren(children));

/** A store with one session, and a child that holds `target`'s lock and is then stopped once the lock looks stale. */
async function stoppedHolder(lockOf: (dir: string, entry: { sessionFile: string }) => string, extra: Record<string, unknown> = {}) {
  const state = tempDir('sb-stopped-holder-');
  const config = writeJson(path.join(state, 'c.json'), { session: { dmScope: 'per-peer' } });
  const ingest = await runCli(['ingest', '--state-dir', state, '--config', config], { input: `${JSON.stringify({ channel: 'telegram', peer: 'direct:alice', text: 'hi' })}\n` });
  assert.equal(ingest.code, 0, ingest.stderr);
  const dir = path.join(state, 'agents', 'main', 'sessions');
  const entry = Object.values(JSON.parse(fs.readFileSync(path.join(dir, 'sessions.json'), 'utf8')))[0] as { sessionFile: string };
  const target = lockOf(dir, entry);
  const child = startChild('lock-holder-child.js', [JSON.stringify({ target, behaviour: 'hold', staleMs: STALE_MS, maxHoldMs: 600_000, runId: 'stopped-run', ...extra })]);
  children.push(child);
  await child.waitForLine((line) => line.startsWith('held '), 20_000, 'the child to hold the lock');
  child.child.kill('SIGSTOP');
  const lockPath = lockPathFor(target);
  await waitUntil(async () => (await listLocks(dir)).some((info) => info.lockPath === lockPath && info.stale), 30_000, 'the lock to look stale');
  return { state, config, lockPath, child };
}

test('a stopped holder of a session lock: doctor warns and leaves it, also with --repair; locks release refuses it (75) until its max hold', async () => {
  const { state, config, lockPath, child } = await stoppedHolder((dir, entry) => path.join(dir, entry.sessionFile));
  const doctor = await runCli(['doctor', '--json', '--state-dir', state, '--config', config]);
  const report = JSON.parse(doctor.stdout).stores[0];
  assert.deepEqual(report.problems.filter((p: any) => p.kind === 'stale-lock'), [], 'a live holder is no stale lock');
  const warning = report.warnings.find((w: string) => w.startsWith(path.basename(lockPath)));
  assert.ok(warning, JSON.stringify(report.warnings));
  assert.match(warning, new RegExp(`held by pid ${child.pid} .*a stopped or stalled process, still alive.*waited for until its max hold.*doctor leaves it alone`));

  const repair = await runCli(['doctor', '--repair', '--json', '--state-dir', state, '--config', config]);
  assert.deepEqual(JSON.parse(repair.stdout).stores[0].problems.filter((p: any) => p.kind === 'stale-lock'), []);
  assert.ok(fs.existsSync(lockPath), 'doctor --repair left the lock');

  const release = await runCli(['locks', 'release', lockPath, '--json', '--state-dir', state, '--config', config]);
  assert.equal(release.code, 75, release.stderr);
  const error = JSON.parse(release.stderr).error;
  assert.equal(error.code, 'SESSION_BUSY');
  assert.match(error.message, /, alive and within its max hold$/);
  assert.ok(fs.existsSync(lockPath));
});

test('a stopped holder of the registry lock: locks release refuses it (75): that lock is never taken from a live holder', async () => {
  const { state, config, lockPath, child } = await stoppedHolder((dir) => path.join(dir, 'sessions.json'), { takeover: 'dead' });
  const release = await runCli(['locks', 'release', lockPath, '--json', '--state-dir', state, '--config', config]);
  assert.equal(release.code, 75, release.stderr);
  const error = JSON.parse(release.stderr).error;
  assert.equal(error.code, 'SESSION_BUSY');
  assert.match(error.message, new RegExp(`held by pid ${child.pid} .*still alive\\): waited for until it ends, alive \\(the registry lock is never taken from a live holder\\)$`));
  assert.ok(fs.existsSync(lockPath));
});
