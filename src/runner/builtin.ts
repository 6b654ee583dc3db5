// The built-in runners, run inside the switchboard process (no child, so they work from the
// bundled CLI too) behind the same RunHandle as external runners: builtin:echo and builtin:slow-echo.

import { RunEvents } from './run-events.js';
import { MAX_TIMER_MS } from '../core/index.js';
import { clampDelay } from './options.js';
import type { BuiltinRunnerName, RunEndEvent, RunError, RunEvent, RunHandle, RunInit, RunMessage, RunnerSpec, RunStatus } from './types.js';

export const DEFAULT_SLOW_ECHO_DELAY_MS = 200;
export const DEFAULT_SLOW_ECHO_TOOL_CALLS = 1;

export function startBuiltinRun(name: BuiltinRunnerName, spec: RunnerSpec, init: RunInit): RunHandle {
  return new BuiltinRun(name, spec, init);
}

class BuiltinRun implements RunHandle {
  readonly runId: string;
  readonly pid = undefined;
  private readonly events = new RunEvents();
  private steering = false;
  /** Set when the run has produced its reply or was stopped: nothing more is accepted. */
  private finishing = false;
  private readonly steered: RunMessage[] = [];
  private readonly timeoutTimer: NodeJS.Timeout;
  private sleepTimer: NodeJS.Timeout | undefined;
  private wake: ((goOn: boolean) => void) | undefined;

  constructor(
    private readonly name: BuiltinRunnerName,
    private readonly spec: RunnerSpec,
    private readonly init: RunInit,
  ) {
    this.runId = init.runId;
    this.timeoutTimer = setTimeout(() => {
      this.stop('timeout', { reason: 'timeout', message: `runner did not finish within ${spec.timeoutMs / 1000} s` });
    }, clampDelay(spec.timeoutMs, MAX_TIMER_MS));
    // Start on a later turn of the event loop, as a child process would: the caller gets the
    // handle first and may abort before anything happens.
    void this.pause(0).then((goOn) => {
      if (goOn) return this.run();
      return undefined;
    }).catch((err: unknown) => {
      this.stop('failed', { reason: 'internal', message: `built-in runner ${name} failed: ${err instanceof Error ? err.message : String(err)}` });
    });
  }

  get ended(): Promise<RunEndEvent> {
    return this.events.ended;
  }

  get canSteer(): boolean {
    return this.steering && !this.finishing;
  }

  [Symbol.asyncIterator](): AsyncIterator<RunEvent> {
    return this.events[Symbol.asyncIterator]();
  }

  steer(messages: readonly RunMessage[]): false | Promise<boolean> {
    if (!this.canSteer) return false;
    this.steered.push(...messages);
    return Promise.resolve(true);
  }

  abort(reason = 'aborted'): boolean {
    if (this.finishing) return false;
    this.stop('aborted', { reason: 'aborted', message: `run aborted: ${reason}` });
    return true;
  }

  private async run(): Promise<void> {
    if (this.name === 'builtin:echo') {
      this.finish(`echo: ${texts(this.init.messages)}`, false);
      return;
    }
    // builtin:slow-echo
    this.steering = this.spec.steering ?? true;
    this.events.emit({ type: 'hello', steering: this.steering });
    const delayMs = this.spec.delayMs ?? DEFAULT_SLOW_ECHO_DELAY_MS;
    const toolCalls = this.spec.toolCalls ?? DEFAULT_SLOW_ECHO_TOOL_CALLS;
    for (let n = 1; n <= toolCalls; n++) {
      const id = `${this.runId}:call-${n}`;
      this.events.emit({ type: 'tool_call', id, name: 'sleep', args: { ms: delayMs } });
      if (!(await this.pause(delayMs))) return;
      this.events.emit({ type: 'tool_result', id, output: `slept ${delayMs} ms` });
      this.events.emit({ type: 'boundary' });
      // One turn of the event loop: steering injected by the consumer at this boundary is taken.
      if (!(await this.pause(0))) return;
    }
    this.finish(`slow-echo: ${texts([...this.init.messages, ...this.steered])}`, true);
  }

  /** Assistant text (slow-echo only), reply and done, in one step: no steer can slip in between. */
  private finish(text: string, withAssistant: boolean): void {
    if (this.finishing) return;
    if (withAssistant) this.events.emit({ type: 'assistant', text });
    this.events.emit({ type: 'reply', text });
    this.end('done');
  }

  private stop(status: Exclude<RunStatus, 'done'>, error: RunError): void {
    if (this.finishing) return;
    this.end(status, error);
  }

  private end(status: RunStatus, error?: RunError): void {
    this.finishing = true;
    clearTimeout(this.timeoutTimer);
    clearTimeout(this.sleepTimer);
    const wake = this.wake;
    this.wake = undefined;
    wake?.(false);
    const exitCode = status === 'done' ? 0 : null;
    this.events.end(error === undefined ? { type: 'end', status, exitCode, signal: null } : { type: 'end', status, exitCode, signal: null, error });
  }

  /** Waits (0 = one macrotask); resolves false when the run was stopped meanwhile. */
  private pause(ms: number): Promise<boolean> {
    if (this.finishing) return Promise.resolve(false);
    return new Promise((resolve) => {
      this.wake = resolve;
      const done = () => {
        this.wake = undefined;
        resolve(!this.finishing);
      };
      if (ms <= 0) {
        this.sleepTimer = undefined;
        setImmediate(done);
      } else {
        this.sleepTimer = setTimeout(done, clampDelay(ms, MAX_TIMER_MS));
      }
    });
  }
}

function texts(messages: readonly RunMessage[]): string {
  return messages.map((message) => message.text).join('\n');
}
