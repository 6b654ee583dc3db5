// `switchboard queue [list] | show RUN_ID | cancel RUN_ID | abort --session KEY`: the durable queue
// of every agent's store, readable and stoppable from any process.

import type { Command } from 'commander';
import { abortSession, cancelQueued, listQueue, showQueued, type QueueListing } from '../engine/index.js';
import type { CliContext } from './context.js';
import { formatAge, table } from './format.js';
import type { ProgramHooks } from './main.js';
import { writeJsonLine } from './output.js';

export function registerQueueCommands(program: Command, hooks: ProgramHooks): void {
  const queue = program
    .command('queue')
    .description('waiting messages and active runs of every agent (default: list)')
    .addHelpText(
      'after',
      `
Items wait in sessions.json, so they survive a crash and any process can see them.

Examples:
  $ switchboard queue --json
  $ switchboard queue cancel client-run-7
  $ switchboard queue abort --session agent:main:direct:alice`,
    );
  queue
    .command('list', { isDefault: true })
    .option('--session <key>', 'only this session (key or session id)')
    .description('queued and parked items (oldest first) and active runs')
    .addHelpText('after', '\nJSON: {items: [{runId, messageId, requester, sessionKey, sessionId, mode, state, enqueuedAt, text, …, owner}], active: [{runId, sessionKey, sessionId, pid, startedAt, …}]}\n\nExample:\n  $ switchboard queue list --session agent:main:direct:alice --json')
    .action(hooks.action((ctx: CliContext) => runList(ctx)));
  queue
    .command('show')
    .argument('<run-id>', 'the runId of a queued item or an active run')
    .description('everything stored about one queued item or active run')
    .addHelpText('after', '\nExample:\n  $ switchboard queue show client-run-7 --json')
    .action(hooks.action((ctx: CliContext, runId: string) => runShow(ctx, runId)));
  queue
    .command('cancel')
    .argument('<run-id>', 'the runId of a queued item')
    .description('remove one queued item; the session\'s active run continues (NOT_FOUND, exit 66, if no such item)')
    .addHelpText('after', '\nExample:\n  $ switchboard queue cancel client-run-7')
    .action(hooks.action((ctx: CliContext, runId: string) => runCancel(ctx, runId)));
  queue
    .command('abort')
    .requiredOption('--session <key>', 'the session to stop (key or session id)')
    .description('cancel the session\'s queued items first, then abort its active run')
    .addHelpText(
      'after',
      '\nThe active run is stopped by the process that runs it, within about a quarter of a second.\n\nExample:\n  $ switchboard queue abort --session agent:main:direct:alice --json',
    )
    .action(hooks.action((ctx: CliContext) => runAbort(ctx)));
}

function clip(text: string, width = 40): string {
  const line = text.replace(/\s+/g, ' ').trim();
  return line.length <= width ? line : `${line.slice(0, width - 1)}…`;
}

function printListing(ctx: CliContext, listing: QueueListing): void {
  const now = ctx.clock.now();
  const out = ctx.streams.stdout;
  if (listing.active.length === 0 && listing.items.length === 0) {
    out.write('nothing queued, no active runs\n');
    return;
  }
  if (listing.active.length > 0) {
    out.write(
      table(
        ['Active run', 'Session', 'Pid', 'Age', 'State'],
        listing.active.map((run) => [
          run.runId,
          run.sessionKey,
          `${run.pid}@${run.hostname}`,
          formatAge(Math.max(0, now - run.startedAt)),
          run.alive === false ? 'holder-dead' : run.abortRequested ? 'aborting' : 'running',
        ]),
      ),
    );
  }
  if (listing.items.length > 0) {
    if (listing.active.length > 0) out.write('\n');
    out.write(
      table(
        ['Queued', 'Session', '#', 'Mode', 'State', 'From', 'Owner', 'Age', 'Text'],
        listing.items.map((item) => [
          item.runId,
          item.sessionKey,
          String(item.position),
          item.mode,
          item.state,
          item.requester,
          item.owner === null ? '-' : `${item.owner.pid}${item.owner.alive === false ? ' (gone)' : ''}`,
          formatAge(Math.max(0, now - item.enqueuedAt)),
          clip(item.text),
        ]),
      ),
    );
  }
}

async function runList(ctx: CliContext): Promise<number> {
  const session = (ctx.options as { session?: string }).session;
  const listing = await listQueue(await ctx.engine(), { session });
  if (ctx.json) {
    const items = listing.items.map(({ runId, messageId, requester, sessionKey, sessionId, mode, state, enqueuedAt, text, agentId, kind, position, owner }) => ({
      runId,
      messageId,
      requester,
      sessionKey,
      sessionId,
      mode,
      state,
      enqueuedAt,
      text,
      agentId,
      kind,
      position,
      owner,
    }));
    writeJsonLine(ctx.streams.stdout, { items, active: listing.active });
    return 0;
  }
  printListing(ctx, listing);
  return 0;
}

async function runShow(ctx: CliContext, runId: string): Promise<number> {
  const found = await showQueued(await ctx.engine(), runId);
  if (ctx.json) {
    writeJsonLine(ctx.streams.stdout, found.kind === 'item' ? { item: found.item } : { active: found.active });
    return 0;
  }
  const fields = found.kind === 'item' ? found.item : found.active;
  const lines = Object.entries(fields)
    .filter(([, value]) => value !== undefined)
    .map(([key, value]) => `${key}: ${typeof value === 'string' ? value : JSON.stringify(value)}`);
  ctx.streams.stdout.write(`${found.kind === 'item' ? 'queued item' : 'active run'}\n  ${lines.join('\n  ')}\n`);
  return 0;
}

async function runCancel(ctx: CliContext, runId: string): Promise<number> {
  const outcome = await cancelQueued(await ctx.engine(), runId);
  if (ctx.json) writeJsonLine(ctx.streams.stdout, outcome);
  else ctx.streams.stdout.write(`cancelled ${outcome.cancelled.runId} (${outcome.cancelled.sessionKey}, #${outcome.cancelled.position})\n`);
  return 0;
}

async function runAbort(ctx: CliContext): Promise<number> {
  const session = (ctx.options as { session?: string }).session ?? '';
  const outcome = await abortSession(await ctx.engine(), session);
  if (ctx.json) {
    writeJsonLine(ctx.streams.stdout, outcome);
    return 0;
  }
  const run = outcome.aborted === null ? 'no active run' : `run ${outcome.aborted} asked to abort`;
  ctx.streams.stdout.write(`${outcome.sessionKey}: ${outcome.cancelled.length} queued item(s) cancelled, ${run}\n`);
  return 0;
}
