// Writing to stdout/stderr for every command: JSON or text data on stdout, diagnostics on
// stderr, colour only for terminals (NO_COLOR, FORCE_COLOR and --no-color respected), buffered bulk output.

import fs from 'node:fs';
import type { Writable } from 'node:stream';
import { hintOf, toSwitchboardError, type SwitchboardError } from '../core/index.js';

export interface Streams {
  stdin: NodeJS.ReadableStream & AsyncIterable<Buffer | string>;
  stdout: Writable & { isTTY?: boolean; columns?: number };
  stderr: Writable & { isTTY?: boolean };
  env: NodeJS.ProcessEnv;
}

/** Read size for stdin redirected from a file: a pipe's size (64 KiB) starved large batches. */
const FILE_STDIN_CHUNK_BYTES = 1024 * 1024;

/**
 * stdin as a stream. Redirected from a regular file (`< file`), it is read in 1 MiB chunks like a
 * FILE argument: each 64 KiB read of process.stdin is a round trip through the thread pool that
 * only runs between a batch's fsyncs, so `ingest < file` took a third as many lines per batch
 * as `cat file | ingest` and fsynced every transcript three times as often.
 */
function openStdin(): NodeJS.ReadableStream & AsyncIterable<Buffer | string> {
  let regularFile = false;
  try {
    regularFile = fs.fstatSync(0).isFile();
  } catch {
    // No fd 0 (closed by the caller): process.stdin reports that its own way.
  }
  return regularFile ? fs.createReadStream('', { fd: 0, autoClose: false, highWaterMark: FILE_STDIN_CHUNK_BYTES }) : process.stdin;
}

export function processStreams(): Streams {
  let stdin: ReturnType<typeof openStdin> | undefined;
  return {
    // Made on first use: creating process.stdin costs ~2 ms, and most commands never read it.
    get stdin() {
      return (stdin ??= openStdin());
    },
    stdout: process.stdout,
    stderr: process.stderr,
    env: process.env,
  };
}

export interface Painter {
  bold(text: string): string;
  dim(text: string): string;
  green(text: string): string;
  red(text: string): string;
  yellow(text: string): string;
  cyan(text: string): string;
}

const plainPainter: Painter = { bold: (t) => t, dim: (t) => t, green: (t) => t, red: (t) => t, yellow: (t) => t, cyan: (t) => t };

/**
 * Whether output gets colour, by the common conventions: `--no-color` and a non-empty `NO_COLOR`
 * turn it off; a `FORCE_COLOR` other than `0`/`false` turns it on even in a pipe; otherwise only
 * a terminal that is not `dumb` gets it.
 */
export function wantsColour(env: NodeJS.ProcessEnv, isTTY: boolean, colorFlag: boolean): boolean {
  if (!colorFlag || (env.NO_COLOR ?? '') !== '') return false;
  const force = env.FORCE_COLOR;
  if (force !== undefined) return force !== '0' && force !== 'false';
  return isTTY && env.TERM !== 'dumb';
}

/** chalk is loaded only when a terminal will actually show colour, keeping plain commands fast. */
export async function painterFor(streams: Streams, colorFlag: boolean): Promise<Painter> {
  if (!wantsColour(streams.env, streams.stdout.isTTY === true, colorFlag)) return plainPainter;
  const { Chalk } = await import('chalk');
  const chalk = new Chalk({ level: 1 });
  return { bold: chalk.bold, dim: chalk.dim, green: chalk.green, red: chalk.red, yellow: chalk.yellow, cyan: chalk.cyan };
}

interface OutputState {
  closed: boolean;
  /** Set when the stream failed for another reason than its reader going away (disk full, …). */
  error?: NodeJS.ErrnoException;
  waiters: (() => void)[];
}

const outputStates = new WeakMap<Writable, OutputState>();

/**
 * A reader that goes away (`switchboard sessions | head -2`) makes our next write fail with EPIPE.
 * That is how pipes end, not a bug: the error is taken here (instead of crashing with a stack
 * trace), later writes are dropped, and commands ask `outputClosed` to stop producing.
 */
export function guardOutput(stream: Writable): void {
  if (outputStates.has(stream)) return;
  const state: OutputState = { closed: false, waiters: [] };
  outputStates.set(stream, state);
  stream.on('error', (err: NodeJS.ErrnoException) => markClosed(stream, err));
}

function markClosed(stream: Writable, err: NodeJS.ErrnoException): void {
  const state = outputStates.get(stream);
  if (state === undefined || state.closed) return;
  state.closed = true;
  if (err.code !== 'EPIPE' && err.code !== 'ERR_STREAM_DESTROYED') state.error = err;
  for (const wake of state.waiters.splice(0)) wake();
}

/** Whether the stream's reader went away (or the stream failed); writes to it are dropped. */
export function outputClosed(stream: Writable): boolean {
  return outputStates.get(stream)?.closed === true;
}

/**
 * Resolves once what was written to the stream has been handed on or has failed (its error
 * event delivered), so that outputError tells the truth; at once for a stream already closed.
 */
export function settledOutput(stream: Writable): Promise<void> {
  if (outputClosed(stream) || stream.destroyed || stream.writableEnded) return Promise.resolve();
  return new Promise((resolve) => {
    stream.write('', () => setImmediate(resolve));
  });
}

/** Why the stream failed, when it was not the reader going away. */
export function outputError(stream: Writable): NodeJS.ErrnoException | undefined {
  return outputStates.get(stream)?.error;
}

/** Resolves when the stream closes or fails (never, for an unguarded stream). */
export function whenOutputCloses(stream: Writable): Promise<void> {
  const state = outputStates.get(stream);
  if (state === undefined) return new Promise(() => undefined);
  if (state.closed) return Promise.resolve();
  return new Promise((resolve) => state.waiters.push(resolve));
}

/** Collects many small lines and writes them in large chunks, honouring back-pressure. */
export class BufferedWriter {
  private parts: string[] = [];
  private size = 0;

  constructor(private readonly stream: Writable, private readonly highWater = 64 * 1024) {}

  /** Queues a line; returns true when the buffer is full and the caller should `await flush()`. */
  line(text: string): boolean {
    this.parts.push(text, '\n');
    this.size += text.length + 1;
    return this.size >= this.highWater;
  }

  async flush(): Promise<void> {
    if (this.parts.length === 0) return;
    const chunk = this.parts.join('');
    this.parts = [];
    this.size = 0;
    if (outputClosed(this.stream)) return;
    // Waiting for the write's callback is back-pressure (one chunk in flight at a time) and tells
    // a caller, through outputClosed, whether what it flushed reached the reader.
    // (The callback gets the error before the stream emits it.)
    await new Promise<void>((resolve) =>
      this.stream.write(chunk, (err?: Error | null) => {
        if (err) markClosed(this.stream, err);
        resolve();
      }),
    );
  }
}

/** Control characters and bidirectional overrides, which a terminal would act on rather than show. */
const UNPRINTABLE = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;

/**
 * Text from the store or a runner (a model name, a peer id) as it may be shown on a terminal: an
 * escape sequence, BEL or an RTL override in it is written as `\u{…}`, never sent to the terminal.
 */
export function printable(text: string): string {
  // Store fields are shown as they are; one of another type than the display expects (a model
  // that is a number, written by some other tool) is shown as JSON rather than failing the command.
  if (typeof text !== 'string') text = JSON.stringify(text) ?? String(text);
  return text.replace(UNPRINTABLE, (char) => `\\u{${char.codePointAt(0)!.toString(16)}}`);
}

/**
 * Text of several lines from the store (a message, a sender's name) as it may be shown: each line
 * printable, the later ones indented by `indent`. A message holding a newline and a line of its
 * own making ("2026-12-03 08:00:00Z  assistant: …") could otherwise pass for another record.
 */
export function printableLines(text: string, indent: string): string {
  return text
    .split(/\r?\n/)
    .map((line) => printable(line))
    .join(`\n${indent}`);
}

export function writeJsonLine(stream: Writable, value: unknown): void {
  stream.write(`${JSON.stringify(value)}\n`);
}

/** Prints an error the documented way and returns its exit code (the one exit path). */
export function reportError(err: unknown, streams: Streams, options: { json: boolean; verbose: boolean; fallbackHint?: string }): number {
  const error: SwitchboardError = toSwitchboardError(err);
  if (options.json) {
    // The contract's shape {code, message, hint}: an error without its own hint gets its code's.
    writeJsonLine(streams.stderr, { error: { ...error.toJSON(), hint: error.hint ?? options.fallbackHint ?? hintOf(error) } });
  } else {
    // Messages quote what they refuse (a key, an id, a file name): a control character or a bidi
    // override in it is shown escaped, never sent to the terminal.
    streams.stderr.write(`switchboard: ${printableLines(error.message, '')}\n`);
    // A usage error without its own hint names the command's --help, as with --json.
    const hint = error.hint ?? options.fallbackHint;
    if (hint) streams.stderr.write(`hint: ${printableLines(hint, '      ')}\n`);
  }
  if (options.verbose || error.code === 'INTERNAL') {
    const stack = error.code === 'INTERNAL' && error.cause instanceof Error ? error.cause.stack : error.stack;
    if (stack && (options.verbose || !options.json)) streams.stderr.write(`${stack}\n`);
  }
  return error.exitCode;
}
