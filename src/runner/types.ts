// The runner layer's vocabulary: the resolved runner spec, what a run starts from, the events a
// run yields and the handle that controls it. Shared by external and built-in runners alike.

import type { UsageReport } from '../policy/index.js';

/** The built-in runners, run inside the switchboard process (no child). */
export const BUILTIN_RUNNERS = ['builtin:echo', 'builtin:slow-echo'] as const;
export type BuiltinRunnerName = (typeof BUILTIN_RUNNERS)[number];

/** A runner config after merging the agent's over the defaults and applying defaults. */
export interface RunnerSpec {
  /** argv of an external program (argv[0] looked up on PATH, no shell), or a built-in name. */
  command: readonly string[] | BuiltinRunnerName;
  /** The run is stopped (status `timeout`) when it lasts longer than this. */
  timeoutMs: number;
  /** Extra environment for external runners, over the parent's environment. */
  env?: Readonly<Record<string, string>>;
  /** builtin:slow-echo: how long each tool call takes (default 200). */
  delayMs?: number;
  /** builtin:slow-echo: how many tool calls (each followed by a boundary) per run (default 1). */
  toolCalls?: number;
  /**
   * External runners: true keeps the runner's stdin open after the run line so that `steer` and
   * `abort` lines can reach it (the runner still has to announce `hello {steering:true}` before it
   * gets steer lines). Unset/false closes stdin after the run line, so plain programs (`cat`,
   * `llm`) see end of input and finish; such runs are aborted by signals only.
   * builtin:slow-echo: the value it announces in `hello` (default true).
   */
  steering?: boolean;
}

/** One message of a turn as the runner receives it. Extra fields are passed through untouched. */
export interface RunMessage {
  role: 'user';
  text: string;
  sender?: string;
  messageId?: string;
  [key: string]: unknown;
}

/** What a run starts from: who it is for and the messages of the turn. */
export interface RunInit {
  runId: string;
  sessionKey: string;
  sessionId: string;
  agentId: string;
  transcriptPath: string;
  messages: readonly RunMessage[];
  /** Where this run's replies go: the route of the message that started it (null: nowhere known). */
  deliveryContext?: Readonly<Record<string, unknown>> | null;
}

export interface StartRunOptions {
  /** Abort/timeout: SIGTERM this long after the abort line (default 2 000 ms). */
  termAfterMs?: number;
  /** Abort/timeout: SIGKILL this long after the abort line (default 15 000 ms). */
  killAfterMs?: number;
  /** Base environment of external runners (default `process.env`). */
  env?: NodeJS.ProcessEnv;
  /** Working directory of external runners (default the current one). */
  cwd?: string;
  /** Cap on one stdout line, and on the plain text collected into a reply (default 1 MiB). */
  maxLineBytes?: number;
}

export type RunStatus = 'done' | 'failed' | 'timeout' | 'aborted';

/** Why a run did not end `done`: stable values to branch on; the message is for people. */
export type RunFailureReason =
  | 'spawn' // the program could not be started (not found, not executable)
  | 'exit' // non-zero exit status, or killed by a signal switchboard did not send
  | 'protocol' // a line broke the protocol (bad event fields, order, invalid UTF-8)
  | 'line-too-long' // a stdout line over the cap
  | 'output-too-large' // plain-text output (the would-be reply) over the cap
  | 'timeout' // ran longer than timeoutMs
  | 'aborted' // handle.abort() was called
  | 'internal'; // a built-in runner failed (a bug)

export interface RunError {
  reason: RunFailureReason;
  message: string;
  hint?: string;
}

export type RunEvent =
  | { type: 'hello'; steering: boolean }
  | { type: 'tool_call'; id: string; name: string; args: unknown }
  | { type: 'tool_result'; id: string; output: unknown; isError?: boolean }
  | { type: 'boundary' }
  | { type: 'assistant'; text: string }
  | { type: 'reply'; text: string }
  | { type: 'usage'; usage: RunUsage }
  | { type: 'stderr'; line: string }
  | RunEndEvent;

/**
 * What the model of a run used, as the runner reports it (OpenClaw's field names): the latest
 * report wins. `totalTokens` is the context in use after the call, `contextTokens` the model's
 * context window; `inputTokens`/`outputTokens` the tokens of the run so far.
 */
export type RunUsage = UsageReport;

export interface RunEndEvent {
  type: 'end';
  status: RunStatus;
  /** The runner's exit status; null when it was killed by a signal, never started, or is built in. */
  exitCode: number | null;
  /** The signal that ended the runner process, if any. */
  signal: NodeJS.Signals | null;
  error?: RunError;
}

/**
 * A started run. Iterate it (`for await (const event of handle)`) to receive its events in order;
 * the last one is always exactly one `end`. Events are buffered from the start, so nothing is lost
 * when iteration begins late. One consumer only: a second iteration throws. Leaving the loop early
 * stops delivery to this consumer but does not stop the run (call `abort` for that).
 */
export interface RunHandle extends AsyncIterable<RunEvent> {
  readonly runId: string;
  /** The runner's process id; undefined for built-ins and when the spawn failed. */
  readonly pid: number | undefined;
  /** Resolves with the `end` event once the run is over and its process reaped. Never rejects. */
  readonly ended: Promise<RunEndEvent>;
  /** Whether `steer` would deliver right now. */
  readonly canSteer: boolean;
  /**
   * Sends `{"type":"steer", messages}` to the runner. Returns false (and sends nothing) unless the
   * runner announced `hello {steering:true}`, can still read lines, and has not finished or been
   * stopped. Otherwise the line is on its way, and the promise says whether the runner's stdin
   * took it: false when the write failed (a runner that closed its stdin after all), so the
   * messages never reached it.
   */
  steer(messages: readonly RunMessage[]): false | Promise<boolean>;
  /**
   * Stops the run: `{"type":"abort", reason}` to the runner, SIGTERM after `termAfterMs`, SIGKILL
   * after `killAfterMs` (built-ins stop at once). The run ends `aborted`. Returns false when the
   * run had already finished, said `done`, or was being stopped.
   */
  abort(reason?: string): boolean;
}
