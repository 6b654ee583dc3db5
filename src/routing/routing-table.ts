// Compiles a config into a RoutingTable once per load: agents, the fallback owner, identity
// links and the binding index keyed by channel → tier → id, so resolution cost does not grow
// with the number of bindings.

import { SwitchboardError, normalizeAccountId, normalizeAgentId } from '../core/index.js';
import type { Binding, BindingMatch, DmScope, GroupScope, PeerKind, SwitchboardConfig } from '../config/types.js';
import { configGeneration, type ConfigGeneration } from '../config/index.js';
import { buildBindingIndex, type BindingIndex } from './binding-index.js';
import { normalizePeerKind } from './normalize.js';
import { channelSectionBindings, entriesRoster, listRoster, namedListAgents, type AgentInfo, type OwnerSource } from './roster.js';
import { compileIdentityLinks, normalizeMainKey, type IdentityLinkTable } from './session-key.js';

export type { AgentInfo, OwnerSource } from './roster.js';

/** `direct` peers only match `direct`; `group` and `channel` match each other. */
export type PeerClass = 'direct' | 'group';

export function peerClassOf(kind: PeerKind): PeerClass {
  return kind === 'direct' ? 'direct' : 'group';
}

/**
 * Whose a matched message is and with which session scope: what a route needs of its binding.
 * One object per distinct combination, shared by every binding that has it (a config names a few
 * agents, and has thousands of bindings): a route reads it without touching the binding itself,
 * which in a large table is one cache miss more per matched message.
 */
export interface RouteTarget {
  agentId: string;
  /** A blank agentId (agents.entries configs): the binding routes to the fallback owner, if any. */
  usesOwner: boolean;
  /** The binding's own session scope (agents.entries configs), winning over the global one. */
  session?: { dmScope?: DmScope; groupScope?: GroupScope };
}

export interface CompiledBinding {
  /** Position in the config's `bindings` array (what `route explain` shows). */
  index: number;
  /** Whose the message is (shared with the bindings that have the same agent and scope). */
  target: RouteTarget;
  channel: string;
  /** Normalised account, `default` when omitted, or `*`. */
  accountPattern: string;
  peer?: { kind: PeerKind; peerClass: PeerClass; id: string; wildcard: boolean };
  guildId?: string;
  teamId?: string;
  roles: readonly string[];
  match: BindingMatch;
  incognito: boolean;
  /** Set for a binding OpenClaw adds for a `channels.<id>` section: that section's key. */
  section?: string;
  /** The tier this binding competes in first (1 for exact peers, which also compete in 2). */
  tier: number;
}

export interface RoutingTable {
  /** Which OpenClaw config generation the rules come from (the file's shape decides). */
  generation: ConfigGeneration;
  agents: AgentInfo[];
  /** The agent of the `default` tier; undefined when nobody owns unclaimed messages (they are refused). */
  owner?: string;
  ownerSource?: OwnerSource;
  /** The agent commands use when none is named: the owner, else the first agent of the roster. */
  defaultAgentId: string;
  dmScope: DmScope;
  groupScope: GroupScope;
  mainKey: string;
  identityLinks: IdentityLinkTable;
  bindings: CompiledBinding[];
  /** channel → tier → key → the candidate bindings in config order. */
  index: BindingIndex;
  warnings: string[];
}

const DM_SCOPES: readonly DmScope[] = ['main', 'per-peer', 'per-channel-peer', 'per-account-channel-peer'];

function text(value: unknown): string | undefined {
  if (typeof value === 'string') return value.trim() || undefined;
  if (typeof value === 'number' && Number.isFinite(value)) return String(value);
  return undefined;
}

function accountPatternOf(raw: unknown): string {
  const trimmed = typeof raw === 'string' ? raw.trim() : '';
  return trimmed === '*' ? '*' : normalizeAccountId(trimmed);
}

/** Shared by every binding without roles (most of them): one array instead of one per binding. */
const NO_ROLES: readonly string[] = Object.freeze([]);

function tierOf(binding: Pick<CompiledBinding, 'peer' | 'guildId' | 'roles' | 'teamId' | 'accountPattern'>): number {
  if (binding.peer) return binding.peer.wildcard ? 3 : 1;
  if (binding.guildId) return binding.roles.length > 0 ? 4 : 5;
  if (binding.teamId) return 6;
  return binding.accountPattern === '*' ? 8 : 7;
}

/** What the caller knows about a binding beyond its match: whose it is and where it came from. */
type BindingOrigin = Pick<CompiledBinding, 'index' | 'section'> & RouteTarget;

/**
 * Returns the compiled binding, or undefined (with a warning) for a binding that can never match.
 * Built as one object literal (fields always in the same order): with 10 000 bindings, copying
 * partial objects with spreads was most of the time a large config took to load.
 */
function compileBinding(raw: Binding, origin: BindingOrigin, targets: Map<string, RouteTarget>, warnings: string[]): CompiledBinding | undefined {
  const { index } = origin;
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
  // Role ids are compared exactly as written, as OpenClaw does (no trimming, a blank id is still
  // a constraint): trimming here made " r1" match members with role "r1", and dropping a blank id
  // turned a roles binding into a guild-wide one.
  const roles = Array.isArray(match.roles) && match.roles.length > 0 ? match.roles.map((role) => (typeof role === 'number' ? String(role) : role)).filter((role): role is string => typeof role === 'string') : NO_ROLES;
  const binding: CompiledBinding = {
    index,
    target: targetOf(targets, origin),
    channel,
    accountPattern: accountPatternOf(match.accountId),
    peer,
    guildId: text(match.guildId),
    teamId: text(match.teamId),
    roles,
    match,
    incognito: raw.incognito === true,
    section: origin.section,
    tier: 0,
  };
  binding.tier = tierOf(binding);
  return binding;
}

/** The shared RouteTarget of a binding's origin (made on first use). */
function targetOf(targets: Map<string, RouteTarget>, origin: BindingOrigin): RouteTarget {
  const key = `${origin.agentId}\u0000${origin.usesOwner}\u0000${origin.session?.dmScope}\u0000${origin.session?.groupScope}`;
  let target = targets.get(key);
  if (target === undefined) targets.set(key, (target = { agentId: origin.agentId, usesOwner: origin.usesOwner, session: origin.session }));
  return target;
}

const GROUP_SCOPES: readonly GroupScope[] = ['per-group', 'main'];

function bindingSession(raw: Binding): RouteTarget['session'] {
  const session = raw.session;
  if (!session || typeof session !== 'object') return undefined;
  const out: NonNullable<RouteTarget['session']> = {};
  if (DM_SCOPES.includes(session.dmScope as DmScope)) out.dmScope = session.dmScope;
  if (GROUP_SCOPES.includes(session.groupScope as GroupScope)) out.groupScope = session.groupScope;
  return out.dmScope || out.groupScope ? out : undefined;
}

function unknownAgent(path: string, raw: unknown, rosterName: string, known: Iterable<string>): SwitchboardError {
  return new SwitchboardError('CONFIG_INVALID', `${path}: agent "${String(raw)}" is not in ${rosterName} (known agents: ${[...known].join(', ')})`, {
    details: { path },
    hint: `add the agent to ${rosterName} or fix the binding`,
  });
}

/**
 * Builds the routing table. A binding to an agent the roster does not define is CONFIG_INVALID.
 * `loadWarnings` (the loaded config's own) come first in the table's warnings.
 * `agents.list` configs route as OpenClaw's JSON-store releases; `agents.entries` configs as
 * OpenClaw 2026.9.6 does after loading (explicit owners, per-binding scope, groupScope, no mainKey).
 */
export function compileRoutingTable(config: SwitchboardConfig, loadWarnings: readonly string[] = []): RoutingTable {
  const generation = configGeneration(config);
  const current = generation === 'entries';
  const roster = current ? entriesRoster(config) : listRoster(config);
  // What loading the file noticed (a `${VAR}` left as written) is said wherever routing warnings are.
  const warnings = [...loadWarnings, ...roster.warnings];
  const knownAgents = new Set(roster.agents.map((agent) => agent.id));
  const namedAgents = current ? knownAgents : namedListAgents(config);
  const session = config.session ?? {};
  const dmScope: DmScope = DM_SCOPES.includes(session.dmScope as DmScope) ? (session.dmScope as DmScope) : 'main';
  const groupScope: GroupScope = current && session.groupScope === 'main' ? 'main' : 'per-group';
  if (current && typeof session.mainKey === 'string' && session.mainKey.trim() !== '' && session.mainKey.trim() !== 'main') {
    warnings.push('session.mainKey is ignored; main session is always "main" (as in OpenClaw 2026.9.6 for agents.entries configs)');
  }

  const bindings: CompiledBinding[] = [];
  const targets = new Map<string, RouteTarget>();
  const configured = Array.isArray(config.bindings) ? config.bindings : [];
  configured.forEach((raw, i) => {
    // acp bindings attach a runtime to a conversation; they never route, in either generation
    // (OpenClaw 2026.7.1 leaves them out of its route bindings as 2026.9.6 does).
    if (raw?.type === 'acp') return;
    const rawId = typeof raw?.agentId === 'string' ? raw.agentId.trim() : '';
    let agentId: string;
    let usesOwner = false;
    if (!current) {
      if (raw?.session !== undefined) {
        warnings.push(`bindings[${i}]: "session" is an OpenClaw 2026.9.6 key, honoured only with agents.entries; ignored with agents.list`);
      }
      agentId = normalizeAgentId(raw?.agentId);
      if (knownAgents.size > 0 && !knownAgents.has(agentId)) throw unknownAgent(`bindings[${i}].agentId`, raw?.agentId, 'agents.list', knownAgents);
      // A blank agentId must name a configured agent as `main` would (OpenClaw's loader checks it so),
      // but it routes to the default agent, as OpenClaw's resolver does: not to `main`. So does an
      // id only a blank-id entry defines (namedListAgents).
      if (rawId === '' || (namedAgents.size > 0 && !namedAgents.has(agentId))) {
        agentId = roster.owner!;
        usesOwner = true;
      }
    } else if (rawId === '') {
      // OpenClaw 2026.9.6: a blank agentId stands for the fallback owner, not for "main".
      agentId = roster.owner ?? '';
      usesOwner = true;
    } else {
      agentId = normalizeAgentId(rawId);
      if (!knownAgents.has(agentId) && agentId !== 'main') throw unknownAgent(`bindings[${i}].agentId`, raw.agentId, 'agents.entries', knownAgents);
    }
    const compiled = compileBinding(raw, { index: i, agentId, usesOwner, session: current ? bindingSession(raw) : undefined, section: undefined }, targets, warnings);
    if (compiled) bindings.push(compiled);
  });
  if (current) {
    channelSectionBindings(config, roster).forEach(({ binding, section }, k) => {
      const compiled = compileBinding(binding, { index: configured.length + k, agentId: binding.agentId, usesOwner: false, session: undefined, section }, targets, warnings);
      if (compiled) bindings.push(compiled);
    });
  }

  return {
    generation,
    agents: roster.agents,
    owner: roster.owner,
    ownerSource: roster.ownerSource,
    defaultAgentId: roster.owner ?? roster.agents[0]?.id ?? 'main',
    dmScope,
    groupScope,
    mainKey: current ? 'main' : normalizeMainKey(session.mainKey),
    identityLinks: compileIdentityLinks(session.identityLinks, warnings),
    bindings,
    index: buildBindingIndex(bindings),
    warnings,
  };
}
