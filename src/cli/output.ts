// Writing to stdout/stderr for every command: JSON or text data on stdout, diagnostics on
// stderr, colour only for terminals (NO_COLOR and --no-color respected), buffered bulk output.

import type { Writable } from 'node:stream';
import { toSwitchboardError, type SwitchboardError } from '../core/index.js';

export interface Streams {
  stdin: NodeJS.ReadableStream & AsyncIterable<Buffer | string>;
  stdout: Writable & { isTTY?: boolean; columns?: number };
  stderr: Writable & { isTTY?: boolean };
  env: NodeJS.ProcessEnv;
}

export function processStreams(): Streams {
  return { stdin: process.stdin, stdout: process.stdout, stderr: process.stderr, env: process.env };
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

/** chalk is loaded only when a terminal will actually show colour, keeping plain commands fast. */
export async function painterFor(streams: Streams, colorFlag: boolean): Promise<Painter> {
  const wantsColour = colorFlag && streams.stdout.isTTY === true && !('NO_COLOR' in streams.env) && streams.env.TERM !== 'dumb';
  if (!wantsColour) return plainPainter;
  const { Chalk } = await import('chalk');
  const chalk = new Chalk({ level: 1 });
  return { bold: chalk.bold, dim: chalk.dim, green: chalk.green, red: chalk.red, yellow: chalk.yellow, cyan: chalk.cyan };
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
    if (!this.stream.write(chunk)) {
      await new Promise<void>((resolve) => this.stream.once('drain', resolve));
    }
  }
}

export function writeJsonLine(stream: Writable, value: unknown): void {
  stream.write(`${JSON.stringify(value)}\n`);
}

/** Prints an error the documented way and returns its exit code (the one exit path). */
export function reportError(err: unknown, streams: Streams, options: { json: boolean; verbose: boolean }): number {
  const error: SwitchboardError = toSwitchboardError(err);
  if (options.json) {
    writeJsonLine(streams.stderr, { error: error.toJSON() });
  } else {
    streams.stderr.write(`switchboard: ${error.message}\n`);
    if (error.hint) streams.stderr.write(`hint: ${error.hint.replace(/\n/g, '\n      ')}\n`);
  }
  if (options.verbose || error.code === 'INTERNAL') {
    const stack = error.code === 'INTERNAL' && error.cause instanceof Error ? error.cause.stack : error.stack;
    if (stack && (options.verbose || !options.json)) streams.stderr.write(`${stack}\n`);
  }
  return error.exitCode;
}
