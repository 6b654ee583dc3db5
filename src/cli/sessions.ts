// `switchboard sessions` and `sessions list`: the listing, its flags, and the helpers the other
// subcommands share (their flags and help are in sessions-commands.ts, their code in sessions-actions.ts).

import type { Command } from 'commander';
import { SwitchboardError } from '../core/index.js';
import { listSessions, type StoreSelection } from '../engine/index.js';
import type { CliContext } from './context.js';
import type { ProgramHooks, Registration } from './main.js';
import { writeJsonLine } from './output.js';
import { addSelectionFlags, storeSelection, type SelectionFlags } from './store-selection.js';


export function selectionOf(ctx: CliContext): StoreSelection {
  return storeSelection(ctx.options as SelectionFlags);
}

/** Rows a listing shows unless --limit says otherwise. */
const DEFAULT_LIST_LIMIT = 100;

export function positiveInt(value: string, name: string): number {
  // Digits only: Number() would read "" as 0 and "0x10" as 16.
  const n = /^\s*\d+\s*$/.test(value) ? Number(value) : Number.NaN;
  if (!Number.isSafeInteger(n) || n < 0) throw new SwitchboardError('USAGE', `${name} must be a whole number ≥ 0, got "${value}"`);
  return n;
}

/** The `sessions` command itself; its subcommands are added by the registrations below. */
export function sessionsCommand(program: Command): Command {
  return program
    .command('sessions')
    .description('list, inspect and change sessions (default: list)')
    .addHelpText('after', '\nExamples:\n  $ switchboard sessions --all-agents\n  $ switchboard sessions show agent:main:direct:alice');
}

/** The listing: its flags on `sessions` itself and on `sessions list` (the default subcommand). */
export function registerListing(sessions: Command, hooks: ProgramHooks): void {
  const list = (command: Command) =>
    addSelectionFlags(command)
      .option('--active <minutes>', 'only sessions updated in the last MINUTES')
      .option('--limit <n|all>', `at most N rows, newest first (default ${DEFAULT_LIST_LIMIT}; "all" lists every one)`)
      .action(hooks.action((ctx: CliContext) => runList(ctx)));
  list(sessions);
  list(sessions.command('list', { isDefault: true }).description('table of sessions: Agent, Kind, Key, Age, Model, Flags'))
    .addHelpText('after', '\nExample:\n  $ switchboard sessions list --active 60 --json');
}

/** Flags of a plain listing (and the global ones) that take a value: the word after one is not an operand. */
const LISTING_VALUE_OPTIONS = new Set(['--agent', '--store', '--active', '--limit', '--state-dir', '--config', '--now']);
const LISTING_FLAGS = new Set(['--all-agents', '--json', '--no-color', '-q', '--quiet', '-v', '--verbose']);

/**
 * Whether argv is a plain listing: `sessions [list]` with nothing but the listing's and the global
 * flags. Anything else (another subcommand, an operand, help, an unknown flag, `--`) is not, and
 * gets every subcommand, so help, errors and "did you mean" see them all.
 */
export function isPlainListing(argv: readonly string[]): boolean {
  let words = 0;
  for (let i = 2; i < argv.length; i++) {
    const arg = argv[i]!;
    if (LISTING_VALUE_OPTIONS.has(arg)) i++;
    else if (arg.includes('=') && LISTING_VALUE_OPTIONS.has(arg.slice(0, arg.indexOf('=')))) continue;
    else if (LISTING_FLAGS.has(arg)) continue;
    else if (arg.startsWith('-')) return false;
    else if (words === 0 && arg === 'sessions') words = 1;
    else if (words === 1 && arg === 'list') words = 2;
    else return false;
  }
  return words > 0;
}

/**
 * What the `sessions` group registers: for a plain listing, the listing alone (registering the
 * dozen other subcommands, and loading their flags' code, was a tenth of its start-up); for
 * anything else, or without argv (help, completion), every subcommand.
 */
export async function sessionRegistration(argv: readonly string[] | undefined): Promise<Registration> {
  if (argv !== undefined && isPlainListing(argv)) return (program, hooks) => registerListing(sessionsCommand(program), hooks);
  return (await import('./sessions-commands.js')).registerSessionCommands;
}

async function runList(ctx: CliContext): Promise<number> {
  const flags = ctx.options as { active?: string; limit?: string };
  const listing = await listSessions(await ctx.readingEngine(), {
    ...selectionOf(ctx),
    activeMinutes: flags.active !== undefined ? positiveInt(flags.active, '--active') : undefined,
    limit: flags.limit === 'all' ? undefined : flags.limit !== undefined ? positiveInt(flags.limit, '--limit') : DEFAULT_LIST_LIMIT,
  });
  // Bounded by default, like `openclaw sessions`: say so when rows were left out.
  if (listing.total > listing.count) ctx.note(`switchboard: listed ${listing.count} of ${listing.total} sessions (newest first); --limit all lists every one`);
  if (ctx.json) {
    writeJsonLine(ctx.streams.stdout, listing);
    return 0;
  }
  if (listing.count === 0) {
    // `--limit 0` left every row out: the note above says how many there are.
    if (listing.total === 0) ctx.streams.stdout.write(`no sessions in ${listing.stores.map((s) => s.path).join(', ')}\n`);
    return 0;
  }
  // The table's code (and the time zone code it uses) loads for a terminal, not for --json.
  const { formatAge, table } = await import('./format.js');
  const rows = listing.sessions.map((s) => [
    s.agentId,
    s.kind,
    s.key,
    formatAge(s.ageMs),
    s.model ?? '-',
    formatTokens(s.totalTokens, s.contextTokens),
    [s.problem !== undefined ? 'unusable' : '', s.pinned ? 'pinned' : '', s.transcriptBytes === null ? 'no-transcript' : ''].filter(Boolean).join(',') || '-',
  ]);
  ctx.streams.stdout.write(await table(['Agent', 'Kind', 'Key', 'Age', 'Model', 'Tokens', 'Flags'], rows));
  for (const s of listing.sessions) if (s.problem !== undefined) ctx.note(`${s.key}: unusable entry (${s.problem}); see \`switchboard doctor\``);
  return 0;
}

/** A token count the way OpenClaw's listing shows it: 12k, 1.5k, 2.1m. */
function compactCount(n: number): string {
  if (n < 1000) return String(n);
  const [value, unit] = n < 1_000_000 ? [n / 1000, 'k'] : [n / 1_000_000, 'm'];
  return `${value < 10 ? value.toFixed(1).replace(/\.0$/, '') : Math.round(value)}${unit}`;
}

/** Context in use, of the window, and the share: `16k/200k (8%)`; `-` when never reported. */
export function formatTokens(total: number | null, context: number | null): string {
  if (total === null) return '-';
  if (context === null || context <= 0) return compactCount(total);
  return `${compactCount(total)}/${compactCount(context)} (${Math.round((total / context) * 100)}%)`;
}
