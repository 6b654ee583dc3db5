// Runs an external runner program for one run: spawns it in its own process group, speaks the
// JSON-lines protocol, enforces timeout/abort/line caps, and always reaps it and its children.

import fs from 'node:fs';
import path from 'node:path';
import { spawn, type ChildProcess } from 'node:child_process';
import { LineSplitter, MAX_TIMER_MS, describeLineError, killProcessSession, type NdjsonLine } from '../core/index.js';
import { abortLine, parseRunnerLine, runLine, steerLine, type RunnerLineEvent } from './protocol.js';
import { RunEvents } from './run-events.js';
import type { RunEndEvent, RunError, RunEvent, RunHandle, RunInit, RunMessage, RunnerSpec, RunStatus } from './types.js';
import { clampDelay, type ResolvedRunOptions } from './options.js';

/** After the runner exits, how long its pipes may stay open (held by an escaped grandchild). */
const CLOSE_GRACE_MS = 1000;
/** Runner events waiting unread before its pipes are paused (a 64 KiB chunk may still add a few hundred at once). */
const EVENTS_HIGH_WATER = 512;

/** Process groups of runners still alive: killed if switchboard itself exits first. */
const liveGroups = new Set<number>();
let exitHookInstalled = false;

function trackGroup(pid: number): void {
  liveGroups.add(pid);
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on('exit', () => {
    for (const group of liveGroups) killProcessSession(group);
  });
}

function killGroup(pid: number, signal: NodeJS.Signals): boolean {
  try {
    process.kill(-pid, signal);
    return true;
  } catch {
    return false;
  }
}

export function startChildRun(
  argv: readonly string[],
  spec: RunnerSpec,
  init: RunInit,
  options: ResolvedRunOptions,
): RunHandle {
  return new ChildRun(argv, spec, init, options);
}

interface StopCause {
  status: Exclude<RunStatus, 'done'>;
  error: RunError;
}

class ChildRun implements RunHandle {
  readonly runId: string;
  readonly pid: number | undefined;
  /**
   * The runner's pipes are read only as fast as its events are taken: a runner that floods its
   * stdout waits in its own write (and its timeout still fires) instead of filling our memory —
   * 3 MB of replies kept a 2 s run going for a minute, and an endless flood grew by 140 MB/s.
   */
  private readonly events = new RunEvents({ highWater: EVENTS_HIGH_WATER, onPressure: (full) => this.setReading(!full) });
  private readonly child: ChildProcess | undefined;
  private readonly keepStdin: boolean;
  private readonly stdoutLines: LineSplitter;
  private readonly stderrLines: LineSplitter;

  private stdinOpen = false;
  private steeringAnnounced = false;
  private sawEvent = false;
  private doneSeen = false;
  /** We signalled a runner that had said `done` but did not exit: still a `done` run. */
  private lingerSignalled = false;
  private replies = 0;
  private readonly plain: string[] = [];
  private plainBytes = 0;
  private readonly openToolCalls = new Set<string>();
  private ignoreStdout = false;
  private stop: StopCause | undefined;
  private spawnError: RunError | undefined;
  private exited = false;
  private exitCode: number | null = null;
  private exitSignal: NodeJS.Signals | null = null;
  private finished = false;

  private timeoutTimer: NodeJS.Timeout | undefined;
  private termTimer: NodeJS.Timeout | undefined;
  private killTimer: NodeJS.Timeout | undefined;
  private closeTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly argv: readonly string[],
    private readonly spec: RunnerSpec,
    init: RunInit,
    private readonly options: ResolvedRunOptions,
  ) {
    this.runId = init.runId;
    this.keepStdin = spec.steering === true;
    this.stdoutLines = new LineSplitter(options.maxLineBytes);
    this.stderrLines = new LineSplitter(options.maxLineBytes);

    const env: NodeJS.ProcessEnv = {
      ...(options.env ?? process.env),
      ...spec.env,
      SWITCHBOARD_SESSION_KEY: init.sessionKey,
      SWITCHBOARD_SESSION_ID: init.sessionId,
      SWITCHBOARD_AGENT_ID: init.agentId,
      SWITCHBOARD_TRANSCRIPT: init.transcriptPath,
      SWITCHBOARD_RUN_ID: init.runId,
    };

    let child: ChildProcess;
    try {
      // detached: the runner leads its own process group, so abort and cleanup reach every
      // process it started, not only the first one.
      child = spawn(argv[0], argv.slice(1), { env, cwd: options.cwd, stdio: ['pipe', 'pipe', 'pipe'], detached: true });
    } catch (err) {
      this.pid = undefined;
      this.child = undefined;
      this.spawnError = this.describeSpawnError(err);
      setImmediate(() => this.finalize());
      return;
    }
    this.child = child;
    this.pid = child.pid;

    child.on('error', (err) => {
      if (child.pid === undefined) {
        this.spawnError = this.describeSpawnError(err);
        this.finalize();
      }
      // Otherwise a failed kill() of a process that is already gone: nothing to do.
    });
    child.on('exit', (code, signal) => this.onExit(code, signal));
    child.on('close', () => this.finalize());
    // EPIPE and friends: the runner stopped reading stdin; later lines are simply not delivered.
    child.stdin?.on('error', () => {
      this.stdinOpen = false;
    });
    child.stdout?.on('data', (chunk: Buffer) => {
      for (const line of this.stdoutLines.push(chunk)) this.onStdoutLine(line);
    });
    child.stderr?.on('data', (chunk: Buffer) => {
      for (const line of this.stderrLines.push(chunk)) this.onStderrLine(line);
    });

    if (child.pid === undefined) return; // spawn failed; 'error' follows
    trackGroup(child.pid);
    this.stdinOpen = true;
    this.writeLine(runLine(init));
    if (!this.keepStdin) this.closeStdin();
    this.timeoutTimer = setTimeout(() => this.onTimeout(), clampDelay(spec.timeoutMs, MAX_TIMER_MS));
  }

  get ended(): Promise<RunEndEvent> {
    return this.events.ended;
  }

  get canSteer(): boolean {
    return this.steeringAnnounced && this.stdinOpen && !this.doneSeen && this.stop === undefined && !this.exited && !this.finished;
  }

  [Symbol.asyncIterator](): AsyncIterator<RunEvent> {
    return this.events[Symbol.asyncIterator]();
  }

  steer(messages: readonly RunMessage[]): false | Promise<boolean> {
    if (!this.canSteer) return false;
    return this.deliverLine(steerLine(messages));
  }

  abort(reason = 'aborted'): boolean {
    if (this.child === undefined || this.pid === undefined) return false;
    if (this.finished || this.exited || this.doneSeen || this.stop !== undefined) return false;
    this.stop = { status: 'aborted', error: { reason: 'aborted', message: `run aborted: ${reason}` } };
    this.beginStop(reason);
    return true;
  }

  // ── protocol ──────────────────────────────────────────────────────────────────────────────

  private onStdoutLine(line: NdjsonLine): void {
    if (this.ignoreStdout) return;
    if ('error' in line) {
      this.violation(
        line.error === 'too-long' ? 'line-too-long' : 'protocol',
        `stdout line ${line.line}: ${describeLineError(line.error, line.bytes, this.options.maxLineBytes)}`,
      );
      return;
    }
    const parsed = parseRunnerLine(line.text);
    if (parsed.kind === 'invalid') {
      this.violation('protocol', `stdout line ${line.line}: ${parsed.message}`);
    } else if (parsed.kind === 'event') {
      this.onEvent(parsed.event, line.line);
    } else if (!this.doneSeen && this.replies === 0) {
      // Plain text is only needed while it may still become the reply.
      this.plainBytes += Buffer.byteLength(parsed.text) + 1;
      if (this.plainBytes > this.options.maxLineBytes) {
        this.violation('output-too-large', `plain-text output is over the ${this.options.maxLineBytes}-byte cap of a reply`);
        return;
      }
      this.plain.push(parsed.text);
    }
  }

  private onEvent(event: RunnerLineEvent, lineNumber: number): void {
    const where = `stdout line ${lineNumber}`;
    if (this.doneSeen) {
      this.violation('protocol', `${where}: "${event.type}" after "done"`);
      return;
    }
    switch (event.type) {
      case 'hello':
        if (this.sawEvent) {
          this.violation('protocol', `${where}: "hello" must come before any other event`);
          return;
        }
        // A runner whose stdin we closed cannot read steer lines, whatever it announces.
        this.steeringAnnounced = event.steering && this.keepStdin;
        this.sawEvent = true;
        this.events.emit({ type: 'hello', steering: this.steeringAnnounced });
        return;
      case 'tool_call':
        if (this.openToolCalls.has(event.id)) {
          this.violation('protocol', `${where}: tool call id "${event.id}" is already open`);
          return;
        }
        this.openToolCalls.add(event.id);
        break;
      case 'tool_result':
        if (!this.openToolCalls.delete(event.id)) {
          this.violation('protocol', `${where}: tool_result for "${event.id}", which is not an open tool call`);
          return;
        }
        break;
      case 'boundary':
        if (this.openToolCalls.size > 0) {
          this.violation('protocol', `${where}: "boundary" while tool calls are still open (${[...this.openToolCalls].join(', ')})`);
          return;
        }
        break;
      case 'reply':
        this.replies += 1;
        break;
      case 'done':
        this.sawEvent = true;
        this.doneSeen = true;
        clearTimeout(this.timeoutTimer);
        this.closeStdin();
        // The run is over; a runner that does not exit by itself is stopped, still `done`.
        this.scheduleSignals(this.options.termAfterMs, () => {
          this.lingerSignalled = true;
        });
        return;
      default:
        break;
    }
    this.sawEvent = true;
    this.events.emit(event);
  }

  private onStderrLine(line: NdjsonLine): void {
    const text =
      'error' in line
        ? `[stderr line ${line.line}: ${describeLineError(line.error, line.bytes, this.options.maxLineBytes)}; omitted]`
        : line.text;
    this.events.emit({ type: 'stderr', line: text });
  }

  /** A broken protocol fails the run; the runner is stopped and its further stdout ignored. */
  private violation(reason: RunError['reason'], message: string): void {
    this.ignoreStdout = true;
    if (this.stop !== undefined || this.exited) {
      if (this.stop === undefined) this.stop = { status: 'failed', error: { reason, message } };
      return;
    }
    this.stop = { status: 'failed', error: { reason, message } };
    this.beginStop('protocol error');
  }

  private onTimeout(): void {
    if (this.stop !== undefined || this.exited || this.doneSeen) return;
    const seconds = this.spec.timeoutMs / 1000;
    this.stop = {
      status: 'timeout',
      error: { reason: 'timeout', message: `runner did not finish within ${seconds} s`, hint: 'raise runner.timeoutSeconds if runs legitimately take longer' },
    };
    this.beginStop('timeout');
  }

  // ── process control ──────────────────────────────────────────────────────────────────────

  /** abort line (when stdin is open), SIGTERM after termAfterMs (at once otherwise), SIGKILL after killAfterMs. */
  private beginStop(reason: string): void {
    clearTimeout(this.timeoutTimer);
    if (this.exited) return;
    const delivered = this.writeLine(abortLine(reason));
    this.closeStdin();
    this.scheduleSignals(delivered ? this.options.termAfterMs : 0);
  }

  private scheduleSignals(termAfterMs: number, beforeSignal?: () => void): void {
    clearTimeout(this.termTimer);
    clearTimeout(this.killTimer);
    const send = (signal: NodeJS.Signals) => {
      beforeSignal?.();
      this.signal(signal);
    };
    if (termAfterMs <= 0) send('SIGTERM');
    else this.termTimer = setTimeout(() => send('SIGTERM'), termAfterMs);
    this.killTimer = setTimeout(() => send('SIGKILL'), Math.max(this.options.killAfterMs, termAfterMs));
  }

  private signal(signal: NodeJS.Signals): void {
    if (this.pid === undefined || this.exited) return;
    if (!killGroup(this.pid, signal)) {
      // The runner moved itself out of its group: signal it alone.
      try {
        this.child?.kill(signal);
      } catch {
        // already gone
      }
    }
  }

  private writeLine(text: string): boolean {
    const stdin = this.child?.stdin;
    if (!this.stdinOpen || stdin === undefined || stdin === null || !stdin.writable) return false;
    stdin.write(text);
    return true;
  }

  /** writeLine, and whether the runner's stdin took the line (its write did not fail: EPIPE when the runner closed it). */
  private deliverLine(text: string): false | Promise<boolean> {
    const stdin = this.child?.stdin;
    if (!this.stdinOpen || stdin === undefined || stdin === null || !stdin.writable) return false;
    return new Promise((resolve) => stdin.write(text, (err?: Error | null) => resolve(!err)));
  }

  private closeStdin(): void {
    if (!this.stdinOpen) return;
    this.stdinOpen = false;
    this.child?.stdin?.end();
  }

  /** Pauses or resumes reading the runner's pipes (after its exit they are always read: what is left in them is bounded by the pipe). */
  private setReading(on: boolean): void {
    for (const stream of [this.child?.stdout, this.child?.stderr]) {
      if (stream === null || stream === undefined) continue;
      if (on || this.exited) stream.resume();
      else stream.pause();
    }
  }

  private onExit(code: number | null, signal: NodeJS.Signals | null): void {
    this.exited = true;
    this.setReading(true);
    this.exitCode = code;
    this.exitSignal = signal;
    this.stdinOpen = false;
    clearTimeout(this.timeoutTimer);
    clearTimeout(this.termTimer);
    clearTimeout(this.killTimer);
    // Whatever the runner started and left behind dies with it ("never leave a process behind").
    // Done right here, while its process group id cannot yet have been reused.
    if (this.pid !== undefined) {
      killProcessSession(this.pid);
      liveGroups.delete(this.pid);
    }
    // Normally 'close' follows at once; a process that escaped the group may hold the pipes.
    this.closeTimer = setTimeout(() => {
      this.child?.stdout?.destroy();
      this.child?.stderr?.destroy();
      this.finalize();
    }, CLOSE_GRACE_MS);
  }

  private finalize(): void {
    if (this.finished) return;
    this.finished = true;
    clearTimeout(this.timeoutTimer);
    clearTimeout(this.termTimer);
    clearTimeout(this.killTimer);
    clearTimeout(this.closeTimer);
    if (this.pid !== undefined) liveGroups.delete(this.pid);
    for (const line of this.stdoutLines.end()) this.onStdoutLine(line);
    for (const line of this.stderrLines.end()) this.onStderrLine(line);

    const end = this.endEvent();
    if (end.status === 'done' && this.replies === 0) {
      const text = this.plain.join('\n').trim();
      if (text !== '') this.events.emit({ type: 'reply', text });
    }
    this.events.end(end);
  }

  private endEvent(): RunEndEvent {
    const end = (status: RunStatus, error?: RunError): RunEndEvent =>
      error === undefined
        ? { type: 'end', status, exitCode: this.exitCode, signal: this.exitSignal }
        : { type: 'end', status, exitCode: this.exitCode, signal: this.exitSignal, error };
    if (this.spawnError !== undefined) return end('failed', this.spawnError);
    if (this.stop !== undefined) return end(this.stop.status, this.stop.error);
    if (this.exitCode === 0) return end('done');
    if (this.doneSeen && this.lingerSignalled && this.exitSignal !== null) return end('done');
    const message =
      this.exitCode !== null ? `runner exited with status ${this.exitCode}` : `runner was killed by ${this.exitSignal ?? 'an unknown signal'}`;
    return end('failed', { reason: 'exit', message });
  }

  private describeSpawnError(err: unknown): RunError {
    const code = (err as NodeJS.ErrnoException | undefined)?.code;
    const command = this.argv[0];
    // ENOENT for a file that is there: the kernel could not find its `#!` interpreter.
    if (code === 'ENOENT' && command.includes('/') && fs.existsSync(path.resolve(this.options.cwd ?? '.', command))) {
      return { reason: 'spawn', message: `the interpreter named by the #! line of runner "${command}" was not found`, hint: 'fix its first line, or run it through an interpreter that exists, e.g. ["node", "agent.js"]' };
    }
    if (code === 'ENOENT') {
      return {
        reason: 'spawn',
        message: `runner command not found: "${command}"`,
        hint:
          'install it, put it on PATH or give its absolute path (a string command is split on whitespace, without a shell)' +
          (this.options.cwd === undefined ? '' : `; also check that the working directory ${this.options.cwd} exists`),
      };
    }
    if (code === 'EACCES') {
      return { reason: 'spawn', message: `runner command is not executable: "${command}"`, hint: 'check its permissions (chmod +x) or run it through its interpreter, e.g. ["node", "agent.js"]' };
    }
    const detail = err instanceof Error ? err.message : String(err);
    return { reason: 'spawn', message: `cannot start runner "${command}": ${detail}` };
  }
}
