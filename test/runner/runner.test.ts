// Tests of the runner layer with real child processes: protocol order, environment, plain-text
// runners, failures, timeout and the abort sequence, steering, built-ins, and that no process is
// ever left behind.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import os from 'node:os';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { isSwitchboardError } from '../../src/core/index.js';
import {
  resolveRunnerSpec,
  startRun,
  type RunEndEvent,
  type RunEvent,
  type RunHandle,
  type RunInit,
  type RunnerSpec,
  type StartRunOptions,
} from '../../src/runner/index.js';
import { REPO_ROOT } from '../helpers.js';

const FIXTURES = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', 'fixtures');
const EXAMPLE_RUNNER = path.join(REPO_ROOT, 'examples', 'runners', 'echo-runner.mjs');
/** Generous bound on any single wait; tests never depend on it for correctness. */
const WAIT_MS = 30_000;

function fixture(name: string, ...args: string[]): string[] {
  return [process.execPath, path.join(FIXTURES, `${name}.js`), ...args];
}

function spec(command: RunnerSpec['command'], extra: Partial<RunnerSpec> = {}): RunnerSpec {
  return { command, timeoutMs: WAIT_MS, ...extra };
}

let runCounter = 0;
function init(texts: string[] = ['hello there'], overrides: Partial<RunInit> = {}): RunInit {
  runCounter += 1;
  return {
    runId: `run-${process.pid}-${runCounter}`,
    sessionKey: 'agent:main:telegram:direct:42',
    sessionId: `session-${runCounter}`,
    agentId: 'main',
    transcriptPath: `/tmp/switchboard-test/session-${runCounter}.jsonl`,
    messages: texts.map((text, i) => ({ role: 'user' as const, text, sender: 'alice', messageId: `m-${runCounter}-${i}` })),
    ...overrides,
  };
}

interface Collected {
  events: RunEvent[];
  end: RunEndEvent;
  /** Events without stderr lines, whose timing relative to stdout is not defined. */
  protocol: RunEvent[];
}

/**
 * Reads every event of a run until its end, calling `onEvent` for each. If the run does not end
 * within WAIT_MS the test fails and the runner is killed.
 */
async function collect(handle: RunHandle, onEvent?: (event: RunEvent, handle: RunHandle) => void): Promise<Collected> {
  const events: RunEvent[] = [];
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      if (handle.pid !== undefined) killQuietly(-handle.pid);
      reject(new Error(`run did not end within ${WAIT_MS} ms; events so far: ${JSON.stringify(events)}`));
    }, WAIT_MS);
  });
  const reading = (async () => {
    for await (const event of handle) {
      events.push(event);
      onEvent?.(event, handle);
    }
  })();
  try {
    await Promise.race([reading, timeout]);
  } finally {
    clearTimeout(timer);
  }
  const end = events.at(-1);
  assert.ok(end !== undefined && end.type === 'end', 'the last event is end');
  assert.equal(events.filter((event) => event.type === 'end').length, 1, 'exactly one end event');
  assert.deepEqual(await handle.ended, end, 'handle.ended resolves with the end event');
  if (handle.pid !== undefined) assertReaped(handle.pid);
  return { events, end, protocol: events.filter((event) => event.type !== 'stderr') };
}

function killQuietly(pid: number): void {
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    // gone
  }
}

/** Our own child: once `end` is out it must be reaped — no process, not even a zombie. */
function assertReaped(pid: number): void {
  assert.throws(
    () => process.kill(pid, 0),
    (err: NodeJS.ErrnoException) => err.code === 'ESRCH',
    `runner process ${pid} is gone`,
  );
}

/**
 * A process that is not our child (a runner's child, or a runner of another parent) is gone when
 * it no longer exists or is a zombie waiting for init to reap it (dead either way).
 */
function isGone(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'ESRCH';
  }
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z');
  } catch {
    return true;
  }
}

/** Polls a condition that becomes true asynchronously (the kernel finishing a SIGKILL). */
async function eventually(condition: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + WAIT_MS;
  while (!condition()) {
    if (Date.now() > deadline) assert.fail(`timed out waiting until ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

function types(events: RunEvent[]): string[] {
  return events.map((event) => event.type);
}

function stderrLines(events: RunEvent[]): string[] {
  return events.flatMap((event) => (event.type === 'stderr' ? [event.line] : []));
}

function replies(events: RunEvent[]): string[] {
  return events.flatMap((event) => (event.type === 'reply' ? [event.text] : []));
}

function grandchildPid(events: RunEvent[]): number {
  const line = stderrLines(events).find((text) => text.startsWith('grandchild '));
  assert.ok(line !== undefined, 'the fixture reported its child');
  return Number(line.slice('grandchild '.length));
}

const fast: StartRunOptions = { termAfterMs: 200, killAfterMs: 3_000 };

// ── config → spec ────────────────────────────────────────────────────────────────────────────

describe('resolveRunnerSpec', () => {
  test('no runner anywhere means record-only (undefined)', () => {
    assert.equal(resolveRunnerSpec(undefined, undefined), undefined);
    assert.equal(resolveRunnerSpec({ timeoutSeconds: 5 }, { env: { A: '1' } }), undefined);
  });

  test('the agent runner is merged over the defaults field by field, env key by key', () => {
    const resolved = resolveRunnerSpec(
      { command: ['llm', '-s', 'be brief'], env: { B: 'agent', C: 'agent' } },
      { command: ['node', 'agent.js'], timeoutSeconds: 30, env: { A: 'defaults', B: 'defaults' }, steering: true },
    );
    assert.deepEqual(resolved, {
      command: ['llm', '-s', 'be brief'],
      timeoutMs: 30_000,
      env: { A: 'defaults', B: 'agent', C: 'agent' },
      steering: true,
    });
  });

  test('defaults alone apply; timeoutSeconds defaults to 600', () => {
    assert.deepEqual(resolveRunnerSpec(undefined, { command: ['node', 'agent.js'] }), { command: ['node', 'agent.js'], timeoutMs: 600_000 });
  });

  test('a string command is split on whitespace without a shell; built-in names stay names', () => {
    assert.deepEqual(resolveRunnerSpec({ command: '  llm   -s  "be brief" ' }, undefined)?.command, ['llm', '-s', '"be', 'brief"']);
    assert.equal(resolveRunnerSpec({ command: 'builtin:echo' }, undefined)?.command, 'builtin:echo');
    assert.equal(resolveRunnerSpec({ command: ['builtin:slow-echo'] }, undefined)?.command, 'builtin:slow-echo');
    const slow = resolveRunnerSpec({ command: 'builtin:slow-echo', delayMs: 5, toolCalls: 3, steering: false }, undefined);
    assert.deepEqual(slow, { command: 'builtin:slow-echo', timeoutMs: 600_000, delayMs: 5, toolCalls: 3, steering: false });
  });

  test('bad runner configs are CONFIG_INVALID', () => {
    const bad: Record<string, unknown>[] = [
      { command: 'builtin:nope' },
      { command: 'builtin:echo extra' },
      { command: '   ' },
      { command: [] },
      { command: [''] },
      { command: ['ok', 3] },
      { command: 42 },
      { command: ['x'], timeoutSeconds: 0 },
      { command: ['x'], timeoutSeconds: 'soon' },
      { command: ['x'], env: { A: 1 } },
      { command: ['x'], env: ['A=1'] },
      { command: ['x'], delayMs: -1 },
      { command: ['x'], toolCalls: 1.5 },
      { command: ['x'], steering: 'yes' },
    ];
    for (const config of bad) {
      assert.throws(
        () => resolveRunnerSpec(config, undefined),
        (err: unknown) => isSwitchboardError(err, 'CONFIG_INVALID') && err.exitCode === 78,
        JSON.stringify(config),
      );
    }
  });
});

// ── external runners ─────────────────────────────────────────────────────────────────────────

describe('external runners', () => {
  test('the example runner: events in protocol order', async () => {
    // Whether a steer line beats this fast runner to its answer is a race by nature; steering is
    // tested deterministically with the runner-protocol fixture below.
    const handle = startRun(spec(['node', EXAMPLE_RUNNER], { steering: true }), init(['first question']));
    assert.ok(handle.pid !== undefined);
    assert.equal(handle.steer([{ role: 'user', text: 'too early' }]), false, 'no steering before hello');
    const { protocol, end } = await collect(handle);
    assert.deepEqual(types(protocol), ['hello', 'tool_call', 'tool_result', 'boundary', 'assistant', 'reply', 'end']);
    assert.deepEqual(protocol[0], { type: 'hello', steering: true });
    const call = protocol[1];
    const result = protocol[2];
    assert.ok(call.type === 'tool_call' && result.type === 'tool_result');
    assert.equal(result.id, call.id, 'the result answers the call');
    assert.equal(end.status, 'done');
    assert.equal(end.exitCode, 0);
    assert.equal(end.error, undefined);
    assert.ok(replies(protocol)[0].includes('first question'));
    assert.equal(handle.canSteer, false, 'no steering after the end');
    assert.equal(handle.abort('late'), false, 'nothing to abort after the end');
  });

  test('the example runner works with stdin closed (steering not configured)', async () => {
    const handle = startRun(spec(['node', EXAMPLE_RUNNER]), init(['plain turn']));
    let steerAfterHello: false | Promise<boolean> | undefined;
    const { protocol, end } = await collect(handle, (event, h) => {
      if (event.type === 'hello') steerAfterHello = h.steer([{ role: 'user', text: 'x' }]);
    });
    assert.deepEqual(protocol[0], { type: 'hello', steering: false }, 'steering is only announced when stdin stays open');
    assert.equal(steerAfterHello, false);
    assert.equal(end.status, 'done');
    assert.equal(replies(protocol).length, 1);
  });

  test('the example runner honours an abort line by itself', async () => {
    const handle = startRun(
      spec(['node', EXAMPLE_RUNNER], { steering: true, env: { ECHO_RUNNER_TOOL_MS: '600000' } }),
      init(),
      { termAfterMs: WAIT_MS, killAfterMs: WAIT_MS },
    );
    let aborted: boolean | undefined;
    const { end, events } = await collect(handle, (event, h) => {
      if (event.type === 'tool_call') aborted = h.abort('user said stop');
    });
    assert.equal(aborted, true);
    assert.equal(end.status, 'aborted');
    assert.equal(end.error?.reason, 'aborted');
    assert.equal(end.signal, null, 'it exited before any signal was needed');
    assert.equal(replies(events).length, 0);
  });

  test('the runner gets the SWITCHBOARD_* environment, spec.env, the parent env and the run line', async () => {
    const runInit = init(['one', 'two']);
    const handle = startRun(spec(fixture('runner-protocol', 'env'), { env: { FIXTURE_VAR: 'from-spec', SWITCHBOARD_RUN_ID: 'spoofed' } }), runInit, {
      env: { ...process.env, FIXTURE_PARENT: 'from-parent' },
    });
    const { protocol, end } = await collect(handle);
    assert.equal(end.status, 'done');
    const [reply] = replies(protocol);
    const seen = JSON.parse(reply) as { env: Record<string, string>; run: Record<string, unknown> };
    assert.deepEqual(seen.env, {
      SWITCHBOARD_SESSION_KEY: runInit.sessionKey,
      SWITCHBOARD_SESSION_ID: runInit.sessionId,
      SWITCHBOARD_AGENT_ID: runInit.agentId,
      SWITCHBOARD_TRANSCRIPT: runInit.transcriptPath,
      SWITCHBOARD_RUN_ID: runInit.runId,
      FIXTURE_VAR: 'from-spec',
      FIXTURE_PARENT: 'from-parent',
    });
    assert.deepEqual(seen.run, {
      type: 'run',
      runId: runInit.runId,
      sessionKey: runInit.sessionKey,
      sessionId: runInit.sessionId,
      agentId: runInit.agentId,
      deliveryContext: null,
      messages: runInit.messages,
    });
  });

  test('a plain-text runner: stdin is closed after the run line, its trimmed output is the reply', async () => {
    const handle = startRun(spec(fixture('runner-plain', 'run')), init());
    let steer: false | Promise<boolean> | undefined;
    const { events, protocol, end } = await collect(handle, (_event, h) => {
      steer ??= h.steer([{ role: 'user', text: 'x' }]);
    });
    assert.equal(end.status, 'done');
    assert.equal(steer, false, 'a plain-text runner cannot be steered');
    assert.deepEqual(types(protocol), ['reply', 'end']);
    assert.deepEqual(replies(protocol), ['The answer is 42.\n\n[1, 2, 3]\n{"type":"mystery","x":1}\n{"no":"type"}\n"quoted"']);
    assert.ok(stderrLines(events).some((line) => line.startsWith('runner-plain: read')), 'stderr is reported line by line');
  });

  test('`cat` echoes the run line, which is not a runner event: it becomes the plain-text reply', async () => {
    const runInit = init(['meow']);
    const { protocol, end } = await collect(startRun(spec(['cat']), runInit));
    assert.equal(end.status, 'done');
    assert.deepEqual(types(protocol), ['reply', 'end']);
    const echoed = JSON.parse(replies(protocol)[0]) as Record<string, unknown>;
    assert.equal(echoed.type, 'run');
    assert.equal(echoed.runId, runInit.runId);
    assert.deepEqual(echoed.messages, runInit.messages);
  });

  test('a string command split on whitespace runs (sh -c is not involved)', async () => {
    const command = resolveRunnerSpec({ command: 'echo   hi   there' }, undefined)?.command;
    assert.ok(command !== undefined);
    const { protocol, end } = await collect(startRun(spec(command), init()));
    assert.equal(end.status, 'done');
    assert.deepEqual(replies(protocol), ['hi there']);
  });

  test('non-JSON noise around a real reply is ignored', async () => {
    const { protocol, end } = await collect(startRun(spec(fixture('runner-garbage', 'noise')), init()));
    assert.equal(end.status, 'done');
    assert.deepEqual(replies(protocol), ['the real reply']);
  });

  for (const steering of [false, true]) {
    test(`non-zero exit is failed with the exit code (stdin ${steering ? 'kept open: EPIPE handled' : 'closed'})`, async () => {
      const { end, protocol } = await collect(startRun(spec(fixture('runner-exit', '3'), { steering }), init()));
      assert.equal(end.status, 'failed');
      assert.equal(end.exitCode, 3);
      assert.equal(end.signal, null);
      assert.equal(end.error?.reason, 'exit');
      assert.equal(replies(protocol).length, 0);
    });
  }

  test('a runner that crashes mid-run: events so far, then failed', async () => {
    const { protocol, end, events } = await collect(startRun(spec(fixture('runner-crash', 'throw')), init()));
    assert.deepEqual(types(protocol), ['hello', 'tool_call', 'end']);
    assert.equal(end.status, 'failed');
    assert.equal(end.exitCode, 1);
    assert.equal(end.error?.reason, 'exit');
    assert.ok(stderrLines(events).length > 0, 'the stack trace arrives as stderr lines');
  });

  test('a runner killed by a signal it was not sent is failed', async () => {
    const { end } = await collect(startRun(spec(fixture('runner-crash', 'self-kill')), init()));
    assert.equal(end.status, 'failed');
    assert.equal(end.exitCode, null);
    assert.equal(end.signal, 'SIGKILL');
    assert.equal(end.error?.reason, 'exit');
  });

  test('a command that does not exist fails with reason spawn, without a process', async () => {
    const handle = startRun(spec(['switchboard-no-such-runner-xyz', '--flag']), init());
    assert.equal(handle.pid, undefined);
    assert.equal(handle.abort('x'), false);
    const { events, end } = await collect(handle);
    assert.deepEqual(types(events), ['end']);
    assert.equal(end.status, 'failed');
    assert.equal(end.error?.reason, 'spawn');
    assert.ok(end.error?.message.includes('switchboard-no-such-runner-xyz'), 'the message names the command');
    assert.equal(end.exitCode, null);
  });

  test('an executable whose #! interpreter does not exist is named as such, not as a missing command', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sb-shebang-'));
    const script = path.join(dir, 'agent.sh');
    fs.writeFileSync(script, '#!/no/such/interpreter\necho hi\n', { mode: 0o755 });
    try {
      const { end } = await collect(startRun(spec([script]), init()));
      assert.equal(end.error?.reason, 'spawn');
      assert.match(end.error?.message ?? '', /interpreter named by the #! line/);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  test('a file that is not executable fails with reason spawn', async () => {
    const { end } = await collect(startRun(spec([path.join(FIXTURES, 'runner-exit.js')]), init()));
    assert.equal(end.status, 'failed');
    assert.equal(end.error?.reason, 'spawn');
  });

  const violations: [mode: string, reason: string][] = [
    ['huge', 'line-too-long'],
    ['invalid-utf8', 'protocol'],
    ['bad-field', 'protocol'],
    ['unknown-tool-result', 'protocol'],
    ['open-boundary', 'protocol'],
    ['late-hello', 'protocol'],
    ['after-done', 'protocol'],
  ];
  for (const [mode, reason] of violations) {
    test(`protocol violation (${mode}) fails the run with reason ${reason}`, async () => {
      const { end, protocol } = await collect(startRun(spec(fixture('runner-garbage', mode)), init()));
      assert.equal(end.status, 'failed');
      assert.equal(end.error?.reason, reason);
      if (mode === 'huge') assert.equal(replies(protocol).length, 0, 'nothing after the violation is taken');
    });
  }

  test('plain text over the cap fails the run (output-too-large)', async () => {
    const { end, protocol } = await collect(startRun(spec(fixture('runner-garbage', 'plain-flood')), init(), { maxLineBytes: 4096 }));
    assert.equal(end.status, 'failed');
    assert.equal(end.error?.reason, 'output-too-large');
    assert.equal(replies(protocol).length, 0);
  });

  test('a runner that says done but does not exit is stopped and still done', async () => {
    const { end, protocol } = await collect(startRun(spec(fixture('runner-protocol', 'linger')), init(), { termAfterMs: 100, killAfterMs: 3_000 }));
    assert.equal(end.status, 'done');
    assert.equal(end.signal, 'SIGTERM');
    assert.deepEqual(replies(protocol), ['replied']);
  });
});

// ── steering ─────────────────────────────────────────────────────────────────────────────────

describe('steering', () => {
  test('steer is refused before hello and accepted after hello {steering:true}; the runner receives it', async () => {
    const handle = startRun(spec(fixture('runner-protocol', 'steer-wait'), { steering: true }), init(['turn text']));
    assert.equal(handle.canSteer, false);
    assert.equal(handle.steer([{ role: 'user', text: 'early' }]), false);
    let accepted: false | Promise<boolean> | undefined;
    const { protocol, end } = await collect(handle, (event, h) => {
      if (event.type === 'tool_call') {
        assert.equal(h.canSteer, true);
        accepted = h.steer([{ role: 'user', text: 'steer one' }, { role: 'user', text: 'steer two' }]);
      }
    });
    assert.equal(await accepted, true, 'sent, and taken by the runner');
    assert.equal(end.status, 'done');
    assert.deepEqual(types(protocol), ['hello', 'tool_call', 'tool_result', 'boundary', 'assistant', 'reply', 'end']);
    assert.deepEqual(replies(protocol), ['turn text\nsteer one\nsteer two']);
  });

  test('without `steering: true` in the spec stdin is closed, hello reports steering false and steer is refused', async () => {
    const handle = startRun(spec(fixture('runner-protocol', 'steer-wait')), init(['turn text']));
    let accepted: false | Promise<boolean> | undefined;
    const { protocol, end } = await collect(handle, (event, h) => {
      if (event.type === 'hello') accepted = h.steer([{ role: 'user', text: 'x' }]);
    });
    assert.deepEqual(protocol[0], { type: 'hello', steering: false });
    assert.equal(accepted, false);
    assert.equal(end.status, 'done');
    assert.deepEqual(replies(protocol), ['turn text']);
  });

  test('a runner announcing hello {steering:false} is never steered', async () => {
    const handle = startRun(spec(fixture('runner-protocol', 'hello-false'), { steering: true }), init(), fast);
    let accepted: false | Promise<boolean> | undefined;
    const { end } = await collect(handle, (event, h) => {
      if (event.type === 'hello') {
        accepted = h.steer([{ role: 'user', text: 'x' }]);
        h.abort('done testing');
      }
    });
    assert.equal(accepted, false);
    assert.equal(end.status, 'aborted');
  });
});

// ── timeout, abort, leftovers ────────────────────────────────────────────────────────────────

describe('stopping runners', () => {
  test('timeout: abort line, then signals; status timeout and the child is gone', async () => {
    const handle = startRun(spec(fixture('runner-hang', 'run'), { steering: true, timeoutMs: 300 }), init(), { termAfterMs: 100, killAfterMs: 400 });
    const pid = handle.pid;
    assert.ok(pid !== undefined);
    const { end } = await collect(handle);
    assert.equal(end.status, 'timeout');
    assert.equal(end.error?.reason, 'timeout');
    assert.equal(end.exitCode, null);
    assert.ok(end.signal === 'SIGKILL' || end.signal === 'SIGTERM', 'ended by a signal');
    assertReaped(pid);
  });

  test('abort: the abort line, then SIGTERM, then SIGKILL for a runner ignoring SIGTERM; its children die too', async () => {
    const handle = startRun(spec(fixture('runner-hang', 'run', '--grandchild'), { steering: true }), init(), { termAfterMs: 1_000, killAfterMs: 4_000 });
    let first: boolean | undefined;
    let second: boolean | undefined;
    const { end, events } = await collect(handle, (event, h) => {
      if (event.type === 'hello') {
        first = h.abort('user pressed stop');
        second = h.abort('again');
        assert.equal(h.canSteer, false);
      }
    });
    assert.equal(first, true);
    assert.equal(second, false, 'a run is aborted once');
    assert.equal(end.status, 'aborted');
    assert.equal(end.error?.reason, 'aborted');
    assert.equal(end.signal, 'SIGKILL');
    const notes = stderrLines(events).filter((line) => line === 'sigterm' || line.startsWith('abort '));
    assert.deepEqual(notes, ['abort user pressed stop', 'sigterm']);
    const grandchild = grandchildPid(events);
    await eventually(() => isGone(grandchild), `grandchild ${grandchild} is gone`);
  });

  test('abort of a runner whose stdin is closed goes straight to SIGTERM', async () => {
    const handle = startRun(spec(fixture('runner-hang', 'run')), init(), { termAfterMs: WAIT_MS, killAfterMs: 2_000 });
    const { end, events } = await collect(handle, (event, h) => {
      if (event.type === 'hello') h.abort('stop');
    });
    assert.equal(end.status, 'aborted');
    assert.equal(end.signal, 'SIGKILL');
    const notes = stderrLines(events).filter((line) => line === 'sigterm' || line.startsWith('abort '));
    assert.deepEqual(notes, ['sigterm'], 'no abort line could be sent; SIGTERM did not wait for termAfterMs');
  });

  test('processes a runner leaves behind when it exits are killed', async () => {
    const { end, events } = await collect(startRun(spec(fixture('runner-crash', 'orphan')), init()));
    assert.equal(end.status, 'done');
    const grandchild = grandchildPid(events);
    await eventually(() => isGone(grandchild), `leftover ${grandchild} is gone`);
  });

  test('a child that escaped the process group and holds the pipes does not keep the run open', async () => {
    let escaped: number | undefined;
    try {
      const { end, events, protocol } = await collect(startRun(spec(fixture('runner-crash', 'escape')), init()), (event) => {
        if (event.type === 'stderr' && event.line.startsWith('escaped ')) escaped = Number(event.line.slice('escaped '.length));
      });
      assert.equal(end.status, 'done');
      assert.deepEqual(replies(protocol), ['escaped']);
      assert.ok(escaped !== undefined, `the fixture reported its escaped child: ${JSON.stringify(events)}`);
    } finally {
      if (escaped !== undefined) killQuietly(escaped);
    }
  });

  test('when switchboard exits with a run still active, the runner does not survive it', async () => {
    const parent = spawn(process.execPath, [path.join(FIXTURES, 'runner-parent.js'), 'run'], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    parent.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString('utf8');
    });
    const status = await new Promise<number | null>((resolve) => parent.on('close', resolve));
    assert.equal(status, 0);
    const runnerPid = Number(out.trim());
    assert.ok(Number.isInteger(runnerPid) && runnerPid > 0, `parent printed the runner pid: ${out}`);
    await eventually(() => isGone(runnerPid), `runner ${runnerPid} is gone`);
  });
});

// ── built-in runners ─────────────────────────────────────────────────────────────────────────

describe('built-in runners', () => {
  test('builtin:echo replies "echo: <texts joined by newline>" and is done', async () => {
    const handle = startRun(spec('builtin:echo'), init(['one', 'two']));
    assert.equal(handle.pid, undefined);
    assert.equal(handle.steer([{ role: 'user', text: 'x' }]), false);
    const { events, end } = await collect(handle);
    assert.deepEqual(types(events), ['reply', 'end']);
    assert.deepEqual(replies(events), ['echo: one\ntwo']);
    assert.deepEqual(end, { type: 'end', status: 'done', exitCode: 0, signal: null });
  });

  test('builtin:slow-echo: hello, per tool call tool_call/tool_result/boundary, then assistant, reply, done', async () => {
    const handle = startRun(spec('builtin:slow-echo', { delayMs: 1, toolCalls: 3 }), init(['hi']));
    const { events, end } = await collect(handle);
    assert.deepEqual(types(events), [
      'hello',
      ...['tool_call', 'tool_result', 'boundary'],
      ...['tool_call', 'tool_result', 'boundary'],
      ...['tool_call', 'tool_result', 'boundary'],
      'assistant',
      'reply',
      'end',
    ]);
    assert.deepEqual(events[0], { type: 'hello', steering: true });
    const calls = events.filter((event) => event.type === 'tool_call').map((event) => (event.type === 'tool_call' ? event.id : ''));
    assert.equal(new Set(calls).size, 3, 'tool call ids are distinct');
    assert.deepEqual(replies(events), ['slow-echo: hi']);
    assert.equal(end.status, 'done');
  });

  test('builtin:slow-echo includes messages steered before and at boundaries, in order', async () => {
    const handle = startRun(spec('builtin:slow-echo', { delayMs: 1, toolCalls: 2 }), init(['one']));
    assert.equal(handle.steer([{ role: 'user', text: 'too early' }]), false, 'nothing before hello');
    let boundaries = 0;
    const accepted: (false | Promise<boolean>)[] = [];
    const { events } = await collect(handle, (event, h) => {
      if (event.type === 'hello') accepted.push(h.steer([{ role: 'user', text: 'two' }]));
      if (event.type === 'boundary') {
        boundaries += 1;
        accepted.push(h.steer([{ role: 'user', text: boundaries === 1 ? 'three' : 'four' }]));
      }
    });
    assert.deepEqual(await Promise.all(accepted), [true, true, true]);
    assert.deepEqual(replies(events), ['slow-echo: one\ntwo\nthree\nfour']);
    assert.equal(handle.steer([{ role: 'user', text: 'late' }]), false);
  });

  test('builtin:slow-echo with steering:false announces it and refuses steering', async () => {
    const handle = startRun(spec('builtin:slow-echo', { delayMs: 1, steering: false }), init(['one']));
    let accepted: false | Promise<boolean> | undefined;
    const { events } = await collect(handle, (event, h) => {
      if (event.type === 'hello') accepted = h.steer([{ role: 'user', text: 'x' }]);
    });
    assert.deepEqual(events[0], { type: 'hello', steering: false });
    assert.equal(accepted, false);
    assert.deepEqual(replies(events), ['slow-echo: one']);
  });

  test('builtin:slow-echo honours abort at once', async () => {
    const handle = startRun(spec('builtin:slow-echo', { delayMs: 600_000 }), init());
    const { events, end } = await collect(handle, (event, h) => {
      if (event.type === 'tool_call') assert.equal(h.abort('stop'), true);
    });
    assert.deepEqual(types(events), ['hello', 'tool_call', 'end']);
    assert.equal(end.status, 'aborted');
    assert.equal(end.error?.reason, 'aborted');
    assert.equal(handle.abort('again'), false);
  });

  test('builtin:echo can be aborted before it starts', async () => {
    const handle = startRun(spec('builtin:echo'), init());
    assert.equal(handle.abort('never mind'), true);
    const { events, end } = await collect(handle);
    assert.deepEqual(types(events), ['end']);
    assert.equal(end.status, 'aborted');
  });

  test('builtin:slow-echo times out like an external runner', async () => {
    const { events, end } = await collect(startRun(spec('builtin:slow-echo', { delayMs: 600_000, timeoutMs: 50 }), init()));
    assert.equal(end.status, 'timeout');
    assert.equal(end.error?.reason, 'timeout');
    assert.equal(replies(events).length, 0);
  });
});

describe('run handle', () => {
  test('a handle can be iterated only once', async () => {
    const handle = startRun(spec('builtin:echo'), init());
    await collect(handle);
    assert.throws(() => handle[Symbol.asyncIterator](), (err: unknown) => isSwitchboardError(err, 'INTERNAL'));
  });

  test('events are buffered until the consumer starts reading', async () => {
    const handle = startRun(spec(fixture('runner-protocol', 'env')), init());
    await handle.ended;
    const { protocol } = await collect(handle);
    assert.deepEqual(types(protocol), ['reply', 'end']);
  });
});
