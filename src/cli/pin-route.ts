// `switchboard sessions pin-route KEY --channel C --peer KIND:ID` and `sessions unpin-route KEY`:
// who owns a session's address (where proactive output goes; whose messages move it).

import type { Command } from 'commander';
import type { PinRouteOutcome, StoreSelection } from '../engine/index.js';
import { normalizeRouteInput } from '../routing/index.js';
import type { CliContext } from './context.js';
import type { ProgramHooks } from './main.js';
import { writeJsonLine } from './output.js';
import { channelFlag, peerFlag, routeInputFromFlags, type RouteFlagValues } from './route-flags.js';

/** The store-selection flags of `sessions` (--agent, --all-agents, --store), shared, not repeated. */
export interface SelectionHelpers {
  addSelectionFlags: (command: Command) => Command;
  selectionOf: (ctx: CliContext) => StoreSelection;
}

export function registerPinRouteCommands(sessions: Command, hooks: ProgramHooks, { addSelectionFlags, selectionOf }: SelectionHelpers): void {
  addSelectionFlags(
    sessions
      .command('pin-route')
      .argument('<key-or-id>')
      .description("make this peer the session's owner: its address (for cron and heartbeat output) moves there now and then follows only that peer")
      .requiredOption('--channel <channel>', 'channel of the owner (telegram, slack, …)', channelFlag)
      .requiredOption('--peer <kind:id>', 'the owner: direct:<id>, group:<id> or channel:<id>', peerFlag)
      .option('--account <id>', 'account id on that channel (default: "default")')
      .option('--thread <id>', 'thread id to deliver into'),
  )
    .addHelpText(
      'after',
      '\nEvery message is still answered on its own route; only the session address changes hands.\n\nExample:\n  $ switchboard sessions pin-route agent:main:main --channel telegram --peer direct:111222333',
    )
    .action(hooks.action((ctx: CliContext, key: string) => runPinRoute(ctx, key, selectionOf(ctx), true)));
  addSelectionFlags(sessions.command('unpin-route').argument('<key-or-id>').description('forget the pinned owner: the address stays; on a shared session the next DM sender owns it'))
    .addHelpText('after', '\nExample:\n  $ switchboard sessions unpin-route agent:main:main')
    .action(hooks.action((ctx: CliContext, key: string) => runPinRoute(ctx, key, selectionOf(ctx), false)));
}

async function runPinRoute(ctx: CliContext, key: string, selection: StoreSelection, pin: boolean): Promise<number> {
  const flags = ctx.options as RouteFlagValues;
  const route = pin ? normalizeRouteInput(routeInputFromFlags({ channel: flags.channel, account: flags.account, peer: flags.peer, thread: flags.thread })) : null;
  // The engine's write path loads when this runs: every `sessions` command registers pin-route.
  const { pinDeliveryRoute } = await import('../engine/index.js');
  const outcome: PinRouteOutcome = await pinDeliveryRoute(await ctx.engine(), key, route, selection);
  if (ctx.json) {
    writeJsonLine(ctx.streams.stdout, outcome);
    return 0;
  }
  const owner = outcome.deliveryOwner;
  const to = outcome.deliveryContext ? `${outcome.deliveryContext.channel} ${outcome.deliveryContext.to}` : 'none';
  ctx.streams.stdout.write(owner ? `pinned route of ${outcome.sessionKey}: owner ${owner.channel}:${owner.peer.kind}:${owner.peer.id}, address ${to}\n` : `unpinned route of ${outcome.sessionKey} (address stays ${to})\n`);
  return 0;
}
