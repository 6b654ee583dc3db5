// Compiles a config into a RoutingTable once per load: agents, the default agent, identity
// links and the binding index keyed by channel → account → tier bucket, so resolution cost
// does not grow with the number of bindings.

import { SwitchboardError, normalizeAccountId, normalizeAgentId } from '../core/index.js';
import type { Binding, BindingMatch, DmScope, PeerKind, SwitchboardConfig } from '../config/types.js';
import { normalizePeerKind } from './normalize.js';
import { compileIdentityLinks, normalizeMainKey, type IdentityLinkTable } from './session-key.js';

/** `direct` peers only match `direct`; `group` and `channel` match each other. */
export type PeerClass = 'direct' | 'group';

export function peerClassOf(kind: PeerKind): PeerClass {
  return kind === 'direct' ? 'direct' : 'group';
}

export interface CompiledBinding {
  /** Position in the config's `bindings` array (what `route explain` shows). */
  index: number;
  agentId: string;
  channel: string;
  /** Normalised account, `default` when omitted, or `*`. */
  accountPattern: string;
  peer?: { kind: PeerKind; peerClass: PeerClass; id: string; wildcard: boolean };
  guildId?: string;
  teamId?: string;
  roles: string[];
  match: BindingMatch;
  incognito: boolean;
  /** The tier this binding competes in first (1 for exact peers, which also compete in 2). */
  tier: number;
}

/** Bindings of one channel and one account pattern, split by the tier they compete in. */
export interface AccountBucket {
  /** Exact peers by class, then id: the input's id string is looked up as is (no key to build). */
  peerExact: { direct: Map<string, CompiledBinding[]>; group: Map<string, CompiledBinding[]> };
  peerWildcard: Map<PeerClass, CompiledBinding[]>;
  guildWithRoles: Map<string, CompiledBinding[]>;
  guildOnly: Map<string, CompiledBinding[]>;
  team: Map<string, CompiledBinding[]>;
  plain: CompiledBinding[];
}

export interface AgentInfo {
  id: string;
  configIndex: number;
  isDefault: boolean;
}

export interface RoutingTable {
  agents: AgentInfo[];
  defaultAgentId: string;
  dmScope: DmScope;
  mainKey: string;
  identityLinks: IdentityLinkTable;
  bindings: CompiledBinding[];
  /** channel → account pattern → bucket. */
  index: Map<string, Map<string, AccountBucket>>;
  warnings: string[];
}

const DM_SCOPES: readonly DmScope[] = ['main', 'per-peer', 'per-channel-peer', 'per-account-channel-peer'];

function newBucket(): AccountBucket {
  return { peerExact: { direct: new Map(), group: new Map() }, peerWildcard: new Map(), guildWithRoles: new Map(), guildOnly: new Map(), team: new Map(), plain: [] };
}

function pushTo<K>(map: Map<K, CompiledBinding[]>, key: K, binding: CompiledBinding): void {
  const list = map.get(key);
  if (list) list.push(binding);
  else map.set(key, [binding]);
}

function text(value: unknown): string | undefined {
  if (typeof value === 'string') return value.trim() || undefined;
  if (typeof value === 'number' && Number.isFinite(value)) return String(value);
  return undefined;
}

function accountPatternOf(raw: unknown): string {
  const trimmed = typeof raw === 'string' ? raw.trim() : '';
  return trimmed === '*' ? '*' : normalizeAccountId(trimmed);
}

function tierOf(binding: Omit<CompiledBinding, 'tier'>): number {
  if (binding.peer) return binding.peer.wildcard ? 3 : 1;
  if (binding.guildId) return binding.roles.length > 0 ? 4 : 5;
  if (binding.teamId) return 6;
  return binding.accountPattern === '*' ? 8 : 7;
}

/** Returns the compiled binding, or undefined (with a warning) for a binding that can never match. */
function compileBinding(raw: Binding, index: number, warnings: string[]): CompiledBinding | undefined {
  const match = raw.match ?? {};
  const channel = text(match.channel)?.toLowerCase();
  if (!channel) {
    warnings.push(`bindings[${index}] has no match.channel and is ignored`);
    return undefined;
  }
  let peer: CompiledBinding['peer'];
  if (match.peer !== undefined && match.peer !== null) {
    const kind = normalizePeerKind(match.peer.kind);
    const id = text(match.peer.id);
    if (!kind || !id) {
      warnings.push(`bindings[${index}].match.peer needs a kind (direct|group|channel) and an id; the binding is ignored`);
      return undefined;
    }
    peer = { kind, peerClass: peerClassOf(kind), id, wildcard: id === '*' };
  }
  const roles = Array.isArray(match.roles) ? match.roles.map((role) => text(role)).filter((role): role is string => !!role) : [];
  const partial = {
    index,
    agentId: normalizeAgentId(raw.agentId),
    channel,
    accountPattern: accountPatternOf(match.accountId),
    peer,
    guildId: text(match.guildId),
    teamId: text(match.teamId),
    roles,
    match,
    incognito: raw.incognito === true,
  };
  return { ...partial, tier: tierOf(partial) };
}

function indexBinding(bucket: AccountBucket, binding: CompiledBinding): void {
  switch (binding.tier) {
    case 1:
      pushTo(bucket.peerExact[binding.peer!.peerClass], binding.peer!.id, binding);
      break;
    case 3:
      pushTo(bucket.peerWildcard, binding.peer!.peerClass, binding);
      break;
    case 4:
      pushTo(bucket.guildWithRoles, binding.guildId!, binding);
      break;
    case 5:
      pushTo(bucket.guildOnly, binding.guildId!, binding);
      break;
    case 6:
      pushTo(bucket.team, binding.teamId!, binding);
      break;
    default:
      bucket.plain.push(binding);
  }
}

/** Builds the routing table; a binding to an agent missing from a non-empty agents.list is CONFIG_INVALID. */
export function compileRoutingTable(config: SwitchboardConfig): RoutingTable {
  const warnings: string[] = [];
  const list = Array.isArray(config.agents?.list) ? config.agents!.list : [];
  const agents: AgentInfo[] = list.map((agent, configIndex) => ({
    id: normalizeAgentId(agent?.id),
    configIndex,
    isDefault: agent?.default === true,
  }));
  const explicitDefault = agents.find((agent) => agent.isDefault);
  const defaultAgentId = explicitDefault?.id ?? agents[0]?.id ?? 'main';
  if (agents.length > 1 && !explicitDefault) {
    warnings.push(`several agents (${agents.map((a) => a.id).join(', ')}) and none marked default: "${defaultAgentId}" (the first) is used`);
  }
  const knownAgents = new Set(agents.map((agent) => agent.id));

  const session = config.session ?? {};
  const dmScope: DmScope = DM_SCOPES.includes(session.dmScope as DmScope) ? (session.dmScope as DmScope) : 'main';

  const bindings: CompiledBinding[] = [];
  const index = new Map<string, Map<string, AccountBucket>>();
  (config.bindings ?? []).forEach((raw, i) => {
    const binding = compileBinding(raw, i, warnings);
    if (!binding) return;
    if (knownAgents.size > 0 && !knownAgents.has(binding.agentId)) {
      throw new SwitchboardError(
        'CONFIG_INVALID',
        `bindings[${i}].agentId: agent "${raw.agentId}" is not in agents.list (known agents: ${[...knownAgents].join(', ')})`,
        { details: { path: `bindings[${i}].agentId` }, hint: 'add the agent to agents.list or fix the binding' },
      );
    }
    bindings.push(binding);
    let byAccount = index.get(binding.channel);
    if (!byAccount) index.set(binding.channel, (byAccount = new Map()));
    let bucket = byAccount.get(binding.accountPattern);
    if (!bucket) byAccount.set(binding.accountPattern, (bucket = newBucket()));
    indexBinding(bucket, binding);
  });

  return {
    agents,
    defaultAgentId,
    dmScope,
    mainKey: normalizeMainKey(session.mainKey),
    identityLinks: compileIdentityLinks(session.identityLinks),
    bindings,
    index,
    warnings,
  };
}
