// Case 24 of quality.md as a measurement: 50 socket clients × 200 `ingest` requests (one message
// each, sent one after another per client) to a real `switchboard serve`; request→result latency
// median and p99, and throughput. Baseline, same run, same machine: the same clients against a
// bare Unix-socket server that answers each NDJSON line with an fsync'ed append to one file per
// client (what the cheapest durable acknowledgement costs), so the ratio shows what routing,
// planning, locking and the store add per request.

import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { BIN, DIST, fmt, median, record, tempDir } from './lib.mjs';

const CLIENTS = 50;
const PER_CLIENT = 200;

function percentile(sorted, p) {
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))];
}

/** Each client sends its requests one at a time; returns all latencies (ms) and the wall time. */
async function drive(socketPath, makeLine) {
  const latencies = [];
  const started = performance.now();
  await Promise.all(Array.from({ length: CLIENTS }, (_, c) => runClient(socketPath, (i) => makeLine(c, i), latencies)));
  return { latencies: latencies.sort((a, b) => a - b), seconds: (performance.now() - started) / 1000 };
}

/**
 * One client: PER_CLIENT requests, each sent when the previous one is answered. Once (session
 * 16) a client met ECONNREFUSED right after the socket file appeared, cause not known yet: a
 * refused connection before the first request is tried again for up to 2 s, so that one such
 * moment does not end the whole bench run.
 */
function runClient(socketPath, makeLine, latencies) {
  return new Promise((resolve, reject) => {
    const startedAt = Date.now();
    let sent = 0;
    let sentAt = 0;
    const connect = () => {
      const socket = net.createConnection(socketPath);
      let buffer = '';
      const next = () => {
        if (sent === PER_CLIENT) {
          socket.end();
          resolve();
          return;
        }
        sentAt = performance.now();
        socket.write(makeLine(sent++));
      };
      socket.setEncoding('utf8');
      socket.on('connect', next);
      socket.on('error', (err) => {
        if (err.code === 'ECONNREFUSED' && sent === 0 && Date.now() - startedAt < 2000) setTimeout(connect, 20);
        else reject(err);
      });
      socket.on('data', (chunk) => {
        buffer += chunk;
        let newline;
        while ((newline = buffer.indexOf('\n')) >= 0) {
          const line = buffer.slice(0, newline);
          buffer = buffer.slice(newline + 1);
          if (line.includes('"error"') && !line.includes('"events"')) return reject(new Error(line));
          latencies.push(performance.now() - sentAt);
          next();
        }
      });
    };
    connect();
  });
}

function ingestLine(c, i) {
  const message = { channel: 'telegram', peer: { kind: 'direct', id: `c${c}` }, text: `message ${i} from client ${c}`, messageId: `c${c}-${i}` };
  return `${JSON.stringify({ id: i, op: 'ingest', message })}\n`;
}

async function measureServe() {
  const state = tempDir();
  const config = path.join(state, 'config.json');
  fs.writeFileSync(config, JSON.stringify({ session: { dmScope: 'per-peer' } }));
  const server = spawn(process.execPath, [BIN, 'serve', '--state-dir', state, '--config', config, '--quiet'], { stdio: ['ignore', 'ignore', 'inherit'] });
  const socketPath = path.join(state, 'switchboard.sock');
  for (let i = 0; i < 500 && !fs.existsSync(socketPath); i++) await new Promise((resolve) => setTimeout(resolve, 20));
  try {
    const result = await drive(socketPath, ingestLine);
    // Consistency: every message is in the store.
    const store = JSON.parse(fs.readFileSync(path.join(state, 'agents', 'main', 'sessions', 'sessions.json'), 'utf8'));
    if (Object.keys(store).length !== CLIENTS) throw new Error(`expected ${CLIENTS} sessions, found ${Object.keys(store).length}`);
    return result;
  } finally {
    server.kill('SIGTERM');
    await new Promise((resolve) => server.on('close', resolve));
  }
}

/** The baseline server: one fsync'ed append per request line, answered with a one-line ack. */
async function measureBaseline() {
  const dir = tempDir();
  const socketPath = path.join(dir, 'baseline.sock');
  const server = net.createServer((socket) => {
    const fd = fs.openSync(path.join(dir, `client-${Math.random().toString(36).slice(2)}.jsonl`), 'a');
    let buffer = '';
    let chain = Promise.resolve();
    socket.setEncoding('utf8');
    socket.on('data', (chunk) => {
      buffer += chunk;
      let newline;
      while ((newline = buffer.indexOf('\n')) >= 0) {
        const line = buffer.slice(0, newline + 1);
        buffer = buffer.slice(newline + 1);
        chain = chain.then(
          () =>
            new Promise((resolve) => {
              fs.write(fd, line, () => fs.fsync(fd, () => {
                socket.write(`${JSON.stringify({ id: JSON.parse(line).id, result: { ok: true } })}\n`);
                resolve();
              }));
            }),
        );
      }
    });
    socket.on('close', () => chain.then(() => fs.closeSync(fd)));
  });
  await new Promise((resolve) => server.listen(socketPath, resolve));
  try {
    return await drive(socketPath, ingestLine);
  } finally {
    server.close();
  }
}

export async function benchSocket() {
  if (!fs.existsSync(path.join(DIST, 'server', 'index.js'))) throw new Error('build first: npm run build');
  const runs = [];
  for (let round = 0; round < 2; round++) runs.push({ serve: await measureServe(), baseline: await measureBaseline() });
  const rows = [];
  for (const [name, pick] of [['serve', (r) => r.serve], ['baseline (fsync\'ed append per line)', (r) => r.baseline]]) {
    const medians = runs.map((r) => median(pick(r).latencies));
    const p99s = runs.map((r) => percentile(pick(r).latencies, 0.99));
    const rates = runs.map((r) => (CLIENTS * PER_CLIENT) / pick(r).seconds);
    rows.push(
      `${name}: request→answer median ${medians.map((m) => fmt(m, 1)).join(' / ')} ms, p99 ${p99s.map((m) => fmt(m, 1)).join(' / ')} ms, ${rates.map((r) => fmt(r)).join(' / ')} requests/s`,
    );
  }
  const ratio = (pick) => runs.map((r) => pick(r.serve) / pick(r.baseline)).map((x) => fmt(x, 2)).join(' / ');
  rows.push(`ratio serve ÷ baseline: median latency ${ratio((r) => median(r.latencies))}×, throughput ${ratio((r) => 1 / r.seconds)}×`);
  record(`Case 24: ${CLIENTS} socket clients × ${PER_CLIENT} ingest requests (two rounds)`, rows);
}
if (import.meta.url === `file://${process.argv[1]}`) await benchSocket();
