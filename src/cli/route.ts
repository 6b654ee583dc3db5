// `switchboard route resolve|explain`: where a message goes and why. resolve --batch streams
// NDJSON inputs to route objects; explain prints the tier-by-tier trace as a tree or JSON.

import type { Command } from 'commander';
import { SwitchboardError, describeLineError, jsonDepthExceeds, readNdjson, toSwitchboardError } from '../core/index.js';
import { explainFully, explanationJson, type InstanceAndTime } from '../engine/index.js';
import { normalizeRouteInput, resolveRoute, type RouteExplanation, type RouteInput } from '../routing/index.js';
import type { CliContext } from './context.js';
import type { ProgramHooks } from './main.js';
import { BufferedWriter, writeJsonLine, type Painter } from './output.js';
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
  const table = await ctx.routingTable();
  const out = new BufferedWriter(ctx.streams.stdout);
  let bad = 0;
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
          if (jsonDepthExceeds(parsed)) throw new SwitchboardError('BAD_INPUT', describeLineError('too-deep', 0));
          result = JSON.stringify(resolveRoute(table, normalizeRouteInput(parsed)).route);
        } catch (err) {
          const error = toSwitchboardError(err);
          result = JSON.stringify({ error: { code: error.code, message: `line ${item.line}: ${error.message}`, line: item.line } });
          bad++;
        }
      }
      if (out.line(result)) await out.flush();
    }
  });
  await out.flush();
  if (bad > 0) ctx.note(`switchboard: ${bad} bad input line(s)`);
  return bad > 0 ? 65 : 0;
}

async function runExplain(ctx: CliContext): Promise<number> {
  const input = normalizeRouteInput(routeInputFromFlags(routeFlags(ctx)));
  const full = await explainFully(await ctx.engine(), input);
  if (ctx.json) {
    writeJsonLine(ctx.streams.stdout, explanationJson(input, full));
    return 0;
  }
  ctx.streams.stdout.write(renderExplanation(full.explanation, input, full, full.warnings, await ctx.painter()));
  return 0;
}

function describeMatch(match: unknown): string {
  const m = (match ?? {}) as Record<string, unknown>;
  const parts: string[] = [];
  if (m.accountId !== undefined) parts.push(`account=${String(m.accountId).trim() || '(blank)'}`);
  const peer = m.peer as { kind?: string; id?: unknown } | undefined;
  if (peer) parts.push(`peer=${peer.kind}:${peer.id}`);
  if (m.guildId !== undefined) parts.push(`guild=${m.guildId}`);
  if (m.teamId !== undefined) parts.push(`team=${m.teamId}`);
  if (Array.isArray(m.roles) && m.roles.length > 0) parts.push(`roles=${m.roles.join('|')}`);
  return parts.length > 0 ? parts.join(' ') : '(any conversation)';
}

function describeInput(input: RouteInput): string {
  const parts = [`channel=${input.channel}`, `account=${input.accountId}`];
  if (input.peer) parts.push(`peer=${input.peer.kind}:${input.peer.id}`);
  if (input.parentPeer) parts.push(`parentPeer=${input.parentPeer.kind}:${input.parentPeer.id}`);
  if (input.guildId) parts.push(`guild=${input.guildId}`);
  if (input.teamId) parts.push(`team=${input.teamId}`);
  if (input.memberRoleIds.length > 0) parts.push(`roles=${input.memberRoleIds.join(',')}`);
  if (input.threadId) parts.push(`thread=${input.threadId}`);
  return parts.join(' ');
}

/** The explain tree: tiers with their candidates, the winner, then the key derivation. */
export function renderExplanation(explanation: RouteExplanation, input: RouteInput, more: InstanceAndTime, warnings: string[], paint: Painter): string {
  const { route, trace, derivation, binding } = explanation;
  const lines: string[] = [];
  lines.push(`${paint.bold('input')}  ${describeInput(input)}`);
  lines.push('');
  lines.push(paint.bold('agent selection') + paint.dim('  (first tier with a match wins; inside a tier, config order)'));
  trace.forEach((tier, i) => {
    const last = i === trace.length - 1;
    const branch = last ? '└─' : '├─';
    const stem = last ? '   ' : '│  ';
    const won = tier.candidates.some((c) => c.result === 'matched') || (tier.matchedBy === 'default' && !tier.skipped);
    const title = `tier ${tier.tier} ${tier.matchedBy}`;
    const status = tier.skipped ? paint.dim(tier.skipped.startsWith('not reached') ? tier.skipped : `skipped: ${tier.skipped}`) : won ? paint.green('MATCH') : tier.candidates.length === 0 ? paint.dim('no candidates') : paint.dim('no match');
    lines.push(`${branch} ${won ? paint.bold(title) : title}  ${status}`);
    tier.candidates.forEach((candidate, j) => {
      const cBranch = j === tier.candidates.length - 1 ? '└─' : '├─';
      const mark = candidate.result === 'matched' ? paint.green('✓') : candidate.result === 'rejected' ? paint.red('✗') : paint.dim('·');
      const reason = candidate.result === 'matched' ? paint.green('matched') : candidate.reason ? paint.dim(candidate.reason) : '';
      lines.push(`${stem}${cBranch} ${mark} bindings[${candidate.index}] → ${candidate.agentId}  ${describeMatch(candidate.match)}  ${reason}`.trimEnd());
    });
    if (tier.matchedBy === 'default' && !tier.skipped) lines.push(`${stem}└─ ${paint.green('✓')} default agent ${route.agentId}`);
  });
  lines.push('');
  const winnerText = binding ? `bindings[${binding.index}] via ${route.matchedBy}` : 'no binding matched: default agent';
  lines.push(`${paint.bold('agent')}  ${paint.bold(route.agentId)}  (${winnerText})`);
  lines.push('');
  lines.push(paint.bold('session key'));
  const keyRows: string[] = [`dmScope: ${derivation.dmScope}${input.peer?.kind === 'direct' ? '' : paint.dim(input.peer ? ' (not used: group/channel peer)' : ' (not used: no peer → main key)')}`];
  if (derivation.identityLink) keyRows.push(`identity link: peer ${input.peer?.id} → ${derivation.identityLink.canonical} (entry "${derivation.identityLink.entry}")`);
  else if (input.peer?.kind === 'direct' && derivation.dmScope !== 'main') keyRows.push('identity link: none');
  if (derivation.threadSuffix) keyRows.push(`thread suffix: ${derivation.threadSuffix}`);
  keyRows.push(`mainKey: ${derivation.mainKey} → ${route.mainSessionKey}`);
  keyRows.push(`sessionKey: ${paint.cyan(route.sessionKey)}`);
  keyRows.push(`lastRoutePolicy: ${route.lastRoutePolicy}${route.lastRoutePolicy === 'main' ? ' (this message updates the main session\'s last route)' : ' (this message updates its own session\'s last route)'}`);
  keyRows.forEach((row, i) => lines.push(`${i === keyRows.length - 1 ? '└─' : '├─'} ${row}`));
  lines.push('');
  lines.push(paint.bold('session instance'));
  const { session, queue, send } = more;
  const resetText = session.reset.mode === 'none' ? 'none (sessions never expire by time)' : `${session.reset.mode}${session.reset.mode === 'daily' ? ` at ${session.reset.atHour}:00 ${session.reset.timezone ?? 'host time'}` : ''}${session.reset.idleMinutes ? `, idle ${session.reset.idleMinutes} min` : ''} (from ${session.reset.source})`;
  const instanceRows = session.exists
    ? [
        `sessionId: ${session.sessionId}`,
        session.fresh ? `fresh: yes${session.nextResetAt ? `, next reset ${new Date(session.nextResetAt).toISOString()}` : ''}` : paint.yellow(`stale (${session.staleReason}): the next message starts a new instance`),
      ]
    : ['no instance yet: the next message creates one'];
  instanceRows.push(`reset policy: ${resetText}`);
  instanceRows.forEach((row, i) => lines.push(`${i === instanceRows.length - 1 ? '└─' : '├─'} ${row}`));
  lines.push('');
  lines.push(paint.bold('time and delivery'));
  lines.push(`├─ queue: ${queue.mode} (${queue.sources.mode}), debounce ${queue.debounceMs} ms (${queue.sources.debounceMs}), cap ${queue.cap} (${queue.sources.cap}), drop ${queue.dropPolicy} (${queue.sources.dropPolicy})`);
  lines.push(`└─ replies: ${send.decision === 'allow' ? paint.green('allowed') : paint.red('denied')} (${send.source}${send.rule !== null ? ` rule ${send.rule}` : ''})`);
  if (warnings.length > 0) {
    lines.push('');
    for (const warning of warnings) lines.push(`${paint.yellow('warning:')} ${warning}`);
  }
  return `${lines.join('\n')}\n`;
}
