// `switchboard sessions cleanup` and `switchboard maintain`: their flags and help. What they do
// (engine calls, plan table, summaries) is in cleanup-and-maintain-run.ts, loaded when one runs:
// every `sessions` command registers cleanup, and a listing should not load the cleanup engine.

import type { Command } from 'commander';
import type { CliContext } from './context.js';
import type { ProgramHooks } from './main.js';

const run = () => import('./cleanup-and-maintain-run.js');

function collect(value: string, previous: string[] = []): string[] {
  return [...previous, value];
}

export function registerCleanupCommand(sessions: Command, hooks: ProgramHooks): void {
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
    .action(hooks.action(async (ctx: CliContext) => (await run()).runCleanup(ctx)));
}

export function registerMaintainCommand(program: Command, hooks: ProgramHooks): void {
  program
    .command('maintain')
    .description('for cron: stale locks, cron session retention, session cleanup, due daily/idle resets; one summary')
    .option('--dry-run', 'report what would be done; change nothing')
    .addHelpText(
      'after',
      `
Sessions with an active run (their write lock is held) are deferred, never reset under the run.
A running \`switchboard serve\` runs this itself every session.maintenance.maintainEvery (default
1h). The exit status is non-zero only when something failed. See switchboard-maintain(1).
On a terminal much work shows a progress line on stderr (never in a pipe or with --json).

Example:
  $ switchboard maintain --json
  # crontab: every night at 04:05
  5 4 * * * switchboard maintain --json >> ~/.switchboard/maintain.log 2>&1`,
    )
    .action(hooks.action(async (ctx: CliContext) => (await run()).runMaintainCommand(ctx)));
}

