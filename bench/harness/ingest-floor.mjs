// The least any durable NDJSON ingest written in Node must do, as a separate process timed like
// `switchboard ingest` (process start included): read the lines, JSON.parse each, pick its file
// from the peer, build and JSON.stringify a transcript record and a result line, and append the
// records batch by batch to one file per session with one fsync per file per batch — the writes
// and fsyncs of bench/ingest.mjs's baseline. No routing, no registry, no journal, no locks, no
// duplicate check: a floor, not a competitor. Usage: node ingest-floor.mjs DIR < input.ndjson

import { randomUUID } from 'node:crypto';
import readline from 'node:readline';
import { appendBatch } from './append-pool.mjs';

const BATCH = 50_000;
const dir = process.argv[2];
const handles = new Map();
const parents = new Map();
let line = 0;
let pending = new Map();
let count = 0;
const out = [];

async function flush() {
  const work = [...pending];
  pending = new Map();
  count = 0;
  await appendBatch(dir, handles, work);
  process.stdout.write(out.join(''));
  out.length = 0;
}

for await (const text of readline.createInterface({ input: process.stdin, crlfDelay: Infinity })) {
  line++;
  const message = JSON.parse(text);
  const name = `${message.peer.id}.jsonl`;
  const id = randomUUID();
  const runId = randomUUID();
  const record = {
    type: 'message',
    id,
    parentId: parents.get(name) ?? null,
    timestamp: new Date().toISOString(),
    message: { role: 'user', content: [{ type: 'text', text: message.text }], timestamp: Date.now(), channel: message.channel, runId, messageId: message.messageId, sender: message.sender },
  };
  parents.set(name, id);
  let lines = pending.get(name);
  if (!lines) pending.set(name, (lines = []));
  lines.push(JSON.stringify(record));
  out.push(`${JSON.stringify({ type: 'result', line, ok: true, messageId: message.messageId, runId, sessionKey: name, persisted: true })}\n`);
  if (++count === BATCH) await flush();
}
if (count > 0) await flush();
await Promise.all([...handles.values()].map((handle) => handle.close()));
