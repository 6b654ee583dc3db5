// Agent selection (the nine tiers) and route assembly. resolveRoute uses the binding index;
// explainRoute walks every binding of the channel with the same predicates to say why each lost.

import { SwitchboardError } from '../core/index.js';
import type { CompiledBinding, RouteTarget, RoutingTable } from './routing-table.js';
import { peerClassOf } from './routing-table.js';
import { ANY_ACCOUNT, KEY_KIND, UNKNOWN_ACCOUNT, mayHold, type ChannelIndex, type IndexNode } from './binding-index.js';
import { buildSessionKey, type SessionKeyParams } from './session-key.js';
import { isTelegramTopic } from './normalize.js';
import type { KeyDerivation, MatchedBy, Peer, ResolvedRoute, RouteInput, TraceCandidate, TraceTier } from './types.js';

interface TierRule {
  tier: number;
  matchedBy: MatchedBy;
  /** Why the tier is not considered for this input, or undefined when it is. */
  skipReason(input: RouteInput): string | undefined;
  /** The peer the binding's peer is compared with in this tier. */
  scopePeer(input: RouteInput): Peer | undefined;
  /** Whether a binding belongs to this tier at all (used by explain). */
  holds(binding: CompiledBinding): boolean;
}

const TIERS: readonly TierRule[] = [
  {
    tier: 1,
    matchedBy: 'binding.peer',
    skipReason: (input) => (input.peer ? undefined : 'no peer'),
    scopePeer: (input) => input.peer,
    holds: (binding) => binding.tier === 1,
  },
  {
    tier: 2,
    matchedBy: 'binding.peer.parent',
    skipReason: (input) => (input.parentPeer?.id ? undefined : 'no parentPeer'),
    scopePeer: (input) => input.parentPeer,
    holds: (binding) => binding.tier === 1,
  },
  {
    tier: 3,
    matchedBy: 'binding.peer.wildcard',
    skipReason: (input) => (input.peer ? undefined : 'no peer'),
    scopePeer: (input) => input.peer,
    holds: (binding) => binding.tier === 3,
  },
  {
    tier: 4,
    matchedBy: 'binding.guild+roles',
    skipReason: (input) => (!input.guildId ? 'no guildId' : input.memberRoleIds.length === 0 ? 'no memberRoleIds' : undefined),
    scopePeer: () => undefined,
    holds: (binding) => binding.tier === 4,
  },
  {
    tier: 5,
    matchedBy: 'binding.guild',
    skipReason: (input) => (input.guildId ? undefined : 'no guildId'),
    scopePeer: () => undefined,
    holds: (binding) => binding.tier === 5,
  },
  {
    tier: 6,
    matchedBy: 'binding.team',
    skipReason: (input) => (input.teamId ? undefined : 'no teamId'),
    scopePeer: () => undefined,
    holds: (binding) => binding.tier === 6,
  },
  {
    tier: 7,
    matchedBy: 'binding.account',
    skipReason: () => undefined,
    scopePeer: () => undefined,
    holds: (binding) => binding.tier === 7,
  },
  {
    tier: 8,
    matchedBy: 'binding.channel',
    skipReason: () => undefined,
    scopePeer: () => undefined,
    holds: (binding) => binding.tier === 8,
  },
];

/**
 * Which constraint not encoded in the index (guild, team, roles) a binding fails, or undefined
 * when all of them hold. Shared by the fast path and explain (which words it: constraintRejection).
 */
function failedConstraint(binding: CompiledBinding, input: RouteInput): 'guild' | 'team' | 'roles' | undefined {
  if (binding.guildId !== undefined && binding.guildId !== input.guildId) return 'guild';
  if (binding.teamId !== undefined && binding.teamId !== input.teamId) return 'team';
  if (binding.roles.length > 0 && !binding.roles.some((role) => input.memberRoleIds.includes(role))) return 'roles';
  return undefined;
}

/** Why a binding fails those constraints, in words, or undefined when all of them hold. */
function constraintRejection(binding: CompiledBinding, input: RouteInput): string | undefined {
  switch (failedConstraint(binding, input)) {
    case 'guild':
      return input.guildId ? `guild ${binding.guildId} ≠ ${input.guildId}` : `needs guild ${binding.guildId}, input has none`;
    case 'team':
      return input.teamId ? `team ${binding.teamId} ≠ ${input.teamId}` : `needs team ${binding.teamId}, input has none`;
    case 'roles':
      return `role missing (needs any of ${binding.roles.map((role) => JSON.stringify(role)).join(', ')})`;
    default:
      return undefined;
  }
}

export interface AgentSelection {
  matchedBy: MatchedBy;
  binding?: CompiledBinding;
  /** The binding's target, set with it: what the route is built from, without loading the binding. */
  target?: RouteTarget;
}

/** The node of the first binding of a chain in `tier` whose account fits (its own or `*`) and whose constraints hold. */
function scanChain(node: IndexNode | undefined, tier: number, account: number, input: RouteInput): IndexNode | undefined {
  for (; node !== undefined; node = node.next) {
    if (node.tier !== tier || (node.account !== account && node.account !== ANY_ACCOUNT)) continue;
    if (!node.constrained || failedConstraint(node.binding, input) === undefined) return node;
  }
  return undefined;
}

/** scanChain, using a crowded chain's split so only the input's account and `*` are scanned. */
function firstPassing(head: IndexNode | undefined, tier: number, account: number, input: RouteInput): IndexNode | undefined {
  if (head === undefined) return undefined;
  if (head.split === undefined) return scanChain(head, tier, account, input);
  const fromExact = account === UNKNOWN_ACCOUNT ? undefined : scanChain(head.split.get(account), tier, account, input);
  const fromWildcard = scanChain(head.split.get(ANY_ACCOUNT), tier, account, input);
  return fromExact && fromWildcard ? (fromExact.index < fromWildcard.index ? fromExact : fromWildcard) : (fromExact ?? fromWildcard);
}

function exactPeer(channel: ChannelIndex, peer: Peer): IndexNode | undefined {
  if (peer.kind === 'direct') return mayHold(channel, KEY_KIND.direct, peer.id) ? channel.peerExact.direct.get(peer.id) : undefined;
  return mayHold(channel, KEY_KIND.group, peer.id) ? channel.peerExact.group.get(peer.id) : undefined;
}

const DEFAULT_SELECTION: AgentSelection = Object.freeze({ matchedBy: 'default' });

function selected(matchedBy: MatchedBy, node: IndexNode): AgentSelection {
  return { matchedBy, binding: node.binding, target: node.target };
}

/**
 * Picks the agent: the first tier with a match wins; inside a tier, the first binding in config
 * order. Written out tier by tier, with the skip rules of TIERS (which explain walks): it runs
 * once per message, and a loop over rule objects made every call site megamorphic.
 */
export function selectAgent(table: RoutingTable, input: RouteInput): AgentSelection {
  const channel = table.index.channels.get(input.channel);
  if (channel === undefined) return DEFAULT_SELECTION;
  const account = table.index.accountCodes.get(input.accountId) ?? UNKNOWN_ACCOUNT;
  const { peer, parentPeer, guildId, teamId } = input;
  let node: IndexNode | undefined;
  if (peer !== undefined) {
    node = firstPassing(exactPeer(channel, peer), 1, account, input);
    if (node !== undefined) return selected('binding.peer', node);
  }
  if (parentPeer !== undefined && parentPeer.id) {
    node = firstPassing(exactPeer(channel, parentPeer), 1, account, input);
    if (node !== undefined) return selected('binding.peer.parent', node);
  }
  if (peer !== undefined) {
    node = firstPassing(peer.kind === 'direct' ? channel.peerWildcard.direct : channel.peerWildcard.group, 3, account, input);
    if (node !== undefined) return selected('binding.peer.wildcard', node);
  }
  if (guildId) {
    const chain = mayHold(channel, KEY_KIND.guild, guildId) ? channel.guild.get(guildId) : undefined;
    if (input.memberRoleIds.length > 0) {
      node = firstPassing(chain, 4, account, input);
      if (node !== undefined) return selected('binding.guild+roles', node);
    }
    node = firstPassing(chain, 5, account, input);
    if (node !== undefined) return selected('binding.guild', node);
  }
  if (teamId) {
    node = firstPassing(mayHold(channel, KEY_KIND.team, teamId) ? channel.team.get(teamId) : undefined, 6, account, input);
    if (node !== undefined) return selected('binding.team', node);
  }
  if (account !== UNKNOWN_ACCOUNT) {
    node = firstPassing(channel.plainByAccount.get(account), 7, account, input);
    if (node !== undefined) return selected('binding.account', node);
  }
  node = firstPassing(channel.plainWildcard, 8, account, input);
  if (node !== undefined) return selected('binding.channel', node);
  return DEFAULT_SELECTION;
}

export interface RouteResolution {
  route: ResolvedRoute;
  binding?: CompiledBinding;
  derivation: KeyDerivation;
}

/**
 * The refusal for a message nobody owns: OpenClaw 2026.9.6 will not guess an agent when several are
 * configured under explicit ownership and neither a binding nor a system agent names one.
 */
export function noOwnerError(table: RoutingTable, input: RouteInput, selection: AgentSelection, trace?: TraceTier[]): SwitchboardError {
  const where = `${input.channel} account ${input.accountId}`;
  const why = selection.binding
    ? `bindings[${selection.binding.index}] matched (${selection.matchedBy}) but has a blank agentId, which means the fallback owner`
    : 'no binding matched';
  const example = JSON.stringify({ agentId: '<agentId>', match: { channel: input.channel, accountId: input.accountId } });
  const agents = table.agents.map((agent) => agent.id).join(', ');
  return new SwitchboardError('NO_OWNER', `no agent owns ${where}: ${why}, and with several agents (${agents}) under explicit ownership there is no fallback owner`, {
    hint: `add a channel-wide binding such as ${example} (replace <agentId> with one of ${agents}), or set agents.defaults.systemAgent.agentId`,
    details: { channel: input.channel, accountId: input.accountId, agents: table.agents.map((agent) => agent.id), ...(trace ? { trace } : {}) },
  });
}

/**
 * What the session key of a selection is built from: its agent and session scope with the input's
 * conversation. NO_OWNER when nobody owns the message.
 */
export function keyParamsFor(table: RoutingTable, input: RouteInput, selection: AgentSelection): SessionKeyParams {
  const target = selection.target;
  const agentId = target && !target.usesOwner ? target.agentId : table.owner;
  if (agentId === undefined) throw noOwnerError(table, input, selection);
  // The matched binding's own scope wins; the default tier has no binding and uses the global one.
  const current = table.generation === 'entries';
  return {
    agentId,
    channel: input.channel,
    accountId: input.accountId,
    peer: input.peer,
    dmScope: target?.session?.dmScope ?? table.dmScope,
    groupScope: current ? (target?.session?.groupScope ?? table.groupScope) : undefined,
    mainKey: table.mainKey,
    identityLinks: table.identityLinks,
    threadId: isTelegramTopic(input) ? undefined : input.threadId,
  };
}

/** Assembles the ResolvedRoute for a selection: agent, then the key from the session policy. */
export function routeFor(table: RoutingTable, input: RouteInput, selection: AgentSelection): RouteResolution {
  const params = keyParamsFor(table, input, selection);
  const { sessionKey, mainSessionKey, derivation } = buildSessionKey(params);
  return {
    route: {
      agentId: params.agentId,
      channel: input.channel,
      accountId: input.accountId,
      dmScope: params.dmScope,
      sessionKey,
      mainSessionKey,
      lastRoutePolicy: sessionKey === mainSessionKey ? 'main' : 'session',
      matchedBy: selection.matchedBy,
    },
    binding: selection.binding,
    derivation,
  };
}

export function resolveRoute(table: RoutingTable, input: RouteInput): RouteResolution {
  return routeFor(table, input, selectAgent(table, input));
}

/** Full rejection reason of one binding in one tier, including what the index already filtered. */
function candidateRejection(binding: CompiledBinding, rule: TierRule, input: RouteInput): string | undefined {
  if (binding.accountPattern !== '*' && binding.accountPattern !== input.accountId) {
    return `account ${binding.accountPattern} ≠ ${input.accountId}`;
  }
  if (binding.peer) {
    const peer = rule.scopePeer(input)!;
    const label = rule.tier === 2 ? 'parent peer' : 'peer';
    if (binding.peer.peerClass !== peerClassOf(peer.kind)) return `${label} kind ${binding.peer.kind} ≠ ${peer.kind}`;
    if (!binding.peer.wildcard && binding.peer.id !== peer.id) return `${label} id ${binding.peer.id} ≠ ${peer.id}`;
  }
  return constraintRejection(binding, input);
}

/** How a binding appears in the trace: added section bindings say which `channels` key added them. */
function candidateOf(binding: CompiledBinding): Pick<TraceCandidate, 'index' | 'agentId' | 'match' | 'origin'> {
  return { index: binding.index, agentId: binding.target.agentId, match: binding.match, ...(binding.section !== undefined ? { origin: `channels.${binding.section}` } : {}) };
}

export interface RouteExplanation extends RouteResolution {
  trace: TraceTier[];
}

/** Resolves like resolveRoute, recording every tier and every candidate binding of the channel. */
export function explainRoute(table: RoutingTable, input: RouteInput): RouteExplanation {
  const channelBindings = table.bindings.filter((binding) => binding.channel === input.channel);
  const trace: TraceTier[] = [];
  let winner: AgentSelection | undefined;
  for (const rule of TIERS) {
    const entry: TraceTier = { tier: rule.tier, matchedBy: rule.matchedBy, candidates: [] };
    const tierBindings = channelBindings.filter((binding) => rule.holds(binding));
    const skip = winner ? `not reached (${winner.matchedBy} matched)` : rule.skipReason(input);
    if (skip !== undefined) {
      entry.skipped = skip;
      entry.candidates = tierBindings.map((b) => ({ ...candidateOf(b), result: 'not-reached' }));
    } else {
      for (const binding of tierBindings) {
        const candidate: TraceCandidate = { ...candidateOf(binding), result: 'not-reached' };
        if (!winner) {
          const reason = candidateRejection(binding, rule, input);
          if (reason === undefined) {
            candidate.result = 'matched';
            winner = { matchedBy: rule.matchedBy, binding, target: binding.target };
          } else {
            candidate.result = 'rejected';
            candidate.reason = reason;
          }
        } else {
          candidate.reason = `binding ${winner.binding!.index} came first in config order`;
        }
        entry.candidates.push(candidate);
      }
    }
    trace.push(entry);
  }
  const selection = winner ?? { matchedBy: 'default' as const };
  trace.push({
    tier: 9,
    matchedBy: 'default',
    ...(winner ? { skipped: `not reached (${winner.matchedBy} matched)` } : {}),
    candidates: [],
  });
  // No owner: the trace is the answer to "why", so it travels with the refusal.
  if ((selection.binding === undefined || selection.binding.target.usesOwner) && table.owner === undefined) throw noOwnerError(table, input, selection, trace);
  return { ...routeFor(table, input, selection), trace };
}
