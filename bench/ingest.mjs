// P3 and P4 of quality.md: `switchboard ingest` of 100 000 messages over 1 000 sessions with
// durable acknowledgements, against a baseline that appends the same bytes to the same files
// with the same number of fsyncs; then the same ingest into a store already holding 10 000 sessions.

import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { appendBatch } from './harness/append-pool.mjs';
import { BIN, ROOT, fmt, median, record, tempDir, timePipe } from './lib.mjs';

const MESSAGES = 100_000;
const SESSIONS = 1_000;
/** Must match MAX_BATCH_LINES in src/cli/ingest.ts: the baseline fsyncs once per session per batch. */
const BATCH = 50_000;

function makeMessages() {
  const lines = [];
  for (let i = 0; i < MESSAGES; i++) {
    const peer = `user-${(i * 7919) % SESSIONS}`;
    lines.push(JSON.stringify({ channel: 'telegram', peer: { kind: 'direct', id: peer }, sender: { id: peer, name: `User ${peer}` }, text: `message number ${i} with a little text`, messageId: `m-${i}` }));
  }
  return lines.join('\n') + '\n';
}

const CONFIG = { session: { dmScope: 'per-peer' } };

async function runIngest(state, input) {
  const config = path.join(state, 'config.json');
  fs.writeFileSync(config, JSON.stringify(CONFIG));
  const run = await timePipe([process.execPath, BIN, 'ingest', '--state-dir', state, '--config', config], input);
  if (run.lines !== MESSAGES) throw new Error(`ingest printed ${run.lines} events, expected ${MESSAGES}`);
  return run;
}

/** Files of a finished run: sessionId → lines (header first), and the line → sessionId map from input order. */
function replayPlan(state, input) {
  const dir = path.join(state, 'agents', 'main', 'sessions');
  const store = JSON.parse(fs.readFileSync(path.join(dir, 'sessions.json'), 'utf8'));
  const files = new Map();
  const byPeer = new Map();
  for (const [key, entry] of Object.entries(store)) {
    const content = fs.readFileSync(path.join(dir, entry.sessionFile), 'utf8').split('\n').filter(Boolean);
    files.set(entry.sessionFile, { header: content[0], entries: content.slice(1), next: 0 });
    byPeer.set(key.split(':').pop(), entry.sessionFile);
  }
  const order = input.split('\n').filter(Boolean).map((l) => byPeer.get(JSON.parse(l).peer.id));
  return { files, order };
}

/** The baseline: the same bytes to the same files, one fsync per file per batch, same parallelism. */
async function baseline(plan) {
  const dir = tempDir();
  const handles = new Map();
  const start = process.hrtime.bigint();
  for (let b = 0; b < plan.order.length; b += BATCH) {
    const perFile = new Map();
    for (const name of plan.order.slice(b, b + BATCH)) {
      const file = plan.files.get(name);
      let lines = perFile.get(name);
      if (!lines) perFile.set(name, (lines = file.next === 0 ? [file.header] : []));
      lines.push(file.entries[file.next++]);
    }
    await appendBatch(dir, handles, [...perFile]);
  }
  const ms = Number(process.hrtime.bigint() - start) / 1e6;
  await Promise.all([...handles.values()].map((h) => h.close()));
  fs.rmSync(dir, { recursive: true, force: true });
  return ms;
}

/** The floor: parse, serialise and write in a bare Node process (bench/harness/ingest-floor.mjs). */
async function floor(input) {
  const dir = tempDir();
  const run = await timePipe([process.execPath, path.join(ROOT, 'bench', 'harness', 'ingest-floor.mjs'), dir], input);
  fs.rmSync(dir, { recursive: true, force: true });
  if (run.lines !== MESSAGES) throw new Error(`the floor printed ${run.lines} lines, expected ${MESSAGES}`);
  return run.ms;
}

/** A store already holding `count` sessions (entries and small transcripts), written directly. */
function seedStore(state, count) {
  const dir = path.join(state, 'agents', 'main', 'sessions');
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  const store = {};
  const now = Date.now();
  for (let i = 0; i < count; i++) {
    const sessionId = randomUUID();
    store[`agent:main:direct:old-${i}`] = {
      sessionId,
      sessionFile: `${sessionId}.jsonl`,
      updatedAt: now - i * 1000,
      sessionStartedAt: now - i * 1000,
      lastInteractionAt: now - i * 1000,
      channel: 'telegram',
      accountId: 'default',
      chatType: 'direct',
      origin: { channel: 'telegram', accountId: 'default', peer: { kind: 'direct', id: `old-${i}` } },
      deliveryContext: { channel: 'telegram', to: `old-${i}`, accountId: 'default' },
    };
    fs.writeFileSync(path.join(dir, `${sessionId}.jsonl`), `${JSON.stringify({ type: 'session', version: 3, id: sessionId, timestamp: new Date(now).toISOString(), cwd: '/' })}\n`, { mode: 0o600 });
  }
  fs.writeFileSync(path.join(dir, 'sessions.json'), JSON.stringify(store, null, 2), { mode: 0o600 });
}

export async function benchIngest() {
  const input = makeMessages();
  const p3Runs = [];
  const baseRuns = [];
  const p4Runs = [];
  const floorRuns = [];
  for (let round = 0; round < 3; round++) {
    floorRuns.push(await floor(input));
    const state = tempDir();
    const run = await runIngest(state, input);
    p3Runs.push(run.ms);
    baseRuns.push(await baseline(replayPlan(state, input)));
    fs.rmSync(state, { recursive: true, force: true });

    const seeded = tempDir();
    seedStore(seeded, 10_000);
    p4Runs.push((await runIngest(seeded, input)).ms);
    fs.rmSync(seeded, { recursive: true, force: true });
  }
  const p3 = MESSAGES / (median(p3Runs) / 1000);
  const base = MESSAGES / (median(baseRuns) / 1000);
  const p4 = MESSAGES / (median(p4Runs) / 1000);
  const least = MESSAGES / (median(floorRuns) / 1000);
  record('P3 ingest (100 000 messages, 1 000 sessions, no runner, durable acknowledgements)', [
    `switchboard ingest: ${fmt(p3)} messages/s (target ≥ 20 000), median of 3, process start included`,
    `baseline (same bytes, same files, one fsync per file per ${fmt(BATCH)}-line batch): ${fmt(base)} messages/s → ratio ${fmt(p3 / base, 2)} (target ≥ 0.5)`,
    `floor, a bare Node process that parses each line and serialises its record and answer, same writes and fsyncs, process start included: ${fmt(least)} messages/s = ${fmt(least / base, 2)} × the baseline; switchboard at ${fmt(p3 / least, 2)} × the floor`,
  ]);
  record('P4 ingest into a store already holding 10 000 sessions', [
    `switchboard ingest: ${fmt(p4)} messages/s → ${fmt(p4 / p3, 2)} × the P3 rate (target ≥ 0.7)`,
  ]);
}

if (import.meta.url === `file://${process.argv[1]}`) await benchIngest();
