// `switchboard route resolve|explain`: where a message goes and why. resolve --batch streams
// NDJSON inputs to route objects; explain prints the tier-by-tier trace as a tree or JSON.

import type { Command } from 'commander';
import { SwitchboardError, describeLineError, isSwitchboardError, jsonDepthExceeds, mayNestDeeperThan, readNdjson, toSwitchboardError } from '../core/index.js';
import { RouteJsonWriter, normalizeRouteInput, resolveRoute, type TraceTier } from '../routing/index.js';
import type { CliContext } from './context.js';
import type { ProgramHooks } from './main.js';
import { BufferedWriter, writeJsonLine } from './output.js';
import { addRouteFlags, routeInputFromFlags, type RouteFlagValues } from './route-flags.js';

export function registerRouteCommands(program: Command, hooks: ProgramHooks): void {
  const route = program
    .command('route')
    .description('resolve where a message goes (agent + session key) and explain why')
    .addHelpText('after', '\nExample:\n  $ switchboard route explain --channel telegram --peer direct:123');

  addRouteFlags(
    route
      .command('resolve')
      .description('print the route of one message (or of NDJSON inputs with --batch)')
      .option('--batch', 'read NDJSON route inputs from stdin, print one route object per line'),
    false,
  )
    .addHelpText(
      'after',
      `
Examples:
  $ switchboard route resolve --channel telegram --peer direct:123 --json
  $ printf '{"channel":"discord","peer":{"kind":"channel","id":"c5"}}\\n' | switchboard route resolve --batch`,
    )
    .action(hooks.action((ctx: CliContext) => runResolve(ctx)));

  addRouteFlags(route.command('explain').description('show every tier, every candidate binding and the key derivation'), true)
    .addHelpText('after', '\nExample:\n  $ switchboard route explain --channel discord --peer channel:c5 --guild g1 --roles r1')
    .action(hooks.action((ctx: CliContext) => runExplain(ctx)));
}

function routeFlags(ctx: CliContext): RouteFlagValues {
  return ctx.options as unknown as RouteFlagValues;
}

async function runResolve(ctx: CliContext): Promise<number> {
  const flags = routeFlags(ctx);
  if ((ctx.options as { batch?: boolean }).batch) return runBatch(ctx);
  if (!flags.channel) throw new SwitchboardError('USAGE', "required option '--channel <channel>' not specified (or use --batch)");
  const table = await ctx.routingTable();
  const { route } = resolveRoute(table, normalizeRouteInput(routeInputFromFlags(flags)));
  if (ctx.json) {
    writeJsonLine(ctx.streams.stdout, route);
    return 0;
  }
  const paint = await ctx.painter();
  const rows: [string, string][] = [
    ['agentId', paint.bold(route.agentId)],
    ['sessionKey', paint.cyan(route.sessionKey)],
    ['mainSessionKey', route.mainSessionKey],
    ['matchedBy', route.matchedBy],
    ['channel', route.channel],
    ['accountId', route.accountId],
    ['dmScope', route.dmScope],
    ['lastRoutePolicy', route.lastRoutePolicy],
  ];
  ctx.streams.stdout.write(rows.map(([k, v]) => `${k.padEnd(16)}${v}\n`).join(''));
  return 0;
}

async function runBatch(ctx: CliContext): Promise<number> {
  const routes = new RouteJsonWriter(await ctx.routingTable());
  const out = new BufferedWriter(ctx.streams.stdout);
  let bad = 0;
  // As ingest: bad lines exit 65, but a line refused for a config reason (NO_OWNER) makes it 78.
  let exitCode = 0;
  await readNdjson(ctx.streams.stdin, async (lines) => {
    for (const item of lines) {
      let result: string;
      if ('error' in item) {
        result = JSON.stringify({ error: { code: 'BAD_INPUT', message: `line ${item.line}: ${describeLineError(item.error, item.bytes)}`, line: item.line } });
        bad++;
      } else if (item.text.trim() === '') {
        continue;
      } else {
        try {
          let parsed: unknown;
          try {
            parsed = JSON.parse(item.text);
          } catch (err) {
            throw new SwitchboardError('BAD_INPUT', `not JSON: ${(err as Error).message}`);
          }
          // Error messages quote bad values: one nested thousands of levels deep would overflow the stack.
          if (mayNestDeeperThan(item.text) && jsonDepthExceeds(parsed)) throw new SwitchboardError('BAD_INPUT', describeLineError('too-deep', 0));
          // No backslash in the line: none of its strings needs escaping when printed back.
          result = routes.json(normalizeRouteInput(parsed), !item.text.includes('\\'));
        } catch (err) {
          const error = toSwitchboardError(err);
          result = JSON.stringify({ error: { code: error.code, message: `line ${item.line}: ${error.message}`, line: item.line } });
          bad++;
          if (error.code !== 'BAD_INPUT' && (exitCode === 0 || exitCode === 65)) exitCode = error.exitCode;
        }
      }
      if (out.line(result)) await out.flush();
    }
  });
  await out.flush();
  if (bad > 0) ctx.note(`switchboard: ${bad} line(s) failed`);
  return bad > 0 && exitCode === 0 ? 65 : exitCode;
}

async function runExplain(ctx: CliContext): Promise<number> {
  const input = normalizeRouteInput(routeInputFromFlags(routeFlags(ctx)));
  // The engine (store, sessions, queue settings) only for explain: resolve needs the routing table alone.
  const { explainFully, explanationJson } = await import('../engine/index.js');
  let full: Awaited<ReturnType<typeof explainFully>>;
  try {
    full = await explainFully(await ctx.engine(), input);
  } catch (err) {
    // No owner: the trace is the explanation. Print it, then let the refusal (with its fix) exit 78.
    if (isSwitchboardError(err, 'NO_OWNER') && Array.isArray(err.details?.trace)) {
      const trace = err.details.trace as TraceTier[];
      const warnings = (await ctx.routingTable()).warnings;
      if (ctx.json) writeJsonLine(ctx.streams.stdout, { input, route: null, trace, error: err.toJSON(), warnings });
      else ctx.streams.stdout.write((await import('./route-view.js')).renderRefusal(trace, input, err, warnings, await ctx.painter()));
    }
    throw err;
  }
  if (ctx.json) {
    writeJsonLine(ctx.streams.stdout, explanationJson(input, full));
    return 0;
  }
  const { displayTimeZone } = await import('../policy/index.js');
  const timeZone = displayTimeZone((await ctx.config()).config);
  const { renderExplanation } = await import('./route-view.js');
  ctx.streams.stdout.write(renderExplanation(full.explanation, input, full, full.warnings, await ctx.painter(), timeZone));
  return 0;
}
