// `switchboard locks [list]` and `switchboard locks release KEY|PATH [--force]`: who holds which
// lock, for how long, and a way to clear one that is stale or stuck.

import fs from 'node:fs';
import type { Command } from 'commander';
import { findSession, transcriptFileOf } from '../engine/index.js';
import { SwitchboardError, isSwitchboardError } from '../core/index.js';
import { LOCK_SUFFIX, listLocks, releaseLock, type LockInfo, type ReleaseLockResult } from '../store/index.js';
import { addDestructiveFlags, dryRunOrConfirm } from './confirm.js';
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
    .description("every lock under the state dir with its holder, age, and whether it is stale or past its max hold (switchboard's lock folders and OpenClaw's lock files)")
    .addHelpText('after', '\nExample:\n  $ switchboard locks list')
    .action(hooks.action((ctx: CliContext) => runList(ctx)));
  addDestructiveFlags(
    locks
      .command('release')
      .argument('<key-or-path...>', 'session keys or ids, transcript or sessions.json paths (also of a file that is gone, if its lock is there), or .lock paths')
      .option('--force', 'release even a live holder within its max hold (it then stops writing)'),
  )
    .description('clear locks; refuses a live, in-time holder unless --force (then nothing is released)')
    .addHelpText(
      'after',
      `
Every lock is checked before any is released. With --force a person at a terminal is asked
first (--yes skips); never asked in a pipe or from cron. Answering no changes nothing (exit 0).

Examples:
  $ switchboard locks release ~/.switchboard/agents/main/sessions/sessions.json --force
  $ switchboard locks release agent:main:direct:alice agent:main:direct:bob --force --dry-run`,
    )
    .action(hooks.action((ctx: CliContext, targets: string[]) => runRelease(ctx, targets)));
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
    holderOf(lock),
    lock.owner?.sessionKey ?? '-',
    formatAge(lock.ageMs),
    lock.owner ? formatAge(lock.owner.maxHoldMs) : lock.fileLock?.maxHoldMs != null ? formatAge(lock.fileLock.maxHoldMs) : '-',
    [
      lock.stale ? 'stale' : '',
      lock.overHeld || lock.fileLock?.pastMaxHold === true ? 'over-held' : '',
      lock.holderAlive === false ? 'holder-dead' : '',
    ]
      .filter(Boolean)
      .join(',') || 'held',
  ]);
  ctx.streams.stdout.write(await table(['Target', 'Holder', 'Session', 'Age', 'MaxHold', 'State'], rows));
  return 0;
}

/** `pid@host` of a switchboard holder; `pid (openclaw)` of an OpenClaw lock file (no host in its record). */
function holderOf(lock: LockInfo): string {
  if (lock.kind === 'switchboard') return lock.owner ? `${lock.owner.pid}@${lock.owner.hostname}` : '?';
  return lock.fileLock?.pid != null ? `${lock.fileLock.pid} (openclaw)` : '? (lock file)';
}

function describeRelease(result: ReleaseLockResult): string {
  const holder =
    result.kind !== 'switchboard'
      ? result.fileLock?.pid != null
        ? `OpenClaw's lock file, pid ${result.fileLock.pid}, alive; OpenClaw is not told`
        : 'a lock file without a holder, not 30 s old yet'
      : result.owner
        ? `held by pid ${result.owner.pid} on ${result.owner.hostname}, alive`
        : 'no owner record, not stale yet';
  return `${result.lockPath}${result.forced ? ` (forced: ${holder})` : result.wasStale ? ' (stale)' : result.wasOverHeld ? ' (past its max hold)' : ' (holder gone)'}`;
}

async function runRelease(ctx: CliContext, targets: string[]): Promise<number> {
  const force = (ctx.options as { force?: boolean }).force === true;
  const staleMs = (await ctx.config()).config.session?.writeLock?.staleMs;
  const lockTargets: string[] = [];
  for (const target of targets) {
    let lockTarget = target;
    // A path is a file, or a lock whose file is gone (a transcript deleted under a stale lock).
    if (!fs.existsSync(target) && !fs.existsSync(`${target}${LOCK_SUFFIX}`)) {
      // Else a session key or id names the lock of its current transcript.
      const found = await findSession(await ctx.engine(), target).catch((err: unknown) => {
        if (isSwitchboardError(err, 'NOT_FOUND') && target.includes('/')) {
          throw new SwitchboardError('NOT_FOUND', `no lock at ${target}: neither the file nor its lock is there (and no session has that name)`, { hint: 'list locks with `switchboard locks`' });
        }
        throw err;
      });
      lockTarget = transcriptFileOf(found.location, found.entry);
    }
    if (!lockTargets.includes(lockTarget)) lockTargets.push(lockTarget);
  }
  // The same checks as the release itself: a live holder without --force refuses them all.
  const planned: ReleaseLockResult[] = [];
  for (const lockTarget of lockTargets) planned.push(await releaseLock(lockTarget, { force, staleMs, dryRun: true }));
  const steps = planned.map((result) => ({ text: `release ${describeRelease(result)}`, json: { action: 'release', ...result } }));
  if (force || (ctx.options as { dryRun?: boolean }).dryRun === true) {
    if (!(await dryRunOrConfirm(ctx, { steps, question: `release ${planned.length === 1 ? 'this lock' : `these ${planned.length} locks`}?` }))) return 0;
  }
  for (const lockTarget of lockTargets) {
    const result = await releaseLock(lockTarget, { force, staleMs });
    if (ctx.json) writeJsonLine(ctx.streams.stdout, result);
    else ctx.streams.stdout.write(`released ${describeRelease(result)}\n`);
  }
  return 0;
}
