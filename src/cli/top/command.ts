// `switchboard top [--socket PATH] [--interval MS]`: registration and the checks that need no
// terminal library; the ink app itself (run.ts) is imported only when top really starts.

import type { Command } from 'commander';
import { SwitchboardError } from '../../core/index.js';
import { CliContext } from '../context.js';
import type { ProgramHooks } from '../main.js';
import { socketPathOf } from '../serve.js';
import { wantsColour } from '../output.js';

export const DEFAULT_INTERVAL_MS = 1_000;
const MIN_INTERVAL_MS = 100;

export function registerTopCommand(program: Command, hooks: ProgramHooks): void {
  program
    .command('top')
    .description('live terminal view: active runs, lanes, queued items, held locks, recent events (terminal only)')
    .option('--socket <path>', 'server socket to read (default: <state>/switchboard.sock); without a server there, the store is read')
    .option('--interval <ms>', `refresh every MS milliseconds (default: ${DEFAULT_INTERVAL_MS}, at least ${MIN_INTERVAL_MS})`)
    .addHelpText(
      'after',
      `
Shows what a running \`switchboard serve\` reports (status, queue.list and the events it
pushes) or, when no server answers on the socket, what the store holds (polled).
Keys: up/down or j/k select a run or queued item, c cancels the selected queued item,
a aborts the selected session (its queued items first, then its run), q or Ctrl-C quits.
Needs a terminal; for scripts use \`queue --json\`, \`locks --json\` or serve's status op.

Examples:
  $ switchboard top
  $ switchboard top --state-dir ~/.switchboard --interval 500`,
    )
    .action(hooks.action((ctx: CliContext) => runTopCommand(ctx)));
}

function intervalOf(value: string | undefined): number {
  if (value === undefined) return DEFAULT_INTERVAL_MS;
  const ms = Number(value);
  if (!/^\d+$/.test(value.trim()) || !Number.isSafeInteger(ms) || ms < MIN_INTERVAL_MS) {
    throw new SwitchboardError('USAGE', `--interval must be a whole number of milliseconds ≥ ${MIN_INTERVAL_MS}, got "${value}"`);
  }
  return ms;
}

async function runTopCommand(ctx: CliContext): Promise<number> {
  const flags = ctx.options as unknown as { socket?: string; interval?: string };
  const intervalMs = intervalOf(flags.interval);
  const stdinIsTTY = (ctx.streams.stdin as { isTTY?: boolean }).isTTY === true;
  if (ctx.json || ctx.streams.stdout.isTTY !== true || !stdinIsTTY) {
    throw new SwitchboardError('USAGE', ctx.json ? 'top is a terminal view and has no --json output' : 'top needs a terminal: stdin and stdout must both be a TTY', {
      hint: 'for scripts use `switchboard queue --json`, `switchboard locks --json`, or the `status` op of `switchboard serve`',
    });
  }
  // ink prints only the final frame when it thinks it runs under CI (CI or CONTINUOUS_INTEGRATION
  // set, read once when ink is loaded). top has just checked that it has a terminal, so it renders
  // live regardless; nothing else in this process reads these variables.
  for (const name of ['CI', 'CONTINUOUS_INTEGRATION']) if (name in process.env) process.env[name] = 'false';
  const { runTop } = await import('./run.js');
  return runTop({
    socketPath: socketPathOf(ctx, flags.socket),
    intervalMs,
    clock: ctx.clock,
    streams: ctx.streams,
    color: wantsColour(ctx.streams.env, true, ctx.options.color !== false),
    storeEngine: () => ctx.engine(),
    // Next to a server, locks and lanes are read with the server's state dir and config.
    serverEngine: (status) => {
      const stateDir = typeof status.stateDir === 'string' ? status.stateDir : ctx.options.stateDir;
      const config = typeof status.config === 'string' ? status.config : ctx.options.config;
      return new CliContext({ ...ctx.options, stateDir, config }, ctx.streams).engine();
    },
  });
}
