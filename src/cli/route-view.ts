// The `route explain` tree as text: loaded only by explain, so `route resolve` (a cold-start
// target) does not load the time formatting and display-width code it never uses.

import type { SwitchboardError } from '../core/index.js';
import type { InstanceAndTime } from '../engine/index.js';
import type { RouteExplanation, RouteInput, TraceTier } from '../routing/index.js';
import { formatTime } from './format.js';
import type { Painter } from './output.js';

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
  const instanceRows = session.problem !== undefined
    ? [paint.red(`unusable entry: ${session.problem}; a message to it fails (STORE_CORRUPT) until it is fixed (see \`switchboard doctor\`)`)]
    : session.exists
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
