// `switchboard sessions …` (list, show, transcript, reset, pin, unpin, pin-route, delete) and the
// `switchboard reset` shortcut: every flag and help text, and the listing; the rest runs in sessions-actions.ts.

import type { Command } from 'commander';
import { SwitchboardError } from '../core/index.js';
import { listSessions, type StoreSelection } from '../engine/index.js';
import { ASKS_FIRST, addDestructiveFlags as addFlags } from './confirm.js';
import type { CliContext } from './context.js';
import { registerPinRouteCommands } from './pin-route.js';
import type { ProgramHooks } from './main.js';
import { writeJsonLine } from './output.js';

/**
 * The other subcommands (show, transcript, reset, …) bring the engine's write paths, runs and
 * transcript readers: loaded when one of them runs, so a listing starts without them (P2).
 */
const actions = () => import('./sessions-actions.js');
/** Likewise `sessions cleanup` (and `maintain`): the cleanup engine and its plan table. */
const cleanupRun = () => import('./cleanup-and-maintain-run.js');

interface SelectionFlags {
  agent?: string;
  allAgents?: boolean;
  store?: string;
}

function addSelectionFlags(command: Command): Command {
  return command
    .option('--agent <id>', "the agent's store (default: the default agent)")
    .option('--all-agents', 'every configured agent')
    .option('--store <path>', 'a sessions.json file');
}

function addDestructiveFlags(command: Command): Command {
  return addFlags(command, 'per session');
}

export function selectionOf(ctx: CliContext): StoreSelection {
  const flags = ctx.options as unknown as SelectionFlags;
  const chosen = [flags.agent !== undefined, flags.allAgents === true, flags.store !== undefined].filter(Boolean).length;
  if (chosen > 1) throw new SwitchboardError('USAGE', '--agent, --all-agents and --store exclude each other');
  return { agent: flags.agent, allAgents: flags.allAgents, storePath: flags.store };
}

/** Rows a listing shows unless --limit says otherwise. */
const DEFAULT_LIST_LIMIT = 100;

export function positiveInt(value: string, name: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0) throw new SwitchboardError('USAGE', `${name} must be a whole number ≥ 0, got "${value}"`);
  return n;
}

function collect(value: string, previous: string[] = []): string[] {
  return [...previous, value];
}

function registerCleanupCommand(sessions: Command, hooks: ProgramHooks): void {
  sessions
    .command('cleanup')
    .description('prune stale, missing and surplus sessions, purge old archives, rotate the store, enforce the disk budget')
    .option('--dry-run', 'show the plan (table of sessions with their action); change nothing')
    .option('--enforce', 'apply the plan even if session.maintenance.mode is "warn"')
    .option('--active-key <key>', 'never remove this session (repeatable)', collect)
    .option('--fix-missing', 'also remove entries whose transcript file is missing')
    .option('--agent <id>', "the agent's store (default: the default agent)")
    .option('--all-agents', 'every configured agent (a failing store is reported, the others still run)')
    .option('--store <path>', 'a sessions.json file')
    .addHelpText(
      'after',
      `
Without --enforce (and with the default mode "warn") nothing is changed: the summary says what
would be. Pinned, locked, running, queued and --active-key sessions are never removed; removed
transcripts are archived as <file>.deleted.<ts>, never deleted. See switchboard-sessions(1).
On a terminal much work shows a progress line on stderr (never in a pipe or with --json).

Example:
  $ switchboard sessions cleanup --dry-run --all-agents
  $ switchboard sessions cleanup --enforce --active-key agent:main:main --json`,
    )
    .action(hooks.action(async (ctx: CliContext) => (await cleanupRun()).runCleanup(ctx)));
}

export function registerSessionCommands(program: Command, hooks: ProgramHooks): void {
  const sessions = program
    .command('sessions')
    .description('list, inspect and change sessions (default: list)')
    .addHelpText('after', '\nExamples:\n  $ switchboard sessions --all-agents\n  $ switchboard sessions show agent:main:direct:alice');
  registerCleanupCommand(sessions, hooks);

  const list = (command: Command) =>
    addSelectionFlags(command)
      .option('--active <minutes>', 'only sessions updated in the last MINUTES')
      .option('--limit <n|all>', `at most N rows, newest first (default ${DEFAULT_LIST_LIMIT}; "all" lists every one)`)
      .action(hooks.action((ctx: CliContext) => runList(ctx)));
  list(sessions);
  list(sessions.command('list', { isDefault: true }).description('table of sessions: Agent, Kind, Key, Age, Model, Flags'))
    .addHelpText('after', '\nExample:\n  $ switchboard sessions list --active 60 --json');

  addSelectionFlags(sessions.command('show').argument('<key-or-id>').description('one session: entry, freshness, lock, transcript stats'))
    .addHelpText('after', '\nExample:\n  $ switchboard sessions show agent:main:direct:alice')
    .action(hooks.action(async (ctx: CliContext, key: string) => (await actions()).runShow(ctx, key)));

  addSelectionFlags(
    sessions
      .command('transcript')
      .argument('<key-or-id>')
      .description('the conversation of the current instance, or of an archived one given by its session id; skipped damaged lines are reported on stderr')
      .option('--tail <n>', 'only the last N records')
      .option('--follow', 'keep printing records as they are appended, into the next instance after a reset, like tail -F (Ctrl-C to stop)')
      .option('--raw', 'print the JSONL lines as stored'),
  )
    .addHelpText('after', '\nExample:\n  $ switchboard sessions transcript agent:main:direct:alice --tail 20')
    .action(hooks.action(async (ctx: CliContext, key: string) => (await actions()).runTranscript(ctx, key)));

  addSelectionFlags(
    sessions
      .command('history')
      .argument('<key-or-id>')
      .description('every instance of a key, current and archived: sessionId, started, ended, why it ended, size'),
  )
    .addHelpText(
      'after',
      '\nKEY may be a deleted key (its archives remain) or the session id of any of its instances.\nRead an archived instance with `switchboard sessions transcript <sessionId>`.\n\nExample:\n  $ switchboard sessions history agent:main:direct:alice',
    )
    .action(hooks.action(async (ctx: CliContext, key: string) => (await actions()).runHistory(ctx, key)));

  const reset = (command: Command) =>
    addDestructiveFlags(addSelectionFlags(command.argument('<key-or-id...>').option('--reason <text>', 'why (kept in the reset notice)').option('--model <model>', 'model for the new instance')))
      .addHelpText('after', `\n${ASKS_FIRST}\n\nExamples:\n  $ switchboard sessions reset agent:main:direct:alice --reason "fresh start"\n  $ switchboard sessions reset agent:main:direct:alice agent:main:direct:bob --dry-run`)
      .action(hooks.action(async (ctx: CliContext, keys: string[]) => (await actions()).runReset(ctx, keys)));
  reset(sessions.command('reset').description('rotate now: new sessionId, old transcript archived as .reset.<ts>'));
  reset(program.command('reset').description('rotate a session now (same as `sessions reset`)'));

  addSelectionFlags(sessions.command('pin').argument('<key-or-id>').description('never prune, cap or evict this session'))
    .addHelpText('after', '\nExample:\n  $ switchboard sessions pin agent:main:main')
    .action(hooks.action(async (ctx: CliContext, key: string) => (await actions()).runPin(ctx, key, true)));
  addSelectionFlags(sessions.command('unpin').argument('<key-or-id>').description('let maintenance treat this session normally again'))
    .addHelpText('after', '\nExample:\n  $ switchboard sessions unpin agent:main:main')
    .action(hooks.action(async (ctx: CliContext, key: string) => (await actions()).runPin(ctx, key, false)));
  registerPinRouteCommands(sessions, hooks, { addSelectionFlags, selectionOf });
  addDestructiveFlags(addSelectionFlags(sessions.command('delete').argument('<key-or-id...>').description('remove the entries; their transcripts are archived as .deleted.<ts>, never deleted')))
    .addHelpText('after', `\n${ASKS_FIRST}\n\nExamples:\n  $ switchboard sessions delete agent:main:discord:channel:general\n  $ switchboard sessions delete agent:main:direct:a agent:main:direct:b --dry-run`)
    .action(hooks.action(async (ctx: CliContext, keys: string[]) => (await actions()).runDelete(ctx, keys)));
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
    ctx.streams.stdout.write(`no sessions in ${listing.stores.map((s) => s.path).join(', ')}\n`);
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
