// P5 of quality.md: `sessions --json` and `sessions cleanup --dry-run --json` on 10 000 sessions
// with ~1 GB of transcripts — wall time, peak memory, and memory flat in transcript size.

import { spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { BIN, fmt, median, record, tempDir } from './lib.mjs';

const SESSIONS = 10_000;
const TOTAL_BYTES = 1024 ** 3;
const RUNS = 3;
const NOW = Date.parse('2026-11-30T12:00:00Z');
const DAY = 86_400_000;
const TIME = '/usr/bin/time';

/**
 * A store of `count` sessions whose transcripts add up to `totalBytes`: a real JSONL head (header
 * and a few messages) per file, then truncate() extends it — sparse, so generating 1 GB is fast
 * and takes no disk. Nothing in switchboard may read these tails anyway: it only stats them.
 */
function generateStore(count, totalBytes) {
  const state = tempDir('sb-bench-p5-');
  const dir = path.join(state, 'agents', 'main', 'sessions');
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  const store = {};
  const perFile = Math.floor(totalBytes / count);
  for (let i = 0; i < count; i++) {
    const sessionId = randomUUID();
    const key = `agent:main:telegram:direct:user-${i}`;
    // ages spread over 60 days: some prune-stale, and far more than maxEntries (cap-overflow)
    const updatedAt = NOW - (i % 60) * DAY - i * 1000;
    store[key] = { sessionId, updatedAt, sessionStartedAt: updatedAt, lastInteractionAt: updatedAt, sessionFile: `${sessionId}.jsonl`, chatType: 'direct', channel: 'telegram', ...(i % 100 === 0 ? { pinned: true } : {}) };
    const head = [
      JSON.stringify({ type: 'session', version: 3, id: sessionId, timestamp: new Date(updatedAt).toISOString(), cwd: '/', sessionKey: key, agentId: 'main' }),
      ...Array.from({ length: 3 }, (_, n) => JSON.stringify({ type: 'message', id: `${sessionId}-${n}`, parentId: n ? `${sessionId}-${n - 1}` : null, timestamp: new Date(updatedAt).toISOString(), message: { role: 'user', content: [{ type: 'text', text: `hello ${n}` }], timestamp: updatedAt } })),
    ].join('\n') + '\n';
    const file = path.join(dir, `${sessionId}.jsonl`);
    fs.writeFileSync(file, head);
    // vary sizes ±50% around the mean so that the total stays at totalBytes
    const size = Math.max(head.length, Math.round(perFile * (0.5 + (i % 2 === 0 ? (i % 100) / 100 : 1 - ((i - 1) % 100) / 100))));
    fs.truncateSync(file, size);
  }
  fs.writeFileSync(path.join(dir, 'sessions.json'), `${JSON.stringify(store, null, 2)}\n`, { mode: 0o600 });
  let apparent = 0;
  for (const name of fs.readdirSync(dir)) apparent += fs.statSync(path.join(dir, name)).size;
  return { state, dir, apparent };
}

/** Wall ms and peak RSS (KiB) of one run, via /usr/bin/time when present, else wall time only. */
function measure(argv) {
  const withTime = fs.existsSync(TIME);
  const full = withTime ? [TIME, '-f', '%M', ...argv] : argv;
  const start = process.hrtime.bigint();
  const result = spawnSync(full[0], full.slice(1), { stdio: ['ignore', 'pipe', 'pipe'], maxBuffer: 256 * 1024 * 1024 });
  const ms = Number(process.hrtime.bigint() - start) / 1e6;
  const stderr = result.stderr.toString();
  if (result.status !== 0) throw new Error(`${argv.join(' ')} exited ${result.status}: ${stderr.slice(-500)}`);
  const peakKb = withTime ? Number(stderr.trim().split('\n').at(-1)) : NaN;
  return { ms, peakKb, stdout: result.stdout };
}

function runMany(argv) {
  const runs = Array.from({ length: RUNS }, () => measure(argv));
  return { ms: median(runs.map((r) => r.ms)), peakMb: Math.max(...runs.map((r) => r.peakKb)) / 1024, stdout: runs[0].stdout };
}

/** The floor of what cleanup must do on disk: read the folder and stat every file, in node. */
const STAT_WALK = `
const fs = require('node:fs'), path = require('node:path');
const dir = process.argv[1];
(async () => {
  const names = await fs.promises.readdir(dir);
  let bytes = 0, next = 0;
  await Promise.all(Array.from({ length: 64 }, async () => {
    while (next < names.length) bytes += (await fs.promises.stat(path.join(dir, names[next++]))).size;
  }));
  process.stdout.write(String(bytes));
})();`;

export async function benchCleanup() {
  const big = generateStore(SESSIONS, TOTAL_BYTES);
  const small = generateStore(SESSIONS, TOTAL_BYTES / 10);
  const cli = (store, ...args) => [process.execPath, BIN, ...args, '--json', '--state-dir', store.state, '--now', new Date(NOW).toISOString()];

  const nodeBase = runMany([process.execPath, '-e', '0']);
  const walk = runMany([process.execPath, '-e', STAT_WALK, big.dir]);
  const list = runMany(cli(big, 'sessions', '--limit', 'all'));
  const listing = JSON.parse(list.stdout.toString());
  if (listing.count !== SESSIONS) throw new Error(`sessions --json listed ${listing.count}, expected ${SESSIONS}`);

  const probe = spawnSync(process.execPath, [BIN, 'sessions', 'cleanup', '--help'], { stdio: 'ignore' });
  const rows = [
    `store: ${fmt(SESSIONS)} sessions, ${fmt(big.apparent / 1024 ** 3, 2)} GB of transcripts (sparse tails); the same store with ${fmt(small.apparent / 1024 ** 2)} MB for the flatness check`,
    `baseline node -e 0: ${fmt(nodeBase.ms, 1)} ms, ${fmt(nodeBase.peakMb, 1)} MB peak · stat walk of the folder in node: ${fmt(walk.ms, 1)} ms, ${fmt(walk.peakMb, 1)} MB (median of ${RUNS})`,
    `sessions --json: ${fmt(list.ms, 1)} ms (target ≤ 500) = ${fmt(list.ms / nodeBase.ms, 2)}× node -e 0, ${fmt(list.ms / walk.ms, 2)}× the stat walk; peak ${fmt(list.peakMb, 1)} MB (target ≤ 300)`,
  ];
  if (probe.status !== 0) {
    rows.push('sessions cleanup: not registered in this build (src/cli/sessions.ts must call registerCleanupCommand)');
    record('P5 sessions listing and cleanup planning (10 000 sessions, 1 GB)', rows);
    return;
  }
  const dry = runMany(cli(big, 'sessions', 'cleanup', '--dry-run'));
  const plan = JSON.parse(dry.stdout.toString());
  if (plan.beforeCount !== SESSIONS || !plan.wouldMutate) throw new Error('cleanup --dry-run did not plan over the whole store');
  const drySmall = runMany(cli(small, 'sessions', 'cleanup', '--dry-run'));
  // The same listing as on the big store (every row): the default one builds only 100 rows, which
  // would compare row counts, not transcript sizes.
  const listSmall = runMany(cli(small, 'sessions', '--limit', 'all'));
  rows.push(
    `sessions cleanup --dry-run --json: ${fmt(dry.ms, 1)} ms (target ≤ 5 000) = ${fmt(dry.ms / nodeBase.ms, 2)}× node -e 0, ${fmt(dry.ms / walk.ms, 2)}× the stat walk; peak ${fmt(dry.peakMb, 1)} MB (target ≤ 300); plan: ${fmt(plan.pruned)} prune-stale, ${fmt(plan.capped)} cap-overflow`,
    `memory flat in transcript size (1 GB vs 100 MB store, target ≈ 1.0): cleanup ${fmt(dry.peakMb / drySmall.peakMb, 2)} (${fmt(dry.peakMb, 1)} / ${fmt(drySmall.peakMb, 1)} MB), listing ${fmt(list.peakMb / listSmall.peakMb, 2)} (${fmt(list.peakMb, 1)} / ${fmt(listSmall.peakMb, 1)} MB)`,
  );
  record('P5 sessions listing and cleanup planning (10 000 sessions, 1 GB)', rows);
  for (const store of [big, small]) fs.rmSync(store.state, { recursive: true, force: true });
}

if (import.meta.url === `file://${process.argv[1]}`) await benchCleanup();
