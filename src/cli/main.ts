// The commander program: global options, one registration per command group, and the single
// place where the process's exit code is decided.

import { Command, CommanderError, InvalidArgumentError, Option } from 'commander';
import { SwitchboardError, isSwitchboardError } from '../core/index.js';
import { CliContext } from './context.js';
import { guardOutput, outputError, processStreams, reportError, settledOutput, type Streams } from './output.js';
import { allCommands, commandPathOf, registerCompletionCommand, registerHelpCommand, subcommandNames, suggestSubcommands } from './help.js';

export type Registration = (program: Command, hooks: ProgramHooks) => void;

/**
 * Every command group, in help order, with the top-level names it adds. Each is imported only
 * when needed: a run of `route resolve` loads routing and config, not the store, the runner, the
 * server or ink (cold start is a measured target, P2 in quality.md). `load` gets the process's
 * argv when only this group runs (a group may then register less), undefined when all do.
 */
const COMMAND_GROUPS: readonly { names: readonly string[]; load: (argv?: readonly string[]) => Promise<Registration> }[] = [
  { names: ['ingest', 'send'], load: async () => (await import('./ingest.js')).registerIngestCommands },
  { names: ['serve'], load: async () => (await import('./serve.js')).registerServeCommand },
  { names: ['route'], load: async () => (await import('./route.js')).registerRouteCommands },
  { names: ['sessions', 'reset'], load: async (argv) => (await import('./sessions.js')).sessionRegistration(argv) },
  { names: ['locks'], load: async () => (await import('./locks.js')).registerLockCommands },
  { names: ['queue'], load: async () => (await import('./queue.js')).registerQueueCommands },
  { names: ['maintain'], load: async () => (await import('./maintain.js')).registerMaintainCommand },
  { names: ['doctor'], load: async () => (await import('./doctor.js')).registerDoctorCommand },
  { names: ['config'], load: async () => (await import('./config.js')).registerConfigCommands },
  { names: ['top'], load: async () => (await import('./top/command.js')).registerTopCommand },
];

/** Global options that take a value (skipped when looking for the command word). */
const VALUE_OPTIONS = new Set(['--state-dir', '--config', '--now']);

/**
 * The group `argv` runs, or undefined when it needs them all: no command word (`--help`, `-V`),
 * `help` and `completion` (which walk every command), or a word no group has (its "did you mean"
 * compares it with every command).
 */
function groupOf(argv: readonly string[]): (typeof COMMAND_GROUPS)[number] | undefined {
  for (let i = 2; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === '--') return undefined;
    if (arg.startsWith('-')) {
      if (VALUE_OPTIONS.has(arg)) i++;
      continue;
    }
    return COMMAND_GROUPS.find((group) => group.names.includes(arg));
  }
  return undefined;
}

export const VERSION = '0.1.0';

/**
 * A write past the file-size limit (`ulimit -f`, RLIMIT_FSIZE) fails with EFBIG and the kernel
 * also sends SIGXFSZ. Node ignores that signal, so the write's EFBIG becomes an IO error (74) like
 * a full disk — but signal-exit (loaded by proper-lockfile and write-file-atomic) listens to it,
 * and when its own handlers are the only ones it re-raises the signal at the default action: the
 * process died of SIGXFSZ (exit 153) in the middle of a batch, a server with all its clients. One
 * listener of ours is enough for it to leave the signal alone; the failed write reports itself.
 */
function survivesFileSizeLimit(): void {
  if (process.platform === 'win32' || process.listeners('SIGXFSZ').includes(ignoreSignal)) return;
  process.on('SIGXFSZ', ignoreSignal);
}

function ignoreSignal(): void {}

/** An action: does its work and returns the exit code (0 unless it says otherwise). */
export type Action<A extends unknown[]> = (ctx: CliContext, ...args: A) => Promise<number | void>;

export interface ProgramHooks {
  streams: Streams;
  /** Wraps an action so it gets a CliContext and its exit code reaches the one exit path. */
  action<A extends unknown[]>(fn: Action<A>): (...args: unknown[]) => Promise<void>;
}

/** A blank path names nothing: `--state-dir ""` fell back to ~/.switchboard and wrote there without a word. */
function pathFlag(what: string): (value: string) => string {
  return (value) => {
    if (value.trim() === '') throw new InvalidArgumentError(`the ${what} path is empty`);
    return value;
  };
}

/** The program with every command, or (given the process's argv) only the group that argv runs. */
export async function buildProgram(streams: Streams, setExitCode: (code: number) => void, json = false, argv?: readonly string[]): Promise<Command> {
  const program = new Command('switchboard')
    .description('Stable, explainable addresses for every inbound message of a personal AI assistant.')
    .version(VERSION, '-V, --version', 'print the version')
    .addOption(new Option('--state-dir <dir>', 'state directory (default: $SWITCHBOARD_STATE_DIR or ~/.switchboard)').argParser(pathFlag('state directory')))
    .addOption(new Option('--config <file>', 'config file (default: $SWITCHBOARD_CONFIG, <state>/switchboard.json5, <state>/openclaw.json)').argParser(pathFlag('config file')))
    .addOption(new Option('--now <time>', 'fixed clock: ISO-8601 time or epoch ms (also SWITCHBOARD_NOW)'))
    .option('--json', 'machine-readable output on stdout (errors as JSON on stderr)')
    .option('--no-color', 'no colour (NO_COLOR is honoured too)')
    .option('-q, --quiet', 'no diagnostics on stderr')
    .option('-v, --verbose', 'more diagnostics (warnings, stacks)')
    .addHelpText(
      'after',
      `
Examples:
  $ switchboard route explain --config examples/switchboard.json5 --channel discord --peer channel:c5 --guild g1
  $ switchboard route resolve --channel telegram --peer direct:123 --json

Exit codes: 0 ok, 1 internal, 2 usage, 65 bad input/corrupt store, 66 not found,
69 unavailable, 74 I/O, 75 busy, 78 bad config. See switchboard(1).`,
    );
  // Global options are accepted after any subcommand, so every subcommand's help lists them.
  // Only the program's own options: a group's options (`sessions --limit`) belong to its listing.
  program.configureHelp({
    showGlobalOptions: true,
    visibleGlobalOptions: (command) => (command === program ? [] : program.options.filter((option) => !option.hidden && option.long !== '--version')),
  });
  if (!json) program.showHelpAfterError('(run with --help for usage)');
  program.exitOverride();
  program.configureOutput({
    writeOut: (text) => streams.stdout.write(text),
    // With --json, stderr carries the JSON error alone: the help commander prints to stderr when
    // a group's subcommand is missing is left out (the error's hint names `--help`).
    writeErr: (text) => {
      if (!json) streams.stderr.write(text);
    },
    // With --json the one exit path prints the error as JSON instead.
    outputError: (text, write) => {
      if (!json) write(text);
    },
  });

  const hooks: ProgramHooks = {
    streams,
    action:
      <A extends unknown[]>(fn: Action<A>) =>
      async (...args: unknown[]) => {
        const command = args[args.length - 1] as Command;
        const ctx = CliContext.fromCommand(command, streams);
        const code = await fn(ctx, ...(args.slice(0, -2) as A)).catch(async (err: unknown) => {
          throw await ctx.locateConfigError(err);
        });
        setExitCode(code ?? 0);
      },
  };
  const only = argv === undefined ? undefined : groupOf(argv);
  const registrations = await Promise.all((only ? [only] : COMMAND_GROUPS).map((group) => group.load(only ? argv : undefined)));
  for (const register of registrations) register(program, hooks);
  if (!only) {
    registerCompletionCommand(program, hooks);
    registerHelpCommand(program, hooks);
  }
  for (const command of allCommands(program)) command.exitOverride();
  suggestSubcommands(program);
  return program;
}

/** The command argv runs, as far as it names one (`switchboard sessions cleanup`), and its path. */
function commandLineOf(program: Command | undefined, argv: readonly string[]): { path: string[]; command: string } {
  const path = program === undefined ? [] : commandPathOf(program, argv, VALUE_OPTIONS);
  return { path, command: ['switchboard', ...path].join(' ') };
}

/** Where to read the usage of the command argv runs. */
function usageHint(program: Command | undefined, argv: readonly string[]): string {
  return `run \`${commandLineOf(program, argv).command} --help\` for usage`;
}

/** A parse error as the contract's JSON error: commander's message (or "missing command"), and where to read the usage. */
function usageErrorJson(err: CommanderError, program: Command | undefined, argv: readonly string[]): { code: 'USAGE'; message: string; hint: string } {
  const { path, command } = commandLineOf(program, argv);
  // commander's message for a group run without its subcommand is a placeholder, "(outputHelp)".
  const message =
    err.code === 'commander.help'
      ? `missing command: \`${command}\` needs one of ${subcommandNames(program!, path).join(', ')}`
      : err.message.replace(/^error: /, '');
  return { code: 'USAGE', message, hint: usageHint(program, argv) };
}

function wantsJson(argv: string[]): boolean {
  return argv.includes('--json');
}

/** Entry point used by bin/switchboard. */
export async function main(argv: string[], streams: Streams = processStreams()): Promise<number> {
  let exitCode = 0;
  survivesFileSizeLimit();
  guardOutput(streams.stdout);
  guardOutput(streams.stderr);
  let program: Command | undefined;
  try {
    program = await buildProgram(
      streams,
      (code) => {
        exitCode = code;
      },
      wantsJson(argv),
      argv,
    );
    await program.parseAsync(argv);
  } catch (err) {
    if (err instanceof CommanderError) {
      // --help and --version end here with exit code 0; parse errors are USAGE (exit 2).
      exitCode = err.exitCode === 0 ? 0 : new SwitchboardError('USAGE', err.message).exitCode;
      if (exitCode !== 0 && wantsJson(argv)) streams.stderr.write(`${JSON.stringify({ error: usageErrorJson(err, program, argv) })}\n`);
    } else {
      // A usage error found by an action (`--limit abc`) points at that command's help, as the parser's do.
      const fallbackHint = isSwitchboardError(err, 'USAGE') ? usageHint(program, argv) : undefined;
      exitCode = reportError(err, streams, { json: wantsJson(argv), verbose: argv.includes('--verbose') || argv.includes('-v'), fallbackHint });
    }
  }
  // A reader that went away (EPIPE) ends output quietly with the command's own code; any other
  // failure to write stdout (disk full behind a redirection) means the data is lost: IO, 74.
  // The stream reports a failed write on a later tick: everything written is settled first.
  await settledOutput(streams.stdout);
  const writeFailure = outputError(streams.stdout);
  if (writeFailure !== undefined && exitCode === 0) {
    exitCode = reportError(new SwitchboardError('IO', `writing to stdout failed: ${writeFailure.message}`, { cause: writeFailure }), streams, {
      json: wantsJson(argv),
      verbose: false,
    });
  }
  process.exitCode = exitCode;
  return exitCode;
}
