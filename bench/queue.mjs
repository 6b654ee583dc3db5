// P7 of quality.md: queue timing with builtin:slow-echo, read from the transcript's own record
// timestamps (written with the real clock): a steer message is injected at the first boundary
// after it arrives (target ≤ 10 ms after the boundary), and a collect turn starts within
// debounce + 50 ms of the last message. The gaps are absolute: the reference points (the boundary,
// the due time) are measured in the same run.

import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { BIN, fmt, median, record, tempDir } from './lib.mjs';

function transcriptOf(state, key) {
  const dir = path.join(state, 'agents', 'main', 'sessions');
  const store = JSON.parse(fs.readFileSync(path.join(dir, 'sessions.json'), 'utf8'));
  return fs.readFileSync(path.join(dir, store[key].sessionFile), 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l));
}

/**
 * Streams lines into one ingest process with pauses, so later lines arrive while a run is busy.
 * The pauses start once the first line's result is out: the process is then up and reading, so a
 * line's sentAt is its arrival time (not the process's start-up time later).
 */
function ingestTimed(state, config, steps) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, 'ingest', '--state-dir', state, '--config', config], { stdio: ['pipe', 'pipe', 'inherit'] });
    let out = '';
    let firstResult;
    const answered = new Promise((r) => (firstResult = r));
    child.stdout.on('data', (d) => {
      out += d;
      if (out.includes('"type":"result"')) firstResult();
    });
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve(out) : reject(new Error(`ingest exited ${code}`))));
    (async () => {
      for (const [index, step] of steps.entries()) {
        if (index === 1) await answered;
        if (step.waitMs) await new Promise((r) => setTimeout(r, step.waitMs));
        if (step.line) {
          step.sentAt = Date.now();
          child.stdin.write(`${JSON.stringify(step.line)}\n`);
        }
      }
      child.stdin.end();
    })();
  });
}

const ms = (record) => Date.parse(record.timestamp);

export async function benchQueue() {
  const steerGaps = [];
  const collectGaps = [];
  const DEBOUNCE = 300;
  for (let round = 0; round < 5; round++) {
    // steer: a message arrives during the first tool call; it must be recorded right at the boundary.
    const state = tempDir();
    const config = path.join(state, 'c.json');
    fs.writeFileSync(config, JSON.stringify({ agents: { defaults: { runner: { command: 'builtin:slow-echo', delayMs: 400, toolCalls: 2 } } } }));
    const dm = { channel: 'telegram', peer: 'direct:7' };
    await ingestTimed(state, config, [{ line: { ...dm, text: 'start' } }, { waitMs: 150, line: { ...dm, text: 'steer me' } }]);
    const lines = transcriptOf(state, 'agent:main:main');
    const steerAt = lines.findIndex((l) => l.type === 'steer');
    if (steerAt < 1) throw new Error('no steer record');
    // The boundary is the tool_result just before the steer record.
    const boundary = [...lines.slice(0, steerAt)].reverse().find((l) => l.type === 'tool_result');
    steerGaps.push(ms(lines[steerAt]) - ms(boundary));

    // collect: three messages while busy; the collect turn's run starts after the quiet window.
    const state2 = tempDir();
    const config2 = path.join(state2, 'c.json');
    fs.writeFileSync(config2, JSON.stringify({ agents: { defaults: { runner: { command: 'builtin:slow-echo', delayMs: 200, toolCalls: 1 } } }, messages: { queue: { mode: 'collect', debounceMs: DEBOUNCE } } }));
    const steps = [
      { line: { ...dm, text: 'first' } },
      { waitMs: 20, line: { ...dm, text: 'a' } },
      { waitMs: 20, line: { ...dm, text: 'b' } },
      { waitMs: 20, line: { ...dm, text: 'c' } },
    ];
    await ingestTimed(state2, config2, steps);
    const lines2 = transcriptOf(state2, 'agent:main:main');
    const userMessages = lines2.filter((l) => l.type === 'message' && l.message.role === 'user');
    const collected = userMessages.find((l) => String(l.message.content[0].text).startsWith('[Queued messages while agent was busy]'));
    if (!collected) throw new Error('no collect turn');
    const firstRunEnd = ms(lines2.find((l) => l.type === 'message' && l.message.role === 'assistant'));
    // Due at the later of: the last message + the quiet window, and the end of the active run.
    const due = Math.max(steps[3].sentAt + DEBOUNCE, firstRunEnd);
    collectGaps.push(ms(collected) - due);
  }
  record('P7 queue timing (builtin:slow-echo, transcript timestamps, 5 rounds)', [
    `steer: recorded ${fmt(median(steerGaps), 0)} ms after the boundary (median; max ${fmt(Math.max(...steerGaps), 0)}; target ≤ 10 ms)`,
    `collect: turn started ${fmt(median(collectGaps), 0)} ms after it was due (last message + ${DEBOUNCE} ms debounce, or the run's end if later) (median; max ${fmt(Math.max(...collectGaps), 0)}; target ≤ 50 ms)`,
  ]);
}

if (import.meta.url === `file://${process.argv[1]}`) await benchQueue();
