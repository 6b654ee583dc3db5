// `switchboard queue [list] | show RUN_ID | cancel RUN_ID | abort --session KEY`: the durable queue
// of every agent's store, readable and stoppable from any process.

import type { Command } from 'commander';
import { SwitchboardError } from '../core/index.js';
import { abortSession, cancelQueued, findSession, listQueue, showQueued, type CancelledBy, type QueueListing } from '../engine/index.js';
import { ASKS_FIRST, addDestructiveFlags, dryRunOrConfirm } from './confirm.js';
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
    .option('--session <key>', 'only this session (key or session id; one that is not there is NOT_FOUND, exit 66)')
    .description('queued and parked items (oldest first) and active runs')
    .addHelpText('after', '\nJSON: {items: [{runId, messageId, requester, sessionKey, sessionId, mode, state, enqueuedAt, text, …, owner}], active: [{runId, sessionKey, sessionId, pid, startedAt, …}]}\n\nExample:\n  $ switchboard queue list --session agent:main:direct:alice --json')
    .action(hooks.action((ctx: CliContext) => runList(ctx)));
  queue
    .command('show')
    .argument('<run-id>', 'the runId of a queued item or an active run')
    .description('everything stored about one queued item or active run')
    .addHelpText('after', '\nExample:\n  $ switchboard queue show client-run-7 --json')
    .action(hooks.action((ctx: CliContext, runId: string) => runShow(ctx, runId)));
  addDestructiveFlags(
    queue
      .command('cancel')
      .argument('<run-id...>', 'the runId of each queued item')
      .option('--reason <text>', 'why (recorded with who cancelled, and reported to the stream that submitted it)'),
  )
    .description("remove queued items; each session's active run continues (NOT_FOUND, exit 66, if any is not queued: then nothing is cancelled)")
    .addHelpText(
      'after',
      `
Who cancelled (pid, user, host) and --reason are printed here, and the ingest, send or
serve that submitted the item and drains its session reports it before it ends as
{"type":"dropped","reason":"cancelled","cancelledBy":{…}}.
${ASKS_FIRST}

Examples:
  $ switchboard queue cancel client-run-7 --reason "sent twice"
  $ switchboard queue cancel client-run-7 client-run-8 --dry-run`,
    )
    .action(hooks.action((ctx: CliContext, runIds: string[]) => runCancel(ctx, runIds)));
  addDestructiveFlags(
    queue
      .command('abort')
      .requiredOption('--session <key...>', 'the sessions to stop (key or session id; repeat or list several)')
      .option('--reason <text>', 'why (recorded with who stopped the queued items)'),
  )
    .description("cancel each session's queued items first, then abort its active run")
    .addHelpText(
      'after',
      `
The active run is stopped by the process that runs it, within about a quarter of a second;
the stream that submitted a cancelled item reports it (dropped, reason stopped).
${ASKS_FIRST}

Examples:
  $ switchboard queue abort --session agent:main:direct:alice --json
  $ switchboard queue abort --session agent:main:direct:alice agent:main:direct:bob --dry-run`,
    )
    .action(hooks.action((ctx: CliContext) => runAbort(ctx)));
}

function clip(text: string, width = 40): string {
  const line = text.replace(/\s+/g, ' ').trim();
  return line.length <= width ? line : `${line.slice(0, width - 1)}…`;
}

async function printListing(ctx: CliContext, listing: QueueListing): Promise<void> {
  const now = ctx.clock.now();
  const out = ctx.streams.stdout;
  if (listing.active.length === 0 && listing.items.length === 0) {
    out.write('nothing queued, no active runs\n');
    return;
  }
  if (listing.active.length > 0) {
    out.write(
      await table(
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
      await table(
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
  await printListing(ctx, listing);
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

function byText(by: CancelledBy): string {
  return `by pid ${by.pid}${by.user ? ` (${by.user})` : ''}${by.reason ? `: ${by.reason}` : ''}`;
}

function reasonOf(ctx: CliContext): string | undefined {
  return (ctx.options as { reason?: string }).reason;
}

/** Every runId is checked before anything is cancelled: one that is not queued stops them all. */
async function runCancel(ctx: CliContext, runIds: string[]): Promise<number> {
  const engine = await ctx.engine();
  const items = [];
  for (const runId of new Set(runIds)) {
    const found = await showQueued(engine, runId);
    if (found.kind === 'active') {
      throw new SwitchboardError('NOT_FOUND', `"${runId}" is the active run of ${found.active.sessionKey}, not a queued item; nothing was cancelled`, {
        hint: `to stop it, run \`switchboard queue abort --session ${found.active.sessionKey}\``,
      });
    }
    items.push(found.item);
  }
  const steps = items.map((item) => ({ text: `cancel ${item.runId} (${item.sessionKey}, #${item.position})`, json: { action: 'cancel', runId: item.runId, sessionKey: item.sessionKey, position: item.position } }));
  if (!(await dryRunOrConfirm(ctx, { steps, question: `cancel ${items.length === 1 ? 'this queued item' : `these ${items.length} queued items`}?` }))) return 0;
  for (const item of items) {
    const outcome = await cancelQueued(engine, item.runId, { reason: reasonOf(ctx) });
    if (ctx.json) writeJsonLine(ctx.streams.stdout, outcome);
    else ctx.streams.stdout.write(`cancelled ${outcome.cancelled.runId} (${outcome.cancelled.sessionKey}, #${outcome.cancelled.position}) ${byText(outcome.cancelledBy)}\n`);
  }
  return 0;
}

async function runAbort(ctx: CliContext): Promise<number> {
  const engine = await ctx.engine();
  const sessions = (ctx.options as { session?: string[] }).session ?? [];
  const keys: string[] = [];
  for (const session of sessions) {
    const { key } = await findSession(engine, session);
    if (!keys.includes(key)) keys.push(key);
  }
  const steps = [];
  for (const key of keys) {
    const listing = await listQueue(engine, { session: key });
    const runs = listing.active.map((run) => run.runId);
    const what = [listing.items.length > 0 ? `cancel ${listing.items.length} queued item(s)` : 'nothing queued', runs.length > 0 ? `abort run ${runs.join(', ')}` : 'no active run'].join(', ');
    steps.push({ text: `abort ${key}: ${what}`, json: { action: 'abort', sessionKey: key, cancel: listing.items.map((item) => item.runId), abort: runs[0] ?? null } });
  }
  if (!(await dryRunOrConfirm(ctx, { steps, question: `abort ${keys.length === 1 ? 'this session' : `these ${keys.length} sessions`}?` }))) return 0;
  for (const key of keys) {
    const outcome = await abortSession(engine, key, { reason: reasonOf(ctx) });
    if (ctx.json) {
      writeJsonLine(ctx.streams.stdout, outcome);
      continue;
    }
    const run = outcome.aborted === null ? 'no active run' : `run ${outcome.aborted} asked to abort`;
    ctx.streams.stdout.write(`${outcome.sessionKey}: ${outcome.cancelled.length} queued item(s) cancelled, ${run} ${byText(outcome.cancelledBy)}\n`);
  }
  return 0;
}
