// `switchboard route resolve|explain`: where a message goes and why. resolve --batch streams
// NDJSON inputs to route objects; explain prints the tier-by-tier trace as a tree or JSON.

import type { Command } from 'commander';
import { SwitchboardError, describeLineError, isSwitchboardError, jsonDepthExceeds, mayNestDeeperThan, readNdjson, toSwitchboardError } from '../core/index.js';
import type { InstanceAndTime } from '../engine/index.js';
import { normalizeRouteInput, resolveRoute, routeJson, type RouteExplanation, type RouteInput, type TraceTier } from '../routing/index.js';
import type { CliContext } from './context.js';
import { formatTime } from './format.js';
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
          result = routeJson(resolveRoute(table, normalizeRouteInput(parsed)).route);
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
      else ctx.streams.stdout.write(renderRefusal(trace, input, err, warnings, await ctx.painter()));
    }
    throw err;
  }
  if (ctx.json) {
    writeJsonLine(ctx.streams.stdout, explanationJson(input, full));
    return 0;
  }
  const { displayTimeZone } = await import('../policy/index.js');
  const timeZone = displayTimeZone((await ctx.config()).config);
  ctx.streams.stdout.write(renderExplanation(full.explanation, input, full, full.warnings, await ctx.painter(), timeZone));
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

function candidateLabel(candidate: TraceTier['candidates'][number]): string {
  const agent = candidate.agentId === '' ? '(no owner)' : candidate.agentId;
  return candidate.origin ? `${agent} (added for ${candidate.origin})` : agent;
}

/** The tier-by-tier tree; `defaultAgent` is who the default tier gives the message to, if anyone. */
function renderTrace(trace: TraceTier[], defaultAgent: string | undefined, paint: Painter): string[] {
  const lines: string[] = [];
  trace.forEach((tier, i) => {
    const last = i === trace.length - 1;
    const branch = last ? '└─' : '├─';
    const stem = last ? '   ' : '│  ';
    const won = tier.candidates.some((c) => c.result === 'matched') || (tier.matchedBy === 'default' && !tier.skipped && defaultAgent !== undefined);
    const title = `tier ${tier.tier} ${tier.matchedBy}`;
    const status = tier.skipped ? paint.dim(tier.skipped.startsWith('not reached') ? tier.skipped : `skipped: ${tier.skipped}`) : won ? paint.green('MATCH') : tier.candidates.length === 0 ? paint.dim('no candidates') : paint.dim('no match');
    lines.push(`${branch} ${won ? paint.bold(title) : title}  ${status}`);
    tier.candidates.forEach((candidate, j) => {
      const cBranch = j === tier.candidates.length - 1 ? '└─' : '├─';
      const mark = candidate.result === 'matched' ? paint.green('✓') : candidate.result === 'rejected' ? paint.red('✗') : paint.dim('·');
      const reason = candidate.result === 'matched' ? paint.green('matched') : candidate.reason ? paint.dim(candidate.reason) : '';
      lines.push(`${stem}${cBranch} ${mark} bindings[${candidate.index}] → ${candidateLabel(candidate)}  ${describeMatch(candidate.match)}  ${reason}`.trimEnd());
    });
    if (tier.matchedBy === 'default' && !tier.skipped) {
      lines.push(defaultAgent === undefined ? `${stem}└─ ${paint.red('✗')} no fallback owner` : `${stem}└─ ${paint.green('✓')} default agent ${defaultAgent}`);
    }
  });
  return lines;
}

/** `route explain` for a message nobody owns: the trace, why no agent owns it, and how to fix the config. */
export function renderRefusal(trace: TraceTier[], input: RouteInput, error: SwitchboardError, warnings: string[], paint: Painter): string {
  const lines: string[] = [];
  lines.push(`${paint.bold('input')}  ${describeInput(input)}`);
  lines.push('');
  lines.push(paint.bold('agent selection') + paint.dim('  (first tier with a match wins; inside a tier, config order)'));
  lines.push(...renderTrace(trace, undefined, paint));
  lines.push('');
  lines.push(`${paint.bold('agent')}  ${paint.red('none: refused (NO_OWNER)')}`);
  lines.push(`├─ why: ${error.message}`);
  lines.push(`└─ fix: ${error.hint ?? 'name an owner for this channel and account'}`);
  for (const warning of warnings) lines.push(`${paint.yellow('warning:')} ${warning}`);
  return `${lines.join('\n')}\n`;
}

/** The explain tree: tiers with their candidates, the winner, then the key derivation. */
export function renderExplanation(explanation: RouteExplanation, input: RouteInput, more: InstanceAndTime, warnings: string[], paint: Painter, timeZone?: string): string {
  const { route, trace, derivation, binding } = explanation;
  const lines: string[] = [];
  lines.push(`${paint.bold('input')}  ${describeInput(input)}`);
  lines.push('');
  lines.push(paint.bold('agent selection') + paint.dim('  (first tier with a match wins; inside a tier, config order)'));
  lines.push(...renderTrace(trace, route.agentId, paint));
  lines.push('');
  const winnerText = binding ? `bindings[${binding.index}] via ${route.matchedBy}` : 'no binding matched: default agent';
  lines.push(`${paint.bold('agent')}  ${paint.bold(route.agentId)}  (${winnerText})`);
  lines.push('');
  lines.push(paint.bold('session key'));
  const keyRows: string[] = [`dmScope: ${derivation.dmScope}${input.peer?.kind === 'direct' ? '' : paint.dim(input.peer ? ' (not used: group/channel peer)' : ' (not used: no peer → main key)')}`];
  if (derivation.groupScope !== undefined && input.peer !== undefined && input.peer.kind !== 'direct') {
    keyRows.push(`groupScope: ${derivation.groupScope}${derivation.groupScope === 'main' ? ' (groups and channels share the main session)' : ''}`);
  }
  if (derivation.identityLink) keyRows.push(`identity link: peer ${input.peer?.id} → ${derivation.identityLink.canonical} (entry "${derivation.identityLink.entry}")`);
  else if (input.peer?.kind === 'direct' && derivation.dmScope !== 'main') keyRows.push('identity link: none');
  if (derivation.threadSuffix) keyRows.push(`thread suffix: ${derivation.threadSuffix}`);
  keyRows.push(`mainKey: ${derivation.mainKey} → ${route.mainSessionKey}`);
  keyRows.push(`sessionKey: ${paint.cyan(route.sessionKey)}`);
  keyRows.push(`lastRoutePolicy: ${route.lastRoutePolicy}${route.lastRoutePolicy === 'main' ? ' (the main session: only its owner moves its last route, see "session address")' : ' (this message updates its own session\'s last route)'}`);
  keyRows.forEach((row, i) => lines.push(`${i === keyRows.length - 1 ? '└─' : '├─'} ${row}`));
  lines.push('');
  lines.push(paint.bold('session instance'));
  const { session, queue, send } = more;
  const resetText = session.reset.mode === 'none' ? 'none (sessions never expire by time)' : `${session.reset.mode}${session.reset.mode === 'daily' ? ` at ${session.reset.atHour}:00 ${session.reset.timezone ?? 'host time'}` : ''}${session.reset.idleMinutes ? `, idle ${session.reset.idleMinutes} min` : ''} (from ${session.reset.source})`;
  const instanceRows = session.exists
    ? [
        `sessionId: ${session.sessionId}`,
        session.fresh ? `fresh: yes${session.nextResetAt ? `, next reset ${formatTime(session.nextResetAt, timeZone)}` : ''}` : paint.yellow(`stale (${session.staleReason}): the next message starts a new instance`),
      ]
    : ['no instance yet: the next message creates one'];
  instanceRows.push(`reset policy: ${resetText}`);
  instanceRows.forEach((row, i) => lines.push(`${i === instanceRows.length - 1 ? '└─' : '├─'} ${row}`));
  lines.push('');
  lines.push(paint.bold('time and delivery'));
  lines.push(`├─ queue: ${queue.mode} (${queue.sources.mode}), debounce ${queue.debounceMs} ms (${queue.sources.debounceMs}), cap ${queue.cap} (${queue.sources.cap}), drop ${queue.dropPolicy} (${queue.sources.dropPolicy})`);
  lines.push(`├─ replies: ${send.decision === 'allow' ? paint.green('allowed') : paint.red('denied')} (${send.source}${send.rule !== null ? ` rule ${send.rule}` : ''})`);
  const { delivery } = more;
  const address = (a: InstanceAndTime['delivery']['sessionAddress']) => (a ? `${a.channel} ${a.to ?? '(no target yet)'}${a.accountId !== undefined ? ` (account ${a.accountId})` : ''}${a.threadId ? ` thread ${a.threadId}` : ''}` : 'nowhere (no peer, no session address)');
  lines.push(`├─ reply to: ${address(delivery.reply)}${delivery.replySource === 'session' ? ' (the session\'s address)' : ''}`);
  lines.push(`└─ session address: ${address(delivery.sessionAddress)} — ${delivery.movesSessionAddress ? 'moved by this message' : 'kept'}: ${delivery.why}`);
  if (warnings.length > 0) {
    lines.push('');
    for (const warning of warnings) lines.push(`${paint.yellow('warning:')} ${warning}`);
  }
  return `${lines.join('\n')}\n`;
}
