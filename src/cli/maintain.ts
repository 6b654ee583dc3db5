// `switchboard maintain`: its flags and help. What it does (with `sessions cleanup`, registered in
// sessions.ts) is in cleanup-and-maintain-run.ts, loaded when it runs.

import type { Command } from 'commander';
import type { CliContext } from './context.js';
import type { ProgramHooks } from './main.js';

const run = () => import('./cleanup-and-maintain-run.js');

export function registerMaintainCommand(program: Command, hooks: ProgramHooks): void {
  program
    .command('maintain')
    .description('for cron: stale locks and leftovers of interrupted writes, interrupted rotations, cron session retention, session cleanup, due daily/idle resets; one summary')
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

