// Flags and help of every `sessions` subcommand but the listing (sessions.ts), and of the
// `switchboard reset` shortcut. Their code loads when one of them runs (sessions-actions.ts,
// cleanup-and-maintain-run.ts, pin-route.ts).

import type { Command } from 'commander';
import { ASKS_FIRST, addDestructiveFlags as addFlags } from './confirm.js';
import type { CliContext } from './context.js';
import type { ProgramHooks } from './main.js';
import { registerPinRouteCommands } from './pin-route.js';
import { registerListing, selectionOf, sessionsCommand } from './sessions.js';
import { addSelectionFlags } from './store-selection.js';

/**
 * The other subcommands (show, transcript, reset, …) bring the engine's write paths, runs and
 * transcript readers: loaded when one of them runs, so that their registration costs little.
 */
const actions = () => import('./sessions-actions.js');
/** Likewise `sessions cleanup` (and `maintain`): the cleanup engine and its plan table. */
const cleanupRun = () => import('./cleanup-and-maintain-run.js');

function addDestructiveFlags(command: Command): Command {
  return addFlags(command, 'per session');
}

function collect(value: string, previous: string[] = []): string[] {
  return [...previous, value];
}

function registerCleanupCommand(sessions: Command, hooks: ProgramHooks): void {
  const command = sessions
    .command('cleanup')
    .description('prune stale, missing and surplus sessions, purge old archives, rotate the store, enforce the disk budget')
    .option('--dry-run', 'show the plan (table of sessions with their action); change nothing')
    .option('--enforce', 'apply the plan even if session.maintenance.mode is "warn"')
    .option('--active-key <key>', 'never remove this session (repeatable)', collect)
    .option('--fix-missing', 'also remove entries whose transcript file is missing');
  addSelectionFlags(command, { allAgents: 'every configured agent (a failing store is reported, the others still run)' })
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

/** Every `sessions` subcommand (in help order) and the `reset` shortcut. */
export function registerSessionCommands(program: Command, hooks: ProgramHooks): void {
  const sessions = sessionsCommand(program);
  registerCleanupCommand(sessions, hooks);
  registerListing(sessions, hooks);

  addSelectionFlags(sessions.command('show').argument('<key-or-id>').description('one session: entry, freshness, lock, queue, transcript stats'))
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
    .addHelpText('after', `\nA run in progress and what a live process queued behind it are waited for; messages still\nwaiting after that (ingest --no-wait, a killed process) are dropped with the session (reason\n"deleted"): listed in the output and recorded in the archive.\n\n${ASKS_FIRST}\n\nExamples:\n  $ switchboard sessions delete agent:main:discord:channel:general\n  $ switchboard sessions delete agent:main:direct:a agent:main:direct:b --dry-run`)
    .action(hooks.action(async (ctx: CliContext, keys: string[]) => (await actions()).runDelete(ctx, keys)));
}
