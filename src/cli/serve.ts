// `switchboard serve` and the client side of `ingest --socket` / `send --socket`: the server and
// its client are loaded on demand so that plain commands do not pay for them at start-up.

import fs from 'node:fs';
import path from 'node:path';
import { Readable } from 'node:stream';
import type { Command } from 'commander';
import { SwitchboardError, maxBatchBytesFrom } from '../core/index.js';
import type { IngestEvent } from '../engine/index.js';
import { CliContext } from './context.js';
import type { ProgramHooks } from './main.js';
import { BufferedWriter } from './output.js';

/** Kept equal to DEFAULT_GRACE_MS of server/ (which is only loaded when serving). */
const DEFAULT_GRACE_MS = 10_000;
const SOCKET_FILE_NAME = 'switchboard.sock';

export function registerServeCommand(program: Command, hooks: ProgramHooks): void {
  program
    .command('serve')
    .description('long-running server on a Unix socket: ingest, routes, sessions and live events for other programs')
    .option('--socket <path>', 'socket path (default: <state>/switchboard.sock)')
    .option('--grace <ms>', `on SIGTERM/SIGINT, how long received requests and running runs may finish before they are aborted (default: ${DEFAULT_GRACE_MS})`)
    .addHelpText(
      'after',
      `
Requests are NDJSON lines {id, op, ...}; answers are {id, result} or {id, error}.
Ops: ingest, route.resolve, route.explain, sessions.list, queue.list, queue.show,
queue.cancel, queue.abort, subscribe, unsubscribe, status (see switchboard-serve(1)
and store-format/socket-protocol.md).
The socket is mode 0600 in a private folder; one server per socket (a second one
exits 75). SIGTERM/SIGINT drain and exit 0; SIGHUP reloads the config.
Runs \`switchboard maintain\` every session.maintenance.maintainEvery (default 1h; false: off).

Examples:
  $ switchboard serve --config examples/switchboard.json5 &
  $ switchboard ingest --socket < examples/alice.ndjson
  $ printf '{"id":1,"op":"status"}\\n' | nc -U ~/.switchboard/switchboard.sock`,
    )
    .action(hooks.action((ctx: CliContext) => runServe(ctx)));
}

function graceOf(value: string | undefined): number {
  if (value === undefined) return DEFAULT_GRACE_MS;
  const ms = Number(value);
  if (!/^\d+$/.test(value.trim()) || !Number.isSafeInteger(ms)) {
    throw new SwitchboardError('USAGE', `--grace must be a whole number of milliseconds ≥ 0, got "${value}"`);
  }
  return ms;
}

/** `--socket` as given (a path, or true for a bare `--socket`) → the absolute socket path. */
export function socketPathOf(ctx: CliContext, option: string | boolean | undefined): string {
  return typeof option === 'string' && option !== '' ? path.resolve(option) : path.join(ctx.stateDir, SOCKET_FILE_NAME);
}

async function runServe(ctx: CliContext): Promise<number> {
  const flags = ctx.options as unknown as { socket?: string; grace?: string };
  const graceMs = graceOf(flags.grace);
  const maxBatchBytes = maxBatchBytesFrom(ctx.streams.env);
  const [{ startServer, stopOnSignals }, { VERSION }] = await Promise.all([import('../server/index.js'), import('./main.js')]);
  const line = (text: string): void => {
    ctx.streams.stderr.write(`${text}\n`);
  };
  const server = await startServer({
    // A fresh context per load, so a reload reads the config file again.
    loadEngine: async () => {
      const fresh = new CliContext(ctx.options, ctx.streams);
      const engine = await fresh.engine();
      return { engine, configPath: (await fresh.config()).path };
    },
    socketPath: flags.socket !== undefined ? socketPathOf(ctx, flags.socket) : undefined,
    version: VERSION,
    log: ctx.quiet ? undefined : line,
    warn: line,
    limits: { maxBatchBytes },
  });
  await stopOnSignals(server, { graceMs });
  return 0;
}

function inputOf(ctx: CliContext, file: string | undefined): AsyncIterable<Buffer | string> {
  if (file === undefined || file === '-') return ctx.streams.stdin;
  try {
    fs.accessSync(file, fs.constants.R_OK);
  } catch {
    throw new SwitchboardError('NOT_FOUND', `cannot read ${file}`, { hint: 'give an NDJSON file, or pipe messages on stdin' });
  }
  return fs.createReadStream(file, { highWaterMark: 1024 * 1024 });
}

/**
 * Hands NDJSON input to a running `serve` and prints what `ingest` would print: the results in
 * line order, then (unless --no-wait) the run and queue events of the sessions the messages went
 * to, until they are idle. Returns the summary for the caller's note and exit code.
 */
async function ingestThroughServer(ctx: CliContext, input: AsyncIterable<Buffer | string>, socketPath: string | boolean | undefined) {
  const { ingestViaSocket } = await import('../server/index.js');
  const out = new BufferedWriter(ctx.streams.stdout);
  const wait = (ctx.options as { wait?: boolean }).wait !== false;
  const onRunEvent = async (event: Record<string, unknown>): Promise<void> => {
    out.line(JSON.stringify(event));
    await out.flush();
  };
  const summary = await ingestViaSocket(
    socketPathOf(ctx, socketPath),
    input,
    async (events: IngestEvent[]) => {
      for (const event of events) out.line(JSON.stringify(event));
      await out.flush();
    },
    wait ? { onRunEvent } : {},
  );
  await out.flush();
  if (summary.cutShort) ctx.note('switchboard: the server stopped before the runs of these messages ended; what still waits stays queued');
  return summary;
}

/** `switchboard ingest [FILE] --socket [PATH]`: the messages go to a running `serve`; same events, same exit codes. */
export async function runIngestViaSocket(ctx: CliContext, file: string | undefined, socketPath: string | boolean | undefined): Promise<number> {
  const summary = await ingestThroughServer(ctx, inputOf(ctx, file), socketPath);
  if (ctx.streams.stderr.isTTY) {
    ctx.note(
      `switchboard: ${summary.results} message(s) taken into ${summary.sessions.size} session(s)${summary.resets ? `, ${summary.resets} reset(s)` : ''}${summary.errors ? `, ${summary.errors} bad line(s)` : ''}`,
    );
  }
  return summary.exitCode;
}

/** `switchboard send TEXT … --socket PATH`: one message (built from the flags as `send` does), handled as `ingest --socket` handles a line. */
export async function runSendViaSocket(ctx: CliContext, message: Record<string, unknown>, socketPath: string | boolean | undefined): Promise<number> {
  return (await ingestThroughServer(ctx, Readable.from([`${JSON.stringify(message)}\n`]), socketPath)).exitCode;
}
