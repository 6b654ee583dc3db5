// P6 of quality.md: 8 processes × 500 appends to ONE session transcript at once, each append
// taking the session write lock and fsyncing: 4 000 lines, none lost, none interleaved, each
// writer's order kept. Baseline: 8 processes appending the same number of lines to one file
// with O_APPEND and an fsync per line, no locks.

import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { DIST, fmt, record, tempDir } from './lib.mjs';

const WRITERS = 8;
const PER_WRITER = 500;

/** One writer process: 500 appends through the store's appendToTranscript (lock + fsync each). */
function writer(file, w) {
  const script = `
    const { appendToTranscript } = await import(${JSON.stringify(path.join(DIST, 'store', 'index.js'))});
    for (let i = 0; i < ${PER_WRITER}; i++) {
      await appendToTranscript(process.argv[1], { type: 'message', message: { role: 'user', content: [{ type: 'text', text: 'w' + process.argv[2] + '-' + i }] } },
        { session: { sessionId: 'bench-p6', sessionKey: 'agent:main:main', agentId: 'main' } });
    }`;
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--input-type=module', '-e', script, file, String(w)], { stdio: 'inherit' });
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve() : reject(new Error(`writer ${w} exited ${code}`))));
  });
}

function verify(file) {
  const lines = fs.readFileSync(file, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l));
  const texts = lines.filter((l) => l.type === 'message').map((l) => l.message.content[0].text);
  if (texts.length !== WRITERS * PER_WRITER || new Set(texts).size !== texts.length) throw new Error(`expected ${WRITERS * PER_WRITER} distinct lines, got ${texts.length}`);
  for (let w = 0; w < WRITERS; w++) {
    const mine = texts.filter((t) => t.startsWith(`w${w}-`)).map((t) => Number(t.split('-')[1]));
    if (mine.some((n, i) => n !== i)) throw new Error(`writer ${w} order broken`);
  }
}

async function baseline() {
  const dir = tempDir();
  const file = path.join(dir, 'base.jsonl');
  const script = `const fs=require('fs');const fd=fs.openSync(process.argv[1],'a');for(let i=0;i<${PER_WRITER};i++){fs.writeSync(fd,JSON.stringify({type:'message',w:process.argv[2],i})+'\\n');fs.fsyncSync(fd);}`;
  const start = process.hrtime.bigint();
  await Promise.all(
    Array.from({ length: WRITERS }, (_, w) => new Promise((resolve) => spawn(process.execPath, ['-e', script, file, String(w)], { stdio: 'inherit' }).on('close', resolve))),
  );
  return Number(process.hrtime.bigint() - start) / 1e6;
}

export async function benchAppends() {
  const file = path.join(tempDir(), 'p6.jsonl');
  const start = process.hrtime.bigint();
  await Promise.all(Array.from({ length: WRITERS }, (_, w) => writer(file, w)));
  const ms = Number(process.hrtime.bigint() - start) / 1e6;
  verify(file);
  const baseMs = await baseline();
  record('P6 8 processes × 500 appends to one session', [
    `${fmt(WRITERS * PER_WRITER)} lines present, none lost, none interleaved, each writer's order kept (verified)`,
    `switchboard: ${fmt(ms)} ms (${fmt((WRITERS * PER_WRITER) / (ms / 1000))} appends/s, one lock + fsync each) — baseline O_APPEND + fsync without locks: ${fmt(baseMs)} ms → ratio ${fmt(baseMs / ms, 2)}`,
  ]);
}

if (import.meta.url === `file://${process.argv[1]}`) await benchAppends();
