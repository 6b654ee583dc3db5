// `switchboard ingest [FILE]` and `switchboard send TEXT`: messages in, one NDJSON event per
// line out, each acknowledgement written only after its message is on disk; with a runner, the
// runs started (and the queues they drain) are waited for, their events printed as they happen.

import fs from 'node:fs';
import type { Command } from 'commander';
import { DEFAULT_MAX_BATCH_BYTES, SwitchboardError, batchLength, isSwitchboardError, lineChars, maxBatchBytesFrom, readNdjson, type NdjsonLine } from '../core/index.js';
import {
  configureQueue,
  exitCodeFor,
  ingestBatch,
  parseInboundMessage,
  resumeOrphanedQueues,
  waitForQueueWork,
  type EngineContext,
  type IngestEvent,
  type QueueEvent,
} from '../engine/index.js';
import type { CliContext } from './context.js';
import type { ProgramHooks } from './main.js';
import { reportStoppedIngest } from './ingest-stop.js';
import { progressFor } from './progress.js';
import { BufferedWriter, outputClosed } from './output.js';
import { addRouteFlags, routeInputFromFlags, type RouteFlagValues } from './route-flags.js';
import { runIngestViaSocket, runSendViaSocket } from './serve.js';

/**
 * `ingest --socket FILE` (the default socket, then the file): `--socket` takes an optional path,
 * so the parser hands it FILE and leaves FILE unset. A regular file is never a socket, so such a
 * value with no FILE is the FILE, and the socket the default one. Anything else is left as given.
 */
function fileOrSocket(file: string | undefined, socket: string | boolean | undefined): [string | undefined, string | boolean | undefined] {
  if (file !== undefined || typeof socket !== 'string' || socket === '') return [file, socket];
  let regular = false;
  try {
    regular = fs.statSync(socket).isFile();
  } catch {
    // not there (or unreadable): a socket path the connection reports on
  }
  return regular ? [socket, true] : [file, socket];
}

/** Lines per commit: large batches amortise fsyncs and the sessions.json rewrite (P3/P4). */
const MAX_BATCH_LINES = 50_000;
/** Lines read ahead while a batch commits, before reading pauses (back-pressure). */
const READ_AHEAD_LINES = 2 * MAX_BATCH_LINES;

export function registerIngestCommands(program: Command, hooks: ProgramHooks): void {
  program
    .command('ingest')
    .argument('[file]', 'NDJSON file of messages (default: stdin)')
    .description('route and record inbound messages (NDJSON, one per line); print one event per line')
    .option('--no-wait', 'return once the messages are recorded: start no runs (work for idle sessions waits in the queue for the next ingest)')
    .option('--socket [path]', 'hand the messages to a running `switchboard serve` (default: <state>/switchboard.sock; `--socket FILE` with a regular file reads FILE through it)')
    .addHelpText(
      'after',
      `
Each line is a message: {channel, peer?, text, sender?, messageId?, kind?, sessionKey?, ...}.
Each line gets one event, in order: {"type":"result",...} or {"type":"error","line":N,...}.
A result is printed only after its message is on disk. Exit 65 if any line was bad.
If stdout closes early (| head), ingest (--socket too) stops taking input after the batch
it was writing, says after which line on stderr, and exits 74; every line up to it is recorded.
A FILE of 1 MiB or more shows how far it is read on stderr when that is a terminal.

With a runner configured (agents.defaults.runner), messages for idle sessions start runs and
the rest follow the session's queue mode; ingest waits for the runs it started and the queues
they drain, and first resumes queues whose process died. Their events (reply, dropped,
expired, run_failed, overflow, run_started, run_ended) are printed as they happen, so they
may come between later result events; every line is one whole JSON object. A failed run does
not change the exit code.

Examples:
  $ switchboard ingest examples/alice.ndjson --config examples/switchboard.json5
  $ echo '{"channel":"telegram","peer":"direct:123","text":"hi"}' | switchboard ingest
  $ switchboard ingest messages.ndjson --no-wait
  $ switchboard ingest messages.ndjson --socket    (through a running serve: same events, same waiting)`,
    )
    .action(
      hooks.action((ctx: CliContext, file: string | undefined) => {
        const [input, socket] = fileOrSocket(file, (ctx.options as { socket?: string | boolean }).socket);
        return socket !== undefined ? runIngestViaSocket(ctx, input, socket) : runIngest(ctx, input);
      }),
    );

  addRouteFlags(
    program
      .command('send')
      .argument('<text>', 'message text')
      .description('ingest one message given by flags (for shell scripts); prints the same events as ingest')
      .option('--sender <id>', 'sender id')
      .option('--sender-name <name>', 'sender display name')
      .option('--message-id <id>', 'message id (a repeat within 5 minutes is a duplicate)')
      .option('--run-id <id>', 'client-chosen run id')
      .option('--kind <kind>', 'user | heartbeat | system | cron', 'user')
      .option('--cron-job <id>', 'cron job id (cron key family, fresh session each run)')
      .option('--session-key <key>', 'explicit session key: skips routing')
      .option('--incognito', 'write nothing to disk: route only, or with --socket kept in the server\'s memory')
      .option('--no-wait', 'return once the message is recorded (locally: start no run; --socket: do not wait for the run)')
      .option('--socket [path]', 'hand the message to a running `switchboard serve` (default: <state>/switchboard.sock)'),
    true,
  )
    .addHelpText('after', '\nExample:\n  $ switchboard send "backup finished" --channel telegram --peer direct:123 --json')
    .action(hooks.action((ctx: CliContext, text: string) => runSend(ctx, text)));
}

/**
 * Feeds NDJSON lines to the engine in batches while the next lines are read. A batch is bounded
 * in lines and in bytes (maxBatchBytes, default 64 MiB), and so is what is read ahead, so a
 * stream of large messages becomes several batches instead of one too large to write.
 */
export async function ingestStream(
  engine: EngineContext,
  input: AsyncIterable<Buffer | string>,
  onEvents: (events: IngestEvent[]) => Promise<void>,
  maxBatchBytes = DEFAULT_MAX_BATCH_BYTES,
  shouldStop: () => boolean = () => false,
): Promise<{ stoppedAfterLine: number | null }> {
  const pending: NdjsonLine[] = [];
  let pendingBytes = 0;
  let readDone = false;
  let readError: unknown;
  let wakeProcessor: (() => void) | undefined;
  let wakeReader: (() => void) | undefined;

  let stopped = false;
  const reading = readNdjson(input, async (lines) => {
    if (stopped) throw STOP_READING;
    for (const line of lines) {
      pending.push(line);
      pendingBytes += lineChars(line);
    }
    wakeProcessor?.();
    while (!stopped && (pending.length > READ_AHEAD_LINES || pendingBytes > 2 * maxBatchBytes)) await new Promise<void>((resolve) => (wakeReader = resolve));
  }).then(
    () => {
      readDone = true;
      wakeProcessor?.();
    },
    (err) => {
      readError = err;
      readDone = true;
      wakeProcessor?.();
    },
  );

  for (;;) {
    if (pending.length === 0) {
      if (readDone) break;
      await new Promise<void>((resolve) => (wakeProcessor = resolve));
      wakeProcessor = undefined;
      continue;
    }
    const batch = pending.splice(0, batchLength(pending, MAX_BATCH_LINES, maxBatchBytes));
    for (const line of batch) pendingBytes -= lineChars(line);
    wakeReader?.();
    wakeReader = undefined;
    await onEvents(await ingestBatch(engine, batch));
    if (shouldStop()) {
      // Stop at this batch's last line: it and everything before it is on disk; nothing after it
      // is recorded. The reader may be waiting for input that never comes, so it is not awaited.
      stopped = true;
      (wakeReader as (() => void) | undefined)?.();
      (input as { destroy?: () => void }).destroy?.();
      void reading;
      return { stoppedAfterLine: batch[batch.length - 1].line };
    }
  }
  await reading;
  if (readError !== undefined) {
    throw new SwitchboardError('IO', `reading input failed: ${(readError as Error).message}`, { cause: readError });
  }
  return { stoppedAfterLine: null };
}

/** Thrown into the reader to end it once ingest has stopped taking input. */
const STOP_READING = new Error('ingest stopped taking input');

/**
 * Run events go straight to stdout as they happen, each as one whole line in one write, so they
 * can fall between two batches of result events but never inside a line.
 */
function startQueue(ctx: CliContext, engine: EngineContext): boolean {
  const wait = (ctx.options as { wait?: boolean }).wait !== false;
  const runtime = configureQueue(engine, {
    noWait: !wait,
    sink: (event: QueueEvent) => {
      ctx.streams.stdout.write(`${JSON.stringify(event)}\n`);
    },
  });
  if (wait && anyRunnerConfigured(engine)) {
    // Runs are children of this process: on SIGINT/SIGTERM they are aborted (and recorded as
    // such) rather than left behind; what still waits stays queued for the next ingest.
    const onSignal = (signal: NodeJS.Signals): void => {
      runtime.shutdown(`switchboard ingest received ${signal}`);
      const code = signal === 'SIGINT' ? 130 : 143;
      setTimeout(() => process.exit(code), SHUTDOWN_GRACE_MS).unref();
      void runtime.idle().then(() => process.exit(code));
    };
    process.once('SIGINT', onSignal);
    process.once('SIGTERM', onSignal);
  }
  return wait;
}

/** Files at least this large show progress on a terminal. */
const PROGRESS_MIN_FILE_BYTES = 1024 * 1024;

/** How long a signalled ingest waits for its aborted runs to be recorded before it exits anyway. */
const SHUTDOWN_GRACE_MS = 20_000;

function anyRunnerConfigured(engine: EngineContext): boolean {
  const agents = engine.config.agents;
  return agents?.defaults?.runner !== undefined || (agents?.list ?? []).some((agent) => agent?.runner !== undefined);
}

async function runIngest(ctx: CliContext, file: string | undefined): Promise<number> {
  const maxBatchBytes = maxBatchBytesFrom(ctx.streams.env);
  const engine = await ctx.engine();
  const wait = startQueue(ctx, engine);
  if (wait) await resumeOrphanedQueues(engine);
  let input: AsyncIterable<Buffer | string> = ctx.streams.stdin;
  if (file !== undefined && file !== '-') {
    try {
      fs.accessSync(file, fs.constants.R_OK);
    } catch {
      throw new SwitchboardError('NOT_FOUND', `cannot read ${file}`, { hint: 'give an NDJSON file, or pipe messages on stdin' });
    }
    input = fs.createReadStream(file, { highWaterMark: 1024 * 1024 });
  }
  // A large file shows how far it is on a terminal (progress.ts decides whether there is one).
  // Only a FILE argument is sized: stdin redirected from a file (`< file`) is an fs.ReadStream
  // too, but has no name to stat.
  const fileBytes = file !== undefined && file !== '-' ? fs.statSync(file).size : 0;
  const progress = fileBytes >= PROGRESS_MIN_FILE_BYTES ? progressFor(ctx) : undefined;
  const showProgress = (): void => progress?.update({ label: `ingest ${file}`, done: (input as fs.ReadStream).bytesRead, total: fileBytes, unit: 'bytes' });
  showProgress();
  const out = new BufferedWriter(ctx.streams.stdout);
  let exitCode = 0;
  const tally = { results: 0, errors: 0, sessions: new Set<string>(), resets: 0 };
  let acknowledgedLine = 0;
  const { stoppedAfterLine } = await ingestStream(engine, input, async (events) => {
    for (const event of events) {
      // Written as it fills (64 KiB), not once for the batch: a batch's lines held until its end
      // were one more copy of its results for the garbage collector to move.
      if (out.line(JSON.stringify(event))) {
        await out.flush();
        if (!outputClosed(ctx.streams.stdout)) acknowledgedLine = event.line;
      }
      if (event.type === 'error') tally.errors++;
      else {
        tally.results++;
        tally.sessions.add(event.sessionKey);
        if (event.reset) tally.resets++;
      }
    }
    await out.flush();
    if (!outputClosed(ctx.streams.stdout) && events.length > 0) acknowledgedLine = events[events.length - 1].line;
    exitCode = exitCodeFor(events, exitCode);
    showProgress();
  }, maxBatchBytes, () => outputClosed(ctx.streams.stdout)).finally(() => progress?.stop());
  await out.flush();
  if (wait) await waitForQueueWork(engine);
  if (stoppedAfterLine !== null) return reportStoppedIngest(ctx, stoppedAfterLine, acknowledgedLine);
  // A one-line summary for a person at a terminal; scripts read the events.
  if (ctx.streams.stderr.isTTY) {
    ctx.note(`switchboard: ${tally.results} message(s) taken into ${tally.sessions.size} session(s)${tally.resets ? `, ${tally.resets} reset(s)` : ''}${tally.errors ? `, ${tally.errors} bad line(s)` : ''}`);
  }
  return exitCode;
}

interface SendFlags extends RouteFlagValues {
  wait?: boolean;
  socket?: string | boolean;
  sender?: string;
  senderName?: string;
  messageId?: string;
  runId?: string;
  kind?: string;
  cronJob?: string;
  sessionKey?: string;
  incognito?: boolean;
}

/**
 * The message send built from its flags, judged by the parser every line goes through: what it
 * refuses (an unknown --kind, an empty TEXT, --kind cron without --cron-job) was typed by a
 * person, so it is a bad command line (USAGE, 2) as a bad route flag is, not a bad line of input
 * data (65, an error event).
 */
function checkSendFlags(message: Record<string, unknown>): void {
  try {
    parseInboundMessage(message);
  } catch (err) {
    if (!isSwitchboardError(err, 'BAD_MESSAGE')) throw err;
    throw new SwitchboardError('USAGE', `send: ${err.message}`, { hint: 'see `switchboard send --help`' });
  }
}

async function runSend(ctx: CliContext, text: string): Promise<number> {
  const flags = ctx.options as unknown as SendFlags;
  const message: Record<string, unknown> = { ...routeInputFromFlags(flags), text, kind: flags.kind };
  if (flags.sender !== undefined || flags.senderName !== undefined) message.sender = { id: flags.sender, name: flags.senderName };
  if (flags.messageId !== undefined) message.messageId = flags.messageId;
  if (flags.runId !== undefined) message.runId = flags.runId;
  if (flags.cronJob !== undefined) message.cron = { jobId: flags.cronJob };
  if (flags.sessionKey !== undefined) message.sessionKey = flags.sessionKey;
  if (flags.incognito) message.incognito = true;
  checkSendFlags(message);
  if (flags.socket !== undefined) return runSendViaSocket(ctx, message, flags.socket);
  const engine = await ctx.engine();
  const wait = startQueue(ctx, engine);
  if (wait) await resumeOrphanedQueues(engine);
  const events = await ingestBatch(engine, [{ line: 1, text: JSON.stringify(message) }]);
  for (const event of events) ctx.streams.stdout.write(`${JSON.stringify(event)}\n`);
  if (wait) await waitForQueueWork(engine);
  return exitCodeFor(events);
}
