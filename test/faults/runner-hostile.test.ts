// Runners that misbehave, found by a runner hunt. A runner that floods its stdout is read only as
// fast as its events are recorded: it waits in its own write, its timeout fires on time, and what
// it had written before is all that is left to record (with no back-pressure, an endless flood
// grew switchboard by ~140 MB/s, and after a 2 s timeout the backlog took minutes to record).
// A job the runner moved to a process group of its own is still killed with it. A runner whose
// switchboard was SIGKILLed is stopped, with its jobs, by the process that takes its session over.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { spawn } from 'node:child_process';
import { BIN, jsonLines, runCli, tempDir, writeJson } from '../helpers.js';

/** Far beyond what a throttled flood needs (seconds), far below what the backlog took (minutes). */
const GIVE_UP_MS = 60_000;

test('an endless stdout flood: the run times out on time, ingest ends by itself, and the runner is gone', async () => {
  const dir = tempDir('sb-flood-');
  const runner = path.join(dir, 'flood.js');
  fs.writeFileSync(
    runner,
    [
      "const line = JSON.stringify({ type: 'reply', text: 'x'.repeat(200) }) + '\\n';",
      'const chunk = line.repeat(300);',
      "function go() { while (process.stdout.write(chunk)); process.stdout.once('drain', go); }",
      "require('fs').writeFileSync(process.argv[2], String(process.pid));",
      'go();',
    ].join('\n'),
  );
  const pidFile = path.join(dir, 'runner.pid');
  const config = writeJson(path.join(dir, 'c.json'), { agents: { defaults: { runner: { command: [process.execPath, runner, pidFile], timeoutSeconds: 2 } } } });
  const r = await runCli(['ingest', '--json', '--state-dir', path.join(dir, 'state'), '--config', config], {
    input: `${JSON.stringify({ channel: 'telegram', peer: 'direct:1', text: 'hi', messageId: 'm1' })}\n`,
    timeoutMs: GIVE_UP_MS,
  });
  assert.equal(r.signal, null, 'ingest ended by itself');
  assert.equal(r.code, 0, r.stderr);
  const events = jsonLines(r.stdout);
  assert.deepEqual(events.filter((e) => e.type === 'run_failed').map((e) => e.reason), ['timeout']);
  assert.ok(events.some((e) => e.type === 'reply'), 'what it wrote before the timeout is delivered');
  const pid = Number(fs.readFileSync(pidFile, 'utf8'));
  assert.throws(() => process.kill(pid, 0), /ESRCH/, 'the runner was killed');
});

test('a background job in a process group of its own (set -m) does not outlive the run', { skip: fs.existsSync('/proc/self/stat') ? false : 'reads process states from /proc' }, async () => {
  const dir = tempDir('sb-escape-');
  const runner = path.join(dir, 'runner.sh');
  const jobPid = path.join(dir, 'job.pid');
  fs.writeFileSync(runner, `#!/bin/bash\nset -m\n(sleep 300) &\necho $! > ${jobPid}\necho '{"type":"reply","text":"done here"}'\n`, { mode: 0o755 });
  const config = writeJson(path.join(dir, 'c.json'), { agents: { defaults: { runner: { command: [runner], timeoutSeconds: 10 } } } });
  const r = await runCli(['ingest', '--json', '--state-dir', path.join(dir, 'state'), '--config', config], {
    input: `${JSON.stringify({ channel: 'telegram', peer: 'direct:1', text: 'hi', messageId: 'm1' })}\n`,
    timeoutMs: GIVE_UP_MS,
  });
  assert.equal(r.code, 0, r.stderr);
  assert.ok(jsonLines(r.stdout).some((e) => e.type === 'reply' && e.text === 'done here'));
  const pid = Number(fs.readFileSync(jobPid, 'utf8'));
  const alive = (await untilStopped([pid], 1_000)).length > 0;
  if (alive) process.kill(pid, 'SIGKILL');
  assert.equal(alive, false, 'the job in its own group was killed with the runner');
});

/** Running, read from /proc: a killed process may stay a zombie until something reaps it (a container's pid 1 may not). */
function running(pid: number): boolean {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return false;
  }
}

async function untilStopped(pids: number[], ms: number): Promise<number[]> {
  const deadline = Date.now() + ms;
  let alive = pids.filter(running);
  while (alive.length > 0 && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 20));
    alive = alive.filter(running);
  }
  return alive;
}

test('a runner left by a SIGKILLed switchboard is stopped, with its jobs, by the process that takes the session over', { skip: fs.existsSync('/proc/self/stat') ? false : 'reads process states from /proc' }, async () => {
  const dir = tempDir('sb-orphan-runner-');
  const runner = path.join(dir, 'runner.sh');
  const runnerPid = path.join(dir, 'runner.pid');
  const jobPid = path.join(dir, 'job.pid');
  // A run whose message says "hang" works (sleeps) for minutes and starts a job; any other replies at once.
  fs.writeFileSync(
    runner,
    `#!/bin/bash\nread -r line\ncase "$line" in\n  *hang*) echo $$ > ${runnerPid}.tmp; mv ${runnerPid}.tmp ${runnerPid}; sleep 300 & echo $! > ${jobPid}; sleep 300 ;;\n  *) echo '{"type":"reply","text":"quick"}' ;;\nesac\n`,
    { mode: 0o755 },
  );
  const state = path.join(dir, 'state');
  const config = writeJson(path.join(dir, 'c.json'), { agents: { defaults: { runner: { command: [runner], timeoutSeconds: 600 } } } });
  const first = spawn(process.execPath, [BIN, 'ingest', '--json', '--state-dir', state, '--config', config], { stdio: ['pipe', 'ignore', 'ignore'] });
  first.stdin.write(`${JSON.stringify({ channel: 'telegram', peer: 'direct:1', text: 'hang on', messageId: 'm1' })}\n`);
  const deadline = Date.now() + 20_000;
  while (!fs.existsSync(runnerPid) || !fs.existsSync(jobPid)) {
    assert.ok(Date.now() < deadline, 'the run did not start');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  const pids = [Number(fs.readFileSync(runnerPid, 'utf8')), Number(fs.readFileSync(jobPid, 'utf8'))];
  first.kill('SIGKILL');
  await new Promise((resolve) => first.once('exit', resolve));
  try {
    assert.deepEqual(pids.filter(running), pids, 'the runner and its job outlive their switchboard (no one else stops them)');
    const next = await runCli(['ingest', '--json', '--state-dir', state, '--config', config], {
      input: `${JSON.stringify({ channel: 'telegram', peer: 'direct:1', text: 'and now?', messageId: 'm2' })}\n`,
      timeoutMs: GIVE_UP_MS,
    });
    assert.equal(next.code, 0, next.stderr);
    const events = jsonLines(next.stdout);
    assert.ok(events.some((e) => e.type === 'run_failed' && e.reason === 'orphaned'), next.stdout);
    assert.ok(events.some((e) => e.type === 'reply' && e.text === 'quick'), next.stdout);
    assert.deepEqual(await untilStopped(pids, 2_000), [], 'the orphaned runner and its job were killed when the session was taken over');
  } finally {
    for (const pid of pids) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone
      }
    }
  }
});
