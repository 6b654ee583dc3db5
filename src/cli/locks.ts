// `switchboard locks [list]` and `switchboard locks release KEY|PATH [--force]`: who holds which
// lock, for how long, and a way to clear one that is stale or stuck.

import fs from 'node:fs';
import type { Command } from 'commander';
import { findSession, transcriptFileOf } from '../engine/index.js';
import { listLocks, releaseLock } from '../store/index.js';
import type { CliContext } from './context.js';
import { formatAge, table } from './format.js';
import type { ProgramHooks } from './main.js';
import { writeJsonLine } from './output.js';

export function registerLockCommands(program: Command, hooks: ProgramHooks): void {
  const locks = program
    .command('locks')
    .description('held and stale locks (default: list)')
    .addHelpText('after', '\nExamples:\n  $ switchboard locks --json\n  $ switchboard locks release agent:main:direct:alice');
  locks.action(hooks.action((ctx: CliContext) => runList(ctx)));
  locks
    .command('list', { isDefault: true })
    .description('every lock under the state dir with its holder, age, and whether it is stale or past its max hold')
    .addHelpText('after', '\nExample:\n  $ switchboard locks list')
    .action(hooks.action((ctx: CliContext) => runList(ctx)));
  locks
    .command('release')
    .argument('<key-or-path>', 'a session key or id, a transcript or sessions.json path, or a .lock path')
    .option('--force', 'release even a live holder within its max hold (it then stops writing)')
    .description('clear a lock; refuses a live, in-time holder unless --force')
    .addHelpText('after', '\nExample:\n  $ switchboard locks release ~/.switchboard/agents/main/sessions/sessions.json --force')
    .action(hooks.action((ctx: CliContext, target: string) => runRelease(ctx, target)));
}

async function runList(ctx: CliContext): Promise<number> {
  const locks = await listLocks(ctx.stateDir, { staleMs: (await ctx.config()).config.session?.writeLock?.staleMs });
  if (ctx.json) {
    writeJsonLine(ctx.streams.stdout, { locks });
    return 0;
  }
  if (locks.length === 0) {
    ctx.streams.stdout.write('no locks held\n');
    return 0;
  }
  const rows = locks.map((lock) => [
    lock.targetPath,
    lock.owner ? `${lock.owner.pid}@${lock.owner.hostname}` : '?',
    lock.owner?.sessionKey ?? '-',
    formatAge(lock.ageMs),
    lock.owner ? formatAge(lock.owner.maxHoldMs) : '-',
    [lock.stale ? 'stale' : '', lock.overHeld ? 'over-held' : '', lock.holderAlive === false ? 'holder-dead' : ''].filter(Boolean).join(',') || 'held',
  ]);
  ctx.streams.stdout.write(table(['Target', 'Holder', 'Session', 'Age', 'MaxHold', 'State'], rows));
  return 0;
}

async function runRelease(ctx: CliContext, target: string): Promise<number> {
  let lockTarget = target;
  if (!fs.existsSync(target)) {
    // Not a path: a session key or id names the lock of its current transcript.
    const found = await findSession(await ctx.engine(), target);
    lockTarget = transcriptFileOf(found.location, found.entry);
  }
  const force = (ctx.options as { force?: boolean }).force === true;
  const result = await releaseLock(lockTarget, { force, staleMs: (await ctx.config()).config.session?.writeLock?.staleMs });
  if (ctx.json) writeJsonLine(ctx.streams.stdout, result);
  else ctx.streams.stdout.write(`released ${result.lockPath}${result.forced ? ' (forced: the holder was alive)' : result.wasStale ? ' (stale)' : result.wasOverHeld ? ' (past its max hold)' : ''}\n`);
  return 0;
}
